#include "policy/messages.h"

#include <gtest/gtest.h>

#include "policy_test_util.h"

namespace sg::policy {
namespace {

Message state_msg() {
  Message m;
  m.type = MsgType::kState;
  m.from = 0;
  m.to = 2;
  m.nonce = 0x1234'5678'9abc;
  m.state.synced = true;
  m.state.current_round = 41;
  m.state.max_attempt = 3;
  m.state.prev = PolicyRecord{4, 10, plan_bytes(3, 4)};
  m.state.active = PolicyRecord{5, 40, plan_bytes(3, 5)};
  m.state.next = Proposal{6, 3, 44, Decision::kCommit, plan_bytes(3, 6)};
  return m;
}

TEST(PolicyMessages, EveryTypeRoundTrips) {
  std::vector<Message> all;
  Message p;
  p.type = MsgType::kPropose;
  p.from = 0;
  p.to = 1;
  p.version = 7;
  p.attempt = 2;
  p.round = 99;
  p.plan = plan_bytes(3, 7);
  all.push_back(p);
  Message r = p;
  r.type = MsgType::kPrepared;
  r.plan.clear();
  r.round = kNoRound;  // a gateway that has begun no round
  r.status = 1;
  all.push_back(r);
  r.type = MsgType::kDecide;
  r.status = static_cast<uint8_t>(Decision::kAbort);
  all.push_back(r);
  r.type = MsgType::kDecidedAck;
  r.status = 0;
  all.push_back(r);
  r.type = MsgType::kStateRequest;
  r.nonce = 77;
  all.push_back(r);
  all.push_back(state_msg());
  for (const Message& m : all) {
    std::vector<uint8_t> b;
    encode(m, b);
    Message back;
    ASSERT_EQ(decode(b, back), MsgError::kOk) << static_cast<int>(m.type);
    EXPECT_EQ(message_key(back), message_key(m)) << static_cast<int>(m.type);
  }
}

TEST(PolicyMessages, EveryTruncationIsTyped) {
  std::vector<uint8_t> b;
  encode(state_msg(), b);
  for (size_t len = 0; len < b.size(); ++len) {
    Message out;
    EXPECT_EQ(decode(std::span(b.data(), len), out), MsgError::kTruncated) << len;
  }
}

TEST(PolicyMessages, BadFieldsAreTyped) {
  std::vector<uint8_t> good;
  encode(state_msg(), good);
  Message out;
  auto b = good;
  b[1] = 'X';
  EXPECT_EQ(decode(b, out), MsgError::kBadMagic);
  b = good;
  b[2] = 9;
  EXPECT_EQ(decode(b, out), MsgError::kBadVersion);
  b = good;
  b[3] = 0;
  EXPECT_EQ(decode(b, out), MsgError::kBadType);
  b[3] = 7;
  EXPECT_EQ(decode(b, out), MsgError::kBadType);
  b = good;
  b.push_back(0);
  EXPECT_EQ(decode(b, out), MsgError::kTrailingBytes);
  b = good;
  b[kMsgHeaderBytes] |= 0x80;  // unknown STATE flag
  EXPECT_EQ(decode(b, out), MsgError::kBadStatus);
  b = good;
  b[kMsgHeaderBytes - 9] = 0x80;  // header round above the signed range
  EXPECT_EQ(decode(b, out), MsgError::kBadRound);
  // A plan length beyond the limit is refused before anything is copied.
  Message p;
  p.type = MsgType::kPropose;
  p.plan = {1, 2, 3};
  std::vector<uint8_t> pb;
  encode(p, pb);
  pb[kMsgHeaderBytes] = 0xFF;
  EXPECT_EQ(decode(pb, out), MsgError::kPlanTooLarge);
  // Status out of range for its type.
  Message d;
  d.type = MsgType::kDecide;
  d.status = 3;
  std::vector<uint8_t> db;
  encode(d, db);
  EXPECT_EQ(decode(db, out), MsgError::kBadStatus);
}

}  // namespace
}  // namespace sg::policy
