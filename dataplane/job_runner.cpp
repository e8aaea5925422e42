#include "dataplane/job_runner.h"

#include "dataplane/log.h"

#include <algorithm>
#include <cmath>

#include "controller/controller.h"
#include "sync/gateway_settings.h"
#include "wire/path_id.h"
#include "sync/hop_sample.h"
#include "topology/baselines.h"
#include "wire/ltp_codec.h"
#include "topology/fapt.h"

namespace sg::dp {

bool initial_plan(const config::GatewayConfig& cfg, topo::Plan& plan, std::string& error) {
  // The controller's first plan: every gateway computes the same from the same configs.
  plan = controller::Controller(controller::controller_config(cfg)).initial_plan(&error);
  return !plan.shards.empty();
}

bool jobs_share_links(const config::GatewayConfig& cfg) {
  return config::links_shared(cfg);
}

JobRunner::JobRunner(const config::GatewayConfig& cfg, const topo::Plan& plan, uint32_t policy_version, LtpTx& tx,
                     ShardRole role, std::vector<ltp::LinkShare*> link_shares)
    : cfg_(cfg), tx_(tx), sites_(job_sites(cfg)), role_(role) {
  for (size_t i = 0; i < sites_.size(); ++i)
    if (sites_[i] == cfg.site.id) self_ = static_cast<int>(i);
  sync::SyncConfig sc = sync::site_sync_config(cfg, sites_);
  sc.link_shares = std::move(link_shares);
  sc.seed = cfg.site.id * 31u + role.engine;
  sc.shard_engine = role.engine;
  sc.shard_engines = std::max<uint32_t>(role.engines, 1);
  live_rounds_.store(cfg.job.rounds, std::memory_order_relaxed);
  live_timeout_ms_.store(cfg.job.round_timeout_ms, std::memory_order_relaxed);
  timeout_ms_ = cfg.job.round_timeout_ms;
  if (cfg.sync.mode == config::SyncMode::kSelmcast) {
    make_peer(plan);
  } else {
    sync_ = std::make_unique<sync::SiteSync>(sc);
    sync_->set_plan(plan, policy_version);
    sync_->set_sample_sink(this);
    sync_->set_result_sink(this);
  }
  // topology.multipath: false keeps every chunk on its direct path, planned or not.
  tx_.sprayer().set_standby_relays(cfg.topology.multipath);
  tx_.sprayer().set_plan(plan, sites_, self_);
  policy_ = policy_version;
  c_.policy_version.store(policy_version);
  local_.assign(cfg.job.model_bytes / 4, 0.0f);
  // The site's workers talk to the lead engine only.
  if (cfg.job.workers && role_.engine == 0) {
    sync::LocalGroupConfig lc;
    lc.job = cfg.job.id;
    lc.gateway_node = cfg.site.id;
    lc.workers = cfg.job.workers;
    lc.model_floats = cfg.job.model_bytes / 4;
    lc.chunk_bytes = config::worker_chunk_bytes(cfg);
    lc.push_timeout = static_cast<Nanos>(cfg.job.worker_timeout_ms ? cfg.job.worker_timeout_ms
                                                                     : cfg.job.round_timeout_ms / 2) * kMilli;
    lc.seed = cfg.site.id * 7919ull;
    lc.receiver.ack_batch = true;  // as wan_receiver's
    lc.results.max_window = static_cast<uint64_t>(cfg.transport.lan_window_kb) * 1024;
    group_ = std::make_unique<sync::LocalGroup>(lc);
    tx_.set_workers(cfg.job.workers, cfg.transport.udp_port);
  }
}

void JobRunner::attach_followers(std::vector<EngineLink*> links, std::vector<const JobRunner*> runners) {
  links_ = std::move(links);
  followers_ = std::move(runners);
  done_round_.assign(links_.size(), 0);
}

void JobRunner::attach_lead(EngineLink* link, const JobRunner* lead) {
  lead_link_ = link;
  lead_ = lead;
}

std::span<const float> JobRunner::local_view() const {
  return group_ ? group_->contribution_buffer() : std::span<const float>{};
}

// Floats [first, first + count) touch a shard engine `engine` runs under the current plan.
bool JobRunner::owns(size_t first, size_t count, uint32_t engine) const {
  const auto& shards = sync_->plan().shards;
  const uint32_t e = std::max<uint32_t>(role_.engines, 1);
  for (size_t s = 0; s < shards.size(); ++s) {
    if (s % e != engine) continue;
    const size_t lo = shards[s].byte_begin / 4, hi = shards[s].byte_end / 4;
    if (first < hi && first + count > lo) return true;
  }
  return false;
}

void JobRunner::fill_local(uint32_t round) {
  // Only this engine's shards are read by its SiteSync.
  const auto& shards = sync_->plan().shards;
  const uint32_t e = std::max<uint32_t>(role_.engines, 1);
  for (size_t s = 0; s < shards.size(); ++s) {
    if (s % e != role_.engine) continue;
    for (size_t k = shards[s].byte_begin / 4; k < shards[s].byte_end / 4 && k < local_.size(); ++k)
      local_[k] = synthetic(self_, round, k);
  }
}

void JobRunner::check_result(uint64_t& checked, uint64_t& exact) const {
  // The exact mean of every site's synthetic gradient, compared value by value on this
  // engine's shards.
  const auto r = sync_->result();
  float offset = 0;
  for (size_t i = 0; i < sites_.size(); ++i) offset += 0.5f * static_cast<float>(i + 1);
  offset /= static_cast<float>(sites_.size());
  const auto& shards = sync_->plan().shards;
  const uint32_t e = std::max<uint32_t>(role_.engines, 1);
  checked = exact = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    if (s % e != role_.engine) continue;
    for (size_t k = shards[s].byte_begin / 4; k < shards[s].byte_end / 4 && k < r.size(); ++k) {
      const float want = offset + static_cast<float>((k * 7 + round_) % 1000) * 1e-3f;
      exact += std::fabs(r[k] - want) <= 1e-5f * (1.0f + std::fabs(want));
      ++checked;
    }
  }
}

void JobRunner::on_sample(const ltp::ArrivalSample& s) {
  if (!samples_) return;
  const bool relayed = wire::pathid::is_relayed(s.path_id);
  const int hop = site_index(relayed ? relay_hop_ : s.src_node);
  if (hop < 0) return;
  push_sample(sync::arrival_hop_sample(s, static_cast<uint16_t>(hop), static_cast<uint16_t>(self_), relayed));
}

void JobRunner::on_relay_st(uint16_t origin, uint32_t bytes, uint64_t send_ts, Nanos now, bool app_limited) {
  const int from = site_index(origin);
  if (!samples_ || from < 0) return;
  push_sample(sync::relay_hop_sample(static_cast<uint16_t>(from), static_cast<uint16_t>(self_), bytes, send_ts, now, app_limited));
}

int JobRunner::site_index(uint16_t node) const {
  for (size_t i = 0; i < sites_.size(); ++i)
    if (sites_[i] == node) return static_cast<int>(i);
  return -1;
}

void JobRunner::push_sample(measure::ArrivalSample m) {
  if (rte_ring_enqueue_elem(samples_, &m, sizeof m) != 0) c_.samples_dropped.add();
}

// Workers: each piece of the WAN result goes on to them as soon as it is final here.
void JobRunner::on_result(size_t first, size_t count) {
  if (lead_link_) {
    // A follower's result goes to the lead, which streams it on to the workers.
    if (streaming_) lead_link_->up.push_st({LinkMsg::kResult, sync_->round(), first, count, 0, 0});
    return;
  }
  if (!group_ || group_->round() != sync_->round()) return;
  group_->result_ready(sync_->round(), first, sync_->result().subspan(first, count), now_, tx_);
  deliver_if_complete_st(now_);
}

// The whole result reached the group: the workers' round ends now, not when this site's own
// transfers are all acknowledged (a WAN round trip or more later). A worker that has its whole
// result pushes the next round at once, and the group must be collecting it by then (it drops
// a later round's DATA, which the worker resends only after its RTO). The site's own
// contribution is no longer read: every chunk of the result is final.
void JobRunner::deliver_if_complete_st(Nanos now) {
  if (group_ && group_->round() == round_ && group_->results_complete()) deliver_st(now);
}

// Ends the workers' round once: whatever the group was not given goes out as the site's own
// mean, and the group collects the next round. True if this call ended it.
bool JobRunner::deliver_st(Nanos now) {
  if (delivered_ || !group_->finish(round_, now, tx_)) return false;
  delivered_ = true;
  delivered_at_ = now;
  c_.worker_rounds.add();
  return true;
}

// Workers: contribution chunks that became final join the running WAN round at once (the
// round began with the first push), so the WAN part overlaps the pushes. Followers get the
// chunks that touch their shards.
void JobRunner::feed_local_st(Nanos now) {
  if (!group_ || !sync_->running() || sync_->round() != group_->round()) return;
  const size_t cf = config::worker_chunk_bytes(cfg_) / 4;
  const size_t total = local_.size();
  const auto ready = group_->take_ready_chunks();
  for (uint32_t c : ready) {
    const size_t first = static_cast<size_t>(c) * cf;
    if (first >= total) continue;
    const size_t n = std::min(cf, total - first);
    const bool present = group_->chunk_contributors(c) > 0;
    sync_->local_ready(first, n, now, tx_, present);
    for (size_t q = 0; q < links_.size(); ++q)
      if (owns(first, n, static_cast<uint32_t>(q + 1)))
        links_[q]->down.push_st({LinkMsg::kLocal, round_, first, n, present ? 1u : 0u, 0});
  }
  if (!ready.empty()) next_wake_ = 0;  // senders and result transfers have new chunks: poll them
}

void JobRunner::maybe_switch_policy_st(uint32_t next_round) {
  if (!slot_) return;
  const PolicySnapshot* s = slot_->peek_st();
  // Switch only between rounds, and only to the policy every gateway runs this round under.
  const PolicySnapshot* p = s ? s->for_round(next_round) : nullptr;
  if (p && p->version > policy_) {
    if (sync_->set_plan(p->plan, p->version)) {
      tx_.sprayer().set_plan(p->plan, sites_, self_);
      policy_ = p->version;
      c_.policy_switches.add();
      c_.policy_version.store(p->version, std::memory_order_relaxed);
      c_.switch_round.store(next_round, std::memory_order_relaxed);
      SG_LOG(INFO, dataplane, "job %u engine %u: policy version %u in force from round %u (%zu shards)\n", cfg_.job.id,
             role_.engine, p->version, next_round, p->plan.shards.size());
    }
  }
}

void JobRunner::on_stop_st() {
  if (slot_ && online_) slot_->offline_st(role_.engine);
  online_ = false;
}

void JobRunner::release_st() {
  sync_.reset();
  peer_.reset();
  group_.reset();
}

void JobRunner::on_packet_st(std::span<const uint8_t> msg, Nanos now, uint16_t relay_hop) {
  now_ = now;
  relay_hop_ = relay_hop;
  auto common = wire::parse_common(msg);
  if (group_ && common && common->src_node >= sync::kWorkerNodeBase) {
    group_->on_packet(msg, now, tx_);
    if (!peer_) feed_local_st(now);
  } else if (peer_) {
    peer_->on_packet(msg, now, tx_);
  } else {
    sync_->on_packet(msg, now, tx_);
  }
  // A round that ended on this packet ends here at once: its last results may leave on the
  // next ACK from a worker, before the next poll, and a worker that has its whole result
  // pushes the next round at once -- the group must be there by then (it drops a later
  // round's DATA, which the worker resends only after its RTO).
  if (!peer_ && !lead_link_) end_round_st(now);
  next_wake_ = 0;  // state changed: run the timers on the next pass
}

void JobRunner::begin_followers_st(uint32_t round, bool streaming) {
  for (auto* l : links_) l->down.push_st({LinkMsg::kBegin, round, streaming ? 1u : 0u, 0, 0, 0});
}

bool JobRunner::followers_done(uint32_t round) const {
  for (uint32_t r : done_round_)
    if (r < round) return false;
  return true;
}

// Lead: what the followers report (results for the workers, their end of a round, checks).
unsigned JobRunner::lead_messages_st(Nanos now) {
  unsigned work = 0;
  EngineMsg m[64];
  for (size_t q = 0; q < links_.size(); ++q) {
    unsigned n;
    while ((n = links_[q]->up.pop_st(m, 64)) > 0) {
      work += n;
      for (unsigned i = 0; i < n; ++i) {
        switch (m[i].type) {
          case LinkMsg::kResult:
            if (group_ && m[i].round == group_->round() && m[i].round == round_) {
              const auto r = followers_[q]->result_view();
              if (m[i].a < r.size() && m[i].b <= r.size() - m[i].a)
                group_->result_ready(m[i].round, m[i].a, r.subspan(m[i].a, m[i].b), now, tx_);
              deliver_if_complete_st(now);
            } else {
              c_.link_stray.add();
            }
            break;
          case LinkMsg::kDone:
            done_round_[q] = std::max(done_round_[q], m[i].round);
            last_done_at_ = now;
            c_.early_closes.add(m[i].a);
            c_.up_bubbles.add(m[i].b >> 32);
            c_.down_bubbles.add(m[i].b & 0xffffffffu);
            c_.retransmits.add(m[i].c);
            c_.timeouts.add(m[i].d >> 32);
            c_.peers_moved_on.add(m[i].d & 0xffffffffu);
            break;
          case LinkMsg::kCheck:
            c_.values_checked.add(m[i].a);
            c_.values_exact.add(m[i].b);
            break;
          case LinkMsg::kPeerBegan: followers_peer_began_ = std::max(followers_peer_began_, m[i].round); break;
          default: c_.link_stray.add(); break;
        }
      }
    }
  }
  if (work) next_wake_ = 0;  // result chunks for the workers: poll their senders
  return work;
}

// Follower: rounds begin and get their local part as the lead says; results and the end of
// each round go back to it.
unsigned JobRunner::follow_st(Nanos now) {
  unsigned work = 0;
  EngineMsg m[64];
  unsigned n;
  while ((n = lead_link_->down.pop_st(m, 64)) > 0) {
    work += n;
    for (unsigned i = 0; i < n; ++i) {
      if (m[i].type == LinkMsg::kBegin) {
        if (sync_->running() || !reported_) {
          c_.link_stray.add();  // the lead waits for our end before it begins a round
          continue;
        }
        maybe_switch_policy_st(m[i].round);
        streaming_ = m[i].a != 0;
        bool ok;
        if (streaming_) {
          take_live_st(m[i].round);
          ok = sync_->begin_round(m[i].round, lead_->local_view(), now, tx_, true);
        } else {
          fill_local(m[i].round);
          take_live_st(m[i].round);
          ok = sync_->begin_round(m[i].round, local_, now, tx_);
        }
        if (ok) {
          round_ = m[i].round;
          reported_ = false;
        } else {
          c_.link_stray.add();
        }
      } else if (m[i].type == LinkMsg::kLocal) {
        if (sync_->running() && sync_->round() == m[i].round)
          sync_->local_ready(m[i].a, m[i].b, now, tx_, m[i].c != 0);
        else
          c_.link_stray.add();
      } else {
        c_.link_stray.add();
      }
    }
    next_wake_ = 0;
  }
  if (!reported_ && !sync_->running() && sync_->round_done()) {
    reported_ = true;
    const auto& s = sync_->stats();
    const uint64_t bubbles = ((s.up_bubbles - last_.up_bubbles) << 32) | ((s.down_bubbles - last_.down_bubbles) & 0xffffffffu);
    if (cfg_.job.workers == 0) {
      uint64_t checked = 0, exact = 0;
      check_result(checked, exact);
      lead_link_->up.push_st({LinkMsg::kCheck, round_, checked, exact, 0, 0});
    }
    lead_link_->up.push_st({LinkMsg::kDone, round_, s.early_closes - last_.early_closes, bubbles,
                            s.retransmits - last_.retransmits,
                            ((s.timeouts - last_.timeouts) << 32) | ((s.peers_moved_on - last_.peers_moved_on) & 0xffffffffu)});
    c_.rounds.add();
    c_.stray.add(s.stray_acks - last_.stray_acks);
    c_.rto_expiries.add(s.rto_expiries - last_.rto_expiries);
    c_.early_data.add(s.early_data - last_.early_data);
    c_.early_held.add(s.early_held - last_.early_held);
    c_.early_acked.add(s.early_acked - last_.early_acked);
    last_ = s;
    ++work;
  }
  // Peers' DATA of the next round reached this engine's shards first: the lead begins rounds.
  if (const uint32_t next = sync_->round() + 1; reported_ && peer_began_told_ != next && sync_->peer_began(next)) {
    peer_began_told_ = next;
    lead_link_->up.push_st({LinkMsg::kPeerBegan, next, 0, 0, 0, 0});
    ++work;
  }
  if (now >= next_wake_) {
    next_wake_ = sync_->poll(now, tx_);
    ++work;
  }
  return work;
}

// Lead: the round ended at every engine.
void JobRunner::count_round_st(Nanos now) {
  checked_ = true;
  c_.round_open.store(false, std::memory_order_relaxed);
  const auto& s = sync_->stats();
  c_.rounds.add();
  c_.early_closes.add(s.early_closes - last_.early_closes);
  c_.up_bubbles.add(s.up_bubbles - last_.up_bubbles);
  c_.down_bubbles.add(s.down_bubbles - last_.down_bubbles);
  c_.timeouts.add(s.timeouts - last_.timeouts);
  c_.peers_moved_on.add(s.peers_moved_on - last_.peers_moved_on);
  c_.retransmits.add(s.retransmits - last_.retransmits);
  c_.stray.add(s.stray_acks - last_.stray_acks);
  c_.rto_expiries.add(s.rto_expiries - last_.rto_expiries);
  c_.early_data.add(s.early_data - last_.early_data);
  c_.early_held.add(s.early_held - last_.early_held);
  c_.early_acked.add(s.early_acked - last_.early_acked);
  last_ = s;
  const Nanos end = links_.empty() ? sync_->round_finished() : std::max(sync_->round_finished(), last_done_at_);
  const uint64_t took = static_cast<uint64_t>(end - sync_->round_started());
  c_.round_ns_total.add(took);
  c_.last_round_ns.store(took, std::memory_order_relaxed);
  c_.last_round.store(round_, std::memory_order_relaxed);
  if (cfg_.job.workers == 0) {
    uint64_t checked = 0, exact = 0;
    check_result(checked, exact);
    c_.values_checked.add(checked);
    c_.values_exact.add(exact);
    if (exact != checked)
      SG_LOG(DEBUG, dataplane, "job %u round %u: %lu of %lu values equal to the exact mean (timeouts %lu, peers moved on %lu)\n",
             cfg_.job.id, round_, static_cast<unsigned long>(exact), static_cast<unsigned long>(checked),
             static_cast<unsigned long>(s.timeouts), static_cast<unsigned long>(s.peers_moved_on));
  }
  if (group_) {
    count_group_st();
    // Every result chunk went to the workers as it became final; this ends the round
    // (anything the WAN round gave up on is sent as the site's own mean), unless the whole
    // result already ended it (deliver_if_complete_st).
    deliver_st(now);
  }
}

// The site's workers' side of the round that ended: what LocalGroup counted since the last.
void JobRunner::count_group_st() {
  const auto& g = group_->stats();
  c_.worker_timeouts.add(g.push_timeouts - group_timeouts_seen_);
  c_.workers_missing.add(g.missing_workers - group_missing_seen_);
  c_.worker_bubbles.add(g.push_bubbles - group_bubbles_seen_);
  // The group's receiver gets only workers' DATA: what it dropped as a later round's is early.
  const uint64_t early = group_->receiver().stats().future_round;
  c_.worker_early.add(early - group_early_seen_);
  group_bubbles_seen_ = g.push_bubbles;
  group_early_seen_ = early;
  group_timeouts_seen_ = g.push_timeouts;
  group_missing_seen_ = g.missing_workers;
}

void JobRunner::take_live_st(uint32_t round) {
  const uint32_t t = live_timeout_ms_.load(std::memory_order_relaxed);
  if (t == timeout_ms_) return;
  timeout_ms_ = t;
  if (sync_) sync_->set_round_timeout(static_cast<Nanos>(t) * kMilli);
  if (peer_) peer_->set_round_timeout(static_cast<Nanos>(t) * kMilli);
  // A derived worker timeout (job.worker_timeout_ms 0) follows: the site still gives up on a
  // dead worker before its peers give up on the site.
  if (group_ && cfg_.job.worker_timeout_ms == 0) group_->set_push_timeout(static_cast<Nanos>(t / 2) * kMilli);
  if (role_.engine == 0)
    SG_LOG(INFO, dataplane, "job %u: round timeout %u ms from round %u (config reload)\n", cfg_.job.id, t, round);
}

void JobRunner::set_peer_restarts(const PeerRestarts* r) {
  restarts_ = r;
  if (!r) return;
  restarts_generation_ = r->generation();
  restarts_seen_.assign(r->sites(), 0);
  for (size_t i = 0; i < r->sites(); ++i) restarts_seen_[i] = r->restarts(i);
}

// A peer restarted: only a round running now can owe it or be owed by it (a later round
// begins fresh at both). One load per poll while nothing changes.
void JobRunner::check_restarts_st(Nanos now) {
  const uint32_t g = restarts_->generation();
  if (g == restarts_generation_) return;
  restarts_generation_ = g;
  for (size_t i = 0; i < restarts_seen_.size(); ++i) {
    const uint32_t n = restarts_->restarts(i);
    if (n == restarts_seen_[i]) continue;
    restarts_seen_[i] = n;
    if (sync_ && sync_->running()) {
      sync_->peer_restarted(static_cast<int>(i), now, tx_);
      next_wake_ = 0;
    } else if (peer_ && peer_->running()) {
      peer_->peer_restarted(static_cast<int>(i), now, tx_);
      next_wake_ = 0;
    }
  }
}

uint32_t JobRunner::next_synthetic_round() const {
  if (!approved_ || !rejoin_) return round_ + 1;
  // Approved first: the agent publishes the rejoin round before any approval.
  if (approved_->load(std::memory_order_acquire) == 0) return round_ + 1;
  return std::max(round_ + 1, rejoin_->load(std::memory_order_acquire));
}

// The round ended here and at every follower: count it, and the workers get their result.
// False once the job's last round is done.
bool JobRunner::end_round_st(Nanos now) {
  if (checked_ || sync_->running() || !sync_->round_done() || !followers_done(round_)) return true;
  count_round_st(now);
  if (rounds_limit() && round_ >= rounds_limit()) {
    finished_.store(true, std::memory_order_release);
    return false;
  }
  return true;
}

unsigned JobRunner::poll_st(Nanos now) {
  now_ = now;
  if (slot_) {
    if (!online_) {
      slot_->online_st(role_.engine);
      online_ = true;
    }
    slot_->quiescent_st(role_.engine);  // no snapshot pointer is held across passes
  }
  if (restarts_) check_restarts_st(now);
  if (lead_link_) return follow_st(now);
  if (peer_) return peer_poll_st(now);
  // The workers' whole next update is in: the compute time adaptive compression weighs.
  if (group_ && group_->contribution_ready(group_->round())) note_update_lag_st(group_->round(), now);
  if (finished()) {
    if (group_) group_->poll(now, tx_);  // results still on their way to the workers
    return 0;
  }
  unsigned work = links_.empty() ? 0 : lead_messages_st(now);
  if (!sync_->running()) {
    if (!end_round_st(now)) return 1;
    if (checked_) {
      if (group_) {
        if (deliver_st(now)) ++work;
        // The WAN round begins with the round's first push, or as soon as a peer sent DATA of
        // it to any of this site's engines (a peer's DATA of a round not begun here is dropped
        // and resent only after its timeout, which grows while this site's workers compute),
        // and takes the site's contribution chunk by chunk as the workers' copies complete
        // (feed_local_st).
        const uint32_t r = group_->round();
        const bool start = delivered_ && (group_->round_started() || sync_->peer_began(r) ||
                                          (followers_peer_began_ == r && r == round_ + 1));
        if (start && !may_begin(group_->round())) {
          c_.gate_waits.add();
          c_.wanted_round.store(group_->round(), std::memory_order_relaxed);
        } else if (start) {
          maybe_switch_policy_st(group_->round());
          take_live_st(group_->round());
          if (sync_->begin_round(group_->round(), group_->contribution_buffer(), now, tx_, true)) {
            c_.round_open.store(true, std::memory_order_relaxed);
            round_ = group_->round();
            checked_ = false;
            delivered_ = false;
            begin_followers_st(round_, true);
            next_wake_ = 0;  // the new round's timers: see below
            feed_local_st(now);
            ++work;
          }
        }
      } else if (const uint32_t next = next_synthetic_round(); !may_begin(next)) {
        c_.gate_waits.add();
        c_.wanted_round.store(next, std::memory_order_relaxed);
      } else if (rounds_limit() && next > rounds_limit()) {
        finished_.store(true, std::memory_order_release);  // rejoined after the job's last round
        return 1;
      } else {
        maybe_switch_policy_st(next);
        fill_local(next);
        take_live_st(next);
        if (sync_->begin_round(next, local_, now, tx_)) {
          c_.round_open.store(true, std::memory_order_relaxed);
          round_ = next;
          checked_ = false;
          begin_followers_st(round_, false);
          // The new round has timers of its own (its first sends may have been lost: ARP not
          // yet answered, a port not yet up). Poll now, not at the wake time computed for the
          // idle state: otherwise both sides could wait for each other until a packet arrives.
          next_wake_ = 0;
          ++work;
        }
      }
    }
  }
  if (now >= next_wake_) {
    next_wake_ = sync_->poll(now, tx_);
    end_round_st(now);  // as in on_packet_st: before the group's poll sends the last results
    if (group_) {
      next_wake_ = std::min(next_wake_, group_->poll(now, tx_));
      feed_local_st(now);  // the push timeout may have made chunks final
    }
    ++work;
  }
  return work;
}

}  // namespace sg::dp
