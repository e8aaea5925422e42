// Error feedback: what a lossy codec drops is carried in the residual and sent later, so the
// sum of decoded updates tracks the sum of true gradients; without it top-k loses mass.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "compress/codec.h"
#include "compress/encoder.h"
#include "compress/residual_store.h"
#include "test_util.h"

namespace sg::compress {
namespace {

struct Totals {
  std::vector<double> sent, truth;
};

// `rounds` rounds of a correlated gradient through `codec` (residual kept in a store of
// 2 chunks); returns the summed decoded updates and summed true gradients.
Totals run(CodecId codec, float ratio, bool feedback, int rounds, ResidualStore* store_out = nullptr) {
  const size_t n = 1024, chunk = 512;
  Rng rng(99);
  Encoder enc(chunk);
  ResidualStore store(n, chunk);
  std::vector<float> bias = test::gradient(rng, n);  // a persistent direction, like a real gradient
  Totals t{std::vector<double>(n), std::vector<double>(n)};
  std::vector<uint8_t> buf(max_encoded_size(codec, chunk));
  std::vector<float> dec(chunk);
  for (int round = 0; round < rounds; ++round) {
    const auto noise = test::gradient(rng, n, 5e-3);
    for (uint32_t c = 0; c < 2; ++c) {
      std::vector<float> g(chunk);
      for (size_t i = 0; i < chunk; ++i) g[i] = bias[c * chunk + i] + noise[c * chunk + i];
      auto res = feedback ? store.residual(c) : std::span<float>{};
      const EncodeResult e = enc.encode(codec, g, buf, res, ratio);
      EXPECT_EQ(e.err, CodecError::kOk);
      EXPECT_EQ(decode(codec, std::span(buf.data(), e.bytes), dec), CodecError::kOk);
      for (size_t i = 0; i < chunk; ++i) {
        t.sent[c * chunk + i] += dec[i];
        t.truth[c * chunk + i] += g[i];
      }
    }
  }
  if (store_out) *store_out = store;
  return t;
}

double rel_err(const Totals& t) {
  double num = 0, den = 0;
  for (size_t i = 0; i < t.sent.size(); ++i) {
    num += (t.sent[i] - t.truth[i]) * (t.sent[i] - t.truth[i]);
    den += t.truth[i] * t.truth[i];
  }
  return std::sqrt(num / den);
}

TEST(ErrorFeedback, TopKSumConvergesToTrueSum) {
  const double e50 = rel_err(run(CodecId::kTopK, 0.01f, true, 50));
  const double e400 = rel_err(run(CodecId::kTopK, 0.01f, true, 400));
  const double no_fb = rel_err(run(CodecId::kTopK, 0.01f, false, 400));
  EXPECT_LT(e400, 0.1);
  EXPECT_LT(e400, e50);        // the residual is bounded while the total grows
  EXPECT_GT(no_fb, 0.5);       // without feedback most of the gradient is simply lost
}

TEST(ErrorFeedback, SentPlusResidualEqualsTruth) {
  ResidualStore store(1024, 512);
  const Totals t = run(CodecId::kTopK, 0.02f, true, 100, &store);
  const auto r = store.all();
  double worst = 0, scale = 0;
  for (size_t i = 0; i < t.sent.size(); ++i) {
    worst = std::max(worst, std::fabs(t.sent[i] + r[i] - t.truth[i]));
    scale = std::max(scale, std::fabs(t.truth[i]));
  }
  EXPECT_LT(worst, 1e-5 * scale);  // only float rounding separates them
}

TEST(ErrorFeedback, QuantisersWithFeedbackBeatWithout) {
  for (CodecId c : {CodecId::kInt8, CodecId::kBf16, CodecId::kF16}) {
    const double fb = rel_err(run(c, 0, true, 200));
    const double plain = rel_err(run(c, 0, false, 200));
    EXPECT_LT(fb, plain) << codec_name(c);
    EXPECT_LT(fb, 1e-3) << codec_name(c);
  }
}

TEST(ErrorFeedback, F32FlushesTheResidual) {
  Encoder enc(8);
  std::vector<float> g{1, -2, 3, -4, 5, -6, 7, -8}, r(8, 0.0f);
  std::vector<uint8_t> buf(max_encoded_size(CodecId::kTopK, 8));
  ASSERT_EQ(enc.encode(CodecId::kTopK, g, buf, r, 0.25f).err, CodecError::kOk);  // sends -8 and 7
  EXPECT_EQ(r, (std::vector<float>{1, -2, 3, -4, 5, -6, 0, 0}));
  const std::vector<float> zero(8, 0.0f);
  const EncodeResult e = enc.encode(CodecId::kF32, zero, buf, r);
  ASSERT_EQ(e.err, CodecError::kOk);
  std::vector<float> out(8);
  ASSERT_EQ(decode(CodecId::kF32, std::span(buf.data(), e.bytes), out), CodecError::kOk);
  EXPECT_EQ(out, (std::vector<float>{1, -2, 3, -4, 5, -6, 0, 0}));  // the delayed part arrives
  EXPECT_EQ(r, zero);
}

}  // namespace
}  // namespace sg::compress
