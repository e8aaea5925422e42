// Compact binary form of a Plan, carried as opaque bytes inside LTP CONTROL messages.
// All integers big-endian:
//   "SGPL" | format u8 (=1) | flags u8 (=0) | sites u16 | model_bytes u64
//   | shards u16 | splits u32 | codecs u32
//   shard:  root u16 | byte_end u64 (begin = previous end) | parent u16 x sites (0xFFFF = root)
//   split:  from u16 | to u16 | direct_weight u16 | relays u8 | (via u16 | weight u16) x relays
//   codec:  from u16 | to u16 | codec u8
// decode() checks lengths before reading and validate()s the result, so a Plan it returns
// always satisfies every invariant in plan.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "topology/plan.h"

namespace sg::topo {

inline constexpr uint8_t kPlanFormat = 2;  // 2: receivers after the codecs
inline constexpr size_t kPlanHeaderBytes = 4 + 1 + 1 + 2 + 8 + 2 + 4 + 4;

// Exact encoded size of `plan`, so a caller can size its buffer up front.
size_t encoded_size(const Plan& plan);
// Appends the encoding to `out`. The plan must be valid (checked; returns its error if not).
PlanError encode(const Plan& plan, std::vector<uint8_t>& out);
// Parses untrusted bytes into `plan` (overwritten). On error `plan` is left unspecified.
PlanError decode(std::span<const uint8_t> bytes, Plan& plan);

}  // namespace sg::topo
