// The parts of `perf/bench sim-sync`, one function each: they run experiments.h's
// experiments on the loaded scenarios, print their tables, and put their figures into one
// Report (the JSON line's figures, the data file for the plots, the markdown table).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench_common.h"
#include "sim/scenario.h"

namespace sg::simbench {

// A JSON object built field by field (numbers, strings, raw JSON values).
struct Json {
  std::string s = "{";
  bool first = true;
  void raw(const std::string& k, const std::string& v) {
    s += (first ? "" : ", ") + ("\"" + k + "\": ") + v;
    first = false;
  }
  void num(const std::string& k, double v) { raw(k, std::isfinite(v) ? bench::fmt(v, "%.6g") : "null"); }
  void str(const std::string& k, const std::string& v) { raw(k, "\"" + v + "\""); }
  std::string done() const { return s + "}"; }
};

// "[a, b, ...]" of JSON values.
struct JsonList {
  std::string s = "[";
  void add(const std::string& v) { s += (s.size() > 1 ? ", " : "") + v; }
  std::string done() const { return s + "]"; }
};

struct Report {
  std::map<std::string, double> fig;  // the JSON line's figures
  Json data;                          // sim-sync.json: series for the plots and tables
  std::string md;                     // sim-sync.md: the main table (plot_sim.py appends the rest)
};

struct PartArgs {
  bool quick = false;
  bool only = false;        // scenarios were named with --only
  std::string root = ".";   // the source tree (SG_ROOT): config/testbed's gateway defaults
  std::string scenarios;    // folder of the scenario files
  double mem_budget = 1.5e9;  // bytes of SiteSync buffers across all sites
  uint64_t bytes = 0;         // --bytes: the one gradient size of the main and testbed parts (0: their defaults)
};

// "100 MB", "1 GB".
std::string size_name(uint64_t bytes);
// "8sites_1GB": the suffix of per-scenario figure names.
std::string figure_key(int sites, uint64_t bytes);

void part_rounds(const PartArgs& a, const std::vector<sim::Scenario>& scs, Report& r);
void part_loss(const PartArgs& a, const std::vector<sim::Scenario>& scs, Report& r);
void part_idle_multipath(const PartArgs& a, const std::vector<sim::Scenario>& scs, Report& r);
void part_fluctuation(const PartArgs& a, const std::vector<sim::Scenario>& scs, Report& r);
void part_selmcast(const std::vector<sim::Scenario>& scs, Report& r);
void part_long_haul(const PartArgs& a, Report& r);
void part_speed(const PartArgs& a, Report& r);
void part_testbed(const PartArgs& a, const std::vector<sim::Scenario>& scs, Report& r);

}  // namespace sg::simbench
