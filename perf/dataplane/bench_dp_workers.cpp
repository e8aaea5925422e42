// The generator of the product-path dataplane benchmark (perf/run/dataplane): W training
// workers of one site, emulated on one lcore behind a net_memif server port, feeding a real
// stormgate gateway (control/stormgate: Engine -> GatewayHandler -> JobRunner -> lib/sync
// LocalGroup + SiteSync -> LtpTx) or, for the reference, dpdk-testpmd forwarding.
//
//   workers  closed loop, what real workers do: every worker pushes its whole gradient for
//            round r (one LTP transfer, chunk by chunk), then the emulator receives the
//            round's result transfer of every worker with lib/ltp's receiver (ACKs and all,
//            payload not copied) and pushes round r+1 once every worker has its result.
//   blast    open loop: the same push frames, worker after worker, round after round, as
//            fast as the port takes them; whatever comes back is freed (testpmd's run).
// Push frames are built once; sending bumps the mbuf's reference count and rewrites only the
// round field (memif copies the frame into shared memory on TX), so the emulator costs little
// per push next to the gateway, which validates, admits, aggregates, ACKs and sends results.
// Figure: pushes sent per 1-second window ("push_window_mpps"): the gateway or testpmd takes
// them losslessly (memif backpressure), so that is the rate each one sustains.
//   bench_dp_workers [EAL args] -- workers|blast SECONDS PAYLOAD_BYTES WORKERS CHUNKS SOCKET
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "dataplane/engine.h"
#include "dataplane/ports.h"
#include "ltp/receiver.h"
#include "sync/local_group.h"
#include "wire/frame.h"
#include "wire/ltp_codec.h"

namespace {

using namespace sg;

// Worker w pushes value(w, i) at float i of the gradient: small multiples of 1/4, so every sum
// and the mean over W workers are exact in float32, and a result missing a worker's share, or
// holding another's twice, is seen.
float push_value(uint32_t w, size_t i) { return 0.25f * static_cast<float>(w + 1) * static_cast<float>(1 + i % 8); }
float mean_value(uint32_t workers, size_t i) {
  return 0.25f * static_cast<float>(1 + i % 8) * static_cast<float>(workers + 1) / 2.0f;
}

// Addresses the generated gateway config uses (perf/run/dataplane): the gateway is 10.0.0.1
// with MAC 02:00:00:00:00:02; workers are 10.0.0.(10 + w) on the same subnet.
constexpr uint32_t kGatewayIp = 0x0a000001;
constexpr uint16_t kLtpPort = 7400;
constexpr uint16_t kGatewayNode = 1;
constexpr uint32_t kJob = 1;

wire::UdpFrameSpec worker_spec(uint32_t w) {
  wire::UdpFrameSpec s;
  s.eth.dst = {0x02, 0, 0, 0, 0, 0x02};
  s.eth.src = {0x02, 0, 0, 0, 0x10, static_cast<uint8_t>(w)};
  s.ip.src = kGatewayIp + 9 + w;
  s.ip.dst = kGatewayIp;
  s.udp = wire::UdpSpec{static_cast<uint16_t>(7500 + w), kLtpPort, wire::L4Checksum::kNone};
  return s;
}

// What the emulated workers send besides their pushes (ACKs of the result transfers), gathered
// over one pass of the loop and sent in one burst: one TX call per ACK cost the emulator more
// than the pushes themselves.
class AckBurst {
 public:
  explicit AckBurst(uint16_t port) : port_(port) {}
  void add(rte_mbuf* m) {
    if (n_ == kMax) flush();
    pkts_[n_++] = m;
  }
  uint16_t flush() {
    const uint16_t sent = n_ ? rte_eth_tx_burst(port_, 0, pkts_, n_) : 0;
    if (sent < n_) rte_pktmbuf_free_bulk(pkts_ + sent, n_ - sent);
    n_ = 0;
    return sent;
  }

 private:
  static constexpr uint16_t kMax = 64;
  uint16_t port_;
  rte_mbuf* pkts_[kMax];
  uint16_t n_ = 0;
};

// One emulated worker's receiving side: the gateway's result transfer, with real ACKs.
class ResultSide final : public ltp::ReceiverSink, public ltp::PacketSink {
 public:
  ResultSide(uint32_t w, uint32_t workers, uint32_t chunks, rte_mempool* pool, AckBurst& out)
      : rx_(cfg(w, chunks)), w_(w), workers_(workers), pool_(pool), out_(out) {}
  void begin(uint32_t round, Nanos now) {
    round_ = round;
    done_ = false;
    rx_.begin_round(kJob, round, 0, now, *this, *this);
  }
  void on_packet(std::span<const uint8_t> msg, Nanos now) { rx_.on_packet(msg, now, *this, *this); }
  void poll(Nanos now) { rx_.poll(now, *this, *this); }
  bool done() const { return done_; }
  uint64_t chunks = 0, bubbles = 0, acks = 0, wrong = 0;

  // Checks the first and the last value of every result chunk against the exact mean (a
  // sample: reading the whole payload would cost the emulator more than the gateway's add).
  void on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) override {
    if (c.key.round != round_) return;
    ++chunks;
    const size_t n = payload.size() / 4, first = static_cast<size_t>(c.chunk_index) * n;
    float v0 = 0, v1 = 0;
    if (n == 0) return;
    std::memcpy(&v0, payload.data(), 4);
    std::memcpy(&v1, payload.data() + 4 * (n - 1), 4);
    if (v0 != mean_value(workers_, first) || v1 != mean_value(workers_, first + n - 1)) ++wrong;
  }
  void on_bubble(const ltp::ChunkRef&, ltp::FillRule) override { ++bubbles; }
  void on_transfer_end(const ltp::TransferSummary& s) override {
    if (s.key.round == round_) done_ = true;
  }
  void send(const ltp::TxMeta&, std::span<const uint8_t> head, std::span<const uint8_t> payload) override {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    if (!m) return;
    const wire::UdpFrameSpec s = worker_spec(w_);
    const size_t hr = wire::udp_frame_headroom(s), len = head.size() + payload.size();
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(hr + len)));
    std::memcpy(p + hr, head.data(), head.size());
    if (!payload.empty()) std::memcpy(p + hr + head.size(), payload.data(), payload.size());
    wire::finish_udp_frame(std::span<uint8_t>(p, hr + len), s, len);
    out_.add(m);
    ++acks;
  }

 private:
  static ltp::ReceiverConfig cfg(uint32_t w, uint32_t chunks) {
    ltp::ReceiverConfig c;
    c.local_node = static_cast<uint16_t>(sync::kWorkerNodeBase + w);
    c.max_chunks = chunks;
    c.max_transfers = 4;
    c.max_jobs = 1;
    c.ack_batch = true;  // as the client's workers (client/worker.cpp): one ACK per receive pass
    return c;
  }
  ltp::Receiver rx_;
  uint32_t w_, workers_;
  rte_mempool* pool_;
  AckBurst& out_;
  uint32_t round_ = 0;
  bool done_ = false;
};

struct Args {
  bool closed_loop = true;
  int seconds = 5;
  uint32_t payload = 1392;
  uint32_t workers = 2;
  uint32_t chunks = 4096;
};

int run(const Args& a, const std::vector<dp::Port>& ports, rte_mempool* pool) {
  const uint16_t port = ports[0].id;
  const size_t msg = wire::data_msg_len(static_cast<uint16_t>(a.payload));
  std::vector<uint8_t> values(a.payload);
  // frames[w * chunks + c]: worker w's push chunk c.
  std::vector<rte_mbuf*> frames(static_cast<size_t>(a.workers) * a.chunks);
  size_t round_off = 0;
  for (uint32_t w = 0; w < a.workers; ++w) {
    const wire::UdpFrameSpec spec = worker_spec(w);
    const size_t hr = wire::udp_frame_headroom(spec);
    round_off = hr + offsetof(wire::DataHeader, round);
    wire::DataFields f;
    f.src_node = static_cast<uint16_t>(sync::kWorkerNodeBase + w);
    f.job = kJob;
    f.round = 1;
    f.chunk_count = a.chunks;
    for (uint32_t c = 0; c < a.chunks; ++c) {
      rte_mbuf* m = rte_pktmbuf_alloc(pool);
      if (!m) {
        std::fprintf(stderr, "bench_dp_workers: pool too small for %u x %u frames\n", a.workers, a.chunks);
        return 1;
      }
      auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(hr + msg)));
      f.chunk_index = c;
      for (size_t i = 0; i < a.payload / 4; ++i) {
        const float v = push_value(w, static_cast<size_t>(c) * (a.payload / 4) + i);
        std::memcpy(values.data() + 4 * i, &v, 4);
      }
      wire::build_data_header(std::span<uint8_t>(p + hr, msg), f, static_cast<uint16_t>(a.payload));
      std::memcpy(p + hr + sizeof(wire::DataHeader), values.data(), a.payload);
      wire::finish_udp_frame(std::span<uint8_t>(p, hr + msg), spec, msg);
      frames[static_cast<size_t>(w) * a.chunks + c] = m;
    }
  }
  AckBurst acks_out(port);
  std::vector<std::unique_ptr<ResultSide>> results;
  for (uint32_t w = 0; w < a.workers; ++w) results.push_back(std::make_unique<ResultSide>(w, a.workers, a.chunks, pool, acks_out));

  const uint64_t hz = rte_get_tsc_hz();
  const double ns_per_tsc = 1e9 / static_cast<double>(hz);
  auto now_ns = [&] { return static_cast<Nanos>(static_cast<double>(rte_rdtsc()) * ns_per_tsc); };
  const uint64_t end = rte_rdtsc() + hz * static_cast<uint64_t>(a.seconds);
  uint64_t next_report = rte_rdtsc() + hz, sent = 0, last_sent = 0, rounds = 0, stray = 0;
  const size_t total = frames.size();
  size_t next = 0;  // next frame of this round to push
  uint32_t round = 1;
  for (auto& r : results) r->begin(round, now_ns());
  rte_mbuf* in[64];
  while (rte_rdtsc() < end) {
    const uint16_t nb = rte_eth_rx_burst(port, 0, in, 64);
    const Nanos now = now_ns();
    for (uint16_t i = 0; i < nb; ++i) {
      rte_mbuf* m = in[i];
      if (a.closed_loop) {
        std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
        auto f = wire::parse_udp_frame(frame, wire::FrameChecks{false, false});
        if (!f) {
          ++stray;
        } else {
          const uint32_t w = f->ip.dst - (kGatewayIp + 9);
          const auto body = wire::frame_payload(frame, *f);
          auto c = wire::parse_common(body);
          if (w < a.workers && c && c->type == wire::MsgType::kData) {
            results[w]->on_packet(body, now);
          } else if (!c || (c->type != wire::MsgType::kAck && c->type != wire::MsgType::kClose)) {
            ++stray;  // ACKs and the CLOSE of our pushes need nothing: every push is sent whole
          }
        }
      }
      rte_pktmbuf_free(m);
    }
    if (a.closed_loop) {
      bool all = true;
      for (auto& r : results) {
        r->poll(now);
        all = all && r->done();
      }
      acks_out.flush();
      if (next == total && all) {  // every worker has round r's result: round r + 1
        ++round;
        ++rounds;
        next = 0;
        for (auto& r : results) r->begin(round, now);
      }
    } else if (next == total) {
      ++round;
      next = 0;
    }
    if (next < total) {
      rte_mbuf* burst[32];
      // Worker after worker in each burst, as several workers' pushes interleave on a LAN.
      uint16_t n = 0;
      for (; n < 32 && next + n < total; ++n) {
        const size_t k = next + n;
        rte_mbuf* m = frames[(k % a.workers) * a.chunks + k / a.workers];
        const be32 r(round);
        std::memcpy(rte_pktmbuf_mtod_offset(m, uint8_t*, round_off), &r, 4);
        // One lcore owns these frames (memif's TX copies and frees them on this thread), so
        // the reference count needs no atomic operation: the refused ones are undone cheaply.
        rte_mbuf_refcnt_set(m, static_cast<uint16_t>(rte_mbuf_refcnt_read(m) + 1));
        burst[n] = m;
      }
      const uint16_t done = rte_eth_tx_burst(port, 0, burst, n);
      for (uint16_t i = done; i < n; ++i) rte_mbuf_refcnt_set(burst[i], static_cast<uint16_t>(rte_mbuf_refcnt_read(burst[i]) - 1));
      next += done;
      sent += done;
    }
    if (rte_rdtsc() >= next_report) {
      std::printf("push_window_mpps %.4f\n", static_cast<double>(sent - last_sent) / 1e6);
      std::fflush(stdout);
      last_sent = sent;
      next_report += hz;
    }
  }
  uint64_t got = 0, bubbles = 0, acks = 0, wrong = 0;
  for (auto& r : results) {
    got += r->chunks;
    bubbles += r->bubbles;
    acks += r->acks;
    wrong += r->wrong;
  }
  std::printf("workers %u pushes %llu rounds_done %llu result_chunks %llu result_bubbles %llu acks %llu stray %llu "
              "wrong_results %llu\n",
              a.workers, static_cast<unsigned long long>(sent), static_cast<unsigned long long>(rounds),
              static_cast<unsigned long long>(got), static_cast<unsigned long long>(bubbles),
              static_cast<unsigned long long>(acks), static_cast<unsigned long long>(stray),
              static_cast<unsigned long long>(wrong));
  for (auto* m : frames) rte_pktmbuf_free(m);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int used = rte_eal_init(argc, argv);
  if (used < 0 || argc < used + 7) {
    std::fprintf(stderr, "usage: bench_dp_workers [EAL args] -- workers|blast SECONDS PAYLOAD WORKERS CHUNKS SOCKET\n");
    return 2;
  }
  Args a;
  a.closed_loop = std::string(argv[used + 1]) == "workers";
  a.seconds = std::atoi(argv[used + 2]);
  a.payload = static_cast<uint32_t>(std::atoi(argv[used + 3])) / 4 * 4;
  a.workers = static_cast<uint32_t>(std::atoi(argv[used + 4]));
  a.chunks = static_cast<uint32_t>(std::atoi(argv[used + 5]));
  const std::string sock = argv[used + 6];
  if (a.seconds <= 0 || a.payload < 64 || a.payload > 8892 || a.workers < 1 || a.workers > 64 || a.chunks < 1) {
    std::fprintf(stderr, "bench_dp_workers: bad arguments\n");
    return 2;
  }
  const bool jumbo = a.payload > 1600;
  config::GatewayConfig cfg;
  config::PortConfig pc;
  pc.name = "memif";
  pc.vdev = "net_memif0,role=server,id=0,socket=" + sock + ",bsize=" + (jumbo ? "10240" : "2048");
  pc.ipv4.host_order = kGatewayIp + 9;
  if (jumbo) pc.mtu = 9000;
  cfg.ports.push_back(pc);
  const unsigned n = a.workers * a.chunks + 8192;
  rte_mempool* pool = dp::create_pool("bench_dpw", n, 256, jumbo ? 10240 + 128 : RTE_MBUF_DEFAULT_BUF_SIZE);
  std::vector<dp::Port> ports;
  if (!pool || !dp::setup_ports(cfg, 1, pool, ports)) return 1;
  const int rc = run(a, ports, pool);
  // DPDK 22.11's memif unmaps the shared rings on its interrupt thread when the other side
  // leaves: a burst under way on this lcore then reads freed memory (seen as a crash here in
  // about one run of five). So stop polling first and let the other side leave (the scripts
  // give this program the shorter duration), then drain.
  rte_eth_link link{};
  for (int i = 0; i < 200; ++i) {
    if (rte_eth_link_get_nowait(ports[0].id, &link) == 0 && link.link_status == RTE_ETH_LINK_DOWN) break;
    rte_delay_us_sleep(50 * 1000);
  }
  dp::drain_rx(ports);
  dp::teardown_ports(ports);
  rte_eal_cleanup();
  return rc;
}
