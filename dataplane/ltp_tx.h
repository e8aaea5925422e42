// The dataplane's ltp::PacketSink: an LTP message from a lib/ state machine becomes one mbuf
// (Ethernet/IPv4/UDP built around it) on the route to its peer, handed to the engine's TX.
// One copy: from the sender's message buffer straight into the mbuf.
#pragma once

#include <vector>

#include <rte_ether.h>

#include "dataplane/engine.h"
#include "dataplane/gateway_handler.h"
#include "ltp/types.h"

namespace sg::dp {

// A local training worker, learned from its own packets (engine 0 only writes and reads it).
struct WorkerAddr {
  bool valid = false;
  uint32_t ipv4 = 0;
  uint16_t udp_port = 0;
  uint16_t port_index = 0;
  rte_ether_addr mac{};
};

class LtpTx final : public ltp::PacketSink {
 public:
  LtpTx(const std::vector<Port>& ports, const Neighbours& nbrs, const std::vector<PeerRoute>& routes, LtpCounters& c)
      : ports_(ports), nbrs_(nbrs), routes_(routes), c_(c) {}
  void bind_st(EngineIo* io) { io_ = io; }
  // Worker node ids are kWorkerNodeBase + index; results go back where pushes came from.
  void set_workers(uint32_t n, uint16_t ltp_port) {
    workers_.assign(n, WorkerAddr{});
    ltp_port_ = ltp_port;
  }
  void learn_worker_st(uint16_t node, const WorkerAddr& a);
  void send(const ltp::TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) override;

 private:
  const std::vector<Port>& ports_;
  const Neighbours& nbrs_;
  const std::vector<PeerRoute>& routes_;
  LtpCounters& c_;
  EngineIo* io_ = nullptr;
  std::vector<WorkerAddr> workers_;
  uint16_t ltp_port_ = 7400;
};

}  // namespace sg::dp
