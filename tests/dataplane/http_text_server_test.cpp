// The Prometheus endpoint's HTTP server (control/http_text_server.h): it answers GET of its
// path and 404s the rest, and a client that never reads its answer, or never sends a request,
// cannot hold the control thread past the poll's budget.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "control/http_text_server.h"

namespace sg::ctl {
namespace {

int connect_to(uint16_t port, int rcvbuf = 0) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (rcvbuf) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

std::string read_all(int fd) {
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

void send_line(int fd, const std::string& s) { ASSERT_EQ(send(fd, s.data(), s.size(), 0), static_cast<ssize_t>(s.size())); }

TEST(HttpTextServer, AnswersItsPathAnd404sTheRest) {
  HttpTextServer srv;
  std::string err;
  ASSERT_TRUE(srv.open("127.0.0.1", 0, err)) << err;
  ASSERT_NE(srv.port(), 0);
  int made = 0;
  const auto body = [&] {
    ++made;
    return std::string("stormgate_up 1\n");
  };
  for (const char* req : {"GET /metrics HTTP/1.0\r\n\r\n", "GET /metricsfoo HTTP/1.0\r\n\r\n", "POST /metrics\r\n\r\n"}) {
    const int c = connect_to(srv.port());
    send_line(c, req);
    srv.poll("/metrics", body);
    const std::string got = read_all(c);
    close(c);
    if (std::string(req).rfind("GET /metrics ", 0) == 0) {
      EXPECT_EQ(got.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << got;
      EXPECT_NE(got.find("Content-Length: 15\r\n"), std::string::npos) << got;
      EXPECT_EQ(got.substr(got.size() - 15), "stormgate_up 1\n");
    } else {
      EXPECT_EQ(got.rfind("HTTP/1.0 404 Not Found\r\n", 0), 0u) << req << ": " << got;
    }
  }
  EXPECT_EQ(made, 1) << "the body is made only for its own path";
  EXPECT_EQ(srv.served(), 3u);
  EXPECT_EQ(srv.cut(), 0u);
}

TEST(HttpTextServer, ClientsThatNeverReadOrNeverAskAreCutAtTheBudget) {
  HttpTextServer srv;
  std::string err;
  ASSERT_TRUE(srv.open("127.0.0.1", 0, err)) << err;
  // Four clients ask and never read an answer far larger than the sockets' buffers; a fifth
  // connects and never asks. Each poll must end (the test's own timeout is the hang check)
  // and cut the clients it could not serve.
  const std::string big(64 << 20, 'x');
  int clients[5];
  for (int i = 0; i < 4; ++i) {
    clients[i] = connect_to(srv.port(), 4096);
    send_line(clients[i], "GET /metrics HTTP/1.0\r\n\r\n");
  }
  clients[4] = connect_to(srv.port());
  // (A poll descheduled past its budget before it accepts anything does nothing: hence loops.)
  for (int round = 0; round < 100 && srv.cut() < 4; ++round) srv.poll("/metrics", [&] { return big; }, 50);
  EXPECT_EQ(srv.cut(), 4u) << "each reader that never read was cut, not waited for";
  EXPECT_EQ(srv.served(), 0u);
  // The silent one gets a 404 it never asked for, once its request line's wait is over.
  for (int round = 0; round < 100 && srv.served() + srv.cut() < 5; ++round) srv.poll("/metrics", [&] { return big; }, 50);
  EXPECT_EQ(srv.served(), 1u);
  EXPECT_EQ(srv.cut(), 4u);
  for (int c : clients) close(c);
}

}  // namespace
}  // namespace sg::ctl
