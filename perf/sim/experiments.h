// The comparisons of `perf/bench sim-sync`, one function per experiment, each running the
// real lib/ state machines on the simulated WAN (lib/sim). Shared by the benchmark and
// nothing else; kept apart from main() so each experiment reads on its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
  int rounds = 2;            // per mode; the last one is reported (the ring's connection is warm)
};

// Chooses the scale so that every site's buffers fit in `mem_budget` bytes.
Setup make_setup(const sim::Scenario& sc, uint64_t model_wire, double mem_budget, int rounds);

struct ModeResult {
  std::string mode;
  double seconds = 0;      // reported round (virtual)
  bool ok = false;
  double wall_s = 0;
  sim::ParticipantStats stats;
  uint64_t events = 0;
};

enum class Topo { kStar, kBlind, kFapt, kFaptMultipath };
topo::Plan make_plan(const Setup& s, const topo::Network& net, Topo t);
const char* topo_name(Topo t);

// SiteSync on `plan` over `wan` (reliable = the TCP-like baseline transport).
ModeResult run_sync(const Setup& s, const sim::WanSpec& wan, const topo::Plan& plan, bool reliable,
                    const std::string& name);
// Ring all-reduce, reliable, best ring order for the measured network.
ModeResult run_ring(const Setup& s, const sim::WanSpec& wan, const std::string& name);

// Fluctuation: rounds back to back on the WAN with the scenario's traces; the planner either
// keeps its initial plan (stuck), or replans between rounds from lib/measure's passive
// estimates (passive), or from those plus a packet-pair probe of every link (aware), and
// optionally NetSenseML compression per link on top (aware + compress).
struct FluctRound {
  double start_s = 0, seconds = 0;
  bool replanned = false;   // a new policy was installed after this round
  int compressed_links = 0; // links whose codec is not f32 this round
};
struct FluctResult {
  std::string mode;
  std::vector<FluctRound> rounds;
  double total_s = 0;
  int policy_switches = 0;
  int codec_switches = 0;
};
enum class Awareness { kStuck, kPassive, kAware, kAwareCompress };
FluctResult run_fluctuation(const Setup& s, Awareness a, int rounds);

}  // namespace sg::simbench
