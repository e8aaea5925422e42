#include "sim/scenario.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "common/rng.h"
#include "config/yaml_strict.h"

namespace sg::sim {

namespace {

using config::ErrorList;
using config::MapReader;

constexpr double kMbps = 1e6 / 8;  // bytes/s per Mbit/s

struct Defaults {
  double queue_ms = 50;
  double loss = 0;
};

Nanos seconds(double s) { return static_cast<Nanos>(std::llround(s * 1e9)); }

void read_trace(const YAML::Node& n, const std::string& path, ErrorList& errs, TraceSpec& t) {
  MapReader r(n, path, errs);
  if (!r.ok()) return;
  const int kind = r.choice("kind", {"constant", "steps", "periodic", "walk"});
  if (kind < 0) {
    if (!r.has("kind")) r.require("kind", "one of constant, steps, periodic, walk");
    return;
  }
  t.kind = static_cast<TraceSpec::Kind>(kind);
  if (t.kind == TraceSpec::Kind::kSteps) {
    r.require("steps", "a list of {at_s, factor}");
    config::for_each_item(r.child("steps"), r.path_of("steps"), errs, [&](const YAML::Node& s, const std::string& p) {
      MapReader sr(s, p, errs);
      double at = 0, f = 1;
      sr.number("at_s", 0, 1e6, at, true);
      sr.number("factor", 0.001, 100, f, true);
      t.steps.push_back({seconds(at), f});
    });
  } else if (t.kind == TraceSpec::Kind::kPeriodic) {
    double period = 0, dip = 0, phase = 0;
    r.number("period_s", 0.001, 1e6, period, true);
    r.number("dip_s", 0.001, 1e6, dip, true);
    r.number("phase_s", 0, 1e6, phase);
    r.number("dip_factor", 0.001, 100, t.dip_factor, true);
    t.period = seconds(period);
    t.dip_length = seconds(dip);
    t.phase = seconds(phase);
    if (dip >= period) errs.add_at(path + ".dip_s", "less than period_s", std::to_string(dip));
  } else if (t.kind == TraceSpec::Kind::kWalk) {
    double interval = 0;
    r.number("interval_s", 0.001, 1e6, interval, true);
    t.interval = seconds(interval);
    r.number("sigma", 0, 10, t.sigma, true);
    r.number("min", 0.001, 100, t.lo, true);
    r.number("max", 0.001, 100, t.hi, true);
    r.number("start", 0.001, 100, t.start);
    r.integer("seed", 0, INT64_MAX, t.seed);
    if (t.lo > t.hi) errs.add_at(path + ".min", "min <= max", std::to_string(t.lo));
  }
}

void read_ge(const YAML::Node& n, const std::string& path, ErrorList& errs, GilbertElliott& g) {
  MapReader r(n, path, errs);
  if (!r.ok()) return;
  g.enabled = true;
  r.number("p_good_bad", 0, 1, g.p_good_to_bad, true);
  r.number("p_bad_good", 0, 1, g.p_bad_to_good, true);
  r.number("loss_good", 0, 1, g.loss_good);
  r.number("loss_bad", 0, 1, g.loss_bad, true);
}

double haversine_km(double lat1, double lon1, double lat2, double lon2) {
  const double rad = M_PI / 180;
  const double dlat = (lat2 - lat1) * rad, dlon = (lon2 - lon1) * rad;
  const double a = std::sin(dlat / 2) * std::sin(dlat / 2) +
                   std::cos(lat1 * rad) * std::cos(lat2 * rad) * std::sin(dlon / 2) * std::sin(dlon / 2);
  return 6371.0 * 2 * std::atan2(std::sqrt(a), std::sqrt(1 - a));
}

struct SiteRow {
  double lat = 0, lon = 0, tier_mbps = 10000;
};

}  // namespace

ScenarioResult parse_scenario(const std::string& text, const std::string& source) {
  ScenarioResult out;
  ErrorList errs(source);
  auto finish = [&]() {
    for (const auto& e : errs.list()) out.errors.push_back(e.to_string());
    if (!out.errors.empty()) out.scenario.reset();
    return out;
  };
  if (!config::scan_duplicate_keys(text, errs)) return finish();
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    errs.add(e.mark.line, e.mark.column, "", "well-formed YAML", e.msg);
    return finish();
  }
  if (!root.IsMap()) {
    errs.add(root.Mark().line, root.Mark().column, "", "a mapping with name, sites, links", config::describe(root));
    return finish();
  }
  Scenario sc;
  sc.source = source;
  Defaults def;
  std::vector<SiteRow> rows;
  std::map<std::string, int> index;
  std::vector<uint8_t> listed;
  {
    MapReader top(root, "", errs);
    top.string("name", sc.name, true, 63);
    top.integer("seed", 0, INT64_MAX, sc.seed);
    top.number("compute_ms", 0, 1e7, sc.compute_ms);
    {
      MapReader d(top.child("defaults"), "defaults", errs);
      d.number("queue_ms", 0.1, 10000, def.queue_ms);
      d.number("loss", 0, 0.5, def.loss);
    }
    top.require("sites", "a list of at least two sites");
    config::for_each_item(top.child("sites"), "sites", errs, [&](const YAML::Node& n, const std::string& p) {
      MapReader r(n, p, errs);
      if (!r.ok()) return;
      SiteSpec s;
      SiteRow row;
      double eg = 0, in = 0;
      r.string("name", s.name, true, 63);
      r.number("lat", -90, 90, row.lat);
      r.number("lon", -180, 180, row.lon);
      r.number("tier_mbps", 1, 1e6, row.tier_mbps);
      r.number("egress_mbps", 0, 1e6, eg);
      r.number("ingress_mbps", 0, 1e6, in);
      s.egress_bytes_per_s = eg * kMbps;
      s.ingress_bytes_per_s = in * kMbps;
      if (index.count(s.name)) errs.add_at(p + ".name", "a unique site name", "'" + s.name + "' again");
      index[s.name] = static_cast<int>(sc.wan.sites.size());
      sc.wan.sites.push_back(s);
      rows.push_back(row);
    });
    const int n = static_cast<int>(sc.wan.sites.size());
    if (n > 0 && n < 2) errs.add_at("sites", "at least two sites", std::to_string(n));
    if (n > topo::kMaxSites) errs.add_at("sites", "at most 1024 sites", std::to_string(n));
    sc.wan.links.assign(static_cast<size_t>(n) * n, LinkSpec{});
    for (auto& l : sc.wan.links) l.bytes_per_s = 0;
    listed.assign(static_cast<size_t>(n) * n, 0);
    auto site_of = [&](MapReader& r, const std::string& key) {
      std::string name;
      r.string(key, name, true, 63);
      auto it = index.find(name);
      if (it == index.end()) {
        if (!name.empty()) errs.add_at(r.path_of(key), "a site name from 'sites'", "'" + name + "'");
        return -1;
      }
      return it->second;
    };
    config::for_each_item(top.child("links"), "links", errs, [&](const YAML::Node& nd, const std::string& p) {
      MapReader r(nd, p, errs);
      if (!r.ok()) return;
      const int a = site_of(r, "from"), b = site_of(r, "to");
      double mbps = 0, delay = 0, queue_ms = def.queue_ms;
      bool both = false;
      LinkSpec l;
      l.loss = def.loss;
      r.number("mbps", 0.001, 1e7, mbps, true);
      r.number("delay_ms", 0, 10000, delay, true);
      r.number("queue_ms", 0.1, 10000, queue_ms);
      r.number("loss", 0, 0.5, l.loss);
      r.boolean("both_ways", both);
      if (r.has("gilbert_elliott")) read_ge(r.child("gilbert_elliott"), r.path_of("gilbert_elliott"), errs, l.ge);
      if (r.has("trace")) read_trace(r.child("trace"), r.path_of("trace"), errs, l.trace);
      if (a < 0 || b < 0) return;
      if (a == b) {
        errs.add_at(p + ".to", "a site other than 'from'", "the same site");
        return;
      }
      l.bytes_per_s = mbps * kMbps;
      l.delay = seconds(delay * 1e-3);
      l.queue_bytes = static_cast<uint64_t>(std::max(64.0 * 1024, l.bytes_per_s * queue_ms * 1e-3));
      for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
        if (x == b && !both) break;
        if (listed[static_cast<size_t>(x) * n + y]) {
          errs.add_at(p, "one entry per directed link", "a second entry for " + sc.wan.sites[x].name + " -> " + sc.wan.sites[y].name);
          continue;
        }
        listed[static_cast<size_t>(x) * n + y] = 1;
        sc.wan.link(x, y) = l;
      }
    });
    if (top.has("generate")) {
      MapReader g(top.child("generate"), "generate", errs);
      uint64_t gseed = 1;
      double lo = 20, hi = 10000, km_full = 1500, jitter = 0.3;
      g.integer("seed", 0, INT64_MAX, gseed);
      g.number("mbps_min", 0.001, 1e7, lo);
      g.number("mbps_max", 0.001, 1e7, hi);
      g.number("km_full", 1, 1e5, km_full);
      g.number("jitter", 0, 0.9, jitter);
      Rng rng(gseed);
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) {
          if (a == b) continue;
          const double j = 1 + jitter * (2 * rng.uniform() - 1);  // drawn for every pair: stable
          if (listed[static_cast<size_t>(a) * n + b]) continue;
          const double km = haversine_km(rows[a].lat, rows[a].lon, rows[b].lat, rows[b].lon);
          // Fibre runs ~1.5x the great circle at 200 km/ms, plus a few ms of metro.
          const double delay_ms = std::clamp(2.0 + km * 1.5 / 200.0, 5.0, 150.0);
          const double mbps = std::clamp(std::min(rows[a].tier_mbps, rows[b].tier_mbps) *
                                             std::min(1.0, std::sqrt(km_full / std::max(km, 1.0))) * j, lo, hi);
          LinkSpec l;
          l.loss = def.loss;
          l.bytes_per_s = mbps * kMbps;
          l.delay = seconds(delay_ms * 1e-3);
          l.queue_bytes = static_cast<uint64_t>(std::max(64.0 * 1024, l.bytes_per_s * def.queue_ms * 1e-3));
          sc.wan.link(a, b) = l;
          listed[static_cast<size_t>(a) * n + b] = 1;
        }
    }
    config::for_each_item(top.child("fluctuation"), "fluctuation", errs, [&](const YAML::Node& nd, const std::string& p) {
      MapReader r(nd, p, errs);
      if (!r.ok()) return;
      const int a = site_of(r, "from"), b = site_of(r, "to");
      bool both = false;
      r.boolean("both_ways", both);
      TraceSpec t;
      r.require("trace", "a trace");
      if (r.has("trace")) read_trace(r.child("trace"), r.path_of("trace"), errs, t);
      if (a < 0 || b < 0 || a == b) return;
      sc.fluctuation.push_back({a, b, t});
      if (both) sc.fluctuation.push_back({b, a, t});
    });
  }  // readers report unknown keys here
  sc.wan.seed = sc.seed;
  const int n = static_cast<int>(sc.wan.sites.size());
  if (errs.empty()) {
    for (int a = 0; a < n; ++a) {
      bool any = false;
      for (int b = 0; b < n; ++b) any |= a != b && sc.wan.link(a, b).bytes_per_s > 0;
      if (!any) errs.add_at("links", "every site with at least one outgoing link", sc.wan.sites[a].name + " has none");
    }
  }
  if (errs.empty()) out.scenario = std::move(sc);
  return finish();
}

ScenarioResult load_scenario(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ScenarioResult r;
    r.errors.push_back(path + ": cannot open");
    return r;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_scenario(ss.str(), path);
}

topo::Network network_at(const WanSpec& wan, Nanos at, double scale, double agg_Bps) {
  const int n = wan.n();
  topo::Network net = topo::Network::uniform(n, 0, 0, agg_Bps);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const LinkSpec& l = wan.link(a, b);
      double bw = l.bytes_per_s > 0 ? l.bytes_per_s * BandwidthTrace(l.trace).factor_at(at) : 0;
      if (wan.sites[a].egress_bytes_per_s > 0) bw = std::min(bw, wan.sites[a].egress_bytes_per_s);
      if (wan.sites[b].ingress_bytes_per_s > 0) bw = std::min(bw, wan.sites[b].ingress_bytes_per_s);
      net.link_bw(a, b) = bw / scale;
      net.rtt[static_cast<size_t>(a) * n + b] = 2e-9 * static_cast<double>(l.delay);
    }
  // Every link of a site shares its NIC: the planner counts the caps as resources too.
  net.egress.assign(static_cast<size_t>(n), 0.0);
  net.ingress.assign(static_cast<size_t>(n), 0.0);
  for (int a = 0; a < n; ++a) {
    net.egress[a] = wan.sites[a].egress_bytes_per_s / scale;
    net.ingress[a] = wan.sites[a].ingress_bytes_per_s / scale;
  }
  return net;
}

WanSpec with_fluctuation(const Scenario& s) {
  WanSpec w = s.wan;
  for (const auto& f : s.fluctuation) w.link(f.from, f.to).trace = f.trace;
  return w;
}

}  // namespace sg::sim
