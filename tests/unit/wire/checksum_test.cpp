#include "wire/checksum.h"

#include <gtest/gtest.h>

#include <vector>

namespace sg::wire {
namespace {

TEST(Checksum, KnownIpv4HeaderVector) {
  // Classic example header (checksum field zeroed); its checksum is 0xb861.
  std::vector<uint8_t> h = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                            0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  EXPECT_EQ(internet_checksum(h), 0xb861);
  h[10] = 0xb8;
  h[11] = 0x61;
  EXPECT_EQ(internet_checksum(h), 0);  // a correct header sums to zero
}

TEST(Checksum, OddLengthPadsWithZero) {
  const std::vector<uint8_t> odd = {0x12, 0x34, 0x56};
  const std::vector<uint8_t> even = {0x12, 0x34, 0x56, 0x00};
  EXPECT_EQ(internet_checksum(odd), internet_checksum(even));
}

TEST(Checksum, ChainingEqualsOneShot) {
  std::vector<uint8_t> a(37);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 7 + 3);
  const uint64_t acc = csum_add(std::span(a).first(20));
  EXPECT_EQ(csum_finish(csum_add(std::span(a).subspan(20), acc)), internet_checksum(a));
}

// The word-at-a-time sum against RFC 1071's definition (16-bit big-endian words, carries
// folded) on every length up to two jumbo-ish frames, every alignment, and all-ones data
// (the carry-heaviest input).
TEST(Checksum, MatchesTheDefinitionOnEveryLengthAndAlignment) {
  auto reference = [](const uint8_t* p, size_t n) {
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
      sum += static_cast<uint32_t>(p[i]) << 8 | p[i + 1];
      sum = (sum & 0xffff) + (sum >> 16);
    }
    if (n % 2) {
      sum += static_cast<uint32_t>(p[n - 1]) << 8;
      sum = (sum & 0xffff) + (sum >> 16);
    }
    return static_cast<uint16_t>(~sum & 0xffff);
  };
  std::vector<uint8_t> buf(3000 + 8);
  uint32_t x = 12345;
  for (auto& b : buf) b = static_cast<uint8_t>((x = x * 1103515245 + 12345) >> 16);
  for (size_t off = 0; off < 4; ++off)
    for (size_t n = 0; n <= 3000; n += (n < 64 ? 1 : 37))
      ASSERT_EQ(internet_checksum(std::span(buf).subspan(off, n)), reference(buf.data() + off, n)) << off << " " << n;
  std::vector<uint8_t> ones(9000, 0xff);
  for (size_t n : {2u, 4u, 16u, 1392u, 8999u, 9000u})
    ASSERT_EQ(internet_checksum(std::span(ones).first(n)), reference(ones.data(), n)) << n;
}

}  // namespace
}  // namespace sg::wire
