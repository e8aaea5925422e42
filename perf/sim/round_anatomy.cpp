// round_anatomy: where the time of one simulated round goes, next to the planner's model.
// Runs `rounds` rounds of one plan (stormgate on LTP, or a baseline on the reliable
// transport) on a scenario and prints every round's time, then for the last round:
//   - the model's round time, bottleneck term (and which resource) and fill/drain term;
//   - per directed link the plan uses: model work (s), simulated busy time and utilisation,
//     wire bytes, queue drops, first/last arrival, and the time the link's model work would
//     take at its rate (so a link whose busy time >> model work is carrying waste);
//   - the busiest links' throughput over the round in bins (startup, gaps, the tail).
// A diagnostic, not a benchmark: no JSON line, nothing in perf/results.
//
//   round_anatomy SCENARIO.yaml [--model-mb 1024] [--plan fapt|fapt+mp|star|blind|tree]
//                 [--reliable] [--by-last] [--rounds 2] [--bins 20] [--top 6] [--chunk BYTES] [--share-links]
//                 [--gap-ms MS]
// --chunk sets the real bytes per chunk (1344: the gateway's DATA chunk, so that one simulated
// loss hits one packet as on a real WAN; by default the setup's large simulation chunk).
// --share-links gives the transfers to a peer one congestion state (transport.link_share: on);
// --gap-ms idles the links that long between rounds, as workers computing would.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "experiments.h"
#include "sim/participants.h"
#include "sim/scenario.h"
#include "topology/fapt.h"
#include "topology/multipath.h"
#include "topology/round_time.h"

using namespace sg;
using namespace sg::simbench;

namespace {

struct Args {
  std::string file;
  uint64_t model_mb = 1024;
  std::string plan = "fapt";
  bool reliable = false;
  bool by_last = false;  // sort links by their last arrival (the round's tail) instead of model work
  int rounds = 2, bins = 20, top = 6;
  uint32_t chunk = 0;  // 0: the setup's own
  double gap_ms = 0;  // idle time between rounds (the workers' compute)
  bool share_links = false;  // one congestion state per peer link (transport.link_share: on); else the default
};

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: round_anatomy SCENARIO.yaml [--model-mb N] [--plan fapt|fapt+mp|star|blind|tree] "
                       "[--reliable] [--by-last] [--rounds N] [--bins N] [--top N] [--chunk BYTES] [--share-links] [--gap-ms MS]\n");
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (s == "--model-mb") a.model_mb = std::stoull(next());
    else if (s == "--plan") a.plan = next();
    else if (s == "--reliable") a.reliable = true;
    else if (s == "--by-last") a.by_last = true;
    else if (s == "--rounds") a.rounds = std::stoi(next());
    else if (s == "--bins") a.bins = std::stoi(next());
    else if (s == "--top") a.top = std::stoi(next());
    else if (s == "--share-links") a.share_links = true;
    else if (s == "--gap-ms") a.gap_ms = std::stod(next());
    else if (s == "--chunk") a.chunk = static_cast<uint32_t>(std::stoul(next()));
    else if (!s.empty() && s[0] != '-' && a.file.empty()) a.file = s;
    else usage();
  }
  if (a.file.empty() || a.rounds < 1 || a.bins < 1) usage();
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  auto r = sim::load_scenario(a.file);
  if (!r.scenario) {
    for (const auto& e : r.errors) std::fprintf(stderr, "%s\n", e.c_str());
    return 1;
  }
  const sim::Scenario& sc = *r.scenario;
  Setup s = make_setup(sc, a.model_mb << 20, 1.5e9, a.rounds);
  if (a.chunk) s.chunk_real = std::max<uint32_t>(4, a.chunk / s.scale / 4 * 4);
  const int n = s.n;
  const topo::Network net = sim::network_at(sc.wan, 0, s.scale, 1e15);
  topo::Plan plan;
  if (a.plan == "fapt") plan = make_plan(s, net, Topo::kFapt);
  else if (a.plan == "fapt+mp") plan = make_plan(s, net, Topo::kFaptMultipath);
  else if (a.plan == "star") plan = make_plan(s, net, Topo::kStar);
  else if (a.plan == "blind") plan = make_plan(s, net, Topo::kBlind);
  else if (a.plan == "tree" || a.plan == "tree+mp") {
    topo::PlannerOptions opt;
    opt.chunk_bytes = s.chunk_real;
    opt.max_shards = 1;
    opt.multipath = false;
    plan = topo::plan_fapt(net, s.model_real, opt);
    if (a.plan == "tree+mp") topo::add_multipath(net, plan, opt.max_relays, s.chunk_real);
  } else usage();

  const topo::RoundCost model = topo::round_time(net, plan, s.chunk_real);
  std::vector<double> load(topo::resource_count(net), 0.0);
  for (const auto& t : plan.shards) topo::add_tree_load(net, t.parent, static_cast<double>(t.bytes()), &plan, load);
  auto site = [&](int i) { return sc.wan.sites[i].name.c_str(); };
  std::printf("%s, %s, plan %s (%zu shards, %zu splits), %s, 1/%u of the floats real\n", sc.name.c_str(),
              a.model_mb >= 1024 ? "1 GB" : (std::to_string(a.model_mb) + " MB").c_str(), a.plan.c_str(),
              plan.shards.size(), plan.splits.size(), a.reliable ? "reliable (AIMD)" : "LTP", s.scale);
  const int br = model.bottleneck_resource;
  std::string what = "?";
  if (br >= 0 && br < n * n) what = std::string(site(br / n)) + " -> " + site(br % n);
  else if (br >= n * n && br < n * n + n) what = std::string("aggregation at ") + site(br - n * n);
  else if (br >= topo::egress_resource(net, 0) && br < topo::egress_resource(net, n)) what = std::string("egress of ") + site(br - topo::egress_resource(net, 0));
  else if (br >= topo::ingress_resource(net, 0) && br < topo::ingress_resource(net, n)) what = std::string("ingress of ") + site(br - topo::ingress_resource(net, 0));
  std::printf("model: %.3f s = bottleneck %.3f s (%s) + fill/drain %.3f s\n", model.total_s, model.bottleneck_s,
              what.c_str(), model.latency_s);
  for (const auto& t : plan.shards) {
    std::printf("  shard root %-12s %6.1f%%  parents:", site(t.root), 100.0 * t.bytes() / plan.model_bytes);
    for (int v = 0; v < n; ++v) std::printf(" %s", t.parent[v] == topo::kNoSite ? "-" : site(t.parent[v]));
    std::printf("\n");
  }

  // How long each site's NIC needs for the bytes the plan (with its relays) sends and
  // receives there (the planner's model counts the same caps as resources).
  {
    std::vector<double> out(n, 0.0), in(n, 0.0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (i != j) {
          const double bytes = load[topo::link_resource(net, i, j)] * net.link_bw(i, j) * s.scale;
          out[i] += bytes;
          in[j] += bytes;
        }
    int eo = 0, ei = 0;
    for (int i = 0; i < n; ++i) {
      const auto& st = sc.wan.sites[i];
      auto secs = [](double b, double cap) { return cap > 0 ? b / cap : 0.0; };
      if (secs(out[i], st.egress_bytes_per_s) > secs(out[eo], sc.wan.sites[eo].egress_bytes_per_s)) eo = i;
      if (secs(in[i], st.ingress_bytes_per_s) > secs(in[ei], sc.wan.sites[ei].ingress_bytes_per_s)) ei = i;
    }
    auto show = [&](const char* dir, int i, double b, double cap) {
      std::printf("busiest %s cap: %s, %.2f GB at %.0f Mbit/s = %.3f s (%s the model's bottleneck)\n", dir, site(i), b * 1e-9,
                  cap * 8e-6, cap > 0 ? b / cap : 0.0, cap > 0 && b / cap > model.bottleneck_s ? "ABOVE" : "below");
    };
    show("egress", eo, out[eo], sc.wan.sites[eo].egress_bytes_per_s);
    show("ingress", ei, in[ei], sc.wan.sites[ei].ingress_bytes_per_s);
  }

  // Run; arrivals of the last round binned per link.
  sim::Wan wan(sc.wan, std::max<uint32_t>(s.chunk_real + 72, 1200), s.scale);
  std::vector<std::unique_ptr<sim::Participant>> sites;
  for (int i = 0; i < n; ++i) {
    sync::SyncConfig cfg = sim::make_sync_config(n, i, s.chunk_real, a.reliable, sc.wan.seed, {});
    if (a.share_links) cfg.share_links = !a.reliable;  // else as the gateway's default
    sites.push_back(std::make_unique<sim::SyncParticipant>(cfg));
  }
  sim::Cluster c(wan, std::move(sites));
  if (!sim::install_plan(c, plan, 1)) {
    std::fprintf(stderr, "plan rejected\n");
    return 1;
  }
  struct Acc {
    uint64_t bytes = 0;
    Nanos first = -1, last = -1;
  };
  std::vector<Acc> acc(static_cast<size_t>(n) * n);
  std::vector<std::pair<Nanos, uint32_t>> arrivals;  // (time, link) of the recorded round
  bool record = false;
  wan.set_hop_observer([&](const sim::Wan::Hop& h) {
    if (!record || !h.data) return;
    Acc& x = acc[static_cast<size_t>(h.from) * n + h.to];
    x.bytes += h.wire_bytes;
    if (x.first < 0) x.first = h.at;
    x.last = h.at;
    arrivals.push_back({h.at, static_cast<uint32_t>(h.from * n + h.to)});
  });
  std::vector<sim::LinkStats> before(static_cast<size_t>(n) * n);
  sim::RoundResult rr;
  for (int k = 1; k <= a.rounds; ++k) {
    if (k > 1 && a.gap_ms > 0) {  // the links idle while the workers compute (not recorded)
      const Nanos until = wan.now() + static_cast<Nanos>(a.gap_ms * 1e6);
      for (int i = 0; i < n; ++i) wan.wake(i, wan.now());
      wan.run([](int) { return false; }, until);
    }
    record = k == a.rounds;
    if (record)
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
          if (i != j) before[static_cast<size_t>(i) * n + j] = wan.link(i, j).stats();
    rr = c.run_round(static_cast<uint32_t>(k), {s.local}, 4 * 3600 * kSecond);
    if (!rr.ok) {
      std::printf("round %d did not finish\n", k);
      return 1;
    }
    // Every round, not only the recorded one: LTP state carried between rounds makes them differ.
    std::printf("round %d: %.3f s (%.2fx the model), retransmits %lu\n", k, rr.seconds, rr.seconds / model.total_s,
                (unsigned long)rr.stats.retransmits);
  }
  const double T = rr.seconds;
  std::printf("simulated: %.3f s (%.2fx the model); retransmits %lu, bubbles %lu, early closes %lu\n", T, T / model.total_s,
              (unsigned long)rr.stats.retransmits, (unsigned long)rr.stats.bubbles, (unsigned long)rr.stats.early_closes);
  std::printf("wan: queue drops %lu, lost %lu, relayed %lu, peak packets %lu\n\n", (unsigned long)wan.stats().dropped_queue,
              (unsigned long)wan.stats().lost, (unsigned long)wan.stats().relayed, (unsigned long)wan.stats().peak_packets);

  struct Row {
    int i, j;
    double model_s, busy_s, util, gbytes, first_s, last_s;
    uint64_t drops;
  };
  std::vector<Row> rows;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const size_t k = static_cast<size_t>(i) * n + j;
      if (i == j || acc[k].bytes == 0) continue;
      const sim::LinkStats& st = wan.link(i, j).stats();
      Row w{i, j, load[topo::link_resource(net, i, j)], 1e-9 * static_cast<double>(st.busy - before[k].busy), 0,
            1e-9 * static_cast<double>(st.bytes - before[k].bytes), 1e-9 * static_cast<double>(acc[k].first - rr.start),
            1e-9 * static_cast<double>(acc[k].last - rr.start), st.queue_drops - before[k].queue_drops};
      w.util = w.busy_s / T;
      rows.push_back(w);
    }
  std::sort(rows.begin(), rows.end(), [&](const Row& x, const Row& y) {
    return a.by_last ? x.last_s > y.last_s : x.model_s > y.model_s;
  });
  std::printf("%-26s %8s %8s %6s %8s %7s %7s %7s %8s\n", "link", "model s", "busy s", "util", "GB wire", "first", "last",
              "drops", "Mbit/s");
  for (const Row& w : rows)
    std::printf("%-12s->%-12s %8.3f %8.3f %6.2f %8.3f %7.3f %7.3f %7lu %8.0f\n", site(w.i), site(w.j), w.model_s, w.busy_s,
                w.util, w.gbytes, w.first_s, w.last_s, (unsigned long)w.drops, sc.wan.link(w.i, w.j).bytes_per_s * 8e-6);

  // Throughput of the top links over the round, as a fraction of each link's rate.
  const int top = std::min<int>(a.top, static_cast<int>(rows.size()));
  std::printf("\nutilisation per %.2f s bin (fraction of the link's rate) for the %d most loaded links:\n", T / a.bins, top);
  std::vector<std::vector<double>> bins(top, std::vector<double>(a.bins, 0.0));
  for (const auto& [t, l] : arrivals) {
    for (int k = 0; k < top; ++k)
      if (static_cast<int>(l) == rows[k].i * n + rows[k].j) {
        const int b = std::min(a.bins - 1, static_cast<int>(1e-9 * static_cast<double>(t - rr.start) / T * a.bins));
        bins[k][b] += 1;
      }
  }
  for (int k = 0; k < top; ++k) {
    const Acc& x = acc[static_cast<size_t>(rows[k].i) * n + rows[k].j];
    const double pkt = x.bytes / std::max<double>(1, std::count_if(arrivals.begin(), arrivals.end(), [&](const auto& e) {
                                                       return static_cast<int>(e.second) == rows[k].i * n + rows[k].j;
                                                     }));
    const double rate = sc.wan.link(rows[k].i, rows[k].j).bytes_per_s;
    std::printf("%-12s->%-12s", site(rows[k].i), site(rows[k].j));
    for (double v : bins[k]) std::printf(" %4.2f", v * pkt / (rate * T / a.bins));
    std::printf("\n");
  }
  return 0;
}
