// Decoding untrusted payloads: every malformed case gets its typed error and leaves the
// output untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "compress/codec.h"

namespace sg::compress {
namespace {

std::vector<uint8_t> topk_payload(uint32_t n, std::vector<uint32_t> idx, std::vector<float> val, uint32_t k_field = UINT32_MAX) {
  const uint32_t k = k_field == UINT32_MAX ? static_cast<uint32_t>(idx.size()) : k_field;
  std::vector<uint8_t> p(8 + 4 * idx.size() + 4 * val.size());
  std::memcpy(p.data(), &n, 4);
  std::memcpy(p.data() + 4, &k, 4);
  if (!idx.empty()) std::memcpy(p.data() + 8, idx.data(), 4 * idx.size());
  if (!val.empty()) std::memcpy(p.data() + 8 + 4 * idx.size(), val.data(), 4 * val.size());
  return p;
}

std::vector<uint8_t> int8_payload(float scale, std::vector<int8_t> q) {
  std::vector<uint8_t> p(4 + q.size());
  std::memcpy(p.data(), &scale, 4);
  if (!q.empty()) std::memcpy(p.data() + 4, q.data(), q.size());
  return p;
}

// Runs decode and decode_add; both must return `want` and, on error, leave `out` as it was.
void expect_error(CodecId c, const std::vector<uint8_t>& p, size_t n, CodecError want) {
  for (bool add : {false, true}) {
    std::vector<float> out(n, 42.0f);
    const CodecError got = add ? decode_add(c, p, out) : decode(c, p, out);
    EXPECT_EQ(got, want) << codec_name(c) << " add=" << add << ": " << codec_error_name(got);
    for (float v : out) EXPECT_EQ(v, 42.0f);
  }
}

TEST(CodecDecode, ValidTopKScattersValues) {
  const auto p = topk_payload(6, {1, 4}, {2.5f, -1.0f});
  std::vector<float> out(6, 9.0f);
  ASSERT_EQ(decode(CodecId::kTopK, p, out), CodecError::kOk);
  EXPECT_EQ(out, (std::vector<float>{0, 2.5f, 0, 0, -1.0f, 0}));
  std::vector<float> acc(6, 1.0f);
  ASSERT_EQ(decode_add(CodecId::kTopK, p, acc), CodecError::kOk);
  EXPECT_EQ(acc, (std::vector<float>{1, 3.5f, 1, 1, 0.0f, 1}));
}

TEST(CodecDecode, TopKMalformed) {
  expect_error(CodecId::kTopK, {1, 2, 3}, 6, CodecError::kTruncated);                             // no header
  expect_error(CodecId::kTopK, topk_payload(5, {1}, {1.0f}), 6, CodecError::kLengthMismatch);     // n != chunk
  expect_error(CodecId::kTopK, topk_payload(6, {}, {}, 7), 6, CodecError::kCountTooLarge);        // k > n
  expect_error(CodecId::kTopK, topk_payload(6, {1, 2}, {1.0f}), 6, CodecError::kTruncated);       // k=2, 1 value
  expect_error(CodecId::kTopK, topk_payload(6, {1}, {1.0f, 2.0f}), 6, CodecError::kBadLength);    // trailing bytes
  expect_error(CodecId::kTopK, topk_payload(6, {1, 6}, {1.0f, 2.0f}), 6, CodecError::kIndexOutOfRange);
  expect_error(CodecId::kTopK, topk_payload(6, {1, UINT32_MAX}, {1.0f, 2.0f}), 6, CodecError::kIndexOutOfRange);
  expect_error(CodecId::kTopK, topk_payload(6, {3, 3}, {1.0f, 2.0f}), 6, CodecError::kIndexNotIncreasing);
  expect_error(CodecId::kTopK, topk_payload(6, {4, 2}, {1.0f, 2.0f}), 6, CodecError::kIndexNotIncreasing);
  // the bad index is the last one: nothing of the earlier, valid entries may land
  expect_error(CodecId::kTopK, topk_payload(6, {0, 1, 2, 9}, {1, 1, 1, 1}), 6, CodecError::kIndexOutOfRange);
  // a huge k in the header must not make us read (or size) anything
  expect_error(CodecId::kTopK, topk_payload(UINT32_MAX, {}, {}, UINT32_MAX - 1), 6, CodecError::kLengthMismatch);
}

TEST(CodecDecode, Int8Malformed) {
  expect_error(CodecId::kInt8, {0, 0, 0}, 0, CodecError::kTruncated);
  expect_error(CodecId::kInt8, int8_payload(NAN, {1, 2}), 2, CodecError::kBadScale);
  expect_error(CodecId::kInt8, int8_payload(INFINITY, {1, 2}), 2, CodecError::kBadScale);
  expect_error(CodecId::kInt8, int8_payload(-1.0f, {1, 2}), 2, CodecError::kBadScale);
  expect_error(CodecId::kInt8, int8_payload(1.0f, {1, 2, 3}), 2, CodecError::kLengthMismatch);
  std::vector<float> out(3);
  ASSERT_EQ(decode(CodecId::kInt8, int8_payload(0.5f, {-127, 0, 4}), out), CodecError::kOk);
  EXPECT_EQ(out, (std::vector<float>{-63.5f, 0, 2}));
}

TEST(CodecDecode, DenseMalformed) {
  expect_error(CodecId::kF32, {1, 2, 3, 4, 5}, 1, CodecError::kBadLength);
  expect_error(CodecId::kF32, std::vector<uint8_t>(8), 1, CodecError::kLengthMismatch);
  expect_error(CodecId::kF16, {1, 2, 3}, 1, CodecError::kBadLength);
  expect_error(CodecId::kBf16, std::vector<uint8_t>(4), 3, CodecError::kLengthMismatch);
  expect_error(static_cast<CodecId>(5), std::vector<uint8_t>(4), 1, CodecError::kUnknownCodec);
  expect_error(static_cast<CodecId>(255), {}, 0, CodecError::kUnknownCodec);
}

TEST(CodecDecode, EmptyChunksAreValid) {
  std::vector<float> none;
  EXPECT_EQ(decode(CodecId::kF32, {}, none), CodecError::kOk);
  EXPECT_EQ(decode(CodecId::kInt8, int8_payload(1.0f, {}), none), CodecError::kOk);
  EXPECT_EQ(decode(CodecId::kTopK, topk_payload(0, {}, {}), none), CodecError::kOk);
}

TEST(CodecDecode, DecodedCountReadsOnlyHeaders) {
  EXPECT_EQ(decoded_count(CodecId::kF16, std::vector<uint8_t>(10)).count, 5u);
  EXPECT_EQ(decoded_count(CodecId::kInt8, std::vector<uint8_t>(10)).count, 6u);
  EXPECT_EQ(decoded_count(CodecId::kTopK, topk_payload(77, {}, {})).count, 77u);
  EXPECT_EQ(decoded_count(CodecId::kTopK, std::vector<uint8_t>(7)).err, CodecError::kTruncated);
}

TEST(CodecDecode, ErrorNamesAreDistinct) {
  EXPECT_NE(codec_error_name(CodecError::kIndexOutOfRange), codec_error_name(CodecError::kIndexNotIncreasing));
  EXPECT_EQ(codec_error_name(CodecError::kOk), "ok");
}

}  // namespace
}  // namespace sg::compress
