// ltp-rx: LTP receiver processing rate on one core -- parse, transfer lookup, duplicate check,
// bitmap update, payload placed into the message buffer, ACKs built -- as GB/s of payload,
// divided by memcpy of the very same payload bytes (same source packets, same destination)
// measured in alternation in the same run. Median of the per-pair ratios.
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "bench_common.h"
#include "common/rng.h"
#include "ltp/receiver.h"
#include "wire/ltp_codec.h"

namespace {

using namespace sg;

// Places each chunk at chunk_index * chunk_size: the dataplane's aggregation target stand-in.
class PlaceSink final : public ltp::ReceiverSink {
 public:
  PlaceSink(uint8_t* dst, size_t chunk) : dst_(dst), chunk_(chunk) {}
  void on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> p) override {
    std::memcpy(dst_ + c.chunk_index * chunk_, p.data(), p.size());
  }
  void on_bubble(const ltp::ChunkRef&, ltp::FillRule) override {}
  void on_transfer_end(const ltp::TransferSummary& s) override { received += s.received; }
  uint64_t received = 0;

 private:
  uint8_t* dst_;
  size_t chunk_;
};

// Counts what the receiver emits (an engine would put it in an mbuf).
class CountTx final : public ltp::PacketSink {
 public:
  void send(const ltp::TxMeta&, std::span<const uint8_t> head, std::span<const uint8_t>) override {
    ++packets;
    bytes += head.size();
    sg::bench::do_not_optimize(head[0]);
  }
  uint64_t packets = 0, bytes = 0;
};

struct Result {
  double ratio = 0, rx_gbps = 0, memcpy_gbps = 0, acks_per_chunk = 0;
};

Result run(size_t chunk, uint32_t n, int reps, bool shuffled) {
  const size_t msg = wire::data_msg_len(static_cast<uint16_t>(chunk));
  std::vector<uint8_t> pkts(msg * n), dst(chunk * n);
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  Rng rng(7);
  if (shuffled) {
    for (uint32_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  }
  std::vector<uint8_t> payload(chunk);
  for (uint32_t k = 0; k < n; ++k) {
    wire::DataFields f;
    f.src_node = 1;
    f.job = 1;
    f.round = 1;
    f.policy_version = 1;
    f.chunk_index = order[k];
    f.chunk_count = n;
    f.send_ts = 1000 + k;
    for (size_t b = 0; b < chunk; b += 64) payload[b] = static_cast<uint8_t>(k + b);
    (void)wire::build_data(std::span(pkts).subspan(k * msg, msg), f, payload);
  }
  ltp::ReceiverConfig cfg;
  cfg.max_transfers = 4;
  cfg.max_chunks = n;
  std::vector<double> ratios, rx_rates, mc_rates;
  uint64_t acks = 0;
  const double bytes = static_cast<double>(chunk) * n;
  for (int r = 0; r < reps; ++r) {
    // A: the receiver (constructed outside the timed region).
    ltp::Receiver rx(cfg);
    PlaceSink sink(dst.data(), chunk);
    CountTx tx;
    rx.begin_round(1, 1, 1, 0, sink, tx);
    auto run_rx = [&] {
      const double t0 = sg::bench::now_seconds();
      for (uint32_t k = 0; k < n; ++k) {
        rx.on_packet(std::span<const uint8_t>(pkts.data() + k * msg, msg), static_cast<Nanos>(k) * 1000, sink, tx);
      }
      return sg::bench::now_seconds() - t0;
    };
    // B: memcpy of the same payload bytes, same source and destination.
    auto run_memcpy = [&] {
      const double t0 = sg::bench::now_seconds();
      for (uint32_t k = 0; k < n; ++k) {
        std::memcpy(dst.data() + order[k] * chunk, pkts.data() + k * msg + sizeof(wire::DataHeader), chunk);
      }
      sg::bench::do_not_optimize(dst[0]);
      return sg::bench::now_seconds() - t0;
    };
    // Whichever runs second finds the bytes warmer: alternate who goes first.
    double ta, tb;
    if (r % 2 == 0) {
      ta = run_rx();
      tb = run_memcpy();
    } else {
      tb = run_memcpy();
      ta = run_rx();
    }
    if (sink.received != n) std::fprintf(stderr, "ltp-rx: transfer did not complete (%lu of %u)\n", (unsigned long)sink.received, n);
    acks = tx.packets;
    rx_rates.push_back(bytes / ta / 1e9);
    mc_rates.push_back(bytes / tb / 1e9);
    ratios.push_back(tb / ta);
  }
  Result res;
  res.ratio = sg::bench::median(ratios);
  res.rx_gbps = sg::bench::median(rx_rates);
  res.memcpy_gbps = sg::bench::median(mc_rates);
  res.acks_per_chunk = static_cast<double>(acks) / n;
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else {
      std::fprintf(stderr, "usage: bench_ltp_rx [--quick]\n");
      return 2;
    }
  }
  const int reps = quick ? 15 : 101;
  std::printf("ltp-rx: one core, one transfer of N chunks per repetition, receiver vs memcpy of the same payload\n");
  std::printf("bytes (%d pairs, order alternated, median of per-pair ratios); ACK every 2nd in-order chunk\n\n", reps);
  sg::bench::Table t({"chunk", "order", "N", "rx GB/s", "memcpy GB/s", "rx/memcpy", "ACKs/chunk"});
  sg::bench::JsonLine json("ltp-rx");
  struct Case {
    size_t chunk;
    uint32_t n;
    bool shuffled;
    const char* key;
  } cases[] = {{1400, 4096, false, "rx_vs_memcpy_1400"},
               {8192, 2048, false, "rx_vs_memcpy_8k"},
               {1400, 4096, true, "rx_vs_memcpy_1400_shuffled"},
               {8192, 2048, true, "rx_vs_memcpy_8k_shuffled"}};
  for (const auto& c : cases) {
    const Result r = run(c.chunk, c.n, reps, c.shuffled);
    t.row({std::to_string(c.chunk), c.shuffled ? "shuffled" : "in order", std::to_string(c.n), sg::bench::fmt(r.rx_gbps, "%.2f"),
           sg::bench::fmt(r.memcpy_gbps, "%.2f"), sg::bench::fmt(r.ratio), sg::bench::fmt(r.acks_per_chunk, "%.2f")});
    json.num(c.key, r.ratio);
  }
  t.print();
  std::printf("\nmachine note: shared 2-vCPU VM; absolute GB/s drift, the ratio is the figure.\n");
  json.print();
  return 0;
}
