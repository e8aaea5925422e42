// Which of a gateway's engines runs a shard: shard s belongs to engine s % engines. Every
// place that splits a job over engines (SiteSync's own shards, the dataplane steering a
// frame to its shard's engine) asks this one function, so they can never disagree.
#pragma once

#include <cstdint>

namespace sg::sync {

constexpr uint32_t shard_engine(uint32_t shard, uint32_t engines) { return engines ? shard % engines : 0; }

}  // namespace sg::sync
