#include "compress/codec_kernels.h"

#include <cmath>
#include <cstring>

#include "compress/half.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports falsely (GCC bug 105593).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

namespace sg::compress {
namespace {

// ---- scalar: the reference semantics --------------------------------------------------

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Same operand order as MINPS/MAXPS, so a NaN saturates the same way in every ISA.
inline float clamp_like_simd(float x, float lo, float hi) {
  x = x < hi ? x : hi;
  return x > lo ? x : lo;
}

void f32_encode_scalar(const float* g, float* r, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float x = g[i] + r[i];
    std::memcpy(out + 4 * i, &x, 4);
    r[i] = 0.0f;
  }
}

void f16_encode_scalar(const float* g, float* r, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float x = g[i];
    if (r) x = x + r[i];
    x = clamp_like_simd(x, -kHalfMax, kHalfMax);
    const uint16_t h = float_to_half(x);
    store_u16(out + 2 * i, h);
    if (r) r[i] = x - half_to_float(h);
  }
}

void bf16_encode_scalar(const float* g, float* r, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float x = g[i];
    if (r) x = x + r[i];
    const uint16_t b = float_to_bf16(x);
    store_u16(out + 2 * i, b);
    if (r) r[i] = x - bf16_to_float(b);
  }
}

float max_abs_scalar(const float* g, const float* r, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    float x = g[i];
    if (r) x = x + r[i];
    const float a = std::fabs(x);
    m = m > a ? m : a;
  }
  return m;
}

inline int8_t quantise(float x, float inv_scale) {
  // Clamp in float first (NaN -> 127 like MINPS), then round half to even like CVTPS2DQ.
  const float t = clamp_like_simd(x * inv_scale, -127.0f, 127.0f);
  return static_cast<int8_t>(static_cast<int>(std::nearbyint(t)));
}

void int8_encode_scalar(const float* g, float* r, uint8_t* out, size_t n, float inv_scale, float scale) {
  for (size_t i = 0; i < n; ++i) {
    float x = g[i];
    if (r) x = x + r[i];
    const int8_t q = quantise(x, inv_scale);
    out[i] = static_cast<uint8_t>(q);
    if (r) {
      const float back = static_cast<float>(q) * scale;
      r[i] = x - back;
    }
  }
}

inline uint32_t abs_key(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u & 0x7fffffffu;
}

size_t indices_at_least_scalar(const float* x, size_t n, uint32_t thr, uint32_t* idx) {
  size_t m = 0;
  for (size_t i = 0; i < n; ++i)
    if (abs_key(x[i]) >= thr) idx[m++] = static_cast<uint32_t>(i);
  return m;
}

size_t count_at_least_scalar(const uint32_t* keys, size_t n, uint32_t t) {
  size_t c = 0;
  for (size_t i = 0; i < n; ++i) c += keys[i] >= t;
  return c;
}

void f16_decode_scalar(const uint8_t* in, float* out, size_t n, bool add) {
  if (add)
    for (size_t i = 0; i < n; ++i) out[i] += half_to_float(load_u16(in + 2 * i));
  else
    for (size_t i = 0; i < n; ++i) out[i] = half_to_float(load_u16(in + 2 * i));
}

void bf16_decode_scalar(const uint8_t* in, float* out, size_t n, bool add) {
  if (add)
    for (size_t i = 0; i < n; ++i) out[i] += bf16_to_float(load_u16(in + 2 * i));
  else
    for (size_t i = 0; i < n; ++i) out[i] = bf16_to_float(load_u16(in + 2 * i));
}

void int8_decode_scalar(const uint8_t* in, float* out, size_t n, float scale, bool add) {
  for (size_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(static_cast<int8_t>(in[i])) * scale;
    out[i] = add ? out[i] + v : v;
  }
}

#if defined(__x86_64__)
// ---- AVX2 + F16C ------------------------------------------------------------------------
#define SG_AVX2 __attribute__((target("avx2,f16c")))

SG_AVX2 inline __m256 load_x_avx2(const float* g, const float* r, size_t i) {
  __m256 x = _mm256_loadu_ps(g + i);
  if (r) x = _mm256_add_ps(x, _mm256_loadu_ps(r + i));
  return x;
}

SG_AVX2 void f32_encode_avx2(const float* g, float* r, uint8_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(reinterpret_cast<float*>(out + 4 * i), _mm256_add_ps(_mm256_loadu_ps(g + i), _mm256_loadu_ps(r + i)));
    _mm256_storeu_ps(r + i, _mm256_setzero_ps());
  }
  f32_encode_scalar(g + i, r + i, out + 4 * i, n - i);
}

SG_AVX2 void f16_encode_avx2(const float* g, float* r, uint8_t* out, size_t n) {
  const __m256 hi = _mm256_set1_ps(kHalfMax), lo = _mm256_set1_ps(-kHalfMax);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_max_ps(_mm256_min_ps(load_x_avx2(g, r, i), hi), lo);
    const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
    if (r) _mm256_storeu_ps(r + i, _mm256_sub_ps(x, _mm256_cvtph_ps(h)));
  }
  f16_encode_scalar(g + i, r ? r + i : nullptr, out + 2 * i, n - i);
}

SG_AVX2 inline __m256i bf16_round_avx2(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(rounded, nan, is_nan);  // 32-bit lanes holding the 16-bit result
}

SG_AVX2 void bf16_encode_avx2(const float* g, float* r, uint8_t* out, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 x0 = load_x_avx2(g, r, i), x1 = load_x_avx2(g, r, i + 8);
    const __m256i b0 = bf16_round_avx2(x0), b1 = bf16_round_avx2(x1);
    // packus works per 128-bit lane; permute restores element order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(b0, b1), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), packed);
    if (r) {
      _mm256_storeu_ps(r + i, _mm256_sub_ps(x0, _mm256_castsi256_ps(_mm256_slli_epi32(b0, 16))));
      _mm256_storeu_ps(r + i + 8, _mm256_sub_ps(x1, _mm256_castsi256_ps(_mm256_slli_epi32(b1, 16))));
    }
  }
  bf16_encode_scalar(g + i, r ? r + i : nullptr, out + 2 * i, n - i);
}

SG_AVX2 float max_abs_avx2(const float* g, const float* r, size_t n) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_and_ps(load_x_avx2(g, r, i), absmask));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float best = max_abs_scalar(g + i, r ? r + i : nullptr, n - i);
  for (float v : lanes) best = best > v ? best : v;
  return best;
}

SG_AVX2 void int8_encode_avx2(const float* g, float* r, uint8_t* out, size_t n, float inv_scale, float scale) {
  const __m256 inv = _mm256_set1_ps(inv_scale), sc = _mm256_set1_ps(scale);
  const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
  // byte 0 of each 32-bit lane to the front of each 128-bit half, then both halves together
  const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i join = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = load_x_avx2(g, r, i);
    const __m256 t = _mm256_max_ps(_mm256_min_ps(_mm256_mul_ps(x, inv), hi), lo);
    const __m256i q = _mm256_cvtps_epi32(t);  // MXCSR default: round half to even
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(q, pick), join);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(bytes));
    if (r) _mm256_storeu_ps(r + i, _mm256_sub_ps(x, _mm256_mul_ps(_mm256_cvtepi32_ps(q), sc)));
  }
  int8_encode_scalar(g + i, r ? r + i : nullptr, out + i, n - i, inv_scale, scale);
}

SG_AVX2 size_t count_at_least_avx2(const uint32_t* keys, size_t n, uint32_t t) {
  if (t == 0) return n;
  // keys < 2^31, so a signed compare against t - 1 is key >= t
  const __m256i tm1 = _mm256_set1_epi32(static_cast<int>(t - 1));
  __m256i acc = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    acc = _mm256_sub_epi32(acc, _mm256_cmpgt_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + i)), tm1));
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  size_t c = count_at_least_scalar(keys + i, n - i, t);
  for (uint32_t v : lanes) c += v;
  return c;
}

SG_AVX2 void f16_decode_avx2(const uint8_t* in, float* out, size_t n, bool add) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i)));
    if (add) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
    _mm256_storeu_ps(out + i, v);
  }
  f16_decode_scalar(in + 2 * i, out + i, n - i, add);
}

SG_AVX2 void bf16_decode_avx2(const uint8_t* in, float* out, size_t n, bool add) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i)));
    __m256 v = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    if (add) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
    _mm256_storeu_ps(out + i, v);
  }
  bf16_decode_scalar(in + 2 * i, out + i, n - i, add);
}

SG_AVX2 void int8_decode_avx2(const uint8_t* in, float* out, size_t n, float scale, bool add) {
  const __m256 sc = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i)));
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(q), sc);
    if (add) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
    _mm256_storeu_ps(out + i, v);
  }
  int8_decode_scalar(in + i, out + i, n - i, scale, add);
}
#undef SG_AVX2

// ---- AVX-512 ----------------------------------------------------------------------------
#define SG_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c")))

SG_AVX512 inline __m512 load_x_512(const float* g, const float* r, size_t i) {
  __m512 x = _mm512_loadu_ps(g + i);
  if (r) x = _mm512_add_ps(x, _mm512_loadu_ps(r + i));
  return x;
}

SG_AVX512 void f32_encode_avx512(const float* g, float* r, uint8_t* out, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(reinterpret_cast<float*>(out + 4 * i), _mm512_add_ps(_mm512_loadu_ps(g + i), _mm512_loadu_ps(r + i)));
    _mm512_storeu_ps(r + i, _mm512_setzero_ps());
  }
  f32_encode_scalar(g + i, r + i, out + 4 * i, n - i);
}

SG_AVX512 void f16_encode_avx512(const float* g, float* r, uint8_t* out, size_t n) {
  const __m512 hi = _mm512_set1_ps(kHalfMax), lo = _mm512_set1_ps(-kHalfMax);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 x = _mm512_max_ps(_mm512_min_ps(load_x_512(g, r, i), hi), lo);
    const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), h);
    if (r) _mm512_storeu_ps(r + i, _mm512_sub_ps(x, _mm512_cvtph_ps(h)));
  }
  f16_encode_scalar(g + i, r ? r + i : nullptr, out + 2 * i, n - i);
}

SG_AVX512 void bf16_encode_avx512(const float* g, float* r, uint8_t* out, size_t n) {
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = load_x_512(g, r, i);
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i b = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), lsb), 16);
    const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, absmask), inf);
    b = _mm512_mask_or_epi32(b, is_nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), _mm512_cvtepi32_epi16(b));
    if (r) _mm512_storeu_ps(r + i, _mm512_sub_ps(x, _mm512_castsi512_ps(_mm512_slli_epi32(b, 16))));
  }
  bf16_encode_scalar(g + i, r ? r + i : nullptr, out + 2 * i, n - i);
}

SG_AVX512 float max_abs_avx512(const float* g, const float* r, size_t n) {
  __m512 m = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_abs_ps(load_x_512(g, r, i)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  float best = max_abs_scalar(g + i, r ? r + i : nullptr, n - i);
  for (float v : lanes) best = best > v ? best : v;
  return best;
}

SG_AVX512 void int8_encode_avx512(const float* g, float* r, uint8_t* out, size_t n, float inv_scale, float scale) {
  const __m512 inv = _mm512_set1_ps(inv_scale), sc = _mm512_set1_ps(scale);
  const __m512 hi = _mm512_set1_ps(127.0f), lo = _mm512_set1_ps(-127.0f);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = load_x_512(g, r, i);
    const __m512 t = _mm512_max_ps(_mm512_min_ps(_mm512_mul_ps(x, inv), hi), lo);
    const __m512i q = _mm512_cvtps_epi32(t);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(q));
    if (r) _mm512_storeu_ps(r + i, _mm512_sub_ps(x, _mm512_mul_ps(_mm512_cvtepi32_ps(q), sc)));
  }
  int8_encode_scalar(g + i, r ? r + i : nullptr, out + i, n - i, inv_scale, scale);
}

// Top-k selects few elements: most 16-lane blocks have an empty mask and cost one compare.
// Compress in a register and store all 16 lanes (the output has kTopKScratchPad spare
// slots): compress-to-memory is microcoded and slow on AMD Zen 4.
SG_AVX512 size_t indices_at_least_avx512(const float* x, size_t n, uint32_t thr, uint32_t* idx) {
  const __m512i absmask = _mm512_set1_epi32(0x7fffffff), t = _mm512_set1_epi32(static_cast<int>(thr));
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  size_t m = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i k = _mm512_and_si512(_mm512_loadu_si512(x + i), absmask);
    const __mmask16 hit = _mm512_cmpge_epu32_mask(k, t);
    if (hit) {
      const __m512i pos = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(i)));
      _mm512_storeu_si512(idx + m, _mm512_maskz_compress_epi32(hit, pos));
      m += static_cast<size_t>(__builtin_popcount(hit));
    }
  }
  const size_t tail = indices_at_least_scalar(x + i, n - i, thr, idx + m);
  for (size_t j = m; j < m + tail; ++j) idx[j] += static_cast<uint32_t>(i);
  return m + tail;
}

SG_AVX512 size_t count_at_least_avx512(const uint32_t* keys, size_t n, uint32_t t) {
  const __m512i tv = _mm512_set1_epi32(static_cast<int>(t));
  size_t c = 0, i = 0;
  for (; i + 16 <= n; i += 16)
    c += static_cast<size_t>(__builtin_popcount(_mm512_cmpge_epu32_mask(_mm512_loadu_si512(keys + i), tv)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    c += static_cast<size_t>(__builtin_popcount(_mm512_mask_cmpge_epu32_mask(m, _mm512_maskz_loadu_epi32(m, keys + i), tv)));
  }
  return c;
}

SG_AVX512 void f16_decode_avx512(const uint8_t* in, float* out, size_t n, bool add) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 2 * i)));
    if (add) v = _mm512_add_ps(_mm512_loadu_ps(out + i), v);
    _mm512_storeu_ps(out + i, v);
  }
  f16_decode_scalar(in + 2 * i, out + i, n - i, add);
}

SG_AVX512 void bf16_decode_avx512(const uint8_t* in, float* out, size_t n, bool add) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 2 * i)));
    __m512 v = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    if (add) v = _mm512_add_ps(_mm512_loadu_ps(out + i), v);
    _mm512_storeu_ps(out + i, v);
  }
  bf16_decode_scalar(in + 2 * i, out + i, n - i, add);
}

SG_AVX512 void int8_decode_avx512(const uint8_t* in, float* out, size_t n, float scale, bool add) {
  const __m512 sc = _mm512_set1_ps(scale);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(q), sc);
    if (add) v = _mm512_add_ps(_mm512_loadu_ps(out + i), v);
    _mm512_storeu_ps(out + i, v);
  }
  int8_decode_scalar(in + i, out + i, n - i, scale, add);
}
#undef SG_AVX512
#endif

constexpr CodecKernels kScalar{f32_encode_scalar, f16_encode_scalar, bf16_encode_scalar, max_abs_scalar, int8_encode_scalar,
                               indices_at_least_scalar, count_at_least_scalar,
                               f16_decode_scalar, bf16_decode_scalar, int8_decode_scalar};
#if defined(__x86_64__)
constexpr CodecKernels kAvx2{f32_encode_avx2, f16_encode_avx2, bf16_encode_avx2, max_abs_avx2, int8_encode_avx2,
                             indices_at_least_scalar, count_at_least_avx2,
                             f16_decode_avx2, bf16_decode_avx2, int8_decode_avx2};
constexpr CodecKernels kAvx512{f32_encode_avx512, f16_encode_avx512, bf16_encode_avx512, max_abs_avx512, int8_encode_avx512,
                               indices_at_least_avx512, count_at_least_avx512,
                               f16_decode_avx512, bf16_decode_avx512, int8_decode_avx512};
#endif

}  // namespace

const CodecKernels& codec_kernels(agg::Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case agg::Isa::kAvx512: return kAvx512;
    case agg::Isa::kAvx2: return kAvx2;
    case agg::Isa::kScalar: break;
  }
#else
  (void)isa;
#endif
  return kScalar;
}

}  // namespace sg::compress
