// Per-ISA element kernels of the dense codecs (f16, bf16, int8). Internal to compress/:
// callers use codec.h / encoder.h, which validate lengths first.
//
// Encoders take the gradient `g` and an optional error-feedback residual `r` (nullptr: none).
// With a residual they encode x = g + r and leave r = x - decode(encode(x)).
// Every ISA performs the same IEEE operations per element with no FMA, so the encoded bytes,
// residuals and decoded floats are bit-identical across ISAs (tests check this).
#pragma once

#include <cstddef>
#include <cstdint>

#include "aggregate/isa.h"

namespace sg::compress {

// Spare u32 slots the top-k kernels may write past their count (whole-vector stores).
inline constexpr size_t kTopKScratchPad = 16;

struct CodecKernels {
  // x = g + r written as float32 bytes (any alignment), r = 0; r != nullptr (without a
  // residual f32 encoding is a memcpy).
  void (*f32_encode)(const float* g, float* r, uint8_t* out, size_t n);
  void (*f16_encode)(const float* g, float* r, uint8_t* out, size_t n);
  void (*bf16_encode)(const float* g, float* r, uint8_t* out, size_t n);
  // max |g + r| (r may be nullptr): the int8 chunk scale is this / 127.
  float (*max_abs)(const float* g, const float* r, size_t n);
  // q = round_even(clamp(x * inv_scale, -127, 127)); residual uses q * scale.
  void (*int8_encode)(const float* g, float* r, uint8_t* out, size_t n, float inv_scale, float scale);

  // Top-k candidates: with key(x) = bits of |x| (orders like |x|), writes every i with
  // key(x[i]) >= thr, increasing, and returns how many. `idx` needs kTopKScratchPad spare
  // slots past that count (whole-vector stores).
  size_t (*indices_at_least)(const float* x, size_t n, uint32_t thr, uint32_t* idx);
  // How many of keys[0..n) are >= t; keys and t below 2^31.
  size_t (*count_at_least)(const uint32_t* keys, size_t n, uint32_t t);

  // Decoders: `add` false writes out[i], true adds into out[i] (the accumulator path).
  void (*f16_decode)(const uint8_t* in, float* out, size_t n, bool add);
  void (*bf16_decode)(const uint8_t* in, float* out, size_t n, bool add);
  void (*int8_decode)(const uint8_t* in, float* out, size_t n, float scale, bool add);
};

// Caller checks agg::isa_supported(isa).
const CodecKernels& codec_kernels(agg::Isa isa);

}  // namespace sg::compress
