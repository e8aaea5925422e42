#include "dataplane/job_runner.h"

#include <algorithm>
#include <cmath>

#include "dataplane/path_id.h"
#include "topology/baselines.h"
#include "wire/ltp_codec.h"
#include "topology/fapt.h"

namespace sg::dp {
namespace {

// Synthetic gradient of site index i in round r: a per-site offset plus a pattern shared by
// all sites, so the exact mean is known at every site without talking.
inline float synthetic(int i, uint32_t r, size_t k) {
  return 0.5f * static_cast<float>(i + 1) + static_cast<float>((k * 7 + r) % 1000) * 1e-3f;
}

}  // namespace

std::vector<uint16_t> job_sites(const config::GatewayConfig& cfg) {
  std::vector<uint16_t> s{cfg.site.id};
  for (const auto& p : cfg.peers) s.push_back(p.id);
  std::sort(s.begin(), s.end());
  return s;
}

bool initial_plan(const config::GatewayConfig& cfg, topo::Plan& plan, std::string& error) {
  const int n = static_cast<int>(job_sites(cfg).size());
  // Before any measurement every link looks the same: 1 Gbit/s, 10 ms, 5 GB/s aggregation.
  const topo::Network net = topo::Network::uniform(n, 125e6, 0.010, 5e9);
  topo::PlannerOptions opt;
  opt.max_shards = cfg.topology.shards;
  opt.chunk_bytes = cfg.transport.chunk_bytes;
  opt.multipath = cfg.topology.multipath;
  switch (cfg.topology.planner) {
    case config::Planner::kFapt: plan = topo::plan_fapt(net, cfg.job.model_bytes, opt); break;
    case config::Planner::kStar: plan = topo::star_plan(net, cfg.job.model_bytes, cfg.transport.chunk_bytes); break;
    case config::Planner::kBlindTree: plan = topo::blind_tree_plan(net, cfg.job.model_bytes, cfg.topology.shards); break;
    case config::Planner::kRing:
      error = "topology.planner 'ring' is a simulator baseline (not a tree); the gateway runs fapt, star or blind_tree";
      return false;
  }
  if (!cfg.topology.multipath) plan.splits.clear();
  // "always" compresses every tree link from the first round; "adaptive" starts at full
  // precision and lets the coordinator's measurements decide (control/link_codecs).
  if (cfg.compression.mode == config::CompressionMode::kAlways) topo::set_tree_codecs(plan, cfg.compression.codec);
  if (topo::validate(plan) != topo::PlanError::kOk) {
    error = std::string("planner produced an invalid plan: ") + std::string(topo::plan_error_name(topo::validate(plan)));
    return false;
  }
  return true;
}

JobRunner::JobRunner(const config::GatewayConfig& cfg, const topo::Plan& plan, uint32_t policy_version, LtpTx& tx)
    : cfg_(cfg), tx_(tx), sites_(job_sites(cfg)) {
  for (size_t i = 0; i < sites_.size(); ++i)
    if (sites_[i] == cfg.site.id) self_ = static_cast<int>(i);
  sync::SyncConfig sc;
  sc.job = cfg.job.id;
  sc.self_node = cfg.site.id;
  sc.site_nodes = sites_;
  sc.chunk_bytes = cfg.transport.chunk_bytes;
  sc.receiver.max_transfers = cfg.transport.max_transfers;
  sc.receiver.fill_rule = static_cast<ltp::FillRule>(cfg.transport.bubble_fill);
  sc.receiver.early_close.enabled = cfg.transport.early_close.enabled;
  sc.receiver.early_close.max_loss_fraction = cfg.transport.max_loss_fraction;
  sc.receiver.early_close.quiet_rtts = cfg.transport.early_close.quiet_rtts;
  sc.reliable_baseline = cfg.transport.rate_controller == config::RateController::kAimd;
  sc.round_timeout = static_cast<Nanos>(cfg.job.round_timeout_ms) * kMilli;
  sc.seed = cfg.site.id;
  // Links compress as the policy's plan says (compression.mode always / adaptive).
  sc.wire_compression = cfg.compression.mode != config::CompressionMode::kOff;
  sc.topk_ratio = static_cast<float>(cfg.compression.topk_ratio);
  sync_ = std::make_unique<sync::SiteSync>(sc);
  sync_->set_plan(plan, policy_version);
  tx_.sprayer().set_plan(plan, sites_, self_);
  sync_->set_sample_sink(this);
  sync_->set_result_sink(this);
  policy_ = policy_version;
  c_.policy_version.store(policy_version);
  local_.assign(cfg.job.model_bytes / 4, 0.0f);
  if (cfg.job.workers) {
    sync::LocalGroupConfig lc;
    lc.job = cfg.job.id;
    lc.gateway_node = cfg.site.id;
    lc.workers = cfg.job.workers;
    lc.model_floats = cfg.job.model_bytes / 4;
    lc.chunk_bytes = config::worker_chunk_bytes(cfg);
    lc.push_timeout = sc.round_timeout;
    lc.seed = cfg.site.id * 7919ull;
    group_ = std::make_unique<sync::LocalGroup>(lc);
    tx_.set_workers(cfg.job.workers, cfg.transport.udp_port);
  }
}

void JobRunner::fill_local(uint32_t round) {
  for (size_t k = 0; k < local_.size(); ++k) local_[k] = synthetic(self_, round, k);
}

void JobRunner::check_result() {
  // The exact mean of every site's synthetic gradient, compared value by value.
  const auto r = sync_->result();
  float offset = 0;
  for (size_t i = 0; i < sites_.size(); ++i) offset += 0.5f * static_cast<float>(i + 1);
  offset /= static_cast<float>(sites_.size());
  uint64_t exact = 0;
  for (size_t k = 0; k < r.size(); ++k) {
    const float want = offset + static_cast<float>((k * 7 + round_) % 1000) * 1e-3f;
    exact += std::fabs(r[k] - want) <= 1e-5f * (1.0f + std::fabs(want));
  }
  c_.values_checked.add(r.size());
  c_.values_exact.add(exact);
}

void JobRunner::on_sample(const ltp::ArrivalSample& s) {
  // Relayed DATA measured the relay's link to us, not the sender's: it would skew that link.
  if (!samples_ || pathid::is_relayed(s.path_id)) return;
  int from = -1;
  for (size_t i = 0; i < sites_.size(); ++i)
    if (sites_[i] == s.src_node) from = static_cast<int>(i);
  if (from < 0) return;
  measure::ArrivalSample m;
  m.from = static_cast<uint16_t>(from);
  m.to = static_cast<uint16_t>(self_);
  m.bytes = s.bytes;
  m.at = s.arrival;
  m.rtt = s.rtt;
  if (rte_ring_enqueue_elem(samples_, &m, sizeof m) != 0) c_.samples_dropped.add();
}

// Workers: each piece of the WAN result goes on to them as soon as it is final here.
void JobRunner::on_result(size_t first, size_t count) {
  if (!group_ || group_->round() != sync_->round()) return;
  group_->result_ready(sync_->round(), first, sync_->result().subspan(first, count), now_, tx_);
}

// Workers: contribution chunks that became final join the running WAN round at once (the
// round began with the first push), so the WAN part overlaps the pushes.
void JobRunner::feed_local_st(Nanos now) {
  if (!group_ || !sync_->running() || sync_->round() != group_->round()) return;
  const size_t cf = config::worker_chunk_bytes(cfg_) / 4;
  const size_t total = local_.size();
  const auto ready = group_->take_ready_chunks();
  for (uint32_t c : ready) {
    const size_t first = static_cast<size_t>(c) * cf;
    if (first < total)
      sync_->local_ready(first, std::min(cf, total - first), now, tx_, group_->chunk_contributors(c) > 0);
  }
  if (!ready.empty()) next_wake_ = 0;  // senders and result transfers have new chunks: poll them
}

void JobRunner::maybe_switch_policy_st() {
  if (!slot_) return;
  const PolicySnapshot* p = slot_->peek_st();
  // Switch only between rounds, and only at the round every gateway agreed on.
  if (p && p->version > policy_ && round_ + 1 >= p->from_round) {
    if (sync_->set_plan(p->plan, p->version)) {
      tx_.sprayer().set_plan(p->plan, sites_, self_);
      policy_ = p->version;
      c_.policy_switches.add();
      c_.policy_version.store(p->version, std::memory_order_relaxed);
      c_.switch_round.store(round_ + 1, std::memory_order_relaxed);
    }
  }
}

void JobRunner::on_stop_st() {
  if (slot_ && online_) slot_->offline_st();
  online_ = false;
}

void JobRunner::on_packet_st(std::span<const uint8_t> msg, Nanos now) {
  now_ = now;
  auto common = wire::parse_common(msg);
  if (group_ && common && common->src_node >= sync::kWorkerNodeBase) {
    group_->on_packet(msg, now, tx_);
    feed_local_st(now);
  } else {
    sync_->on_packet(msg, now, tx_);
  }
  next_wake_ = 0;  // state changed: run the timers on the next pass
}

unsigned JobRunner::poll_st(Nanos now) {
  now_ = now;
  if (slot_) {
    if (!online_) {
      slot_->online_st();
      online_ = true;
    }
    slot_->quiescent_st();  // no snapshot pointer is held across passes
  }
  if (finished()) {
    if (group_) group_->poll(now, tx_);  // results still on their way to the workers
    return 0;
  }
  unsigned work = 0;
  if (!sync_->running()) {
    if (!checked_ && sync_->round_done()) {
      checked_ = true;
      const auto& s = sync_->stats();
      c_.rounds.add();
      c_.early_closes.add(s.early_closes - last_.early_closes);
      c_.up_bubbles.add(s.up_bubbles - last_.up_bubbles);
      c_.down_bubbles.add(s.down_bubbles - last_.down_bubbles);
      c_.timeouts.add(s.timeouts - last_.timeouts);
      c_.retransmits.add(s.retransmits - last_.retransmits);
      c_.stray.add(s.stray_acks - last_.stray_acks);
      last_ = s;
      const uint64_t took = static_cast<uint64_t>(sync_->round_finished() - sync_->round_started());
      c_.round_ns_total.add(took);
      c_.last_round_ns.store(took, std::memory_order_relaxed);
      c_.last_round.store(round_, std::memory_order_relaxed);
      if (cfg_.job.workers == 0) check_result();
      if (group_) {
        // Every result chunk went to the workers as it became final; this ends the round
        // (anything the WAN round gave up on is sent as the site's own mean).
        delivered_ = group_->finish(round_, now, tx_);
        if (delivered_) c_.worker_rounds.add();
      }
      if (cfg_.job.rounds && round_ >= cfg_.job.rounds) {
        finished_.store(true, std::memory_order_release);
        return 1;
      }
    }
    maybe_switch_policy_st();
    if (group_) {
      if (!delivered_ && group_->finish(round_, now, tx_)) {
        delivered_ = true;
        c_.worker_rounds.add();
        ++work;
      }
      // The WAN round begins with the round's first push and takes the site's contribution
      // chunk by chunk as the workers' copies complete (feed_local_st).
      if (delivered_ && group_->round_started() && may_begin(group_->round()) &&
          sync_->begin_round(group_->round(), group_->contribution_buffer(), now, tx_, true)) {
        round_ = group_->round();
        checked_ = false;
        next_wake_ = 0;  // the new round's timers: see below
        feed_local_st(now);
        ++work;
      }
    }
    if (cfg_.job.workers == 0 && !may_begin(round_ + 1)) {
      c_.gate_waits.add();
    } else if (cfg_.job.workers == 0) {
      fill_local(round_ + 1);
      if (sync_->begin_round(round_ + 1, local_, now, tx_)) {
        ++round_;
        checked_ = false;
        // The new round has timers of its own (its first sends may have been lost: ARP not
        // yet answered, a port not yet up). Poll now, not at the wake time computed for the
        // idle state: otherwise both sides could wait for each other until a packet arrives.
        next_wake_ = 0;
        ++work;
      }
    }
  }
  if (now >= next_wake_) {
    next_wake_ = sync_->poll(now, tx_);
    if (group_) {
      next_wake_ = std::min(next_wake_, group_->poll(now, tx_));
      feed_local_st(now);  // the push timeout may have made chunks final
    }
    ++work;
  }
  return work;
}

}  // namespace sg::dp
