// Fuzzes every codec decoder on untrusted payloads.
// Input: byte 0 picks the codec (low 3 bits: 0-4 valid sg::CodecId, 5-7 unknown), byte 1
// picks the ISA and whether the output span has the size the payload claims or a size
// from byte 2; the rest is the payload.
// Invariants (trap on violation): no write outside the output span (guard floats), an error
// leaves the output untouched, every ISA decodes to the same bits, decode_add equals decode
// added to the accumulator, add_encoded agrees with decode_add, and f16/bf16 payloads
// re-encode to the same finite values.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "aggregate/accumulator.h"
#include "compress/accumulate.h"
#include "compress/codec.h"
#include "compress/encoder.h"

namespace {

using namespace sg;
using namespace sg::compress;

constexpr size_t kGuard = 16;
constexpr float kSentinel = 1234.5f;
constexpr size_t kMaxElems = 1 << 16;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

bool same(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }
bool equal_or_both_nan(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Decodes into a span of n floats framed by guards; returns the error, checks the frame.
CodecError guarded(CodecId c, std::span<const uint8_t> p, size_t n, agg::Isa isa, bool add,
                   const std::vector<float>& init, std::vector<float>* result) {
  std::vector<float> buf(n + 2 * kGuard, kSentinel);
  if (n) std::memcpy(buf.data() + kGuard, init.data(), 4 * n);
  const std::span<float> out(buf.data() + kGuard, n);
  const CodecError e = add ? decode_add(c, p, out, isa) : decode(c, p, out, isa);
  for (size_t i = 0; i < kGuard; ++i) check(same(buf[i], kSentinel) && same(buf[kGuard + n + i], kSentinel));
  if (e != CodecError::kOk && n) check(std::memcmp(out.data(), init.data(), 4 * n) == 0);
  result->assign(out.begin(), out.end());
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const auto codec = static_cast<CodecId>(data[0] & 7);
  const auto isa_pick = static_cast<agg::Isa>((data[1] >> 1) % agg::kIsaCount);
  const agg::Isa isa = agg::isa_supported(isa_pick) ? isa_pick : agg::Isa::kScalar;
  const std::span<const uint8_t> p(data + 3, size - 3);

  const CountResult claimed = decoded_count(codec, p);
  size_t n = data[2];
  if ((data[1] & 1) && claimed.err == CodecError::kOk && claimed.count <= kMaxElems) n = claimed.count;

  const std::vector<float> zeros(n, 0.0f);
  std::vector<float> init(n);
  for (size_t i = 0; i < n; ++i) init[i] = static_cast<float>(i % 7) - 3.0f;

  std::vector<float> dec, added;
  const CodecError e = guarded(codec, p, n, isa, false, zeros, &dec);
  const CodecError e_add = guarded(codec, p, n, isa, true, init, &added);
  check(e == e_add);
  if (e != CodecError::kOk) return 0;
  check(claimed.err == CodecError::kOk && claimed.count == n);

  for (size_t i = 0; i < n; ++i) check(equal_or_both_nan(added[i], init[i] + dec[i]));

  for (int k = 0; k < agg::kIsaCount; ++k) {  // every ISA, same bits
    const auto other = static_cast<agg::Isa>(k);
    if (!agg::isa_supported(other)) continue;
    std::vector<float> d2;
    check(guarded(codec, p, n, other, false, zeros, &d2) == CodecError::kOk);
    check(n == 0 || std::memcmp(d2.data(), dec.data(), 4 * n) == 0);
  }

  if (n > 0) {  // the accumulator path: one chunk of n, two contributors
    agg::Accumulator acc(n, n, isa);
    check(add_encoded(acc, 0, codec, p, 2) == CodecError::kOk);
    check(acc.contributors(0) == 2);
    for (size_t i = 0; i < n; ++i) check(equal_or_both_nan(acc.chunk_values(0)[i], 0.0f + dec[i]));
  }

  if ((codec == CodecId::kF16 || codec == CodecId::kBf16) && n > 0) {
    // Decoded halves are representable: re-encoding gives them back (finite ones; the f16
    // encoder saturates infinities).
    Encoder enc(n, isa);
    std::vector<uint8_t> again(max_encoded_size(codec, n));
    const EncodeResult r = enc.encode(codec, dec, again);
    check(r.err == CodecError::kOk && r.bytes == 2 * n);
    std::vector<float> dec2(n);
    check(decode(codec, std::span(again.data(), r.bytes), dec2, isa) == CodecError::kOk);
    for (size_t i = 0; i < n; ++i)
      if (std::isfinite(dec[i])) check(same(dec2[i], dec[i]));
  }
  return 0;
}
