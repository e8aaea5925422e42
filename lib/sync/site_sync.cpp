#include "sync/site_sync.h"

#include <algorithm>
#include <cstring>

#include "compress/accumulate.h"
#include "compress/codec.h"
#include "ltp/aimd_controller.h"
#include "ltp/delivery_rate_controller.h"
#include "wire/ltp_codec.h"

namespace sg::sync {

struct SiteSync::Out {
  std::unique_ptr<ltp::RateController> rc;
  std::unique_ptr<ltp::Sender> sender;
  int shard = -1;
  int peer = -1;  // plan index
  bool started = false;
};

struct SiteSync::Shard {
  int parent = -1;  // plan index; -1 at the root
  std::vector<int> children;
  std::vector<int> child_out;  // outs_ index per child (down sends)
  int up_out = -1;             // outs_ index for the send to the parent
  uint32_t subtree = 1;        // sites whose gradients this site's sum holds
  size_t first = 0, floats = 0;
  std::unique_ptr<agg::Accumulator> acc;
  uint32_t children_done = 0;
  bool up_done = false;
  bool down_done = false;
};

namespace {

std::unique_ptr<ltp::RateController> make_controller(bool reliable) {
  if (reliable) return std::make_unique<ltp::AimdController>();
  return std::make_unique<ltp::DeliveryRateController>();
}

std::span<const uint8_t> as_bytes(std::span<const float> f) {
  return {reinterpret_cast<const uint8_t*>(f.data()), f.size() * sizeof(float)};
}

}  // namespace

SiteSync::SiteSync(const SyncConfig& cfg) : cfg_(cfg), rng_(cfg.seed) {
  for (size_t i = 0; i < cfg_.site_nodes.size(); ++i)
    if (cfg_.site_nodes[i] == cfg_.self_node) self_ = static_cast<int>(i);
}

SiteSync::~SiteSync() = default;

int SiteSync::index_of(uint16_t node) const {
  for (size_t i = 0; i < cfg_.site_nodes.size(); ++i)
    if (cfg_.site_nodes[i] == node) return static_cast<int>(i);
  return -1;
}

bool SiteSync::set_plan(const topo::Plan& plan, uint32_t policy_version) {
  if (running_ || self_ < 0 || cfg_.chunk_bytes == 0 || cfg_.chunk_bytes % 4) return false;
  if (topo::validate(plan) != topo::PlanError::kOk) return false;
  if (plan.num_sites != cfg_.site_nodes.size() || plan.model_bytes % 4) return false;
  for (const auto& t : plan.shards)
    if (t.byte_begin % 4 || t.byte_end % 4 || t.bytes() == 0) return false;

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
    sh.acc = std::make_unique<agg::Accumulator>(sh.floats, chunk_floats);
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
  for (auto& o : outs) {
    ltp::SenderConfig sc = cfg_.sender;
    sc.local_node = cfg_.self_node;
    sc.peer_node = cfg_.site_nodes[o->peer];
    sc.max_chunks = max_chunks;
    o->rc = make_controller(cfg_.reliable_baseline);
    o->sender = std::make_unique<ltp::Sender>(sc, *o->rc, rng_);
    o->sender->seed_rtt(rtt[o->peer].first, rtt[o->peer].second);
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
  return true;
}

std::span<float> SiteSync::result_range(int s) {
  return {result_.data() + shards_[s].first, shards_[s].floats};
}

bool SiteSync::begin_round(uint32_t round, std::span<const float> local, Nanos now, ltp::PacketSink& tx) {
  if (!have_plan_ || running_ || local.size() != result_.size()) return false;
  now_ = now;
  round_ = round;
  running_ = true;
  done_ = false;
  started_ = now;
  local_ = local;
  pending_up_.clear();
  pending_down_.clear();
  // Closes what is left of earlier rounds; their callbacks are ignored (round mismatch).
  receiver_->begin_round(cfg_.job, round, policy_, now, *this, tx);
  for (auto& o : outs_) o->started = false;
  for (size_t s = 0; s < shards_.size(); ++s) {
    Shard& sh = shards_[s];
    sh.acc->reset();
    sh.children_done = 0;
    sh.up_done = sh.down_done = false;
    // Our own contribution goes in first, one contributor per chunk.
    const auto mine = local.subspan(sh.first, sh.floats);
    const size_t cf = cfg_.chunk_bytes / 4;
    for (uint32_t c = 0; c < sh.acc->chunk_count(); ++c) {
      const size_t off = c * cf;
      sh.acc->add(c, as_bytes(mine.subspan(off, std::min(cf, sh.floats - off))), 1);
    }
    if (sh.children.empty()) pending_up_.push_back(static_cast<int>(s));
  }
  advance(now, tx);
  return true;
}

void SiteSync::on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) {
  if (!running_ || c.key.round != round_ || c.key.job != cfg_.job || c.key.shard >= shards_.size()) {
    ++stats_.bad_chunks;
    return;
  }
  Shard& sh = shards_[c.key.shard];
  const int src = index_of(c.key.src_node);
  if (src < 0 || c.chunk_count != sh.acc->chunk_count()) {
    ++stats_.bad_chunks;
    return;
  }
  if (std::find(sh.children.begin(), sh.children.end(), src) != sh.children.end()) {
    if (sh.up_done || compress::add_encoded(*sh.acc, c.chunk_index, c.codec, payload, c.contributors) !=
                          compress::CodecError::kOk)
      ++stats_.bad_chunks;
    return;
  }
  if (src == sh.parent && !sh.down_done) {
    const size_t cf = cfg_.chunk_bytes / 4;
    const size_t off = static_cast<size_t>(c.chunk_index) * cf;
    auto out = result_range(c.key.shard).subspan(off, std::min(cf, sh.floats - off));
    if (compress::decode(c.codec, payload, out) != compress::CodecError::kOk) ++stats_.bad_chunks;
    return;
  }
  ++stats_.bad_chunks;
}

void SiteSync::on_bubble(const ltp::ChunkRef& c, ltp::FillRule) {
  if (!running_ || c.key.round != round_ || c.key.shard >= shards_.size()) return;
  Shard& sh = shards_[c.key.shard];
  const int src = index_of(c.key.src_node);
  if (src >= 0 && src == sh.parent) {
    ++stats_.down_bubbles;
    const size_t cf = cfg_.chunk_bytes / 4;
    const size_t off = static_cast<size_t>(c.chunk_index) * cf;
    if (off >= sh.floats) return;
    auto out = result_range(c.key.shard).subspan(off, std::min(cf, sh.floats - off));
    switch (cfg_.down_fill) {
      case ltp::FillRule::kZero: std::fill(out.begin(), out.end(), 0.0f); break;
      case ltp::FillRule::kLocal: {
        auto mine = local_.subspan(sh.first + off, out.size());
        std::copy(mine.begin(), mine.end(), out.begin());
        break;
      }
      case ltp::FillRule::kPrevious: break;  // result_ still holds the previous round's values
    }
  } else {
    ++stats_.up_bubbles;  // absent contributor: the chunk's count says so, the rescale handles it
  }
}

void SiteSync::on_transfer_end(const ltp::TransferSummary& s) {
  if (s.reason == ltp::CloseReason::kEarlyClose) ++stats_.early_closes;
  if (s.fell_back) ++stats_.fallbacks;
  if (!running_ || s.key.round != round_ || s.key.shard >= shards_.size()) return;
  Shard& sh = shards_[s.key.shard];
  const int src = index_of(s.key.src_node);
  if (src >= 0 && std::find(sh.children.begin(), sh.children.end(), src) != sh.children.end()) {
    if (++sh.children_done == sh.children.size()) pending_up_.push_back(s.key.shard);
  } else if (src >= 0 && src == sh.parent) {
    pending_down_.push_back(s.key.shard);
  }
}

void SiteSync::on_sample(const ltp::ArrivalSample& s) {
  if (samples_) samples_->on_sample(s);
}

void SiteSync::send(int s, int peer, std::span<const float> data, uint16_t contributors, Nanos now,
                    ltp::PacketSink& tx) {
  Shard& sh = shards_[s];
  int oi = sh.up_out;
  for (size_t k = 0; k < sh.children.size(); ++k)
    if (sh.children[k] == peer) oi = sh.child_out[k];
  Out& o = *outs_[oi];
  ltp::TransferSpec spec;
  spec.job = cfg_.job;
  spec.round = round_;
  spec.policy_version = policy_;
  spec.shard = static_cast<uint16_t>(s);
  spec.contributors = contributors;
  spec.codec = CodecId::kF32;
  spec.chunk_size = cfg_.chunk_bytes;
  spec.data = as_bytes(data);
  if (o.sender->start(spec, now)) {
    o.started = true;
    o.sender->poll(now, tx);
  }
}

void SiteSync::up_complete(int s, Nanos now, ltp::PacketSink& tx) {
  Shard& sh = shards_[s];
  if (sh.up_done) return;
  sh.up_done = true;
  // Chunks some contributors are missing from are scaled to the subtree's full count, so
  // the mean at the root averages what arrived instead of counting bubbles as zeros.
  for (uint32_t c = 0; c < sh.acc->chunk_count(); ++c) {
    const uint32_t have = sh.acc->contributors(c);
    if (have > 0 && have < sh.subtree) {
      const float k = static_cast<float>(sh.subtree) / static_cast<float>(have);
      for (float& v : sh.acc->chunk_data(c)) v *= k;
    }
  }
  if (sh.parent < 0) {
    const float inv = 1.0f / static_cast<float>(sh.subtree);
    auto vals = sh.acc->values();
    auto out = result_range(s);
    for (size_t i = 0; i < out.size(); ++i) out[i] = vals[i] * inv;
    sh.down_done = true;
    for (int c : sh.children) send(s, c, result_range(s), static_cast<uint16_t>(sh.subtree), now, tx);
  } else {
    send(s, sh.parent, sh.acc->values(), static_cast<uint16_t>(sh.subtree), now, tx);
  }
}

void SiteSync::down_complete(int s, Nanos now, ltp::PacketSink& tx) {
  Shard& sh = shards_[s];
  if (sh.down_done) return;
  sh.down_done = true;
  for (int c : sh.children) send(s, c, result_range(s), plan_.num_sites, now, tx);
}

void SiteSync::advance(Nanos now, ltp::PacketSink& tx) {
  // Phase completions found inside receiver callbacks start sends here, where tx is at hand.
  while (!pending_up_.empty() || !pending_down_.empty()) {
    if (!pending_up_.empty()) {
      const int s = pending_up_.back();
      pending_up_.pop_back();
      up_complete(s, now, tx);
    } else {
      const int s = pending_down_.back();
      pending_down_.pop_back();
      down_complete(s, now, tx);
    }
  }
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
  }
}

void SiteSync::on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) {
  now_ = now;
  auto common = wire::parse_common(msg);
  if (!common) return;  // the dataplane counts malformed LTP before it gets here
  if (common->type == wire::MsgType::kData) {
    receiver_->on_packet(msg, now, *this, tx);
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
    // Give up on whoever did not deliver: absent contributors going up, own values going down.
    ++stats_.timeouts;
    for (size_t s = 0; s < shards_.size(); ++s) {
      Shard& sh = shards_[s];
      if (!sh.up_done) up_complete(static_cast<int>(s), now, tx);
      if (!sh.down_done) {
        auto out = result_range(static_cast<int>(s));
        auto mine = local_.subspan(sh.first, sh.floats);
        std::copy(mine.begin(), mine.end(), out.begin());
        sh.down_done = true;
      }
    }
    // Senders still trying are abandoned: fresh ones for the next round.
    for (auto& o : outs_) {
      if (!o->started || o->sender->done()) continue;
      ltp::SenderConfig sc = cfg_.sender;
      sc.local_node = cfg_.self_node;
      sc.peer_node = cfg_.site_nodes[o->peer];
      sc.max_chunks = shards_[o->shard].acc->chunk_count();
      for (const auto& sh : shards_) sc.max_chunks = std::max(sc.max_chunks, sh.acc->chunk_count());
      o->rc = make_controller(cfg_.reliable_baseline);
      o->sender = std::make_unique<ltp::Sender>(sc, *o->rc, rng_);
      o->started = false;
    }
    finish_round_if_done(now);
  }
  if (running_) next = std::min(next, started_ + cfg_.round_timeout);
  return next;
}

}  // namespace sg::sync
