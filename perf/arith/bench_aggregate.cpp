// aggregate: one core adding 8 KB float32 chunks into accumulators, per ISA, as a ratio to
// memcpy of the same bytes between the same buffers in the same run.
//
// What is measured: payloads sit in a pool of packet buffers at byte offset 66 (Ethernet +
// IPv4 + UDP + a 24-byte LTP header, so the floats are not 4-, 16- or 64-byte aligned), and
// are added in place (no copy) into a set of in-flight chunk accumulators that stay in cache,
// as a gateway's do while a chunk's contributors arrive. memcpy moves the same payload bytes
// into the same accumulator buffers. Both sweeps alternate (A B A B ...) and the figure is the
// median of the per-round ratios, because the shared 2-vCPU machine drifts.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "aggregate/accumulator.h"
#include "bench_args.h"
#include "bench_common.h"
#include "common/rng.h"

namespace {

using namespace sg;
constexpr size_t kChunkElems = 2048;                  // 8 KB
constexpr size_t kChunkBytes = kChunkElems * 4;
constexpr size_t kPayloadOffset = 66;                 // 14 + 20 + 8 + 24 header bytes
constexpr size_t kPacketStride = kChunkBytes + 128;   // one packet buffer per payload
constexpr uint32_t kAccChunks = 16;                   // 128 KB of in-flight accumulators
constexpr size_t kPackets = 48;                       // 400 KB of received payloads

struct Result {
  double add_gbps, memcpy_gbps, ratio, ratio_p10, ratio_p90;
};

// One round = `slices` short slices; each slice runs memcpy and add over the same
// `ops_per_slice` chunks back to back (alternating which goes first), so both see the same
// machine state; a round's ratio is the ratio of its summed times.
Result measure(agg::Isa isa, const std::vector<uint8_t>& pool, int rounds, int slices, size_t ops_per_slice) {
  agg::Accumulator acc(kAccChunks * kChunkElems, kChunkElems, isa);
  auto copy_pass = [&](size_t first) {
    for (size_t i = first; i < first + ops_per_slice; ++i) {
      const uint8_t* p = pool.data() + (i % kPackets) * kPacketStride + kPayloadOffset;
      std::memcpy(acc.chunk_data(static_cast<uint32_t>(i % kAccChunks)).data(), p, kChunkBytes);
    }
    bench::do_not_optimize(acc.values()[0]);
  };
  auto add_pass = [&](size_t first) {
    for (size_t i = first; i < first + ops_per_slice; ++i) {
      const uint8_t* p = pool.data() + (i % kPackets) * kPacketStride + kPayloadOffset;
      if (acc.add(static_cast<uint32_t>(i % kAccChunks), std::span(p, kChunkBytes)) != agg::AggError::kOk) std::abort();
    }
    bench::do_not_optimize(acc.values()[0]);
  };
  std::vector<double> add_s, cpy_s, ratios;
  for (int r = 0; r < rounds + 1; ++r) {  // round 0 warms caches and is dropped
    acc.reset();  // keeps the sums small (no overflow to inf over many rounds)
    double t_add = 0, t_cpy = 0;
    for (int sl = 0; sl < slices; ++sl) {
      const size_t first = static_cast<size_t>(sl) * ops_per_slice;
      for (int side = 0; side < 2; ++side) {
        const bool copy_now = (side == 0) == (sl % 2 == 0);
        const double t0 = bench::now_seconds();
        if (copy_now) copy_pass(first); else add_pass(first);
        (copy_now ? t_cpy : t_add) += bench::now_seconds() - t0;
      }
    }
    if (r == 0) continue;
    add_s.push_back(t_add);
    cpy_s.push_back(t_cpy);
    ratios.push_back(t_cpy / t_add);
  }
  const double bytes = static_cast<double>(static_cast<size_t>(slices) * ops_per_slice * kChunkBytes);
  return {bytes / bench::median(add_s) / 1e9, bytes / bench::median(cpy_s) / 1e9, bench::median(ratios),
          bench::percentile(ratios, 0.1), bench::percentile(ratios, 0.9)};
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = bench::parse_arith_args(argc, argv);
  const int rounds = args.quick ? 15 : 61;
  const int slices = args.quick ? 8 : 24;
  const size_t ops_per_slice = 256;  // 2 MB of payload, ~50 us per side

  std::vector<uint8_t> pool(kPackets * kPacketStride);
  Rng rng(1);
  for (size_t k = 0; k < kPackets; ++k)
    for (size_t i = 0; i < kChunkElems; ++i) {
      const float v = static_cast<float>((rng.uniform() - 0.5) * 1e-3);
      std::memcpy(pool.data() + k * kPacketStride + kPayloadOffset + 4 * i, &v, 4);
    }

  std::printf("aggregate: 8 KB float32 payloads (packet offset 66, unaligned) added in place into\n"
              "%u cache-resident chunk accumulators; memcpy moves the same bytes into the same buffers.\n"
              "Ratio = median over %d rounds of memcpy time / add time (p10..p90); each round\n"
              "interleaves %d slices of 256 chunks of each.\n\n",
              kAccChunks, rounds, slices);
  bench::Table t({"isa", "add GB/s", "memcpy GB/s", "sum_vs_memcpy", "p10..p90"});
  bench::JsonLine j("aggregate");
  double best = 0;
  std::string best_isa;
  for (agg::Isa isa : bench::isas_to_run(args)) {
    const Result r = measure(isa, pool, rounds, slices, ops_per_slice);
    t.row({std::string(agg::isa_name(isa)), bench::fmt(r.add_gbps, "%.1f"), bench::fmt(r.memcpy_gbps, "%.1f"),
           bench::fmt(r.ratio), bench::fmt(r.ratio_p10) + ".." + bench::fmt(r.ratio_p90)});
    j.num("sum_vs_memcpy_" + std::string(agg::isa_name(isa)), r.ratio);
    if (best_isa.empty()) {  // the first row is the widest ISA: what the gateway runs
      best = r.ratio;
      best_isa = agg::isa_name(isa);
      j.num("add_gbps", r.add_gbps).num("memcpy_gbps", r.memcpy_gbps);
    }
  }
  t.print();
  j.num("sum_vs_memcpy", best).str("isa", best_isa).num("chunk_bytes", kChunkBytes);
  j.print();
  return 0;
}
