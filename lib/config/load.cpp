// The schema: which keys each section takes, their types and ranges. config/README.md documents
// the same keys; config_test.cpp checks that every example there loads.
#include "config/load.h"

#include "wire/ltp_header.h"

#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "config/yaml_strict.h"

namespace sg::config {
namespace {

constexpr int64_t kU16 = 65535;
constexpr size_t kMaxConfigBytes = 1 << 20;

void read_site(MapReader& top, GatewayConfig& cfg) {
  if (!top.has("site")) {
    top.require("site", "a 'site' section with id and name");
    return;
  }
  MapReader r(top.child("site"), "site", top.errors());
  r.integer("id", 1, wire::kMaxSiteId, cfg.site.id, true);
  r.string("name", cfg.site.name, true, 63);
  r.number("uplink_mbit", 0.0, 1e7, cfg.site.uplink_mbit);
}

// DOMAIN:BUS:DEVICE.FUNCTION in hex (domain optional), as DPDK's PCI bus parses it.
bool pci_address(const std::string& s) {
  auto hex = [&](size_t at, size_t n) {
    if (at + n > s.size()) return false;
    for (size_t i = at; i < at + n; ++i)
      if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
    return true;
  };
  const size_t b = s.size() == 12 ? 5 : 0;  // after "DDDD:"
  if (!(s.size() == 12 || s.size() == 7) || (b && (!hex(0, 4) || s[4] != ':'))) return false;
  return hex(b, 2) && s[b + 2] == ':' && hex(b + 3, 2) && s[b + 5] == '.' && s[b + 6] >= '0' && s[b + 6] <= '7';
}

void read_port(const YAML::Node& n, const std::string& path, ErrorList& errs, GatewayConfig& cfg) {
  MapReader r(n, path, errs);
  if (!r.ok()) return;
  PortConfig p;
  r.string("name", p.name, true, 31);
  r.string("vdev", p.vdev, false, 1023);
  r.string("pci", p.pci, false, 63);
  r.string("devargs", p.devargs, false, 1023);
  if (!p.pci.empty() && !pci_address(p.pci))
    errs.add_at(path + ".pci", "a PCI address like 0000:3b:00.0 (or 3b:00.0)", "'" + p.pci + "'");
  if (p.vdev.empty() == p.pci.empty()) {
    errs.add(n.Mark().line, n.Mark().column, path, "exactly one of 'vdev' or 'pci'",
             p.vdev.empty() ? "neither" : "both");
  }
  if (!p.vdev.empty() && r.has("devargs")) {
    errs.add_at(path + ".devargs", "devargs only with 'pci' (put virtual device arguments in 'vdev')",
                "'" + p.devargs + "'");
  }
  r.integer("rx_queues", 1, 64, p.rx_queues);
  r.integer("tx_queues", 1, 64, p.tx_queues);
  r.integer("rx_desc", 64, 16384, p.rx_desc);
  r.integer("tx_desc", 64, 16384, p.tx_desc);
  r.integer("mtu", 576, 9600, p.mtu);
  r.mac("mac", p.mac);
  r.ipv4("ipv4", p.ipv4, true);
  r.integer("prefix_len", 1, 32, p.prefix_len);
  r.ipv4_opt("gateway", p.gateway);
  r.integer_opt("vlan", 1, 4094, p.vlan);
  cfg.ports.push_back(std::move(p));
}

void read_path(const YAML::Node& n, const std::string& path, ErrorList& errs, PeerConfig& peer) {
  MapReader r(n, path, errs);
  if (!r.ok()) return;
  PathConfig p;
  r.integer("id", 0, wire::kPathSlots - 1, p.id, true);  // a DATA header names this many per peer
  r.string("port", p.port, true, 31);
  r.integer_opt("via", 1, wire::kMaxSiteId, p.via);
  r.integer_opt("udp_src_port", 1, kU16, p.udp_src_port);
  peer.paths.push_back(std::move(p));
}

void read_peer(const YAML::Node& n, const std::string& path, ErrorList& errs, GatewayConfig& cfg) {
  MapReader r(n, path, errs);
  if (!r.ok()) return;
  PeerConfig p;
  r.integer("id", 1, wire::kMaxSiteId, p.id, true);
  r.string("name", p.name, true, 63);
  r.ipv4("address", p.address, true);
  r.integer("udp_port", 1, kU16, p.udp_port);
  r.mac("mac", p.mac);
  r.number("uplink_mbit", 0.0, 1e7, p.uplink_mbit);
  for_each_item(
      r.child("paths"), r.path_of("paths"), errs,
      [&](const YAML::Node& item, const std::string& ip) { read_path(item, ip, errs, p); },
      "at least one path (or no paths key: the direct path out of the first port)");
  cfg.peers.push_back(std::move(p));
}

void read_transport(MapReader& top, GatewayConfig& cfg) {
  MapReader r(top.child("transport"), "transport", top.errors());
  TransportConfig& t = cfg.transport;
  r.integer("udp_port", 1, kU16, t.udp_port);
  r.integer("chunk_bytes", 64, 9000, t.chunk_bytes);
  r.integer("max_transfers", 1, 65536, t.max_transfers);
  r.integer("max_chunks_per_transfer", 1, 1 << 24, t.max_chunks_per_transfer);
  r.number("max_loss_fraction", 0.0, 0.5, t.max_loss_fraction);
  int b = r.choice("bubble_fill", {"zero", "previous", "local"});
  if (b >= 0) t.bubble_fill = static_cast<BubbleFill>(b);
  int rc = r.choice("rate_controller", {"ltp", "aimd"});
  if (rc >= 0) t.rate_controller = static_cast<RateController>(rc);
  r.integer("initial_rate_mbit", 1, 400000, t.initial_rate_mbit);
  r.integer("lan_window_kb", 16, 65536, t.lan_window_kb);
  r.integer("early_hold_packets", 0, 262144, t.early_hold_packets);
  int ls = r.choice("link_share", {"auto", "on", "off"});
  if (ls >= 0) t.link_share = static_cast<LinkShareMode>(ls);
  MapReader ec(r.child("early_close"), r.path_of("early_close"), top.errors());
  ec.boolean("enabled", t.early_close.enabled);
  ec.number("min_fraction", 0.5, 1.0, t.early_close.min_fraction);
  ec.number("quiet_rtts", 0.5, 100.0, t.early_close.quiet_rtts);
  ec.boolean("down", t.early_close.down);
}

void read_topology(MapReader& top, GatewayConfig& cfg) {
  MapReader r(top.child("topology"), "topology", top.errors());
  TopologyConfig& t = cfg.topology;
  // Ring all-reduce is not a tree: the simulator's baseline, never a gateway's planner.
  int p = r.choice("planner", {"fapt", "star", "blind_tree", "netstorm_rule"});
  if (p >= 0) t.planner = static_cast<Planner>(p);
  r.integer("shards", 1, 256, t.shards);
  r.boolean("multipath", t.multipath);
  r.number("recompute_change", 0.0, 10.0, t.recompute_change);
  r.integer("min_interval_ms", 10, 3600000, t.min_interval_ms);
  r.boolean("probes", t.probes);
  r.integer("probe_rate_kbit", 1, 1000000, t.probe_rate_kbit);
}

void read_compression(MapReader& top, GatewayConfig& cfg) {
  MapReader r(top.child("compression"), "compression", top.errors());
  CompressionConfig& c = cfg.compression;
  int m = r.choice("mode", {"off", "adaptive", "always"});
  if (m >= 0) c.mode = static_cast<CompressionMode>(m);
  // f32 is not a compression codec: "mode: off" says that.
  int k = r.choice("codec", {"f16", "bf16", "int8", "topk"});
  if (k >= 0) c.codec = static_cast<CodecId>(k + 1);
  r.number("topk_ratio", 0.0001, 1.0, c.topk_ratio);
  r.integer("compute_ms_per_round", 0, 3600000, c.compute_ms_per_round);
}

void read_sync(MapReader& top, GatewayConfig& cfg) {
  MapReader r(top.child("sync"), "sync", top.errors());
  SyncSection& s = cfg.sync;
  int m = r.choice("mode", {"allreduce", "selmcast"});
  if (m >= 0) s.mode = static_cast<SyncMode>(m);
  int c = r.choice("receivers", {"selmcast", "random", "broadcast"});
  if (c >= 0) s.receivers = static_cast<ReceiverChoice>(c);
  r.integer("p", 1, 1023, s.p);
  r.integer("staleness", 0, 16, s.staleness);
}

void read_control(MapReader& top, GatewayConfig& cfg) {
  MapReader r(top.child("control"), "control", top.errors());
  r.integer("interval_ms", 1, 60000, cfg.control.interval_ms);
  r.integer("switch_rounds_ahead", 1, 1000, cfg.control.switch_rounds_ahead);
}

void read_telemetry(MapReader& top, GatewayConfig& cfg) {
  MapReader r(top.child("telemetry"), "telemetry", top.errors());
  r.boolean("enabled", cfg.telemetry.enabled);
  r.integer("stats_interval_ms", 0, 3600000, cfg.telemetry.stats_interval_ms);
  r.boolean("pdump", cfg.telemetry.pdump);
  r.integer("prometheus_port", 0, 65535, cfg.telemetry.prometheus_port);
}

void read_dataplane(MapReader& top, GatewayConfig& cfg) {
  MapReader r(top.child("dataplane"), "dataplane", top.errors());
  DataplaneConfig& d = cfg.dataplane;
  r.integer("burst", 1, 512, d.burst);
  r.integer("mbufs", 0, 16 * 1024 * 1024, d.mbufs);
  r.integer("mbuf_cache", 0, 512, d.mbuf_cache);
  r.integer("idle_sleep_max_us", 1, 1000000, d.idle_sleep_max_us);
  r.integer("spin_polls", 0, 1000000, d.spin_polls);
  r.integer("tx_drain_us", 1, 100000, d.tx_drain_us);
}

void read_admission(MapReader& top, GatewayConfig& cfg) {
  MapReader r(top.child("admission"), "admission", top.errors());
  AdmissionConfig& a = cfg.admission;
  r.boolean("enabled", a.enabled);
  r.integer("max_jobs", 1, static_cast<int64_t>(kMaxJobs), a.max_jobs);
  r.integer("memory_mb", 1, 1 << 20, a.memory_mb);
  r.integer("idle_timeout_s", 0, 7 * 24 * 3600, a.idle_timeout_s);
  r.integer("announce_interval_ms", 10, 10000, a.announce_interval_ms);
  r.string("token_file", a.token_file, false, 4096);
}

void read_job_keys(MapReader& r, JobConfig& j) {
  r.integer("id", 1, 0xffffffffLL, j.id);
  r.integer("model_bytes", 0, int64_t{1} << 36, j.model_bytes);
  r.integer("rounds", 0, 0xffffffffLL, j.rounds);
  r.integer("workers", 0, 4096, j.workers);
  r.integer("round_timeout_ms", 10, 3600000, j.round_timeout_ms);
  r.integer("worker_timeout_ms", 0, 3600000, j.worker_timeout_ms);
  r.integer("worker_chunk_bytes", 0, 9000, j.worker_chunk_bytes);
  r.string("token_file", j.token_file, false, 4096);
}

// `jobs` entries also carry their weight.
void read_listed_job_keys(MapReader& r, JobConfig& j) {
  read_job_keys(r, j);
  r.integer("weight", 1, 16, j.weight);
}

// `job` (one job) or `jobs` (a list of them, each with job's keys); not both.
void read_jobs(MapReader& top, const YAML::Node& root, ErrorList& errs, GatewayConfig& cfg) {
  {
    MapReader r(top.child("job"), "job", errs);
    read_job_keys(r, cfg.job);
  }
  const YAML::Node list = top.child("jobs");
  if (!list.IsDefined() || list.IsNull()) return;
  if (root["job"].IsDefined() && !root["job"].IsNull()) {
    errs.add_at("jobs", "either a job section or a jobs list, not both", "both");
    return;
  }
  cfg.jobs_listed = true;
  for_each_item(
      list, "jobs", errs,
      [&](const YAML::Node& n, const std::string& p) {
        JobConfig j;
        MapReader r(n, p, errs);
        read_listed_job_keys(r, j);
        cfg.jobs.push_back(j);
      },
      "at least one job (or no jobs key)");
  if (!cfg.jobs.empty()) cfg.job = cfg.jobs.front();
}

void read_impairment(MapReader& top, GatewayConfig& cfg) {
  MapReader r(top.child("impairment"), "impairment", top.errors());
  r.number("rx_data_loss", 0.0, 0.9, cfg.impairment.rx_data_loss);
  r.integer("seed", 0, INT64_MAX, cfg.impairment.seed);
}

void read_security(MapReader& top, GatewayConfig& cfg) {
  MapReader r(top.child("security"), "security", top.errors());
  SecurityConfig& s = cfg.security;
  int m = r.choice("mode", {"aead", "plain"});
  if (m >= 0) s.mode = static_cast<SecurityMode>(m);
  r.string("key_file", s.key_file, false, 4096);
  int k = r.choice("suite", {"aes-128-gcm", "chacha20-poly1305"});
  if (k >= 0) s.suite = static_cast<SecuritySuite>(k);
  int p = r.choice("protection", {"encrypt", "auth-only"});
  if (p >= 0) s.protection = static_cast<SecurityProtection>(p);
  r.integer("replay_window", 64, 1048576, s.replay_window);
  r.integer("rekey_after_packets", 1024, 8388608, s.rekey_after_packets);
}

}  // namespace

LoadResult load_config_text(const std::string& text, const std::string& source) {
  ErrorList errs(source);
  LoadResult result;
  // A config is UTF-8 text. Control bytes and malformed UTF-8 are refused before yaml-cpp sees
  // them: it spins for seconds on some such inputs (found by config_fuzz), and no real
  // config has them.
  int line = 0, col = 0;
  for (size_t i = 0; i < text.size(); ++i, ++col) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      col = -1;
      continue;
    }
    char found[48] = "";
    if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
      std::snprintf(found, sizeof found, "the control byte 0x%02x", c);
    } else if (c >= 0x80) {
      // Lead byte, then 1-3 continuation bytes 10xxxxxx.
      const int more = c >= 0xf0 && c <= 0xf4 ? 3 : c >= 0xe0 ? 2 : c >= 0xc2 && c < 0xe0 ? 1 : -1;
      bool ok = more > 0;
      for (int k = 1; ok && k <= more; ++k)
        ok = i + k < text.size() && (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
      if (!ok) std::snprintf(found, sizeof found, "a malformed UTF-8 byte 0x%02x", c);
      else i += static_cast<size_t>(more);
    }
    if (found[0]) {
      errs.add(line, col, "", "a UTF-8 text file", found);
      result.errors = errs.list();
      return result;
    }
  }
  if (text.size() > kMaxConfigBytes) {
    errs.add(-1, -1, "", "a config of at most " + std::to_string(kMaxConfigBytes) + " bytes",
             std::to_string(text.size()) + " bytes");
    result.errors = errs.list();
    return result;
  }
  if (!scan_duplicate_keys(text, errs)) {
    result.errors = errs.list();
    return result;
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    errs.add(e.mark.line, e.mark.column, "", "well-formed YAML", e.msg);
    result.errors = errs.list();
    return result;
  }
  if (!root.IsMap()) {
    errs.add(root.Mark().line, root.Mark().column, "", "a mapping with sections site, ports, peers, ...",
             describe(root));
    result.errors = errs.list();
    return result;
  }

  GatewayConfig cfg;
  cfg.source = source;
  {
    MapReader top(root, "", errs);
    read_site(top, cfg);
    top.require("ports", "a list of at least one port");
    for_each_item(top.child("ports"), "ports", errs,
                  [&](const YAML::Node& n, const std::string& p) { read_port(n, p, errs, cfg); });
    for_each_item(top.child("peers"), "peers", errs,
                  [&](const YAML::Node& n, const std::string& p) { read_peer(n, p, errs, cfg); });
    read_transport(top, cfg);
    read_topology(top, cfg);
    read_compression(top, cfg);
    read_sync(top, cfg);
    read_control(top, cfg);
    read_telemetry(top, cfg);
    read_dataplane(top, cfg);
    read_jobs(top, root, errs, cfg);
    read_admission(top, cfg);
    read_impairment(top, cfg);
    read_security(top, cfg);
  }  // top's destructor reports unknown sections
  if (errs.empty()) {
    // Defaults that depend on other sections: a peer's UDP port is the transport's, and a peer
    // without paths is reached directly out of the first port.
    for (auto& peer : cfg.peers) {
      if (peer.udp_port == 0) peer.udp_port = cfg.transport.udp_port;
      if (peer.paths.empty() && !cfg.ports.empty()) peer.paths.push_back(PathConfig{0, cfg.ports[0].name, {}, {}});
    }
    if (!cfg.jobs_listed && cfg.job.model_bytes) cfg.jobs.push_back(cfg.job);
    validate(cfg, errs);
  }
  result.errors = errs.list();
  if (result.errors.empty()) result.config = std::move(cfg);
  return result;
}

LoadResult load_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    LoadResult r;
    ConfigError e;
    e.file = path;
    e.expected = "a readable config file";
    e.found = "none (cannot open)";
    r.errors.push_back(e);
    return r;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  LoadResult r = load_config_text(ss.str(), path);
  r.text = ss.str();
  // A relative key file lives next to the config that names it, wherever the gateway starts.
  if (r.config) {
    const size_t slash = path.rfind('/');
    auto resolve = [&](std::string& f) {
      if (!f.empty() && f[0] != '/' && slash != std::string::npos) f = path.substr(0, slash + 1) + f;
    };
    resolve(r.config->security.key_file);
    resolve(r.config->job.token_file);
    for (auto& j : r.config->jobs) resolve(j.token_file);
    resolve(r.config->admission.token_file);
  }
  return r;
}

}  // namespace sg::config
