#include "selmcast_sim.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "common/rng.h"
#include "controller/receivers.h"
#include "sim/wan.h"
#include "sync/peer_sync.h"
#include "topology/selmcast.h"

namespace sg::bench {
namespace {

constexpr uint32_t kChunk = 1024;       // real payload bytes per chunk
constexpr uint32_t kScale = 8;          // wire bytes per real byte (lib/sim payload_scale)
constexpr uint64_t kFloats = 256 * 1024;  // 1 MB real, 8 MB on the wire per update

// A site: compute (its load) then a PeerSync round, `rounds` times.
class PeerSite final : public sim::Endpoint {
 public:
  PeerSite(const sync::PeerSyncConfig& c, Nanos compute) : sync_(c), compute_(compute), update_(c.model_floats, 1.0f) {}
  void start(int rounds, Nanos now) {
    left_ = rounds;
    ready_at_ = now + compute_;
  }
  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) override {
    sync_.on_packet(msg, now, tx);
    after(now);
  }
  Nanos poll(Nanos now, ltp::PacketSink& tx) override {
    if (!sync_.running() && left_ > 0 && now >= ready_at_) {
      if (finished_at_ >= 0) lag_ = now - finished_at_;  // what the site sees of its own load
      if (sync_.begin_round(sync_.round() + 1, update_, now, tx)) --left_;
    }
    Nanos next = sync_.poll(now, tx);
    after(now);
    if (!sync_.running() && left_ > 0) next = std::min(next, ready_at_);
    return next;
  }
  bool idle() const { return left_ == 0 && !sync_.running(); }
  sync::PeerSync& sync() { return sync_; }
  Nanos update_lag() const { return lag_; }
  uint64_t mixed = 0, rounds = 0;

 private:
  void after(Nanos now) {
    if (sync_.round_done() && counted_ != sync_.round()) {
      counted_ = sync_.round();
      mixed += sync_.last_mixed();
      ++rounds;
      finished_at_ = now;
      ready_at_ = now + compute_;
    }
  }
  sync::PeerSync sync_;
  Nanos compute_;
  std::vector<float> update_;
  int left_ = 0;
  uint32_t counted_ = 0;
  Nanos ready_at_ = 0, finished_at_ = -1, lag_ = 0;
};

// Pair rates log-uniform 50..1000 Mbit/s, one-way delay 5..75 ms, uplinks 0.3..1 Gbit/s,
// compute 50..150 ms per round with one straggler at `straggler` times that.
sim::WanSpec make_wan(int n, Rng& rng, double straggler, std::vector<Nanos>& compute) {
  sim::WanSpec w;
  w.seed = rng.next();
  auto logu = [&](double lo, double hi) { return std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * rng.uniform()); };
  for (int i = 0; i < n; ++i) {
    sim::SiteSpec s;
    s.egress_bytes_per_s = logu(300e6, 1e9) / 8;
    w.sites.push_back(s);
    compute.push_back(static_cast<Nanos>((50 + 100 * rng.uniform()) * kMilli));
  }
  Nanos& slow = compute[rng.below(n)];
  slow = static_cast<Nanos>(static_cast<double>(slow) * straggler);
  w.links.assign(static_cast<size_t>(n) * n, {});
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      const double base = logu(50e6, 1e9) / 8;
      const auto delay = static_cast<Nanos>((5 + 70 * rng.uniform()) * kMilli);
      for (auto [a, b] : {std::pair{i, j}, std::pair{j, i}}) {
        sim::LinkSpec& l = w.link(a, b);
        l.bytes_per_s = base * (0.7 + 0.3 * rng.uniform());
        l.delay = delay;
        l.queue_bytes = 4u << 20;
      }
    }
  return w;
}

// Runs `rounds` rounds at every site under `sel`; returns the virtual seconds they took.
double run_rounds(sim::Wan& wan, std::vector<std::unique_ptr<PeerSite>>& sites, const topo::Selection& sel,
                  int rounds) {
  const Nanos t0 = wan.now();
  for (size_t i = 0; i < sites.size(); ++i) {
    sites[i]->sync().set_selection(sel);
    sites[i]->start(rounds, t0);
    wan.wake(static_cast<int>(i), t0);
  }
  auto all_idle = [&] {
    for (auto& s : sites)
      if (!s->idle()) return false;
    return true;
  };
  wan.run([&](int) { return all_idle(); }, t0 + 600 * kSecond);
  return static_cast<double>(wan.now() - t0) / 1e9;
}

}  // namespace

PeerSimResult run_peer_sim(int n, int p, uint32_t staleness, int rounds, int alternations, uint64_t seed,
                           double straggler) {
  Rng rng(seed);
  std::vector<Nanos> compute;
  const sim::WanSpec spec = make_wan(n, rng, straggler, compute);
  sim::Wan wan(spec, 256 + kChunk, kScale);
  std::vector<std::unique_ptr<PeerSite>> sites;
  std::vector<uint16_t> nodes;
  for (int i = 0; i < n; ++i) nodes.push_back(static_cast<uint16_t>(i + 1));
  for (int i = 0; i < n; ++i) {
    sync::PeerSyncConfig c;
    c.self_node = nodes[i];
    c.site_nodes = nodes;
    c.model_floats = kFloats;
    c.chunk_bytes = kChunk;
    c.staleness = staleness;
    c.seed = seed * 31 + static_cast<uint64_t>(i);
    sites.push_back(std::make_unique<PeerSite>(c, compute[i]));
    wan.attach(i, nodes[i], sites.back().get());
  }
  // Warm-up: every link measured alone, as the gateways' probes measure idle links. In round k
  // site i sends to i + k only (4 rounds each, for the senders' rate models to settle), so no
  // uplink is shared and what a sender measures is the pair's own rate. Measured under
  // broadcast instead, each link showed its share of the uplink, extra receivers looked free,
  // and BSP rounds took 1.14x random ones (fed the true rates, 0.66x).
  for (int k = 1; k < n; ++k) {
    topo::Selection one(n);
    for (int i = 0; i < n; ++i) one[i].push_back((i + k) % n);
    run_rounds(wan, sites, one, 4);
  }

  // The global view from what the sites measured (their controller's measurement rows): link
  // rates and RTTs, and each site's update lag (its load). The selection is the controller's
  // (controller/receivers.h), as in the gateway.
  topo::Network net;
  net.n = n;
  net.bw.assign(static_cast<size_t>(n) * n, 0);
  net.rtt.assign(static_cast<size_t>(n) * n, 0);
  net.egress.assign(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (j != i) {
        net.link_bw(i, j) = sites[i]->sync().measured_rate(j);
        net.rtt[static_cast<size_t>(i) * n + j] = static_cast<double>(sites[i]->sync().measured_rtt(j)) / 1e9;
        // Links measured one at a time: the uplink carries at least the fastest of them.
        net.egress[i] = std::max(net.egress[i], net.link_bw(i, j));
      }
  controller::ReceiverSettings rs;
  rs.p = p;
  rs.staleness = static_cast<int>(staleness);
  rs.update_bytes = static_cast<double>(kFloats * 4 * kScale);
  rs.seed = seed;
  for (auto& site : sites) rs.ready.push_back(static_cast<double>(site->update_lag()) / 1e9);
  const controller::Receivers aware = controller::choose_receivers(net, rs);
  controller::ReceiverSettings blind_rs = rs;
  blind_rs.ready.clear();
  const controller::Receivers blind = controller::choose_receivers(net, blind_rs);
  auto as_selection = [](const controller::Receivers& r) {
    topo::Selection s(r.size());
    for (size_t i = 0; i < r.size(); ++i) s[i].assign(r[i].begin(), r[i].end());
    return s;
  };
  topo::McastInstance inst;  // for the random baseline's draw only
  inst.n = n;
  topo::McastParams prm{p, staleness ? topo::SyncMode::kSsp : topo::SyncMode::kBsp, static_cast<int>(staleness), 0};

  PeerSimResult r;
  Rng pick(seed ^ 0x5e1);
  std::vector<double> t[3];
  uint64_t mixed[3] = {}, done[3] = {};
  for (int a = 0; a < alternations; ++a)
    for (int which = 0; which < 3; ++which) {
      uint64_t m0 = 0, r0 = 0;
      for (auto& s : sites) m0 += s->mixed, r0 += s->rounds;
      const topo::Selection sel = which == 0   ? as_selection(aware)
                                  : which == 1 ? topo::random_receivers(inst, prm, pick)
                                               : as_selection(blind);
      t[which].push_back(run_rounds(wan, sites, sel, rounds) / rounds);
      uint64_t m1 = 0, r1 = 0;
      for (auto& s : sites) m1 += s->mixed, r1 += s->rounds;
      mixed[which] += m1 - m0;
      done[which] += r1 - r0;
    }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto mean_p = [&](int k) { return static_cast<double>(mixed[k]) / static_cast<double>(std::max<uint64_t>(done[k], 1)); };
  r.sel_round_s = median(t[0]);
  r.rnd_round_s = median(t[1]);
  r.blind_round_s = median(t[2]);
  r.sel_mean_p = mean_p(0);
  r.rnd_mean_p = mean_p(1);
  r.blind_mean_p = mean_p(2);
  return r;
}

}  // namespace sg::bench
