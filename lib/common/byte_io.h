// Big-endian byte streams for variable-length encodings (policy messages, the plan codec),
// where a packed struct cannot describe the layout. The reader checks every length before
// it reads, so a decoder of untrusted bytes never reads past its buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "common/endian.h"

namespace sg {

// Appends to a vector the caller owns. The vector grows, so a write cannot overrun; a caller
// that knows the final size reserves it first.
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}

  void u8(uint8_t v) { out_.push_back(v); }
  template <typename T>
  void be(T v) {
    static_assert(std::is_unsigned_v<T> && sizeof(T) > 1, "u8() for single bytes");
    const BigEndian<T> f(v);
    const auto* p = reinterpret_cast<const uint8_t*>(&f);
    out_.insert(out_.end(), p, p + sizeof f);
  }
  void bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }

 private:
  std::vector<uint8_t>& out_;
};

// Reads from a span it does not own. A read that does not fit in what is left reads nothing,
// returns 0 (or an empty span) and latches overrun(); every later read does the same, so a
// decoder may read a whole record and check ok() once. fail() stops reading the same way for
// an error the caller found in a value (a bad count, say), without counting as an overrun.
class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> in) : in_(in) {}

  bool ok() const { return !overrun_ && !failed_; }
  bool overrun() const { return overrun_; }
  void fail() { failed_ = true; }
  size_t left() const { return in_.size() - pos_; }

  uint8_t u8() { return take(1) ? in_[pos_ - 1] : 0; }
  template <typename T>
  T be() {
    static_assert(std::is_unsigned_v<T> && sizeof(T) > 1, "u8() for single bytes");
    if (!take(sizeof(T))) return 0;
    BigEndian<T> f;
    std::memcpy(&f, in_.data() + pos_ - sizeof(T), sizeof(T));
    return f.load();
  }
  // The next n bytes, pointing into the input.
  std::span<const uint8_t> bytes(size_t n) { return take(n) ? in_.subspan(pos_ - n, n) : std::span<const uint8_t>{}; }

 private:
  bool take(size_t n) {
    if (!ok()) return false;
    if (left() < n) {
      overrun_ = true;
      return false;
    }
    pos_ += n;
    return true;
  }

  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  bool overrun_ = false;
  bool failed_ = false;
};

}  // namespace sg
