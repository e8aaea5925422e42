// SelMCast receiver selection for peer-to-peer synchronisation: every site multicasts its
// update to p receivers; pick them from the global view of bandwidth and load so that as
// many updates as possible arrive within the round's time budget.
//
// Model (what "arrives in time" means):
//   * Site i's update (update_bytes) is ready `ready[i]` seconds into the round (its compute
//     load: stragglers are late).
//   * Transfers share capacity fairly: i->j runs at
//         rate = min(bw[i][j], out_cap[i] / out_degree(i), in_cap[j] / in_degree(j))
//     (bw is the measured available throughput, out/in_cap the site's WAN uplink/downlink).
//   * finish(i,j) = ready[i] + rtt[i][j]/2 + update_bytes / rate.
//   * BSP: reached if finish <= budget. SSP with staleness s: the update may be used up to s
//     rounds late, so reached if finish <= (s+1) * budget, provided the transfer keeps up
//     with one update per round (update_bytes / rate <= budget), else its backlog grows.
//   * mean p reached = (number of reached transfers) / n.
#pragma once

#include <cstdint>
#include <vector>

#include "common/rng.h"

namespace sg::topo {

struct McastInstance {
  int n = 0;
  std::vector<double> bw;       // bytes/s, [i*n+j]
  std::vector<double> rtt;      // seconds, [i*n+j]
  std::vector<double> out_cap;  // bytes/s per site
  std::vector<double> in_cap;   // bytes/s per site
  std::vector<double> ready;    // seconds into the round
  double update_bytes = 0;
  double budget_s = 0;
};

enum class SyncMode : uint8_t { kBsp, kSsp };

struct McastParams {
  int p = 4;
  SyncMode mode = SyncMode::kBsp;
  int staleness = 0;  // SSP only
  // Up to this many receivers per sender (0: exactly p): after the p, transfers are added
  // while none of them makes the selection's predicted round time longer or a reached
  // transfer miss ("more where bandwidth allows").
  int max_receivers = 0;
};

// receivers[i] = the sites i sends to (exactly min(p, n-1) of them).
using Selection = std::vector<std::vector<int>>;

struct McastScore {
  double mean_p = 0;        // reached transfers / n
  double round_time_s = 0;  // when the last selected transfer finishes (or the latest update is ready)
};

McastScore score_selection(const McastInstance& inst, const McastParams& prm, const Selection& sel);

// Greedy global selection: repeatedly adds the transfer with the earliest finish time that
// arrives in time without making any already reached transfer miss (shares shrink as degrees
// grow), up to p per sender; remaining slots take the receiver that loses the fewest
// reached transfers; then extras up to max_receivers (see McastParams). O(n^2 p * n p).
Selection select_receivers(const McastInstance& inst, const McastParams& prm);

// Baseline: p distinct receivers uniformly at random per sender.
Selection random_receivers(const McastInstance& inst, const McastParams& prm, Rng& rng);

}  // namespace sg::topo
