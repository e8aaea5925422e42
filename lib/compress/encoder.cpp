#include "compress/encoder.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "aggregate/add_kernels.h"
#include "compress/codec_kernels.h"

namespace sg::compress {
namespace {

// Top-k keys: |x| as integer bits orders like |x| (NaN above inf, so a NaN is sent, not hidden).
inline uint32_t abs_key(float x) { return std::bit_cast<uint32_t>(x) & 0x7fffffffu; }
constexpr int kHistShift = 21;  // 31-bit keys -> 1024 buckets (exponent + 2 mantissa bits)
constexpr size_t kHistBuckets = size_t{1} << (31 - kHistShift);

void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void store_f32(uint8_t* p, float v) { std::memcpy(p, &v, 4); }

}  // namespace

Encoder::Encoder(size_t max_elems, agg::Isa isa)
    : max_elems_(max_elems), isa_(isa), x_(max_elems), keys_(max_elems + kTopKScratchPad), hist_(4 * kHistBuckets) {
  if (!agg::isa_supported(isa)) throw std::invalid_argument("Encoder: ISA not supported by this CPU");
}

EncodeResult Encoder::encode(CodecId codec, std::span<const float> grad, std::span<uint8_t> out,
                             std::span<float> residual, float topk_ratio) {
  const size_t n = grad.size();
  if (!residual.empty() && residual.size() != n) return {CodecError::kLengthMismatch, 0};
  float* r = residual.empty() ? nullptr : residual.data();
  const CodecKernels& k = codec_kernels(isa_);
  switch (codec) {
    case CodecId::kF32: {
      if (out.size() < 4 * n) return {CodecError::kOutputTooSmall, 0};
      if (r)
        k.f32_encode(grad.data(), r, out.data(), n);
      else if (n)
        std::memcpy(out.data(), grad.data(), 4 * n);
      return {CodecError::kOk, 4 * n};
    }
    case CodecId::kF16:
    case CodecId::kBf16:
      if (out.size() < 2 * n) return {CodecError::kOutputTooSmall, 0};
      (codec == CodecId::kF16 ? k.f16_encode : k.bf16_encode)(grad.data(), r, out.data(), n);
      return {CodecError::kOk, 2 * n};
    case CodecId::kInt8: {
      if (out.size() < kInt8HeaderBytes + n) return {CodecError::kOutputTooSmall, 0};
      const float m = k.max_abs(grad.data(), r, n);
      const float scale = m / 127.0f;
      if (!std::isfinite(m) || !std::isfinite(scale)) return {CodecError::kNonFiniteInput, 0};
      // All zero: scale 0 and every q 0 (inv 0 avoids 0 * inf).
      const float inv = m > 0.0f ? 127.0f / m : 0.0f;
      store_f32(out.data(), scale);
      k.int8_encode(grad.data(), r, out.data() + kInt8HeaderBytes, n, inv, scale);
      return {CodecError::kOk, kInt8HeaderBytes + n};
    }
    case CodecId::kTopK: return encode_topk(grad, out, residual, topk_ratio);
  }
  return {CodecError::kUnknownCodec, 0};
}

// Selects the k largest |x| exactly: a histogram over the key's high bits finds the bucket
// holding the k-th largest, nth_element over that bucket alone finds the threshold key, and
// one pass in index order emits keys above it plus the first ties (deterministic output,
// indices increasing as the format requires). The bucket gather and the final scan are
// ISA kernels (mostly empty masks: top-k keeps few elements).
EncodeResult Encoder::encode_topk(std::span<const float> grad, std::span<uint8_t> out, std::span<float> residual,
                                  float ratio) {
  const size_t n = grad.size();
  if (!(ratio > 0.0f && ratio <= 1.0f)) return {CodecError::kBadRatio, 0};
  if (n > max_elems_ || n > UINT32_MAX) return {CodecError::kLengthMismatch, 0};
  const size_t k = topk_count(n, ratio);
  const size_t bytes = encoded_size(CodecId::kTopK, n, k);
  if (out.size() < bytes) return {CodecError::kOutputTooSmall, 0};
  const CodecKernels& kern = codec_kernels(isa_);

  // x = grad + residual, in the residual itself (what is not sent stays there).
  float* x = residual.empty() ? x_.data() : residual.data();
  if (residual.empty()) {
    if (n) std::memcpy(x, grad.data(), 4 * n);
  } else {
    agg::add_kernels(isa_).add(x, reinterpret_cast<const uint8_t*>(grad.data()), n);
  }

  uint32_t thr = 0;
  size_t above = 0;  // keys strictly greater than thr
  if (k > 0) {
    // Four interleaved histograms: runs of equal buckets (common once error feedback has
    // piled residuals up near the threshold) would otherwise serialise on one counter.
    std::fill(hist_.begin(), hist_.end(), 0u);
    uint32_t* h = hist_.data();
    uint32_t top = 0;  // largest key: the walk down the buckets starts there
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
      const uint32_t k0 = abs_key(x[i]), k1 = abs_key(x[i + 1]), k2 = abs_key(x[i + 2]), k3 = abs_key(x[i + 3]);
      ++h[k0 >> kHistShift];
      ++h[kHistBuckets + (k1 >> kHistShift)];
      ++h[2 * kHistBuckets + (k2 >> kHistShift)];
      ++h[3 * kHistBuckets + (k3 >> kHistShift)];
      top = std::max(top, std::max(std::max(k0, k1), std::max(k2, k3)));
    }
    for (; i < n; ++i) {
      ++h[abs_key(x[i]) >> kHistShift];
      top = std::max(top, abs_key(x[i]));
    }
    auto count = [h](size_t bucket) {
      return h[bucket] + h[kHistBuckets + bucket] + h[2 * kHistBuckets + bucket] + h[3 * kHistBuckets + bucket];
    };
    size_t b = (top >> kHistShift) + 1;
    while (b > 0 && above + count(b - 1) < k) above += count(--b);
    const uint32_t bucket = static_cast<uint32_t>(b - 1);  // k <= n: some bucket reaches k
    size_t m = kern.gather_bucket(x, n, bucket, kHistShift, keys_.data());
    size_t need = k - above;  // take the `need` largest keys of this bucket
    if (m > 64) {
      // Second radix level on the next 10 key bits, so nth_element sees few keys even when
      // error feedback crowds one bucket.
      constexpr int kShift2 = kHistShift - 10;
      std::fill(h, h + 1024, 0u);
      for (size_t j = 0; j < m; ++j) ++h[(keys_[j] >> kShift2) & 1023u];
      size_t b2 = 1024, above2 = 0;
      while (b2 > 0 && above2 + h[b2 - 1] < need) above2 += h[--b2];
      const uint32_t sub = static_cast<uint32_t>(b2 - 1);
      size_t m2 = 0;
      for (size_t j = 0; j < m; ++j)
        if (((keys_[j] >> kShift2) & 1023u) == sub) keys_[m2++] = keys_[j];
      above += above2;
      need -= above2;
      m = m2;
    }
    std::nth_element(keys_.begin(), keys_.begin() + static_cast<std::ptrdiff_t>(m - need),
                     keys_.begin() + static_cast<std::ptrdiff_t>(m));
    thr = keys_[m - need];
    for (size_t i = 0; i < m; ++i) above += keys_[i] > thr;
  }

  uint8_t* p = out.data();
  store_u32(p, static_cast<uint32_t>(n));
  store_u32(p + 4, static_cast<uint32_t>(k));
  uint8_t* idx = p + kTopKHeaderBytes;
  uint8_t* val = idx + 4 * k;
  // Candidates: keys >= thr (k plus any surplus ties), reusing the key scratch.
  const size_t c = k ? kern.indices_at_least(x, n, thr, keys_.data()) : 0;
  size_t ties = k - above, e = 0;
  for (size_t j = 0; j < c && e < k; ++j) {
    const uint32_t i = keys_[j];
    const uint32_t key = abs_key(x[i]);
    if (key > thr || ties > 0) {
      if (key == thr) --ties;
      store_u32(idx + 4 * e, i);
      store_f32(val + 4 * e, x[i]);
      ++e;
      x[i] = 0.0f;  // sent exactly: nothing of it stays in the residual
    }
  }
  return {CodecError::kOk, bytes};
}

}  // namespace sg::compress
