// Runs synchronisation rounds of a set of participants on a Wan: every site begins the round
// at the same virtual time (a BSP barrier), the round ends when the last site is done.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sim/participants.h"
#include "sim/wan.h"

namespace sg::sim {

struct RoundResult {
  bool ok = false;          // every site finished within the limit
  double seconds = 0;       // virtual: last site's finish - start
  Nanos start = 0, end = 0;
  ParticipantStats stats;   // summed over sites, this round only
};

class Cluster {
 public:
  // Participant i runs at site i (node id i+1); nullptr = a dead site.
  Cluster(Wan& wan, std::vector<std::unique_ptr<Participant>> sites);

  // Every live site contributes `locals[i]` (or locals[0] for all if only one is given).
  RoundResult run_round(uint32_t round, const std::vector<std::span<const float>>& locals, Nanos limit);

  Participant* site(int i) { return sites_[i].get(); }
  int size() const { return static_cast<int>(sites_.size()); }
  Wan& wan() { return wan_; }

 private:
  Wan& wan_;
  std::vector<std::unique_ptr<Participant>> sites_;
  std::vector<uint8_t> counted_;
  std::vector<ParticipantStats> before_;
};

// n SiteSync sites (stormgate, or the reliable baselines with reliable = true).
// wire_compression: the sites may compress links (SiteSync::set_link_codec).
std::vector<std::unique_ptr<Participant>> make_sync_sites(int n, uint32_t chunk_bytes, bool reliable, uint64_t seed,
                                                          const SimTimeouts& t = {}, bool wire_compression = false,
                                                          TcpCc cc = TcpCc::kNewReno);
// n ring all-reduce sites over `order`, their connections on `cc`.
std::vector<std::unique_ptr<Participant>> make_ring_sites(const std::vector<int>& order, uint32_t chunk_bytes,
                                                          size_t floats, uint64_t seed, const SimTimeouts& t = {},
                                                          TcpCc cc = TcpCc::kNewReno);
// The same ring as gloo runs it (sim/gloo_ring.h): segments of at most `max_segment_bytes`
// (real bytes: gloo's 1 MiB over the simulation's scale), two in flight per link.
std::vector<std::unique_ptr<Participant>> make_gloo_ring_sites(const std::vector<int>& order, uint32_t chunk_bytes,
                                                               size_t floats, uint64_t max_segment_bytes, uint64_t seed,
                                                               const SimTimeouts& t = {}, TcpCc cc = TcpCc::kNewReno);
// Installs `plan` (policy `version`) at every SiteSync site and its splits in the Wan.
bool install_plan(Cluster& c, const topo::Plan& plan, uint32_t version);

}  // namespace sg::sim
