// SelMCast's peer-to-peer mode in the WAN simulator: every site runs sync::PeerSync (the code
// a gateway would run) over lib/sim's links; the selection comes from what the sites measured
// in a warm-up that sends over each link alone (each sender's delivery rate and RTT, and how
// late each site's update was ready), never from the simulated links' true rates.
#pragma once

#include <cstdint>

namespace sg::bench {

struct PeerSimResult {
  double sel_round_s = 0, rnd_round_s = 0;  // mean time per round, SelMCast vs random
  double sel_mean_p = 0, rnd_mean_p = 0;    // updates mixed per site and round
  // SelMCast blind to the sites' loads (every update taken as ready at once).
  double blind_round_s = 0, blind_mean_p = 0;
};

// n sites, p receivers per sender (SelMCast may add more), staleness s (0: BSP); `rounds`
// per selection, the three selections (SelMCast, random, SelMCast blind to loads)
// alternated `alternations` times on the same WAN.
// One site computes `straggler` times longer than its draw.
PeerSimResult run_peer_sim(int n, int p, uint32_t staleness, int rounds, int alternations, uint64_t seed,
                           double straggler = 3);

}  // namespace sg::bench
