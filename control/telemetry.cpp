#include "control/telemetry.h"

#include <rte_telemetry.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string>

#include "config/config.h"
#include "control/gateway.h"

namespace sg::ctl {
namespace {

std::mutex g_mu;  // telemetry thread vs. start/stop; never taken on the packet path
const Gateway* g_gw = nullptr;

// Telemetry dict keys may hold only [A-Za-z0-9_/]; site and port names may not.
std::string key_of(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '/') ch = '_';
  return s;
}

int stats_cb(const char*, const char*, rte_tel_data* d) {
  std::lock_guard lk(g_mu);
  rte_tel_data_start_dict(d);
  if (!g_gw) return 0;
  const Totals t = g_gw->totals();
  rte_tel_data_add_dict_string(d, "site", g_gw->config().site.name.c_str());
  rte_tel_data_add_dict_u64(d, "workers", g_gw->workers());
  rte_tel_data_add_dict_u64(d, "rx_packets", t.rx_packets);
  rte_tel_data_add_dict_u64(d, "rx_bytes", t.rx_bytes);
  rte_tel_data_add_dict_u64(d, "tx_packets", t.tx_packets);
  rte_tel_data_add_dict_u64(d, "tx_bytes", t.tx_bytes);
  rte_tel_data_add_dict_u64(d, "tx_refused", t.tx_dropped);
  rte_tel_data_add_dict_u64(d, "ltp_data_rx", t.data_rx);
  rte_tel_data_add_dict_u64(d, "ltp_data_rx_bytes", t.data_rx_bytes);
  rte_tel_data_add_dict_u64(d, "ltp_data_tx", t.data_tx);
  rte_tel_data_add_dict_u64(d, "ltp_bad_version", t.bad_version);
  rte_tel_data_add_dict_u64(d, "arp_answered", t.arp_answered);
  rte_tel_data_add_dict_u64(d, "no_mbuf", t.no_mbuf);
  rte_tel_data_add_dict_u64(d, "idle_sleeps", t.idle_sleeps);
  rte_tel_data_add_dict_u64(d, "polls", t.polls);
  rte_tel_data_add_dict_u64(d, "relayed_tx", t.relayed_tx);
  rte_tel_data_add_dict_u64(d, "relayed_rx", t.relayed_rx);
  rte_tel_data_add_dict_u64(d, "relay_forwarded", t.relay_forwarded);
  rte_tel_data_add_dict_u64(d, "relay_forwarded_bytes", t.relay_forwarded_bytes);
  rte_tel_data_add_dict_u64(d, "relay_no_route", t.relay_no_route);
  rte_tel_data_add_dict_u64(d, "relay_refused", t.relay_refused);
  rte_tel_data_add_dict_u64(d, "txq_full", t.txq_full);
  rte_tel_data_add_dict_u64(d, "opened", t.opened);
  rte_tel_data_add_dict_u64(d, "sealed", t.sealed);
  rte_tel_data_add_dict_u64(d, "seal_failed", t.seal_failed);
  for (size_t i = 0; i < static_cast<size_t>(dp::AuthDrop::kCount); ++i)
    rte_tel_data_add_dict_u64(d, (std::string("auth_") + dp::auth_drop_name(static_cast<dp::AuthDrop>(i))).c_str(),
                              t.auth_drops[i]);
  for (size_t i = 0; i < static_cast<size_t>(dp::Drop::kCount); ++i)
    rte_tel_data_add_dict_u64(d, (std::string("drop_") + dp::drop_reason_name(static_cast<dp::Drop>(i))).c_str(),
                              t.drop_by_reason[i]);
  return 0;
}

int links_cb(const char*, const char*, rte_tel_data* d) {
  std::lock_guard lk(g_mu);
  rte_tel_data_start_dict(d);
  if (!g_gw) return 0;
  const auto& cfg = g_gw->config();
  const auto views = g_gw->link_views();
  const AuthSnapshot auth = g_gw->auth_snapshot();
  // DPDK 22.11 nests only arrays in a dict, so peers are flattened: "PEER_key".
  for (size_t i = 0; i < cfg.peers.size(); ++i) {
    const std::string name = key_of(cfg.peers[i].name);
    rte_tel_data_add_dict_string(d, (name + "_address").c_str(), config::format_ipv4(cfg.peers[i].address).c_str());
    rte_tel_data_add_dict_u64(d, (name + "_data_chunks_rx").c_str(), g_gw->data_rx_from_peer(i));
    if (i < auth.by_peer.size()) {
      // Messages from this peer's address that were refused: "bad_tag=3,replayed=1" (empty: none).
      std::string refused;
      for (size_t r = 0; r < auth.by_peer[i].size(); ++r)
        if (auth.by_peer[i][r]) {
          if (!refused.empty()) refused += ',';
          refused += dp::auth_drop_name(static_cast<dp::AuthDrop>(r));
          refused += '=';
          refused += std::to_string(auth.by_peer[i][r]);
        }
      rte_tel_data_add_dict_string(d, (name + "_auth_refused").c_str(), refused.c_str());
    }
    for (const auto& v : views) {
      if (v.peer_id != cfg.peers[i].id) continue;
      // Passive estimate of the link from this peer to us, measured from its DATA.
      rte_tel_data_add_dict_u64(d, (name + "_in_kbit_s").c_str(), static_cast<uint64_t>(v.mbit_s * 1000));
      rte_tel_data_add_dict_u64(d, (name + "_in_rtt_us").c_str(), v.rtt_ms < 0 ? 0 : static_cast<uint64_t>(v.rtt_ms * 1000));
      rte_tel_data_add_dict_u64(d, (name + "_in_loss_ppm").c_str(), static_cast<uint64_t>(v.loss * 1e6));
      rte_tel_data_add_dict_u64(d, (name + "_in_windows").c_str(), v.windows);
    }
    for (const auto& r : g_gw->routes()) {
      if (r.peer_id != cfg.peers[i].id) continue;
      rte_ether_addr mac;
      char buf[RTE_ETHER_ADDR_FMT_SIZE] = "unresolved";
      if (g_gw->neighbours().lookup(r.nh_slot, mac)) rte_ether_format_addr(buf, sizeof buf, &mac);
      const std::string key = name + "_path" + std::to_string(r.path_id) + "_" + key_of(g_gw->ports()[r.port_index].name);
      rte_tel_data_add_dict_string(d, key.c_str(), buf);
    }
  }
  return 0;
}

// The job a command's parameter names (its id), or the first job without one; -1: none.
int job_index(const char* params) {
  if (!g_gw || g_gw->job_count() == 0) return -1;
  if (!params || !*params) return 0;
  char* end = nullptr;
  const unsigned long long id = std::strtoull(params, &end, 10);
  if (end == params || *end) return -1;
  for (size_t k = 0; k < g_gw->job_count(); ++k)
    if (g_gw->job_config(k).id == id) return static_cast<int>(k);
  return -1;
}

int rounds_cb(const char*, const char* params, rte_tel_data* d) {
  std::lock_guard lk(g_mu);
  rte_tel_data_start_dict(d);
  if (!g_gw) return 0;
  auto held = g_gw->hold_jobs();
  const int k = job_index(params);
  if (k < 0) return 0;
  const auto& c = g_gw->job_at(static_cast<size_t>(k))->counters();
  rte_tel_data_add_dict_u64(d, "job", g_gw->job_config(static_cast<size_t>(k)).id);
  rte_tel_data_add_dict_u64(d, "rounds_done", c.rounds.get());
  rte_tel_data_add_dict_u64(d, "last_round", c.last_round.load());
  rte_tel_data_add_dict_u64(d, "last_round_us", c.last_round_ns.load() / 1000);
  rte_tel_data_add_dict_u64(d, "mean_round_us", c.rounds.get() ? c.round_ns_total.get() / 1000 / c.rounds.get() : 0);
  rte_tel_data_add_dict_u64(d, "early_closes", c.early_closes.get());
  rte_tel_data_add_dict_u64(d, "bubbles_up", c.up_bubbles.get());
  rte_tel_data_add_dict_u64(d, "bubbles_down", c.down_bubbles.get());
  rte_tel_data_add_dict_u64(d, "timeouts", c.timeouts.get());
  rte_tel_data_add_dict_u64(d, "peers_moved_on", c.peers_moved_on.get());
  rte_tel_data_add_dict_u64(d, "worker_push_timeouts", c.worker_timeouts.get());
  rte_tel_data_add_dict_u64(d, "workers_missing", c.workers_missing.get());
  rte_tel_data_add_dict_u64(d, "worker_bubbles", c.worker_bubbles.get());
  rte_tel_data_add_dict_u64(d, "worker_early_data", c.worker_early.get());
  rte_tel_data_add_dict_u64(d, "updates_mixed", c.updates_mixed.get());
  rte_tel_data_add_dict_u64(d, "stale_updates", c.stale_updates.get());
  if (const int64_t lag = c.update_lag_ns.load(std::memory_order_relaxed); lag >= 0)
    rte_tel_data_add_dict_u64(d, "update_lag_us", static_cast<uint64_t>(lag) / 1000);
  if (const int64_t o = c.overlap_ns.load(std::memory_order_relaxed); o >= 0)
    rte_tel_data_add_dict_u64(d, "update_overlap_us", static_cast<uint64_t>(o) / 1000);
  rte_tel_data_add_dict_u64(d, "retransmits", c.retransmits.get());
  rte_tel_data_add_dict_u64(d, "rto_expiries", c.rto_expiries.get());
  rte_tel_data_add_dict_u64(d, "early_data", c.early_data.get());
  rte_tel_data_add_dict_u64(d, "early_data_held", c.early_held.get());
  rte_tel_data_add_dict_u64(d, "early_data_acked", c.early_acked.get());
  rte_tel_data_add_dict_u64(d, "values_checked", c.values_checked.get());
  rte_tel_data_add_dict_u64(d, "values_exact", c.values_exact.get());
  return 0;
}

int policy_cb(const char*, const char*, rte_tel_data* d) {
  std::lock_guard lk(g_mu);
  rte_tel_data_start_dict(d);
  if (!g_gw) return 0;
  auto held = g_gw->hold_jobs();
  if (!g_gw->job()) return 0;
  const topo::Plan p = g_gw->plan();
  const auto sites = dp::job_sites(g_gw->config());
  rte_tel_data_add_dict_u64(d, "version", g_gw->policy_version());
  rte_tel_data_add_dict_u64(d, "sites", p.num_sites);
  rte_tel_data_add_dict_u64(d, "model_bytes", p.model_bytes);
  rte_tel_data_add_dict_u64(d, "shards", p.shards.size());
  for (size_t s = 0; s < p.shards.size() && s < 32; ++s) {
    // "root=SITE bytes=B parents=a,b,c": the parent of each site in site-id order, - for the root
    const std::string v = topo::describe_shard(p.shards[s], sites);
    rte_tel_data_add_dict_string(d, ("shard" + std::to_string(s)).c_str(), v.c_str());
  }
  rte_tel_data_add_dict_u64(d, "multipath_splits", p.splits.size());
  // "FROM>TO:codec,..." with site ids; empty: full precision everywhere.
  std::string codecs;
  for (const auto& c : p.codecs)
    if (c.from < sites.size() && c.to < sites.size()) {
      if (!codecs.empty()) codecs += ',';
      codecs += std::to_string(sites[c.from]) + ">" + std::to_string(sites[c.to]) + ":" + std::string(codec_name(c.codec));
    }
  rte_tel_data_add_dict_string(d, "codecs", codecs.c_str());
  if (const PolicyAgent* a = g_gw->agent()) {
    rte_tel_data_add_dict_u64(d, "switches", a->stats().switches.load());
    rte_tel_data_add_dict_u64(d, "proposals", a->stats().proposals.load());
    rte_tel_data_add_dict_u64(d, "codec_proposals", a->stats().codec_proposals.load());
    rte_tel_data_add_dict_u64(d, "regrets", a->stats().regrets.load());
    rte_tel_data_add_dict_u64(d, "switch_aborts", a->stats().switch_aborts.load());
    rte_tel_data_add_dict_u64(d, "switch_aborts_late", a->stats().switch_aborts_later.load());
    rte_tel_data_add_dict_u64(d, "replans_considered", a->stats().replans_considered.load());
    rte_tel_data_add_dict_u64(d, "last_gain_permille", static_cast<uint64_t>(std::max(0.0, a->stats().last_gain.load()) * 1000));
    rte_tel_data_add_dict_u64(d, "approved_through", a->approved_through().load());
    rte_tel_data_add_dict_u64(d, "control_in", a->stats().control_in.load());
    rte_tel_data_add_dict_u64(d, "rows_sent", a->stats().rows_sent.load());
    rte_tel_data_add_dict_u64(d, "rows_received", a->stats().rows_received.load());
    rte_tel_data_add_dict_u64(d, "probe_trains_sent", a->stats().probe_trains_sent.load());
    rte_tel_data_add_dict_u64(d, "probe_results", a->stats().probe_results.load());
    rte_tel_data_add_dict_u64(d, "probe_bounds", a->stats().probe_bounds.load());
  }
  return 0;
}

// Every job this gateway runs, one dict each (named by job id); with admission also the
// announced jobs not running (pending, refused, ended: status and reason).
int jobs_cb(const char*, const char*, rte_tel_data* d) {
  std::lock_guard lk(g_mu);
  rte_tel_data_start_dict(d);
  if (!g_gw) return 0;
  auto held = g_gw->hold_jobs();
  std::vector<jobs::JobView> views;
  if (const JobDesk* desk = g_gw->desk()) views = desk->views();
  auto view_of = [&](uint32_t id) -> const jobs::JobView* {
    for (const auto& v : views)
      if (v.spec.id == id) return &v;
    return nullptr;
  };
  size_t listed = 0;
  for (size_t k = 0; k < g_gw->job_count() && k < config::kMaxJobs; ++k) {
    const config::JobConfig& j = g_gw->job_config(k);
    const auto& c = g_gw->job_at(k)->counters();
    rte_tel_data* e = rte_tel_data_alloc();
    if (!e) return -ENOMEM;
    rte_tel_data_start_dict(e);
    rte_tel_data_add_dict_u64(e, "model_bytes", j.model_bytes);
    rte_tel_data_add_dict_u64(e, "workers", j.workers);
    rte_tel_data_add_dict_u64(e, "rounds_wanted", j.rounds);
    rte_tel_data_add_dict_u64(e, "rounds_done", c.rounds.get());
    rte_tel_data_add_dict_u64(e, "last_round_us", c.last_round_ns.load() / 1000);
    rte_tel_data_add_dict_u64(e, "mean_round_us", c.rounds.get() ? c.round_ns_total.get() / 1000 / c.rounds.get() : 0);
    rte_tel_data_add_dict_u64(e, "policy_version", g_gw->policy_version(k));
    rte_tel_data_add_dict_u64(e, "finished", g_gw->job_at(k)->finished() ? 1 : 0);
    rte_tel_data_add_dict_u64(e, "weight", j.weight);
    if (const jobs::JobView* v = view_of(j.id)) {
      rte_tel_data_add_dict_string(e, "status", wire::job_status_name(v->status));
      rte_tel_data_add_dict_string(e, "origin", v->pinned ? "yaml" : "announced");
      rte_tel_data_add_dict_u64(e, "defined_by_site", v->defined_by);
      rte_tel_data_add_dict_u64(e, "memory_reserved_kib", v->cost.memory_bytes >> 10);
    }
    rte_tel_data_add_dict_container(d, ("job" + std::to_string(j.id)).c_str(), e, 0);
    ++listed;
  }
  for (const auto& v : views) {
    if (v.built || listed >= config::kMaxJobs * 2) continue;  // built ones are listed above
    rte_tel_data* e = rte_tel_data_alloc();
    if (!e) return -ENOMEM;
    rte_tel_data_start_dict(e);
    rte_tel_data_add_dict_string(e, "status", wire::job_status_name(v.status));
    rte_tel_data_add_dict_string(e, "origin", "announced");
    rte_tel_data_add_dict_u64(e, "model_bytes", v.spec.model_bytes);
    rte_tel_data_add_dict_u64(e, "workers", v.spec.workers);
    rte_tel_data_add_dict_u64(e, "defined_by_site", v.defined_by);
    // The telemetry library caps strings; the reason is cut, the log line has all of it.
    rte_tel_data_add_dict_string(e, "reason", v.reason.substr(0, 120).c_str());
    rte_tel_data_add_dict_container(d, ("job" + std::to_string(v.spec.id)).c_str(), e, 0);
    ++listed;
  }
  return 0;
}

}  // namespace

void telemetry_attach(const Gateway* gw) {
  static std::once_flag once;
  std::call_once(once, [] {
    rte_telemetry_register_cmd("/stormgate/stats", stats_cb, "Packet, LTP and drop counters. No parameters");
    rte_telemetry_register_cmd("/stormgate/links", links_cb, "Per peer: next hops and chunks received. No parameters");
    rte_telemetry_register_cmd("/stormgate/rounds", rounds_cb,
                               "Job rounds: progress, early closes, bubbles. Parameter: a job id (default: the first job)");
    rte_telemetry_register_cmd("/stormgate/jobs", jobs_cb, "Every job: size, workers, rounds, policy. No parameters");
    rte_telemetry_register_cmd("/stormgate/policy", policy_cb, "Policy in force: version, trees, splits. No parameters");
  });
  std::lock_guard lk(g_mu);
  g_gw = gw;
}

}  // namespace sg::ctl
