#include "aggregate/add_kernels.h"

#include <bit>
#include <cstring>

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports falsely (GCC bug 105593).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

// The payload is read as host floats; the wire carries little-endian float32.
static_assert(std::endian::native == std::endian::little, "payload floats are little-endian");

namespace sg::agg {
namespace {

inline float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void add_scalar(float* acc, const uint8_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += load_f32(src + 4 * i);
}

void divide_scalar(float* acc, size_t n, float divisor) {
  for (size_t i = 0; i < n; ++i) acc[i] /= divisor;
}

#if defined(__x86_64__)
// Four vectors per iteration keep two loads and one store in flight per cycle; the loads
// are unaligned on purpose (payloads sit wherever the packet put them).
__attribute__((target("avx2"))) void add_avx2(float* acc, const uint8_t* src, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const uint8_t* s = src + 4 * i;
    __m256 a0 = _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_loadu_ps(reinterpret_cast<const float*>(s)));
    __m256 a1 = _mm256_add_ps(_mm256_loadu_ps(acc + i + 8), _mm256_loadu_ps(reinterpret_cast<const float*>(s + 32)));
    __m256 a2 = _mm256_add_ps(_mm256_loadu_ps(acc + i + 16), _mm256_loadu_ps(reinterpret_cast<const float*>(s + 64)));
    __m256 a3 = _mm256_add_ps(_mm256_loadu_ps(acc + i + 24), _mm256_loadu_ps(reinterpret_cast<const float*>(s + 96)));
    _mm256_storeu_ps(acc + i, a0);
    _mm256_storeu_ps(acc + i + 8, a1);
    _mm256_storeu_ps(acc + i + 16, a2);
    _mm256_storeu_ps(acc + i + 24, a3);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_loadu_ps(reinterpret_cast<const float*>(src + 4 * i)));
    _mm256_storeu_ps(acc + i, a);
  }
  add_scalar(acc + i, src + 4 * i, n - i);
}

__attribute__((target("avx2"))) void divide_avx2(float* acc, size_t n, float divisor) {
  const __m256 d = _mm256_set1_ps(divisor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_div_ps(_mm256_loadu_ps(acc + i), d));
  divide_scalar(acc + i, n - i, divisor);
}

#define SG_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

SG_AVX512 void add_avx512(float* acc, const uint8_t* src, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const float* s = reinterpret_cast<const float*>(src + 4 * i);
    __m512 a0 = _mm512_add_ps(_mm512_loadu_ps(acc + i), _mm512_loadu_ps(s));
    __m512 a1 = _mm512_add_ps(_mm512_loadu_ps(acc + i + 16), _mm512_loadu_ps(s + 16));
    __m512 a2 = _mm512_add_ps(_mm512_loadu_ps(acc + i + 32), _mm512_loadu_ps(s + 32));
    __m512 a3 = _mm512_add_ps(_mm512_loadu_ps(acc + i + 48), _mm512_loadu_ps(s + 48));
    _mm512_storeu_ps(acc + i, a0);
    _mm512_storeu_ps(acc + i + 16, a1);
    _mm512_storeu_ps(acc + i + 32, a2);
    _mm512_storeu_ps(acc + i + 48, a3);
  }
  for (; i + 16 <= n; i += 16) {
    const float* s = reinterpret_cast<const float*>(src + 4 * i);
    _mm512_storeu_ps(acc + i, _mm512_add_ps(_mm512_loadu_ps(acc + i), _mm512_loadu_ps(s)));
  }
  if (i < n) {  // masked tail: no read or write past n
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const float* s = reinterpret_cast<const float*>(src + 4 * i);
    __m512 a = _mm512_add_ps(_mm512_maskz_loadu_ps(m, acc + i), _mm512_maskz_loadu_ps(m, s));
    _mm512_mask_storeu_ps(acc + i, m, a);
  }
}

SG_AVX512 void divide_avx512(float* acc, size_t n, float divisor) {
  const __m512 d = _mm512_set1_ps(divisor);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(acc + i, _mm512_div_ps(_mm512_loadu_ps(acc + i), d));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(acc + i, m, _mm512_div_ps(_mm512_maskz_loadu_ps(m, acc + i), d));
  }
}
#undef SG_AVX512
#endif

constexpr AddKernels kScalarKernels{add_scalar, divide_scalar};
#if defined(__x86_64__)
constexpr AddKernels kAvx2Kernels{add_avx2, divide_avx2};
constexpr AddKernels kAvx512Kernels{add_avx512, divide_avx512};
#endif

}  // namespace

const AddKernels& add_kernels(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kAvx512: return kAvx512Kernels;
    case Isa::kAvx2: return kAvx2Kernels;
    case Isa::kScalar: break;
  }
#else
  (void)isa;
#endif
  return kScalarKernels;
}

}  // namespace sg::agg
