#include <cmath>
#include <cstring>

#include "aggregate/add_kernels.h"
#include "compress/codec.h"
#include "compress/codec_kernels.h"

namespace sg::compress {
namespace {

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

struct TopKView {
  size_t n;
  size_t k;
  const uint8_t* idx;
  const uint8_t* val;
};

// Checks a whole top-k payload, indices included, before anyone writes.
CodecError check_topk(std::span<const uint8_t> p, size_t expect_n, TopKView* v) {
  if (p.size() < kTopKHeaderBytes) return CodecError::kTruncated;
  const uint64_t n = load_u32(p.data()), k = load_u32(p.data() + 4);
  if (n != expect_n) return CodecError::kLengthMismatch;
  if (k > n) return CodecError::kCountTooLarge;
  const uint64_t need = kTopKHeaderBytes + kTopKEntryBytes * k;  // k < 2^32: no overflow
  if (p.size() < need) return CodecError::kTruncated;
  if (p.size() > need) return CodecError::kBadLength;
  const uint8_t* idx = p.data() + kTopKHeaderBytes;
  uint64_t prev = 0;
  for (uint64_t i = 0; i < k; ++i) {
    const uint64_t j = load_u32(idx + 4 * i);
    if (j >= n) return CodecError::kIndexOutOfRange;
    if (i > 0 && j <= prev) return CodecError::kIndexNotIncreasing;
    prev = j;
  }
  *v = TopKView{static_cast<size_t>(n), static_cast<size_t>(k), idx, idx + 4 * k};
  return CodecError::kOk;
}

CodecError check_int8(std::span<const uint8_t> p, float* scale) {
  if (p.size() < kInt8HeaderBytes) return CodecError::kTruncated;
  *scale = load_f32(p.data());
  if (!std::isfinite(*scale) || *scale < 0.0f) return CodecError::kBadScale;
  return CodecError::kOk;
}

CodecError decode_impl(CodecId codec, std::span<const uint8_t> p, std::span<float> out, agg::Isa isa, bool add) {
  const CountResult c = decoded_count(codec, p);
  if (c.err != CodecError::kOk) return c.err;
  if (c.count != out.size()) return CodecError::kLengthMismatch;
  const CodecKernels& k = codec_kernels(isa);
  const size_t n = out.size();
  switch (codec) {
    case CodecId::kF32:
      if (add)
        agg::add_kernels(isa).add(out.data(), p.data(), n);
      else if (n)
        std::memcpy(out.data(), p.data(), 4 * n);
      return CodecError::kOk;
    case CodecId::kF16: k.f16_decode(p.data(), out.data(), n, add); return CodecError::kOk;
    case CodecId::kBf16: k.bf16_decode(p.data(), out.data(), n, add); return CodecError::kOk;
    case CodecId::kInt8: {
      float scale = 0;
      if (CodecError e = check_int8(p, &scale); e != CodecError::kOk) return e;
      k.int8_decode(p.data() + kInt8HeaderBytes, out.data(), n, scale, add);
      return CodecError::kOk;
    }
    case CodecId::kTopK: {
      TopKView v{};
      if (CodecError e = check_topk(p, n, &v); e != CodecError::kOk) return e;
      if (!add && n) std::memset(out.data(), 0, 4 * n);
      for (size_t i = 0; i < v.k; ++i) {
        const float x = load_f32(v.val + 4 * i);
        float& o = out[load_u32(v.idx + 4 * i)];
        o = add ? o + x : x;
      }
      return CodecError::kOk;
    }
  }
  return CodecError::kUnknownCodec;
}

}  // namespace

std::string_view codec_error_name(CodecError e) {
  switch (e) {
    case CodecError::kOk: return "ok";
    case CodecError::kUnknownCodec: return "unknown codec";
    case CodecError::kTruncated: return "truncated payload";
    case CodecError::kBadLength: return "payload length is not a whole number of elements";
    case CodecError::kLengthMismatch: return "element count differs from the chunk";
    case CodecError::kBadScale: return "int8 scale is NaN, infinite or negative";
    case CodecError::kCountTooLarge: return "top-k count larger than the chunk";
    case CodecError::kIndexOutOfRange: return "top-k index out of range";
    case CodecError::kIndexNotIncreasing: return "top-k indices not strictly increasing";
    case CodecError::kOutputTooSmall: return "output buffer too small";
    case CodecError::kBadRatio: return "top-k ratio not in (0, 1]";
    case CodecError::kNonFiniteInput: return "input not finite";
    case CodecError::kChunkIndex: return "chunk index out of range";
    case CodecError::kContributors: return "bad contributor count";
  }
  return "unknown";
}

size_t topk_count(size_t n, float ratio) {
  if (n == 0) return 0;
  if (!(ratio > 0.0f)) return 1;
  const double k = std::nearbyint(static_cast<double>(ratio) * static_cast<double>(n));
  if (k < 1.0) return 1;
  if (k >= static_cast<double>(n)) return n;
  return static_cast<size_t>(k);
}

size_t encoded_size(CodecId codec, size_t n, size_t topk_k) {
  switch (codec) {
    case CodecId::kF32: return 4 * n;
    case CodecId::kF16:
    case CodecId::kBf16: return 2 * n;
    case CodecId::kInt8: return kInt8HeaderBytes + n;
    case CodecId::kTopK: return kTopKHeaderBytes + kTopKEntryBytes * topk_k;
  }
  return 0;
}

size_t max_encoded_size(CodecId codec, size_t n) { return encoded_size(codec, n, n); }

CountResult decoded_count(CodecId codec, std::span<const uint8_t> p) {
  switch (codec) {
    case CodecId::kF32:
      if (p.size() % 4) return {CodecError::kBadLength, 0};
      return {CodecError::kOk, p.size() / 4};
    case CodecId::kF16:
    case CodecId::kBf16:
      if (p.size() % 2) return {CodecError::kBadLength, 0};
      return {CodecError::kOk, p.size() / 2};
    case CodecId::kInt8:
      if (p.size() < kInt8HeaderBytes) return {CodecError::kTruncated, 0};
      return {CodecError::kOk, p.size() - kInt8HeaderBytes};
    case CodecId::kTopK:
      if (p.size() < kTopKHeaderBytes) return {CodecError::kTruncated, 0};
      return {CodecError::kOk, load_u32(p.data())};
  }
  return {CodecError::kUnknownCodec, 0};
}

CodecError decode(CodecId codec, std::span<const uint8_t> payload, std::span<float> out, agg::Isa isa) {
  return decode_impl(codec, payload, out, isa, false);
}

CodecError decode_add(CodecId codec, std::span<const uint8_t> payload, std::span<float> acc, agg::Isa isa) {
  return decode_impl(codec, payload, acc, isa, true);
}

}  // namespace sg::compress
