// Compressed chunks added straight into the accumulator equal decode-then-add, and bad
// payloads change neither sums nor counts.
#include "compress/accumulate.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "compress/encoder.h"
#include "test_util.h"

namespace sg::compress {
namespace {

TEST(AddEncoded, EqualsDecodeThenAddForEveryCodecAndIsa) {
  const size_t n = 300, chunk = 100;
  for (agg::Isa isa : test::supported_isas()) {
    for (CodecId c : {CodecId::kF32, CodecId::kF16, CodecId::kBf16, CodecId::kInt8, CodecId::kTopK}) {
      Rng rng(5);
      agg::Accumulator acc(n, chunk, isa);
      std::vector<float> expect(n, 0.0f);
      Encoder enc(chunk, isa);
      std::vector<uint8_t> buf(max_encoded_size(c, chunk));
      std::vector<float> dec(chunk);
      for (int contributor = 0; contributor < 3; ++contributor) {
        for (uint32_t ch = 0; ch < 3; ++ch) {
          const auto g = test::gradient(rng, chunk);
          const EncodeResult e = enc.encode(c, g, buf, {}, 0.1f);
          ASSERT_EQ(e.err, CodecError::kOk);
          const std::span<const uint8_t> p(buf.data(), e.bytes);
          ASSERT_EQ(add_encoded(acc, ch, c, p, 2), CodecError::kOk);
          ASSERT_EQ(decode(c, p, dec, isa), CodecError::kOk);
          for (size_t i = 0; i < chunk; ++i) expect[ch * chunk + i] += dec[i];
        }
      }
      EXPECT_EQ(0, std::memcmp(acc.values().data(), expect.data(), 4 * n)) << codec_name(c) << " " << agg::isa_name(isa);
      for (uint32_t ch = 0; ch < 3; ++ch) EXPECT_EQ(acc.contributors(ch), 6u);
    }
  }
}

// The round's first chunk is decoded over the stale sums of the last round (the accumulator
// zeroes nothing at reset), later ones add.
TEST(AddEncoded, FirstChunkAfterResetIsWrittenThenAdded) {
  const size_t chunk = 64;
  for (CodecId c : {CodecId::kF32, CodecId::kF16, CodecId::kBf16, CodecId::kInt8, CodecId::kTopK}) {
    Rng rng(9);
    agg::Accumulator acc(2 * chunk, chunk);
    Encoder enc(chunk, acc.isa());
    std::vector<uint8_t> buf(max_encoded_size(c, chunk));
    std::vector<float> dec(chunk), expect(chunk, 0.0f);
    const auto stale = test::gradient(rng, chunk);
    ASSERT_EQ(acc.add(0, std::span(reinterpret_cast<const uint8_t*>(stale.data()), 4 * chunk)), agg::AggError::kOk);
    acc.reset();
    for (int k = 0; k < 2; ++k) {
      const auto g = test::gradient(rng, chunk);
      const EncodeResult e = enc.encode(c, g, buf, {}, 0.1f);
      ASSERT_EQ(e.err, CodecError::kOk);
      const std::span<const uint8_t> p(buf.data(), e.bytes);
      ASSERT_EQ(add_encoded(acc, 0, c, p), CodecError::kOk);
      ASSERT_EQ(decode(c, p, dec, acc.isa()), CodecError::kOk);
      for (size_t i = 0; i < chunk; ++i) expect[i] = k == 0 ? dec[i] : expect[i] + dec[i];
    }
    EXPECT_EQ(0, std::memcmp(acc.chunk_values(0).data(), expect.data(), 4 * chunk)) << codec_name(c);
    EXPECT_EQ(acc.contributors(0), 2u);
    for (float x : acc.chunk_values(1)) EXPECT_EQ(x, 0.0f);
  }
}

TEST(AddEncoded, ErrorsLeaveTheAccumulatorUnchanged) {
  agg::Accumulator acc(8, 4);
  std::vector<uint8_t> good(8 + 8);  // top-k n=4 k=1 idx 2 val 1.0
  const uint32_t n = 4, k = 1, idx = 2;
  const float v = 1.0f;
  std::memcpy(good.data(), &n, 4);
  std::memcpy(good.data() + 4, &k, 4);
  std::memcpy(good.data() + 8, &idx, 4);
  std::memcpy(good.data() + 12, &v, 4);
  auto bad = good;
  const uint32_t bad_idx = 4;
  std::memcpy(bad.data() + 8, &bad_idx, 4);
  EXPECT_EQ(add_encoded(acc, 2, CodecId::kTopK, good), CodecError::kChunkIndex);
  EXPECT_EQ(add_encoded(acc, 0, CodecId::kTopK, good, 0), CodecError::kContributors);
  EXPECT_EQ(add_encoded(acc, 0, CodecId::kTopK, bad), CodecError::kIndexOutOfRange);
  EXPECT_EQ(add_encoded(acc, 0, CodecId::kF16, std::vector<uint8_t>(6)), CodecError::kLengthMismatch);
  EXPECT_EQ(acc.contributors(0), 0u);
  for (float x : acc.values()) EXPECT_EQ(x, 0.0f);
  EXPECT_EQ(add_encoded(acc, 1, CodecId::kTopK, good), CodecError::kOk);
  EXPECT_EQ(acc.contributors(1), 1u);
  EXPECT_EQ(acc.chunk_values(1)[2], 1.0f);
}

}  // namespace
}  // namespace sg::compress
