// A Plan: what one policy version tells every gateway to do for a round. Plain data, so the
// dataplane can read it without knowing how it was planned, and compact on the wire
// (plan_codec.h) so it travels inside LTP CONTROL messages as opaque bytes.
//
//   shards  — the model's bytes [byte_begin, byte_end) are reduced up `parent` to `root`
//             and sent back down the same edges; shard ranges tile [0, model_bytes).
//   splits  — for a directed link from->to that the trees use, part of its chunks travel
//             from->via->to over links the trees leave idle; chunks are dealt out in
//             proportion to the weights (direct_weight for the link itself).
//   codecs  — the compression setting of each directed link; links not listed use kF32.
//             The compression policy owns these values; the planner leaves them empty.
//   receivers — peer-to-peer mode (SelMCast) only: receivers[i] lists the sites site i
//             multicasts its update to; empty in all-reduce mode. The trees stay valid
//             either way (the one-shard star every site can compute), so the rest of the
//             protocol does not care which mode a plan is for.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/codec_id.h"
#include "topology/network.h"

namespace sg::topo {

inline constexpr int kMaxSites = 1024;
inline constexpr int kMaxShards = 256;
inline constexpr int kMaxRelays = 8;

struct ShardTree {
  SiteId root = 0;
  uint64_t byte_begin = 0;
  uint64_t byte_end = 0;
  std::vector<SiteId> parent;  // one per site; parent[root] == kNoSite
  uint64_t bytes() const { return byte_end - byte_begin; }
};

struct Relay {
  SiteId via = 0;
  uint16_t weight = 0;
};

struct LinkSplit {
  SiteId from = 0;
  SiteId to = 0;
  uint16_t direct_weight = 0;
  std::vector<Relay> relays;
  uint32_t total_weight() const {
    uint32_t t = direct_weight;
    for (const Relay& r : relays) t += r.weight;
    return t;
  }
};

struct LinkCodec {
  SiteId from = 0;
  SiteId to = 0;
  CodecId codec = CodecId::kF32;
};

struct Plan {
  uint16_t num_sites = 0;
  uint64_t model_bytes = 0;
  std::vector<ShardTree> shards;
  std::vector<LinkSplit> splits;
  std::vector<LinkCodec> codecs;
  std::vector<std::vector<SiteId>> receivers;  // empty, or one list per site

  const LinkSplit* split_for(int from, int to) const {
    for (const LinkSplit& s : splits)
      if (s.from == from && s.to == to) return &s;
    return nullptr;
  }
  CodecId codec_for(int from, int to) const {
    for (const LinkCodec& c : codecs)
      if (c.from == from && c.to == to) return c.codec;
    return CodecId::kF32;
  }
};

enum class PlanError : uint8_t {
  kOk = 0,
  kTruncated,        // input ends inside a field
  kBadMagic,
  kBadVersion,
  kTrailingBytes,
  kBadSiteCount,     // 0 or above kMaxSites
  kBadShardCount,    // 0 or above kMaxShards
  kBadShardRange,    // ranges do not tile [0, model_bytes) in order
  kBadTree,          // parent out of range, root with a parent, cycle, or unreachable site
  kBadSplit,         // unknown site, self link, relay on an endpoint, duplicate, zero weight
  kBadCodec,         // unknown codec id, unknown site, self link or duplicate entry
  kBadReceivers,     // not one list per site, or a list naming its own site, an unknown one, or one twice
};
std::string_view plan_error_name(PlanError e);

// Checks every invariant listed above; decode() applies it to untrusted bytes.
PlanError validate(const Plan& plan);

// A deployment of one site: one shard, the whole model, rooted at the site (its workers'
// mean is the result). No planner has anything to choose there.
Plan single_site_plan(uint64_t model_bytes);

// The directed links the plan's trees use (child -> parent and parent -> child), each once.
std::vector<std::pair<int, int>> tree_links(const Plan& plan);
// Same sites, model and shards (roots, byte ranges, parents): the plans differ at most in
// their codecs and multipath splits.
bool same_trees(const Plan& a, const Plan& b);
// Sets `codec` on every tree link (kF32 clears the list): compression.mode "always".
void set_tree_codecs(Plan& plan, CodecId codec);

// One shard for operators, as the log and the telemetry endpoint show it:
// "root=R bytes=B parents=a,b,c" (site ids from `site_ids`, by index; "-" for the root; an
// index without an id prints as "?i" rather than being read out of bounds).
std::string describe_shard(const ShardTree& t, const std::vector<SiteId>& site_ids);
// A whole plan on one line: its shards ("; "-separated, at most `max_shards`, then
// "(+N more)", so that a 256-shard plan stays readable), its multipath splits
// ("split F>T direct:w via V:w") and its codecs ("F>T:name").
std::string describe(const Plan& plan, const std::vector<SiteId>& site_ids, size_t max_shards = 8);

// Parent arrays: depth of every site from the root, or empty if not a tree rooted at root.
std::vector<int> tree_depths(const std::vector<SiteId>& parent, int root);

}  // namespace sg::topo
