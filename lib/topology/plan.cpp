#include "topology/plan.h"

#include <algorithm>

namespace sg::topo {

std::string_view plan_error_name(PlanError e) {
  switch (e) {
    case PlanError::kOk: return "ok";
    case PlanError::kTruncated: return "truncated";
    case PlanError::kBadMagic: return "bad magic";
    case PlanError::kBadVersion: return "bad format version";
    case PlanError::kTrailingBytes: return "trailing bytes";
    case PlanError::kBadSiteCount: return "bad site count";
    case PlanError::kBadShardCount: return "bad shard count";
    case PlanError::kBadShardRange: return "shard ranges do not tile the model";
    case PlanError::kBadTree: return "shard tree is not a tree";
    case PlanError::kBadSplit: return "bad multipath split";
    case PlanError::kBadCodec: return "bad link codec";
    case PlanError::kBadReceivers: return "bad multicast receivers";
  }
  return "unknown";
}

namespace {
std::string site_name(SiteId s, const std::vector<SiteId>& site_ids) {
  if (s < site_ids.size()) return std::to_string(site_ids[s]);
  std::string unknown = "?";  // appended, not "?" + ...: GCC 12 warns falsely (-Wrestrict) on that
  return unknown += std::to_string(s);
}
}  // namespace

std::string describe_shard(const ShardTree& t, const std::vector<SiteId>& site_ids) {
  std::string out = "root=" + site_name(t.root, site_ids) + " bytes=" + std::to_string(t.bytes()) + " parents=";
  for (size_t i = 0; i < t.parent.size(); ++i) {
    if (i) out += ',';
    out += t.parent[i] == kNoSite ? std::string("-") : site_name(t.parent[i], site_ids);
  }
  return out;
}

std::string describe(const Plan& plan, const std::vector<SiteId>& site_ids, size_t max_shards) {
  auto id = [&](SiteId s) { return site_name(s, site_ids); };
  std::string out;
  const size_t shown = std::min(plan.shards.size(), max_shards);
  for (size_t k = 0; k < shown; ++k) out += (k ? "; " : "") + describe_shard(plan.shards[k], site_ids);
  if (plan.shards.size() > shown) out += " (+" + std::to_string(plan.shards.size() - shown) + " more)";
  for (const LinkSplit& s : plan.splits) {
    out += "; split " + id(s.from) + ">" + id(s.to) + " direct:" + std::to_string(s.direct_weight);
    for (const Relay& r : s.relays) out += " via " + id(r.via) + ":" + std::to_string(r.weight);
  }
  for (const LinkCodec& c : plan.codecs) out += "; " + id(c.from) + ">" + id(c.to) + ":" + std::string(codec_name(c.codec));
  return out;
}

std::vector<int> tree_depths(const std::vector<SiteId>& parent, int root) {
  const int n = static_cast<int>(parent.size());
  if (root < 0 || root >= n || parent[root] != kNoSite) return {};
  std::vector<int> depth(n, -1);
  depth[root] = 0;
  // Walk up from each site; a walk longer than n means a cycle.
  std::vector<int> path;
  for (int s = 0; s < n; ++s) {
    path.clear();
    int v = s;
    while (depth[v] < 0) {
      path.push_back(v);
      const SiteId p = parent[v];
      if (p == kNoSite || p >= n || p == v || static_cast<int>(path.size()) > n) return {};
      v = p;
    }
    int d = depth[v];
    for (int k = static_cast<int>(path.size()) - 1; k >= 0; --k) depth[path[k]] = ++d;
  }
  return depth;
}

namespace {

template <typename T>
bool has_duplicate_link(const std::vector<T>& items) {
  std::vector<uint32_t> keys;
  keys.reserve(items.size());
  for (const T& it : items) keys.push_back(static_cast<uint32_t>(it.from) << 16 | it.to);
  std::sort(keys.begin(), keys.end());
  return std::adjacent_find(keys.begin(), keys.end()) != keys.end();
}

}  // namespace

Plan single_site_plan(uint64_t model_bytes) {
  Plan plan;
  plan.num_sites = 1;
  plan.model_bytes = model_bytes;
  ShardTree t;
  t.root = 0;
  t.byte_begin = 0;
  t.byte_end = model_bytes;
  t.parent = {kNoSite};
  plan.shards.push_back(std::move(t));
  return plan;
}

PlanError validate(const Plan& plan) {
  const int n = plan.num_sites;
  if (n == 0 || n > kMaxSites) return PlanError::kBadSiteCount;
  if (plan.shards.empty() || plan.shards.size() > kMaxShards) return PlanError::kBadShardCount;
  uint64_t next = 0;
  for (const ShardTree& s : plan.shards) {
    if (s.byte_begin != next || s.byte_end < s.byte_begin) return PlanError::kBadShardRange;
    next = s.byte_end;
    if (static_cast<int>(s.parent.size()) != n || s.root >= n) return PlanError::kBadTree;
    if (tree_depths(s.parent, s.root).empty()) return PlanError::kBadTree;
  }
  if (next != plan.model_bytes) return PlanError::kBadShardRange;
  for (const LinkSplit& sp : plan.splits) {
    if (sp.from >= n || sp.to >= n || sp.from == sp.to) return PlanError::kBadSplit;
    if (sp.relays.size() > kMaxRelays || sp.total_weight() == 0) return PlanError::kBadSplit;
    for (size_t k = 0; k < sp.relays.size(); ++k) {
      const SiteId via = sp.relays[k].via;
      if (via >= n || via == sp.from || via == sp.to) return PlanError::kBadSplit;
      for (size_t m = 0; m < k; ++m)
        if (sp.relays[m].via == via) return PlanError::kBadSplit;
    }
  }
  if (has_duplicate_link(plan.splits)) return PlanError::kBadSplit;
  for (const LinkCodec& c : plan.codecs) {
    if (c.from >= n || c.to >= n || c.from == c.to) return PlanError::kBadCodec;
    if (!codec_id_valid(static_cast<uint8_t>(c.codec))) return PlanError::kBadCodec;
  }
  if (has_duplicate_link(plan.codecs)) return PlanError::kBadCodec;
  if (!plan.receivers.empty()) {
    if (static_cast<int>(plan.receivers.size()) != n) return PlanError::kBadReceivers;
    std::vector<uint8_t> seen(n, 0);
    for (int i = 0; i < n; ++i) {
      std::fill(seen.begin(), seen.end(), 0);
      for (SiteId r : plan.receivers[i]) {
        if (r >= n || r == i || seen[r]) return PlanError::kBadReceivers;
        seen[r] = 1;
      }
    }
  }
  return PlanError::kOk;
}

std::vector<std::pair<int, int>> tree_links(const Plan& plan) {
  std::vector<std::pair<int, int>> out;
  std::vector<uint8_t> seen(static_cast<size_t>(plan.num_sites) * plan.num_sites, 0);
  auto add = [&](int a, int b) {
    uint8_t& s = seen[static_cast<size_t>(a) * plan.num_sites + b];
    if (!s) out.emplace_back(a, b);
    s = 1;
  };
  for (const ShardTree& t : plan.shards)
    for (int v = 0; v < static_cast<int>(t.parent.size()) && v < plan.num_sites; ++v)
      if (t.parent[v] != kNoSite && t.parent[v] < plan.num_sites) {
        add(v, t.parent[v]);
        add(t.parent[v], v);
      }
  return out;
}

bool same_trees(const Plan& a, const Plan& b) {
  if (a.num_sites != b.num_sites || a.model_bytes != b.model_bytes || a.shards.size() != b.shards.size()) return false;
  for (size_t s = 0; s < a.shards.size(); ++s) {
    const ShardTree& x = a.shards[s];
    const ShardTree& y = b.shards[s];
    if (x.root != y.root || x.byte_begin != y.byte_begin || x.byte_end != y.byte_end || x.parent != y.parent)
      return false;
  }
  return true;
}

void set_tree_codecs(Plan& plan, CodecId codec) {
  plan.codecs.clear();
  if (codec == CodecId::kF32) return;
  for (const auto& [a, b] : tree_links(plan))
    plan.codecs.push_back({static_cast<SiteId>(a), static_cast<SiteId>(b), codec});
}

}  // namespace sg::topo
