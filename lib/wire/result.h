// Typed parse/build errors for everything in lib/wire, and a small value-or-error type
// (C++20 has no std::expected). Parsers never throw: bad input is a WireError.
#pragma once

#include <cstdint>
#include <utility>

namespace sg::wire {

enum class WireError : uint8_t {
  kOk = 0,
  kTruncated,     // the buffer is shorter than a header or a length field says
  kBadMagic,      // not an LTP message
  kBadVersion,    // IPv4 version != 4, or an LTP version we do not speak
  kBadType,       // unknown message type / ethertype / ARP op
  kBadLength,     // a length field contradicts another or the buffer
  kBadChecksum,   // IPv4 header or UDP checksum mismatch
  kBadField,      // a field holds a value outside its documented range
  kUnsupported,   // valid but not handled here (IP fragments, IP options we reject...)
  kNoSpace,       // a builder's output buffer is too small
};

constexpr const char* to_string(WireError e) {
  switch (e) {
    case WireError::kOk: return "ok";
    case WireError::kTruncated: return "truncated";
    case WireError::kBadMagic: return "bad-magic";
    case WireError::kBadVersion: return "bad-version";
    case WireError::kBadType: return "bad-type";
    case WireError::kBadLength: return "bad-length";
    case WireError::kBadChecksum: return "bad-checksum";
    case WireError::kBadField: return "bad-field";
    case WireError::kUnsupported: return "unsupported";
    case WireError::kNoSpace: return "no-space";
  }
  return "unknown";
}

// Either a T or a WireError. T must be default-constructible and cheap to copy
// (all parse results here are small structs of offsets and host-order fields).
template <typename T>
class Result {
 public:
  Result(T v) : value_(std::move(v)) {}  // NOLINT: implicit on purpose, `return value;`
  Result(WireError e) : error_(e) {}     // NOLINT
  bool ok() const { return error_ == WireError::kOk; }
  explicit operator bool() const { return ok(); }
  WireError error() const { return error_; }
  const T& value() const { return value_; }
  T& value() { return value_; }
  const T* operator->() const { return &value_; }
  const T& operator*() const { return value_; }

 private:
  T value_{};
  WireError error_ = WireError::kOk;
};

}  // namespace sg::wire
