#include "sync/site_sync.h"

#include <algorithm>
#include <cstring>

#include "compress/accumulate.h"
#include "compress/codec.h"
#include "ltp/delivery_rate_controller.h"
#include "sync/shard_engine.h"
#include "wire/ltp_codec.h"

namespace sg::sync {

struct SiteSync::Out {
  std::unique_ptr<ltp::RateController> rc;
  std::unique_ptr<ltp::Sender> sender;
  int shard = -1;
  int peer = -1;  // plan index
  bool started = false;
  bool dirty = false;
  // Up sends with a codec: encoded chunks (fixed stride, the last may be shorter); the
  // error-feedback residual is the site's (up_residual_).
  CodecId codec = CodecId::kF32;
  float topk_ratio = 0.01f;
  size_t stride = 0;
  std::vector<uint8_t> enc;
  // Packing: each DATA carries `pack` consecutive accumulator chunks (compressed ones are
  // small); per packet, the chunks still to come and the holes among them.
  uint32_t pack = 1;
  std::vector<uint8_t> left, holes;
};

struct SiteSync::Shard {
  int parent = -1;  // plan index; -1 at the root
  std::vector<int> children;
  std::vector<int> child_out;  // outs_ index per child (down sends)
  int up_out = -1;             // outs_ index for the send to the parent
  uint32_t subtree = 1;        // sites whose gradients this site's sum holds
  size_t first = 0, floats = 0;
  std::unique_ptr<agg::Accumulator> acc;
  std::vector<uint16_t> up_seen;   // per chunk: children whose copy arrived or was given up
  std::vector<uint32_t> local_missing;  // per chunk: floats of our own part not yet final
  std::vector<uint8_t> local_absent;    // per chunk: part of our own part will never come
  std::vector<uint8_t> up_sent;    // per chunk: complete and passed on (up_chunk_ready ran)
  std::vector<uint8_t> down_have;  // per chunk: result known (arrived, filled, or computed)
  std::vector<uint8_t> child_ended;  // per child: its transfer of this round ended or was given up
  uint32_t up_ready = 0, down_ready = 0;
  uint32_t children_done = 0;
  bool up_done = false;
  bool down_done = false;
  bool down_started = false;
  // Down codec of this round (chosen by the root, forwarded unchanged below it): the bytes
  // every child gets, so all sites decode the same values.
  CodecId down_codec = CodecId::kF32;
  size_t down_stride = 0;
  std::vector<uint8_t> down_enc;
};

namespace {

// A link back at full precision sends what its codec had held back (error feedback's
// residual) with the next values, so no gradient mass stays behind in a residual.
void flush_residual(std::span<float> vals, std::span<float> residual) {
  for (size_t i = 0; i < vals.size(); ++i) {
    vals[i] += residual[i];
    residual[i] = 0.0f;
  }
}

// Sub-chunk hole bits in wire::DataHeader::holes.
constexpr uint32_t kMaxPack = 8;

// Accumulator chunks per DATA for a codec: as many encoded chunks of `n0` floats (the
// shard's full chunk) as fit chunk_bytes of payload. A pure function of values every site
// shares, so senders and receivers agree. f32 fills a packet by itself; top-k's size depends
// on the sender's ratio, which the receiver does not know: one per packet.
uint32_t pack_factor(CodecId codec, size_t n0, uint32_t chunk_bytes) {
  if (codec == CodecId::kF32 || codec == CodecId::kTopK || n0 == 0) return 1;
  const size_t stride = compress::encoded_size(codec, n0);
  return static_cast<uint32_t>(std::clamp<size_t>(stride ? chunk_bytes / stride : 1, 1, kMaxPack));
}

uint32_t groups(uint32_t n, uint32_t k) { return (n + k - 1) / k; }

}  // namespace

namespace {

std::unique_ptr<ltp::RateController> make_controller(const SyncConfig& c) {
  if (c.reliable_baseline) return ltp::make_tcp_controller(c.reliable_cc);
  return std::make_unique<ltp::DeliveryRateController>(c.rate);
}

std::span<const uint8_t> as_bytes(std::span<const float> f) {
  return {reinterpret_cast<const uint8_t*>(f.data()), f.size() * sizeof(float)};
}

// Compression ladder position, for "the strongest of these codecs".
int strength(CodecId c) {
  switch (c) {
    case CodecId::kF32: return 0;
    case CodecId::kF16:
    case CodecId::kBf16: return 1;
    case CodecId::kInt8: return 2;
    case CodecId::kTopK: return 3;
  }
  return 0;
}

// Bytes of a transfer of `floats` values in chunks of `cf` floats with a fixed-size codec.
size_t encoded_total(CodecId codec, size_t floats, size_t cf, float ratio) {
  size_t total = 0;
  for (size_t off = 0; off < floats; off += cf) {
    const size_t n = std::min(cf, floats - off);
    total += compress::encoded_size(codec, n, codec == CodecId::kTopK ? compress::topk_count(n, ratio) : 0);
  }
  return total;
}

}  // namespace

SiteSync::SiteSync(const SyncConfig& cfg)
    : cfg_(cfg),
      links_(cfg.site_nodes.size()),
      moved_on_(cfg.site_nodes.size(), 0),
      encoder_(std::max<size_t>(cfg.chunk_bytes / 4, 1)),
      rng_(cfg.seed) {
  for (size_t i = 0; i < cfg_.site_nodes.size(); ++i)
    if (cfg_.site_nodes[i] == cfg_.self_node) self_ = static_cast<int>(i);
  if (cfg_.share_links && !cfg_.reliable_baseline && cfg_.link_shares.empty()) {
    own_shares_ = true;
    cfg_.link_shares.assign(cfg_.site_nodes.size(), nullptr);
    own_link_shares_.resize(cfg_.site_nodes.size());
  }
}

SiteSync::~SiteSync() = default;

int SiteSync::index_of(uint16_t node) const {
  for (size_t i = 0; i < cfg_.site_nodes.size(); ++i)
    if (cfg_.site_nodes[i] == node) return static_cast<int>(i);
  return -1;
}

bool SiteSync::set_link_codec(int peer, CodecId codec, float topk_ratio) {
  if (running_ || peer < 0 || peer >= static_cast<int>(links_.size()) || peer == self_) return false;
  if (!codec_id_valid(static_cast<uint8_t>(codec))) return false;
  if (codec != CodecId::kF32 && !cfg_.wire_compression) return false;
  if (codec == CodecId::kTopK && !(topk_ratio > 0.0f && topk_ratio <= 0.5f)) return false;
  links_[peer] = {codec, topk_ratio};
  size_buffers();
  return true;
}

void SiteSync::apply_codecs() {
  if (!cfg_.wire_compression) return;
  for (auto& l : links_) l = Link{};
  for (const topo::LinkCodec& c : plan_.codecs)
    if (c.from == self_ && c.to < links_.size() && c.to != self_) links_[c.to] = {c.codec, cfg_.topk_ratio};
}

// Encode buffers and residuals exist only once a link compresses (a 1 GB model would
// otherwise carry GBs of idle buffers), sized once and kept. The residuals span the whole
// model, indexed like it, and outlive plans: what a codec held back under one plan's trees
// goes up (or, at a root, into the mean) whenever this site next sends those floats.
void SiteSync::size_buffers() {
  if (!have_plan_ || !cfg_.wire_compression) return;
  const size_t cf = cfg_.chunk_bytes / 4;
  for (auto& o : outs_) {
    const Shard& sh = shards_[o->shard];
    if (o->peer != sh.parent) continue;  // down sends use the shard's buffer
    if (links_[o->peer].codec == CodecId::kF32) continue;
    const size_t need = sh.acc->chunk_count() * (4 * cf + compress::kTopKHeaderBytes);
    if (o->enc.size() < need) o->enc.resize(need);
    if (up_residual_.size() != result_.size()) up_residual_.assign(result_.size(), 0.0f);
  }
  for (auto& sh : shards_) {
    if (!sh.acc || sh.children.empty()) continue;
    bool any = sh.parent >= 0;  // below the root, forwarding may need the root's bytes
    for (int c : sh.children) any |= links_[c].codec != CodecId::kF32;
    if (!any) continue;
    const size_t need = sh.acc->chunk_count() * 4 * cf;
    if (sh.down_enc.size() < need) sh.down_enc.resize(need);
    if (sh.parent < 0 && down_residual_.size() != result_.size()) down_residual_.assign(result_.size(), 0.0f);
  }
}

bool SiteSync::set_plan(const topo::Plan& plan, uint32_t policy_version) {
  if (running_ || self_ < 0 || cfg_.chunk_bytes == 0 || cfg_.chunk_bytes % 4) return false;
  if (topo::validate(plan) != topo::PlanError::kOk) return false;
  if (plan.num_sites != cfg_.site_nodes.size() || plan.model_bytes % 4) return false;
  for (const auto& t : plan.shards)
    if (t.byte_begin % 4 || t.byte_end % 4 || t.bytes() == 0) return false;

  // Same trees, other codecs (NetSenseML's per-link switches): every sender keeps its rate
  // controller mid-cycle. Rebuilding them at each codec switch slowed the simulator's 8-site
  // 1 GB rounds, with a codec switch a round, by 2x.
  if (have_plan_ && topo::same_trees(plan_, plan)) {
    plan_ = plan;
    policy_ = policy_version;
    apply_codecs();
    size_buffers();
    return true;
  }
  const size_t chunk_floats = cfg_.chunk_bytes / 4;
  std::vector<Shard> shards(plan.shards.size());
  std::vector<std::unique_ptr<Out>> outs;
  uint32_t max_chunks = 1;
  uint32_t incoming = 0;
  for (size_t s = 0; s < plan.shards.size(); ++s) {
    const auto& tree = plan.shards[s];
    Shard& sh = shards[s];
    sh.parent = tree.parent[self_] == topo::kNoSite ? -1 : tree.parent[self_];
    for (int v = 0; v < plan.num_sites; ++v) {
      if (tree.parent[v] == self_) sh.children.push_back(v);
      // Count v in the subtree of every ancestor on its way to the root (v itself included).
      for (int a = v, hops = 0; a != topo::kNoSite && hops <= plan.num_sites; a = tree.parent[a], ++hops)
        if (a == self_ && v != self_) ++sh.subtree;
    }
    sh.first = tree.byte_begin / 4;
    sh.floats = tree.bytes() / 4;
    // Another engine of this gateway owns the shard: no state here (its traffic goes there).
    if (shard_engine(static_cast<uint32_t>(s), std::max<uint32_t>(cfg_.shard_engines, 1)) != cfg_.shard_engine) {
      sh.children.clear();
      sh.parent = -1;
      continue;
    }
    sh.acc = std::make_unique<agg::Accumulator>(sh.floats, chunk_floats);
    sh.up_seen.assign(sh.acc->chunk_count(), 0);
    sh.local_missing.assign(sh.acc->chunk_count(), 0);
    sh.local_absent.assign(sh.acc->chunk_count(), 0);
    sh.up_sent.assign(sh.acc->chunk_count(), 0);
    sh.down_have.assign(sh.acc->chunk_count(), 0);
    sh.child_ended.assign(sh.children.size(), 0);
    max_chunks = std::max(max_chunks, sh.acc->chunk_count());
    incoming += static_cast<uint32_t>(sh.children.size()) + (sh.parent >= 0 ? 1 : 0);
    auto add_out = [&](int peer) {
      auto o = std::make_unique<Out>();
      o->shard = static_cast<int>(s);
      o->peer = peer;
      outs.push_back(std::move(o));
      return static_cast<int>(outs.size() - 1);
    };
    if (sh.parent >= 0) sh.up_out = add_out(sh.parent);
    for (int c : sh.children) sh.child_out.push_back(add_out(c));
  }
  // RTT estimates of the senders being replaced, per peer, seed their successors.
  std::vector<std::pair<Nanos, Nanos>> rtt(plan.num_sites, {0, 0});
  for (const auto& o : outs_)
    if (o->peer >= 0 && o->peer < plan.num_sites && (o->sender->srtt() > 0 || o->sender->rto_hint() > 0))
      rtt[o->peer] = {o->sender->srtt() > 0 ? o->sender->srtt() : o->sender->rto_hint() / 3, o->sender->min_rtt()};
  // Their rate controllers too: a controller keeps its path's model across transfers, so a
  // new plan's sender to the same peer starts at the known rate instead of from startup.
  // (With link shares the link's model lives in the share: every sender attaches anew, with
  // its part of the job's weight under the new plan.)
  std::vector<std::vector<std::unique_ptr<ltp::RateController>>> kept(plan.num_sites);
  for (auto& o : outs_)
    if (o->peer >= 0 && o->peer < plan.num_sites && o->rc && !shared(o->peer)) kept[o->peer].push_back(std::move(o->rc));
  for (auto& o : outs) {
    if (own_shares_ && !own_link_shares_[o->peer]) {
      // Room for two plans' senders of the most shards a plan has (a switch attaches the
      // new senders before the old ones leave).
      ltp::LinkShareConfig lc;
      lc.max_flows = 2 * topo::kMaxShards + 8;
      own_link_shares_[o->peer] =
          std::make_unique<ltp::LinkShare>(std::make_unique<ltp::DeliveryRateController>(cfg_.rate), lc);
      cfg_.link_shares[o->peer] = own_link_shares_[o->peer].get();
    }
    ltp::SenderConfig sc = cfg_.sender;
    sc.local_node = cfg_.self_node;
    sc.peer_node = cfg_.site_nodes[o->peer];
    sc.max_chunks = max_chunks;
    if (shared(o->peer)) {
      o->rc = cfg_.link_shares[o->peer]->attach(cfg_.weight, cfg_.job);  // the job's senders: one group
    } else if (!kept[o->peer].empty()) {
      o->rc = std::move(kept[o->peer].back());
      kept[o->peer].pop_back();
    } else {
      o->rc = make_controller(cfg_);
    }
    o->sender = std::make_unique<ltp::Sender>(sc, *o->rc, rng_);
    o->sender->seed_rtt(rtt[o->peer].first, rtt[o->peer].second);
    o->left.reserve(shards[o->shard].acc->chunk_count());  // start_out resizes within this
    o->holes.reserve(shards[o->shard].acc->chunk_count());
  }
  ltp::ReceiverConfig rc = cfg_.receiver;
  rc.local_node = cfg_.self_node;
  rc.max_chunks = max_chunks;
  rc.max_transfers = std::max(rc.max_transfers, incoming + 4);
  // DATA of a round this site has not begun is dropped (the sender retries): accumulators
  // hold exactly one round.
  rc.rounds_ahead = 0;
  if (cfg_.reliable_baseline) {
    rc.early_close.enabled = false;
    rc.early_close.max_loss_fraction = 0;
  }
  auto receiver = std::make_unique<ltp::Receiver>(rc);

  plan_ = plan;
  policy_ = policy_version;
  shards_ = std::move(shards);
  outs_ = std::move(outs);
  receiver_ = std::move(receiver);
  result_.assign(plan.model_bytes / 4, 0.0f);
  have_plan_ = true;
  // Early DATA held for the next round: at most one model's chunks (it only grows, and keeps
  // what it holds: a plan installed between rounds does not lose the peers' early DATA).
  hold_slot_ = wire::data_msg_len(static_cast<uint16_t>(cfg_.chunk_bytes));
  hold_cap_ = std::min<uint64_t>(cfg_.early_hold_packets, plan.model_bytes / cfg_.chunk_bytes + 1);
  if (hold_len_.size() < hold_cap_) {
    hold_.resize(hold_cap_ * hold_slot_);
    hold_len_.resize(hold_cap_);
    hold_at_.resize(hold_cap_);
  }
  hold_n_ = std::min(hold_n_, hold_cap_);
  apply_codecs();
  size_buffers();
  return true;
}

std::span<float> SiteSync::result_range(int s) {
  return {result_.data() + shards_[s].first, shards_[s].floats};
}

bool SiteSync::begin_round(uint32_t round, std::span<const float> local, Nanos now, ltp::PacketSink& tx,
                           bool local_streaming) {
  if (!have_plan_ || running_ || local.size() != result_.size()) return false;
  now_ = now;
  round_ = round;
  running_ = true;
  done_ = false;
  started_ = now;
  local_ = local;
  pending_up_.clear();
  pending_down_.clear();
  dirty_.clear();
  std::fill(moved_on_.begin(), moved_on_.end(), 0);
  // Closes what is left of earlier rounds; their callbacks are ignored (round mismatch).
  receiver_->begin_round(cfg_.job, round, policy_, now, *this, tx);
  for (auto& o : outs_) o->started = o->dirty = false;
  const size_t cf = cfg_.chunk_bytes / 4;
  for (size_t s = 0; s < shards_.size(); ++s) {
    Shard& sh = shards_[s];
    if (!sh.acc) {  // another engine's shard: nothing to do here this round
      sh.up_done = sh.down_done = true;
      continue;
    }
    sh.acc->reset();
    std::fill(sh.up_seen.begin(), sh.up_seen.end(), 0);
    std::fill(sh.up_sent.begin(), sh.up_sent.end(), 0);
    std::fill(sh.local_absent.begin(), sh.local_absent.end(), 0);
    std::fill(sh.down_have.begin(), sh.down_have.end(), 0);
    sh.up_ready = sh.down_ready = 0;
    sh.children_done = 0;
    std::fill(sh.child_ended.begin(), sh.child_ended.end(), 0);
    sh.up_done = sh.down_done = sh.down_started = false;
    // Our own contribution goes in first, one contributor per chunk -- or, streaming, each
    // chunk once local_ready() completed it.
    const auto mine = local.subspan(sh.first, sh.floats);
    for (uint32_t c = 0; c < sh.acc->chunk_count(); ++c) {
      const size_t off = c * cf;
      const size_t n = std::min(cf, sh.floats - off);
      sh.local_missing[c] = local_streaming ? static_cast<uint32_t>(n) : 0;
      if (!local_streaming) sh.acc->add(c, as_bytes(mine.subspan(off, n)), 1);
    }
    // The up transfer starts now and streams chunks as they complete.
    if (sh.parent >= 0) {
      Out& o = *outs_[sh.up_out];
      const Link& l = links_[sh.parent];
      o.codec = o.enc.empty() ? CodecId::kF32 : l.codec;
      o.topk_ratio = l.topk_ratio;
      if (o.codec == CodecId::kF32) {
        // The sender reads a chunk once up_chunk_ready released it: complete, or zeroed as a hole.
        start_out(sh.up_out, o.codec, as_bytes(sh.acc->storage()), cfg_.chunk_bytes, static_cast<uint16_t>(sh.subtree), now,
                  1);
      } else {
        const size_t n0 = std::min(cf, sh.floats);
        o.stride = compress::encoded_size(o.codec, n0, o.codec == CodecId::kTopK ? compress::topk_count(n0, o.topk_ratio) : 0);
        const size_t total = encoded_total(o.codec, sh.floats, cf, o.topk_ratio);
        start_out(sh.up_out, o.codec, std::span<const uint8_t>(o.enc).first(total), static_cast<uint32_t>(o.stride),
                  static_cast<uint16_t>(sh.subtree), now, pack_factor(o.codec, n0, cfg_.chunk_bytes));
      }
    } else {
      // The root picks the down codec: the strongest its links to this shard's children use.
      CodecId dc = CodecId::kF32;
      for (int c : sh.children)
        if (strength(links_[c].codec) > strength(dc)) dc = links_[c].codec;
      if (dc == CodecId::kTopK) dc = CodecId::kInt8;
      if (down_residual_.empty()) dc = CodecId::kF32;
      start_down(static_cast<int>(s), dc, now);
    }
    if (sh.children.empty() && !local_streaming)
      for (uint32_t c = 0; c < sh.acc->chunk_count(); ++c) try_up(static_cast<int>(s), c);
  }
  replay_held(round, now, tx);  // peers' DATA of this round that came before it began here
  advance(now, tx);
  return true;
}

void SiteSync::local_ready(size_t first, size_t count, Nanos now, ltp::PacketSink& tx, bool present) {
  if (!running_ || first >= local_.size() || count == 0) return;
  now_ = now;
  const size_t end = std::min(local_.size(), first + count);
  const size_t cf = cfg_.chunk_bytes / 4;
  for (size_t s = 0; s < shards_.size(); ++s) {
    Shard& sh = shards_[s];
    const size_t lo = std::max(first, sh.first), hi = std::min(end, sh.first + sh.floats);
    if (lo >= hi || !sh.acc) continue;
    for (size_t c = (lo - sh.first) / cf; c * cf + sh.first < hi; ++c) {
      const size_t clo = sh.first + c * cf;
      const size_t chi = std::min(clo + cf, sh.first + sh.floats);
      const auto got = static_cast<uint32_t>(std::min(hi, chi) - std::max(lo, clo));
      uint32_t& miss = sh.local_missing[c];
      if (miss == 0 || sh.up_sent[c]) continue;
      miss = got >= miss ? 0 : miss - got;
      if (!present) sh.local_absent[c] = 1;
      if (miss > 0) continue;
      if (!sh.local_absent[c]) sh.acc->add(static_cast<uint32_t>(c), as_bytes(local_.subspan(clo, chi - clo)), 1);
      try_up(static_cast<int>(s), static_cast<uint32_t>(c));
    }
  }
  advance(now, tx);
}

// Chunk c of shard s is complete once every child's copy arrived or was given up and our own
// part is in (or given up at the round timeout).
void SiteSync::try_up(int s, uint32_t c) {
  Shard& sh = shards_[s];
  if (sh.up_sent[c] || sh.up_seen[c] < sh.children.size() || sh.local_missing[c] != 0) return;
  sh.up_sent[c] = 1;
  up_chunk_ready(s, c);
}

bool SiteSync::start_out(int oi, CodecId codec, std::span<const uint8_t> data, uint32_t chunk_size,
                         uint16_t contributors, Nanos now, uint32_t pack) {
  Out& o = *outs_[oi];
  // A peer that moved on or restarted this round takes nothing more of it.
  if (moved_on_[static_cast<size_t>(o.peer)]) {
    o.started = false;
    return false;
  }
  const uint32_t n = shards_[o.shard].acc->chunk_count();
  o.pack = pack;
  o.left.assign(groups(n, pack), 0);
  o.holes.assign(groups(n, pack), 0);
  for (uint32_t j = 0; j < o.left.size(); ++j) o.left[j] = static_cast<uint8_t>(std::min(pack, n - j * pack));
  chunk_size *= pack;  // the last packet may be shorter
  ltp::TransferSpec spec;
  spec.job = cfg_.job;
  spec.round = round_;
  spec.policy_version = policy_;
  spec.shard = static_cast<uint16_t>(o.shard);
  spec.contributors = contributors;
  spec.codec = codec;
  spec.chunk_size = chunk_size;
  spec.data = data;
  spec.streaming = true;
  o.started = o.sender->start(spec, now);
  return o.started;
}

// Down senders of shard s to every child, carrying `codec` (the root's choice).
void SiteSync::start_down(int s, CodecId codec, Nanos now) {
  Shard& sh = shards_[s];
  if (sh.down_started) return;
  sh.down_started = true;
  const size_t cf = cfg_.chunk_bytes / 4;
  if (codec != CodecId::kF32 && sh.down_enc.empty()) codec = CodecId::kF32;  // no buffer: forward decoded
  sh.down_codec = codec;
  sh.down_stride = compress::encoded_size(codec, std::min(cf, sh.floats));
  const uint16_t contributors = static_cast<uint16_t>(sh.parent < 0 ? sh.subtree : plan_.num_sites);
  for (size_t k = 0; k < sh.children.size(); ++k) {
    if (codec == CodecId::kF32) {
      start_out(sh.child_out[k], codec, as_bytes(std::span<const float>(result_range(s))), cfg_.chunk_bytes, contributors, now,
                1);
    } else {
      const size_t total = encoded_total(codec, sh.floats, cf, 0);
      start_out(sh.child_out[k], codec, std::span<const uint8_t>(sh.down_enc).first(total),
                static_cast<uint32_t>(sh.down_stride), contributors, now,
                pack_factor(codec, std::min(cf, sh.floats), cfg_.chunk_bytes));
    }
  }
}

// Accumulator chunk c is ready for out oi; its packet leaves once all chunks it packs are.
void SiteSync::release(int oi, uint32_t c, bool hole) {
  Out& o = *outs_[oi];
  if (!o.started) return;
  const uint32_t j = c / o.pack;
  if (j >= o.left.size() || o.left[j] == 0) return;
  if (hole) o.holes[j] |= static_cast<uint8_t>(1u << (c % o.pack));
  if (--o.left[j] > 0) return;
  o.sender->release(j, now_, o.holes[j]);
  if (!o.dirty) {
    o.dirty = true;
    dirty_.push_back(oi);
  }
}

// Chunk c of shard s holds every contribution it will get: scale, then send it on.
void SiteSync::up_chunk_ready(int s, uint32_t c) {
  Shard& sh = shards_[s];
  // Chunks some contributors are missing from are scaled to the subtree's full count, so
  // the mean at the root averages what arrived instead of counting bubbles as zeros.
  const uint32_t have = sh.acc->contributors(c);
  if (have == 0) {
    // Nothing of this chunk reached us (our own part absent, every child's a bubble or a
    // hole): a hole for the parent; at the root, filled like a chunk the parent never sent.
    if (sh.parent >= 0) {
      sh.acc->chunk_data(c);  // zeroes it: a packet packing this hole with other chunks carries its bytes
      release(sh.up_out, c, /*hole=*/true);
    } else {
      fill_down(s, c);
    }
    if (++sh.up_ready == sh.acc->chunk_count()) {
      sh.up_done = true;
      if (sh.parent < 0) sh.down_done = true;
    }
    return;
  }
  auto vals = sh.acc->chunk_data(c);
  if (have > 0 && have < sh.subtree) {
    const float k = static_cast<float>(sh.subtree) / static_cast<float>(have);
    for (float& v : vals) v *= k;
  }
  const size_t cf = cfg_.chunk_bytes / 4;
  const size_t off = static_cast<size_t>(c) * cf;
  if (sh.parent >= 0) {
    Out& o = *outs_[sh.up_out];
    if (o.codec != CodecId::kF32 && o.started) {
      auto out = std::span<uint8_t>(o.enc).subspan(c * o.stride);
      auto res = std::span<float>(up_residual_).subspan(sh.first + off, vals.size());
      if (encoder_.encode(o.codec, vals, out, res, o.topk_ratio).err == compress::CodecError::kOk)
        ++stats_.encoded_chunks;
    } else if (o.codec == CodecId::kF32 && !up_residual_.empty()) {
      flush_residual(vals, std::span<float>(up_residual_).subspan(sh.first + off, vals.size()));
    }
    release(sh.up_out, c);
  } else {
    // Root of floats this site once sent up compressed: what its codec held back joins the sum.
    if (!up_residual_.empty()) flush_residual(vals, std::span<float>(up_residual_).subspan(sh.first + off, vals.size()));
    auto out = result_range(s).subspan(off, vals.size());
    const float inv = 1.0f / static_cast<float>(sh.subtree);
    for (size_t i = 0; i < out.size(); ++i) out[i] = vals[i] * inv;
    if (sh.down_codec != CodecId::kF32) {
      // Encode once for the whole tree; our own result is what everyone else decodes.
      auto enc = std::span<uint8_t>(sh.down_enc).subspan(c * sh.down_stride);
      auto res = std::span<float>(down_residual_).subspan(sh.first + off, out.size());
      auto r = encoder_.encode(sh.down_codec, out, enc, res);
      if (r.err == compress::CodecError::kOk) {
        compress::decode(sh.down_codec, enc.first(r.bytes), out);
        ++stats_.encoded_chunks;
      }
    } else if (!down_residual_.empty()) {
      flush_residual(out, std::span<float>(down_residual_).subspan(sh.first + off, out.size()));
    }
    down_chunk_ready(s, c);
  }
  if (++sh.up_ready == sh.acc->chunk_count()) {
    sh.up_done = true;
    if (sh.parent < 0) sh.down_done = true;
  }
}

// Result chunk c of shard s is final here: pass it to the children.
void SiteSync::down_chunk_ready(int s, uint32_t c) {
  Shard& sh = shards_[s];
  if (sh.down_have[c]) return;
  sh.down_have[c] = 1;
  ++sh.down_ready;
  for (int oi : sh.child_out) release(oi, c);
  if (results_) {
    const size_t off = static_cast<size_t>(c) * (cfg_.chunk_bytes / 4);
    results_->on_result(sh.first + off, std::min<size_t>(cfg_.chunk_bytes / 4, sh.floats - off));
  }
}

// Chunk c never came from the parent: this site's own values (or zeros, or the previous
// round's), forwarded in the shard's down codec so children still get every chunk.
void SiteSync::fill_down(int s, uint32_t c) {
  Shard& sh = shards_[s];
  if (sh.down_have[c]) return;
  const size_t cf = cfg_.chunk_bytes / 4;
  const size_t off = static_cast<size_t>(c) * cf;
  auto out = result_range(s).subspan(off, std::min(cf, sh.floats - off));
  switch (cfg_.down_fill) {
    case ltp::FillRule::kZero: std::fill(out.begin(), out.end(), 0.0f); break;
    case ltp::FillRule::kLocal: {
      auto mine = local_.subspan(sh.first + off, out.size());
      std::copy(mine.begin(), mine.end(), out.begin());
      break;
    }
    case ltp::FillRule::kPrevious: break;  // result_ still holds the previous round's values
  }
  if (sh.down_started && sh.down_codec != CodecId::kF32) {
    auto enc = std::span<uint8_t>(sh.down_enc).subspan(c * sh.down_stride);
    encoder_.encode(sh.down_codec, out, enc);
  }
  down_chunk_ready(s, c);
}

// How many accumulator chunks each DATA of this transfer packs (0: a shape we cannot read).
// The codec's pack factor when the packet count fits it; else (a bubble of a transfer whose
// codec never arrived) the factor the count implies, which still names every chunk once.
uint32_t SiteSync::pack_of(const Shard& sh, CodecId codec, uint32_t chunk_count) const {
  const uint32_t n = sh.acc->chunk_count();
  const uint32_t k = pack_factor(codec, std::min<size_t>(cfg_.chunk_bytes / 4, sh.floats), cfg_.chunk_bytes);
  if (groups(n, k) == chunk_count) return k;
  if (chunk_count == 0) return 0;
  const uint32_t k2 = groups(n, chunk_count);
  return k2 <= kMaxPack && groups(n, k2) == chunk_count ? k2 : 0;
}

void SiteSync::on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) {
  if (!running_ || c.key.round != round_ || c.key.job != cfg_.job || c.key.shard >= shards_.size()) {
    ++stats_.bad_chunks;
    return;
  }
  const int s = c.key.shard;
  Shard& sh = shards_[s];
  const int src = index_of(c.key.src_node);
  const uint32_t k = src < 0 || !sh.acc ? 0 : pack_of(sh, c.codec, c.chunk_count);
  if (k == 0) {
    ++stats_.bad_chunks;
    return;
  }
  if (k == 1) {
    on_part(s, src, c.chunk_index, c.codec, c.contributors, (c.holes & 1) != 0, payload);
    return;
  }
  // Packed: the encoded chunks lie back to back, each the full chunk's size but the shard's last.
  const uint32_t n = sh.acc->chunk_count();
  const size_t cf = cfg_.chunk_bytes / 4;
  const size_t stride = compress::encoded_size(c.codec, std::min(cf, sh.floats));
  for (uint32_t i = 0; i < k; ++i) {
    const uint64_t a = static_cast<uint64_t>(c.chunk_index) * k + i;
    if (a >= n) break;
    const size_t off = i * stride;
    const size_t len = compress::encoded_size(c.codec, sh.acc->chunk_elems(static_cast<uint32_t>(a)));
    const auto part = off + len <= payload.size() ? payload.subspan(off, len) : std::span<const uint8_t>{};
    on_part(s, src, static_cast<uint32_t>(a), c.codec, c.contributors, (c.holes >> i) & 1, part);
  }
}

// Accumulator chunk `a` of shard s arrived from plan site `src` (a part of a packed DATA, or
// a whole one): added going up, taken as the result going down.
void SiteSync::on_part(int s, int src, uint32_t a, CodecId codec, uint16_t contributors, bool hole,
                       std::span<const uint8_t> payload) {
  Shard& sh = shards_[s];
  if (std::find(sh.children.begin(), sh.children.end(), src) != sh.children.end()) {
    if (sh.up_seen[a] >= sh.children.size()) {  // already complete (timeout): late
      ++stats_.bad_chunks;
      return;
    }
    // A hole adds nothing, like a bubble.
    if (!hole && compress::add_encoded(*sh.acc, a, codec, payload, contributors) != compress::CodecError::kOk)
      ++stats_.bad_chunks;  // counts as absent: the rescale covers it
    ++sh.up_seen[a];
    try_up(s, a);
    return;
  }
  if (src != sh.parent) {
    ++stats_.bad_chunks;
    return;
  }
  if (sh.down_have[a]) return;
  if (hole) {
    ++stats_.down_bubbles;  // the root never sends holes; filled like one that never came
    start_down(s, CodecId::kF32, now_);
    fill_down(s, a);
    return;
  }
  const size_t cf = cfg_.chunk_bytes / 4;
  const size_t off = static_cast<size_t>(a) * cf;
  auto out = result_range(s).subspan(off, std::min(cf, sh.floats - off));
  // The children get the root's bytes as they are; a codec we cannot forward (none of ours
  // sends one) is decoded and forwarded re-encoded in the shard's codec.
  CodecId fwd = codec;
  if (fwd == CodecId::kTopK || (fwd != CodecId::kF32 && sh.down_enc.empty())) fwd = CodecId::kF32;
  start_down(s, fwd, now_);
  if (compress::decode(codec, payload, out) != compress::CodecError::kOk) {
    ++stats_.bad_chunks;
    fill_down(s, a);
    return;
  }
  if (sh.down_codec != CodecId::kF32) {
    auto enc = std::span<uint8_t>(sh.down_enc).subspan(a * sh.down_stride);
    if (codec == sh.down_codec && payload.size() <= enc.size())
      std::copy(payload.begin(), payload.end(), enc.begin());
    else
      encoder_.encode(sh.down_codec, out, enc);
  }
  down_chunk_ready(s, a);
}

void SiteSync::on_bubble(const ltp::ChunkRef& c, ltp::FillRule) {
  if (!running_ || c.key.round != round_ || c.key.shard >= shards_.size()) return;
  const int s = c.key.shard;
  Shard& sh = shards_[s];
  const int src = index_of(c.key.src_node);
  const uint32_t k = src < 0 || !sh.acc ? 0 : pack_of(sh, c.codec, c.chunk_count);
  const bool from_parent = src >= 0 && src == sh.parent;
  const bool from_child = src >= 0 && std::find(sh.children.begin(), sh.children.end(), src) != sh.children.end();
  for (uint32_t i = 0; i < k; ++i) {
    const uint64_t a = static_cast<uint64_t>(c.chunk_index) * k + i;
    if (a >= sh.acc->chunk_count()) break;
    if (from_parent) {
      ++stats_.down_bubbles;
      start_down(s, CodecId::kF32, now_);  // nothing arrived to say the root's codec
      fill_down(s, static_cast<uint32_t>(a));
    } else if (from_child) {
      ++stats_.up_bubbles;  // absent contributor: the chunk's count says so, the rescale handles it
      if (sh.up_seen[a] < sh.children.size()) {
        ++sh.up_seen[a];
        try_up(s, static_cast<uint32_t>(a));
      }
    }
  }
}

bool SiteSync::early_close_allowed(const ltp::TransferKey& k) const {
  if (cfg_.down_early_close || k.job != cfg_.job || k.shard >= shards_.size()) return true;
  const int src = index_of(k.src_node);
  return src < 0 || src != shards_[k.shard].parent;
}

void SiteSync::on_transfer_end(const ltp::TransferSummary& s) {
  if (s.reason == ltp::CloseReason::kEarlyClose) ++stats_.early_closes;
  if (s.fell_back) ++stats_.fallbacks;
  if (!running_ || s.key.round != round_ || s.key.shard >= shards_.size()) return;
  Shard& sh = shards_[s.key.shard];
  const int src = index_of(s.key.src_node);
  const auto child = std::find(sh.children.begin(), sh.children.end(), src);
  if (src >= 0 && child != sh.children.end()) {
    uint8_t& ended = sh.child_ended[static_cast<size_t>(child - sh.children.begin())];
    if (ended) return;
    ended = 1;
    if (++sh.children_done == sh.children.size()) pending_up_.push_back(s.key.shard);
  } else if (src >= 0 && src == sh.parent) {
    pending_down_.push_back(s.key.shard);
  }
}

// Plan site p began a round after ours: its DATA is for a later round, or it answered ours
// with CLOSE kStale. A site begins a round only once its senders of the last one are done
// or given up, so what p has not delivered for our round never will be: it is given up now,
// like at the round timeout but for p alone. Without this, a site one round behind (back
// from a restart, or after a timeout on one side only) stays out of phase with p and every
// round of both ends by timeout.
void SiteSync::peer_moved_on(int p, ltp::PacketSink& tx) {
  // Once per peer and round: every later packet of that peer says the same.
  if (!running_ || p < 0 || p == self_ || moved_on_[static_cast<size_t>(p)]) return;
  moved_on_[static_cast<size_t>(p)] = 1;
  bool gave_up = false;
  for (size_t s = 0; s < shards_.size(); ++s) {
    Shard& sh = shards_[s];
    if (!sh.acc) continue;
    const ltp::TransferKey key{cfg_.job, round_, static_cast<uint16_t>(s), cfg_.site_nodes[p]};
    const auto child = std::find(sh.children.begin(), sh.children.end(), p);
    if (child != sh.children.end()) {
      const size_t i = static_cast<size_t>(child - sh.children.begin());
      if (sh.child_ended[i]) continue;
      gave_up = true;
      if (receiver_->abandon(key, now_, *this, tx)) continue;  // its bubbles and end came back
      // Nothing of it ever arrived: every chunk is a bubble.
      for (uint32_t c = 0; c < sh.acc->chunk_count(); ++c) {
        if (sh.up_seen[c] >= sh.children.size()) continue;
        ++stats_.up_bubbles;
        ++sh.up_seen[c];
        try_up(static_cast<int>(s), c);
      }
      sh.child_ended[i] = 1;
      if (++sh.children_done == sh.children.size()) pending_up_.push_back(static_cast<int>(s));
    } else if (p == sh.parent && !sh.down_done) {
      gave_up = true;
      if (!receiver_->abandon(key, now_, *this, tx)) pending_down_.push_back(static_cast<int>(s));
    }
  }
  if (gave_up) ++stats_.peers_moved_on;
}

void SiteSync::abandon_out(Out& o) {
  uint32_t max_chunks = 1;
  for (const auto& sh : shards_)
    if (sh.acc) max_chunks = std::max(max_chunks, sh.acc->chunk_count());
  ltp::SenderConfig sc = cfg_.sender;
  sc.local_node = cfg_.self_node;
  sc.peer_node = cfg_.site_nodes[static_cast<size_t>(o.peer)];
  sc.max_chunks = max_chunks;
  if (shared(o.peer)) {
    // Its flow in the link's share stays (a private controller here took the link's senders
    // out of the share until the next plan); the flow hears its transfer ended.
    o.rc->on_demand(now_, ltp::Demand::kDone);
  } else {
    o.rc = make_controller(cfg_);
  }
  o.sender = std::make_unique<ltp::Sender>(sc, *o.rc, rng_);
  o.started = false;
  o.dirty = false;  // an index left in dirty_ finds it unstarted and skips it
}

// Plan site p came back as a new process while this round runs. The old one's part that has
// not arrived never will, and what we sent it died with it: the new one keeps nothing of
// this round, and our senders would resend only what the old one had not acknowledged, so a
// result it had acknowledged in part would never be complete there and both sites would wait
// for the round timeout. The round goes on without p, as when p moves on, and our senders to
// p are dropped (nothing new starts to p this round). The new process rejoins this round or a
// later one; its DATA of this round, once we have moved on, is answered CLOSE kStale and it
// gives the round up too (peer_moved_on there).
void SiteSync::peer_restarted(int p, Nanos now, ltp::PacketSink& tx) {
  if (!running_ || p < 0 || p == self_ || static_cast<size_t>(p) >= cfg_.site_nodes.size()) return;
  now_ = now;
  ++stats_.peer_restarts;
  peer_moved_on(p, tx);  // nothing if p's later round already said so
  for (auto& o : outs_)
    if (o->peer == p && o->started && !o->sender->done()) abandon_out(*o);
  advance(now, tx);
}

bool SiteSync::hold_early(std::span<const uint8_t> msg) {
  // Not before this site's first round: gateways come up seconds apart, and a transfer held
  // whole would end in a CLOSE without a single ACK, which leaves a spraying sender's paths
  // unmeasured (the peers resend after their timeouts, as before).
  if (hold_n_ >= hold_cap_ || msg.size() > hold_slot_ || round_ == 0) return false;
  if (hold_n_ == 0) hold_round_ = round_ + 1;
  if (hold_round_ != round_ + 1) return false;  // cannot happen: begin_round empties it
  std::memcpy(hold_.data() + hold_n_ * hold_slot_, msg.data(), msg.size());
  hold_at_[hold_n_] = now_;
  hold_len_[hold_n_++] = static_cast<uint16_t>(msg.size());
  return true;
}

void SiteSync::replay_held(uint32_t round, Nanos now, ltp::PacketSink& tx) {
  const size_t n = hold_n_;
  hold_n_ = 0;
  if (n == 0 || hold_round_ != round) return;
  // Path by path, in bursts, each burst answered by its ACK. The receiver answers a burst with
  // one ACK that names the path (and echoes the send time) of its last arrival; a spraying
  // sender measures each path by the ACKs that name it, so one mixed replay would answer
  // a single path and leave the others' sends unanswered.
  constexpr size_t kBurst = 32;
  auto path_of = [&](size_t i) {
    return reinterpret_cast<const wire::DataHeader*>(hold_.data() + i * hold_slot_)->path_id.load();
  };
  replaying_ = true;
  receiver_->set_replaying(true);
  for (size_t first = 0; first < n;) {
    const uint16_t path = path_of(first);
    size_t in_burst = 0, next = n;
    for (size_t i = first; i < n; ++i) {
      if (hold_len_[i] == 0) continue;  // replayed with an earlier path
      if (path_of(i) != path) {
        next = std::min(next, i);
        continue;
      }
      // As if sent when it was taken: the ACK's echo, and so the sender's RTT samples, loss
      // timers and rate model, must not count the hold, nor this site's RTT from its echo.
      auto* h = reinterpret_cast<wire::DataHeader*>(hold_.data() + i * hold_slot_);
      const auto held = static_cast<uint64_t>(std::max<Nanos>(0, now - hold_at_[i]));
      h->send_ts.store(h->send_ts.load() + held);
      if (h->echo_ts.load() != 0) h->echo_ts.store(h->echo_ts.load() + held);
      receiver_->on_packet(std::span<const uint8_t>(hold_.data() + i * hold_slot_, hold_len_[i]), now, *this, tx);
      hold_len_[i] = 0;
      if (++in_burst == kBurst) {
        receiver_->poll(now, *this, tx);
        in_burst = 0;
      }
    }
    if (in_burst) receiver_->poll(now, *this, tx);
    first = next;
  }
  receiver_->set_replaying(false);
  replaying_ = false;
}

void SiteSync::on_sample(const ltp::ArrivalSample& s) {
  if (samples_ && !replaying_) samples_->on_sample(s);
}

// Every child's transfer ended (or the round timed out): chunks still short of a copy are
// complete with what they have -- and at the timeout (without_local) also without our own
// part where it never came.
void SiteSync::up_complete(int s, bool without_local) {
  Shard& sh = shards_[s];
  if (sh.up_done) return;
  for (uint32_t c = 0; c < sh.acc->chunk_count(); ++c) {
    if (sh.up_sent[c]) continue;
    sh.up_seen[c] = static_cast<uint16_t>(sh.children.size());
    if (without_local && sh.local_missing[c] != 0) {
      sh.local_missing[c] = 0;
      sh.local_absent[c] = 1;
    }
    try_up(s, c);
  }
}

// The parent's transfer ended: anything it did not deliver is filled.
void SiteSync::down_complete(int s) {
  Shard& sh = shards_[s];
  if (sh.down_done) return;
  start_down(s, CodecId::kF32, now_);
  for (uint32_t c = 0; c < sh.acc->chunk_count(); ++c) fill_down(s, c);
  sh.down_done = true;
}

void SiteSync::advance(Nanos now, ltp::PacketSink& tx) {
  // Phase completions found inside receiver callbacks are handled here, where tx is at hand.
  while (!pending_up_.empty() || !pending_down_.empty()) {
    if (!pending_up_.empty()) {
      const int s = pending_up_.back();
      pending_up_.pop_back();
      up_complete(s, false);
    } else {
      const int s = pending_down_.back();
      pending_down_.pop_back();
      down_complete(s);
    }
  }
  for (size_t i = 0; i < dirty_.size(); ++i) {
    Out& o = *outs_[dirty_[i]];
    o.dirty = false;
    if (o.started && !o.sender->done()) o.sender->poll(now, tx);
  }
  dirty_.clear();
  finish_round_if_done(now);
}

void SiteSync::finish_round_if_done(Nanos now) {
  if (!running_) return;
  for (const auto& sh : shards_)
    if (!sh.down_done) return;
  for (const auto& o : outs_)
    if (o->started && !o->sender->done()) return;
  running_ = false;
  done_ = true;
  finished_ = now;
  ++stats_.rounds;
  for (const auto& o : outs_) {
    if (!o->started) continue;
    stats_.bytes_sent += o->sender->stats().bytes_sent;
    stats_.retransmits += o->sender->stats().retransmits;
    stats_.rto_expiries += o->sender->stats().timeouts;
  }
}

void SiteSync::on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) {
  now_ = now;
  auto common = wire::parse_common(msg);
  if (!common) return;  // the dataplane counts malformed LTP before it gets here
  if (common->type == wire::MsgType::kData) {
    if (msg.size() >= sizeof(wire::DataHeader)) {
      const auto* h = reinterpret_cast<const wire::DataHeader*>(msg.data());
      if (h->common.job.load() == cfg_.job && h->round.load() > round_) {
        const int src = index_of(common->src_node);  // only DATA of a later round gets here
        if (running_) peer_moved_on(src, tx);
        else if (h->round.load() == round_ + 1 && src >= 0 && src != self_) peer_began_ = round_ + 1;
        if (h->round.load() == round_ + 1 && src >= 0 && src != self_ && hold_early(msg)) {
          ++stats_.early_data;
          ++stats_.early_held;
          if (receiver_->ack_ahead(msg, now, tx)) ++stats_.early_acked;
          return;
        }
      }
    }
    const uint64_t early = receiver_->stats().future_round;
    receiver_->on_packet(msg, now, *this, tx);
    stats_.early_data += receiver_->stats().future_round - early;
    advance(now, tx);
    return;
  }
  uint32_t round = 0;
  int shard = -1;
  if (common->type == wire::MsgType::kAck) {
    auto a = wire::parse_ack(msg);
    if (!a) return;
    round = a->f.round;
    shard = a->f.shard;
  } else if (common->type == wire::MsgType::kClose) {
    auto c = wire::parse_close(msg);
    if (!c) return;
    round = c->f.round;
    shard = c->f.shard;
    // Our DATA of this round is stale there: that site runs a later round.
    if (running_ && c->f.reason == ltp::CloseReason::kStale && round == round_ && c->f.policy_version == policy_)
      peer_moved_on(index_of(common->src_node), tx);
  } else if (common->type != wire::MsgType::kReject) {
    return;
  }
  const int peer = index_of(common->src_node);
  bool matched = false;
  for (auto& o : outs_) {
    if (!o->started || o->peer != peer) continue;
    if (shard >= 0 && (o->shard != shard || round != round_)) continue;
    o->sender->on_packet(msg, now);
    o->sender->poll(now, tx);
    matched = true;
  }
  if (!matched) ++stats_.stray_acks;
  advance(now, tx);
}

Nanos SiteSync::poll(Nanos now, ltp::PacketSink& tx) {
  now_ = now;
  if (!have_plan_) return ltp::kNever;
  Nanos next = receiver_->poll(now, *this, tx);
  for (auto& o : outs_)
    if (o->started && !o->sender->done()) next = std::min(next, o->sender->poll(now, tx));
  advance(now, tx);
  if (running_ && now - started_ >= cfg_.round_timeout) {
    // Give up on whoever did not deliver: absent contributors going up, fills going down.
    ++stats_.timeouts;
    for (size_t s = 0; s < shards_.size(); ++s) {
      up_complete(static_cast<int>(s), true);
      down_complete(static_cast<int>(s));
    }
    dirty_.clear();
    for (auto& o : outs_) o->dirty = false;
    // Senders still trying are abandoned: fresh ones for the next round.
    for (auto& o : outs_)
      if (o->started && !o->sender->done()) abandon_out(*o);
    finish_round_if_done(now);
  }
  if (running_) next = std::min(next, started_ + cfg_.round_timeout);
  return next;
}

}  // namespace sg::sync
