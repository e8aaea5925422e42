#include "aggregate/accumulator.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "aggregate/add_kernels.h"
#include "common/rng.h"

namespace sg::agg {
namespace {

std::vector<Isa> supported_isas() {
  std::vector<Isa> v;
  for (int i = 0; i < kIsaCount; ++i)
    if (isa_supported(static_cast<Isa>(i))) v.push_back(static_cast<Isa>(i));
  return v;
}

// Gradient-like floats with a wide exponent range, so rounding of every add matters.
std::vector<float> random_floats(Rng& rng, size_t n) {
  std::vector<float> v(n);
  for (auto& x : v) {
    const double mag = std::ldexp(rng.uniform(), -static_cast<int>(rng.below(20)));
    x = static_cast<float>(rng.chance(0.5) ? mag : -mag);
  }
  return v;
}

// Places floats at byte offset `misalign` in a buffer, as they would sit inside a packet.
std::vector<uint8_t> as_payload(const std::vector<float>& f, size_t misalign) {
  std::vector<uint8_t> b(misalign + f.size() * 4 + 8, 0xEE);
  std::memcpy(b.data() + misalign, f.data(), f.size() * 4);
  return b;
}

TEST(Accumulator, LayoutSplitsIntoChunksWithShortLast) {
  Accumulator acc(10, 4);
  EXPECT_EQ(acc.chunk_count(), 3u);
  EXPECT_EQ(acc.chunk_elems(0), 4u);
  EXPECT_EQ(acc.chunk_elems(2), 2u);
  EXPECT_EQ(acc.chunk_elems(3), 0u);
  for (float v : acc.values()) EXPECT_EQ(v, 0.0f);
}

TEST(Accumulator, AddsPayloadsAndCountsContributors) {
  Accumulator acc(6, 3);
  const std::vector<float> a{1, 2, 3}, b{10, 20, 30};
  ASSERT_EQ(acc.add(1, std::span(reinterpret_cast<const uint8_t*>(a.data()), 12)), AggError::kOk);
  ASSERT_EQ(acc.add(1, std::span(reinterpret_cast<const uint8_t*>(b.data()), 12), 4), AggError::kOk);
  EXPECT_EQ(acc.contributors(1), 5u);  // 1 worker + a subtree of 4
  EXPECT_EQ(acc.contributors(0), 0u);
  EXPECT_EQ(acc.chunk_values(1)[0], 11.0f);
  EXPECT_EQ(acc.chunk_values(1)[2], 33.0f);
  EXPECT_EQ(acc.chunk_values(0)[0], 0.0f);
}

TEST(Accumulator, UnalignedPayloadGivesSameResult) {
  Rng rng(7);
  const auto f = random_floats(rng, 37);
  for (Isa isa : supported_isas()) {
    Accumulator ref(37, 37, isa);
    auto p0 = as_payload(f, 0);
    ASSERT_EQ(ref.add(0, std::span(p0.data(), 37 * 4)), AggError::kOk);
    for (size_t mis = 1; mis < 8; ++mis) {
      Accumulator acc(37, 37, isa);
      auto p = as_payload(f, mis);
      ASSERT_EQ(acc.add(0, std::span<const uint8_t>(p.data() + mis, 37 * 4)), AggError::kOk);
      EXPECT_EQ(0, std::memcmp(acc.values().data(), ref.values().data(), 37 * 4)) << isa_name(isa) << " mis " << mis;
    }
  }
}

// Every ISA must give bit-identical sums and means for the same input order, for every
// length (full vectors, unrolled blocks and tails).
TEST(Accumulator, AllIsasBitIdenticalForAnyLength) {
  const auto isas = supported_isas();
  for (size_t n : {1u, 3u, 7u, 8u, 15u, 16u, 17u, 31u, 33u, 63u, 64u, 65u, 127u, 200u, 2048u, 2051u}) {
    Rng rng(n);
    std::vector<std::vector<uint8_t>> payloads;
    for (int c = 0; c < 5; ++c) payloads.push_back(as_payload(random_floats(rng, n), c % 4));
    std::vector<std::vector<float>> results;
    for (Isa isa : isas) {
      Accumulator acc(n, n, isa);
      for (int c = 0; c < 5; ++c)
        ASSERT_EQ(acc.add(0, std::span<const uint8_t>(payloads[c].data() + c % 4, n * 4)), AggError::kOk);
      acc.finalise(Finalise::kMean);
      results.emplace_back(acc.values().begin(), acc.values().end());
    }
    for (size_t k = 1; k < results.size(); ++k)
      EXPECT_EQ(0, std::memcmp(results[k].data(), results[0].data(), n * 4))
          << "n=" << n << " " << isa_name(isas[k]) << " vs " << isa_name(isas[0]);
  }
}

TEST(Accumulator, KernelsMatchPlainFloatAddition) {
  Rng rng(3);
  const auto a = random_floats(rng, 100), b = random_floats(rng, 100);
  for (Isa isa : supported_isas()) {
    std::vector<float> acc = a;
    add_kernels(isa).add(acc.data(), reinterpret_cast<const uint8_t*>(b.data()), 100);
    for (size_t i = 0; i < 100; ++i) {
      volatile float expect = a[i] + b[i];  // one rounding, no fusion
      EXPECT_EQ(std::bit_cast<uint32_t>(acc[i]), std::bit_cast<uint32_t>(static_cast<float>(expect)));
    }
  }
}

TEST(Accumulator, TailNeverWritesIntoTheNextChunk) {
  for (Isa isa : supported_isas()) {
    Accumulator acc(34, 17, isa);  // 17: one full AVX-512 vector + a 1-element tail
    std::vector<float> ones(17, 1.0f);
    ASSERT_EQ(acc.add(0, std::span(reinterpret_cast<const uint8_t*>(ones.data()), 68)), AggError::kOk);
    for (float v : acc.chunk_values(0)) EXPECT_EQ(v, 1.0f);
    for (float v : acc.chunk_values(1)) EXPECT_EQ(v, 0.0f) << isa_name(isa);
  }
}

TEST(Accumulator, MeanDividesEachChunkByItsOwnCount) {
  Accumulator acc(6, 2);
  const std::vector<float> v{6, 9}, two{12, 18};
  const auto bytes = std::span(reinterpret_cast<const uint8_t*>(v.data()), 8);
  ASSERT_EQ(acc.add(0, bytes), AggError::kOk);
  // a subtree's partial sum of 2 contributions: chunk 0 holds 3, sum 18, 27
  ASSERT_EQ(acc.add(0, std::span(reinterpret_cast<const uint8_t*>(two.data()), 8), 2), AggError::kOk);
  ASSERT_EQ(acc.add(1, bytes), AggError::kOk);     // chunk 1: 1 contributor
  // chunk 2: nothing arrived (a bubble); stays zero rather than 0/0.
  acc.finalise(Finalise::kMean);
  EXPECT_EQ(acc.chunk_values(0)[0], 6.0f);
  EXPECT_EQ(acc.chunk_values(0)[1], 9.0f);
  EXPECT_EQ(acc.chunk_values(1)[0], 6.0f);
  EXPECT_EQ(acc.chunk_values(2)[0], 0.0f);
  EXPECT_EQ(acc.chunk_values(2)[1], 0.0f);
}

TEST(Accumulator, SumLeavesTheSums) {
  Accumulator acc(2, 2);
  const std::vector<float> v{1.5f, -2};
  const auto bytes = std::span(reinterpret_cast<const uint8_t*>(v.data()), 8);
  ASSERT_EQ(acc.add(0, bytes), AggError::kOk);
  ASSERT_EQ(acc.add(0, bytes), AggError::kOk);
  acc.finalise(Finalise::kSum);
  EXPECT_EQ(acc.chunk_values(0)[0], 3.0f);
  EXPECT_EQ(acc.chunk_values(0)[1], -4.0f);
}

TEST(Accumulator, BadInputIsRejectedAndChangesNothing) {
  Accumulator acc(5, 2);  // chunks of 2, 2, 1
  const std::vector<float> v{1, 2, 3};
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  EXPECT_EQ(acc.add(3, std::span(p, 8)), AggError::kChunkIndex);
  EXPECT_EQ(acc.add(UINT32_MAX, std::span(p, 8)), AggError::kChunkIndex);
  EXPECT_EQ(acc.add(0, std::span(p, 12)), AggError::kLength);   // too long
  EXPECT_EQ(acc.add(0, std::span(p, 7)), AggError::kLength);    // not whole floats
  EXPECT_EQ(acc.add(2, std::span(p, 8)), AggError::kLength);    // last chunk holds 1
  EXPECT_EQ(acc.add(0, std::span(p, 8), 0), AggError::kContributors);
  ASSERT_EQ(acc.add(0, std::span(p, 8), UINT32_MAX - 1), AggError::kOk);
  EXPECT_EQ(acc.add(0, std::span(p, 8), 2), AggError::kContributors);  // would overflow
  EXPECT_EQ(acc.contributors(0), UINT32_MAX - 1);
  EXPECT_EQ(acc.chunk_values(0)[0], 1.0f);  // only the accepted add landed
  for (uint32_t c = 1; c < 3; ++c) EXPECT_EQ(acc.contributors(c), 0u);
  EXPECT_EQ(acc.add(2, std::span(p, 4)), AggError::kOk);
}

TEST(Accumulator, ResetClearsSumsAndCounts) {
  Accumulator acc(4, 4);
  const std::vector<float> v{1, 2, 3, 4};
  ASSERT_EQ(acc.add(0, std::span(reinterpret_cast<const uint8_t*>(v.data()), 16)), AggError::kOk);
  acc.reset();
  EXPECT_EQ(acc.contributors(0), 0u);
  for (float x : acc.values()) EXPECT_EQ(x, 0.0f);
}

// reset() marks chunks fresh instead of zeroing the sums: the next round's first add must
// write, not add to what the last round left.
TEST(Accumulator, FirstContributionAfterResetReplacesLastRoundsSums) {
  Accumulator acc(6, 3);
  const std::vector<float> a{1, 2, 3}, b{10, 20, 30}, c{-4, 5, -6};
  const auto bytes = [](const std::vector<float>& v) { return std::span(reinterpret_cast<const uint8_t*>(v.data()), 12); };
  ASSERT_EQ(acc.add(0, bytes(a)), AggError::kOk);
  ASSERT_EQ(acc.add(0, bytes(b)), AggError::kOk);
  ASSERT_EQ(acc.add(1, bytes(b)), AggError::kOk);
  acc.reset();
  ASSERT_EQ(acc.add(0, bytes(c), 2), AggError::kOk);
  EXPECT_EQ(acc.contributors(0), 2u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(acc.storage()[i], c[i]);  // written: complete without zeroing
  ASSERT_EQ(acc.add(0, bytes(a)), AggError::kOk);                      // the second adds
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(acc.chunk_values(0)[i], c[i] + a[i]);
  // Chunk 1 got nothing this round: every way of reading it gives zeros.
  for (float x : acc.chunk_values(1)) EXPECT_EQ(x, 0.0f);
  EXPECT_EQ(acc.values()[3], 0.0f);
}

TEST(Accumulator, AnUntouchedChunkReadsAsZeroThroughEveryPath) {
  const std::vector<float> v{7, 8, 9, 10};
  const auto p = std::span(reinterpret_cast<const uint8_t*>(v.data()), 16);
  for (int path = 0; path < 4; ++path) {
    Accumulator acc(8, 4);
    ASSERT_EQ(acc.add(1, p), AggError::kOk);
    acc.reset();
    switch (path) {
      case 0: acc.finalise_chunk(1, Finalise::kMean); break;
      case 1: acc.finalise(Finalise::kSum); break;
      case 2: for (float& x : acc.chunk_data(1)) x *= 3.0f; break;  // scaling a hole (SiteSync) keeps zeros
      case 3: (void)acc.values(); break;
    }
    for (size_t i = 4; i < 8; ++i) EXPECT_EQ(acc.storage()[i], 0.0f) << "path " << path;
    EXPECT_EQ(acc.contributors(1), 0u);
  }
}

TEST(Accumulator, DecodeTargetSaysOverwriteUntilTheChunkIsCounted) {
  Accumulator acc(8, 4);
  EXPECT_TRUE(acc.decode_target(0).overwrite);
  EXPECT_EQ(acc.decode_target(0).data.size(), 4u);
  acc.decode_target(0).data[0] = 5.0f;
  acc.count(0, 1);
  EXPECT_FALSE(acc.decode_target(0).overwrite);
  EXPECT_EQ(acc.chunk_values(0)[0], 5.0f);
  EXPECT_TRUE(acc.decode_target(1).overwrite);
  acc.reset();
  EXPECT_TRUE(acc.decode_target(0).overwrite);
}

#ifndef NDEBUG
// Debug builds poison fresh chunks, so any reader that skips the zeroing gets NaN into a
// result and every exact-mean test upstream (sync, dataplane, system) fails.
TEST(Accumulator, FreshChunksHoldNaNInDebugBuilds) {
  Accumulator acc(8, 4);
  for (float x : acc.storage()) EXPECT_TRUE(std::isnan(x));
  (void)acc.chunk_values(0);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(acc.storage()[i], 0.0f);
  for (size_t i = 4; i < 8; ++i) EXPECT_TRUE(std::isnan(acc.storage()[i]));
}
#endif

TEST(Accumulator, RejectsEmptyLayout) {
  EXPECT_THROW(Accumulator(0, 4), std::invalid_argument);
  EXPECT_THROW(Accumulator(4, 0), std::invalid_argument);
}

}  // namespace
}  // namespace sg::agg
