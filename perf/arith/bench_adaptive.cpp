// adaptive: NetSenseML-style adaptive compression vs always-on top-k vs never compressing,
// in virtual time over a congested-then-clear link trace, for a fixed number of rounds.
//
// Model (virtual time; the codecs and error feedback are the real ones):
// - Gradients: per round one synthetic tensor, heavy-tailed and correlated across rounds:
//   g_i(t) = s_i * m_i(t), s_i log-normal (sigma 1.5) per element, m_i an AR(1) process
//   (rho 0.8) driven by Student-t (nu 3) noise.
// - Each round the sender encodes every chunk (2048 elements) with the strategy's codec and a
//   per-chunk error-feedback residual. transfer = bytes / link rate + RTT (base 5 ms x the
//   RTT ratio); compute is 50 ms and overlaps communication, so round time = max(compute,
//   transfer): communication hidden behind compute costs nothing.
// - Link trace: clear 10 % of rounds (400 MB/s per 2 MB tensor), congested 45 % (rate a
//   random walk in 10..40 MB/s, RTT x2.5..4, loss 0.5..2 %), clear again 45 %. Rates scale
//   with the tensor size so --quick (a smaller tensor) keeps the same exposure.
// - The adaptive policy sees what the previous round measured (rate with 5 % measurement
//   noise, RTT ratio, loss), as the passive estimator would report it.
// - Error: sqrt(sum_t |decoded_t - g_t|^2 / sum_t |g_t|^2), what the model receives each
//   round against the true gradient; drift: |sum_t decoded_t - sum_t g_t| / |sum_t g_t|.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_common.h"
#include "common/rng.h"
#include "compress/adaptive_policy.h"
#include "compress/codec.h"
#include "compress/encoder.h"
#include "compress/residual_store.h"

namespace {

using namespace sg;
using namespace sg::compress;

constexpr size_t kChunk = 2048;
constexpr double kCompute = 0.050;     // s per round
constexpr double kBaseRtt = 0.005;     // s
constexpr float kAlwaysTopK = 0.01f;   // the always-on baseline: top-k 1 % (DGC-style)

double gauss(Rng& r) {
  const double u = r.uniform() + 1e-300, v = r.uniform();
  return std::sqrt(-2 * std::log(u)) * std::cos(6.283185307179586 * v);
}
double student_t3(Rng& r) {
  const double z = gauss(r);
  double chi = 0;
  for (int i = 0; i < 3; ++i) {
    const double x = gauss(r);
    chi += x * x;
  }
  return z / std::sqrt(chi / 3.0) / std::sqrt(3.0);  // unit variance
}

struct LinkState {
  double rate_Bps, rtt_ratio, loss;
};

int warm_rounds(int rounds) { return rounds / 10; }
int congested_end(int rounds) { return warm_rounds(rounds) + rounds * 45 / 100; }

std::vector<LinkState> make_trace(int rounds, double scale, Rng& rng) {
  std::vector<LinkState> t;
  const int warm = warm_rounds(rounds), end = congested_end(rounds);
  double walk = 20e6;
  for (int r = 0; r < rounds; ++r) {
    if (r < warm || r >= end) {
      t.push_back({400e6 * scale * (0.9 + 0.1 * rng.uniform()), 1.0 + 0.1 * rng.uniform(), 0.0});
    } else {
      walk = std::clamp(walk * std::exp(0.25 * gauss(rng)), 10e6, 40e6);
      t.push_back({walk * scale, 2.5 + 1.5 * rng.uniform(), 0.005 + 0.015 * rng.uniform()});
    }
  }
  return t;
}

enum class Strategy { kNever, kAlways, kAdaptive };

struct Outcome {
  double congested_round_time = 0;  // rounds of the congestion episode only
  double round_time = 0, transfer_time = 0, err2 = 0, norm2 = 0, bytes = 0;
  std::vector<double> sum_sent, sum_true;
  int compressed_rounds = 0, switches = 0, on_off_switches = 0;
};

class Sender {
 public:
  Sender(Strategy s, size_t n) : s_(s), n_(n), enc_(kChunk), res_(n, kChunk), buf_(max_encoded_size(CodecId::kF32, kChunk) * 2 + 64), dec_(kChunk) {
    out_.sum_sent.assign(n, 0);
    out_.sum_true.assign(n, 0);
  }

  void round(const std::vector<float>& g, const LinkState& link, bool congested, Rng& noise) {
    CodecId codec = CodecId::kF32;
    float ratio = 0;
    if (s_ == Strategy::kAlways) {
      codec = CodecId::kTopK;
      ratio = kAlwaysTopK;
    } else if (s_ == Strategy::kAdaptive) {
      codec = decision_.codec;
      ratio = decision_.topk_ratio;
    }
    double bytes = 0;
    for (uint32_t c = 0; c * kChunk < n_; ++c) {
      const size_t off = c * kChunk, len = std::min(kChunk, n_ - off);
      const std::span<const float> gc(g.data() + off, len);
      const EncodeResult e = enc_.encode(codec, gc, buf_, res_.residual(c), ratio);
      if (e.err != CodecError::kOk) std::abort();
      bytes += static_cast<double>(e.bytes);
      if (decode(codec, std::span(buf_.data(), e.bytes), std::span(dec_.data(), len)) != CodecError::kOk) std::abort();
      for (size_t i = 0; i < len; ++i) {
        const double d = dec_[i] - gc[i];
        out_.err2 += d * d;
        out_.norm2 += static_cast<double>(gc[i]) * gc[i];
        out_.sum_sent[off + i] += dec_[i];
        out_.sum_true[off + i] += gc[i];
      }
    }
    const double transfer = bytes / link.rate_Bps + kBaseRtt * link.rtt_ratio;
    out_.transfer_time += transfer;
    out_.round_time += std::max(kCompute, transfer);
    if (congested) out_.congested_round_time += std::max(kCompute, transfer);
    out_.bytes += bytes;
    out_.compressed_rounds += codec != CodecId::kF32;
    if (s_ == Strategy::kAdaptive) {
      // What the passive estimator reports for this round: the next round's decision input.
      const LinkSample sample{link.rate_Bps * (0.95 + 0.1 * noise.uniform()), link.rtt_ratio, link.loss,
                              static_cast<uint64_t>(4 * n_), static_cast<Nanos>(kCompute * kSecond)};
      const bool was_on = decision_.codec != CodecId::kF32;
      decision_ = policy_.update(sample);
      out_.switches += decision_.changed;
      out_.on_off_switches += was_on != (decision_.codec != CodecId::kF32);
    }
  }

  const Outcome& outcome() const { return out_; }

 private:
  Strategy s_;
  size_t n_;
  Encoder enc_;
  ResidualStore res_;
  std::vector<uint8_t> buf_;
  std::vector<float> dec_;
  AdaptivePolicy policy_;
  Decision decision_{CodecId::kF32, 0, 0, false};
  Outcome out_;
};

double rel_error(const Outcome& o) { return std::sqrt(o.err2 / o.norm2); }
double drift(const Outcome& o) {
  double num = 0, den = 0;
  for (size_t i = 0; i < o.sum_sent.size(); ++i) {
    num += (o.sum_sent[i] - o.sum_true[i]) * (o.sum_sent[i] - o.sum_true[i]);
    den += o.sum_true[i] * o.sum_true[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = bench::parse_arith_args(argc, argv);
  const int rounds = args.quick ? 80 : 300;
  const size_t n = args.quick ? 131072 : 524288;  // 0.5 / 2 MB of float32 per round
  const double scale = static_cast<double>(n) / 524288.0;

  Rng trace_rng(2024), grad_rng(7), noise_rng(11);
  const auto trace = make_trace(rounds, scale, trace_rng);
  std::vector<float> s(n), m(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    s[i] = static_cast<float>(1e-3 * std::exp(1.5 * gauss(grad_rng)));
    m[i] = static_cast<float>(student_t3(grad_rng));
  }
  Sender never(Strategy::kNever, n), always(Strategy::kAlways, n), adaptive(Strategy::kAdaptive, n);
  const double rho = 0.8, innov = std::sqrt(1 - rho * rho);
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < n; ++i) {
      m[i] = static_cast<float>(rho * m[i] + innov * student_t3(grad_rng));
      g[i] = s[i] * m[i];
    }
    const auto& link = trace[static_cast<size_t>(r)];
    const bool congested = r >= warm_rounds(rounds) && r < congested_end(rounds);
    never.round(g, link, congested, noise_rng);
    always.round(g, link, congested, noise_rng);
    adaptive.round(g, link, congested, noise_rng);
  }

  const Outcome &nv = never.outcome(), &al = always.outcome(), &ad = adaptive.outcome();
  std::printf("adaptive: %d rounds, %.1f MB float32 per round in %zu-element chunks, compute %.0f ms/round\n"
              "(overlapping communication), trace: clear 10%% / congested 45%% / clear 45%%. Virtual time.\n"
              "Gradients: synthetic heavy-tailed (log-normal scale x Student-t), AR(1) rho 0.8 across rounds.\n"
              "always-on = top-k %.0f%% with error feedback; adaptive ladder f32/bf16/int8/top-k 5,2,1%%.\n\n",
              rounds, 4.0 * static_cast<double>(n) / 1e6, kChunk, kCompute * 1e3, kAlwaysTopK * 100);
  bench::Table t({"strategy", "round time s", "congested part s", "transfer s", "MB sent", "rel. error", "drift", "compressed rounds"});
  for (auto [name, o] : {std::pair<const char*, const Outcome*>{"never compress", &nv}, {"always top-k", &al}, {"adaptive", &ad}})
    t.row({name, bench::fmt(o->round_time), bench::fmt(o->congested_round_time), bench::fmt(o->transfer_time), bench::fmt(o->bytes / 1e6, "%.1f"),
           bench::fmt(rel_error(*o), "%.4f"), bench::fmt(drift(*o), "%.4f"), std::to_string(o->compressed_rounds)});
  t.print();
  std::printf("\nround time = sum over rounds of max(compute, transfer); transfer = bytes / rate + RTT.\n"
              "speedup_vs_never_compress is over the congested rounds (whole trace: %.2fx).\n"
              "adaptive changed level %d times, of which %d turned compression on or off.\n",
              nv.round_time / ad.round_time, ad.switches, ad.on_off_switches);
  bench::JsonLine j("adaptive");
  j.num("speedup_vs_never_compress", nv.congested_round_time / ad.congested_round_time)
      .num("speedup_vs_never_compress_whole_trace", nv.round_time / ad.round_time)
      .num("time_vs_always_compress", ad.round_time / al.round_time)
      .num("error_vs_always_compress", rel_error(ad) / rel_error(al))
      .num("transfer_only_vs_always_compress", ad.transfer_time / al.transfer_time)
      .num("adaptive_rel_error", rel_error(ad))
      .num("always_rel_error", rel_error(al))
      .num("rounds", rounds);
  j.print();
  return 0;
}
