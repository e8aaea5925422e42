// The gateway's configuration model: what one site's stormgate process is told by its YAML
// file. Every key is documented in config/README.md; load.h turns YAML into this, strictly.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/codec_id.h"

namespace sg::config {

struct MacAddr {
  std::array<uint8_t, 6> bytes{};
  bool operator==(const MacAddr&) const = default;
};

struct Ipv4Addr {
  uint32_t host_order = 0;  // 10.0.0.1 == 0x0a000001
  bool operator==(const Ipv4Addr&) const = default;
};

struct SiteConfig {
  uint16_t id = 0;  // unique across the deployment, 1..65535 (0 means "none" on the wire)
  std::string name;
  // The site's WAN uplink (Mbit/s, each direction), shared by all its links; 0: not known.
  // The planner keeps a slow uplink from carrying more than its own gradient.
  double uplink_mbit = 0;
};

// One DPDK port. Exactly one of `vdev` (virtual device arguments, e.g. "net_memif0,role=server")
// or `pci` (a PCI address, e.g. "0000:3b:00.0") names the device; `devargs` adds driver
// arguments to a PCI device (mlx5: "txq_inline_max=0", ...).
struct PortConfig {
  std::string name;
  std::string vdev;
  std::string pci;
  std::string devargs;
  uint16_t rx_queues = 1;
  uint16_t tx_queues = 1;
  uint16_t rx_desc = 1024;
  uint16_t tx_desc = 1024;
  uint16_t mtu = 1500;
  std::optional<MacAddr> mac;  // unset: the device's own address
  Ipv4Addr ipv4;
  uint8_t prefix_len = 24;
  std::optional<Ipv4Addr> gateway;  // next hop for peers outside the subnet
  std::optional<uint16_t> vlan;     // 802.1Q tag on every frame; unset: untagged

  std::string device_string() const { return vdev.empty() ? (devargs.empty() ? pci : pci + "," + devargs) : vdev; }
};

// A way to reach a peer: out of `port`, directly or relayed by another site's gateway.
struct PathConfig {
  uint8_t id = 0;
  std::string port;                 // a PortConfig name
  std::optional<uint16_t> via;      // relay site id; unset: direct
  std::optional<uint16_t> udp_src_port;  // distinct source ports let ECMP in the WAN spread paths
};

struct PeerConfig {
  uint16_t id = 0;
  std::string name;
  Ipv4Addr address;
  uint16_t udp_port = 0;        // 0 in YAML means "transport.udp_port"
  std::optional<MacAddr> mac;   // static neighbour entry; unset: resolved with ARP
  std::vector<PathConfig> paths;
  double uplink_mbit = 0;       // the peer site's uplink (SiteConfig::uplink_mbit); 0: not known
};

enum class BubbleFill : uint8_t { kZero, kPrevious, kLocal };
enum class RateController : uint8_t { kLtp, kAimd };
// transport.link_share: when a gateway's senders toward a peer draw on one congestion state.
enum class LinkShareMode : uint8_t { kAuto, kOn, kOff };

struct EarlyCloseConfig {
  bool enabled = true;
  double min_fraction = 0.95;  // never close before this fraction of chunks has arrived
  double quiet_rtts = 2.0;     // ... and nothing new for this many smoothed RTTs
  bool down = false;           // also on the result's way down the tree (replicas may differ)
};

struct TransportConfig {
  uint16_t udp_port = 7400;
  uint32_t chunk_bytes = 1344;  // gradient payload per DATA packet; must fit the port MTU
  uint32_t max_transfers = 64;  // concurrent transfers per engine; refusals are counted
  uint32_t max_chunks_per_transfer = 1u << 20;
  double max_loss_fraction = 0.05;  // past it a transfer falls back to reliable delivery
  BubbleFill bubble_fill = BubbleFill::kLocal;  // a result chunk that never came down
  RateController rate_controller = RateController::kLtp;
  uint32_t initial_rate_mbit = 100;
  // Results to this site's workers cross the LAN with this many KiB in flight per worker,
  // unpaced (ltp::WindowController): a rate model cannot learn a path of microseconds.
  uint32_t lan_window_kb = 256;
  // DATA of a peer's next round that comes before this site begins it is held, up to this
  // many packets (and one model's worth), and replayed then (sync::SyncConfig).
  uint32_t early_hold_packets = 16384;
  // One congestion state per peer link, drawn on by every sender toward that peer (every
  // shard's transfer of every job: ltp::LinkShare): always (kOn), never (kOff: one job only),
  // or with several jobs or announced ones (kAuto). The AIMD baseline keeps its own always.
  LinkShareMode link_share = LinkShareMode::kAuto;
  EarlyCloseConfig early_close;
};

// How the controller builds every plan (the first and each replan): FAPT, or a baseline
// given the same measurements (a parameter server on the best root, bandwidth-blind binary
// trees, NetStorm's published rule).
enum class Planner : uint8_t { kFapt, kStar, kBlindTree, kNetStormRule };

struct TopologyConfig {
  Planner planner = Planner::kFapt;
  uint16_t shards = 4;
  bool multipath = true;
  double recompute_change = 0.2;  // relative round-time gain that justifies a new policy
  uint32_t min_interval_ms = 1000;
  bool probes = false;            // low-rate active probes on links that carry nothing
  uint32_t probe_rate_kbit = 100;
};

enum class CompressionMode : uint8_t { kOff, kAdaptive, kAlways };

// How the sites synchronise: tree all-reduce (every site ends a round with the same mean), or
// SelMCast's peer-to-peer rounds (each site multicasts its update to chosen receivers and
// mixes what it got into its own result).
enum class SyncMode : uint8_t { kAllreduce, kSelmcast };
enum class ReceiverChoice : uint8_t { kSelmcast, kRandom, kBroadcast };

struct SyncSection {
  SyncMode mode = SyncMode::kAllreduce;
  ReceiverChoice receivers = ReceiverChoice::kSelmcast;  // selmcast mode: how receivers are chosen
  uint32_t p = 2;          // receivers per site at least (random: exactly)
  uint32_t staleness = 0;  // 0: BSP; s: SSP, a site runs at most s rounds ahead of its senders
};

struct CompressionConfig {
  CompressionMode mode = CompressionMode::kAdaptive;
  CodecId codec = CodecId::kTopK;  // what "always" uses, and the strongest "adaptive" may pick
  double topk_ratio = 0.01;
  uint32_t compute_ms_per_round = 0;  // the job's compute time; 0: unknown, assume none
};

struct ControlConfig {
  uint32_t interval_ms = 100;       // measurement/planning tick
  uint32_t switch_rounds_ahead = 2; // a new policy takes effect this many rounds after agreement
};

struct TelemetryConfig {
  bool enabled = true;           // DPDK telemetry socket endpoints /stormgate/*
  uint32_t stats_interval_ms = 1000;  // console counter line; 0: off
  bool pdump = true;             // dpdk-dumpcap can attach
  uint16_t prometheus_port = 0;  // GET /metrics on this TCP port (kernel stack); 0: off
};

// Jobs announced by their workers (lib/jobs/registry.h) beside the YAML's: off unless enabled.
// An announced job takes `job`'s other keys (round_timeout_ms, worker_timeout_ms) from the
// YAML's `job` section when it has no model (a template), else their defaults.
struct AdmissionConfig {
  bool enabled = false;
  uint32_t max_jobs = 8;               // announced jobs at once (with the YAML's at most 16)
  uint32_t memory_mb = 1024;           // gateway memory the announced jobs may hold, by estimate
  uint32_t idle_timeout_s = 300;       // a job with no round and no worker message ends; 0: never
  uint32_t announce_interval_ms = 200; // how often each gateway tells its peers its jobs
  // The deployment's admission secret (a key file, the same at every gateway): an announced
  // job's workers must seal with that job's token, derived from it (stormgate --job-token).
  // Empty: announced jobs' workers are admitted by subnet only.
  std::string token_file;
};

struct DataplaneConfig {
  uint16_t burst = 32;
  uint32_t mbufs = 0;            // 0: sized from ports, queues and descriptors
  uint16_t mbuf_cache = 256;
  uint32_t idle_sleep_max_us = 1000;
  uint32_t spin_polls = 256;  // empty polls before the first idle sleep
  uint32_t tx_drain_us = 100;
};

// The training job whose gradients this gateway synchronises. model_bytes 0: no job (the
// gateway only answers ARP and forwards). workers 0: the gateway makes a synthetic gradient
// each round itself (demo and tests); N: it waits for N local workers' pushes.
struct JobConfig {
  uint32_t id = 1;
  uint64_t model_bytes = 0;
  uint32_t rounds = 0;            // 0: until stopped
  uint32_t workers = 0;
  uint32_t round_timeout_ms = 30000;
  // How long the site waits for a worker's push once the round's first push arrived; then
  // its contribution goes on without the missing workers. 0: half of round_timeout_ms, so a
  // dead worker costs its site this wait, not every site a round timeout.
  uint32_t worker_timeout_ms = 0;
  // Gradient bytes per DATA packet between the workers and this gateway; 0: as
  // transport.chunk_bytes. The LAN usually carries jumbo frames where the WAN does not:
  // 8 KB chunks cut the hand-off's packets six-fold. Workers must use the same value
  // (STORMGATE_CHUNK_BYTES).
  uint32_t worker_chunk_bytes = 0;
  // The job's token (a secret file like security.key_file): when set, the gateway takes a
  // worker's messages only sealed with keys derived from it, and seals what it sends them.
  std::string token_file;
  // Its share of the WAN against the gateway's other jobs (jobs list only): 1..16.
  uint32_t weight = 1;
};

// Stormgate's own impairment layer (this kernel has no netem): received LTP DATA from other
// gateways is dropped with this probability before the transport sees it, seeded, counted.
// For experiments and tests only; 0 in production.
struct ImpairmentConfig {
  double rx_data_loss = 0.0;
  uint64_t seed = 1;
};

// Authentication of the traffic between gateways (lib/crypto): every LTP message to or from
// another site is sealed (AEAD, header as associated data) and replay-checked. Plain mode
// exists for experiments and must be asked for.
enum class SecurityMode : uint8_t { kAead, kPlain };
enum class SecuritySuite : uint8_t { kAes128Gcm, kChaCha20Poly1305 };
enum class SecurityProtection : uint8_t { kEncrypt, kAuthOnly };
struct SecurityConfig {
  SecurityMode mode = SecurityMode::kAead;
  // The deployment's pre-shared secret (crypto::load_secret's format). A relative path is
  // resolved against the config file's directory by the loader. Required unless plain.
  std::string key_file;
  SecuritySuite suite = SecuritySuite::kAes128Gcm;
  SecurityProtection protection = SecurityProtection::kEncrypt;
  uint32_t replay_window = 8192;           // packets per sender lane (multiple of 64)
  uint64_t rekey_after_packets = 1u << 22; // per sender lane; at most 2^23 (RFC 9001)
};

struct GatewayConfig {
  std::string source;  // file the config came from, for messages
  SiteConfig site;
  std::vector<PortConfig> ports;
  std::vector<PeerConfig> peers;
  TransportConfig transport;
  TopologyConfig topology;
  CompressionConfig compression;
  SyncSection sync;
  ControlConfig control;
  TelemetryConfig telemetry;
  DataplaneConfig dataplane;
  JobConfig job;  // the one job (section `job`), or the first of `jobs`
  // Every job this gateway runs: the `jobs` list, or `job` alone when it has a model (empty:
  // no job). Each has its own rounds, plan and state; they share the ports and engines.
  std::vector<JobConfig> jobs;
  bool jobs_listed = false;  // from `jobs` (error paths name jobs[i]), not `job`
  ImpairmentConfig impairment;
  SecurityConfig security;
  AdmissionConfig admission;

  const PortConfig* find_port(const std::string& name) const;
  const PeerConfig* find_peer(uint16_t id) const;
};

// At most this many jobs per gateway (dataplane::GatewayHandler::kMaxJobs).
inline constexpr size_t kMaxJobs = 16;

// The gateway's config as one of its jobs sees it: `job` is that job.
GatewayConfig for_job(const GatewayConfig& c, size_t index);

// Chunk bytes between the workers and this gateway (job.worker_chunk_bytes, or the WAN's).
inline uint32_t worker_chunk_bytes(const GatewayConfig& c) {
  return c.job.worker_chunk_bytes ? c.job.worker_chunk_bytes : c.transport.chunk_bytes;
}

// Several jobs share this gateway's links: more than one in the YAML, or announced ones.
inline bool several_jobs(const GatewayConfig& c) { return c.jobs.size() > 1 || c.admission.enabled; }

// Whether every sender toward a peer, of every job, draws on one congestion state for that
// link (transport.link_share; auto: with several jobs). Never for AIMD.
inline bool links_shared(const GatewayConfig& c) {
  if (c.transport.rate_controller == RateController::kAimd) return false;
  if (c.transport.link_share != LinkShareMode::kAuto) return c.transport.link_share == LinkShareMode::kOn;
  return several_jobs(c);
}

std::string format_mac(const MacAddr& m);
std::string format_ipv4(const Ipv4Addr& a);
std::optional<MacAddr> parse_mac(const std::string& s);
std::optional<Ipv4Addr> parse_ipv4(const std::string& s);

}  // namespace sg::config
