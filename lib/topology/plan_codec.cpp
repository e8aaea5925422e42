#include "topology/plan_codec.h"

#include "common/byte_io.h"

namespace sg::topo {
namespace {

constexpr uint8_t kMagic[4] = {'S', 'G', 'P', 'L'};
constexpr size_t kShardFixed = 2 + 8;
constexpr size_t kSplitFixed = 2 + 2 + 2 + 1;
constexpr size_t kRelayBytes = 2 + 2;
constexpr size_t kCodecBytes = 2 + 2 + 1;

}  // namespace

size_t encoded_size(const Plan& plan) {
  size_t size = kPlanHeaderBytes;
  size += plan.shards.size() * (kShardFixed + 2 * static_cast<size_t>(plan.num_sites));
  for (const LinkSplit& s : plan.splits) size += kSplitFixed + kRelayBytes * s.relays.size();
  size += plan.codecs.size() * kCodecBytes;
  size += 2;
  for (const auto& l : plan.receivers) size += 2 + 2 * l.size();
  return size;
}

PlanError encode(const Plan& plan, std::vector<uint8_t>& out) {
  if (PlanError e = validate(plan); e != PlanError::kOk) return e;
  out.reserve(out.size() + encoded_size(plan));
  ByteWriter w(out);
  for (uint8_t m : kMagic) w.u8(m);
  w.u8(kPlanFormat);
  w.u8(0);
  w.be<uint16_t>(plan.num_sites);
  w.be<uint64_t>(plan.model_bytes);
  w.be<uint16_t>(static_cast<uint16_t>(plan.shards.size()));
  w.be<uint32_t>(static_cast<uint32_t>(plan.splits.size()));
  w.be<uint32_t>(static_cast<uint32_t>(plan.codecs.size()));
  for (const ShardTree& s : plan.shards) {
    w.be<uint16_t>(s.root);
    w.be<uint64_t>(s.byte_end);
    for (SiteId p : s.parent) w.be<uint16_t>(p);
  }
  for (const LinkSplit& s : plan.splits) {
    w.be<uint16_t>(s.from);
    w.be<uint16_t>(s.to);
    w.be<uint16_t>(s.direct_weight);
    w.u8(static_cast<uint8_t>(s.relays.size()));
    for (const Relay& r : s.relays) {
      w.be<uint16_t>(r.via);
      w.be<uint16_t>(r.weight);
    }
  }
  for (const LinkCodec& c : plan.codecs) {
    w.be<uint16_t>(c.from);
    w.be<uint16_t>(c.to);
    w.u8(static_cast<uint8_t>(c.codec));
  }
  // Receivers: a count of lists (0 or num_sites), then each list's length and sites.
  w.be<uint16_t>(static_cast<uint16_t>(plan.receivers.size()));
  for (const auto& l : plan.receivers) {
    w.be<uint16_t>(static_cast<uint16_t>(l.size()));
    for (SiteId r : l) w.be<uint16_t>(r);
  }
  return PlanError::kOk;
}

PlanError decode(std::span<const uint8_t> bytes, Plan& plan) {
  ByteReader r(bytes);
  if (bytes.size() < kPlanHeaderBytes) return PlanError::kTruncated;
  for (uint8_t m : kMagic)
    if (r.u8() != m) return PlanError::kBadMagic;
  if (r.u8() != kPlanFormat || r.u8() != 0) return PlanError::kBadVersion;
  plan = Plan{};
  plan.num_sites = r.be<uint16_t>();
  plan.model_bytes = r.be<uint64_t>();
  const size_t shards = r.be<uint16_t>();
  const size_t splits = r.be<uint32_t>();
  const size_t codecs = r.be<uint32_t>();
  const size_t n = plan.num_sites;
  if (n == 0 || n > kMaxSites) return PlanError::kBadSiteCount;
  if (shards == 0 || shards > kMaxShards) return PlanError::kBadShardCount;
  // Counts are checked against the bytes present before anything is allocated from them.
  const size_t min_body = shards * (kShardFixed + 2 * n) + splits * kSplitFixed + codecs * kCodecBytes;
  if (splits > r.left() || codecs > r.left() || min_body > r.left()) return PlanError::kTruncated;

  plan.shards.resize(shards);
  uint64_t begin = 0;
  for (ShardTree& s : plan.shards) {
    s.root = r.be<uint16_t>();
    s.byte_begin = begin;
    s.byte_end = r.be<uint64_t>();
    begin = s.byte_end;
    s.parent.resize(n);
    for (SiteId& p : s.parent) p = r.be<uint16_t>();
  }
  plan.splits.resize(splits);
  for (LinkSplit& s : plan.splits) {
    s.from = r.be<uint16_t>();
    s.to = r.be<uint16_t>();
    s.direct_weight = r.be<uint16_t>();
    const size_t k = r.u8();
    if (!r.ok()) return PlanError::kTruncated;
    if (k > kMaxRelays) return PlanError::kBadSplit;
    if (k * kRelayBytes > r.left()) return PlanError::kTruncated;
    s.relays.resize(k);
    for (Relay& rel : s.relays) {
      rel.via = r.be<uint16_t>();
      rel.weight = r.be<uint16_t>();
    }
  }
  plan.codecs.resize(codecs);
  for (LinkCodec& c : plan.codecs) {
    c.from = r.be<uint16_t>();
    c.to = r.be<uint16_t>();
    const uint8_t raw = r.u8();
    if (r.ok() && !codec_id_valid(raw)) return PlanError::kBadCodec;
    c.codec = static_cast<CodecId>(raw);
  }
  const size_t lists = r.be<uint16_t>();
  if (!r.ok()) return PlanError::kTruncated;
  if (lists != 0 && lists != n) return PlanError::kBadReceivers;
  if (lists * 2 > r.left()) return PlanError::kTruncated;
  plan.receivers.resize(lists);
  for (auto& l : plan.receivers) {
    const size_t k = r.be<uint16_t>();
    if (!r.ok()) return PlanError::kTruncated;
    if (k >= n) return PlanError::kBadReceivers;
    if (k * 2 > r.left()) return PlanError::kTruncated;
    l.resize(k);
    for (SiteId& v : l) v = r.be<uint16_t>();
  }
  if (!r.ok()) return PlanError::kTruncated;
  if (r.left() != 0) return PlanError::kTrailingBytes;
  // A shard whose end precedes its begin would wrap in bytes(); validate() rejects it.
  return validate(plan);
}

}  // namespace sg::topo
