// Round trips through encode and decode: error bounds per codec, sizes, top-k selection.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "compress/codec.h"
#include "compress/encoder.h"
#include "test_util.h"

namespace sg::compress {
namespace {

std::vector<float> roundtrip(CodecId c, const std::vector<float>& g, float ratio = 0.01f, size_t* bytes = nullptr) {
  Encoder enc(g.size());
  std::vector<uint8_t> out(max_encoded_size(c, g.size()));
  const EncodeResult r = enc.encode(c, g, out, {}, ratio);
  EXPECT_EQ(r.err, CodecError::kOk);
  EXPECT_LE(r.bytes, max_encoded_size(c, g.size()));
  if (bytes) *bytes = r.bytes;
  std::vector<float> back(g.size(), -7.0f);
  EXPECT_EQ(decode(c, std::span(out.data(), r.bytes), back), CodecError::kOk);
  return back;
}

TEST(CodecRoundTrip, F32IsExact) {
  Rng rng(1);
  const auto g = test::gradient(rng, 1000);
  EXPECT_EQ(roundtrip(CodecId::kF32, g), g);
}

TEST(CodecRoundTrip, F16WithinHalfAnUlp) {
  Rng rng(2);
  const auto g = test::gradient(rng, 4099, 100.0);  // normal half range
  size_t bytes = 0;
  const auto back = roundtrip(CodecId::kF16, g, 0, &bytes);
  EXPECT_EQ(bytes, 2 * g.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_LE(std::fabs(back[i] - g[i]), std::ldexp(std::fabs(g[i]), -11)) << i;
}

TEST(CodecRoundTrip, F16SaturatesInsteadOfInfinity) {
  const std::vector<float> g{1e6f, -1e6f, 65504.0f, 3.0f};
  const auto back = roundtrip(CodecId::kF16, g);
  EXPECT_EQ(back[0], 65504.0f);
  EXPECT_EQ(back[1], -65504.0f);
  EXPECT_EQ(back[2], 65504.0f);
  EXPECT_EQ(back[3], 3.0f);
}

TEST(CodecRoundTrip, Bf16WithinHalfAnUlp) {
  Rng rng(3);
  const auto g = test::gradient(rng, 4099, 1e-3);
  const auto back = roundtrip(CodecId::kBf16, g);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_LE(std::fabs(back[i] - g[i]), std::ldexp(std::fabs(g[i]), -8)) << i;
}

TEST(CodecRoundTrip, Int8WithinHalfAStep) {
  Rng rng(4);
  const auto g = test::gradient(rng, 2051);
  size_t bytes = 0;
  const auto back = roundtrip(CodecId::kInt8, g, 0, &bytes);
  EXPECT_EQ(bytes, kInt8HeaderBytes + g.size());
  float m = 0;
  for (float x : g) m = std::max(m, std::fabs(x));
  const float step = m / 127.0f;
  for (size_t i = 0; i < g.size(); ++i) EXPECT_LE(std::fabs(back[i] - g[i]), 0.5f * step * 1.0001f) << i;
  // the largest element is represented exactly up to the scale's rounding
  const size_t imax = static_cast<size_t>(std::max_element(g.begin(), g.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }) - g.begin());
  EXPECT_NEAR(back[imax], g[imax], 1e-6 * m);
}

TEST(CodecRoundTrip, Int8AllZeroChunk) {
  const std::vector<float> g(33, 0.0f);
  EXPECT_EQ(roundtrip(CodecId::kInt8, g), g);
}

TEST(CodecRoundTrip, TopKKeepsExactlyTheLargestMagnitudes) {
  Rng rng(5);
  const auto g = test::gradient(rng, 2048);
  size_t bytes = 0;
  const auto back = roundtrip(CodecId::kTopK, g, 0.05f, &bytes);
  const size_t k = topk_count(2048, 0.05f);
  EXPECT_EQ(k, 102u);
  EXPECT_EQ(bytes, kTopKHeaderBytes + kTopKEntryBytes * k);
  std::vector<float> mags;
  for (float x : g) mags.push_back(std::fabs(x));
  std::sort(mags.begin(), mags.end(), std::greater<>());
  const float kth = mags[k - 1];
  size_t nonzero = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (back[i] != 0.0f) {
      ++nonzero;
      EXPECT_EQ(back[i], g[i]);  // values are sent exactly
      EXPECT_GE(std::fabs(g[i]), kth);
    } else {
      EXPECT_LE(std::fabs(g[i]), kth);
    }
  }
  EXPECT_EQ(nonzero, k);
}

TEST(CodecRoundTrip, TopKTiesAreDeterministicAndExactCount) {
  const std::vector<float> g(100, 0.25f);  // all tied
  const auto back = roundtrip(CodecId::kTopK, g, 0.1f);
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(back[i], i < 10 ? 0.25f : 0.0f) << i;  // first ties in index order
}

// Against a reference: stable sort by |x| descending (ties: lower index first), take k.
TEST(CodecRoundTrip, TopKMatchesSortReferenceOnManyDistributions) {
  Rng rng(21);
  for (int dist = 0; dist < 5; ++dist) {
    for (size_t n : {1u, 7u, 100u, 1000u, 2048u}) {
      std::vector<float> g(n);
      for (size_t i = 0; i < n; ++i) {
        float& x = g[i];
        switch (dist) {
          case 0: x = static_cast<float>(rng.uniform() - 0.5); break;                      // wide
          case 1: x = static_cast<float>(1.0 + 0.01 * rng.uniform()); break;                // one crowded bucket
          case 2: x = static_cast<float>(static_cast<int>(rng.below(5)) - 2) * 0.125f; break;  // many ties
          case 3: x = static_cast<float>(std::ldexp(rng.uniform(), -static_cast<int>(rng.below(30)))); break;
          // large only where the encoder samples (every n/256-th): the estimate is too high
          // and the encoder must fall back to all elements as candidates
          default: x = static_cast<float>((i % 8 == 0 ? 100.0 : 1.0) * (1 + rng.uniform())); break;
        }
      }
      for (float ratio : {0.01f, 0.05f, 0.3f, 1.0f}) {
        std::vector<size_t> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return std::fabs(g[a]) > std::fabs(g[b]); });
        const size_t k = topk_count(n, ratio);
        std::vector<float> expect(n, 0.0f);
        for (size_t j = 0; j < k; ++j) expect[order[j]] = g[order[j]];
        for (agg::Isa isa : test::supported_isas()) {
          Encoder enc(n, isa);
          std::vector<uint8_t> out(max_encoded_size(CodecId::kTopK, n));
          const EncodeResult e = enc.encode(CodecId::kTopK, g, out, {}, ratio);
          ASSERT_EQ(e.err, CodecError::kOk);
          std::vector<float> back(n);
          ASSERT_EQ(decode(CodecId::kTopK, std::span(out.data(), e.bytes), back), CodecError::kOk);
          ASSERT_EQ(back, expect) << "dist " << dist << " n " << n << " ratio " << ratio << " " << agg::isa_name(isa);
        }
      }
    }
  }
}

TEST(CodecRoundTrip, TopKCountRules) {
  EXPECT_EQ(topk_count(0, 0.5f), 0u);
  EXPECT_EQ(topk_count(10, 0.001f), 1u);  // never empty
  EXPECT_EQ(topk_count(10, 1.0f), 10u);
  EXPECT_EQ(topk_count(2048, 0.01f), 20u);
  EXPECT_EQ(max_encoded_size(CodecId::kTopK, 10), kTopKHeaderBytes + 10 * kTopKEntryBytes);
}

TEST(CodecRoundTrip, EncoderRejectsBadArguments) {
  Encoder enc(64);
  std::vector<float> g(64, 1.0f), r(63);
  std::vector<uint8_t> out(max_encoded_size(CodecId::kTopK, 64));
  EXPECT_EQ(enc.encode(CodecId::kTopK, g, out, {}, 0.0f).err, CodecError::kBadRatio);
  EXPECT_EQ(enc.encode(CodecId::kTopK, g, out, {}, 1.5f).err, CodecError::kBadRatio);
  EXPECT_EQ(enc.encode(CodecId::kTopK, g, out, {}, std::nanf("")).err, CodecError::kBadRatio);
  EXPECT_EQ(enc.encode(CodecId::kF16, g, out, r).err, CodecError::kLengthMismatch);
  EXPECT_EQ(enc.encode(CodecId::kF32, g, std::span(out.data(), 255)).err, CodecError::kOutputTooSmall);
  EXPECT_EQ(enc.encode(CodecId::kInt8, g, std::span(out.data(), 67)).err, CodecError::kOutputTooSmall);
  EXPECT_EQ(enc.encode(static_cast<CodecId>(9), g, out).err, CodecError::kUnknownCodec);
  std::vector<float> big(65, 1.0f);
  EXPECT_EQ(enc.encode(CodecId::kTopK, big, out, {}, 0.5f).err, CodecError::kLengthMismatch);  // > max_elems
  g[3] = INFINITY;
  EXPECT_EQ(enc.encode(CodecId::kInt8, g, out).err, CodecError::kNonFiniteInput);
}

}  // namespace
}  // namespace sg::compress
