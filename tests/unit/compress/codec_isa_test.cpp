// Every ISA must produce the same encoded bytes, residuals and decoded floats.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "compress/codec.h"
#include "compress/encoder.h"
#include "test_util.h"

namespace sg::compress {
namespace {

struct Output {
  std::vector<uint8_t> bytes;
  std::vector<float> residual, decoded, added;
};

Output run(agg::Isa isa, CodecId c, const std::vector<float>& g, const std::vector<float>& r0, size_t misalign) {
  Output o;
  Encoder enc(g.size(), isa);
  o.residual = r0;
  std::vector<uint8_t> buf(max_encoded_size(c, g.size()) + misalign);
  const EncodeResult e = enc.encode(c, g, std::span(buf.data() + misalign, buf.size() - misalign), o.residual, 0.1f);
  EXPECT_EQ(e.err, CodecError::kOk);
  o.bytes.assign(buf.begin() + static_cast<std::ptrdiff_t>(misalign), buf.begin() + static_cast<std::ptrdiff_t>(misalign + e.bytes));
  const std::span<const uint8_t> payload(buf.data() + misalign, e.bytes);  // decode in place, unaligned
  o.decoded.assign(g.size(), 0.0f);
  EXPECT_EQ(decode(c, payload, o.decoded, isa), CodecError::kOk);
  o.added = r0;  // any accumulator contents
  EXPECT_EQ(decode_add(c, payload, o.added, isa), CodecError::kOk);
  return o;
}

TEST(CodecIsa, AllIsasBitIdentical) {
  const auto isas = test::supported_isas();
  for (CodecId c : {CodecId::kF32, CodecId::kF16, CodecId::kBf16, CodecId::kInt8, CodecId::kTopK}) {
    for (size_t n : {1u, 5u, 8u, 15u, 16u, 17u, 31u, 32u, 33u, 100u, 2048u, 2053u}) {
      Rng rng(n * 7 + static_cast<size_t>(c));
      const auto g = test::gradient(rng, n);
      const auto r0 = test::gradient(rng, n, 1e-4);
      const Output ref = run(isas[0], c, g, r0, n % 3);
      for (size_t k = 1; k < isas.size(); ++k) {
        const Output o = run(isas[k], c, g, r0, (n + k) % 4);
        const auto where = std::string(codec_name(c)) + " n=" + std::to_string(n) + " " + std::string(agg::isa_name(isas[k]));
        EXPECT_EQ(o.bytes, ref.bytes) << where;
        EXPECT_EQ(0, std::memcmp(o.residual.data(), ref.residual.data(), 4 * n)) << where;
        EXPECT_EQ(0, std::memcmp(o.decoded.data(), ref.decoded.data(), 4 * n)) << where;
        EXPECT_EQ(0, std::memcmp(o.added.data(), ref.added.data(), 4 * n)) << where;
      }
    }
  }
}

}  // namespace
}  // namespace sg::compress
