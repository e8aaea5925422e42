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

}  // namespace
}  // namespace sg::wire
