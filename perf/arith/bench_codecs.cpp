// codecs: encode and decode GB/s per codec on 8 KB chunks, each as a ratio to memcpy of the
// same float32 bytes in the same run, plus the compression ratio achieved.
//
// Encode is the sender path: with error feedback (x = gradient + residual, residual updated),
// input = float32 bytes. Decode writes float32 chunks; decode_add adds them into accumulators
// (the receive path). GB/s always counts float32 bytes (the uncompressed size), so the ratio
// to memcpy says how the codec compares with merely moving the gradient once.
// Gradients: heavy-tailed synthetic (log-normal scale per element x Gaussian). Buffers of 64
// chunks (512 KB) stay in cache; rounds alternate memcpy and codec, the ratio is the median.
// Each encode pass pairs every chunk's residual with a different gradient chunk, so error
// feedback sees changing gradients as in training.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_common.h"
#include "common/rng.h"
#include "compress/codec.h"
#include "compress/encoder.h"

namespace {

using namespace sg;
using namespace sg::compress;
constexpr size_t kN = 2048;        // floats per chunk (8 KB)
constexpr size_t kChunks = 64;

struct Codec {
  const char* name;
  CodecId id;
  float ratio;
};

double gauss(Rng& r) {
  const double u = r.uniform() + 1e-300, v = r.uniform();
  return std::sqrt(-2 * std::log(u)) * std::cos(6.283185307179586 * v);
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = bench::parse_arith_args(argc, argv);
  const agg::Isa isa = args.isa.value_or(agg::best_isa());
  const int rounds = args.quick ? 15 : 61;
  const int reps = args.quick ? 4 : 8;  // passes over the 64 chunks per timed sample

  Rng rng(7);
  std::vector<float> grad(kChunks * kN), residual(kChunks * kN, 0.0f), dst(kChunks * kN), acc(kChunks * kN, 0.0f);
  for (auto& g : grad) g = static_cast<float>(1e-3 * std::exp(1.5 * gauss(rng)) * gauss(rng));

  const Codec codecs[] = {{"f32", CodecId::kF32, 0},   {"f16", CodecId::kF16, 0},       {"bf16", CodecId::kBf16, 0},
                          {"int8", CodecId::kInt8, 0}, {"topk 5%", CodecId::kTopK, 0.05f}, {"topk 1%", CodecId::kTopK, 0.01f}};
  Encoder enc(kN, isa);
  // Opaque to the compiler, so memcpy is the library call, not an inlined `rep movs`.
  size_t chunk_bytes = kN * 4;
  bench::do_not_optimize(chunk_bytes);
  std::printf("codecs on %s: 8 KB float32 chunks, %zu chunks in cache, encode with error feedback;\n"
              "GB/s of float32 bytes; x memcpy = median over %d alternating rounds.\n\n",
              std::string(agg::isa_name(isa)).c_str(), kChunks, rounds);
  bench::Table t({"codec", "encode GB/s", "x memcpy", "decode GB/s", "x memcpy", "decode+add GB/s", "x memcpy", "ratio"});
  bench::JsonLine j("codecs");
  j.str("isa", std::string(agg::isa_name(isa)));
  for (const Codec& c : codecs) {
    const size_t cap = max_encoded_size(c.id, kN);
    std::vector<uint8_t> enc_buf(kChunks * cap);
    std::vector<size_t> enc_len(kChunks);
    int pass = 0;
    auto encode_all = [&] {
      ++pass;
      for (int k = 0; k < reps; ++k)
        for (size_t ch = 0; ch < kChunks; ++ch) {
          // each pass feeds every residual another gradient chunk, as successive rounds would
          const size_t src = (ch + static_cast<size_t>(k) * 7 + static_cast<size_t>(pass)) % kChunks;
          const auto e = enc.encode(c.id, std::span(grad.data() + src * kN, kN), std::span(enc_buf.data() + ch * cap, cap),
                                    std::span(residual.data() + ch * kN, kN), c.ratio);
          enc_len[ch] = e.bytes;
        }
      bench::do_not_optimize(enc_buf[0]);
    };
    auto decode_all = [&] {
      for (int k = 0; k < reps; ++k)
        for (size_t ch = 0; ch < kChunks; ++ch)
          if (decode(c.id, std::span(enc_buf.data() + ch * cap, enc_len[ch]), std::span(dst.data() + ch * kN, kN), isa) != CodecError::kOk)
            std::abort();
      bench::do_not_optimize(dst[0]);
    };
    auto decode_add_all = [&] {
      for (int k = 0; k < reps; ++k)
        for (size_t ch = 0; ch < kChunks; ++ch)
          if (decode_add(c.id, std::span(enc_buf.data() + ch * cap, enc_len[ch]), std::span(acc.data() + ch * kN, kN), isa) != CodecError::kOk)
            std::abort();
      bench::do_not_optimize(acc[0]);
    };
    // The memcpy side of each round copies the chunks `reps` times too.
    auto with_reps = [&](const std::function<void()>& op, double* gbps) {
      std::vector<double> ratios, times;
      for (int r = 0; r < rounds + 1; ++r) {
        double t0 = bench::now_seconds();
        for (int k = 0; k < reps; ++k)
          for (size_t ch = 0; ch < kChunks; ++ch) std::memcpy(dst.data() + ch * kN, grad.data() + ch * kN, chunk_bytes);
        bench::do_not_optimize(dst[0]);
        const double t_cpy = bench::now_seconds() - t0;
        t0 = bench::now_seconds();
        op();
        const double t_op = bench::now_seconds() - t0;
        if (r == 0) continue;
        ratios.push_back(t_cpy / t_op);
        times.push_back(t_op);
      }
      *gbps = static_cast<double>(reps * kChunks * kN * 4) / bench::median(times) / 1e9;
      return bench::median(ratios);
    };
    encode_all();  // fills enc_buf for the decoders
    double eg = 0, dg = 0, ag = 0;
    const double er = with_reps(encode_all, &eg);
    const double dr = with_reps(decode_all, &dg);
    std::fill(acc.begin(), acc.end(), 0.0f);
    const double ar = with_reps(decode_add_all, &ag);
    size_t total = 0;
    for (size_t l : enc_len) total += l;
    const double cratio = static_cast<double>(kChunks * kN * 4) / static_cast<double>(total);
    t.row({c.name, bench::fmt(eg, "%.2f"), bench::fmt(er), bench::fmt(dg, "%.2f"), bench::fmt(dr), bench::fmt(ag, "%.2f"),
           bench::fmt(ar), bench::fmt(cratio, "%.1fx")});
    std::string key = c.name;
    for (auto& ch : key)
      if (ch == ' ' || ch == '%') ch = '_';
    while (!key.empty() && key.back() == '_') key.pop_back();
    j.num(key + "_encode_vs_memcpy", er).num(key + "_decode_vs_memcpy", dr).num(key + "_decode_add_vs_memcpy", ar)
        .num(key + "_compression", cratio);
  }
  t.print();
  j.print();
  return 0;
}
