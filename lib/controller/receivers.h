// SelMCast's receivers as the controller chooses them (sync.mode selmcast): every site
// multicasts its update to the sites its plan's `receivers` list names.
//   selmcast   from the network the controller sees (measured link rates and RTTs, the
//              uplinks it knows or inferred): at least p receivers per site, more where they
//              cost no predicted round time (topology/selmcast.h).
//   random     exactly p per site, drawn once from a seed every site shares (the baseline).
//   broadcast  every other site.
// Deterministic for its inputs, so every site computes the same initial selection alone.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.h"
#include "topology/network.h"
#include "topology/selmcast.h"

namespace sg::controller {

using Receivers = std::vector<std::vector<topo::SiteId>>;

struct ReceiverSettings {
  config::ReceiverChoice choice = config::ReceiverChoice::kSelmcast;
  int p = 2;
  int staleness = 0;
  double update_bytes = 0;  // one site's update (the job's model bytes)
  uint64_t seed = 1;        // random: shared by every site (the job id)
};

Receivers choose_receivers(const topo::Network& net, const ReceiverSettings& s);

// Predicted round time of `r` on `net` (the selection model's: last selected transfer done).
double receivers_round_time(const topo::Network& net, const ReceiverSettings& s, const Receivers& r);

}  // namespace sg::controller
