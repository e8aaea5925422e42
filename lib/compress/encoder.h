// Chunk encoder with optional error feedback.
//
// Error feedback: the sender keeps a residual per tensor chunk (ResidualStore). encode()
// then sends x = gradient + residual and keeps residual = x - decode(sent), so what a lossy
// codec drops is added to the next round's gradient: delayed, never lost. The sum of the
// decoded updates over rounds equals the sum of the true gradients minus the last residual.
// With kF32 the residual is flushed completely into the payload (it becomes zero).
//
// Owned by one engine; encode() allocates nothing (top-k scratch is sized up front).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "aggregate/isa.h"
#include "common/codec_id.h"
#include "compress/codec.h"

namespace sg::compress {

struct EncodeResult {
  CodecError err;
  size_t bytes;  // payload bytes written to `out`
};

class Encoder {
 public:
  // `max_elems`: largest chunk this encoder will see (top-k scratch). `isa` must be supported.
  explicit Encoder(size_t max_elems, agg::Isa isa = agg::best_isa());

  // Encodes `grad` (n elements) into `out`, which must hold encoded_size(codec, n, k)
  // bytes (max_encoded_size(codec, n) always suffices). `residual` is empty (no feedback)
  // or has n elements and is updated in place. `topk_ratio` is used by kTopK only.
  // On error nothing is written and the residual is unchanged.
  EncodeResult encode(CodecId codec, std::span<const float> grad, std::span<uint8_t> out,
                      std::span<float> residual = {}, float topk_ratio = 0.01f);

  size_t max_elems() const { return max_elems_; }
  agg::Isa isa() const { return isa_; }

 private:
  EncodeResult encode_topk(std::span<const float> grad, std::span<uint8_t> out, std::span<float> residual,
                           float ratio);

  size_t max_elems_;
  agg::Isa isa_;
  std::vector<float> x_;         // x = grad + residual when no residual buffer is given
  std::vector<uint32_t> keys_;    // top-k: candidate keys
  std::vector<uint32_t> idx_;     // top-k: candidate indices (+ kernel store padding)
  std::vector<uint32_t> sample_;  // top-k: sampled keys for the threshold estimate
};

}  // namespace sg::compress
