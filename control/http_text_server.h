// A minimal HTTP/1.0 server for one text document (the Prometheus endpoint), polled from the
// control thread: a non-blocking listening socket, no thread of its own. Whatever clients do
// (connect and send nothing, never read the answer, flood connections), one poll() returns
// within its time budget: a client that has not sent its request line, or not taken the whole
// answer, by then is cut off (counted).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace sg::ctl {

class HttpTextServer {
 public:
  HttpTextServer() = default;
  ~HttpTextServer();
  HttpTextServer(const HttpTextServer&) = delete;
  HttpTextServer& operator=(const HttpTextServer&) = delete;

  // Listens on host:port (port 0: any free one, see port()). False with a message.
  bool open(const std::string& host, uint16_t port, std::string& error);
  uint16_t port() const;
  // Answers what is waiting: GET `path` with body() (made once per request), anything else
  // with 404. At most a few requests, and at most budget_ms in all.
  void poll(std::string_view path, const std::function<std::string()>& body, int budget_ms = 100);

  uint64_t served() const { return served_; }  // answers sent whole
  uint64_t cut() const { return cut_; }        // connections closed at the budget's end

 private:
  int fd_ = -1;
  uint64_t served_ = 0, cut_ = 0;
};

}  // namespace sg::ctl
