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
constexpr size_t kTopKSample = 256;  // keys sampled for the threshold estimate

void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void store_f32(uint8_t* p, float v) { std::memcpy(p, &v, 4); }

// The k-th largest of keys[0..n) (1 <= k <= n, keys below 2^31), bit by bit from the top:
// the largest t with at least k keys >= t. 31 vectorised counting passes, no branchy
// comparison sort (nth_element mispredicts on every other element).
uint32_t kth_largest(const CodecKernels& kern, const uint32_t* keys, size_t n, size_t k) {
  uint32_t t = 0;
  for (int bit = 30; bit >= 0; --bit) {
    const uint32_t cand = t | (1u << bit);
    if (kern.count_at_least(keys, n, cand) >= k) t = cand;
  }
  return t;
}

}  // namespace

Encoder::Encoder(size_t max_elems, agg::Isa isa)
    : max_elems_(max_elems), isa_(isa), x_(max_elems), keys_(max_elems), idx_(max_elems + kTopKScratchPad), sample_(kTopKSample) {
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

// Selects the k largest |x| exactly, in three steps that touch all n elements only in SIMD
// kernels: (1) a threshold estimate `lo` from an evenly spaced sample, set so that about 2k
// elements are >= lo; (2) a kernel collects the indices with key >= lo (few: mostly empty
// 16-lane masks); if fewer than k came back the estimate was too high and every element is a
// candidate; (3) kth_largest over the candidate keys gives the exact k-th largest key `thr`,
// and the candidates, already in index order, are emitted: keys above thr plus the first
// ties, so the output is deterministic and indices increase as the format requires.
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

  uint8_t* p = out.data();
  store_u32(p, static_cast<uint32_t>(n));
  store_u32(p + 4, static_cast<uint32_t>(k));
  if (k == 0) return {CodecError::kOk, bytes};

  uint32_t lo = 0;
  if (n >= 4 * kTopKSample && 4 * k < n) {
    const size_t stride = n / kTopKSample;
    for (size_t j = 0; j < kTopKSample; ++j) sample_[j] = abs_key(x[j * stride]);
    const size_t rank = std::min(kTopKSample, 2 * kTopKSample * k / n + 5);
    lo = kth_largest(kern, sample_.data(), kTopKSample, rank);
  }
  size_t c = kern.indices_at_least(x, n, lo, idx_.data());
  if (c < k) c = kern.indices_at_least(x, n, 0, idx_.data());  // every element (c == n)

  for (size_t j = 0; j < c; ++j) keys_[j] = abs_key(x[idx_[j]]);
  const uint32_t thr = kth_largest(kern, keys_.data(), c, k);
  // keys strictly greater than thr: all of them are sent, then ties up to k
  const size_t above = thr == 0x7fffffffu ? 0 : kern.count_at_least(keys_.data(), c, thr + 1);

  uint8_t* idx = p + kTopKHeaderBytes;
  uint8_t* val = idx + 4 * k;
  size_t ties = k - above, e = 0;
  for (size_t j = 0; j < c && e < k; ++j) {
    const uint32_t i = idx_[j];
    const uint32_t key = abs_key(x[i]);
    if (key > thr || (key == thr && ties > 0)) {
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
