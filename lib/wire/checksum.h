// RFC 1071 internet checksum (IPv4 header, UDP with pseudo-header).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace sg::wire {

// One's-complement sum of 16-bit big-endian words, not folded; `acc` chains calls.
// An odd trailing byte is padded with zero, so only the LAST span of a chain may be odd.
uint64_t csum_add(std::span<const uint8_t> bytes, uint64_t acc = 0);

// Folds a csum_add accumulator to 16 bits and complements it: the value to store.
uint16_t csum_finish(uint64_t acc);
// Folds a csum_add accumulator to 16 bits without complementing it: a partial sum to carry
// into a later csum_add (the `acc` argument) or UdpSpec::tail_sum.
inline uint16_t csum_fold(uint64_t acc) { return static_cast<uint16_t>(~csum_finish(acc)); }

inline uint16_t internet_checksum(std::span<const uint8_t> bytes) { return csum_finish(csum_add(bytes)); }

}  // namespace sg::wire
