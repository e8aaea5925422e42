// Sender handler tests: what goes out, how ACK/CLOSE/REJECT are taken, loss and timers.
#include "ltp/sender.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "ltp/aimd_controller.h"
#include "ltp/delivery_rate_controller.h"
#include "test_net.h"

namespace sg::ltp {
namespace {

using testing::CaptureTx;
using wire::MsgType;

constexpr uint16_t kMe = 7, kPeer = 99;

class SenderTest : public ::testing::Test {
 protected:
  void start(uint32_t chunks, SenderConfig cfg = {}, bool streaming = false, RateController* rc = nullptr) {
    cfg.local_node = kMe;
    cfg.peer_node = kPeer;
    data_.assign(static_cast<size_t>(chunks) * 100, 0);
    for (size_t i = 0; i < data_.size(); ++i) data_[i] = static_cast<uint8_t>(i * 13);
    tx_ = std::make_unique<Sender>(cfg, rc ? *rc : aimd_, rng_);
    ASSERT_TRUE(tx_->start(spec(streaming), now_));
  }
  // The transfer every test sends: job 1, round 2, policy 3, shard 4, chunks of 100 bytes.
  TransferSpec spec(bool streaming = false) const {
    TransferSpec s;
    s.job = 1;
    s.round = 2;
    s.policy_version = 3;
    s.shard = 4;
    s.contributors = 5;
    s.chunk_size = 100;
    s.data = data_;
    s.streaming = streaming;
    return s;
  }
  std::vector<uint8_t> ack(uint32_t cum, std::vector<uint32_t> sacked, uint64_t echo, uint32_t round = 2) {
    wire::AckFields f;
    f.src_node = kPeer;
    f.job = 1;
    f.round = round;
    f.policy_version = 3;
    f.shard = 4;
    f.cum_ack = cum;
    f.received = cum + static_cast<uint32_t>(sacked.size());
    f.ack_ts = static_cast<uint64_t>(now_);
    f.echo_ts = echo;
    f.sack_base = cum & ~7u;
    std::vector<uint8_t> bits(wire::kAckSackBits / 8, 0);
    for (uint32_t i : sacked) bits[(i - f.sack_base) / 8] |= static_cast<uint8_t>(1 << ((i - f.sack_base) % 8));
    std::vector<uint8_t> b(sizeof(wire::AckHeader));
    EXPECT_TRUE(wire::build_ack(b, f, bits).ok());
    return b;
  }
  std::vector<wire::DataMsg> sent_data() {
    std::vector<wire::DataMsg> out;
    for (const auto& p : cap_.pkts) {
      auto m = wire::parse_data(p.bytes);
      EXPECT_TRUE(m.ok());
      if (m) out.push_back(*m);
    }
    return out;
  }
  Nanos now_ = 5 * kSecond;
  Rng rng_{1};
  AimdController aimd_;
  std::vector<uint8_t> data_;
  std::unique_ptr<Sender> tx_;
  CaptureTx cap_;
};

TEST_F(SenderTest, FirstFlightIsTheInitialWindowWithCorrectHeaders) {
  start(50);
  tx_->poll(now_, cap_);
  auto d = sent_data();
  ASSERT_EQ(d.size(), 10u) << "IW10";
  for (uint32_t i = 0; i < 10; ++i) {
    EXPECT_EQ(d[i].f.chunk_index, i);
    EXPECT_EQ(d[i].f.chunk_count, 50u);
    EXPECT_EQ(d[i].f.contributors, 5);
    EXPECT_EQ(d[i].f.round, 2u);
    EXPECT_EQ(d[i].f.send_ts, static_cast<uint64_t>(now_));
    EXPECT_EQ(d[i].f.flags & wire::kFlagRetransmit, 0);
    EXPECT_TRUE(std::equal(d[i].payload.begin(), d[i].payload.end(), data_.begin() + i * 100));
  }
}

TEST_F(SenderTest, StreamingSendsOnlyReleasedChunksAndSaysMoreIsComing) {
  start(20, {}, /*streaming=*/true);
  tx_->poll(now_, cap_);
  EXPECT_TRUE(cap_.pkts.empty()) << "nothing released, nothing sent";
  tx_->release(7, now_);
  tx_->release(3, now_);
  tx_->release(7, now_);  // repeat: ignored
  EXPECT_EQ(tx_->released(), 2u);
  tx_->poll(now_, cap_);
  auto d = sent_data();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].f.chunk_index, 7u) << "release order is send order";
  EXPECT_EQ(d[1].f.chunk_index, 3u);
  for (const auto& m : d) EXPECT_TRUE(m.f.flags & wire::kFlagPartial);
  EXPECT_TRUE(std::equal(d[0].payload.begin(), d[0].payload.end(), data_.begin() + 700));
  // The receiver's link estimator must know which copies left a sender that had no more.
  // Both: the sender ran dry at the first poll, and until what it had in flight then is
  // delivered its copies show only what it was given (Linux's rule).
  for (const auto& m : d) EXPECT_TRUE(m.f.flags & wire::kFlagAppLimited);

  // Waiting for upstream data is not the peer's silence: no give-up while chunks trickle in.
  std::vector<uint32_t> released{3, 7};
  for (uint32_t i = 0; i < 20; ++i) {
    if (i == 3 || i == 7) continue;
    now_ += 2 * kSecond;  // 40 s in all, give_up_after is 10 s
    tx_->on_packet(ack(0, released, 0), now_);
    tx_->release(i, now_);
    released.push_back(i);
    tx_->poll(now_, cap_);
    ASSERT_FALSE(tx_->done()) << "chunk " << i;
  }
  d = sent_data();
  EXPECT_FALSE(d.back().f.flags & wire::kFlagPartial) << "everything released: the last chunk says so";
  for (size_t i = 2; i < d.size(); ++i) EXPECT_TRUE(d[i].f.flags & wire::kFlagAppLimited) << "trickled in one at a time";
  tx_->on_packet(ack(20, {}, 0), now_);
  EXPECT_EQ(tx_->state(), SenderState::kAcked);
}

TEST_F(SenderTest, ChunkReleasedWithHolesCarriesThemOnEverySend) {
  start(4, {}, /*streaming=*/true);
  tx_->release(0, now_);
  tx_->release(1, now_, /*holes=*/0x5);
  tx_->poll(now_, cap_);
  auto d = sent_data();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].f.holes, 0);
  EXPECT_EQ(d[1].f.holes, 0x5) << "the receiver adds nothing for parts 0 and 2";
  EXPECT_EQ(d[1].f.contributors, d[0].f.contributors) << "the header stays valid";
}

TEST_F(SenderTest, WholeTransferNeverSetsThePartialFlag) {
  start(12);
  tx_->poll(now_, cap_);
  for (const auto& m : sent_data()) EXPECT_FALSE(m.f.flags & wire::kFlagPartial);
  ASSERT_FALSE(sent_data().empty());
  EXPECT_FALSE(sent_data().front().f.flags & wire::kFlagAppLimited) << "eleven more chunks behind it";
}

TEST_F(SenderTest, ChunksSpreadOverPathsByWeight) {
  SenderConfig c;
  c.paths[0] = {10, 3};
  c.paths[1] = {20, 1};
  c.path_count = 2;
  start(8, c);
  tx_->poll(now_, cap_);
  std::map<uint16_t, int> per;
  for (const auto& p : cap_.pkts) ++per[p.meta.path_id];
  EXPECT_EQ(per[10], 6);
  EXPECT_EQ(per[20], 2);
}

TEST_F(SenderTest, ShuffledOrderSendsEveryChunkOnce) {
  SenderConfig c;
  c.shuffle = true;
  start(10, c);
  tx_->poll(now_, cap_);
  std::vector<int> seen(10, 0);
  bool in_order = true;
  auto d = sent_data();
  for (size_t k = 0; k < d.size(); ++k) {
    ++seen[d[k].f.chunk_index];
    in_order &= d[k].f.chunk_index == k;
  }
  EXPECT_EQ(seen, std::vector<int>(10, 1));
  EXPECT_FALSE(in_order);
}

TEST_F(SenderTest, SackGapIsRetransmittedWithFlag) {
  start(50);
  tx_->poll(now_, cap_);
  now_ += 10 * kMilli;
  // Chunk 0 lost, 1..9 arrived: 3+ later chunks acked -> 0 is lost.
  tx_->on_packet(ack(0, {1, 2, 3, 4, 5, 6, 7, 8, 9}, static_cast<uint64_t>(now_ - 10 * kMilli)), now_);
  EXPECT_EQ(tx_->acked_chunks(), 9u);
  EXPECT_EQ(tx_->stats().losses, 1u);
  EXPECT_EQ(tx_->srtt(), 10 * kMilli);
  cap_.pkts.clear();
  tx_->poll(now_, cap_);
  auto d = sent_data();
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].f.chunk_index, 0u) << "retransmissions go first";
  EXPECT_TRUE(d[0].f.flags & wire::kFlagRetransmit);
  EXPECT_EQ(d[0].f.echo_ts, static_cast<uint64_t>(now_)) << "echoes the ACK's timestamp";
  EXPECT_EQ(aimd_.reductions(), 1u);
}

TEST_F(SenderTest, ReorderTimerDeclaresALateTailLostBeforeTheProbe) {
  // Chunk 8 leaves 1 ms before chunk 9, the last one; 9 is acknowledged 10 ms after it left and
  // 8 is not. One later chunk is below the packet threshold and 1 ms is inside the reorder
  // window (a quarter of the 10 ms srtt), so the ACK cannot judge 8. RACK's timer can: once
  // 8's round trip has run 10 + 2.5 ms, it is lost, well before the tail-loss probe (2 srtt
  // after the last send) would have asked.
  start(10, {}, true);
  const Nanos t0 = now_;
  for (uint32_t i = 0; i < 9; ++i) tx_->release(i, t0);
  tx_->poll(t0, cap_);
  tx_->release(9, t0 + kMilli);
  tx_->poll(t0 + kMilli, cap_);
  ASSERT_EQ(sent_data().size(), 10u);
  now_ = t0 + 11 * kMilli;
  tx_->on_packet(ack(8, {9}, static_cast<uint64_t>(t0 + kMilli)), now_);
  EXPECT_EQ(tx_->stats().losses, 0u) << "inside the reorder window at the ACK";
  cap_.pkts.clear();
  const Nanos next = tx_->poll(now_, cap_);
  EXPECT_TRUE(cap_.pkts.empty());
  EXPECT_EQ(next, t0 + 12 * kMilli + 500 * kMicro) << "the reorder timer, not the probe at t0 + 21 ms";
  EXPECT_TRUE(tx_->poll(next - 1, cap_) > next - 1 && cap_.pkts.empty());
  tx_->poll(next, cap_);
  auto d = sent_data();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].f.chunk_index, 8u);
  EXPECT_TRUE(d[0].f.flags & wire::kFlagRetransmit);
  EXPECT_EQ(tx_->stats().losses, 1u);
  EXPECT_EQ(tx_->stats().probes, 0u);
}

TEST_F(SenderTest, DuplicateLateAndForeignAcksAreHarmless) {
  start(20);
  tx_->poll(now_, cap_);
  now_ += kMilli;
  const auto a = ack(5, {}, static_cast<uint64_t>(now_ - kMilli));
  tx_->on_packet(a, now_);
  tx_->on_packet(a, now_);  // duplicate
  EXPECT_EQ(tx_->acked_chunks(), 5u);
  tx_->on_packet(ack(3, {}, 0), now_);  // late, older cumulative point
  EXPECT_EQ(tx_->acked_chunks(), 5u);
  tx_->on_packet(ack(20, {}, 0, /*round=*/1), now_);  // another round
  EXPECT_EQ(tx_->acked_chunks(), 5u);
  EXPECT_EQ(tx_->stats().acks_ignored, 1u);
  EXPECT_EQ(tx_->stats().losses, 0u);
  auto bad = a;
  bad.resize(bad.size() - 1);
  tx_->on_packet(bad, now_);
  EXPECT_EQ(tx_->stats().acks_ignored, 2u);
}

TEST_F(SenderTest, AckForUnsentChunksIsIgnored) {
  start(2000);
  tx_->poll(now_, cap_);  // sends 0..9
  tx_->on_packet(ack(0, {500, 501}, 0), now_);
  EXPECT_EQ(tx_->acked_chunks(), 0u);
}

TEST_F(SenderTest, AllAckedEndsTheTransfer) {
  start(5);
  tx_->poll(now_, cap_);
  tx_->on_packet(ack(5, {}, static_cast<uint64_t>(now_)), now_ + kMilli);
  EXPECT_TRUE(tx_->done());
  EXPECT_EQ(tx_->state(), SenderState::kAcked);
  EXPECT_EQ(tx_->poll(now_ + kMilli, cap_), kNever);
}

TEST_F(SenderTest, CloseEndsAndRecordsWhatWasKept) {
  start(20);
  tx_->poll(now_, cap_);
  wire::CloseFields c;
  c.src_node = kPeer;
  c.job = 1;
  c.round = 2;
  c.shard = 4;
  c.chunk_count = 20;
  c.kept_count = 19;
  c.reason = CloseReason::kEarlyClose;
  std::vector<uint8_t> b(sizeof(wire::CloseHeader));
  ASSERT_TRUE(wire::build_close(b, c, {}).ok());
  auto other = b;
  other[offsetof(wire::LtpCommon, src_node) + 1] = 1;  // from someone else
  tx_->on_packet(other, now_);
  EXPECT_FALSE(tx_->done());
  tx_->on_packet(b, now_);
  EXPECT_EQ(tx_->state(), SenderState::kClosed);
  EXPECT_EQ(tx_->close_reason(), CloseReason::kEarlyClose);
  EXPECT_EQ(tx_->close_kept(), 19u);
}

TEST_F(SenderTest, RejectEndsTheTransfer) {
  start(20);
  wire::RejectFields r;
  r.src_node = kPeer;
  r.job = 1;
  r.offending_version = wire::kLtpVersion;
  std::vector<uint8_t> b(sizeof(wire::RejectHeader));
  ASSERT_TRUE(wire::build_reject(b, r).ok());
  tx_->on_packet(b, now_);
  EXPECT_EQ(tx_->state(), SenderState::kRejected);
}

TEST_F(SenderTest, TimeoutRetransmitsAfterAtLeastTheMinimumRto) {
  start(50);
  tx_->poll(now_, cap_);
  // One ACK gives an RTT sample of 1 ms; the Linux-like RTO is still >= 200 ms.
  tx_->on_packet(ack(1, {}, static_cast<uint64_t>(now_)), now_ + kMilli);
  cap_.pkts.clear();
  const Nanos t = now_ + kMilli;
  Nanos next = tx_->poll(t, cap_);
  cap_.pkts.clear();
  EXPECT_GE(next - now_, 10 * kMilli) << "probe no sooner than max(2 srtt, 10 ms) after the last send";
  // Walk time forward to the deadline(s): a tail-loss probe, then the RTO.
  Nanos at = t;
  for (int i = 0; i < 4 && tx_->stats().timeouts == 0; ++i) {
    at = tx_->poll(at, cap_);
  }
  EXPECT_EQ(tx_->stats().timeouts, 1u);
  EXPECT_GE(at - t, 200 * kMilli);
  EXPECT_EQ(aimd_.cwnd_bytes(), 100u + sizeof(wire::DataHeader)) << "cwnd 1 MSS after RTO";
  auto d = sent_data();
  ASSERT_FALSE(d.empty());
  EXPECT_TRUE(d.back().f.flags & wire::kFlagRetransmit);
}

// On a sub-millisecond path the timeout is srtt + 4 rttvar, 1 ms at least; a receiver that
// holds its ACK up to 2 ms (ack_delay_max between sites) answered after the timer had fired.
// The peers' ACK delay is added to the timeout, as QUIC adds max_ack_delay.
TEST_F(SenderTest, TheTimeoutAllowsForThePeersAckDelay) {
  auto fired_by = [&](Nanos peer_ack_delay, Nanos wait) {
    DeliveryRateConfig rc;
    rc.min_rto = kMilli;
    rc.peer_ack_delay = peer_ack_delay;
    DeliveryRateController drc(rc);
    cap_.pkts.clear();
    now_ = 5 * kSecond;
    start(50, {}, /*streaming=*/false, &drc);
    const Nanos t0 = now_;
    tx_->poll(now_, cap_);
    now_ += 100 * kMicro;
    tx_->on_packet(ack(1, {}, static_cast<uint64_t>(t0)), now_);  // RTT 0.1 ms
    const Nanos acked = now_;
    for (Nanos t = acked; t <= acked + wait; t += 100 * kMicro) tx_->poll(t, cap_);
    return tx_->stats().timeouts;
  };
  EXPECT_EQ(fired_by(0, 1500 * kMicro), 1u) << "without it the timer fires at 1 ms";
  EXPECT_EQ(fired_by(2 * kMilli, 1500 * kMicro), 0u);
  EXPECT_EQ(fired_by(2 * kMilli, 2000 * kMicro), 0u) << "an ACK delayed 2 ms is still in time";
  EXPECT_EQ(fired_by(2 * kMilli, 3 * kMilli), 1u) << "and the timer still fires after srtt + 4 rttvar + 2 ms";
}

TEST_F(SenderTest, GivesUpWithoutProgress) {
  SenderConfig c;
  c.give_up_after = 3 * kSecond;
  start(20, c);
  Nanos at = now_;
  for (int i = 0; i < 100 && !tx_->done(); ++i) at = std::max(at, tx_->poll(at, cap_));
  EXPECT_EQ(tx_->state(), SenderState::kTimedOut);
  EXPECT_GE(tx_->finished_at() - now_, 3 * kSecond);
}

// Records what the sender tells its controller; a fixed window, unpaced.
class SpyController final : public RateController {
 public:
  const char* name() const override { return "spy"; }
  void reset(Nanos, uint32_t) override { acks.clear(); }
  void on_ack(const AckEvent& ev) override { acks.push_back(ev); }
  void on_loss(const LossEvent&) override {}
  uint64_t cwnd_bytes() const override { return cwnd; }
  double pacing_rate() const override { return 0; }
  LossDetection loss_detection() const override { return {}; }
  std::vector<AckEvent> acks;
  uint64_t cwnd = 1u << 20;
};

// Chunk 0 is resent (three later chunks were acknowledged) and, 2 ms later, acknowledged by an
// ACK that echoes its first copy: the original was only late. That ACK says nothing of when
// the resend left, so RACK's clock (the newest delivered send time) must not jump to it:
// otherwise chunks 4-39, sent with the original and not acknowledged yet, look sent a reorder
// window before a delivered chunk and are resent for nothing (RFC 8985 6.2, step 2). On the
// simulator's lossy profile half of all resends were such.
TEST_F(SenderTest, AnAckOfAResentChunksFirstCopyDoesNotMoveRacksClock) {
  SpyController spy;  // no window: every chunk leaves at once
  start(40, {}, /*streaming=*/false, &spy);
  const Nanos t0 = now_;
  tx_->poll(now_, cap_);
  ASSERT_EQ(sent_data().size(), 40u);
  now_ = t0 + 10 * kMilli;
  tx_->on_packet(ack(0, {1, 2, 3}, static_cast<uint64_t>(t0)), now_);
  cap_.pkts.clear();
  tx_->poll(now_, cap_);
  ASSERT_EQ(tx_->stats().losses, 1u);
  auto d = sent_data();
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].f.chunk_index, 0u);
  EXPECT_TRUE(d[0].f.flags & wire::kFlagRetransmit);
  now_ = t0 + 12 * kMilli;
  tx_->on_packet(ack(4, {}, static_cast<uint64_t>(t0)), now_);
  cap_.pkts.clear();
  tx_->poll(now_, cap_);
  EXPECT_EQ(tx_->stats().losses, 1u) << "chunks 4-39 declared lost on the resend's send time";
  for (const auto& m : sent_data()) EXPECT_FALSE(m.f.flags & wire::kFlagRetransmit) << "chunk " << m.f.chunk_index;
  EXPECT_EQ(tx_->stats().spurious, 1u);  // chunk 0's resend: its first copy arrived
}

TEST_F(SenderTest, ChunksSentBeforeAnAppLimitedBubbleDrainsAreAppLimited) {
  SpyController spy;
  start(40, {}, /*streaming=*/true, &spy);
  Sender& tx = *tx_;
  tx.release(0, now_);
  tx.poll(now_, cap_);  // chunk 0 goes out and the sender has nothing more: a bubble
  for (uint32_t i = 1; i < 20; ++i) tx.release(i, now_);
  tx.poll(now_, cap_);  // 1..19 leave while the bubble is still in flight
  now_ += 10 * kMilli;
  tx.on_packet(ack(5, {}, 0), now_);
  ASSERT_EQ(spy.acks.size(), 1u);
  EXPECT_TRUE(spy.acks.back().app_limited) << "chunk 4 left behind the bubble: its rate is the application's";
  tx.on_packet(ack(20, {}, 0), now_);
  // A backlog now, sent as the window allows: once the bubble is delivered, chunks that leave
  // with more queued behind them measure the path.
  spy.cwnd = 5 * (100 + sizeof(wire::DataHeader));
  for (uint32_t i = 20; i < 40; ++i) tx.release(i, now_);
  tx.poll(now_, cap_);  // 20..24, still behind the bubble's last chunk
  now_ += 10 * kMilli;
  tx.on_packet(ack(25, {}, 0), now_);
  EXPECT_TRUE(spy.acks.back().app_limited);
  tx.poll(now_, cap_);  // 25..29
  now_ += 10 * kMilli;
  tx.on_packet(ack(30, {}, 0), now_);
  EXPECT_FALSE(spy.acks.back().app_limited) << "window-limited with a backlog: a path sample";
}

// A spurious timeout: everything in flight is resent, and then the originals' ACKs arrive a
// moment later. A rate over that moment (from the resend to the ACK) is no measurement of the
// path: the controller must not get one (it would sit in its max filter for ten round trips).
TEST_F(SenderTest, NoRateSampleFromTheOriginalsOfASpuriousResend) {
  SpyController spy;
  start(40, {}, /*streaming=*/false, &spy);
  const Nanos t0 = now_;
  tx_->poll(now_, cap_);  // all 40 leave at once
  now_ += 100 * kMilli;
  tx_->on_packet(ack(1, {}, static_cast<uint64_t>(t0)), now_);  // RTT 100 ms
  ASSERT_EQ(tx_->min_rtt(), 100 * kMilli);
  const uint64_t retx_before = tx_->stats().retransmits;
  now_ += 2 * kSecond;  // far past the timeout: everything in flight is presumed lost, resent
  tx_->poll(now_, cap_);
  ASSERT_EQ(tx_->stats().timeouts, 1u);
  ASSERT_EQ(tx_->stats().retransmits - retx_before, 39u);
  now_ += 2 * kMilli;  // the originals were only late
  tx_->on_packet(ack(40, {}, static_cast<uint64_t>(t0)), now_);
  ASSERT_FALSE(spy.acks.empty());
  EXPECT_EQ(spy.acks.back().delivery_rate, 0.0) << "39 chunks over 2 ms is the ACKs' burst, not the path";
  EXPECT_EQ(spy.acks.back().spurious_bytes, 39u * (100 + sizeof(wire::DataHeader))) << "the timeout's presumed losses, proven false";
  EXPECT_EQ(tx_->state(), SenderState::kAcked);
}

// ACK compression: chunks sent one every 5 ms whose ACKs queued on the way back and arrive
// together. The sample spans at least the chunks' send phase, so it cannot exceed the rate
// they were sent at.
TEST_F(SenderTest, CompressedAcksMeasureNoMoreThanTheSendRate) {
  SpyController spy;
  start(22, {}, /*streaming=*/true, &spy);
  const Nanos t0 = now_;
  tx_->release(0, now_);
  tx_->release(1, now_);
  tx_->poll(now_, cap_);
  now_ += 100 * kMilli;
  tx_->on_packet(ack(1, {}, static_cast<uint64_t>(t0)), now_);  // RTT 100 ms; chunk 1 still out
  for (uint32_t i = 2; i < 22; ++i) {  // one chunk every 5 ms
    now_ += 5 * kMilli;
    tx_->release(i, now_);
    tx_->poll(now_, cap_);
  }
  const Nanos last_sent = now_;
  now_ += 10 * kMilli;  // every ACK at once, 110 ms after the one before them
  tx_->on_packet(ack(22, {}, static_cast<uint64_t>(last_sent)), now_);
  ASSERT_FALSE(spy.acks.empty());
  const AckEvent& ev = spy.acks.back();
  // Chunks 1..21 delivered over the send phase from chunk 0's send to chunk 21's: 200 ms.
  const double bytes = static_cast<double>(ev.delivered - ev.prior_delivered);
  ASSERT_GT(bytes, 0);
  const double send_rate = bytes / (static_cast<double>(last_sent - t0) * 1e-9);
  EXPECT_GT(ev.delivery_rate, 0.0);
  EXPECT_LE(ev.delivery_rate, send_rate * 1.001)
      << "over the ACK phase alone (110 ms) it would read " << bytes / 0.110 << " B/s";
}

TEST_F(SenderTest, RefusesBadSpecs) {
  SenderConfig c;
  c.max_chunks = 4;
  c.local_node = kMe;
  Sender s(c, aimd_, rng_);
  std::vector<uint8_t> d(500);
  TransferSpec spec;
  spec.chunk_size = 100;
  spec.data = d;
  EXPECT_FALSE(s.start(spec, 0)) << "5 chunks > max 4";
  spec.data = std::span(d).first(400);
  EXPECT_TRUE(s.start(spec, 0));
  EXPECT_FALSE(s.start(spec, 0)) << "one at a time";
}

}  // namespace
}  // namespace sg::ltp
