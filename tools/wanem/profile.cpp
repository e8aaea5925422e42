#include "profile.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "config/yaml_strict.h"

namespace sg::wanem {
namespace {

using config::MapReader;

Nanos ms(double v) { return static_cast<Nanos>(v * 1e6); }

// The pair keys present in `r` change `s`; absent keys leave it as it was.
void read_pair_keys(MapReader& r, PairSpec& s) {
  // A key present with a valid value changes `s`; an invalid one is an error in r and changes
  // nothing (no conversion of an out-of-range value).
  auto num = [&r](const char* key, double min, double max, auto apply) {
    if (!r.has(key)) return;
    double v = min - 1;
    r.number(key, min, max, v);
    if (v >= min && v <= max) apply(v);
  };
  num("delay_ms", 0, 10000, [&](double v) { s.delay = ms(v); });
  num("jitter_ms", 0, 10000, [&](double v) { s.jitter = ms(v); });
  r.number("loss", 0, 1, s.loss);
  if (r.has("burst")) {
    MapReader b(r.child("burst"), r.path_of("burst"), r.errors());
    s.burst.on = true;
    b.number("p_enter", 0, 1, s.burst.p_enter, true);
    b.number("p_exit", 0, 1, s.burst.p_exit, true);
    b.number("loss_good", 0, 1, s.burst.loss_good);
    b.number("loss_bad", 0, 1, s.burst.loss_bad);
  }
  r.number("reorder", 0, 1, s.reorder);
  num("reorder_ms", 0, 10000, [&](double v) { s.reorder_extra = ms(v); });
  r.number("duplicate", 0, 1, s.duplicate);
  num("rate_mbit", 0, 1e6, [&](double v) { s.rate_bytes_per_s = v * 1e6 / 8; });
  num("queue_kb", 1, 1e7, [&](double v) { s.queue_bytes = static_cast<uint64_t>(v * 1000); });
  if (r.has("blackholes")) {
    s.blackholes.clear();
    config::for_each_item(r.child("blackholes"), r.path_of("blackholes"), r.errors(),
                          [&](const YAML::Node& n, const std::string& p) {
                            MapReader b(n, p, r.errors());
                            double at = 0, len = 0;
                            b.number("at_s", 0, 1e7, at, true);
                            b.number("for_s", 0, 1e7, len, true);
                            s.blackholes.push_back(Blackhole{static_cast<Nanos>(at * 1e9), static_cast<Nanos>(len * 1e9)});
                          });
  }
}

// One entry of a `pairs` list: {from, to, ...} or {between: [a, b], ...} and pair keys.
void read_pair_entry(const YAML::Node& n, const std::string& path, config::ErrorList& errs, int sites,
                     std::vector<PairSpec>& specs) {
  MapReader r(n, path, errs);
  std::vector<std::pair<int, int>> dirs;
  if (r.has("between")) {
    std::vector<int> ends;
    config::for_each_item(r.child("between"), r.path_of("between"), errs, [&](const YAML::Node& e, const std::string& p) {
      int v = 0;
      try {
        v = e.as<int>();
      } catch (...) {
        errs.add(e.Mark().line, e.Mark().column, p, "a site number", config::describe(e));
        return;
      }
      ends.push_back(v);
    });
    if (ends.size() != 2) {
      errs.add(n.Mark().line, n.Mark().column, r.path_of("between"), "two site numbers", std::to_string(ends.size()) + " items");
      return;
    }
    dirs = {{ends[0], ends[1]}, {ends[1], ends[0]}};
  } else {
    int from = 0, to = 0;
    r.integer("from", 1, sites, from, true);
    r.integer("to", 1, sites, to, true);
    if (from == 0 || to == 0) return;  // reported by the reader
    dirs = {{from, to}};
  }
  std::vector<PairSpec*> targets;
  for (auto [a, b] : dirs) {
    if (a < 1 || a > sites || b < 1 || b > sites || a == b) {
      errs.add(n.Mark().line, n.Mark().column, path, "two different sites in 1.." + std::to_string(sites),
               std::to_string(a) + " and " + std::to_string(b));
      return;
    }
    targets.push_back(&specs[static_cast<size_t>(a - 1) * sites + (b - 1)]);
  }
  // The keys go to every direction; problems in them are reported once.
  read_pair_keys(r, *targets[0]);
  for (size_t t = 1; t < targets.size(); ++t) {
    config::ErrorList quiet(errs.file());
    MapReader again(n, path, quiet);
    again.has("from");
    again.has("to");
    again.has("between");
    read_pair_keys(again, *targets[t]);
  }
}

}  // namespace

const std::vector<PairSpec>& Profile::at(Nanos since) const {
  if (phases.empty()) return base;
  Nanos t = since;
  if (repeat > 0) t %= repeat;
  const std::vector<PairSpec>* cur = &base;
  for (const Phase& p : phases)
    if (p.at <= t) cur = &p.specs;
  return *cur;
}

Nanos Profile::min_delay() const {
  Nanos least = -1;
  auto visit = [&](const std::vector<PairSpec>& specs) {
    for (int i = 0; i < sites; ++i)
      for (int j = 0; j < sites; ++j) {
        if (i == j) continue;  // a site's own pair carries nothing
        const PairSpec& s = specs[static_cast<size_t>(i) * sites + j];
        const Nanos d = std::max<Nanos>(0, s.delay - s.jitter);
        if (least < 0 || d < least) least = d;
      }
  };
  visit(base);
  for (const Phase& p : phases) visit(p.specs);
  return std::max<Nanos>(0, least);
}

ProfileResult parse_profile(const std::string& text, const std::string& name) {
  ProfileResult res;
  config::ErrorList errs(name);
  YAML::Node root;
  if (!config::scan_duplicate_keys(text, errs)) {
    res.errors = errs.list();
    return res;
  }
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    errs.add(e.mark.line, e.mark.column, "", "well-formed YAML", e.msg);
    res.errors = errs.list();
    return res;
  }
  Profile& p = res.profile;
  {
    MapReader r(root, "", errs);
    r.integer("sites", 2, 256, p.sites, true);
    r.string("source", p.source, false, 4096);
    if (p.sites >= 2) {
      PairSpec def;
      if (r.has("default")) {
        MapReader d(r.child("default"), "default", errs);
        read_pair_keys(d, def);
      }
      p.base.assign(static_cast<size_t>(p.sites) * p.sites, def);
      config::for_each_item(r.child("pairs"), "pairs", errs, [&](const YAML::Node& n, const std::string& path) {
        read_pair_entry(n, path, errs, p.sites, p.base);
      });
      if (r.has("schedule")) {
        MapReader s(r.child("schedule"), "schedule", errs);
        double rep = 0;
        s.number("repeat_s", 0, 1e7, rep);
        p.repeat = static_cast<Nanos>(rep * 1e9);
        config::for_each_item(s.child("phases"), "schedule.phases", errs, [&](const YAML::Node& n, const std::string& path) {
          MapReader ph(n, path, errs);
          double at = 0;
          ph.number("at_s", 0, 1e7, at, true);
          Phase phase;
          phase.at = static_cast<Nanos>(at * 1e9);
          phase.specs = p.base;
          config::for_each_item(ph.child("pairs"), ph.path_of("pairs"), errs,
                                [&](const YAML::Node& pn, const std::string& pp) {
                                  read_pair_entry(pn, pp, errs, p.sites, phase.specs);
                                });
          p.phases.push_back(std::move(phase));
        });
        std::stable_sort(p.phases.begin(), p.phases.end(), [](const Phase& a, const Phase& b) { return a.at < b.at; });
        if (p.repeat > 0 && !p.phases.empty() && p.phases.back().at >= p.repeat)
          errs.add_at("schedule.repeat_s", "longer than the last phase's at_s", std::to_string(rep));
      }
    }
  }
  res.errors = errs.list();
  return res;
}

ProfileResult load_profile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ProfileResult r;
    config::ConfigError e;
    e.file = path;
    e.expected = "a readable WAN profile";
    e.found = "cannot open the file";
    r.errors.push_back(e);
    return r;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_profile(ss.str(), path);
}

}  // namespace sg::wanem
