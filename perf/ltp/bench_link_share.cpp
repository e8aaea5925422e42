// link-share: jobs sharing one WAN link by weight (ltp::LinkShare), in the simulator (lib/sim's
// Wan, virtual time, the real Sender and Receiver). Per link scenario:
//   ratio 2:1   two jobs, weights 2 and 1, both saturating the link: goodput ratio and link
//               utilisation over a window past startup (today's senders, each with its own
//               controller, shown beside it for contrast);
//   solo        one job alone, three back-to-back transfers: time with its own controller
//               over time through the share (same link, same seed, one after the other);
//   2 engines   a gateway of two engines, each its own LinkShare: both jobs send from both,
//               and the heavier job's flow on engine 0 has ended (its shard's part of the
//               round is done): ratio over a window after that, the engines' shares on one
//               LinkBoard against each on its own (before the board).
// The JSON line carries the medians over the scenarios:
//   share_ratio_error_component = |measured ratio / 2 - 1|
//   solo_fraction_component     = solo shared goodput / plain sender goodput
//   share_ratio_error_engines_component = the same error with two engines on one board
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_common.h"
#include "sim/shared_link.h"

using sg::Nanos;
using sg::bench::fmt;

namespace {

struct Scenario {
  const char* name;
  double mbit;
  double rtt_ms;
  double loss;
  double queue_bdp = 1;  // bottleneck queue, in BDPs
};

sg::sim::SharedLinkSpec spec_for(const Scenario& sc, bool shared, uint64_t seed) {
  sg::sim::SharedLinkSpec s;
  s.fwd.bytes_per_s = sc.mbit * 1e6 / 8;
  s.fwd.delay = static_cast<Nanos>(sc.rtt_ms / 2 * 1e6);
  s.fwd.queue_bytes = static_cast<uint64_t>(sc.queue_bdp * s.fwd.bytes_per_s * sc.rtt_ms / 1e3);
  s.fwd.loss = sc.loss;
  s.rev = s.fwd;
  s.rev.loss = 0;
  s.shared = shared;
  s.seed = seed;
  return s;
}

struct Pair {
  double ratio = 0;  // goodput of weight 2 over weight 1
  double util = 0;   // their goodput together over the link's rate
};

// Two jobs, weights 2 and 1, measured in [warm, warm + window).
Pair ratio(const Scenario& sc, bool shared, uint64_t seed, double window_s) {
  auto s = spec_for(sc, shared, seed);
  const double bytes = s.fwd.bytes_per_s * (window_s + 5);  // neither finishes in the window
  sg::sim::SharedFlowSpec f;
  f.bytes = static_cast<uint64_t>(bytes);
  f.weight = 2;
  s.flows.push_back(f);
  f.weight = 1;
  s.flows.push_back(f);
  sg::sim::SharedLink l(s);
  const Nanos warm = static_cast<Nanos>(std::max(1.0, 20 * sc.rtt_ms / 1e3) * 1e9);
  l.run_until(warm);
  const uint64_t a0 = l.delivered(0), b0 = l.delivered(1);
  l.run_until(warm + static_cast<Nanos>(window_s * 1e9));
  const double a = static_cast<double>(l.delivered(0) - a0), b = static_cast<double>(l.delivered(1) - b0);
  return {b > 0 ? a / b : 0, (a + b) / (s.fwd.bytes_per_s * window_s)};
}

// Two engines: job A (weight 2) and B (weight 1) each with a flow on both; A's flow on engine 0
// ends early. Ratio of A to B in [end + warm, end + warm + window).
double engines_ratio(const Scenario& sc, bool one_board, uint64_t seed, double window_s) {
  auto s = spec_for(sc, true, seed);
  s.engines = 2;
  s.one_board = one_board;
  const Nanos warm = static_cast<Nanos>(std::max(1.0, 20 * sc.rtt_ms / 1e3) * 1e9);
  const double bytes = s.fwd.bytes_per_s * (window_s + 2 * static_cast<double>(warm) / 1e9 + 10);
  sg::sim::SharedFlowSpec f;
  f.bytes = static_cast<uint64_t>(bytes);
  for (uint32_t job = 0; job < 2; ++job)
    for (uint32_t e = 0; e < 2; ++e) {
      f.weight = job == 0 ? 2 : 1;
      f.group = 100 + job;
      f.engine = e;
      s.flows.push_back(f);
    }
  s.flows[0].bytes = static_cast<uint64_t>(s.fwd.bytes_per_s * static_cast<double>(warm) / 1e9 / 4);
  sg::sim::SharedLink l(s);
  while (!l.done(0) && l.now() < 600 * sg::kSecond) l.run_until(l.now() + 10 * sg::kMilli);
  l.run_until(l.now() + warm);
  const uint64_t a0 = l.delivered(1), b0 = l.delivered(2) + l.delivered(3);
  l.run_until(l.now() + static_cast<Nanos>(window_s * 1e9));
  const double a = static_cast<double>(l.delivered(1) - a0), b = static_cast<double>(l.delivered(2) + l.delivered(3) - b0);
  return b > 0 ? a / b : 0;
}

// Seconds for three back-to-back transfers of `mb` MB by one job alone.
double solo_seconds(const Scenario& sc, bool shared, uint64_t seed, uint64_t mb, bool& ok) {
  auto s = spec_for(sc, shared, seed);
  sg::sim::SharedFlowSpec f;
  f.bytes = mb << 20;
  f.transfers = 3;
  f.weight = 2;
  s.flows.push_back(f);
  sg::sim::SharedLink l(s);
  while (!l.done(0) && l.now() < 600 * sg::kSecond) l.run_until(l.now() + 100 * sg::kMilli);
  ok &= l.done(0) && l.all_ok();
  return static_cast<double>(l.finished_at(0)) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: bench_link_share [--quick]\n");
      return 2;
    }
  }
  const std::vector<Scenario> scenarios = {
      {"100M-40ms", 100, 40, 0},
      {"200M-100ms", 200, 100, 0},
      {"50M-20ms-0.1%", 50, 20, 0.001},
      {"500M-150ms", 500, 150, 0},
      {"100M-40ms-q0.2", 100, 40, 0, 0.2},
      {"1G-20ms-1%", 1000, 20, 0.01},
  };
  const int seeds = quick ? 1 : 3;
  const double window_s = quick ? 3 : 8;
  const uint64_t solo_mb = quick ? 8 : 32;
  std::printf("link-share: jobs sharing one link by weight (ltp::LinkShare), simulator, virtual time\n");
  std::printf("ratio: weights 2:1, both saturating, goodput over %.0f s past startup; solo: 3 x %lu MB alone,\n"
              "plain (own controller) vs through the share; queue one BDP (q0.2: a fifth); seeds %d (medians)\n\n",
              window_s, static_cast<unsigned long>(solo_mb), seeds);
  sg::bench::Table t({"link", "ratio shared", "ratio plain", "ratio error", "util shared", "util plain", "solo plain s",
                      "solo shared s", "solo fraction", "2 engines board", "2 engines apart"});
  std::vector<double> errors, fractions, engine_errors;
  bool ok = true;
  for (const auto& sc : scenarios) {
    std::vector<double> rs, rp, us, up, err, ps, ss, fr, eb, ea, eerr;
    for (int k = 0; k < seeds; ++k) {
      const uint64_t seed = 1 + k;
      const Pair sh = ratio(sc, true, seed, window_s), pl = ratio(sc, false, seed, window_s);
      rs.push_back(sh.ratio);
      rp.push_back(pl.ratio);
      us.push_back(sh.util);
      up.push_back(pl.util);
      err.push_back(std::fabs(sh.ratio / 2 - 1));
      ps.push_back(solo_seconds(sc, false, seed, solo_mb, ok));
      ss.push_back(solo_seconds(sc, true, seed, solo_mb, ok));
      fr.push_back(ps.back() / ss.back());  // goodput shared / plain, same bytes
      eb.push_back(engines_ratio(sc, true, seed, window_s));
      ea.push_back(engines_ratio(sc, false, seed, window_s));
      eerr.push_back(std::fabs(eb.back() / 2 - 1));
    }
    engine_errors.push_back(sg::bench::median(eerr));
    const double e = sg::bench::median(err), f = sg::bench::median(fr);
    errors.push_back(e);
    fractions.push_back(f);
    t.row({sc.name, fmt(sg::bench::median(rs)), fmt(sg::bench::median(rp)), fmt(e), fmt(sg::bench::median(us)),
           fmt(sg::bench::median(up)), fmt(sg::bench::median(ps)),
           fmt(sg::bench::median(ss)), fmt(f), fmt(sg::bench::median(eb)), fmt(sg::bench::median(ea))});
  }
  t.print();
  std::printf("\nratio error = |ratio / 2 - 1|; util = payload goodput / link rate (headers take the rest);\n"
              "solo fraction = plain time / shared time (goodput shared / plain);\n"
              "2 engines: job ratio (target 2) after the heavier job's flow on engine 0 ended, the engines'\n"
              "shares on one LinkBoard / each on its own\n");
  sg::bench::JsonLine json("link-share");
  json.num("share_ratio_error_component", sg::bench::median(errors));
  json.num("solo_fraction_component", sg::bench::median(fractions));
  json.num("share_ratio_error_worst_component", *std::max_element(errors.begin(), errors.end()));
  json.num("solo_fraction_worst_component", *std::min_element(fractions.begin(), fractions.end()));
  json.num("share_ratio_error_engines_component", sg::bench::median(engine_errors));
  json.num("share_ratio_error_engines_worst_component", *std::max_element(engine_errors.begin(), engine_errors.end()));
  json.num("all_finished", ok ? 1 : 0);
  json.print();
  return 0;
}
