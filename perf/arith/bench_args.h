// Command line of the arith benchmarks: --quick, --isa scalar|avx2|avx512.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "aggregate/isa.h"

namespace sg::bench {

struct ArithArgs {
  bool quick = false;
  std::optional<agg::Isa> isa;  // only this ISA instead of every supported one
};

inline ArithArgs parse_arith_args(int argc, char** argv) {
  ArithArgs a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view s = argv[i];
    if (s == "--quick") {
      a.quick = true;
    } else if (s == "--isa" && i + 1 < argc) {
      const std::string_view v = argv[++i];
      for (int k = 0; k < agg::kIsaCount; ++k)
        if (agg::isa_name(static_cast<agg::Isa>(k)) == v) a.isa = static_cast<agg::Isa>(k);
      if (!a.isa || !agg::isa_supported(*a.isa)) {
        std::fprintf(stderr, "--isa %.*s: unknown or not supported by this CPU\n", static_cast<int>(v.size()), v.data());
        std::exit(2);
      }
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--isa scalar|avx2|avx512]\n", argv[0]);
      std::exit(2);
    }
  }
  return a;
}

inline std::vector<agg::Isa> isas_to_run(const ArithArgs& a) {
  if (a.isa) return {*a.isa};
  std::vector<agg::Isa> v;
  for (int k = agg::kIsaCount - 1; k >= 0; --k)
    if (agg::isa_supported(static_cast<agg::Isa>(k))) v.push_back(static_cast<agg::Isa>(k));
  return v;
}

}  // namespace sg::bench
