#include "control/http_text_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace sg::ctl {
namespace {

constexpr int kMaxRequestsPerPoll = 4;
constexpr int kReadTimeoutMs = 50;  // a client gets at most this long to send its request line

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
  const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(d, 0));
}

}  // namespace

HttpTextServer::~HttpTextServer() {
  if (fd_ >= 0) close(fd_);
}

bool HttpTextServer::open(const std::string& host, uint16_t port, std::string& error) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    error = "not an IPv4 address: " + host;
    return false;
  }
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  const int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd_, 8) != 0) {
    error = std::strerror(errno);
    close(fd_);
    fd_ = -1;
    return false;
  }
  return true;
}

uint16_t HttpTextServer::port() const {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (fd_ < 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

void HttpTextServer::poll(std::string_view path, const std::function<std::string()>& body, int budget_ms) {
  if (fd_ < 0) return;
  const auto deadline = Clock::now() + std::chrono::milliseconds(budget_ms);
  for (int k = 0; k < kMaxRequestsPerPoll && Clock::now() < deadline; ++k) {
    const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) return;  // nothing waiting
    // The request line within a short wait; anything but GET `path` gets a 404.
    char req[1024];
    ssize_t n = 0;
    pollfd p{c, POLLIN, 0};
    if (::poll(&p, 1, std::min(kReadTimeoutMs, ms_left(deadline))) == 1) n = recv(c, req, sizeof req - 1, MSG_DONTWAIT);
    const std::string_view line(req, n > 0 ? static_cast<size_t>(n) : 0);
    const std::string want = "GET " + std::string(path);
    const bool ok = line.substr(0, want.size()) == want &&
                    (line.size() == want.size() || line[want.size()] == ' ' || line[want.size()] == '\r' ||
                     line[want.size()] == '\n' || line[want.size()] == '?');
    const std::string text = ok ? body() : "not found: GET " + std::string(path) + "\n";
    const std::string all = std::string(ok ? "HTTP/1.0 200 OK" : "HTTP/1.0 404 Not Found") +
                            "\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
                            std::to_string(text.size()) + "\r\nConnection: close\r\n\r\n" + text;
    size_t sent = 0;
    while (sent < all.size()) {
      const ssize_t w = send(c, all.data() + sent, all.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) {
        sent += static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
      const int left = ms_left(deadline);
      if (left == 0) break;
      pollfd q{c, POLLOUT, 0};
      ::poll(&q, 1, left);
    }
    if (sent == all.size())
      ++served_;
    else
      ++cut_;
    close(c);
  }
}

}  // namespace sg::ctl
