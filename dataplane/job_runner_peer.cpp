// JobRunner in sync.mode selmcast: the site's update (its workers' mean, or the synthetic
// gradient of a job without workers) goes to sync::PeerSync once complete, and the site's
// mix goes back to the workers. One engine runs it (the gateway refuses more).
#include <algorithm>
#include <cmath>

#include "dataplane/job_runner.h"
#include "dataplane/log.h"

namespace sg::dp {
namespace {

topo::Selection selection_of(const topo::Plan& plan) {
  topo::Selection s(plan.receivers.size());
  for (size_t i = 0; i < plan.receivers.size(); ++i) s[i].assign(plan.receivers[i].begin(), plan.receivers[i].end());
  return s;
}

}  // namespace

void JobRunner::make_peer(const topo::Plan& plan) {
  sync::PeerSyncConfig pc;
  pc.job = cfg_.job.id;
  pc.self_node = cfg_.site.id;
  pc.site_nodes = sites_;
  pc.model_floats = cfg_.job.model_bytes / 4;
  pc.chunk_bytes = cfg_.transport.chunk_bytes;
  pc.staleness = cfg_.sync.staleness;
  pc.receiver = wan_receiver(cfg_);
  pc.rate.initial_rate = cfg_.transport.initial_rate_mbit * 1e6 / 8;
  pc.round_timeout = static_cast<Nanos>(cfg_.job.round_timeout_ms) * kMilli;
  pc.seed = cfg_.site.id * 31u;
  peer_ = std::make_unique<sync::PeerSync>(pc);
  peer_->set_sample_sink(this);
  if (!peer_->ok() || !peer_->set_selection(selection_of(plan)))
    SG_LOG(ERR, dataplane, "job %u: the peer-to-peer mode cannot start (error %d, %zu receiver lists)\n", cfg_.job.id,
           static_cast<int>(peer_->error()), plan.receivers.size());
}

// A policy with new receivers, from the round every gateway agreed on.
bool JobRunner::peer_switch_st(uint32_t next_round) {
  if (!slot_) return true;
  const PolicySnapshot* s = slot_->peek_st();
  const PolicySnapshot* p = s ? s->for_round(next_round) : nullptr;
  if (!p || p->version <= policy_) return true;
  if (!peer_->set_selection(selection_of(p->plan))) return false;
  policy_ = p->version;
  c_.policy_switches.add();
  c_.policy_version.store(p->version, std::memory_order_relaxed);
  c_.switch_round.store(next_round, std::memory_order_relaxed);
  SG_LOG(INFO, dataplane, "job %u: receivers of policy version %u in force from round %u (this site sends to %zu)\n",
         cfg_.job.id, p->version, next_round, p->plan.receivers.empty() ? 0 : p->plan.receivers[self_].size());
  return true;
}

void JobRunner::peer_count_st(Nanos now) {
  peer_counted_ = true;
  const auto& s = peer_->stats();
  c_.rounds.add();
  c_.early_closes.add(s.early_closes - peer_last_.early_closes);
  c_.up_bubbles.add(s.bubbles - peer_last_.bubbles);
  c_.timeouts.add(s.timeouts - peer_last_.timeouts);
  c_.retransmits.add(s.retransmits - peer_last_.retransmits);
  c_.updates_mixed.add(s.updates_mixed - peer_last_.updates_mixed);
  c_.stale_updates.add(s.stale_updates - peer_last_.stale_updates);
  peer_last_ = s;
  const uint64_t took = static_cast<uint64_t>(peer_->round_finished() - peer_->round_started());
  c_.round_ns_total.add(took);
  c_.last_round_ns.store(took, std::memory_order_relaxed);
  c_.last_round.store(round_, std::memory_order_relaxed);
  delivered_at_ = now;
  if (group_) {
    count_group_st();
    if (group_->deliver(round_, peer_->result(), now, tx_)) c_.worker_rounds.add();
    return;
  }
  // Synthetic: each value is the shared pattern plus the mean offset of this site and every
  // site whose update was mixed in.
  const auto from = peer_->mixed_from();
  float offset = 0.5f * static_cast<float>(self_ + 1);
  int n = 1;
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i]) offset += 0.5f * static_cast<float>(i + 1), ++n;
  offset /= static_cast<float>(n);
  const auto r = peer_->result();
  uint64_t exact = 0;
  for (size_t k = 0; k < r.size(); ++k) {
    const float want = offset + static_cast<float>((k * 7 + round_) % 1000) * 1e-3f;
    exact += std::fabs(r[k] - want) <= 1e-5f * (1.0f + std::fabs(want));
  }
  c_.values_checked.add(r.size());
  c_.values_exact.add(exact);
}

// The first time round `next`'s update is seen complete: a sample of the site's load.
void JobRunner::note_update_lag_st(uint32_t next, Nanos now) {
  if (next == lag_round_ || delivered_at_ < 0) return;
  lag_round_ = next;
  // The workers' first update after a result carries their start-up (a first step's
  // allocations, kernels compiled, caches cold): not what a round's compute takes.
  if (++lag_samples_ == 1) return;
  const int64_t sample = std::max<int64_t>(0, now - delivered_at_);
  const int64_t old = c_.update_lag_ns.load(std::memory_order_relaxed);
  const int64_t lag = old < 0 ? sample : old + (sample - old) / 4;
  c_.update_lag_ns.store(lag, std::memory_order_relaxed);
  // The part of it the WAN could use: from the first chunk ready to leave to the last.
  if (!group_ || group_->first_final() < 0) return;
  const int64_t window = std::clamp<int64_t>(now - group_->first_final(), 0, sample);
  const int64_t was = c_.overlap_ns.load(std::memory_order_relaxed);
  c_.overlap_ns.store(std::min(lag, was < 0 ? window : was + (window - was) / 4), std::memory_order_relaxed);
}

unsigned JobRunner::peer_poll_st(Nanos now) {
  if (finished()) {
    if (group_) group_->poll(now, tx_);
    return 0;
  }
  unsigned work = 0;
  if (!peer_->running()) {
    if (!peer_counted_ && peer_->round_done()) {
      peer_count_st(now);
      ++work;
      if (rounds_limit() && round_ >= rounds_limit()) {
        finished_.store(true, std::memory_order_release);
        return 1;
      }
    }
    // The next round: the workers' whole mean (or the synthetic update), once approved.
    uint32_t next = 0;
    if (group_) {
      if (group_->contribution_ready(group_->round())) next = group_->round();
    } else {
      next = next_synthetic_round();
      if (rounds_limit() && next > rounds_limit()) {
        finished_.store(true, std::memory_order_release);
        return 1;
      }
    }
    if (next && next > peer_->round()) {
      note_update_lag_st(next, now);
      if (!may_begin(next)) {
        c_.gate_waits.add();
        c_.wanted_round.store(next, std::memory_order_relaxed);
      } else if (peer_switch_st(next)) {
        take_live_st(next);
        std::span<const float> update;
        if (group_) {
          update = group_->contribution();
        } else {
          for (size_t k = 0; k < local_.size(); ++k) local_[k] = synthetic(self_, next, k);
          update = local_;
        }
        if (peer_->begin_round(next, update, now, tx_)) {
          round_ = next;
          peer_counted_ = false;
          next_wake_ = 0;
          ++work;
        }
      }
    }
  }
  if (now >= next_wake_) {
    next_wake_ = peer_->poll(now, tx_);
    if (group_) next_wake_ = std::min(next_wake_, group_->poll(now, tx_));
    ++work;
  }
  return work;
}

}  // namespace sg::dp
