// The comparisons of `perf/bench sim-sync`, one function per experiment, each running the
// real lib/ state machines on the simulated WAN (lib/sim). Shared by the benchmark and
// nothing else; kept apart from main() so each experiment reads on its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "sim/cluster.h"
#include "sim/scenario.h"
#include "topology/plan.h"

namespace sg::simbench {

// Simulated chunks are kWireChunk bytes on the wire; 1/scale of their floats are real.
inline constexpr uint32_t kWireChunk = 64000;

struct Setup {
  const sim::Scenario* sc = nullptr;
  int n = 0;
  uint64_t model_wire = 0;   // the model size being simulated
  uint32_t scale = 1;        // Wan payload_scale
  uint32_t chunk_real = kWireChunk;
  uint64_t model_real = 0;   // bytes SiteSync really carries (model_wire / scale)
  std::vector<float> local;  // one contribution, shared by every site (times do not depend on values)
  int rounds = 2;            // per mode
  int reported = 1;          // the median of the last `reported` rounds is the mode's figure
};

// Median of the last `k` values of `v` (all of them if fewer).
double median_of_last(const std::vector<double>& v, int k);

// Chooses the scale so that every site's buffers fit in `mem_budget` bytes.
Setup make_setup(const sim::Scenario& sc, uint64_t model_wire, double mem_budget, int rounds, int reported = 1);

struct ModeResult {
  std::string mode;
  double seconds = 0;      // median of the reported rounds (virtual)
  std::vector<double> round_s;  // every round
  bool ok = false;
  double wall_s = 0;
  sim::ParticipantStats stats;
  uint64_t events = 0;
};

enum class Topo { kStar, kBlind, kFapt, kFaptMultipath };
topo::Plan make_plan(const Setup& s, const topo::Network& net, Topo t);
const char* topo_name(Topo t);

// SiteSync on `plan` over `wan` (reliable = the TCP-like baseline transport, on `cc`).
ModeResult run_sync(const Setup& s, const sim::WanSpec& wan, const topo::Plan& plan, bool reliable,
                    const std::string& name, sim::TcpCc cc = sim::TcpCc::kNewReno);
// Ring all-reduce, reliable (NewReno unless `cc` says otherwise), best ring order for the
// measured network: one transfer per ring step, or, with gloo_segment_bytes (wire bytes; gloo
// uses kGlooSegment), gloo's segmented ring with two segments in flight (sim/gloo_ring.h).
inline constexpr uint64_t kGlooSegment = 1 << 20;  // gloo's AllreduceOptionsImpl::kMaxSegmentSize
ModeResult run_ring(const Setup& s, const sim::WanSpec& wan, const std::string& name,
                    sim::TcpCc cc = sim::TcpCc::kNewReno, uint64_t gloo_segment_bytes = 0);

// stormgate's stack as gateways run it: every site a sim::GatewaySite (SiteSync and the
// gateway's control plane, lib/controller), rounds back to back on `wan`. Every site starts
// from the controller's first plan (links alike, configured uplinks); the coordinator's
// controller replans from the rows every site measures (passive windows, and probe trains
// that cross the simulated links) and every switch goes through the policy protocol over
// simulated CONTROL messages. Awareness: kStuck takes one plan from the first measurements
// and never revises it; kPassive measures the job's traffic only; kProbes adds probe trains
// on idle links. compress: NetSenseML's codec per link, carried in the plan.
enum class Awareness { kStuck, kPassive, kProbes };
struct StackOptions {
  Awareness awareness = Awareness::kStuck;
  bool multipath = false;
  // Each site sprays its DATA with the gateway's own Sprayer (lib/spray: the plan's splits
  // weighed by each path's ACK clock, standby relays for a backlogged direct path), as a
  // gateway with topology.multipath does; false: the plan's splits by weight alone.
  bool spray = false;
  bool compress = false;
  // One congestion state per peer link for the job's transfers (transport.link_share: on, as
  // scripts/testbed's gateways run); false: the gateway's default for one job.
  bool share_links = false;
  int max_trees = 12;                     // the planner's tree budget (topology.shards)
  double recompute_change = 0.2;          // the gateway's default
  double probe_rate_bytes_per_s = 20e6 / 8;  // per site, wire bytes (topology.probe_rate_kbit = 20000)
  Nanos warmup = 5 * kSecond;  // the gateways run before the first round
  // A gateway config (the testbed's): every site's control plane and SiteSync are built from
  // it by the gateway's own functions (controller::control_plane_config,
  // sync::site_sync_config), with only the site's id, its peers and the simulator's byte
  // scale set here; the options above that a config says are then not used (multipath:
  // the config's topology.multipath turns the sprayers' standby relays on, as in JobRunner).
  const config::GatewayConfig* gateway = nullptr;
};
struct StackRound {
  double start_s = 0, seconds = 0;
  bool replanned = false;   // a new policy was installed after this round
  int compressed_links = 0; // links whose codec is not f32 this round
  int splits = 0;           // multipath splits of the plan in force this round
};
struct StackResult {
  std::string mode;
  std::vector<StackRound> rounds;
  double total_s = 0;
  int policy_switches = 0;
  int codec_switches = 0;
  bool ok = true;
  sim::ParticipantStats last;  // the last round's counters
  uint64_t probe_wire_bytes = 0;  // all sites' probe trains, on the wire
};
StackResult run_stack(const Setup& s, const sim::WanSpec& wan, const StackOptions& o, int rounds,
                      const std::string& name);

// Fluctuation: the stack on the scenario's fluctuating WAN (sim::with_fluctuation), trees
// without multipath, against a planner stuck with its first measurements.
StackResult run_fluctuation(const Setup& s, Awareness a, bool compress, int rounds);

}  // namespace sg::simbench
