// DPDK telemetry endpoints (read with dpdk-telemetry.py -f PREFIX):
//   /stormgate/stats  packet, LTP and drop counters summed over the engines
//   /stormgate/links  per peer: next hop, resolved MAC, DATA chunks received
//   /stormgate/rounds job progress: rounds, round time, early closes, bubbles, exactness
//   /stormgate/policy the policy in force: version, one tree per shard, multipath splits
// Callbacks run on DPDK's telemetry thread and only read counters.
#pragma once

namespace sg::ctl {

class Gateway;

// Registers the endpoints on first call; `gw` (or null at shutdown) is what they report on.
void telemetry_attach(const Gateway* gw);

}  // namespace sg::ctl
