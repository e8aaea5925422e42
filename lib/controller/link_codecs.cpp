#include "controller/link_codecs.h"

#include <algorithm>

namespace sg::controller {

compress::AdaptiveConfig codec_ladder(const config::CompressionConfig& cfg) {
  // The plan names a codec per link, not a top-k ratio: top-k is one level at the configured
  // ratio (SyncConfig::topk_ratio). The ladder stops at the configured strongest codec.
  compress::AdaptiveConfig ac;
  ac.ladder = {{CodecId::kF32, 0}};
  if (cfg.codec == CodecId::kF16) {
    ac.ladder.push_back({CodecId::kF16, 0});
    return ac;
  }
  const float r = static_cast<float>(cfg.topk_ratio);
  for (const compress::CompressionLevel l : {compress::CompressionLevel{CodecId::kBf16, 0},
                                              compress::CompressionLevel{CodecId::kInt8, 0},
                                              compress::CompressionLevel{CodecId::kTopK, r}}) {
    ac.ladder.push_back(l);
    if (l.codec == cfg.codec) break;
  }
  return ac;
}

Nanos hideable_compute(double lag_s, double overlap) {
  if (!(lag_s > 0)) return 0;
  const double share = overlap < 0 ? 1.0 : std::clamp(overlap, kMinHideableShare, 1.0);
  return static_cast<Nanos>(lag_s * share * kSecond);
}

LinkCodecs::LinkCodecs(const config::CompressionConfig& cfg, int sites)
    : cfg_(cfg),
      n_(sites),
      policy_(static_cast<size_t>(sites) * sites, compress::AdaptivePolicy(codec_ladder(cfg))),
      exposure_(static_cast<size_t>(sites) * sites, 0.0) {}

std::vector<topo::LinkCodec> LinkCodecs::decide(const topo::Plan& plan, const std::vector<LinkView>& links,
                                                Nanos measured_compute) {
  std::vector<topo::LinkCodec> out;
  if (cfg_.mode == config::CompressionMode::kOff || plan.num_sites != n_) return out;
  if (cfg_.mode == config::CompressionMode::kAlways) {
    topo::Plan p = plan;
    topo::set_tree_codecs(p, cfg_.codec);
    return p.codecs;
  }
  // Bytes each link carries per round under this plan (a shard up and down its tree edge).
  std::vector<uint64_t> load(static_cast<size_t>(n_) * n_, 0);
  for (const auto& t : plan.shards)
    for (int v = 0; v < n_; ++v)
      if (t.parent[v] != topo::kNoSite) {
        load[static_cast<size_t>(v) * n_ + t.parent[v]] += t.bytes();
        load[static_cast<size_t>(t.parent[v]) * n_ + v] += t.bytes();
      }
  const Nanos compute = cfg_.compute_ms_per_round > 0 ? static_cast<Nanos>(cfg_.compute_ms_per_round) * kMilli
                                                      : std::max<Nanos>(measured_compute, 0);
  last_compute_ = compute;
  std::fill(exposure_.begin(), exposure_.end(), 0.0);
  const auto tree = topo::tree_links(plan);
  std::vector<size_t> weighed;  // tree links measured this time
  bool any_compressed = false;
  for (const auto& [a, b] : tree) {
    const size_t k = static_cast<size_t>(a) * n_ + b;
    compress::LinkSample s;
    if (k < links.size()) {
      s.throughput_Bps = links[k].bytes_per_s;
      s.rtt_ratio = links[k].rtt_trend;
      s.loss = links[k].loss;
    }
    s.bytes = load[k];
    s.compute_time = compute;
    const compress::Decision d = policy_[k].update(s);
    exposure_[k] = compute > 0 ? policy_[k].exposure() : 0.0;
    if (s.throughput_Bps > 0 && compute > 0) weighed.push_back(k);
    any_compressed |= d.codec != CodecId::kF32;
  }
  if (any_compressed) raise_round_bottleneck(weighed);
  for (const auto& [a, b] : tree) {
    const compress::Decision d = policy_[static_cast<size_t>(a) * n_ + b].current();
    if (d.codec != CodecId::kF32) out.push_back({static_cast<topo::SiteId>(a), static_cast<topo::SiteId>(b), d.codec});
  }
  return out;
}

void LinkCodecs::raise_round_bottleneck(const std::vector<size_t>& weighed) {
  // A round lasts as long as its slowest link. Once the rule compresses some links, a link it
  // leaves at full precision (clear, under bottleneck_exposure) may be the one that sets the
  // round: the others' compression then buys nothing. So while the slowest link's transfer at
  // its level still exceeds the compute, compress it one level more; stop when it fits behind
  // the compute or is at the ladder's top. No link is raised that is not the round's slowest.
  for (;;) {
    size_t slowest = 0;
    double longest = 0;  // transfer time over compute at the link's current level
    for (const size_t k : weighed)
      if (const double t = exposure_[k] / policy_[k].factor(); t > longest) {
        longest = t;
        slowest = k;
      }
    if (longest <= 1.0 || policy_[slowest].at_top()) return;
    policy_[slowest].raise();
  }
}

bool same_codecs(const std::vector<topo::LinkCodec>& a, const std::vector<topo::LinkCodec>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& x : a) {
    bool found = false;
    for (const auto& y : b) found |= x.from == y.from && x.to == y.to && x.codec == y.codec;
    if (!found) return false;
  }
  return true;
}

}  // namespace sg::controller
