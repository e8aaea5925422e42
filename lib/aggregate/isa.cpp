#include "aggregate/isa.h"

namespace sg::agg {

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

bool isa_supported(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("f16c");
  }
  return false;
#else
  return isa == Isa::kScalar;
#endif
}

Isa best_isa() {
  static const Isa best = isa_supported(Isa::kAvx512) ? Isa::kAvx512
                          : isa_supported(Isa::kAvx2) ? Isa::kAvx2
                                                      : Isa::kScalar;
  return best;
}

}  // namespace sg::agg
