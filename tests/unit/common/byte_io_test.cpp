#include "common/byte_io.h"

#include <gtest/gtest.h>

#include <vector>

namespace sg {
namespace {

TEST(ByteWriter, WritesBigEndianInOrder) {
  std::vector<uint8_t> out = {0xee};  // appends after what is there
  ByteWriter w(out);
  w.u8(0x01);
  w.be<uint16_t>(0x0203);
  w.be<uint32_t>(0x04050607);
  w.be<uint64_t>(0x08090a0b0c0d0e0fULL);
  const std::vector<uint8_t> tail = {0x10, 0x11};
  w.bytes(tail);
  w.bytes({});
  const std::vector<uint8_t> want = {0xee, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
                                     0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11};
  EXPECT_EQ(out, want);
}

TEST(ByteReader, ReadsWhatTheWriterWrote) {
  std::vector<uint8_t> buf;
  ByteWriter w(buf);
  w.u8(0xab);
  w.be<uint16_t>(0xfffe);
  w.be<uint32_t>(0x80000001u);
  w.be<uint64_t>(0xfedcba9876543210ULL);
  const std::vector<uint8_t> blob = {1, 2, 3};
  w.bytes(blob);

  ByteReader r(buf);
  EXPECT_EQ(r.left(), buf.size());
  EXPECT_EQ(r.u8(), 0xab);
  EXPECT_EQ(r.be<uint16_t>(), 0xfffe);
  EXPECT_EQ(r.be<uint32_t>(), 0x80000001u);
  EXPECT_EQ(r.be<uint64_t>(), 0xfedcba9876543210ULL);
  const std::span<const uint8_t> b = r.bytes(3);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b.data(), buf.data() + buf.size() - 3) << "bytes() points into the input, no copy";
  EXPECT_EQ(r.left(), 0u);
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.overrun());
  EXPECT_TRUE(r.bytes(0).empty()) << "an empty read at the end fits";
  EXPECT_TRUE(r.ok());
}

TEST(ByteReader, ReadPastTheEndReadsNothingAndLatches) {
  const std::vector<uint8_t> buf = {0x01, 0x02, 0x03};
  ByteReader r(buf);
  EXPECT_EQ(r.be<uint16_t>(), 0x0102);
  // Two bytes wanted, one left: nothing is consumed, the value is 0.
  EXPECT_EQ(r.be<uint16_t>(), 0);
  EXPECT_TRUE(r.overrun());
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.left(), 1u);
  // Latched: even a read that would fit now returns 0.
  EXPECT_EQ(r.u8(), 0);
  EXPECT_EQ(r.left(), 1u);
}

TEST(ByteReader, OversizedBytesRequestIsAnOverrunNotAWrap) {
  const std::vector<uint8_t> buf = {1, 2, 3, 4};
  ByteReader r(buf);
  r.u8();
  EXPECT_TRUE(r.bytes(SIZE_MAX).empty());
  EXPECT_TRUE(r.overrun());
  EXPECT_EQ(r.left(), 3u);
}

TEST(ByteReader, EveryWidthChecksItsOwnLength) {
  const std::vector<uint8_t> seven(7, 0xff);
  ByteReader r64(seven);
  EXPECT_EQ(r64.be<uint64_t>(), 0u);
  EXPECT_TRUE(r64.overrun());
  ByteReader r32(std::span<const uint8_t>(seven).first(3));
  EXPECT_EQ(r32.be<uint32_t>(), 0u);
  EXPECT_TRUE(r32.overrun());
  ByteReader r8(std::span<const uint8_t>{});
  EXPECT_EQ(r8.u8(), 0);
  EXPECT_TRUE(r8.overrun());
}

TEST(ByteReader, FailStopsReadingWithoutCountingAsOverrun) {
  const std::vector<uint8_t> buf = {9, 8, 7};
  ByteReader r(buf);
  EXPECT_EQ(r.u8(), 9);
  r.fail();  // e.g. the caller found a bad count in what it read
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.overrun());
  EXPECT_EQ(r.u8(), 0);
  EXPECT_EQ(r.left(), 2u) << "nothing read after fail()";
  EXPECT_TRUE(r.bytes(1).empty());
  EXPECT_FALSE(r.overrun());
}

}  // namespace
}  // namespace sg
