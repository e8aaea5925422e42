#include "compress/accumulate.h"

namespace sg::compress {

CodecError add_encoded(agg::Accumulator& acc, uint32_t chunk, CodecId codec, std::span<const uint8_t> payload,
                       uint32_t contributors) {
  switch (acc.can_add(chunk, contributors)) {
    case agg::AggError::kOk: break;
    case agg::AggError::kChunkIndex: return CodecError::kChunkIndex;
    default: return CodecError::kContributors;
  }
  // A fresh chunk (the round's first contribution) is written, not added to.
  const agg::Accumulator::Target t = acc.decode_target(chunk);
  const CodecError e = t.overwrite ? decode(codec, payload, t.data, acc.isa()) : decode_add(codec, payload, t.data, acc.isa());
  if (e != CodecError::kOk) return e;
  acc.count(chunk, contributors);
  return CodecError::kOk;
}

}  // namespace sg::compress
