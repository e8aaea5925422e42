// Shared helpers for perf/ benchmarks: wall timing, a memcpy reference measured in the
// same run, a readable table, and the closing JSON line that perf/bench promises.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace sg::bench {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

// Keeps the optimiser from deleting work whose result is otherwise unused.
template <typename T>
inline void do_not_optimize(const T& v) {
  asm volatile("" : : "g"(&v) : "memory");
}

// GB/s of memcpy moving `bytes` per call in `chunk`-sized pieces from src to dst, the
// reference that throughput figures are divided by. Runs for about `seconds`.
inline double memcpy_gbps(size_t chunk, size_t total_bytes, double seconds = 0.2) {
  std::vector<uint8_t> src(total_bytes, 1), dst(total_bytes, 0);
  size_t moved = 0;
  const double t0 = now_seconds();
  double t1 = t0;
  while (t1 - t0 < seconds) {
    for (size_t off = 0; off + chunk <= total_bytes; off += chunk) {
      std::memcpy(dst.data() + off, src.data() + off, chunk);
    }
    do_not_optimize(dst[0]);
    moved += total_bytes / chunk * chunk;
    t1 = now_seconds();
  }
  return static_cast<double>(moved) / (t1 - t0) / 1e9;
}

// Builds {"bench": NAME, key: value, ...}: the last line every benchmark prints.
class JsonLine {
 public:
  explicit JsonLine(std::string bench) { out_ = "{\"bench\": \"" + bench + "\""; }
  JsonLine& num(const std::string& key, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    out_ += ", \"" + key + "\": " + buf;
    return *this;
  }
  JsonLine& boolean(const std::string& key, bool v) {
    out_ += ", \"" + key + "\": " + (v ? "true" : "false");
    return *this;
  }
  JsonLine& str(const std::string& key, const std::string& v) {
    out_ += ", \"" + key + "\": \"" + v + "\"";
    return *this;
  }
  void print() const { std::printf("%s}\n", out_.c_str()); }

 private:
  std::string out_;
};

// Fixed-width table: Table t({"codec","GB/s"}); t.row({"f16","3.2"}); t.print();
class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void row(std::vector<std::string> r) { rows_.push_back(std::move(r)); }
  void print() const {
    std::vector<size_t> w;
    for (const auto& r : rows_)
      for (size_t i = 0; i < r.size(); ++i) {
        if (w.size() <= i) w.push_back(0);
        w[i] = std::max(w[i], r[i].size());
      }
    for (size_t k = 0; k < rows_.size(); ++k) {
      for (size_t i = 0; i < rows_[k].size(); ++i)
        std::printf("%-*s%s", static_cast<int>(w[i]), rows_[k][i].c_str(), i + 1 < rows_[k].size() ? "  " : "\n");
      if (k == 0) {
        size_t total = 0;
        for (size_t x : w) total += x + 2;
        std::printf("%s\n", std::string(total > 2 ? total - 2 : 0, '-').c_str());
      }
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

inline std::string fmt(double v, const char* f = "%.3f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace sg::bench
