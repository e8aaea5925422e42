// Which codec each tree link of a plan uses: the coordinator's NetSenseML decision, made on
// the throughput matrix the gateways measure passively, and carried to every gateway inside
// the policy's plan (topo::Plan::codecs), so a change switches at one round everywhere.
//
//   off       no codecs (f32 everywhere)
//   always    compression.codec on every tree link
//   adaptive  per link, lib/compress's AdaptivePolicy on (measured bytes/s, the bytes the
//             plan puts on the link, compute_ms_per_round); its ladder stops at
//             compression.codec. Without compute_ms_per_round it cannot tell whether the
//             network is the bottleneck, so it keeps full precision.
//
// Owner: the control thread.
#pragma once

#include <vector>

#include "compress/adaptive_policy.h"
#include "config/config.h"
#include "topology/plan.h"

namespace sg::ctl {

class LinkCodecs {
 public:
  LinkCodecs(const config::CompressionConfig& cfg, int sites);

  // Codecs for `plan`'s tree links given `matrix` (bytes/s of link i->j at [i*n+j], 0 =
  // unknown). Call once per measurement interval: adaptive levels have hysteresis.
  std::vector<topo::LinkCodec> decide(const topo::Plan& plan, const std::vector<double>& matrix);

 private:
  config::CompressionConfig cfg_;
  int n_;
  std::vector<compress::AdaptivePolicy> policy_;  // per directed link
};

// Same links, same codecs (order ignored).
bool same_codecs(const std::vector<topo::LinkCodec>& a, const std::vector<topo::LinkCodec>& b);

}  // namespace sg::ctl
