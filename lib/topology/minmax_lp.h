// The shard-sizing problem as a matrix game, solved exactly by the simplex method.
//
//   v = min over x in the simplex of max_r (A x)_r,   A >= 0
//
// Rows are resources (links, aggregators), columns are candidate trees, and A[r][c] is the
// seconds resource r works if the whole model went through tree c; x_c is the share of the
// model given to tree c, v the resulting bottleneck time. Solved as
//   maximise sum(w)  s.t.  A w <= 1, w >= 0;   v = 1 / sum(w), x = v w
// whose duals, scaled by v, are the resource "prices" (the other player's mixed strategy):
// a new column c' lowers v only if sum_r price_r A[r][c'] < v (column generation).
// Columns start disabled; enable() adds them to a solved tableau, which stays primal
// feasible, so solve() continues from the previous optimum (used to sweep a latency cap).
#pragma once

#include <cstddef>
#include <vector>

namespace sg::topo {

class MinMaxLp {
 public:
  MinMaxLp(int rows, int cols);

  void set(int r, int c, double a) { t_[idx(r, c)] = a; }  // only before the first solve()
  void enable(int c) { enabled_[c] = true; }
  // Runs the simplex to optimality over the enabled columns. False if no column is enabled
  // or the iteration bound was hit (the state is then the best basis found).
  bool solve();

  double value() const;                 // v
  std::vector<double> shares() const;   // x, one per column, sums to 1
  std::vector<double> prices() const;   // one per row, sums to 1

 private:
  size_t idx(int r, int c) const { return static_cast<size_t>(r) * (cols_ + 1) + c; }
  void pivot(int p, int q);

  int rows_, cols_;
  std::vector<double> t_;        // (rows+1) x (cols+1): constraint rows, objective row; rhs last
  std::vector<int> basic_;       // per row: variable id (cols_ + r = slack r)
  std::vector<int> nonbasic_;    // per column
  std::vector<bool> enabled_;    // per original column
};

}  // namespace sg::topo
