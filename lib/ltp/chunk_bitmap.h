// Bit set over caller-owned 64-bit words (the receiver sizes all of them up front).
// Bit i lives in word i/64 at bit i%64, so on a little-endian host byte k of the word array
// holds chunks 8k..8k+7 LSB first: exactly the ACK/CLOSE wire bitmap layout.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>

namespace sg::ltp {

static_assert(std::endian::native == std::endian::little, "wire bitmaps are copied as bytes");

class ChunkBitmap {
 public:
  ChunkBitmap() = default;
  ChunkBitmap(uint64_t* words, uint32_t bits) : words_(words), bits_(bits) {}

  static constexpr size_t words_for(uint32_t bits) { return (static_cast<size_t>(bits) + 63) / 64; }

  void clear() { std::memset(words_, 0, words_for(bits_) * 8); }
  uint32_t size() const { return bits_; }
  bool test(uint32_t i) const { return (words_[i >> 6] >> (i & 63)) & 1; }
  void set(uint32_t i) { words_[i >> 6] |= uint64_t{1} << (i & 63); }

  // First clear bit at or after `from` (size() if none).
  uint32_t next_clear(uint32_t from) const {
    for (uint32_t w = from >> 6; w < words_for(bits_); ++w) {
      uint64_t inv = ~words_[w];
      if (w == (from >> 6)) inv &= ~uint64_t{0} << (from & 63);
      if (inv) {
        uint32_t i = (w << 6) + static_cast<uint32_t>(std::countr_zero(inv));
        return i < bits_ ? i : bits_;
      }
    }
    return bits_;
  }

  // Bytes [byte_off, byte_off + n) of the bit array (clipped to the bitmap's whole bytes).
  std::span<const uint8_t> bytes(size_t byte_off, size_t n) const {
    const size_t total = (static_cast<size_t>(bits_) + 7) / 8;
    if (byte_off >= total) return {};
    if (n > total - byte_off) n = total - byte_off;
    return {reinterpret_cast<const uint8_t*>(words_) + byte_off, n};
  }

 private:
  uint64_t* words_ = nullptr;
  uint32_t bits_ = 0;
};

}  // namespace sg::ltp
