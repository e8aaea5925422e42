#include "control/metrics.h"

#include <cstdio>
#include <cstring>

#include "control/gateway.h"

namespace sg::ctl {
namespace {

void metric(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP stormgate_";
  out += name;
  out += " ";
  out += help;
  out += "\n# TYPE stormgate_";
  out += name;
  out += " ";
  out += type;
  out += "\n";
}

void value(std::string& out, const char* name, const std::string& labels, double v) {
  char b[64];
  std::snprintf(b, sizeof b, " %.17g\n", v);
  out += "stormgate_";
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += b;
}

std::string label(const char* k, const std::string& v) {
  std::string s = std::string(k) + "=\"";
  for (char c : v) {
    if (c == '"' || c == '\\') s += '\\';
    if (c == '\n') {
      s += "\\n";
      continue;
    }
    s += c;
  }
  return s + "\"";
}

double ns_or_unknown(int64_t ns) { return ns < 0 ? -1.0 : static_cast<double>(ns) / 1e9; }

}  // namespace

std::string metrics_text(const Gateway& gw) {
  std::string o;
  const Totals t = gw.totals();
  const std::string site = label("site", gw.config().site.name);
  metric(o, "rx_packets_total", "counter", "Packets received on every port and queue.");
  value(o, "rx_packets_total", site, static_cast<double>(t.rx_packets));
  metric(o, "tx_packets_total", "counter", "Packets sent.");
  value(o, "tx_packets_total", site, static_cast<double>(t.tx_packets));
  metric(o, "rx_bytes_total", "counter", "Bytes received.");
  value(o, "rx_bytes_total", site, static_cast<double>(t.rx_bytes));
  metric(o, "tx_bytes_total", "counter", "Bytes sent.");
  value(o, "tx_bytes_total", site, static_cast<double>(t.tx_bytes));
  metric(o, "drops_total", "counter", "Frames dropped, by reason.");
  for (size_t i = 0; i < static_cast<size_t>(dp::Drop::kCount); ++i)
    value(o, "drops_total", site + "," + label("reason", dp::drop_reason_name(static_cast<dp::Drop>(i))),
          static_cast<double>(t.drop_by_reason[i]));
  metric(o, "auth_refused_total", "counter", "LTP messages not admitted (unsealed, forged, replayed, unknown source...), by reason.");
  for (size_t i = 0; i < static_cast<size_t>(dp::AuthDrop::kCount); ++i)
    value(o, "auth_refused_total", site + "," + label("reason", dp::auth_drop_name(static_cast<dp::AuthDrop>(i))),
          static_cast<double>(t.auth_drops[i]));
  {
    const AuthSnapshot a = gw.auth_snapshot();
    metric(o, "auth_refused_by_peer_total", "counter",
           "LTP messages from a configured peer's address (the previous hop) not admitted, by peer and reason.");
    for (size_t p = 0; p < a.by_peer.size(); ++p)
      for (size_t i = 0; i < a.by_peer[p].size(); ++i)
        value(o, "auth_refused_by_peer_total",
              site + "," + label("peer", gw.config().peers[p].name) + "," +
                  label("reason", dp::auth_drop_name(static_cast<dp::AuthDrop>(i))),
              static_cast<double>(a.by_peer[p][i]));
  }
  metric(o, "sealed_total", "counter", "LTP messages sealed for other gateways.");
  value(o, "sealed_total", site, static_cast<double>(t.sealed));
  metric(o, "opened_total", "counter", "Sealed LTP messages from other gateways that authenticated.");
  value(o, "opened_total", site, static_cast<double>(t.opened));
  metric(o, "tx_refused_total", "counter", "Packets the ports did not take (freed).");
  value(o, "tx_refused_total", site, static_cast<double>(t.tx_dropped));
  metric(o, "ltp_data_rx_total", "counter", "LTP DATA chunks received.");
  value(o, "ltp_data_rx_total", site, static_cast<double>(t.data_rx));
  metric(o, "ltp_data_tx_total", "counter", "LTP DATA chunks sent.");
  value(o, "ltp_data_tx_total", site, static_cast<double>(t.data_tx));
  metric(o, "relay_forwarded_total", "counter", "DATA relayed for other sites (multipath).");
  value(o, "relay_forwarded_total", site, static_cast<double>(t.relay_forwarded));
  metric(o, "link_rate_bytes_per_second", "gauge", "Measured throughput of the link from a peer into this site.");
  metric(o, "link_rtt_seconds", "gauge", "Smoothed RTT of the link from a peer (-1: unknown).");
  metric(o, "link_loss_ratio", "gauge", "Loss rate of the link from a peer.");
  std::string rates, rtts, losses;
  for (const LinkView& l : gw.link_views()) {
    const std::string lb = site + "," + label("peer", std::to_string(l.peer_id));
    value(rates, "link_rate_bytes_per_second", lb, l.mbit_s * 1e6 / 8);
    value(rtts, "link_rtt_seconds", lb, l.rtt_ms < 0 ? -1 : l.rtt_ms / 1e3);
    value(losses, "link_loss_ratio", lb, l.loss);
  }
  o += rates + rtts + losses;
  // Per job (label job="ID"), every job the gateway runs: each family's samples together.
  const size_t jobs = gw.job_count();
  auto per_job = [&](const char* name, const char* type, const char* help, auto&& get) {
    if (!jobs) return;
    metric(o, name, type, help);
    for (size_t k = 0; k < jobs; ++k)
      value(o, name, site + "," + label("job", std::to_string(gw.job_config(k).id)), get(gw.job_at(k)->counters(), k));
  };
  using RC = dp::RoundCounters;
  per_job("rounds_total", "counter", "Rounds this site completed.",
          [](const RC& c, size_t) { return static_cast<double>(c.rounds.get()); });
  per_job("last_round_seconds", "gauge", "Duration of the last round.",
          [](const RC& c, size_t) { return static_cast<double>(c.last_round_ns.load()) / 1e9; });
  per_job("worker_update_lag_seconds", "gauge",
          "Smoothed time from a round's result handed to the workers to their next update complete (-1: not measured).",
          [](const RC& c, size_t) { return ns_or_unknown(c.update_lag_ns.load(std::memory_order_relaxed)); });
  per_job("worker_update_overlap_seconds", "gauge",
          "Of the update lag, from the update's first chunk complete to its last: what a round's transfer can run "
          "behind (-1: not measured).",
          [](const RC& c, size_t) { return ns_or_unknown(c.overlap_ns.load(std::memory_order_relaxed)); });
  per_job("early_closes_total", "counter", "Transfers closed early (Early Close).",
          [](const RC& c, size_t) { return static_cast<double>(c.early_closes.get()); });
  if (jobs) {
    metric(o, "bubbles_total", "counter", "Chunks filled because they never arrived (Bubble Filling).");
    for (size_t k = 0; k < jobs; ++k) {
      const auto& c = gw.job_at(k)->counters();
      const std::string jl = site + "," + label("job", std::to_string(gw.job_config(k).id));
      value(o, "bubbles_total", jl + "," + label("direction", "up"), static_cast<double>(c.up_bubbles.get()));
      value(o, "bubbles_total", jl + "," + label("direction", "down"), static_cast<double>(c.down_bubbles.get()));
    }
  }
  per_job("worker_push_timeouts_total", "counter",
          "Rounds whose site contribution went on after waiting job.worker_timeout_ms for a local worker.",
          [](const RC& c, size_t) { return static_cast<double>(c.worker_timeouts.get()); });
  per_job("workers_missing_total", "counter", "Local workers absent from the site's contributions, summed over rounds.",
          [](const RC& c, size_t) { return static_cast<double>(c.workers_missing.get()); });
  per_job("worker_chunks_missing_total", "counter",
          "Chunks of local workers' pushes that the site's mean went on without (a push cancelled or timed out).",
          [](const RC& c, size_t) { return static_cast<double>(c.worker_bubbles.get()); });
  per_job("worker_early_data_total", "counter",
          "Local workers' DATA of the next round that came before this round ended here (dropped; the worker resends).",
          [](const RC& c, size_t) { return static_cast<double>(c.worker_early.get()); });
  per_job("round_timeouts_total", "counter", "Rounds completed by the round timeout.",
          [](const RC& c, size_t) { return static_cast<double>(c.timeouts.get()); });
  per_job("round_peers_moved_on_total", "counter",
          "Times a peer ran a later round and what it had not sent of ours was given up.",
          [](const RC& c, size_t) { return static_cast<double>(c.peers_moved_on.get()); });
  per_job("retransmits_total", "counter", "DATA retransmissions.",
          [](const RC& c, size_t) { return static_cast<double>(c.retransmits.get()); });
  per_job("rto_expiries_total", "counter", "Retransmission timeouts (RTO expiries) of this site's transfers.",
          [](const RC& c, size_t) { return static_cast<double>(c.rto_expiries.get()); });
  per_job("early_data_total", "counter",
          "Peer DATA of a round this site had not begun yet (held for it, or dropped and resent).",
          [](const RC& c, size_t) { return static_cast<double>(c.early_data.get()); });
  per_job("early_data_held_total", "counter",
          "Of the early DATA, what was held and replayed when the round began here.",
          [](const RC& c, size_t) { return static_cast<double>(c.early_held.get()); });
  per_job("early_data_acked_total", "counter",
          "Of the held early DATA, what was acknowledged on arrival (its senders need not resend it).",
          [](const RC& c, size_t) { return static_cast<double>(c.early_acked.get()); });
  per_job("policy_version", "gauge", "The policy version in force.",
          [&](const RC&, size_t k) { return static_cast<double>(gw.policy_version(k)); });
  if (const JobDesk* desk = gw.desk()) {
    // Jobs announced by workers (admission): how many in each state, and the desk's traffic.
    size_t by[5] = {};
    for (const auto& v : desk->views()) by[static_cast<size_t>(v.status) % 5]++;
    metric(o, "announced_jobs", "gauge", "Jobs the job registry holds, by status (YAML jobs included, as running).");
    for (auto st : {wire::JobStatus::kPending, wire::JobStatus::kRunning, wire::JobStatus::kRefused, wire::JobStatus::kEnded})
      value(o, "announced_jobs", site + "," + label("status", wire::job_status_name(st)),
            static_cast<double>(by[static_cast<size_t>(st)]));
    metric(o, "job_joins_total", "counter", "JOB joins received from workers.");
    value(o, "job_joins_total", site, static_cast<double>(desk->stats().joins.load()));
    metric(o, "job_messages_token_refused_total", "counter",
           "Workers' JOB messages that did not open with their job's token (admission.token_file).");
    value(o, "job_messages_token_refused_total", site, static_cast<double>(desk->stats().token_refused.load()));
    metric(o, "job_refusals_total", "counter", "Announced jobs refused here (do not fit, disagree, a peer refused).");
    value(o, "job_refusals_total", site, static_cast<double>(desk->refusals()));
  }
  if (const PolicyAgent* a = gw.agent()) {
    const auto& st = a->stats();
    metric(o, "policy_switches_total", "counter", "Policy switches agreed with the other gateways.");
    value(o, "policy_switches_total", site, static_cast<double>(st.switches.load()));
    metric(o, "policy_proposals_total", "counter", "New policies proposed (the coordinator).");
    value(o, "policy_proposals_total", site, static_cast<double>(st.proposals.load()));
    metric(o, "policy_regrets_total", "counter",
           "Proposals back to the plan before, whose rounds measured faster than the new trees' (the coordinator).");
    value(o, "policy_regrets_total", site, static_cast<double>(st.regrets.load()));
    metric(o, "policy_switch_aborts_total", "counter",
           "Switch attempts aborted and retried (the coordinator); reason=late: a peer had (or may have) begun "
           "the switch round, and the retry's round was pushed out.");
    const double aborts = static_cast<double>(st.switch_aborts.load());
    const double late = static_cast<double>(st.switch_aborts_later.load());
    value(o, "policy_switch_aborts_total", site + "," + label("reason", "busy"), aborts > late ? aborts - late : 0.0);
    value(o, "policy_switch_aborts_total", site + "," + label("reason", "late"), late);
    metric(o, "measurement_rows_total", "counter", "Measurement rows, by direction.");
    value(o, "measurement_rows_total", site + "," + label("direction", "sent"), static_cast<double>(st.rows_sent.load()));
    value(o, "measurement_rows_total", site + "," + label("direction", "received"),
          static_cast<double>(st.rows_received.load()));
    metric(o, "probe_trains_total", "counter",
           "Probe trains sent, peers' trains timed, and peers' trains too quick to time (taken as lower bounds).");
    value(o, "probe_trains_total", site + "," + label("direction", "sent"), static_cast<double>(st.probe_trains_sent.load()));
    value(o, "probe_trains_total", site + "," + label("direction", "measured"), static_cast<double>(st.probe_results.load()));
    value(o, "probe_trains_total", site + "," + label("direction", "bound"),
          static_cast<double>(st.probe_bounds.load()));
  }
  return o;
}

bool MetricsServer::open(uint16_t port, std::string& error) {
  if (server_.open("0.0.0.0", port, error)) return true;
  error = "telemetry.prometheus_port " + std::to_string(port) + ": " + error;
  return false;
}

void MetricsServer::poll(const Gateway& gw) {
  server_.poll("/metrics", [&] { return metrics_text(gw); });
}

}  // namespace sg::ctl
