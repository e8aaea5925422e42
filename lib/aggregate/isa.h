// Instruction-set choice for the arithmetic kernels (aggregation and codecs).
// The build uses no -march flag: every SIMD kernel is compiled with a target attribute and
// picked at run time from what this CPU reports, so one binary runs on any x86-64.
#pragma once

#include <cstdint>
#include <string_view>

namespace sg::agg {

enum class Isa : uint8_t {
  kScalar = 0,  // baseline x86-64 (the compiler may still use SSE2)
  kAvx2 = 1,    // AVX2 + F16C
  kAvx512 = 2,  // AVX-512 F/BW/VL/DQ (+ F16C)
};
inline constexpr int kIsaCount = 3;

std::string_view isa_name(Isa isa);

// True if this CPU can run kernels of `isa`. kScalar is always supported.
bool isa_supported(Isa isa);

// The widest supported ISA, detected once.
Isa best_isa();

}  // namespace sg::agg
