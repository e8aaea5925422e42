// dataplane benchmark, both ends of a net_memif pair:
//   gen  (memif server): blasts LTP DATA frames of one job — one transfer per round of
//        `chunks` chunks, rounds one after another — and frees whatever comes back (ACKs).
//   sink (memif client): one engine doing what a gateway does per DATA packet: validate
//        Ethernet/IPv4/UDP, run the LTP receiver (duplicate and round checks, SACK state),
//        add the payload into an accumulator straight from the mbuf (SIMD), send ACKs.
// Each prints one packets-per-second figure per 1-second window; perf/run/dataplane runs the
// sink against dpdk-testpmd (rxonly) fed by the same generator, alternating.
//   bench_dp_rx [EAL args] -- gen|sink SECONDS FRAME_BYTES
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "aggregate/accumulator.h"
#include "config/config.h"
#include "dataplane/engine.h"
#include "dataplane/ports.h"
#include "ltp/receiver.h"
#include "wire/frame.h"
#include "wire/ltp_codec.h"

namespace {

using namespace sg;

constexpr uint32_t kChunks = 4096;  // chunks per round (transfer)
constexpr uint16_t kLtpPort = 7400;

wire::UdpFrameSpec frame_spec() {
  wire::UdpFrameSpec s;
  s.eth.dst = {0x02, 0, 0, 0, 0, 0x02};
  s.eth.src = {0x02, 0, 0, 0, 0, 0x01};
  s.ip.src = 0x0a000001;
  s.ip.dst = 0x0a000002;
  s.udp = wire::UdpSpec{7401, kLtpPort, wire::L4Checksum::kNone};  // zero UDP checksum: the generator stays fast
  return s;
}

// The gateway's per-packet work, minus routing: receiver + in-place aggregation + ACKs.
class SinkHandler final : public dp::PacketHandler, ltp::ReceiverSink, ltp::PacketSink {
 public:
  SinkHandler(uint32_t payload)
      : rx_(cfg()), acc_(static_cast<size_t>(kChunks) * (payload / 4), payload / 4) {}
  void on_rx_st(dp::EngineIo& io, uint16_t port, rte_mbuf** pkts, uint16_t n, uint64_t tsc) override {
    io_ = &io;
    port_ = port;
    const Nanos now = static_cast<Nanos>(tsc * ns_per_tsc_);
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* m = pkts[i];
      std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
      auto f = wire::parse_udp_frame(frame);
      if (f && f->udp.dst_port == kLtpPort) {
        auto msg = wire::frame_payload(frame, *f);
        auto d = wire::parse_data(msg);
        if (d && d->f.round != round_) {
          // A new round: what a gateway does at a round boundary.
          round_ = d->f.round;
          acc_.reset();
          rx_.begin_round(1, round_, 0, now, *this, *this);
        }
        rx_.on_packet(msg, now, *this, *this);
        ++good;
      } else {
        ++bad;
      }
      rte_pktmbuf_free(m);
    }
  }
  unsigned on_poll_st(dp::EngineIo& io, uint64_t tsc) override {
    io_ = &io;
    rx_.poll(static_cast<Nanos>(tsc * ns_per_tsc_), *this, *this);
    return 0;
  }
  uint64_t good = 0, bad = 0, acks = 0, chunks = 0;

 private:
  static ltp::ReceiverConfig cfg() {
    ltp::ReceiverConfig c;
    c.local_node = 2;
    c.max_chunks = kChunks;
    c.early_close.enabled = false;
    return c;
  }
  void on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) override {
    if (acc_.add(c.chunk_index % acc_.chunk_count(), payload, 1) == agg::AggError::kOk) ++chunks;
  }
  void on_bubble(const ltp::ChunkRef&, ltp::FillRule) override {}
  void on_transfer_end(const ltp::TransferSummary&) override {}
  void send(const ltp::TxMeta& /*meta*/, std::span<const uint8_t> head, std::span<const uint8_t> payload) override {
    rte_mbuf* m = rte_pktmbuf_alloc(io_->pool());
    if (!m) return;
    wire::UdpFrameSpec s = frame_spec();
    std::swap(s.eth.dst, s.eth.src);
    std::swap(s.ip.src, s.ip.dst);
    s.udp = wire::UdpSpec{kLtpPort, 7401, wire::L4Checksum::kSoftware};
    const size_t hr = wire::udp_frame_headroom(s);
    const size_t len = head.size() + payload.size();
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(hr + len)));
    std::memcpy(p + hr, head.data(), head.size());
    if (!payload.empty()) std::memcpy(p + hr + head.size(), payload.data(), payload.size());
    wire::finish_udp_frame(std::span<uint8_t>(p, hr + len), s, len);
    ++acks;
    io_->tx_st(port_, m);
  }

  ltp::Receiver rx_;
  agg::Accumulator acc_;
  dp::EngineIo* io_ = nullptr;
  uint16_t port_ = 0;
  uint32_t round_ = 0;
  double ns_per_tsc_ = 1e9 / static_cast<double>(rte_get_tsc_hz());
};

int run_gen(const std::vector<dp::Port>& ports, rte_mempool* pool, int seconds, uint32_t payload) {
  // Every frame of a round is built once; sending bumps the reference count so the same
  // mbuf goes out round after round (memif copies it into shared memory on TX), and only the
  // round field is rewritten. The generator then costs little next to the receiver under test.
  const wire::UdpFrameSpec spec = frame_spec();
  const size_t hr = wire::udp_frame_headroom(spec);
  const size_t msg = wire::data_msg_len(static_cast<uint16_t>(payload));
  std::vector<uint8_t> values(payload, 0);
  for (size_t i = 0; i < payload / 4; ++i) {
    float v = 0.001f * static_cast<float>(i);
    std::memcpy(values.data() + 4 * i, &v, 4);
  }
  wire::DataFields f;
  f.src_node = 1;
  f.job = 1;
  f.round = 1;
  f.chunk_count = kChunks;
  std::vector<rte_mbuf*> frames(kChunks);
  for (uint32_t c = 0; c < kChunks; ++c) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (!m) return 1;
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(hr + msg)));
    f.chunk_index = c;
    wire::build_data_header(std::span<uint8_t>(p + hr, msg), f, static_cast<uint16_t>(payload));
    std::memcpy(p + hr + sizeof(wire::DataHeader), values.data(), payload);
    wire::finish_udp_frame(std::span<uint8_t>(p, hr + msg), spec, msg);
    frames[c] = m;
  }
  const size_t round_off = hr + offsetof(wire::DataHeader, round);
  uint64_t sent = 0;
  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t end = rte_rdtsc() + hz * static_cast<uint64_t>(seconds);
  uint64_t next_report = rte_rdtsc() + hz, last_sent = 0;
  rte_mbuf* back[64];
  uint32_t chunk = 0, round = 1;
  while (rte_rdtsc() < end) {
    const uint16_t nb = rte_eth_rx_burst(ports[0].id, 0, back, 64);
    if (nb) rte_pktmbuf_free_bulk(back, nb);
    rte_mbuf* burst[32];
    for (int i = 0; i < 32; ++i) {
      rte_mbuf* m = frames[chunk];
      sg::be32 r(round);
      std::memcpy(rte_pktmbuf_mtod_offset(m, uint8_t*, round_off), &r, 4);
      rte_mbuf_refcnt_update(m, 1);
      burst[i] = m;
      if (++chunk == kChunks) {
        chunk = 0;
        ++round;
      }
    }
    const uint16_t done = rte_eth_tx_burst(ports[0].id, 0, burst, 32);
    for (uint16_t i = done; i < 32; ++i) rte_mbuf_refcnt_update(burst[i], -1);
    // Unsent frames are retried in order: step back to the first of them.
    const uint32_t back_off = 32 - done;
    for (uint32_t i = 0; i < back_off; ++i) {
      if (chunk == 0) {
        chunk = kChunks;
        --round;
      }
      --chunk;
    }
    sent += done;
    if (rte_rdtsc() >= next_report) {
      std::printf("gen_window_mpps %.3f\n", (sent - last_sent) / 1e6);
      std::fflush(stdout);
      last_sent = sent;
      next_report += hz;
    }
  }
  for (auto* m : frames) rte_pktmbuf_free(m);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int used = rte_eal_init(argc, argv);
  if (used < 0 || argc < used + 4) {
    std::fprintf(stderr, "usage: bench_dp_rx [EAL args] -- gen|sink SECONDS FRAME_BYTES\n");
    return 2;
  }
  const std::string role = argv[used + 1];
  const int seconds = std::atoi(argv[used + 2]);
  const uint32_t frame = static_cast<uint32_t>(std::atoi(argv[used + 3]));
  // Frame = 14 Ethernet + 28 IPv4/UDP + 56 LTP header + payload; payload a multiple of 4.
  const uint32_t payload = (frame - 14 - 28 - sizeof(wire::DataHeader)) / 4 * 4;

  config::GatewayConfig cfg;
  config::PortConfig pc;
  pc.name = "memif";
  pc.vdev = std::string("net_memif0,role=") + (role == "gen" ? "server" : "client") +
            ",id=0,socket=/run/sg-bench-dp.sock,bsize=" + (frame > 2000 ? "10240" : "2048");
  pc.ipv4.host_order = 1;
  cfg.ports.push_back(pc);
  rte_mempool* pool = dp::create_pool("bench_dp", 16383, 256, frame > 2000 ? 10240 + 128 : RTE_MBUF_DEFAULT_BUF_SIZE);
  std::vector<dp::Port> ports;
  if (!pool || !dp::setup_ports(cfg, 1, pool, ports)) return 1;
  int rc = 0;
  if (role == "gen") {
    rc = run_gen(ports, pool, seconds, payload);
  } else {
    SinkHandler sink(payload);
    dp::EngineParams ep;
    ep.burst = 32;
    dp::Engine engine(ports, pool, sink, ep);
    std::atomic<bool> stop{false};
    dp::Engine::LaunchArgs la{&engine, &stop};
    const unsigned worker = rte_get_next_lcore(-1, 1, 0);
    rte_eal_remote_launch(dp::Engine::launch, &la, worker);
    uint64_t before = 0;
    for (int s = 0; s < seconds; ++s) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      const uint64_t now = engine.counters().rx_packets.get();
      std::printf("sink_window_mpps %.3f\n", (now - before) / 1e6);
      std::fflush(stdout);
      before = now;
    }
    stop.store(true);
    rte_eal_wait_lcore(worker);
    std::printf("sink_good %llu bad %llu chunks %llu acks %llu\n", (unsigned long long)sink.good,
                (unsigned long long)sink.bad, (unsigned long long)sink.chunks, (unsigned long long)sink.acks);
  }
  dp::drain_rx(ports);
  dp::teardown_ports(ports);
  rte_eal_cleanup();
  return rc;
}
