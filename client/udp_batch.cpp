#include "udp_batch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sg::client {

Nanos monotonic_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * kSecond + ts.tv_nsec;
}

bool resolve_ipv4(const std::string& host, uint16_t port, sockaddr_in& out, std::string& err) {
  std::memset(&out, 0, sizeof(out));
  out.sin_family = AF_INET;
  out.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &out.sin_addr) == 1) return true;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    err = "cannot resolve gateway host '" + host + "': " + gai_strerror(rc);
    return false;
  }
  out.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return true;
}

std::string to_string(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

UdpBatch::UdpBatch()
    : tx_buf_(kBatch * kMaxDatagram),
      rx_buf_(kBatch * kMaxDatagram),
      tx_len_(kBatch),
      rx_len_(kBatch),
      tx_to_(kBatch),
      rx_from_(kBatch),
      tx_has_to_(kBatch) {}

UdpBatch::~UdpBatch() {
  if (fd_ >= 0) close(fd_);
}

bool UdpBatch::open(const sockaddr_in& bind_addr, const sockaddr_in* peer, std::string& err) {
  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    err = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  // Large buffers absorb a whole burst of a paced transfer; the kernel caps them at
  // net.core.[rw]mem_max (the FORCE variants work only with CAP_NET_ADMIN).
  const int size = 8 << 20;
  if (setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) != 0)
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  if (setsockopt(fd_, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) != 0)
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  if (bind(fd_, reinterpret_cast<const sockaddr*>(&bind_addr), sizeof(bind_addr)) != 0) {
    err = "bind " + to_string(bind_addr) + ": " + std::strerror(errno);
    return false;
  }
  if (peer) {
    if (connect(fd_, reinterpret_cast<const sockaddr*>(peer), sizeof(*peer)) != 0) {
      err = "connect " + to_string(*peer) + ": " + std::strerror(errno);
      return false;
    }
    connected_ = true;
  }
  return true;
}

uint16_t UdpBatch::local_port() const {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

bool UdpBatch::queue(const sockaddr_in* to, std::span<const uint8_t> head, std::span<const uint8_t> payload,
                     size_t zeros) {
  const size_t len = head.size() + payload.size() + zeros;
  if (len > kMaxDatagram || (!to && !connected_)) return false;
  if (tx_count_ == kBatch) flush();
  if (tx_count_ == kBatch) return false;
  uint8_t* p = tx_buf_.data() + tx_count_ * kMaxDatagram;
  if (!head.empty()) std::memcpy(p, head.data(), head.size());
  if (!payload.empty()) std::memcpy(p + head.size(), payload.data(), payload.size());
  if (zeros) std::memset(p + head.size() + payload.size(), 0, zeros);
  tx_len_[tx_count_] = len;
  tx_has_to_[tx_count_] = to != nullptr;
  if (to) tx_to_[tx_count_] = *to;
  ++tx_count_;
  return true;
}

bool UdpBatch::flush() {
  mmsghdr msgs[kBatch];
  iovec iov[kBatch];
  size_t done = 0;
  int waits = 0;
  bool ok = true;
  while (done < tx_count_) {
    const size_t n = tx_count_ - done;
    for (size_t i = 0; i < n; ++i) {
      const size_t k = done + i;
      iov[i] = {tx_buf_.data() + k * kMaxDatagram, tx_len_[k]};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      if (tx_has_to_[k]) {
        msgs[i].msg_hdr.msg_name = &tx_to_[k];
        msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
      }
    }
    const int r = sendmmsg(fd_, msgs, static_cast<unsigned>(n), 0);
    if (r > 0) {
      done += static_cast<size_t>(r);
      stats_.sent += static_cast<uint64_t>(r);
      ++stats_.send_batches;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) && waits < 2) {
      ++waits;
      pollfd pfd{fd_, POLLOUT, 0};
      poll(&pfd, 1, 1);
      continue;
    }
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS) {
      errno_ = errno;
      // ECONNREFUSED from an earlier ICMP error: the datagram at the head is the one
      // reported; skip it so the rest still goes.
      if (errno_ == ECONNREFUSED) ok = false;
    }
    // Give up on the head datagram (counted) and go on with the rest.
    ++stats_.send_dropped;
    ++done;
  }
  tx_count_ = 0;
  return ok;
}

int UdpBatch::receive() {
  mmsghdr msgs[kBatch];
  iovec iov[kBatch];
  for (size_t i = 0; i < kBatch; ++i) {
    iov[i] = {rx_buf_.data() + i * kMaxDatagram, kMaxDatagram};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_name = &rx_from_[i];
    msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
  }
  int r;
  do {
    r = recvmmsg(fd_, msgs, kBatch, MSG_DONTWAIT, nullptr);
  } while (r < 0 && errno == EINTR);
  if (r < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    errno_ = errno;
    return -1;
  }
  int kept = 0;
  for (int i = 0; i < r; ++i) {
    if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
      ++stats_.truncated;
      continue;
    }
    // Compact so that the first `kept` slots are the good datagrams.
    if (kept != i) {
      std::memmove(rx_buf_.data() + kept * kMaxDatagram, rx_buf_.data() + i * kMaxDatagram, msgs[i].msg_len);
      rx_from_[kept] = rx_from_[i];
    }
    rx_len_[kept++] = msgs[i].msg_len;
  }
  stats_.received += static_cast<uint64_t>(kept);
  ++stats_.recv_batches;
  return kept;
}

bool UdpBatch::wait_readable(Nanos deadline, int also_fd) {
  const Nanos wait = deadline - monotonic_now();
  if (wait <= 0) return false;
  timespec ts{static_cast<time_t>(wait / kSecond), static_cast<long>(wait % kSecond)};
  pollfd pfd[2] = {{fd_, POLLIN, 0}, {also_fd, POLLIN, 0}};
  const int r = ppoll(pfd, also_fd >= 0 ? 2 : 1, &ts, nullptr);
  return r > 0;
}

void UdpSink::send(const ltp::TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) {
  if (route_) {
    sockaddr_in to{};
    if (!route_(ctx_, meta.peer_node, to)) {
      ++unroutable_;
      return;
    }
    sock_.queue(&to, head, payload);
    return;
  }
  sock_.queue(nullptr, head, payload);
}

}  // namespace sg::client
