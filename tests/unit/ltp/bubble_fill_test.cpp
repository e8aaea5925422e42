#include "ltp/bubble_fill.h"

#include <gtest/gtest.h>

#include <vector>

namespace sg::ltp {
namespace {

TEST(FillBubble, EachRule) {
  std::vector<uint8_t> dst(8, 0xee), prev(8, 3), local(8, 5);
  EXPECT_EQ(fill_bubble(FillRule::kZero, dst, prev, 4, local), 0);
  EXPECT_EQ(dst, std::vector<uint8_t>(8, 0)) << "zeros, nobody contributed";
  EXPECT_EQ(fill_bubble(FillRule::kPrevious, dst, prev, 4, local), 4);
  EXPECT_EQ(dst, prev);
  EXPECT_EQ(fill_bubble(FillRule::kLocal, dst, prev, 4, local), 1);
  EXPECT_EQ(dst, local);
  EXPECT_EQ(fill_bubble(FillRule::kLocal, dst, prev, 4, std::span(local).first(7)), 0) << "short source: zeros";
  EXPECT_EQ(dst, std::vector<uint8_t>(8, 0));
}

TEST(MessageSink, PlacesChunksAndFillsBubbles) {
  MessageSink s(40, 10, 4);
  std::vector<uint8_t> prev(40, 9);
  s.set_previous(prev, 3);
  ChunkRef c;
  c.key = {1, 2, 0, 5};
  c.chunk_count = 4;
  c.contributors = 2;
  std::vector<uint8_t> p(10, 1);
  for (uint32_t i : {0u, 1u, 3u}) {
    c.chunk_index = i;
    s.on_chunk(c, p);
  }
  c.chunk_index = 2;
  s.on_bubble(c, FillRule::kPrevious);
  TransferSummary sum;
  sum.key = c.key;
  s.on_transfer_end(sum);
  EXPECT_TRUE(s.ended());
  EXPECT_EQ(s.message()[25], 9);
  EXPECT_EQ(s.message()[35], 1);
  EXPECT_EQ(s.contributors()[2], 3);
  EXPECT_EQ(s.contributors()[0], 2);
  EXPECT_EQ(s.filled()[2], 1);
  EXPECT_EQ(s.errors(), 0u);
  c.chunk_index = 0;
  s.on_chunk(c, p);  // after the end: refused
  EXPECT_EQ(s.errors(), 1u);
}

}  // namespace
}  // namespace sg::ltp
