// Scenario files (perf/scenarios/*.yaml): sites, WAN links and the impairments of one
// simulated deployment. Read strictly, like the gateway config (config/yaml_strict.h):
// unknown or duplicate keys and out-of-range values are errors with file:line:col.
//
//   name: eight-regions
//   seed: 8
//   defaults: {queue_ms: 50, loss: 0}          # every link unless it says otherwise
//   sites:
//     - {name: us-east, lat: 39.0, lon: -77.5, tier_mbps: 10000, egress_mbps: 0, ingress_mbps: 0}
//   links:                                      # explicit directed links
//     - {from: us-east, to: eu-west, mbps: 2000, delay_ms: 40, both_ways: true,
//        loss: 0.001, queue_ms: 30, gilbert_elliott: {p_good_bad, p_bad_good, loss_good, loss_bad},
//        trace: {kind: steps|periodic|walk, ...}}
//   generate: {seed: 3, mbps_min: 20, mbps_max: 10000, km_full: 1500, jitter: 0.3}
//     # every pair not listed: delay from great-circle distance (clamped to 5-150 ms one way),
//     # rate = min(tier) * min(1, sqrt(km_full / km)) * (1 +- jitter), clamped to [min, max]
//   fluctuation:                                # traces the awareness experiment applies
//     - {from: a, to: b, both_ways: true, trace: {...}}
//   compute_ms: 500                             # per-round compute (the compression policy's budget)
//
// delay_ms is one-way propagation (RTT = 2 * delay_ms). Rates in Mbit/s (10^6 bits/s).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/wan.h"
#include "topology/network.h"

namespace sg::sim {

struct LinkTrace {
  int from = 0, to = 0;
  TraceSpec trace;
};

struct Scenario {
  std::string name;
  std::string source;
  uint64_t seed = 1;
  WanSpec wan;
  std::vector<LinkTrace> fluctuation;
  double compute_ms = 0;
};

struct ScenarioResult {
  std::optional<Scenario> scenario;
  std::vector<std::string> errors;  // "file:line:col: path: expected X, found Y"
};

ScenarioResult parse_scenario(const std::string& text, const std::string& source);
ScenarioResult load_scenario(const std::string& path);

// The planner's view of a WAN at time `at`: every link's rate (nominal * trace, capped by the
// endpoints' egress/ingress caps) and every site's egress/ingress cap (topo::Network's
// uplinks, shared by all the site's links; 0 = none), divided by `scale` (bytes the planner
// counts per wire byte are 1/scale: see Wan's payload_scale), RTT = 2 * delay; aggregation
// speed `agg_Bps`.
topo::Network network_at(const WanSpec& wan, Nanos at, double scale, double agg_Bps);

// Applies fluctuation traces to a copy of the WAN.
WanSpec with_fluctuation(const Scenario& s);

}  // namespace sg::sim
