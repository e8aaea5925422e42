// aggregate: one core adding 8 KB float32 chunks into accumulators, per ISA, as a ratio to
// memcpy of the same bytes between the same buffers in the same run.
//
// What is measured: payloads sit in a pool of packet buffers at byte offset 66 (Ethernet +
// IPv4 + UDP + a 24-byte LTP header, so the floats are not 4-, 16- or 64-byte aligned), and
// are added in place (no copy) into a set of in-flight chunk accumulators that stay in cache,
// as a gateway's do while a chunk's contributors arrive. memcpy moves the same payload bytes
// into the same accumulator buffers. Both sweeps alternate (A B A B ...) and the figure is the
// median of the per-round ratios, because the shared 2-vCPU machine drifts.
// A second table, for information, takes the payloads from DRAM (a 64 MB pool, each side on
// its own packets) with the accumulators still in cache: there both are bound by memory.
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
constexpr size_t kHotPackets = 48;                    // 400 KB of received payloads, in cache
constexpr size_t kColdPackets = 8192;                 // 66 MB: beyond the 32 MB L3

struct Result {
  double add_gbps, memcpy_gbps, ratio, ratio_p10, ratio_p90;
};

// One round = `slices` short slices; each slice runs memcpy and add over the same
// `ops_per_slice` chunks back to back (alternating which goes first), so both see the same
// machine state. Figures are medians over all slice pairs: a slice hit by preemption on this
// shared machine is an outlier, not a shift.
// `add_shift`: packets the add side is offset by (0: both sides use the same, cached payloads).
Result measure(agg::Isa isa, const std::vector<uint8_t>& pool, size_t packets, size_t add_shift, int rounds, int slices,
               size_t ops_per_slice) {
  agg::Accumulator acc(kAccChunks * kChunkElems, kChunkElems, isa);
  // Opaque to the compiler, so memcpy is the library call, not an inlined `rep movs`.
  size_t chunk_bytes = kChunkBytes;
  bench::do_not_optimize(chunk_bytes);
  auto copy_pass = [&](size_t first) {
    for (size_t i = first; i < first + ops_per_slice; ++i) {
      const uint8_t* p = pool.data() + (i % packets) * kPacketStride + kPayloadOffset;
      std::memcpy(acc.chunk_data(static_cast<uint32_t>(i % kAccChunks)).data(), p, chunk_bytes);
    }
    bench::do_not_optimize(acc.values()[0]);
  };
  auto add_pass = [&](size_t first) {
    for (size_t i = first; i < first + ops_per_slice; ++i) {
      const uint8_t* p = pool.data() + ((i + add_shift) % packets) * kPacketStride + kPayloadOffset;
      if (acc.add(static_cast<uint32_t>(i % kAccChunks), std::span(p, kChunkBytes)) != agg::AggError::kOk) std::abort();
    }
    bench::do_not_optimize(acc.values()[0]);
  };
  std::vector<double> add_s, cpy_s, ratios;
  for (int r = 0; r < rounds + 1; ++r) {  // round 0 warms caches and is dropped
    acc.reset();  // keeps the sums small (no overflow to inf over many rounds)
    // Zeroes every (fresh) chunk now, untimed: otherwise each side's first touch of a chunk
    // would be a zeroing (copy) or a first-contribution copy (add), not what is measured.
    (void)acc.values();
    for (int sl = 0; sl < slices; ++sl) {
      const size_t first = static_cast<size_t>(sl) * ops_per_slice;
      double t_add = 0, t_cpy = 0;
      for (int side = 0; side < 2; ++side) {
        const bool copy_now = (side == 0) == (sl % 2 == 0);
        const double t0 = bench::now_seconds();
        if (copy_now) copy_pass(first); else add_pass(first);
        (copy_now ? t_cpy : t_add) = bench::now_seconds() - t0;
      }
      if (r == 0) continue;
      add_s.push_back(t_add);
      cpy_s.push_back(t_cpy);
      ratios.push_back(t_cpy / t_add);
    }
  }
  const double bytes = static_cast<double>(ops_per_slice * kChunkBytes);
  return {bytes / bench::median(add_s) / 1e9, bytes / bench::median(cpy_s) / 1e9, bench::median(ratios),
          bench::percentile(ratios, 0.1), bench::percentile(ratios, 0.9)};
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = bench::parse_arith_args(argc, argv);
  const int rounds = args.quick ? 15 : 61;
  const int slices = args.quick ? 8 : 24;
  const size_t ops_per_slice = 256;  // 2 MB of payload, ~50 us per side

  std::vector<uint8_t> pool(kColdPackets * kPacketStride);
  Rng rng(1);
  for (size_t k = 0; k < kColdPackets; ++k)
    for (size_t i = 0; i < kChunkElems; ++i) {
      const float v = static_cast<float>((rng.uniform() - 0.5) * 1e-3);
      std::memcpy(pool.data() + k * kPacketStride + kPayloadOffset + 4 * i, &v, 4);
    }

  std::printf("aggregate: 8 KB float32 payloads (packet offset 66, unaligned) added in place into\n"
              "%u cache-resident chunk accumulators; memcpy moves the same bytes into the same buffers.\n"
              "Ratio = median over %d x %d slice pairs (256 chunks of memcpy, then of add, order\n"
              "alternating) of memcpy time / add time; p10..p90 of the same.\n\n",
              kAccChunks, rounds, slices);
  bench::JsonLine j("aggregate");
  double best = 0;
  std::string best_isa;
  std::printf("payloads in cache (400 KB pool), the gateway's receive path:\n");
  bench::Table hot({"isa", "add GB/s", "memcpy GB/s", "sum_vs_memcpy", "p10..p90"});
  for (agg::Isa isa : bench::isas_to_run(args)) {
    const Result r = measure(isa, pool, kHotPackets, 0, rounds, slices, ops_per_slice);
    hot.row({std::string(agg::isa_name(isa)), bench::fmt(r.add_gbps, "%.1f"), bench::fmt(r.memcpy_gbps, "%.1f"),
             bench::fmt(r.ratio), bench::fmt(r.ratio_p10) + ".." + bench::fmt(r.ratio_p90)});
    j.num("sum_vs_memcpy_" + std::string(agg::isa_name(isa)), r.ratio);
    if (best_isa.empty()) {  // the first row is the widest ISA: what the gateway runs
      best = r.ratio;
      best_isa = agg::isa_name(isa);
      j.num("add_gbps", r.add_gbps).num("memcpy_gbps", r.memcpy_gbps);
    }
  }
  hot.print();
  std::printf("\npayloads from DRAM (66 MB pool), for information:\n");
  bench::Table cold({"isa", "add GB/s", "memcpy GB/s", "sum_vs_memcpy", "p10..p90"});
  const agg::Isa isa = bench::isas_to_run(args).front();
  const Result r = measure(isa, pool, kColdPackets, kColdPackets / 2, rounds, slices, ops_per_slice);
  cold.row({std::string(agg::isa_name(isa)), bench::fmt(r.add_gbps, "%.1f"), bench::fmt(r.memcpy_gbps, "%.1f"),
            bench::fmt(r.ratio), bench::fmt(r.ratio_p10) + ".." + bench::fmt(r.ratio_p90)});
  cold.print();
  j.num("sum_vs_memcpy_dram", r.ratio);
  j.num("sum_vs_memcpy", best).str("isa", best_isa).num("chunk_bytes", kChunkBytes);
  j.print();
  return 0;
}
