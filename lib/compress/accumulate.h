// Receive path for compressed chunks: decode a codec payload straight into an aggregation
// accumulator (no temporary buffer), counting its contributors, all or nothing.
#pragma once

#include <cstdint>
#include <span>

#include "aggregate/accumulator.h"
#include "common/codec_id.h"
#include "compress/codec.h"

namespace sg::compress {

// Adds the payload of `chunk` (encoded with `codec`, bytes owned by the caller and read in
// place) into `acc` using acc's ISA. Errors: kChunkIndex / kContributors from the
// accumulator, or any decode error; on error `acc` is unchanged.
CodecError add_encoded(agg::Accumulator& acc, uint32_t chunk, CodecId codec, std::span<const uint8_t> payload,
                       uint32_t contributors = 1);

}  // namespace sg::compress
