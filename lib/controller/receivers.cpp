#include "controller/receivers.h"

#include <algorithm>

#include "common/rng.h"

namespace sg::controller {
namespace {

topo::McastInstance instance(const topo::Network& net, const ReceiverSettings& s) {
  topo::McastInstance in;
  in.n = net.n;
  in.bw.assign(static_cast<size_t>(net.n) * net.n, 0);
  in.rtt.assign(in.bw.size(), 0);
  for (int i = 0; i < net.n; ++i)
    for (int j = 0; j < net.n; ++j)
      if (i != j) {
        in.bw[static_cast<size_t>(i) * net.n + j] = net.link_bw(i, j);
        in.rtt[static_cast<size_t>(i) * net.n + j] = 2 * net.prop(i, j);
      }
  for (int i = 0; i < net.n; ++i) {
    const double e = net.egress_cap(i), g = net.ingress_cap(i);
    in.out_cap.push_back(e > 0 ? e : 1e15);
    in.in_cap.push_back(g > 0 ? g : 1e15);
  }
  in.ready.assign(net.n, 0.0);
  for (int i = 0; i < net.n && i < static_cast<int>(s.ready.size()); ++i) in.ready[i] = std::max(0.0, s.ready[i]);
  in.update_bytes = s.update_bytes;
  in.budget_s = 1e12;  // no deadline: BSP waits for every selected update, the shortest round wins
  return in;
}

topo::McastParams params(const ReceiverSettings& s, int n) {
  topo::McastParams p;
  p.p = s.p;
  p.mode = s.staleness ? topo::SyncMode::kSsp : topo::SyncMode::kBsp;
  p.staleness = s.staleness;
  p.max_receivers = s.choice == config::ReceiverChoice::kSelmcast ? n - 1 : 0;
  return p;
}

Receivers to_receivers(const topo::Selection& sel) {
  Receivers r(sel.size());
  for (size_t i = 0; i < sel.size(); ++i) {
    for (int j : sel[i]) r[i].push_back(static_cast<topo::SiteId>(j));
    std::sort(r[i].begin(), r[i].end());
  }
  return r;
}

}  // namespace

Receivers choose_receivers(const topo::Network& net, const ReceiverSettings& s) {
  const int n = net.n;
  if (n < 2) return Receivers(static_cast<size_t>(std::max(n, 0)));
  switch (s.choice) {
    case config::ReceiverChoice::kBroadcast: {
      Receivers r(n);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
          if (j != i) r[i].push_back(static_cast<topo::SiteId>(j));
      return r;
    }
    case config::ReceiverChoice::kRandom: {
      Rng rng(s.seed * 0x9e3779b97f4a7c15ull + 1);
      return to_receivers(topo::random_receivers(instance(net, s), params(s, n), rng));
    }
    case config::ReceiverChoice::kSelmcast: break;
  }
  return to_receivers(topo::select_receivers(instance(net, s), params(s, n)));
}

topo::McastScore receivers_score(const topo::Network& net, const ReceiverSettings& s, const Receivers& r) {
  topo::Selection sel(r.size());
  for (size_t i = 0; i < r.size(); ++i) sel[i].assign(r[i].begin(), r[i].end());
  return topo::score_selection(instance(net, s), params(s, net.n), sel);
}

}  // namespace sg::controller
