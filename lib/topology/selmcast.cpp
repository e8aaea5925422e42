#include "topology/selmcast.h"

#include <algorithm>
#include <limits>

namespace sg::topo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Degrees and the derived finish/reached test, kept incrementally during selection.
class State {
 public:
  State(const McastInstance& inst, const McastParams& prm)
      : in_(inst), prm_(prm), out_deg_(inst.n, 0), in_deg_(inst.n, 0), chosen_(static_cast<size_t>(inst.n) * inst.n, 0) {}

  double finish(int i, int j, int extra_out = 0, int extra_in = 0) const {
    const double rate = rate_of(i, j, extra_out, extra_in);
    return rate > 0 ? in_.ready[i] + 0.5 * in_.rtt[idx(i, j)] + in_.update_bytes / rate : kInf;
  }
  bool reached(int i, int j, int extra_out = 0, int extra_in = 0) const {
    const double rate = rate_of(i, j, extra_out, extra_in);
    if (rate <= 0) return false;
    const double f = in_.ready[i] + 0.5 * in_.rtt[idx(i, j)] + in_.update_bytes / rate;
    if (prm_.mode == SyncMode::kBsp) return f <= in_.budget_s;
    return f <= (prm_.staleness + 1) * in_.budget_s && in_.update_bytes / rate <= in_.budget_s;
  }
  // Reached transfers lost if i->j were added (those sharing i's uplink or j's downlink).
  int losses_if_added(int i, int j) const {
    int lost = 0;
    for (int k = 0; k < in_.n; ++k) {
      if (chosen(i, k) && reached(i, k) && !reached(i, k, 1, k == j ? 1 : 0)) ++lost;
      if (chosen(k, j) && k != i && reached(k, j) && !reached(k, j, 0, 1)) ++lost;
    }
    return lost;
  }
  void add(int i, int j) {
    chosen_[idx(i, j)] = 1;
    ++out_deg_[i];
    ++in_deg_[j];
  }
  bool chosen(int i, int j) const { return chosen_[idx(i, j)] != 0; }
  // Adding i->j keeps every chosen transfer out of i and into j (and i->j) finishing by t.
  bool keeps_within(int i, int j, double t) const {
    if (finish(i, j, 1, 1) > t) return false;
    for (int k = 0; k < in_.n; ++k) {
      if (chosen(i, k) && finish(i, k, 1, 0) > t) return false;
      if (chosen(k, j) && finish(k, j, 0, 1) > t) return false;
    }
    return true;
  }
  // When the last site is done: its own update ready (a receiver waits for its workers as
  // well as for its senders) and every selected transfer finished.
  double round_time() const {
    double t = 0;
    for (int i = 0; i < in_.n; ++i) t = std::max(t, in_.ready[i]);
    for (int i = 0; i < in_.n; ++i)
      for (int j = 0; j < in_.n; ++j)
        if (chosen(i, j)) t = std::max(t, finish(i, j));
    return t;
  }
  int out_degree(int i) const { return out_deg_[i]; }

 private:
  size_t idx(int i, int j) const { return static_cast<size_t>(i) * in_.n + j; }
  double rate_of(int i, int j, int extra_out, int extra_in) const {
    const int od = std::max(1, out_deg_[i] + extra_out), id = std::max(1, in_deg_[j] + extra_in);
    return std::min({in_.bw[idx(i, j)], in_.out_cap[i] / od, in_.in_cap[j] / id});
  }
  const McastInstance& in_;
  const McastParams& prm_;
  std::vector<int> out_deg_, in_deg_;
  std::vector<char> chosen_;
};

}  // namespace

McastScore score_selection(const McastInstance& inst, const McastParams& prm, const Selection& sel) {
  State st(inst, prm);
  for (int i = 0; i < inst.n; ++i)
    for (int j : sel[i]) st.add(i, j);
  McastScore s;
  s.round_time_s = st.round_time();
  int reached = 0;
  for (int i = 0; i < inst.n; ++i)
    for (int j : sel[i]) reached += st.reached(i, j);
  s.mean_p = static_cast<double>(reached) / inst.n;
  return s;
}

Selection select_receivers(const McastInstance& inst, const McastParams& prm) {
  const int n = inst.n;
  const int p = std::min(prm.p, n - 1);
  State st(inst, prm);
  Selection sel(n);
  // Phase 1: only additions that arrive in time and cost no reached transfer, earliest
  // finish first.
  std::vector<std::pair<double, int>> cand;
  while (true) {
    cand.clear();
    for (int i = 0; i < n; ++i) {
      if (st.out_degree(i) >= p) continue;
      for (int j = 0; j < n; ++j)
        if (j != i && !st.chosen(i, j) && st.reached(i, j, 1, 1)) cand.emplace_back(st.finish(i, j, 1, 1), i * n + j);
    }
    std::sort(cand.begin(), cand.end());
    int pick = -1;
    for (auto [f, ij] : cand)
      if (st.losses_if_added(ij / n, ij % n) == 0) {
        pick = ij;
        break;
      }
    if (pick < 0) break;
    st.add(pick / n, pick % n);
    sel[pick / n].push_back(pick % n);
  }
  // Phase 2: every sender still sends to exactly p sites; fill with the least harm.
  for (int i = 0; i < n; ++i)
    while (static_cast<int>(sel[i].size()) < p) {
      int bj = -1, best_loss = 0;
      double best_f = kInf;
      for (int j = 0; j < n; ++j) {
        if (j == i || st.chosen(i, j)) continue;
        const int loss = st.losses_if_added(i, j) - (st.reached(i, j, 1, 1) ? 1 : 0);
        const double f = st.finish(i, j, 1, 1);
        if (bj < 0 || loss < best_loss || (loss == best_loss && f < best_f)) {
          bj = j;
          best_loss = loss;
          best_f = f;
        }
      }
      st.add(i, bj);
      sel[i].push_back(bj);
    }
  // Phase 3: extras that cost neither time nor a reached transfer, earliest finish first.
  const int most = std::min(prm.max_receivers, n - 1);
  if (most > p) {
    const double t = st.round_time();
    while (true) {
      int pick = -1;
      double best = kInf;
      for (int i = 0; i < n; ++i) {
        if (st.out_degree(i) >= most) continue;
        for (int j = 0; j < n; ++j) {
          if (j == i || st.chosen(i, j) || !st.reached(i, j, 1, 1)) continue;
          const double f = st.finish(i, j, 1, 1);
          if (f < best && st.keeps_within(i, j, t) && st.losses_if_added(i, j) == 0) {
            best = f;
            pick = i * n + j;
          }
        }
      }
      if (pick < 0) break;
      st.add(pick / n, pick % n);
      sel[pick / n].push_back(pick % n);
    }
  }
  return sel;
}

Selection random_receivers(const McastInstance& inst, const McastParams& prm, Rng& rng) {
  const int n = inst.n;
  const int p = std::min(prm.p, n - 1);
  Selection sel(n);
  std::vector<int> others;
  for (int i = 0; i < n; ++i) {
    others.clear();
    for (int j = 0; j < n; ++j)
      if (j != i) others.push_back(j);
    for (int k = 0; k < p; ++k) {  // partial Fisher-Yates
      const int pick = k + static_cast<int>(rng.below(others.size() - k));
      std::swap(others[k], others[pick]);
      sel[i].push_back(others[k]);
    }
  }
  return sel;
}

}  // namespace sg::topo
