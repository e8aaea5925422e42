// SelMCast's receivers as the controller chooses them (sync.mode selmcast): every site
// multicasts its update to the sites its plan's `receivers` list names.
//   selmcast   from the network the controller sees (measured link rates and RTTs, the
//              uplinks it knows or inferred) and the sites' loads (each one's update lag, from
//              its rows): at least p receivers per site, more where they cost no predicted
//              round time (topology/selmcast.h). A straggler's round leaves the others' links
//              idle; the model sees it and fills that time with extra receivers.
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
  // Each site's update lag in seconds (its load; empty or 0: ready at once).
  std::vector<double> ready;
};

Receivers choose_receivers(const topo::Network& net, const ReceiverSettings& s);

// `r` on `net` as the selection model predicts it: the round time (last selected transfer
// done, or the latest update ready) and the mean p (receivers per site that get the update).
topo::McastScore receivers_score(const topo::Network& net, const ReceiverSettings& s, const Receivers& r);

}  // namespace sg::controller
