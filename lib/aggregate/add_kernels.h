// Element-wise float32 kernels behind the accumulator, one set per ISA.
// Every variant performs the same IEEE operation per element (one add, or one divide), in
// the same order, with no FMA: results are bit-identical across ISAs for the same input.
#pragma once

#include <cstddef>
#include <cstdint>

#include "aggregate/isa.h"

namespace sg::agg {

struct AddKernels {
  // acc[i] += f32 at src + 4*i, for i < n. `src` is little-endian float32 bytes at any
  // alignment (a pointer into a received packet); `acc` is any float array.
  void (*add)(float* acc, const uint8_t* src, size_t n);
  // acc[i] /= divisor, for i < n (the mean of a chunk).
  void (*divide)(float* acc, size_t n, float divisor);
};

// The kernels of `isa`; the caller checks isa_supported(isa) first (an unsupported ISA
// would fault with an illegal instruction).
const AddKernels& add_kernels(Isa isa);

}  // namespace sg::agg
