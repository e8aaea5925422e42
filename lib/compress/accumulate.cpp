#include "compress/accumulate.h"

namespace sg::compress {

CodecError add_encoded(agg::Accumulator& acc, uint32_t chunk, CodecId codec, std::span<const uint8_t> payload,
                       uint32_t contributors) {
  switch (acc.can_add(chunk, contributors)) {
    case agg::AggError::kOk: break;
    case agg::AggError::kChunkIndex: return CodecError::kChunkIndex;
    default: return CodecError::kContributors;
  }
  if (CodecError e = decode_add(codec, payload, acc.chunk_data(chunk), acc.isa()); e != CodecError::kOk) return e;
  acc.count(chunk, contributors);
  return CodecError::kOk;
}

}  // namespace sg::compress
