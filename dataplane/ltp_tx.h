// The dataplane's ltp::PacketSink: an LTP message from a lib/ state machine becomes one mbuf
// (Ethernet/IPv4/UDP built around it) on the route to its peer, handed to the engine's TX.
// One copy: from the sender's message buffer straight into the mbuf.
#pragma once

#include <vector>

#include "dataplane/engine.h"
#include "dataplane/gateway_handler.h"
#include "ltp/types.h"

namespace sg::dp {

class LtpTx final : public ltp::PacketSink {
 public:
  LtpTx(const std::vector<Port>& ports, const Neighbours& nbrs, const std::vector<PeerRoute>& routes, LtpCounters& c)
      : ports_(ports), nbrs_(nbrs), routes_(routes), c_(c) {}
  void bind_st(EngineIo* io) { io_ = io; }
  void send(const ltp::TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) override;

 private:
  const std::vector<Port>& ports_;
  const Neighbours& nbrs_;
  const std::vector<PeerRoute>& routes_;
  LtpCounters& c_;
  EngineIo* io_ = nullptr;
};

}  // namespace sg::dp
