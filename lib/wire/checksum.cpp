#include "wire/checksum.h"

#include <cstring>

namespace sg::wire {

uint64_t csum_add(std::span<const uint8_t> bytes, uint64_t acc) {
  const uint8_t* p = bytes.data();
  size_t n = bytes.size();
  // Sum 32-bit big-endian words into 64 bits: carries are kept and folded at the end.
  while (n >= 4) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    acc += __builtin_bswap32(w);
    p += 4;
    n -= 4;
  }
  if (n >= 2) {
    acc += static_cast<uint32_t>(p[0]) << 8 | p[1];
    p += 2;
    n -= 2;
  }
  if (n == 1) acc += static_cast<uint32_t>(p[0]) << 8;
  return acc;
}

uint16_t csum_finish(uint64_t acc) {
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(~acc & 0xffff);
}

}  // namespace sg::wire
