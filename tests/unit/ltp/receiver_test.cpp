// Handler-level receiver tests on hand-built packets. Each test says what must happen.
#include "ltp/receiver.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "test_net.h"
#include "wire/ltp_codec.h"

namespace sg::ltp {
namespace {

using testing::CaptureTx;
using wire::MsgType;

constexpr uint32_t kJob = 1, kRound = 10, kPolicy = 3;
constexpr uint16_t kSrc = 7;

class RecordingSink final : public ReceiverSink {
 public:
  void on_chunk(const ChunkRef& c, std::span<const uint8_t> p) override {
    chunks[c.chunk_index] = std::vector<uint8_t>(p.begin(), p.end());
    refs.push_back(c);
  }
  void on_bubble(const ChunkRef& c, FillRule rule) override {
    bubbles.push_back(c.chunk_index);
    rules.push_back(rule);
    EXPECT_TRUE(ends.empty()) << "bubbles come before the end";
  }
  void on_transfer_end(const TransferSummary& s) override { ends.push_back(s); }
  void on_sample(const ArrivalSample& s) override { samples.push_back(s); }
  std::map<uint32_t, std::vector<uint8_t>> chunks;
  std::vector<ChunkRef> refs;
  std::vector<uint32_t> bubbles;
  std::vector<FillRule> rules;
  std::vector<TransferSummary> ends;
  std::vector<ArrivalSample> samples;
};

wire::DataFields fields(uint32_t idx, uint32_t count) {
  wire::DataFields f;
  f.src_node = kSrc;
  f.job = kJob;
  f.round = kRound;
  f.policy_version = kPolicy;
  f.shard = 0;
  f.path_id = 1;
  f.chunk_index = idx;
  f.chunk_count = count;
  f.contributors = 2;
  f.send_ts = 1000 + idx;
  return f;
}

std::vector<uint8_t> data(const wire::DataFields& f, size_t plen = 16) {
  std::vector<uint8_t> payload(plen);
  for (size_t i = 0; i < plen; ++i) payload[i] = static_cast<uint8_t>(f.chunk_index * 3 + i);
  std::vector<uint8_t> b(wire::data_msg_len(static_cast<uint16_t>(plen)));
  EXPECT_TRUE(wire::build_data(b, f, payload).ok());
  return b;
}

class ReceiverTest : public ::testing::Test {
 protected:
  void SetUp() override { make({}); }
  void make(ReceiverConfig cfg) {
    cfg.local_node = 99;
    cfg_ = cfg;
    rx_ = std::make_unique<Receiver>(cfg);
    ASSERT_TRUE(rx_->begin_round(kJob, kRound, kPolicy, now_, sink_, tx_));
  }
  void feed(const std::vector<uint8_t>& b) { rx_->on_packet(b, now_, sink_, tx_); }
  Nanos now_ = 1 * kSecond;
  ReceiverConfig cfg_;
  std::unique_ptr<Receiver> rx_;
  RecordingSink sink_;
  CaptureTx tx_;
};

TEST_F(ReceiverTest, InOrderDeliversEachChunkOnceAndClosesComplete) {
  for (uint32_t i = 0; i < 4; ++i) feed(data(fields(i, 4)));
  ASSERT_EQ(sink_.chunks.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    const auto b = data(fields(i, 4));
    EXPECT_EQ(sink_.chunks[i], std::vector<uint8_t>(b.begin() + sizeof(wire::DataHeader), b.end()));
  }
  EXPECT_EQ(sink_.refs[0].contributors, 2);
  ASSERT_EQ(sink_.ends.size(), 1u);
  EXPECT_EQ(sink_.ends[0].reason, CloseReason::kComplete);
  EXPECT_EQ(sink_.ends[0].filled, 0u);
  EXPECT_TRUE(sink_.bubbles.empty());
  EXPECT_EQ(rx_->open_transfers(), 0u);
  auto close = wire::parse_close(tx_.last(MsgType::kClose)->bytes);
  ASSERT_TRUE(close.ok());
  EXPECT_EQ(close->f.kept_count, 4u);
  EXPECT_EQ(close->bitmap[0] & 0x0f, 0x0f);
  EXPECT_EQ(rx_->stats().closed_complete, 1u);
}

TEST_F(ReceiverTest, DuplicateIsDroppedCountedAndAcked) {
  feed(data(fields(0, 4)));
  const size_t acks = tx_.count(MsgType::kAck);
  feed(data(fields(0, 4)));
  EXPECT_EQ(sink_.refs.size(), 1u) << "delivered once";
  EXPECT_EQ(rx_->stats().duplicates, 1u);
  EXPECT_EQ(tx_.count(MsgType::kAck), acks + 1) << "a duplicate means our ACK was lost: ACK at once";
}

TEST_F(ReceiverTest, AckCarriesCumulativePointSackAndEcho) {
  feed(data(fields(0, 8)));
  feed(data(fields(1, 8)));
  feed(data(fields(3, 8)));  // gap at 2: ACK at once
  auto ack = wire::parse_ack(tx_.last(MsgType::kAck)->bytes);
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(ack->f.cum_ack, 2u);
  EXPECT_EQ(ack->f.received, 3u);
  EXPECT_EQ(ack->f.echo_ts, 1003u) << "echoes the send_ts of the triggering DATA";
  EXPECT_EQ(ack->f.ack_ts, static_cast<uint64_t>(now_));
  const uint32_t bit3 = 3 - ack->f.sack_base;
  EXPECT_TRUE(ack->sack_bit(bit3));
  EXPECT_FALSE(ack->sack_bit(2 - ack->f.sack_base));
}

// DATA of the next round, held by the caller until the round begins, is acknowledged on
// arrival: the ACK names that chunk and echoes its send time, so its sender stops timing it.
// Anything but the next round under that round's policy gets no ACK (nothing would take it).
TEST_F(ReceiverTest, AckAheadAcknowledgesTheNextRoundsDataOnly) {
  auto next = fields(13, 40);
  next.round = kRound + 1;
  ASSERT_TRUE(rx_->ack_ahead(data(next), now_, tx_));
  auto ack = wire::parse_ack(tx_.last(MsgType::kAck)->bytes);
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(ack->f.round, kRound + 1);
  EXPECT_EQ(ack->f.policy_version, kPolicy);
  EXPECT_EQ(ack->f.echo_ts, next.send_ts);
  EXPECT_EQ(ack->f.path_id, next.path_id);
  EXPECT_EQ(ack->f.cum_ack, 0u);
  for (uint32_t i = 0; i < 40; ++i) {
    const bool in = i >= ack->f.sack_base && i - ack->f.sack_base < wire::kAckSackBits && ack->sack_bit(i - ack->f.sack_base);
    EXPECT_EQ(in, i == 13) << i;
  }
  EXPECT_EQ(tx_.last(MsgType::kAck)->meta.peer_node, kSrc);
  EXPECT_EQ(rx_->stats().acks_ahead, 1u);
  EXPECT_TRUE(sink_.chunks.empty()) << "acknowledged, not delivered: the caller replays it";

  auto later = next;
  later.round = kRound + 2;
  auto other_policy = next;
  other_policy.policy_version = kPolicy + 1;
  auto other_job = next;
  other_job.job = kJob + 1;
  auto bad = data(next);
  bad.resize(bad.size() - 3);  // payload_len no longer matches
  const size_t acks = tx_.count(MsgType::kAck);
  EXPECT_FALSE(rx_->ack_ahead(data(fields(1, 40)), now_, tx_)) << "the current round is taken as usual";
  EXPECT_FALSE(rx_->ack_ahead(data(later), now_, tx_));
  EXPECT_FALSE(rx_->ack_ahead(data(other_policy), now_, tx_));
  EXPECT_FALSE(rx_->ack_ahead(data(other_job), now_, tx_));
  EXPECT_FALSE(rx_->ack_ahead(bad, now_, tx_));
  EXPECT_EQ(tx_.count(MsgType::kAck), acks);
}

TEST_F(ReceiverTest, InOrderAcksEveryNthAndFlushesHeldAck) {
  feed(data(fields(0, 8)));
  EXPECT_EQ(tx_.count(MsgType::kAck), 0u) << "first in-order chunk: ACK held (ack_every = 2)";
  const Nanos due = rx_->poll(now_, sink_, tx_);
  EXPECT_EQ(due, now_ + cfg_.ack_delay);
  feed(data(fields(1, 8)));
  EXPECT_EQ(tx_.count(MsgType::kAck), 1u);
  feed(data(fields(2, 8)));
  now_ += cfg_.ack_delay;
  rx_->poll(now_, sink_, tx_);
  EXPECT_EQ(tx_.count(MsgType::kAck), 2u) << "held ACK sent after ack_delay";
}

// Chunks 500 us apart, a WAN link's share of a few thousand a second: past ack_delay, every
// held ACK went out alone. With ack_delay_max it waits up to twice the mean gap, so the second
// chunk sends it (ack_every = 2); the last one still goes out when the flow stops. Chunks far
// larger than a frame (the simulator's) are answered as before: nothing to save there.
TEST_F(ReceiverTest, SparseArrivalsGetOneAckPerTwoChunksWithAckDelayMax) {
  struct Case {
    Nanos max;
    size_t payload;
    size_t acks_at_most;
  };
  for (const Case k : {Case{0, 1344, 16}, Case{2 * kMilli, 1344, 9}, Case{2 * kMilli, 20000, 16}}) {
    ReceiverConfig c;
    c.ack_delay_max = k.max;
    make(c);
    const size_t before = tx_.count(MsgType::kAck);
    for (uint32_t i = 0; i < 16; ++i) {
      feed(data(fields(i, 64), k.payload));
      const Nanos next = now_ + 500 * kMicro;  // polled as a gateway polls until the next chunk
      while (now_ < next) now_ = std::min(next, std::max(now_ + 1, rx_->poll(now_, sink_, tx_)));
    }
    const size_t acks = tx_.count(MsgType::kAck) - before;
    SCOPED_TRACE(::testing::Message() << "ack_delay_max " << k.max << ", " << k.payload << " B chunks");
    EXPECT_LE(acks, k.acks_at_most);
    if (k.acks_at_most == 16) {
      EXPECT_EQ(acks, 16u) << "one ACK per chunk";
      continue;
    }
    const Nanos due = rx_->poll(now_, sink_, tx_);
    EXPECT_LE(due, now_ + k.max) << "the held ACK waits at most ack_delay_max";
    now_ = due;
    rx_->poll(now_, sink_, tx_);
    auto ack = wire::parse_ack(tx_.last(MsgType::kAck)->bytes);
    ASSERT_TRUE(ack.ok());
    EXPECT_EQ(ack->f.cum_ack, 16u) << "the last chunk acknowledged once the flow went quiet";
  }
}

TEST_F(ReceiverTest, BatchedAcksAnswerABurstWithOneAckAtThePoll) {
  ReceiverConfig c;
  c.ack_batch = true;
  make(c);
  // A burst of 6 in order, then one out of order (a gap at 6): nothing goes out before the poll.
  for (uint32_t i = 0; i < 6; ++i) feed(data(fields(i, 64)));
  feed(data(fields(40, 64)));
  EXPECT_EQ(tx_.count(MsgType::kAck), 0u) << "held for the poll after the burst";
  rx_->poll(now_, sink_, tx_);
  ASSERT_EQ(tx_.count(MsgType::kAck), 1u) << "one ACK for the burst's seven arrivals";
  auto ack = wire::parse_ack(tx_.last(MsgType::kAck)->bytes);
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(ack->f.cum_ack, 6u);
  EXPECT_EQ(ack->f.received, 7u);
  EXPECT_EQ(ack->f.echo_ts, 1040u) << "echoes the newest DATA";
  ASSERT_GE(40u, ack->f.sack_base);
  EXPECT_TRUE(ack->sack_bit(40 - ack->f.sack_base)) << "the window covers the newest arrival";
  EXPECT_FALSE(ack->sack_bit(6 - ack->f.sack_base));
  // Nothing new: the next poll sends nothing; the last chunk of a transfer is ACKed at once.
  rx_->poll(now_, sink_, tx_);
  EXPECT_EQ(tx_.count(MsgType::kAck), 1u);
  make(c);
  feed(data(fields(0, 1)));
  EXPECT_EQ(tx_.count(MsgType::kAck), 2u) << "complete: the final ACK does not wait";
}

TEST_F(ReceiverTest, PastRoundIsStaleAndAnsweredWithClose) {
  auto f = fields(0, 4);
  f.round = kRound - 1;
  feed(data(f));
  EXPECT_TRUE(sink_.refs.empty());
  EXPECT_EQ(rx_->stats().stale_round, 1u);
  auto close = wire::parse_close(tx_.last(MsgType::kClose)->bytes);
  ASSERT_TRUE(close.ok());
  EXPECT_EQ(close->f.reason, CloseReason::kStale) << "so the late sender stops";
  EXPECT_EQ(close->f.round, kRound - 1);
}

TEST_F(ReceiverTest, NextRoundIsAcceptedFartherIsDropped) {
  auto f = fields(0, 4);
  f.round = kRound + 1;  // within rounds_ahead = 1: a fast sender may start early
  feed(data(f));
  EXPECT_EQ(sink_.refs.size(), 1u);
  f.round = kRound + 2;
  feed(data(f));
  EXPECT_EQ(sink_.refs.size(), 1u);
  EXPECT_EQ(rx_->stats().future_round, 1u);
  EXPECT_EQ(tx_.count(MsgType::kClose), 0u) << "no CLOSE: the sender must retry later";
}

TEST_F(ReceiverTest, WrongPolicyVersionNeverMixesIntoARound) {
  auto f = fields(0, 4);
  f.policy_version = kPolicy - 1;
  feed(data(f));
  EXPECT_EQ(rx_->stats().stale_policy, 1u);
  EXPECT_EQ(tx_.count(MsgType::kClose), 1u);
  f.policy_version = kPolicy + 1;
  feed(data(f));
  EXPECT_EQ(rx_->stats().future_policy, 1u);
  EXPECT_TRUE(sink_.refs.empty());
  // A scheduled switch at the next round: that round takes only the new version.
  ASSERT_TRUE(rx_->schedule_policy(kJob, kRound + 1, kPolicy + 1));
  f.round = kRound + 1;
  feed(data(f));
  EXPECT_EQ(sink_.refs.size(), 1u);
  f.policy_version = kPolicy;
  f.chunk_index = 1;
  feed(data(f));
  EXPECT_EQ(sink_.refs.size(), 1u);
  EXPECT_EQ(rx_->stats().stale_policy, 2u);
}

TEST_F(ReceiverTest, UnknownVersionIsRejected) {
  auto b = data(fields(0, 4));
  b[offsetof(wire::LtpCommon, version)] = 2;
  feed(b);
  EXPECT_TRUE(sink_.refs.empty());
  EXPECT_EQ(rx_->stats().bad_version, 1u);
  auto rej = wire::parse_reject(tx_.last(MsgType::kReject)->bytes);
  ASSERT_TRUE(rej.ok());
  EXPECT_EQ(rej->offending_version, 2);
  EXPECT_EQ(rej->max_version, wire::kLtpMaxVersion);
  EXPECT_EQ(tx_.last(MsgType::kReject)->meta.peer_node, kSrc);
}

TEST_F(ReceiverTest, TruncatedAtEveryLengthIsDroppedAsMalformed) {
  const auto b = data(fields(0, 4));
  for (size_t n = 0; n < b.size(); ++n) feed(std::vector<uint8_t>(b.begin(), b.begin() + n));
  EXPECT_TRUE(sink_.refs.empty());
  EXPECT_EQ(rx_->stats().malformed, b.size());
  EXPECT_EQ(rx_->open_transfers(), 0u) << "nothing opened by garbage";
}

TEST_F(ReceiverTest, LyingLengthFieldsAreDropped) {
  auto b = data(fields(0, 4));
  b[offsetof(wire::DataHeader, payload_len) + 1] += 1;  // payload_len too long
  feed(b);
  b = data(fields(0, 4));
  b[offsetof(wire::DataHeader, payload_len) + 1] -= 1;  // too short
  feed(b);
  b = data(fields(0, 4));
  b[offsetof(wire::DataHeader, chunk_index) + 3] = 4;  // index == count
  feed(b);
  EXPECT_EQ(rx_->stats().malformed, 3u);
  EXPECT_TRUE(sink_.refs.empty());
  // chunk_count disagreeing with the open transfer's.
  feed(data(fields(0, 4)));
  feed(data(fields(1, 5)));
  EXPECT_EQ(rx_->stats().count_mismatch, 1u);
  EXPECT_EQ(sink_.refs.size(), 1u);
}

TEST_F(ReceiverTest, OversizedTransferIsRefused) {
  ReceiverConfig c;
  c.max_chunks = 16;
  make(c);
  feed(data(fields(0, 17)));
  EXPECT_EQ(rx_->stats().refused_too_large, 1u);
  auto close = wire::parse_close(tx_.last(MsgType::kClose)->bytes);
  ASSERT_TRUE(close.ok());
  EXPECT_EQ(close->f.reason, CloseReason::kRefused);
}

TEST_F(ReceiverTest, FullTableRefusesSilentlyAndCounts) {
  ReceiverConfig c;
  c.max_transfers = 2;
  make(c);
  for (uint16_t shard = 0; shard < 3; ++shard) {
    auto f = fields(0, 4);
    f.shard = shard;
    feed(data(f));
  }
  EXPECT_EQ(rx_->open_transfers(), 2u);
  EXPECT_EQ(rx_->stats().refused_table_full, 1u);
  EXPECT_EQ(tx_.count(MsgType::kClose), 0u) << "the sender retries; a slot frees up";
}

TEST_F(ReceiverTest, UnknownJobAndWrongTypeAreCounted) {
  auto f = fields(0, 4);
  f.job = 77;
  feed(data(f));
  EXPECT_EQ(rx_->stats().unknown_job, 1u);
  std::vector<uint8_t> ack(sizeof(wire::AckHeader));
  ASSERT_TRUE(wire::build_ack(ack, {}, {}).ok());
  feed(ack);
  EXPECT_EQ(rx_->stats().wrong_type, 1u);
}

TEST_F(ReceiverTest, LateDataAfterCloseGetsCloseAgainNotANewTransfer) {
  for (uint32_t i = 0; i < 2; ++i) feed(data(fields(i, 2)));
  ASSERT_EQ(sink_.ends.size(), 1u);
  const size_t closes = tx_.count(MsgType::kClose);
  feed(data(fields(0, 2)));
  EXPECT_EQ(rx_->stats().late_after_close, 1u);
  EXPECT_EQ(tx_.count(MsgType::kClose), closes + 1);
  EXPECT_EQ(rx_->open_transfers(), 0u);
  EXPECT_EQ(sink_.refs.size(), 2u);
}

TEST_F(ReceiverTest, EarlyCloseFillsBubblesOnceStalledAboveThreshold) {
  ReceiverConfig c;
  c.early_close.initial_loss = 0.04;  // threshold 1 - 0.5 * 0.04 = 0.98
  c.fill_rule = FillRule::kPrevious;
  make(c);
  EXPECT_DOUBLE_EQ(rx_->threshold(), 0.98);
  for (uint32_t i = 0; i < 100; ++i)
    if (i != 50) feed(data(fields(i, 100)));
  EXPECT_TRUE(sink_.ends.empty());
  const Nanos quiet = EarlyClose(c.early_close).quiet(rx_->srtt(), 0);
  now_ += quiet - 1;
  rx_->poll(now_, sink_, tx_);
  EXPECT_TRUE(sink_.ends.empty()) << "not stalled yet";
  now_ += 1;
  rx_->poll(now_, sink_, tx_);
  ASSERT_EQ(sink_.ends.size(), 1u);
  EXPECT_EQ(sink_.ends[0].reason, CloseReason::kEarlyClose);
  ASSERT_EQ(sink_.bubbles, std::vector<uint32_t>{50});
  EXPECT_EQ(sink_.rules[0], FillRule::kPrevious);
  EXPECT_EQ(sink_.ends[0].filled, 1u);
  auto close = wire::parse_close(tx_.last(MsgType::kClose)->bytes);
  ASSERT_TRUE(close.ok());
  EXPECT_EQ(close->f.kept_count, 99u);
  EXPECT_EQ(close->f.fill_rule, static_cast<uint8_t>(FillRule::kPrevious));
  EXPECT_FALSE((close->bitmap[50 / 8] >> (50 % 8)) & 1) << "chunk 50 reported as a bubble";
  EXPECT_TRUE((close->bitmap[49 / 8] >> (49 % 8)) & 1);
}

// A sink that wants every transfer from one source whole (a site's parent sending the result).
class WholeFromSink final : public ReceiverSink {
 public:
  explicit WholeFromSink(RecordingSink& inner, uint16_t whole_src) : inner_(inner), whole_src_(whole_src) {}
  void on_chunk(const ChunkRef& c, std::span<const uint8_t> p) override { inner_.on_chunk(c, p); }
  void on_bubble(const ChunkRef& c, FillRule rule) override { inner_.on_bubble(c, rule); }
  void on_transfer_end(const TransferSummary& s) override { inner_.on_transfer_end(s); }
  bool early_close_allowed(const TransferKey& k) const override { return k.src_node != whole_src_; }

 private:
  RecordingSink& inner_;
  uint16_t whole_src_;
};

TEST_F(ReceiverTest, ATransferTheSinkWantsWholeIsNeverClosedEarly) {
  ReceiverConfig c;
  c.early_close.initial_loss = 0.04;  // threshold 0.98
  make(c);
  WholeFromSink whole(sink_, kSrc);
  for (uint32_t i = 0; i < 100; ++i)
    if (i != 50) rx_->on_packet(data(fields(i, 100)), now_, whole, tx_);
  EXPECT_EQ(rx_->stats().opened_whole, 1u);
  now_ += 10 * kSecond / 4;  // far past the quiet time, short of abandon_after
  rx_->poll(now_, whole, tx_);
  EXPECT_TRUE(sink_.ends.empty()) << "99% arrived and quiet, yet it waits for chunk 50";
  EXPECT_EQ(rx_->stats().fallbacks, 0u);
  auto f = fields(50, 100);
  f.flags = wire::kFlagRetransmit;
  rx_->on_packet(data(f), now_, whole, tx_);
  ASSERT_EQ(sink_.ends.size(), 1u);
  EXPECT_EQ(sink_.ends[0].reason, CloseReason::kComplete);
  EXPECT_TRUE(sink_.bubbles.empty());

  // Another source's transfer in the same receiver still closes early.
  make(c);
  sink_ = RecordingSink{};
  WholeFromSink other(sink_, kSrc + 1);
  for (uint32_t i = 0; i < 100; ++i)
    if (i != 50) rx_->on_packet(data(fields(i, 100)), now_, other, tx_);
  EXPECT_EQ(rx_->stats().opened_whole, 0u);
  now_ += EarlyClose(c.early_close).quiet(rx_->srtt(), 0) + 1;
  rx_->poll(now_, other, tx_);
  ASSERT_EQ(sink_.ends.size(), 1u);
  EXPECT_EQ(sink_.ends[0].reason, CloseReason::kEarlyClose);
}

TEST_F(ReceiverTest, StreamingSenderIsNotClosedEarlyWhileItSaysMoreIsComing) {
  ReceiverConfig c;
  c.early_close.initial_loss = 0.04;  // threshold 0.98
  make(c);
  auto partial = [](uint32_t i) {
    auto f = fields(i, 100);
    f.flags = wire::kFlagPartial;
    return f;
  };
  for (uint32_t i = 0; i < 99; ++i) feed(data(partial(i)));
  now_ += 400 * kMilli;  // far past the quiet time: a whole-transfer sender would be closed
  rx_->poll(now_, sink_, tx_);
  EXPECT_TRUE(sink_.ends.empty()) << "upstream is still feeding the sender";
  EXPECT_EQ(rx_->stats().fallbacks, 0u);
  // A retransmission of an old chunk without the flag: the sender has released everything.
  auto f = fields(5, 100);
  f.flags = wire::kFlagRetransmit;
  feed(data(f));
  // A reordered, older partial copy does not undo that.
  feed(data(partial(6)));
  const Nanos quiet = EarlyClose(c.early_close).quiet(rx_->srtt(), 0);
  now_ += quiet + 1;
  rx_->poll(now_, sink_, tx_);
  ASSERT_EQ(sink_.ends.size(), 1u);
  EXPECT_EQ(sink_.ends[0].reason, CloseReason::kEarlyClose);
  EXPECT_EQ(sink_.bubbles, std::vector<uint32_t>{99});
}

TEST_F(ReceiverTest, HolesReachTheSinkAndTheChunkCountsDelivered) {
  auto f = fields(2, 4);
  f.holes = 0x3;
  feed(data(f));
  feed(data(fields(3, 4)));
  ASSERT_EQ(sink_.refs.size(), 2u);
  EXPECT_EQ(sink_.refs[0].chunk_index, 2u);
  EXPECT_EQ(sink_.refs[0].holes, 0x3) << "the sink learns which parts are holes";
  EXPECT_EQ(sink_.refs[1].holes, 0);
  EXPECT_EQ(rx_->stats().delivered, 2u) << "and it is not asked for again";
}

TEST_F(ReceiverTest, BelowThresholdWaitsAndPastTheBoundFallsBackToReliable) {
  for (uint32_t i = 0; i < 80; ++i) feed(data(fields(i, 100)));
  now_ += 600 * kMilli;  // well past any quiet time
  rx_->poll(now_, sink_, tx_);
  EXPECT_TRUE(sink_.ends.empty()) << "20% missing > 10% bound: never close early";
  EXPECT_EQ(rx_->stats().fallbacks, 1u);
  for (uint32_t i = 80; i < 99; ++i) feed(data(fields(i, 100)));
  now_ += 600 * kMilli;
  rx_->poll(now_, sink_, tx_);
  EXPECT_TRUE(sink_.ends.empty()) << "fell back: 99% is not enough any more";
  feed(data(fields(99, 100)));
  ASSERT_EQ(sink_.ends.size(), 1u);
  EXPECT_EQ(sink_.ends[0].reason, CloseReason::kComplete);
  EXPECT_TRUE(sink_.ends[0].fell_back);
  EXPECT_TRUE(sink_.bubbles.empty());
}

TEST_F(ReceiverTest, SilentSenderIsAbandonedWithBubbles) {
  feed(data(fields(0, 10)));
  now_ += cfg_.abandon_after;
  rx_->poll(now_, sink_, tx_);
  ASSERT_EQ(sink_.ends.size(), 1u);
  EXPECT_EQ(sink_.ends[0].reason, CloseReason::kAbandoned);
  EXPECT_EQ(sink_.bubbles.size(), 9u);
  EXPECT_EQ(rx_->open_transfers(), 0u);
}

TEST_F(ReceiverTest, NextRoundSupersedesOpenTransfers) {
  feed(data(fields(0, 10)));
  ASSERT_TRUE(rx_->begin_round(kJob, kRound + 1, kPolicy, now_, sink_, tx_));
  ASSERT_EQ(sink_.ends.size(), 1u);
  EXPECT_EQ(sink_.ends[0].reason, CloseReason::kSuperseded);
  EXPECT_EQ(sink_.bubbles.size(), 9u);
  feed(data(fields(1, 10)));
  EXPECT_EQ(rx_->stats().stale_round, 1u);
}

TEST_F(ReceiverTest, LongTransferClosesInSeveralBitmapParts) {
  ReceiverConfig c;
  c.max_chunks = 20000;
  make(c);
  const uint32_t n = 10000;  // 1250 bitmap bytes: two CLOSE parts (1024 + 226)
  for (uint32_t i = 0; i < n; ++i)
    if (i != 9000) feed(data(fields(i, n), 4));
  ASSERT_TRUE(rx_->begin_round(kJob, kRound + 1, kPolicy, now_, sink_, tx_));
  std::vector<wire::CloseMsg> parts;
  for (const auto& p : tx_.pkts)
    if (p.meta.type == MsgType::kClose) {
      auto m = wire::parse_close(p.bytes);
      ASSERT_TRUE(m.ok());
      parts.push_back(*m);
    }
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_TRUE(parts[0].f.more);
  EXPECT_FALSE(parts[1].f.more);
  EXPECT_EQ(parts[0].f.bitmap_base, 0u);
  EXPECT_EQ(parts[0].bitmap.size(), wire::kCloseMaxBitmapBytes);
  EXPECT_EQ(parts[1].f.bitmap_base, 8 * wire::kCloseMaxBitmapBytes);
  EXPECT_EQ(parts[1].bitmap.size(), n / 8 - wire::kCloseMaxBitmapBytes);
  EXPECT_EQ(parts[1].f.reason, CloseReason::kSuperseded);
  EXPECT_EQ(parts[1].f.kept_count, n - 1);
  const uint32_t bit = 9000 - parts[1].f.bitmap_base;
  EXPECT_FALSE((parts[1].bitmap[bit / 8] >> (bit % 8)) & 1) << "the bubble is visible in the second part";
  EXPECT_EQ(sink_.bubbles, std::vector<uint32_t>{9000});
}

TEST_F(ReceiverTest, SamplesCarryBytesPathAndRtt) {
  auto f = fields(0, 4);
  feed(data(f));
  ASSERT_EQ(sink_.samples.size(), 1u);
  EXPECT_EQ(sink_.samples[0].bytes, 56u + 16u);
  EXPECT_EQ(sink_.samples[0].path_id, 1);
  EXPECT_EQ(sink_.samples[0].rtt, -1) << "no echo yet";
  f.chunk_index = 1;
  f.echo_ts = static_cast<uint64_t>(now_ - 3 * kMilli);  // echo of an ACK we sent 3 ms ago
  feed(data(f));
  EXPECT_EQ(sink_.samples[1].rtt, 3 * kMilli);
  EXPECT_EQ(rx_->srtt(), 3 * kMilli);
}

}  // namespace
}  // namespace sg::ltp
