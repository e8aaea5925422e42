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

// How long an ended job may keep its round under way before the gateway tears it down anyway.
constexpr Nanos kStopGrace = 30 * kSecond;
// How long a stopping gateway waits for its memif peers to close their side first: longer than
// the gap between gateways started together with the same --duration or job.rounds.
constexpr uint32_t kMemifPeerGraceMs = 3000;

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
        !load_admission_secret(cfg_, security_.admission_secret, err) || !security_.build(workers, err)) {
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
    else if (security_.job_tokens())
      SG_LOG(INFO, control, "every job's workers admitted with their job's token, derived from admission.token_file "
                            "(fingerprint %s)\n", crypto::fingerprint(security_.admission_secret).c_str());
    else if (cfg_.job.workers > 0 || cfg_.admission.enabled)
      SG_LOG(WARNING, control, "%s: neither job.token_file nor admission.token_file is set: any host on this gateway's "
                              "subnets can push into a job (or announce one) and read its results\n",
             cfg_.source.c_str());
  }
  uint32_t n = dp::mbufs_needed(cfg_, workers);
  if (cfg_.admission.enabled && !cfg_.dataplane.mbufs)  // room for the announced jobs' rings
    n = static_cast<uint32_t>(std::min<uint64_t>(uint64_t(n) + cfg_.admission.max_jobs * kJobMbufs, 1u << 24));
  pool_ = dp::create_pool("sg_pool", n, cfg_.dataplane.mbuf_cache, dp::mbuf_data_room(cfg_));
  if (!pool_) return false;
  if (!dp::setup_ports(cfg_, workers, pool_, ports_)) return false;
  routes_ = dp::build_routes(cfg_, ports_, nbrs_);

  dp::EngineParams ep;
  ep.burst = cfg_.dataplane.burst;
  ep.tx_drain_us = cfg_.dataplane.tx_drain_us;
  ep.idle_sleep_max_us = cfg_.dataplane.idle_sleep_max_us;
  ep.spin_polls_before_sleep = cfg_.dataplane.spin_polls;
  for (unsigned w = 0; w < workers; ++w) {
    ep.queue = static_cast<uint16_t>(w);
    handlers_.push_back(std::make_unique<dp::GatewayHandler>(cfg_, ports_, nbrs_, routes_, w == 0));
    if (security_.on())
      handlers_.back()->attach_security(security_.engine_openers[w].get(), security_.engine_sealers[w].get());
    if (security_.workers_sealed()) handlers_.back()->attach_worker_security(security_.worker_openers[w].get());
    if (security_.job_tokens()) handlers_.back()->require_job_tokens();
    engines_.push_back(std::make_unique<dp::Engine>(ports_, pool_, *handlers_.back(), ep));
  }
  const bool any_jobs = !cfg_.jobs.empty() || cfg_.admission.enabled;
  if (any_jobs && workers > 1) {
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
    // One congestion state per engine and peer, drawn on by every job's senders by weight;
    // the engines' states of one link on one board, so weights hold across engines.
    // Slots for every sender of every job twice over (a plan switch attaches the new
    // senders before the old ones leave): attaching never fails on the engine.
    ltp::LinkShareConfig lc;
    const size_t jobs = cfg_.jobs.size() + (cfg_.admission.enabled ? cfg_.admission.max_jobs : 0);
    lc.max_flows = static_cast<uint32_t>(2 * jobs * cfg_.topology.shards + 8);
    const auto sites = dp::job_sites(cfg_);
    for (uint16_t site : sites)
      boards_.push_back(site == cfg_.site.id ? nullptr : std::make_unique<ltp::LinkBoard>(static_cast<uint32_t>(jobs + 1), true));
    shares_.resize(workers);
    for (unsigned q = 0; q < workers; ++q)
      for (size_t i = 0; i < sites.size(); ++i)
        shares_[q].push_back(!boards_[i] ? nullptr
                                         : std::make_unique<ltp::LinkShare>(
                                               std::make_unique<ltp::DeliveryRateController>(dp::wan_rate(cfg_)), *boards_[i], lc));
  }
  for (size_t k = 0; k < cfg_.jobs.size(); ++k) {
    std::string err;
    auto js = build_job(config::for_job(cfg_, k), workers, err);
    if (js && !give_job_token(*js, err)) {
      free_job(*js);
      js.reset();
    }
    if (!js || !attach_job(*js, false, err)) {
      SG_LOG(ERR, control, "%s: job %u: %s\n", cfg_.source.c_str(), cfg_.jobs[k].id, err.c_str());
      return false;
    }
    stacks_.push_back(std::move(js));
  }
  if (cfg_.admission.enabled && !start_admission(workers)) return false;
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

std::unique_ptr<JobStack> Gateway::build_job(const config::GatewayConfig& jcfg, unsigned workers, std::string& err) {
  auto owned = std::make_unique<JobStack>();
  JobStack& js = *owned;
  js.cfg = jcfg;
  const uint32_t id = js.cfg.job.id;
  // DPDK object names are global: a serial, since an announced job may come back.
  const std::string tag = std::to_string(++job_serial_) + "_";
  if (!dp::initial_plan(js.cfg, js.plan, err)) return nullptr;
  js.policy_version = 1;
  // Its group on every link's board, before any of its senders attaches (closed by free_job).
  for (const auto& b : boards_) {
    if (b && b->is_open(id)) {
      err = "job " + std::to_string(id) + " is running already (its senders hold the links' shared state)";
      return nullptr;
    }
  }
  for (const auto& b : boards_) {
    if (b && !b->open_group(id, js.cfg.job.weight)) {
      err = "no room for the job on the links' shared state (" + std::to_string(b->open_groups()) + " jobs open)";
      for (const auto& o : boards_)
        if (o) o->close_group(id);
      return nullptr;
    }
  }
  js.share_group = !boards_.empty();
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
    // Control <- engine q: DATA arrival samples (SP/SC ring).
    rte_ring* samples = rte_ring_create_elem(("sg_samples" + tag + std::to_string(q)).c_str(),
                                             sizeof(measure::ArrivalSample), 16384, rte_socket_id(),
                                             RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (!samples) {
      err = "cannot create the measurement ring of engine " + std::to_string(q) + " (raise -m)";
      free_job(js);
      return nullptr;
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
        err = "cannot create the rings between engine 0 and engine " + std::to_string(q) + " (raise -m)";
        free_job(js);
        return nullptr;
      }
      js.runners[q]->attach_lead(js.links.back().get(), js.lead);
      links.push_back(js.links.back().get());
      followers.push_back(js.runners[q].get());
    }
    js.lead->attach_followers(std::move(links), std::move(followers));
  }
  // CONTROL frames between engine 0 and the job's policy agent on this (main) lcore.
  js.ctl_in = rte_ring_create(("sg_ctl_in" + tag).c_str(), kJobControlRing, rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
  js.ctl_out = rte_ring_create(("sg_ctl_out" + tag).c_str(), kJobControlRing, rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
  if (!js.ctl_in || !js.ctl_out) {
    err = "cannot create the control rings (raise -m)";
    free_job(js);
    return nullptr;
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
    if (security_.on()) js.agent->set_sealer(security_.control.get());
    js.lead->set_gate(&js.agent->approved_through(), &js.agent->rejoin_round());  // the lead begins every round
    for (auto& r : js.runners) r->set_peer_restarts(&js.agent->peer_restarts());
  }
  (void)id;
  return owned;
}

bool Gateway::start_admission(unsigned workers) {
  // Engine q <- control: job commands (SP/SC); engine 0 <-> control: JOB frames.
  for (unsigned q = 0; q < workers; ++q) {
    rte_ring* r = rte_ring_create(("sg_jobcmd" + std::to_string(q)).c_str(), 64, rte_socket_id(),
                                  RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (!r) {
      SG_LOG(ERR, control, "cannot create the job command ring of engine %u\n", q);
      return false;
    }
    command_rings_.push_back(r);
    handlers_[q]->attach_command_ring(r);
  }
  registry_in_ = rte_ring_create("sg_registry_in", 1024, rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
  registry_out_ = rte_ring_create("sg_registry_out", 1024, rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
  if (!registry_in_ || !registry_out_) {
    SG_LOG(ERR, control, "cannot create the job registry's rings\n");
    return false;
  }
  handlers_[0]->attach_registry(registry_in_, registry_out_);
  // The budget: admission.memory_mb, admission.max_jobs, and the pool's mbufs beyond what
  // the ports, queues and lcores need.
  config::GatewayConfig base = cfg_;
  base.dataplane.mbufs = 0;
  const uint32_t need = dp::mbufs_needed(base, workers);
  jobs::Budget b;
  b.memory_bytes = uint64_t(cfg_.admission.memory_mb) << 20;
  b.max_jobs = cfg_.admission.max_jobs;
  b.mbufs = pool_->size > need ? pool_->size - need : 0;
  desk_ = std::make_unique<JobDesk>(cfg_, workers, b, pool_, ports_, nbrs_, routes_, registry_in_, registry_out_);
  if (security_.on()) desk_->set_sealer(security_.control.get());
  if (security_.job_tokens()) desk_->set_job_tokens(security_.admission_secret);
  for (const auto& j : cfg_.jobs) {
    wire::JobSpec s;
    s.id = j.id;
    s.model_bytes = j.model_bytes;
    s.chunk_bytes = config::worker_chunk_bytes(config::for_job(cfg_, 0));
    s.workers = static_cast<uint16_t>(j.workers);
    s.weight = static_cast<uint8_t>(j.weight);
    desk_->registry().pin(s);
  }
  SG_LOG(INFO, control,
         "jobs announced by workers admitted: at most %u at once, %u MiB of memory, %llu mbufs; idle timeout %u s\n",
         b.max_jobs, cfg_.admission.memory_mb, (unsigned long long)b.mbufs, cfg_.admission.idle_timeout_s);
  return true;
}

void Gateway::sync_jobs(Nanos now) {
  if (!desk_) return;
  jobs::Registry& reg = desk_->registry();
  // A job that completes rounds is not idle.
  for (auto& js : stacks_) {
    const uint64_t r = js->lead->counters().rounds.get();
    if (r != js->rounds_seen) {
      js->rounds_seen = r;
      reg.on_activity(js->cfg.job.id, now);
    }
  }
  desk_->tick(now);
  for (const wire::JobSpec& spec : reg.to_start()) {
    std::string err;
    const auto t0 = std::chrono::steady_clock::now();
    auto js = build_job(announced_job_config(cfg_, spec), workers(), err);
    if (js && !give_job_token(*js, err)) {
      free_job(*js);
      js.reset();
    }
    if (js && attach_job(*js, true, err)) {
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      SG_LOG(INFO, control, "job %u (announced): %llu-byte model, %u workers, weight %u, chunks of %u B%s: built in %.1f ms\n",
             spec.id, (unsigned long long)spec.model_bytes, spec.workers, spec.weight, spec.chunk_bytes,
             spec.exact ? ", exact (no compression, no Early Close)" : "", ms);
      std::lock_guard lk(jobs_mu_);
      stacks_.push_back(std::move(js));
      reg.started(spec.id, true, "", now);
    } else {
      if (js) free_job(*js);
      SG_LOG(ERR, control, "job %u (announced): %s\n", spec.id, err.c_str());
      reg.started(spec.id, false, err, now);
    }
  }
  for (uint32_t id : reg.to_stop()) {
    auto it = std::find_if(stacks_.begin(), stacks_.end(), [&](const auto& js) { return js->cfg.job.id == id; });
    if (it != stacks_.end()) {
      // A round under way still sends to the peers (results down the tree, acknowledgements):
      // its workers got their results chunk by chunk and left, but a peer's may not have. The
      // job goes once that round ended here, or kStopGrace after it was ended.
      JobStack& st = **it;
      if (st.stop_wanted_at < 0) st.stop_wanted_at = now;
      if (st.lead->counters().round_open.load(std::memory_order_relaxed) && now - st.stop_wanted_at < kStopGrace)
        continue;
      const jobs::JobView* v = reg.find(id);
      SG_LOG(INFO, control, "job %u: %s (%s); its state is freed\n", id, v ? wire::job_status_name(v->status) : "ended",
             v ? v->reason.c_str() : "");
      print_job_summary(**it);
      detach_job(**it);
      std::unique_ptr<JobStack> gone;
      {
        std::lock_guard lk(jobs_mu_);
        gone = std::move(*it);
        stacks_.erase(it);
      }
      free_job(*gone);
    }
    reg.stopped(id);
  }
}

bool Gateway::give_job_token(JobStack& js, std::string& err) {
  // Under admission.token_file every job's workers (announced or in the YAML, which then has
  // no job.token_file) seal with the job's own token: the engines check and seal with its keys.
  if (!security_.job_tokens()) return true;
  js.worker_keys = job_worker_keys(js.cfg, security_.admission_secret, static_cast<unsigned>(js.txs.size()), err);
  if (!js.worker_keys) return false;
  for (size_t q = 0; q < js.txs.size(); ++q) js.txs[q]->set_worker_sealer(js.worker_keys->sealers[q].get());
  return true;
}

bool Gateway::attach_job(JobStack& js, bool live, std::string& err) {
  const uint32_t id = js.cfg.job.id;
  const size_t engines = js.runners.size();
  if (!live) {
    for (size_t q = 0; q < engines; ++q)
      if (!handlers_[q]->attach_job(js.runners[q].get(), js.txs[q].get(),
                                    js.worker_keys ? js.worker_keys->openers[q].get() : nullptr)) {
        err = "engine " + std::to_string(q) + " holds " + std::to_string(dp::GatewayHandler::kMaxJobs) + " jobs already";
        return false;
      }
    if (js.agent) handlers_[0]->attach_control(id, js.ctl_in, js.ctl_out);
    return true;
  }
  // The engines run: each takes the job at its next poll (its command ring).
  std::vector<std::unique_ptr<dp::GatewayHandler::JobCommand>> cmds;
  for (size_t q = 0; q < engines; ++q) {
    auto c = std::make_unique<dp::GatewayHandler::JobCommand>();
    c->kind = dp::GatewayHandler::JobCommand::Kind::kAttach;
    c->job = id;
    c->runner = js.runners[q].get();
    c->tx = js.txs[q].get();
    if (js.worker_keys) c->worker_opener = js.worker_keys->openers[q].get();
    if (q == 0 && js.agent) {
      c->ctl_in = js.ctl_in;
      c->ctl_out = js.ctl_out;
    }
    cmds.push_back(std::move(c));
  }
  if (!run_commands(cmds)) {
    err = "the engines did not take the job within 5 s";
    return false;
  }
  for (size_t q = 0; q < engines; ++q)
    if (!cmds[q]->ok) {
      err = "engine " + std::to_string(q) + " holds " + std::to_string(dp::GatewayHandler::kMaxJobs) + " jobs already";
      detach_job(js);
      return false;
    }
  return true;
}

bool Gateway::run_commands(std::vector<std::unique_ptr<dp::GatewayHandler::JobCommand>>& cmds) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::seconds(5);
  size_t posted = 0;
  bool in_time = true;
  for (; posted < cmds.size() && in_time; ++posted)
    while (rte_ring_enqueue(command_rings_[posted], cmds[posted].get()) != 0)
      if (clock::now() > deadline) {
        in_time = false;
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
  // An engine polls at least every dataplane.idle_sleep_max_us, so this wait is short.
  for (size_t q = 0; q < cmds.size() && in_time; ++q)
    while (!cmds[q]->done.load(std::memory_order_acquire))
      if (clock::now() > deadline) {
        in_time = false;
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
  if (!in_time) {
    // A stuck engine may still read the commands: they are left to it (a leak, not a crash).
    SG_LOG(ERR, control, "an engine did not answer a job command within 5 s\n");
    for (auto& c : cmds) (void)c.release();
  }
  return in_time;
}

void Gateway::detach_job(JobStack& js) {
  std::vector<std::unique_ptr<dp::GatewayHandler::JobCommand>> cmds;
  for (size_t q = 0; q < js.runners.size(); ++q) {
    cmds.push_back(std::make_unique<dp::GatewayHandler::JobCommand>());
    cmds.back()->kind = dp::GatewayHandler::JobCommand::Kind::kDetach;
    cmds.back()->job = js.cfg.job.id;
  }
  run_commands(cmds);
}

void Gateway::free_job(JobStack& js) {
  js.agent.reset();  // frees what engine 0 queued for it
  for (rte_ring** r : {&js.ctl_in, &js.ctl_out}) {
    if (!*r) continue;
    dp::free_ring_mbufs(*r);
    rte_ring_free(*r);
    *r = nullptr;
  }
  js.links.clear();
  js.runners.clear();
  js.txs.clear();
  js.slot.reset();
  for (rte_ring* r : js.samples) rte_ring_free(r);
  js.samples.clear();
  if (js.share_group) {  // its senders left with its runners
    for (const auto& b : boards_)
      if (b) b->close_group(js.cfg.job.id);
    js.share_group = false;
  }
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
                  "chunks missing %llu, worker DATA early %llu",
                  (unsigned long long)rc.worker_rounds.get(), (unsigned long long)rc.worker_timeouts.get(),
                  (unsigned long long)rc.workers_missing.get(), (unsigned long long)rc.worker_bubbles.get(),
                  (unsigned long long)rc.worker_early.get());
  if (c.sync.mode == config::SyncMode::kSelmcast)
    std::printf("[%s] job %u (selmcast, staleness %u): other sites' updates mixed %.2f per round, stale updates "
                "refused %llu, update lag %.1f ms\n",
                c.site.name.c_str(), c.job.id, c.sync.staleness,
                n ? static_cast<double>(rc.updates_mixed.get()) / static_cast<double>(n) : 0.0,
                (unsigned long long)rc.stale_updates.get(),
                static_cast<double>(std::max<int64_t>(0, rc.update_lag_ns.load())) / 1e6);
  std::printf("[%s] job %u: %llu rounds of %llu bytes, mean round %.1f ms, early closes %llu, bubbles up %llu down %llu, "
              "timeouts %llu, peers moved on %llu, retransmits %llu, RTO expiries %llu, early DATA %llu (%llu held, %llu acked on arrival)%s\n",
              c.site.name.c_str(), c.job.id, (unsigned long long)n, (unsigned long long)c.job.model_bytes,
              n ? rc.round_ns_total.get() / 1e6 / n : 0.0, (unsigned long long)rc.early_closes.get(),
              (unsigned long long)rc.up_bubbles.get(), (unsigned long long)rc.down_bubbles.get(),
              (unsigned long long)rc.timeouts.get(), (unsigned long long)rc.peers_moved_on.get(),
              (unsigned long long)rc.retransmits.get(), (unsigned long long)rc.rto_expiries.get(),
              (unsigned long long)rc.early_data.get(), (unsigned long long)rc.early_held.get(),
              (unsigned long long)rc.early_acked.get(), exact);
  uint64_t standby = 0;
  for (const auto& tx : js.txs) standby += tx->sprayer().standby_chunks();
  if (standby)
    std::printf("[%s] job %u: %llu DATA chunks sent over a standby relay (their direct path backlogged)\n",
                c.site.name.c_str(), c.job.id, (unsigned long long)standby);
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
    std::printf("[%s] policy%s: version %u in force, %llu switches, %llu proposals (coordinator, %llu of them back to a "
                "plan that measured faster; attempts refused %llu, %llu of them pushed out), last modelled gain %.2f; "
                "rows sent %llu received %llu; probe trains sent %llu, timed %llu, lower bounds %llu\n",
                c.site.name.c_str(), stacks_.size() > 1 ? (" of job " + std::to_string(c.job.id)).c_str() : "",
                js.policy_version, (unsigned long long)st.switches.load(), (unsigned long long)st.proposals.load(),
                (unsigned long long)st.regrets.load(), (unsigned long long)st.switch_aborts.load(),
                (unsigned long long)st.switch_aborts_later.load(),
                st.last_gain.load(), (unsigned long long)st.rows_sent.load(), (unsigned long long)st.rows_received.load(),
                (unsigned long long)st.probe_trains_sent.load(), (unsigned long long)st.probe_results.load(),
                (unsigned long long)st.probe_bounds.load());
  }
  if (const int64_t lag = rc.update_lag_ns.load(); lag >= 0 && c.sync.mode != config::SyncMode::kSelmcast)
    std::printf("[%s] job %u: workers' update lag %.1f ms (their compute per round), of which %.1f ms from the update's "
                "first chunk complete to its last (what a round's transfer can run behind)\n",
                c.site.name.c_str(), c.job.id, static_cast<double>(lag) / 1e6,
                static_cast<double>(std::max<int64_t>(0, rc.overlap_ns.load())) / 1e6);
}

bool Gateway::all_jobs_finished() const {
  if (stacks_.empty() || desk_) return false;  // an appliance serves jobs until stopped
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
    t.polls += c.polls.get();
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
      const spray::Sprayer& sp = tx->sprayer();
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
  const int64_t overlap = rc.overlap_ns.load(std::memory_order_relaxed);
  agent.set_update_lag(lag < 0 ? -1.0 : static_cast<double>(lag) / 1e9,
                       lag <= 0 || overlap < 0 ? -1.0 : std::min(1.0, static_cast<double>(overlap) / static_cast<double>(lag)));
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
  if (security_.any_sealing()) {
    std::vector<std::string> names;
    for (const auto& p : cfg_.peers) names.push_back(p.name);
    auth_watch = std::make_unique<AuthWatch>(std::move(names), crypto::fingerprint(security_.params.secret));
    auth_watch->poll(auth_snapshot(), t0);
  }
  // With a job the policy agent approves rounds: tick every millisecond so rounds never wait long.
  const auto tick = agent() || desk_ ? std::chrono::milliseconds(1)
                           : std::chrono::milliseconds(std::max<uint32_t>(1, std::min<uint32_t>(cfg_.control.interval_ms, 100)));
  while (!stop.load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(tick);
    drain_samples();
    if (desk_) sync_jobs(handlers_[0]->now_ns(rte_rdtsc()));
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
              "ARP answered %llu learned %llu, idle sleeps %llu, polls %llu (%.1f packets in per poll)\n",
              cfg_.site.name.c_str(), (unsigned long long)t.rx_packets, (unsigned long long)t.rx_bytes,
              (unsigned long long)t.tx_packets, (unsigned long long)t.tx_bytes, (unsigned long long)t.tx_dropped,
              (unsigned long long)t.data_rx, (unsigned long long)t.data_tx, (unsigned long long)t.arp_answered,
              (unsigned long long)t.arp_learned, (unsigned long long)t.idle_sleeps, (unsigned long long)t.polls,
              t.polls ? static_cast<double>(t.rx_packets) / static_cast<double>(t.polls) : 0.0);
  std::string drops;
  for (size_t i = 0; i < static_cast<size_t>(dp::Drop::kCount); ++i)
    if (t.drop_by_reason[i])
      drops += std::string(" ") + dp::drop_reason_name(static_cast<dp::Drop>(i)) + "=" + std::to_string(t.drop_by_reason[i]);
  std::printf("[%s] drops:%s\n", cfg_.site.name.c_str(), drops.empty() ? " none" : drops.c_str());
  if (security_.any_sealing()) {
    std::string refused;
    for (size_t i = 0; i < static_cast<size_t>(dp::AuthDrop::kCount); ++i)
      if (t.auth_drops[i])
        refused += std::string(" ") + dp::auth_drop_name(static_cast<dp::AuthDrop>(i)) + "=" + std::to_string(t.auth_drops[i]);
    std::printf("[%s] sealed: %llu messages sealed, %llu opened, refused:%s\n", cfg_.site.name.c_str(),
                (unsigned long long)t.sealed, (unsigned long long)t.opened, refused.empty() ? " none" : refused.c_str());
  }
  if (desk_) {
    const DeskStats& d = desk_->stats();
    std::printf("[%s] job desk: %llu joins, %llu leaves, %llu replies, %llu refused for their job token, %llu malformed\n",
                cfg_.site.name.c_str(), (unsigned long long)d.joins.load(), (unsigned long long)d.leaves.load(),
                (unsigned long long)d.replies.load(), (unsigned long long)d.token_refused.load(),
                (unsigned long long)d.bad.load());
  }
  for (const auto& js : stacks_) print_job_summary(*js);
  engines_.clear();
  handlers_.clear();
  for (auto& js : stacks_) free_job(*js);
  {
    std::lock_guard lk(jobs_mu_);
    stacks_.clear();
  }
  desk_.reset();  // frees what engine 0 queued for it
  for (rte_ring* r : {registry_in_, registry_out_}) {
    dp::free_ring_mbufs(r);
    rte_ring_free(r);
  }
  registry_in_ = registry_out_ = nullptr;
  for (rte_ring* r : command_rings_) rte_ring_free(r);
  command_rings_.clear();
  shares_.clear();
  boards_.clear();
  for (rte_ring* r : handoff_rings_) rte_ring_free(r);
  handoff_rings_.clear();
  // The engines have stopped: let memif peers that stop with us close first (ports.h says why).
  if (!dp::await_memif_peers_gone(ports_, kMemifPeerGraceMs))
    SG_LOG(INFO, control, "[%s] memif peers still connected after %u ms; closing the links\n", cfg_.site.name.c_str(),
           kMemifPeerGraceMs);
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
