#include "control/gateway.h"

#include <rte_cycles.h>
#include <rte_launch.h>
#include <rte_ring_elem.h>
#include <rte_lcore.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <thread>

#include "control/telemetry.h"
#include "crypto/keys.h"
#include "crypto/session.h"
#include "dataplane/log.h"
#include "dataplane/mbuf_ring.h"

namespace sg::ctl {

Gateway::~Gateway() {
  if (running_) stop();
}

bool Gateway::start() {
  unsigned workers = 1;
  for (const auto& p : cfg_.ports) workers = std::max<unsigned>(workers, p.rx_queues);
  const unsigned lcores = rte_lcore_count();
  if (lcores < workers + 1) {
    SG_LOG(ERR, control, "%s needs %u worker lcores plus the main lcore (one per RX queue), the EAL has %u: "
                 "pass e.g. -l 0-%u\n",
                 cfg_.source.c_str(), workers, lcores, workers);
    return false;
  }
  if (cfg_.telemetry.prometheus_port) {
    std::string err;
    if (!metrics_.open(cfg_.telemetry.prometheus_port, err)) {
      SG_LOG(ERR, control, "%s: %s\n", cfg_.source.c_str(), err.c_str());
      return false;
    }
  }
  {
    std::string err;
    if (!load_peer_security(cfg_, security_.params, err) || !load_worker_security(cfg_, security_.worker_params, err) ||
        !security_.build(workers, err)) {
      SG_LOG(ERR, control, "%s\n", err.c_str());
      return false;
    }
    if (security_.on())
      SG_LOG(INFO, control, "traffic between gateways sealed with %s (%s), key fingerprint %s, first epoch %u\n",
             crypto::suite_name(security_.params.suite),
             security_.params.protection == crypto::Protection::kAuthOnly ? "authentication only" : "encrypted",
             crypto::fingerprint(security_.params.secret).c_str(), security_.params.first_epoch);
    else if (!cfg_.peers.empty())
      SG_LOG(WARNING, control, "%s: security.mode is plain: traffic between gateways is NOT authenticated; anyone "
                              "who reaches this gateway's UDP port can alter training (experiments only)\n",
             cfg_.source.c_str());
    if (security_.workers_sealed())
      SG_LOG(INFO, control, "workers admitted with the job token (fingerprint %s) from this gateway's subnets\n",
             crypto::fingerprint(security_.worker_params.secret).c_str());
    else if (cfg_.job.workers > 0)
      SG_LOG(WARNING, control, "%s: job.token_file is not set: any host on this gateway's subnets can push into "
                              "the job and read its results\n",
             cfg_.source.c_str());
  }
  const uint32_t n = dp::mbufs_needed(cfg_, workers);
  pool_ = dp::create_pool("sg_pool", n, cfg_.dataplane.mbuf_cache, dp::mbuf_data_room(cfg_));
  if (!pool_) return false;
  if (!dp::setup_ports(cfg_, workers, pool_, ports_)) return false;
  routes_ = dp::build_routes(cfg_, ports_, nbrs_);

  dp::EngineParams ep;
  ep.burst = cfg_.dataplane.burst;
  ep.tx_drain_us = cfg_.dataplane.tx_drain_us;
  ep.idle_sleep_max_us = cfg_.dataplane.idle_sleep_max_us;
  for (unsigned w = 0; w < workers; ++w) {
    ep.queue = static_cast<uint16_t>(w);
    handlers_.push_back(std::make_unique<dp::GatewayHandler>(cfg_, ports_, nbrs_, routes_, w == 0));
    if (security_.on())
      handlers_.back()->attach_security(security_.engine_openers[w].get(), security_.engine_sealers[w].get());
    if (security_.workers_sealed()) handlers_.back()->attach_worker_security(security_.worker_openers[w].get());
    engines_.push_back(std::make_unique<dp::Engine>(ports_, pool_, *handlers_.back(), ep));
  }
  if (!cfg_.jobs.empty() && workers > 1) {
    // Job frames that arrive on one engine's queue for a shard another engine owns move
    // through the owner's MP/SC ring (every job's).
    for (unsigned q = 0; q < workers; ++q) {
      rte_ring* r = rte_ring_create(("sg_handoff" + std::to_string(q)).c_str(), 4096, rte_socket_id(), RING_F_SC_DEQ);
      if (!r) {
        SG_LOG(ERR, control, "cannot create the hand-off ring of engine %u\n", q);
        return false;
      }
      handoff_rings_.push_back(r);
    }
    for (unsigned q = 0; q < workers; ++q) handlers_[q]->attach_shard_engines(handoff_rings_, q);
  }
  if (dp::jobs_share_links(cfg_)) {
    // One congestion state per engine and peer, drawn on by every job's senders by weight.
    // Slots for every sender of every job twice over (a plan switch attaches the new
    // senders before the old ones leave): attaching never fails on the engine.
    ltp::LinkShareConfig lc;
    lc.max_flows = static_cast<uint32_t>(2 * cfg_.jobs.size() * cfg_.topology.shards + 8);
    const auto sites = dp::job_sites(cfg_);
    shares_.resize(workers);
    for (unsigned q = 0; q < workers; ++q)
      for (uint16_t site : sites)
        shares_[q].push_back(site == cfg_.site.id ? nullptr
                                                  : std::make_unique<ltp::LinkShare>(
                                                        std::make_unique<ltp::DeliveryRateController>(dp::wan_rate(cfg_)), lc));
  }
  for (size_t k = 0; k < cfg_.jobs.size(); ++k)
    if (!build_job(k, workers)) return false;
  launch_.resize(workers);
  engines_stop_.store(false);
  unsigned w = 0;
  unsigned lcore;
  RTE_LCORE_FOREACH_WORKER(lcore) {
    if (w == workers) break;
    launch_[w] = dp::Engine::LaunchArgs{engines_[w].get(), &engines_stop_};
    if (rte_eal_remote_launch(dp::Engine::launch, &launch_[w], lcore) != 0) {
      SG_LOG(ERR, control, "cannot launch engine %u on lcore %u\n", w, lcore);
      engines_stop_.store(true);
      rte_eal_mp_wait_lcore();
      return false;
    }
    SG_LOG(INFO, control, "engine %u on lcore %u owns queue %u of %zu ports\n", w, lcore, w, ports_.size());
    ++w;
  }
  running_ = true;
  if (cfg_.telemetry.enabled) telemetry_attach(this);
  return true;
}

bool Gateway::build_job(size_t k, unsigned workers) {
  auto owned = std::make_unique<JobStack>();
  JobStack& js = *owned;
  js.cfg = config::for_job(cfg_, k);
  const uint32_t id = js.cfg.job.id;
  const std::string tag = std::to_string(k) + "_";  // DPDK object names are global
  {
    std::string err;
    if (!dp::initial_plan(js.cfg, js.plan, err)) {
      SG_LOG(ERR, control, "%s: job %u: %s\n", cfg_.source.c_str(), id, err.c_str());
      return false;
    }
    js.policy_version = 1;
  }
  // Every engine runs the job's shards s % workers == its index (engine 0 also the site's
  // workers and the round's start and end); new policies reach them through the RCU slot.
  js.slot = std::make_unique<dp::PolicySlot>(workers);
  for (unsigned q = 0; q < workers; ++q) {
    dp::LtpCounters& lc = const_cast<dp::LtpCounters&>(handlers_[q]->ltp());
    js.txs.push_back(std::make_unique<dp::LtpTx>(ports_, nbrs_, routes_, lc));
    if (security_.on()) js.txs.back()->set_sealer(security_.engine_sealers[q].get());
    if (security_.workers_sealed()) js.txs.back()->set_worker_sealer(security_.worker_sealers[q].get());
    std::vector<ltp::LinkShare*> shares;
    if (q < shares_.size())
      for (const auto& sh : shares_[q]) shares.push_back(sh.get());
    js.runners.push_back(std::make_unique<dp::JobRunner>(js.cfg, js.plan, js.policy_version, *js.txs.back(),
                                                         dp::ShardRole{q, workers}, std::move(shares)));
    if (!handlers_[q]->attach_job(js.runners.back().get(), js.txs.back().get())) {
      SG_LOG(ERR, control, "%s: job %u: engine %u holds %u jobs already\n", cfg_.source.c_str(), id, q,
             dp::GatewayHandler::kMaxJobs);
      return false;
    }
    // Control <- engine q: DATA arrival samples (SP/SC ring).
    rte_ring* samples = rte_ring_create_elem(("sg_samples" + tag + std::to_string(q)).c_str(),
                                             sizeof(measure::ArrivalSample), 16384, rte_socket_id(),
                                             RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (!samples) {
      SG_LOG(ERR, control, "job %u: cannot create the measurement ring of engine %u\n", id, q);
      return false;
    }
    js.samples.push_back(samples);
    js.runners.back()->attach_control(js.slot.get(), samples);
  }
  js.lead = js.runners.front().get();
  if (workers > 1) {
    // Lead <-> followers: a round's messages fit (engine_link.h).
    const uint32_t down = static_cast<uint32_t>(js.cfg.job.model_bytes / config::worker_chunk_bytes(js.cfg) + 64);
    const uint32_t up =
        static_cast<uint32_t>(js.cfg.job.model_bytes / cfg_.transport.chunk_bytes + 64 + 2 * cfg_.topology.shards);
    std::vector<dp::EngineLink*> links;
    std::vector<const dp::JobRunner*> followers;
    for (unsigned q = 1; q < workers; ++q) {
      js.links.push_back(std::make_unique<dp::EngineLink>("sg_link" + tag + std::to_string(q), down, up));
      if (!js.links.back()->ok()) {
        SG_LOG(ERR, control, "job %u: cannot create the rings between engine 0 and engine %u (raise -m)\n", id, q);
        return false;
      }
      js.runners[q]->attach_lead(js.links.back().get(), js.lead);
      links.push_back(js.links.back().get());
      followers.push_back(js.runners[q].get());
    }
    js.lead->attach_followers(std::move(links), std::move(followers));
  }
  // CONTROL frames between engine 0 and the job's policy agent on this (main) lcore.
  js.ctl_in = rte_ring_create(("sg_ctl_in" + tag).c_str(), 1024, rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
  js.ctl_out = rte_ring_create(("sg_ctl_out" + tag).c_str(), 1024, rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
  if (!js.ctl_in || !js.ctl_out) {
    SG_LOG(ERR, control, "job %u: cannot create the control rings\n", id);
    return false;
  }
  if (!cfg_.peers.empty()) {
    // Every start is treated as a restart (lib/policy): the gateway learns the cluster's
    // policy state from its peers before its first round, so one that crashed and came
    // back rejoins at the cluster's round under the policy in force, and a cluster that
    // starts together agrees on the initial plan in one exchange. The incarnation grows
    // with the start time (the key epoch's clock when sealed).
    uint64_t incarnation = security_.params.first_epoch;
    if (incarnation == 0) incarnation = crypto::boot_epoch(static_cast<uint64_t>(std::time(nullptr)));
    js.agent = std::make_unique<PolicyAgent>(js.cfg, js.plan, pool_, ports_, nbrs_, routes_, js.ctl_in, js.ctl_out,
                                             *js.slot, incarnation);
    handlers_[0]->attach_control(id, js.ctl_in, js.ctl_out);
    if (security_.on()) js.agent->set_sealer(security_.control.get());
    js.lead->set_gate(&js.agent->approved_through(), &js.agent->rejoin_round());  // the lead begins every round
  }
  stacks_.push_back(std::move(owned));
  return true;
}

void Gateway::print_job_summary(const JobStack& js) const {
  const config::GatewayConfig& c = js.cfg;
  const auto& rc = js.lead->counters();
  const uint64_t n = rc.rounds.get();
  const uint64_t checked = rc.values_checked.get();
  char exact[200] = "";
  if (checked)
    std::snprintf(exact, sizeof exact, ", values equal to the exact mean %.4f%%", 100.0 * rc.values_exact.get() / checked);
  else
    std::snprintf(exact, sizeof exact,
                  ", %llu results delivered to workers, worker waits timed out %llu, workers missing %llu, worker "
                  "chunks missing %llu",
                  (unsigned long long)rc.worker_rounds.get(), (unsigned long long)rc.worker_timeouts.get(),
                  (unsigned long long)rc.workers_missing.get(), (unsigned long long)rc.worker_bubbles.get());
  if (c.sync.mode == config::SyncMode::kSelmcast)
    std::printf("[%s] job %u (selmcast, staleness %u): other sites' updates mixed %.2f per round, stale updates "
                "refused %llu, update lag %.1f ms\n",
                c.site.name.c_str(), c.job.id, c.sync.staleness,
                n ? static_cast<double>(rc.updates_mixed.get()) / static_cast<double>(n) : 0.0,
                (unsigned long long)rc.stale_updates.get(),
                static_cast<double>(std::max<int64_t>(0, rc.update_lag_ns.load())) / 1e6);
  std::printf("[%s] job %u: %llu rounds of %llu bytes, mean round %.1f ms, early closes %llu, bubbles up %llu down %llu, "
              "timeouts %llu, peers moved on %llu, retransmits %llu%s\n",
              c.site.name.c_str(), c.job.id, (unsigned long long)n, (unsigned long long)c.job.model_bytes,
              n ? rc.round_ns_total.get() / 1e6 / n : 0.0, (unsigned long long)rc.early_closes.get(),
              (unsigned long long)rc.up_bubbles.get(), (unsigned long long)rc.down_bubbles.get(),
              (unsigned long long)rc.timeouts.get(), (unsigned long long)rc.peers_moved_on.get(),
              (unsigned long long)rc.retransmits.get(), exact);
  if (js.runners.size() > 1 && stacks_.size() == 1) {
    // How the job spread over the engines (shards s % engines == q under the plan in force);
    // the engines' LTP counters are not per job, so only with one job.
    const size_t shards = js.plan.shards.size(), e = js.runners.size();
    for (size_t q = 0; q < e; ++q) {
      const auto& l = handlers_[q]->ltp();
      std::printf("[%s] engine %zu: %zu shard(s), LTP DATA in %llu out %llu, handed to other engines %llu\n",
                  c.site.name.c_str(), q, shards / e + (q < shards % e ? 1 : 0), (unsigned long long)l.data_rx.get(),
                  (unsigned long long)l.data_tx.get(), (unsigned long long)l.handed_over.get());
    }
  }
  if (js.agent) {
    const auto& st = js.agent->stats();
    std::printf("[%s] policy%s: version %u in force, %llu switches, %llu proposals (coordinator), last modelled gain "
                "%.2f; rows sent %llu received %llu; probe trains sent %llu, measured %llu\n",
                c.site.name.c_str(), stacks_.size() > 1 ? (" of job " + std::to_string(c.job.id)).c_str() : "",
                js.policy_version, (unsigned long long)st.switches.load(), (unsigned long long)st.proposals.load(),
                st.last_gain.load(), (unsigned long long)st.rows_sent.load(), (unsigned long long)st.rows_received.load(),
                (unsigned long long)st.probe_trains_sent.load(), (unsigned long long)st.probe_results.load());
  }
}

bool Gateway::all_jobs_finished() const {
  if (stacks_.empty()) return false;
  for (const auto& js : stacks_)
    if (!js->lead->finished()) return false;
  return true;
}

Totals Gateway::totals() const {
  Totals t;
  for (const auto& e : engines_) {
    const auto& c = e->counters();
    t.rx_packets += c.rx_packets.get();
    t.rx_bytes += c.rx_bytes.get();
    t.tx_packets += c.tx_packets.get();
    t.tx_bytes += c.tx_bytes.get();
    t.tx_dropped += c.tx_dropped.get();
    t.idle_sleeps += c.idle_sleeps.get();
    for (size_t i = 0; i < static_cast<size_t>(dp::Drop::kCount); ++i) {
      t.drop_by_reason[i] += c.drops[i].get();
      t.drops += c.drops[i].get();
    }
  }
  for (const auto& h : handlers_) {
    const auto& l = h->ltp();
    t.data_rx += l.data_rx.get();
    t.data_rx_bytes += l.data_rx_bytes.get();
    t.data_tx += l.data_tx.get();
    t.data_tx_bytes += l.data_tx_bytes.get();
    t.arp_answered += l.arp_requests_answered.get();
    t.arp_learned += l.arp_learned.get();
    t.no_mbuf += l.no_mbuf.get();
    t.bad_version += l.bad_version.get();
    t.relayed_tx += l.relayed_tx.get();
    t.relayed_rx += l.relayed_rx.get();
    t.relay_forwarded += l.relay_forwarded.get();
    t.relay_forwarded_bytes += l.relay_forwarded_bytes.get();
    t.relay_no_route += l.relay_no_route.get();
    t.relay_refused += l.relay_refused.get();
    t.txq_full += l.txq_full.get();
    t.opened += l.opened.get();
    t.sealed += l.sealed.get();
    t.seal_failed += l.seal_failed.get();
    for (size_t i = 0; i < l.auth_drops.size(); ++i) t.auth_drops[i] += l.auth_drops[i].get();
  }
  return t;
}

AuthSnapshot Gateway::auth_snapshot() const {
  AuthSnapshot a;
  a.by_peer.assign(std::min(cfg_.peers.size(), dp::LtpCounters::kPeersCounted), AuthCounts{});
  for (const auto& h : handlers_) {
    const auto& l = h->ltp();
    a.opened += l.opened.get();
    for (size_t p = 0; p < a.by_peer.size(); ++p)
      for (size_t r = 0; r < a.by_peer[p].size(); ++r) a.by_peer[p][r] += l.auth_drops_from_site[p][r].get();
    for (size_t r = 0; r < a.strangers.size(); ++r) a.strangers[r] += l.auth_drops_from_stranger[r].get();
    if (const uint32_t ip = l.last_refused_stranger.load(std::memory_order_relaxed)) a.last_stranger = ip;
  }
  return a;
}

uint64_t Gateway::data_rx_from_peer(size_t peer_index) const {
  uint64_t s = 0;
  for (const auto& h : handlers_)
    if (peer_index < h->ltp().data_rx_from_site.size()) s += h->ltp().data_rx_from_site[peer_index].get();
  return s;
}

void Gateway::print_line(const Totals& now, const Totals& before, double seconds) const {
  const double rx_pps = (now.rx_packets - before.rx_packets) / seconds;
  const double tx_pps = (now.tx_packets - before.tx_packets) / seconds;
  const double rx_gbit = 8.0 * (now.rx_bytes - before.rx_bytes) / seconds / 1e9;
  const double tx_gbit = 8.0 * (now.tx_bytes - before.tx_bytes) / seconds / 1e9;
  std::string rounds;
  if (const dp::JobRunner* job = this->job()) {  // the first job's
    const auto& rc = job->counters();
    char buf[160];
    const uint64_t checked = rc.values_checked.get();
    std::snprintf(buf, sizeof buf, " | rounds %llu, last %.1f ms, early closes %llu, bubbles %llu",
                  static_cast<unsigned long long>(rc.rounds.get()), rc.last_round_ns.load() / 1e6,
                  static_cast<unsigned long long>(rc.early_closes.get()),
                  static_cast<unsigned long long>(rc.up_bubbles.get() + rc.down_bubbles.get()));
    rounds = buf;
    if (checked) {
      std::snprintf(buf, sizeof buf, ", exact %.2f%%", 100.0 * rc.values_exact.get() / checked);
      rounds += buf;
    }
  }
  std::printf("[%s] rx %7.0f pps %6.3f Gbit/s | tx %7.0f pps %6.3f Gbit/s | drops %llu%s\n", cfg_.site.name.c_str(),
              rx_pps, rx_gbit, tx_pps, tx_gbit, static_cast<unsigned long long>(now.drops + now.tx_dropped),
              rounds.c_str());
  std::fflush(stdout);
}

std::vector<uint64_t> Gateway::bytes_sent_to(const JobStack& js, uint64_t& total) const {
  const auto sites = dp::job_sites(cfg_);
  std::vector<uint64_t> out(sites.size(), 0);
  total = 0;
  for (size_t i = 0; i < sites.size(); ++i) {
    if (sites[i] == cfg_.site.id) continue;
    for (const auto& tx : js.txs) {
      const dp::Sprayer& sp = tx->sprayer();
      for (unsigned s = 0; s < sp.slots(sites[i]); ++s)
        if (const auto* c = sp.counters(sites[i], s)) out[i] += c->bytes.get();
    }
    total += out[i];
  }
  return out;
}

void Gateway::drain_samples() {
  const Nanos now = handlers_.empty() ? 0 : handlers_[0]->now_ns(rte_rdtsc());
  for (auto& js : stacks_) drain_samples(*js, now);
}

void Gateway::drain_samples(JobStack& js, Nanos now) {
  measure::ArrivalSample buf[256];
  unsigned n;
  for (rte_ring* r : js.samples)
    while ((n = rte_ring_dequeue_burst_elem(r, buf, sizeof(buf[0]), 256, nullptr)) > 0)
      if (js.agent)
        for (unsigned i = 0; i < n; ++i) js.agent->estimator().on_arrival(buf[i]);
  if (!js.agent) return;  // a job without peers: nothing to measure for
  PolicyAgent& agent = *js.agent;
  const auto& rc = js.lead->counters();
  measure::LinkEstimator& est = agent.estimator();
  uint64_t total = 0;
  const std::vector<uint64_t> sent = bytes_sent_to(js, total);
  const int64_t lag = rc.update_lag_ns.load(std::memory_order_relaxed);
  agent.set_update_lag(lag < 0 ? -1.0 : static_cast<double>(lag) / 1e9);
  agent.tick(now, static_cast<uint32_t>(rc.last_round.load()), sent, total,
             rc.wanted_round.load(std::memory_order_relaxed));
  const uint32_t v = static_cast<uint32_t>(agent.active_version() + 1);
  const auto sites = dp::job_sites(cfg_);
  int self = 0;
  for (size_t i = 0; i < sites.size(); ++i)
    if (sites[i] == cfg_.site.id) self = static_cast<int>(i);
  std::vector<LinkView> views;
  for (size_t i = 0; i < sites.size(); ++i) {
    if (static_cast<int>(i) == self) continue;
    const auto sum = est.summary(static_cast<uint16_t>(i), static_cast<uint16_t>(self), now);
    LinkView lv;
    lv.peer_id = sites[i];
    lv.mbit_s = sum.bytes_per_s * 8 / 1e6;
    lv.rtt_ms = sum.rtt_smoothed >= 0 ? sum.rtt_smoothed / 1e6 : -1;
    lv.loss = sum.loss_rate;
    lv.windows = sum.windows;
    lv.changes = sum.changes;
    views.push_back(lv);
  }
  js.slot->reclaim();
  std::lock_guard lk(view_mu_);
  if (v != js.policy_version) {
    js.plan = agent.current_plan();
    js.policy_version = v;
  }
  js.link_views = std::move(views);
}

void Gateway::run_control(const std::atomic<bool>& stop, double duration_s, std::atomic<bool>* reload_requested) {
  stats_interval_ms_ = cfg_.telemetry.stats_interval_ms;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto last_print = t0, last_auth_check = t0;
  Totals before = totals();
  // Refusals by source, said at most every 10 s per source (auth_watch.h).
  std::unique_ptr<AuthWatch> auth_watch;
  if (security_.on() || security_.workers_sealed()) {
    std::vector<std::string> names;
    for (const auto& p : cfg_.peers) names.push_back(p.name);
    auth_watch = std::make_unique<AuthWatch>(std::move(names), crypto::fingerprint(security_.params.secret));
    auth_watch->poll(auth_snapshot(), t0);
  }
  // With a job the policy agent approves rounds: tick every millisecond so rounds never wait long.
  const auto tick = agent() ? std::chrono::milliseconds(1)
                           : std::chrono::milliseconds(std::max<uint32_t>(1, std::min<uint32_t>(cfg_.control.interval_ms, 100)));
  while (!stop.load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(tick);
    drain_samples();
    metrics_.poll(*this);
    const auto now = clock::now();
    const double elapsed = std::chrono::duration<double>(now - t0).count();
    if (reload_requested && reload_requested->exchange(false)) reload();
    if (stats_interval_ms_ && now - last_print >= std::chrono::milliseconds(stats_interval_ms_)) {
      const Totals t = totals();
      print_line(t, before, std::chrono::duration<double>(now - last_print).count());
      before = t;
      last_print = now;
    }
    if (auth_watch && now - last_auth_check >= std::chrono::seconds(1)) {
      for (const auto& line : auth_watch->poll(auth_snapshot(), now))
        SG_LOG(WARNING, control, "%s: %s\n", cfg_.source.c_str(), line.c_str());
      last_auth_check = now;
    }
    if (duration_s > 0 && elapsed >= duration_s) break;
    if (all_jobs_finished()) break;
  }
}

bool Gateway::stop() {
  if (!running_) return true;
  telemetry_attach(nullptr);
  engines_stop_.store(true);
  rte_eal_mp_wait_lcore();
  running_ = false;
  dp::drain_rx(ports_);
  // Frames one engine handed to another after that one had stopped.
  for (rte_ring* r : handoff_rings_) dp::free_ring_mbufs(r);
  const Totals t = totals();
  std::printf("[%s] final: rx %llu pkts (%llu B), tx %llu pkts (%llu B), tx refused %llu, LTP DATA in %llu out %llu, "
              "ARP answered %llu learned %llu, idle sleeps %llu\n",
              cfg_.site.name.c_str(), (unsigned long long)t.rx_packets, (unsigned long long)t.rx_bytes,
              (unsigned long long)t.tx_packets, (unsigned long long)t.tx_bytes, (unsigned long long)t.tx_dropped,
              (unsigned long long)t.data_rx, (unsigned long long)t.data_tx, (unsigned long long)t.arp_answered,
              (unsigned long long)t.arp_learned, (unsigned long long)t.idle_sleeps);
  std::string drops;
  for (size_t i = 0; i < static_cast<size_t>(dp::Drop::kCount); ++i)
    if (t.drop_by_reason[i])
      drops += std::string(" ") + dp::drop_reason_name(static_cast<dp::Drop>(i)) + "=" + std::to_string(t.drop_by_reason[i]);
  std::printf("[%s] drops:%s\n", cfg_.site.name.c_str(), drops.empty() ? " none" : drops.c_str());
  if (security_.on() || security_.workers_sealed()) {
    std::string refused;
    for (size_t i = 0; i < static_cast<size_t>(dp::AuthDrop::kCount); ++i)
      if (t.auth_drops[i])
        refused += std::string(" ") + dp::auth_drop_name(static_cast<dp::AuthDrop>(i)) + "=" + std::to_string(t.auth_drops[i]);
    std::printf("[%s] sealed: %llu messages sealed, %llu opened, refused:%s\n", cfg_.site.name.c_str(),
                (unsigned long long)t.sealed, (unsigned long long)t.opened, refused.empty() ? " none" : refused.c_str());
  }
  for (const auto& js : stacks_) print_job_summary(*js);
  engines_.clear();
  handlers_.clear();
  for (auto& js : stacks_) {
    js->agent.reset();
    for (rte_ring** r : {&js->ctl_in, &js->ctl_out}) {
      if (!*r) continue;
      dp::free_ring_mbufs(*r);
      rte_ring_free(*r);
      *r = nullptr;
    }
    js->links.clear();
    js->runners.clear();
    js->txs.clear();
    js->slot.reset();
    for (rte_ring* r : js->samples) rte_ring_free(r);
  }
  stacks_.clear();
  shares_.clear();
  for (rte_ring* r : handoff_rings_) rte_ring_free(r);
  handoff_rings_.clear();
  dp::teardown_ports(ports_);
  bool full = true;
  if (pool_) {
    full = dp::pool_full(pool_);
    std::printf("[%s] mbuf pool: %u of %u back%s\n", cfg_.site.name.c_str(), rte_mempool_avail_count(pool_),
                pool_->size, full ? "" : "  <-- LEAK");
    rte_mempool_free(pool_);
    pool_ = nullptr;
  }
  std::fflush(stdout);
  return full;
}

}  // namespace sg::ctl
