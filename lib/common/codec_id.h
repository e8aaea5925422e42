// Gradient codecs, as named in every LTP DATA header so a receiver decodes per chunk.
// The numeric values are part of the wire format: append, never renumber.
#pragma once

#include <cstdint>
#include <string_view>

namespace sg {

enum class CodecId : uint8_t {
  kF32 = 0,   // full precision, no compression
  kF16 = 1,   // IEEE half
  kBf16 = 2,  // bfloat16
  kInt8 = 3,  // int8 with a per-chunk scale
  kTopK = 4,  // top-k sparse (index, value) pairs; sender keeps the residual
};
inline constexpr uint8_t kCodecCount = 5;

constexpr bool codec_id_valid(uint8_t raw) { return raw < kCodecCount; }

constexpr std::string_view codec_name(CodecId c) {
  switch (c) {
    case CodecId::kF32: return "f32";
    case CodecId::kF16: return "f16";
    case CodecId::kBf16: return "bf16";
    case CodecId::kInt8: return "int8";
    case CodecId::kTopK: return "topk";
  }
  return "unknown";
}

}  // namespace sg
