// Gradient codecs: the payload formats named by sg::CodecId in every DATA header, their
// size bounds, and validating decoders. Encoding (with error feedback) is in encoder.h.
//
// Payload formats (all little-endian; n = elements of the chunk):
//   kF32   n x float32                                   4n bytes
//   kF16   n x IEEE binary16 (saturated to +-65504)      2n bytes
//   kBf16  n x bfloat16 (round to nearest even)          2n bytes
//   kInt8  float32 scale, then n x int8 q; value = q * scale; scale = max|x| / 127
//                                                        4 + n bytes
//   kTopK  u32 n, u32 k, k x u32 index (strictly increasing, < n), k x float32 value;
//          every other element is 0                      8 + 8k bytes
//
// Decoders treat the payload as untrusted: every length, count, index and the int8 scale is
// checked before anything is written, and a bad payload leaves the output untouched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "aggregate/isa.h"
#include "common/codec_id.h"

namespace sg::compress {

enum class CodecError : uint8_t {
  kOk = 0,
  kUnknownCodec,        // codec id not in sg::CodecId
  kTruncated,           // shorter than the codec's fixed header / than its count says
  kBadLength,           // length not a whole number of elements, or trailing bytes
  kLengthMismatch,      // element count differs from the output span (the chunk's size)
  kBadScale,            // int8 scale NaN, infinite or negative
  kCountTooLarge,       // top-k k > n
  kIndexOutOfRange,     // top-k index >= n
  kIndexNotIncreasing,  // top-k indices not strictly increasing (duplicates included)
  kOutputTooSmall,      // encoder: out span below max_encoded_size / encoded_size
  kBadRatio,            // encoder: top-k ratio not in (0, 1]
  kNonFiniteInput,      // encoder: int8 scale of the input is not finite
  kChunkIndex,          // add_encoded: chunk index out of range
  kContributors,        // add_encoded: contributor count 0 or overflowing
};
std::string_view codec_error_name(CodecError e);

// Header sizes of the formats above.
inline constexpr size_t kInt8HeaderBytes = 4;
inline constexpr size_t kTopKHeaderBytes = 8;
inline constexpr size_t kTopKEntryBytes = 8;

// Number of top-k entries sent for n elements at `ratio` in (0, 1]: round(ratio * n),
// at least 1 (for n > 0), at most n.
size_t topk_count(size_t n, float ratio);

// Exact payload size for n elements (top-k: k entries).
size_t encoded_size(CodecId codec, size_t n, size_t topk_k = 0);

// Upper bound over every setting (top-k with k = n): size output buffers with this.
size_t max_encoded_size(CodecId codec, size_t n);

// Element count a payload claims (validates lengths and headers, not top-k indices).
struct CountResult {
  CodecError err;
  size_t count;
};
CountResult decoded_count(CodecId codec, std::span<const uint8_t> payload);

// Decodes `payload` into `out`, whose size must equal the chunk's element count.
CodecError decode(CodecId codec, std::span<const uint8_t> payload, std::span<float> out,
                  agg::Isa isa = agg::best_isa());

// Decodes and adds into `acc` (acc[i] += value[i]) without a temporary buffer: the
// receive path aggregates compressed chunks directly. Same validation as decode(); on
// error `acc` is unchanged.
CodecError decode_add(CodecId codec, std::span<const uint8_t> payload, std::span<float> acc,
                      agg::Isa isa = agg::best_isa());

}  // namespace sg::compress
