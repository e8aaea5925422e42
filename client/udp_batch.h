// A nonblocking kernel UDP socket that sends and receives in batches (sendmmsg / recvmmsg),
// and an ltp::PacketSink that queues LTP messages into the send batch. Used by the worker
// client and by the test gateway stub; no DPDK, one thread per socket.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "ltp/types.h"

namespace sg::client {

inline constexpr size_t kMaxDatagram = 9216;
inline constexpr size_t kBatch = 64;

// Monotonic clock in ns (CLOCK_MONOTONIC), the time base given to the LTP state machines.
Nanos monotonic_now();

// "host:port" / host + port -> sockaddr_in. IPv4 literal or a name resolved with getaddrinfo.
bool resolve_ipv4(const std::string& host, uint16_t port, sockaddr_in& out, std::string& err);
std::string to_string(const sockaddr_in& a);

struct UdpStats {
  uint64_t sent = 0;
  uint64_t send_batches = 0;
  uint64_t send_dropped = 0;  // still refused after the bounded retry (socket buffer full)
  uint64_t received = 0;
  uint64_t recv_batches = 0;
  uint64_t truncated = 0;     // datagrams larger than kMaxDatagram: dropped
};

class UdpBatch {
 public:
  UdpBatch();
  ~UdpBatch();
  UdpBatch(const UdpBatch&) = delete;
  UdpBatch& operator=(const UdpBatch&) = delete;

  // Binds to bind_addr (port 0: any). If `peer` is given, connects to it, so only its
  // datagrams are received and ICMP errors (nothing listening) surface as ECONNREFUSED.
  bool open(const sockaddr_in& bind_addr, const sockaddr_in* peer, std::string& err);
  int fd() const { return fd_; }
  uint16_t local_port() const;

  // Queues one datagram (head + payload + `zeros` zero bytes) to `to` (nullptr: the
  // connected peer). Flushes first when the batch is full. False if it does not fit.
  bool queue(const sockaddr_in* to, std::span<const uint8_t> head, std::span<const uint8_t> payload, size_t zeros = 0);
  // Sends everything queued; a full socket buffer is waited out for at most ~2 ms, then the
  // rest is dropped and counted (LTP retransmits). Returns false on a hard socket error
  // (errno kept in last_errno()).
  bool flush();

  // Receives up to kBatch datagrams without blocking. Returns the count (0: none; -1: hard
  // error such as ECONNREFUSED, see last_errno()). Datagram i is data(i), from from(i).
  int receive();
  std::span<const uint8_t> data(int i) const { return {rx_buf_.data() + i * kMaxDatagram, rx_len_[i]}; }
  std::span<uint8_t> data(int i) { return {rx_buf_.data() + i * kMaxDatagram, rx_len_[i]}; }  // opened in place
  const sockaddr_in& from(int i) const { return rx_from_[i]; }

  // Waits until readable (or `also_fd`, when >= 0, is) or `deadline` (monotonic ns) passes.
  // True if something is readable.
  bool wait_readable(Nanos deadline, int also_fd = -1);

  int last_errno() const { return errno_; }
  const UdpStats& stats() const { return stats_; }

 private:
  int fd_ = -1;
  int errno_ = 0;
  bool connected_ = false;
  std::vector<uint8_t> tx_buf_, rx_buf_;
  std::vector<size_t> tx_len_, rx_len_;
  std::vector<sockaddr_in> tx_to_, rx_from_;
  std::vector<uint8_t> tx_has_to_;
  size_t tx_count_ = 0;
  UdpStats stats_;
};

// ltp::PacketSink onto a UdpBatch: every message goes to the connected peer, or to the
// address the `route` callback gives for TxMeta::peer_node (false: no address, dropped).
class UdpSink final : public ltp::PacketSink {
 public:
  using Route = bool (*)(void* ctx, uint16_t node, sockaddr_in& out);
  explicit UdpSink(UdpBatch& sock, Route route = nullptr, void* ctx = nullptr) : sock_(sock), route_(route), ctx_(ctx) {}
  void send(const ltp::TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) override;
  uint64_t unroutable() const { return unroutable_; }

 private:
  UdpBatch& sock_;
  Route route_;
  void* ctx_;
  uint64_t unroutable_ = 0;
};

}  // namespace sg::client
