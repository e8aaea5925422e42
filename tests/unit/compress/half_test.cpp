// The scalar conversions are the reference of every codec; check them against known values
// and, exhaustively, against the F16C/AVX-512 hardware through the kernels.
#include "compress/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <vector>

#include "common/rng.h"
#include "compress/codec_kernels.h"
#include "test_util.h"

namespace sg::compress {
namespace {

TEST(Half, KnownValues) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);   // below the halfway point: rounds down
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);   // halfway, ties to even: overflows to inf
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);   // smallest subnormal
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);   // halfway to zero: ties to even
  EXPECT_EQ(float_to_half(0x1.8p-25f), 0x0001);
  EXPECT_EQ(float_to_half(0x1p-14f), 0x0400);   // smallest normal
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);              // tie -> even (down)
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);          // tie -> even (up)
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(half_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::bit_cast<float>(0x7f800001u)))));
}

TEST(Half, EveryHalfDecodesIdenticallyOnEveryIsa) {
  std::vector<uint8_t> all(2 * 65536);
  for (uint32_t h = 0; h < 65536; ++h) std::memcpy(&all[2 * h], &h, 2);
  for (bool bf : {false, true}) {
    std::vector<float> ref(65536);
    for (uint32_t h = 0; h < 65536; ++h) ref[h] = bf ? bf16_to_float(static_cast<uint16_t>(h)) : half_to_float(static_cast<uint16_t>(h));
    for (agg::Isa isa : test::supported_isas()) {
      std::vector<float> out(65536);
      const auto& k = codec_kernels(isa);
      (bf ? k.bf16_decode : k.f16_decode)(all.data(), out.data(), 65536, false);
      ASSERT_EQ(0, std::memcmp(out.data(), ref.data(), out.size() * 4)) << agg::isa_name(isa) << (bf ? " bf16" : " f16");
    }
  }
}

// Random bit patterns cover NaNs, infinities, subnormals and every rounding case.
TEST(Half, EncodeMatchesScalarOnRandomBitPatterns) {
  Rng rng(11);
  const size_t n = 1 << 16;
  std::vector<float> in(n);
  for (auto& x : in) x = std::bit_cast<float>(static_cast<uint32_t>(rng.next()));
  // and values near the half range and subnormal edges
  for (size_t i = 0; i < 4096; ++i) in[i] = std::ldexp(static_cast<float>(rng.uniform() * 2 - 1), static_cast<int>(rng.below(48)) - 30);
  for (bool bf : {false, true}) {
    std::vector<uint8_t> ref(2 * n);
    const auto& s = codec_kernels(agg::Isa::kScalar);
    (bf ? s.bf16_encode : s.f16_encode)(in.data(), nullptr, ref.data(), n);
    for (agg::Isa isa : test::supported_isas()) {
      std::vector<uint8_t> out(2 * n);
      const auto& k = codec_kernels(isa);
      (bf ? k.bf16_encode : k.f16_encode)(in.data(), nullptr, out.data(), n);
      ASSERT_EQ(0, std::memcmp(out.data(), ref.data(), out.size())) << agg::isa_name(isa) << (bf ? " bf16" : " f16");
    }
  }
}

}  // namespace
}  // namespace sg::compress
