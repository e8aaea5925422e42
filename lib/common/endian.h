// Explicit big-endian integer fields for packed wire structs.
// A field declared be32 can only be read through load()/store(), so a missing
// byte swap is a compile error instead of a silent bug.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace sg {

template <typename T>
constexpr T byteswap_if_little(T v) {
  if constexpr (std::endian::native == std::endian::big || sizeof(T) == 1) {
    return v;
  } else if constexpr (sizeof(T) == 2) {
    return static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(v)));
  } else if constexpr (sizeof(T) == 4) {
    return static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(v)));
  } else {
    static_assert(sizeof(T) == 8);
    return static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(v)));
  }
}

// Stored in network byte order; byte-aligned so it can sit at any offset of a packed header.
template <typename T>
class BigEndian {
 public:
  constexpr BigEndian() = default;
  constexpr explicit BigEndian(T host) { store(host); }
  constexpr T load() const {
    T raw{};
    std::memcpy(&raw, bytes_, sizeof(T));
    return byteswap_if_little(raw);
  }
  constexpr void store(T host) {
    T raw = byteswap_if_little(host);
    std::memcpy(bytes_, &raw, sizeof(T));
  }

 private:
  unsigned char bytes_[sizeof(T)]{};
};

using be16 = BigEndian<uint16_t>;
using be32 = BigEndian<uint32_t>;
using be64 = BigEndian<uint64_t>;
static_assert(sizeof(be16) == 2 && alignof(be16) == 1);
static_assert(sizeof(be32) == 4 && alignof(be32) == 1);
static_assert(sizeof(be64) == 8 && alignof(be64) == 1);

}  // namespace sg
