#include "topology/minmax_lp.h"

#include <cmath>

namespace sg::topo {
namespace {
constexpr double kEps = 1e-12;
}

MinMaxLp::MinMaxLp(int rows, int cols)
    : rows_(rows), cols_(cols), t_(static_cast<size_t>(rows + 1) * (cols + 1), 0.0),
      basic_(rows), nonbasic_(cols), enabled_(cols, false) {
  for (int r = 0; r < rows; ++r) {
    basic_[r] = cols + r;
    t_[idx(r, cols)] = 1.0;  // A w <= 1
  }
  for (int c = 0; c < cols; ++c) {
    nonbasic_[c] = c;
    t_[idx(rows, c)] = -1.0;  // objective: maximise sum w
  }
}

void MinMaxLp::pivot(int p, int q) {
  const double a = t_[idx(p, q)];
  const double inv = 1.0 / a;
  double* prow = &t_[idx(p, 0)];
  for (int j = 0; j <= cols_; ++j) prow[j] *= inv;
  prow[q] = inv;
  for (int i = 0; i <= rows_; ++i) {
    if (i == p) continue;
    const double f = t_[idx(i, q)];
    if (f == 0.0) continue;
    double* row = &t_[idx(i, 0)];
    for (int j = 0; j <= cols_; ++j) row[j] -= f * prow[j];  // branch-free; column q fixed below
    row[q] = -f * inv;
  }
  std::swap(basic_[p], nonbasic_[q]);
}

bool MinMaxLp::solve() {
  bool any = false;
  for (bool e : enabled_) any = any || e;
  if (!any) return false;
  const long limit = 50L * (rows_ + cols_) + 1000;
  const long bland_after = 5L * (rows_ + cols_) + 100;  // Bland's rule ends any cycling
  for (long it = 0; it < limit; ++it) {
    const bool bland = it > bland_after;
    int q = -1;
    double best = -1e-10;
    for (int j = 0; j < cols_; ++j) {
      const int var = nonbasic_[j];
      if (var < cols_ && !enabled_[var]) continue;
      const double d = t_[idx(rows_, j)];
      if (d < best) {
        if (bland) {
          if (q < 0 || var < nonbasic_[q]) q = j;
        } else {
          best = d;
          q = j;
        }
      }
    }
    if (q < 0) return true;
    int p = -1;
    double ratio = 0;
    for (int i = 0; i < rows_; ++i) {
      const double a = t_[idx(i, q)];
      if (a <= kEps) continue;
      const double r = t_[idx(i, cols_)] / a;
      if (p < 0 || r < ratio - 1e-15 || (std::fabs(r - ratio) <= 1e-15 && basic_[i] < basic_[p])) {
        p = i;
        ratio = r;
      }
    }
    if (p < 0) return false;  // unbounded: a column with no work anywhere (cannot happen for A > 0)
    pivot(p, q);
  }
  return false;
}

double MinMaxLp::value() const {
  const double z = t_[idx(rows_, cols_)];
  return z > 0 ? 1.0 / z : 0.0;
}

std::vector<double> MinMaxLp::shares() const {
  std::vector<double> x(cols_, 0.0);
  const double v = value();
  for (int i = 0; i < rows_; ++i)
    if (basic_[i] < cols_) x[basic_[i]] = std::max(0.0, t_[idx(i, cols_)] * v);
  return x;
}

std::vector<double> MinMaxLp::prices() const {
  std::vector<double> y(rows_, 0.0);
  const double v = value();
  for (int j = 0; j < cols_; ++j)
    if (nonbasic_[j] >= cols_) y[nonbasic_[j] - cols_] = std::max(0.0, t_[idx(rows_, j)] * v);
  return y;
}

}  // namespace sg::topo
