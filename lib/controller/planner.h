// The one place a plan is built: the gateway's first plan, every replan of its controller,
// and the simulator all come here, so a configured planner holds for the whole job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "topology/network.h"
#include "topology/plan.h"

namespace sg::controller {

struct PlanSettings {
  config::Planner planner = config::Planner::kFapt;
  uint64_t model_bytes = 0;
  uint32_t chunk_bytes = 1344;
  uint16_t shards = 4;      // trees at most (fapt, netstorm_rule, blind_tree)
  uint16_t spread_to = 4;   // shards at least (spread_shards; 0: as planned)
  bool multipath = true;    // relays over idle links (fapt only: the baselines have none)
};

// The settings a gateway's config gives.
PlanSettings plan_settings(const config::GatewayConfig& cfg);

// Trees (and multipath splits) for `net` by the configured planner, shards spread to
// settings.shards; no codecs (the controller adds them). Returns an empty plan (no shards)
// and sets `error` if the planner cannot serve this network.
topo::Plan build_plan(const topo::Network& net, const PlanSettings& s, std::string* error = nullptr);

// What the controller assumes before anything is measured: every link alike (1 Gbit/s,
// 10 ms), aggregation far faster than any link, the configured uplinks. Every gateway computes
// the same first plan from it without talking.
topo::Network blind_network(int sites, const std::vector<double>& uplinks_bytes_per_s);

// Splits the largest shards of `plan` (same tree, halves of its byte range, cut at a chunk
// boundary) until it has `count` shards or none can be cut, so that up to `count` engines per
// gateway share a round even when the planner needed fewer trees. A pure function of the plan
// and the job-wide settings, so every gateway computes the same.
void spread_shards(topo::Plan& plan, uint32_t count, uint32_t chunk_bytes);

const char* planner_name(config::Planner p);

}  // namespace sg::controller
