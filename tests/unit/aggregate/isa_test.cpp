#include "aggregate/isa.h"

#include <gtest/gtest.h>

namespace sg::agg {
namespace {

TEST(Isa, ScalarAlwaysSupportedAndBestIsSupported) {
  EXPECT_TRUE(isa_supported(Isa::kScalar));
  EXPECT_TRUE(isa_supported(best_isa()));
}

TEST(Isa, BestIsTheWidestSupported) {
  // AVX-512 implies AVX2 on every CPU that has it; the best is never below a supported ISA.
  if (isa_supported(Isa::kAvx512)) {
    EXPECT_EQ(best_isa(), Isa::kAvx512);
    EXPECT_TRUE(isa_supported(Isa::kAvx2));
  } else if (isa_supported(Isa::kAvx2)) {
    EXPECT_EQ(best_isa(), Isa::kAvx2);
  } else {
    EXPECT_EQ(best_isa(), Isa::kScalar);
  }
}

TEST(Isa, Names) {
  EXPECT_EQ(isa_name(Isa::kScalar), "scalar");
  EXPECT_EQ(isa_name(Isa::kAvx2), "avx2");
  EXPECT_EQ(isa_name(Isa::kAvx512), "avx512");
}

}  // namespace
}  // namespace sg::agg
