// ltpgen: writes pcap files of the LTP traffic a gateway receives in a round, as its peers
// would send it: for the gateway a config describes, every DATA chunk its children send up
// and its parents send down in the job's first plan (the plan every gateway starts with:
// lib/controller), with the addresses, ports, job, round, policy version, shard, chunk counts
// and contributor counts the gateway accepts. For pktgen (-s PORT:file.pcap), dpdk-testpmd on
// a net_pcap port (perf/bench replay) and Wireshark (tools/wireshark).
//   ltpgen --config SITE.yaml --out FILE.pcap [--rounds N] [--first-round R] [--all-types]
//          [--peer-mac MAC]
// --all-types adds one ACK, CLOSE, CONTROL, PROBE and REJECT (for dissectors).
// Unless the config says security.mode: plain, every message is sealed as its peer would seal
// it (the config's key file; lane 1, a peer's first engine), so the gateway admits the first
// copy of each -- and drops replays of the capture as replays, as it must.
#include <pcap/pcap.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "config/load.h"
#include "control/security.h"
#include "controller/controller.h"
#include "crypto/peer_sessions.h"
#include "wire/frame.h"
#include "wire/ltp_codec.h"

namespace {

using namespace sg;

struct Args {
  std::string config, out;
  uint32_t rounds = 1, first_round = 1;
  bool all_types = false;
};

class Writer {
 public:
  explicit Writer(const std::string& path) {
    pcap_ = pcap_open_dead(DLT_EN10MB, 65535);
    if (pcap_) dump_ = pcap_dump_open(pcap_, path.c_str());
  }
  ~Writer() {
    if (dump_) pcap_dump_close(dump_);
    if (pcap_) pcap_close(pcap_);
  }
  bool ok() const { return dump_ != nullptr; }
  const char* error() { return pcap_ ? pcap_geterr(pcap_) : "cannot open a pcap handle"; }
  void write(const std::vector<uint8_t>& frame) {
    pcap_pkthdr h{};
    h.ts.tv_sec = static_cast<time_t>(t_us_ / 1000000);
    h.ts.tv_usec = static_cast<suseconds_t>(t_us_ % 1000000);
    h.caplen = h.len = static_cast<bpf_u_int32>(frame.size());
    pcap_dump(reinterpret_cast<u_char*>(dump_), &h, frame.data());
    ++t_us_;  // a microsecond apart: a replay keeps the order
    ++frames_;
  }
  uint64_t frames() const { return frames_; }

 private:
  pcap_t* pcap_ = nullptr;
  pcap_dumper_t* dump_ = nullptr;
  uint64_t t_us_ = 0, frames_ = 0;
};

// Each peer's sealer toward the config's site (empty: plain).
std::vector<std::pair<uint16_t, std::unique_ptr<crypto::Sealer>>> g_sealers;

// The frame a peer sends to our port: Ethernet/IPv4/UDP around an LTP message.
std::vector<uint8_t> frame_from(const config::GatewayConfig& cfg, const config::PeerConfig& peer,
                                std::span<const uint8_t> plain) {
  std::vector<uint8_t> sealed;
  std::span<const uint8_t> msg = plain;
  for (auto& [id, sealer] : g_sealers) {
    if (id != peer.id || plain.size() < sizeof(wire::LtpCommon)) continue;
    sealed.assign(plain.begin(), plain.end());
    sealed.resize(plain.size() + wire::kAuthTrailerLen);
    sealed[offsetof(wire::LtpCommon, flags)] |= wire::kFlagSealed;
    const auto type = static_cast<wire::MsgType>(plain[offsetof(wire::LtpCommon, type)]);
    if (!sealer->seal(cfg.site.id, sealed, plain.size(), wire::ltp_header_len(type))) return {};
    msg = sealed;
  }
  const config::PortConfig& port = cfg.ports[0];
  wire::UdpFrameSpec spec;
  const config::MacAddr dst = port.mac.value_or(config::MacAddr{{0x02, 0, 0, 0, 0, 0x01}});
  std::copy(dst.bytes.begin(), dst.bytes.end(), spec.eth.dst.begin());
  const config::MacAddr src =
      peer.mac.value_or(config::MacAddr{{0x02, 0, 0, 0, static_cast<uint8_t>(peer.id >> 8), static_cast<uint8_t>(peer.id)}});
  std::copy(src.bytes.begin(), src.bytes.end(), spec.eth.src.begin());
  if (port.vlan) spec.eth.vlan_tci = *port.vlan;
  spec.ip.src = peer.address.host_order;
  spec.ip.dst = port.ipv4.host_order;
  const uint8_t path_id = peer.paths.empty() ? 0 : peer.paths[0].id;
  spec.udp.src_port = static_cast<uint16_t>(cfg.transport.udp_port + 1 + path_id);
  spec.udp.dst_port = cfg.transport.udp_port;
  std::vector<uint8_t> f(wire::udp_frame_headroom(spec) + msg.size());
  std::copy(msg.begin(), msg.end(), f.begin() + static_cast<std::ptrdiff_t>(wire::udp_frame_headroom(spec)));
  if (!wire::finish_udp_frame(f, spec, msg.size())) f.clear();
  return f;
}

int subtree(const topo::ShardTree& t, int v) {
  int n = 1;
  for (size_t c = 0; c < t.parent.size(); ++c)
    if (t.parent[c] == v) n += subtree(t, static_cast<int>(c));
  return n;
}

int usage() {
  std::fprintf(stderr, "usage: ltpgen --config SITE.yaml --out FILE.pcap [--rounds N] [--first-round R] [--all-types]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const bool v = i + 1 < argc;
    if (s == "--config" && v) a.config = argv[++i];
    else if (s == "--out" && v) a.out = argv[++i];
    else if (s == "--rounds" && v) a.rounds = static_cast<uint32_t>(std::max(1, std::atoi(argv[++i])));
    else if (s == "--first-round" && v) a.first_round = static_cast<uint32_t>(std::max(1, std::atoi(argv[++i])));
    else if (s == "--all-types") a.all_types = true;
    else return usage();
  }
  if (a.config.empty() || a.out.empty()) return usage();
  auto loaded = config::load_config_file(a.config);
  if (!loaded.config) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    return 2;
  }
  const config::GatewayConfig& cfg = *loaded.config;
  if (!cfg.job.model_bytes || cfg.peers.empty()) {
    std::fprintf(stderr, "ltpgen: %s: the config has no job (job.model_bytes) or no peers\n", a.config.c_str());
    return 2;
  }
  std::string err;
  const topo::Plan plan = controller::Controller(controller::controller_config(cfg)).initial_plan(&err);
  if (plan.shards.empty()) {
    std::fprintf(stderr, "ltpgen: %s: %s\n", a.config.c_str(), err.c_str());
    return 2;
  }
  if (cfg.security.mode == config::SecurityMode::kAead) {
    crypto::PeerSecurity sec;
    if (!ctl::load_peer_security(cfg, sec, err)) {
      std::fprintf(stderr, "ltpgen: %s\n", err.c_str());
      return 2;
    }
    for (const auto& p : cfg.peers) {
      crypto::PeerSecurity as_peer = sec;
      as_peer.self = p.id;
      as_peer.peers = {cfg.site.id};
      g_sealers.emplace_back(p.id, std::make_unique<crypto::Sealer>(as_peer, ctl::engine_lane(0)));
    }
  }
  const auto sites = controller::job_sites(cfg);
  int self = 0;
  for (size_t i = 0; i < sites.size(); ++i)
    if (sites[i] == cfg.site.id) self = static_cast<int>(i);
  Writer w(a.out);
  if (!w.ok()) {
    std::fprintf(stderr, "ltpgen: %s: %s\n", a.out.c_str(), w.error());
    return 1;
  }
  const uint32_t chunk = cfg.transport.chunk_bytes;
  std::vector<uint8_t> payload(chunk), msg(sizeof(wire::DataHeader) + chunk);
  for (uint32_t k = 0; k < chunk / 4; ++k) {
    const float v = 0.001f * static_cast<float>(k % 1000);
    std::memcpy(payload.data() + 4 * k, &v, 4);
  }
  for (uint32_t r = a.first_round; r < a.first_round + a.rounds; ++r) {
    for (size_t s = 0; s < plan.shards.size(); ++s) {
      const topo::ShardTree& t = plan.shards[s];
      const uint32_t chunks = static_cast<uint32_t>((t.bytes() + chunk - 1) / chunk);
      // Up from every child of ours; down from our parent (the shard's mean, every site in it).
      std::vector<std::pair<int, uint16_t>> senders;
      for (size_t c = 0; c < t.parent.size(); ++c)
        if (t.parent[c] == self) senders.push_back({static_cast<int>(c), static_cast<uint16_t>(subtree(t, static_cast<int>(c)))});
      if (t.parent[self] != topo::kNoSite) senders.push_back({t.parent[self], static_cast<uint16_t>(sites.size())});
      for (auto [from, contributors] : senders) {
        const config::PeerConfig* peer = cfg.find_peer(sites[from]);
        if (!peer) continue;
        for (uint32_t c = 0; c < chunks; ++c) {
          wire::DataFields f;
          f.src_node = sites[from];
          f.job = cfg.job.id;
          f.round = r;
          f.policy_version = 1;
          f.shard = static_cast<uint16_t>(s);
          f.chunk_index = c;
          f.chunk_count = chunks;
          f.contributors = contributors;
          f.send_ts = 1000u * c + 1;
          const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(chunk, t.bytes() - uint64_t{c} * chunk));
          auto n = wire::build_data(msg, f, std::span<const uint8_t>(payload).first(len));
          if (n) w.write(frame_from(cfg, *peer, std::span<const uint8_t>(msg).first(*n)));
        }
      }
    }
  }
  if (a.all_types) {
    const config::PeerConfig& peer = cfg.peers[0];
    std::vector<uint8_t> m(2048);
    wire::AckFields ack;
    ack.src_node = peer.id;
    ack.job = cfg.job.id;
    ack.round = a.first_round;
    ack.policy_version = 1;
    ack.cum_ack = 3;
    ack.received = 5;
    ack.sack_base = 3;
    const uint8_t sack[2] = {0x05, 0x00};
    if (auto n = wire::build_ack(m, ack, sack)) w.write(frame_from(cfg, peer, std::span<const uint8_t>(m).first(*n)));
    wire::CloseFields cl;
    cl.src_node = peer.id;
    cl.job = cfg.job.id;
    cl.round = a.first_round;
    cl.policy_version = 1;
    cl.reason = wire::CloseReason::kEarlyClose;
    cl.chunk_count = 16;
    cl.kept_count = 15;
    const uint8_t bitmap[2] = {0xff, 0x7f};
    if (auto n = wire::build_close(m, cl, bitmap)) w.write(frame_from(cfg, peer, std::span<const uint8_t>(m).first(*n)));
    wire::ControlFields ct;
    ct.src_node = peer.id;
    ct.job = cfg.job.id;
    ct.channel = 1;
    ct.seq = 1;
    const uint8_t body[4] = {'S', 'P', 1, 0};
    if (auto n = wire::build_control(m, ct, body)) w.write(frame_from(cfg, peer, std::span<const uint8_t>(m).first(*n)));
    wire::ProbeFields pr;
    pr.src_node = peer.id;
    pr.job = cfg.job.id;
    pr.train = 7;
    pr.seq = 0;
    pr.count = 8;
    pr.dst_node = cfg.site.id;
    if (auto n = wire::build_probe(m, pr, 64)) w.write(frame_from(cfg, peer, std::span<const uint8_t>(m).first(*n)));
    wire::RejectFields rj;
    rj.src_node = peer.id;
    rj.job = cfg.job.id;
    rj.offending_version = 9;
    if (auto n = wire::build_reject(m, rj)) w.write(frame_from(cfg, peer, std::span<const uint8_t>(m).first(*n)));
  }
  std::printf("%s: %llu frames for site %u (%s) of job %u, rounds %u..%u\n", a.out.c_str(),
              static_cast<unsigned long long>(w.frames()), cfg.site.id, cfg.site.name.c_str(), cfg.job.id, a.first_round,
              a.first_round + a.rounds - 1);
  return 0;
}
