// Two gateways in one process, joined by `lanes` net_ring port pairs, running the real job
// (Engine -> GatewayHandler -> JobRunner -> lib/sync -> LtpTx) for a few rounds while one
// thread polls both: the product path end to end, with no second CPU's noise in the figure.
// Each lane may be a shaped WAN link (ShapedLinks at the receiver) or a bare ring (the
// dataplane's own speed is then the bottleneck). Used by bench_spray and bench_seal.
#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "crypto/peer_sessions.h"
#include "spray/sprayer.h"

namespace sg::dp {

inline constexpr int kPairMaxLanes = 4;
inline constexpr int kPairMaxQueues = 4;

struct PairOptions {
  int lanes = 1;
  int queues = 1;                       // TX queues per port, an engine each
  std::vector<double> lane_mbit;        // per lane; empty: unshaped rings
  double delay_us = 0;                  // one way, every shaped lane
  uint32_t chunk_bytes = 1344;
  // Sealing (null: plain). Each site gets its own sessions from it (self and peers filled in).
  std::optional<crypto::PeerSecurity> security;
  // Called with each site's sprayer before the first round.
  std::function<void(spray::Sprayer&, uint16_t peer, int lanes)> spray_setup;
  // Junk frames (tests/support/junk_flood.h: random bytes, unsealed, forged tags, unknown
  // sources) injected into the first gateway per frame it received from its peer; 0: none.
  double flood_per_frame = 0;
};

struct PairResult {
  double gbps = 0;        // model bytes synchronised per second, rounds after the first
  double secs = 0;        // timed rounds' wall time
  uint64_t packets = 0;   // frames both gateways received during the whole run
  bool ok = false;        // every round finished in time (no round timeout)
  uint64_t inexact = 0;   // result values off the exact mean
  bool pool_full = false;
  uint64_t shaper_drops = 0;
  uint64_t data_tx = 0, retransmits = 0, opened = 0, auth_refused = 0;
  uint64_t junk = 0;        // junk frames injected
  uint64_t junk_dropped = 0;  // frames the first gateway dropped (every junk frame must be)
  uint64_t bad_tags = 0;      // ... of them, forged tags it checked and refused (the costly kind)
};

// Builds the pair, runs `rounds` rounds of `model_bytes` (the first is warm-up), tears down.
PairResult run_gateway_pair(rte_mempool* pool, const PairOptions& o, uint64_t model_bytes, uint32_t rounds);

}  // namespace sg::dp
