#include "controller/planner.h"

#include <algorithm>

#include "topology/baselines.h"
#include "topology/fapt.h"

namespace sg::controller {

PlanSettings plan_settings(const config::GatewayConfig& cfg) {
  PlanSettings s;
  s.planner = cfg.topology.planner;
  s.model_bytes = cfg.job.model_bytes;
  s.chunk_bytes = cfg.transport.chunk_bytes;
  s.shards = cfg.topology.shards;
  s.spread_to = cfg.topology.shards;
  s.multipath = cfg.topology.multipath;
  return s;
}

const char* planner_name(config::Planner p) {
  switch (p) {
    case config::Planner::kFapt: return "fapt";
    case config::Planner::kStar: return "star";
    case config::Planner::kBlindTree: return "blind_tree";
    case config::Planner::kNetStormRule: return "netstorm_rule";
  }
  return "?";
}

topo::Network blind_network(int sites, const std::vector<double>& uplinks) {
  topo::Network net = topo::Network::uniform(sites, 125e6, 0.010, 5e9);
  net.set_uplinks(uplinks);
  return net;
}

void spread_shards(topo::Plan& plan, uint32_t count, uint32_t chunk_bytes) {
  const uint64_t unit = std::max<uint64_t>(chunk_bytes / 4 * 4, 4);
  while (plan.shards.size() < count) {
    size_t big = 0;
    for (size_t s = 1; s < plan.shards.size(); ++s)
      if (plan.shards[s].bytes() > plan.shards[big].bytes()) big = s;
    if (plan.shards.empty() || plan.shards[big].bytes() < 2 * unit) return;
    topo::ShardTree half = plan.shards[big];
    const uint64_t cut = plan.shards[big].byte_begin + plan.shards[big].bytes() / 2 / unit * unit;
    plan.shards[big].byte_end = cut;
    half.byte_begin = cut;
    plan.shards.insert(plan.shards.begin() + static_cast<std::ptrdiff_t>(big) + 1, std::move(half));
  }
}

topo::Plan build_plan(const topo::Network& net, const PlanSettings& s, std::string* error) {
  topo::Plan plan;
  topo::PlannerOptions opt;
  opt.max_shards = std::max<int>(1, s.shards);
  opt.chunk_bytes = s.chunk_bytes;
  opt.multipath = s.multipath;
  if (net.n == 1) {
    plan = topo::single_site_plan(s.model_bytes);  // nothing to plan: the planners want two sites
  } else {
    switch (s.planner) {
      case config::Planner::kFapt: plan = topo::plan_fapt(net, s.model_bytes, opt); break;
      case config::Planner::kStar: plan = topo::star_plan(net, s.model_bytes, s.chunk_bytes); break;
      case config::Planner::kBlindTree: plan = topo::blind_tree_plan(net, s.model_bytes, opt.max_shards); break;
      case config::Planner::kNetStormRule:
        plan = topo::netstorm_rule_best(net, s.model_bytes, opt.max_shards, s.chunk_bytes);
        break;
    }
  }
  if (!s.multipath) plan.splits.clear();
  plan.codecs.clear();
  spread_shards(plan, s.spread_to, s.chunk_bytes);
  if (const topo::PlanError e = topo::validate(plan); e != topo::PlanError::kOk) {
    if (error) *error = std::string("planner ") + planner_name(s.planner) + " made an invalid plan: " +
                        std::string(topo::plan_error_name(e));
    return topo::Plan{};
  }
  return plan;
}

}  // namespace sg::controller
