// A sealing and an opening session of one direction: round trips, replays and forgeries
// dropped by verdict, reordering across paths, and epochs switched without losing a packet.
#include "crypto/session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "common/rng.h"
#include <vector>

namespace sg::crypto {
namespace {

constexpr size_t kHead = 56;

std::vector<uint8_t> message(uint32_t i, size_t payload = 1400) {
  std::vector<uint8_t> m(kHead + payload + kTrailerLen);
  for (size_t k = 0; k < kHead + payload; ++k) m[k] = static_cast<uint8_t>(k * 31 + i);
  return m;
}

struct Pair {
  explicit Pair(SessionConfig c = {}, std::vector<uint8_t> rx_secret = std::vector<uint8_t>(32, 9))
      : tx(std::vector<uint8_t>(32, 9), c), rx(rx_secret, c) {}
  std::vector<uint8_t> sealed(uint32_t i) {
    auto m = message(i);
    const size_t n = tx.seal(m, m.size() - kTrailerLen, kHead);
    EXPECT_EQ(n, m.size());
    return m;
  }
  OpenVerdict open(std::vector<uint8_t> m, uint32_t i) {
    size_t len = 0;
    const OpenVerdict v = rx.open(m, kHead, &len);
    if (v == OpenVerdict::kOk) {
      auto want = message(i);
      want.resize(want.size() - kTrailerLen);
      m.resize(len);
      EXPECT_EQ(m, want) << "the opened message is the one sealed";
    }
    return v;
  }
  TxSession tx;
  RxSession rx;
};

TEST(Session, RoundTripsBothSuitesAndProtections) {
  for (Suite s : {Suite::kAes128Gcm, Suite::kChaCha20Poly1305})
    for (Protection p : {Protection::kEncrypt, Protection::kAuthOnly}) {
      SessionConfig c;
      c.suite = s;
      c.protection = p;
      c.from = 3;
      c.to = 1;
      Pair x(c);
      ASSERT_TRUE(x.tx.ok());
      for (uint32_t i = 0; i < 50; ++i) EXPECT_EQ(x.open(x.sealed(i), i), OpenVerdict::kOk);
    }
}

TEST(Session, DropsReplaysForgeriesAndTruncationsByVerdict) {
  Pair x;
  const auto a = x.sealed(0), b = x.sealed(1);
  EXPECT_EQ(x.open(b, 1), OpenVerdict::kOk);
  EXPECT_EQ(x.open(b, 1), OpenVerdict::kDuplicate);
  auto forged = a;
  forged[10] ^= 1;  // a header bit: associated data
  EXPECT_EQ(x.open(forged, 0), OpenVerdict::kBadTag);
  EXPECT_EQ(x.open(a, 0), OpenVerdict::kOk) << "a forgery does not burn the real packet's number";
  // A forged trailer claiming a far-ahead number must not slide the window.
  auto ahead = x.sealed(2);
  ahead[kHead + 1400 + 5] ^= 0x40;  // the packet number's top byte
  EXPECT_EQ(x.open(ahead, 2), OpenVerdict::kBadTag);
  EXPECT_EQ(x.open(x.sealed(3), 3), OpenVerdict::kOk);
  std::vector<uint8_t> tiny(kHead + kTrailerLen - 1);
  size_t len;
  EXPECT_EQ(x.rx.open(tiny, kHead, &len), OpenVerdict::kTruncated);
  auto alien = x.sealed(4);
  alien[kHead + 1400] = 0x7f;  // epoch 0x7f00: never announced
  EXPECT_EQ(x.open(alien, 4), OpenVerdict::kUnknownEpoch);
}

TEST(Session, AnotherSecretFailsAuthentication) {
  Pair x({}, std::vector<uint8_t>(32, 10));
  EXPECT_EQ(x.open(x.sealed(0), 0), OpenVerdict::kBadTag);
}

TEST(Session, KeysAreDirectional) {
  SessionConfig there, back;
  there.from = back.to = 1;
  there.to = back.from = 2;
  TxSession tx(std::vector<uint8_t>(32, 9), there);
  RxSession wrong_way(std::vector<uint8_t>(32, 9), back);
  auto m = message(0);
  ASSERT_GT(tx.seal(m, m.size() - kTrailerLen, kHead), 0u);
  size_t len;
  EXPECT_EQ(wrong_way.open(m, kHead, &len), OpenVerdict::kBadTag) << "a packet reflected back to its sender";
}

TEST(Session, RekeysWithoutLosingReorderedPacketsAcrossTheSwitch) {
  SessionConfig c;
  c.rekey_after = 100;
  Pair x(c);
  // 1000 packets over 10 epochs, delivered out of order within a 64-packet spray skew.
  std::vector<std::vector<uint8_t>> sent;
  for (uint32_t i = 0; i < 1000; ++i) sent.push_back(x.sealed(i));
  EXPECT_EQ(x.tx.epoch(), 9u);
  std::vector<uint32_t> order(1000);
  for (uint32_t i = 0; i < 1000; ++i) order[i] = i;
  std::mt19937 rng(7);
  for (size_t at = 0; at < order.size(); at += 64)
    std::shuffle(order.begin() + at, order.begin() + std::min(order.size(), at + 64), rng);
  for (uint32_t i : order) ASSERT_EQ(x.open(sent[i], i), OpenVerdict::kOk) << "packet " << i;
  EXPECT_EQ(x.rx.epoch(), 9u);
  for (uint32_t i : {999u, 950u}) EXPECT_EQ(x.open(sent[i], i), OpenVerdict::kDuplicate);
  EXPECT_EQ(x.open(sent[10], 10), OpenVerdict::kUnknownEpoch) << "epoch 0 is long gone";
}

TEST(Session, ARestartedSenderIsFollowedAndItsOldRunIsNotReplayable) {
  SessionConfig c;
  c.trial_interval_ms = 0;
  Pair x(c);
  const auto old = x.sealed(0);
  EXPECT_EQ(x.open(old, 0), OpenVerdict::kOk);
  c.first_epoch = boot_epoch(1800000000);  // restarted later: a later clock, a later epoch
  EXPECT_GT(c.first_epoch, boot_epoch(1790000000));
  TxSession again(std::vector<uint8_t>(32, 9), c);
  auto m = message(1);
  ASSERT_GT(again.seal(m, m.size() - kTrailerLen, kHead), 0u);
  size_t len;
  EXPECT_EQ(x.rx.open(m, kHead, &len), OpenVerdict::kOk) << "a newer epoch that authenticates is followed";
  EXPECT_EQ(x.rx.epoch(), c.first_epoch);
  EXPECT_EQ(x.open(old, 0), OpenVerdict::kUnknownEpoch) << "the old run's packets are not replayable";
}

TEST(Session, ForgedFutureEpochsNeitherMoveTheReceiverNorCostAKeyEach) {
  SessionConfig c;
  c.trial_interval_ms = 60000;  // one trial per minute: the flood below gets at most one
  Pair x(c);
  EXPECT_EQ(x.open(x.sealed(0), 0), OpenVerdict::kOk);  // the first packet's trial
  const uint64_t before = x.rx.trials();
  for (uint32_t i = 1; i < 200; ++i) {
    auto f = x.sealed(i);
    f[kHead + 1400] = static_cast<uint8_t>(0x40 + i % 64);  // an epoch far ahead; the tag cannot match
    EXPECT_EQ(x.open(f, i), OpenVerdict::kUnknownEpoch);
  }
  EXPECT_EQ(x.rx.trials(), before) << "within the trial interval nothing is derived";
  EXPECT_EQ(x.rx.epoch(), 0u);
  EXPECT_EQ(x.open(x.sealed(200), 200), OpenVerdict::kOk);
}

TEST(Session, AFloodOfForgedEpochsCannotKeepTheRealOneOut) {
  // A receiver meeting a sender for the first time (or after its restart) while forged
  // packets outnumber real ones 20 to 1: some claim the real epoch with bad tags, some a
  // fixed bogus epoch, some random epochs. The real epoch is taken within a few real packets.
  SessionConfig c;
  c.first_epoch = 5000;
  c.trial_interval_ms = 1;  // one derivation per batch below (each starts after a 2 ms pause)
  Pair x(c);
  Rng rng(9);
  int accepted_at = -1;
  for (int real = 0; real < 20; ++real) {
    // The interval has passed, and a forged packet comes first: it, not the real one, meets
    // the chance to derive a key.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    for (int k = 0; k < 20; ++k) {
      const int kind = (k + 2) % 3;
      auto f = x.sealed(1000 + static_cast<uint32_t>(real * 20 + k));
      const size_t tr = f.size() - kTrailerLen;
      if (kind == 0) f[tr + 12] ^= 0xff;                                         // real epoch, bad tag
      else if (kind == 1) f[tr] = 0x7e;                                          // one bogus epoch
      else for (int b = 0; b < 4; ++b) f[tr + b] = static_cast<uint8_t>(rng.next());  // random epochs
      size_t len;
      EXPECT_NE(x.rx.open(f, kHead, &len), OpenVerdict::kOk);
    }
    if (x.open(x.sealed(static_cast<uint32_t>(real)), static_cast<uint32_t>(real)) == OpenVerdict::kOk) {
      if (accepted_at < 0) accepted_at = real;
    } else {
      EXPECT_LT(accepted_at, 0) << "once in, every real packet is accepted";
    }
  }
  ASSERT_GE(accepted_at, 0) << "the real epoch was never taken";
  std::printf("real epoch taken at real packet %d (forged ones first each time)\n", accepted_at);
  EXPECT_LE(accepted_at, 5);
  EXPECT_EQ(x.rx.epoch(), 5000u);
}

TEST(Session, LanesShareTheKeyButNotTheNumbersOrTheWindow) {
  SessionConfig a, b;
  b.lane = 1;
  TxSession ta(std::vector<uint8_t>(32, 9), a), tb(std::vector<uint8_t>(32, 9), b);
  RxSession ra(std::vector<uint8_t>(32, 9), a), rb(std::vector<uint8_t>(32, 9), b);
  auto ma = message(0), mb = message(0);
  ASSERT_GT(ta.seal(ma, ma.size() - kTrailerLen, kHead), 0u);
  ASSERT_GT(tb.seal(mb, mb.size() - kTrailerLen, kHead), 0u);
  EXPECT_NE(ma, mb) << "same key, same packet number, different lane: a different nonce";
  EXPECT_EQ(trailer_lane(ma), 0);
  EXPECT_EQ(trailer_lane(mb), 1);
  size_t len;
  auto copy = mb;
  EXPECT_EQ(ra.open(copy, kHead, &len), OpenVerdict::kUnknownEpoch) << "lane 1 belongs to another window";
  EXPECT_EQ(ra.open(ma, kHead, &len), OpenVerdict::kOk);
  EXPECT_EQ(rb.open(mb, kHead, &len), OpenVerdict::kOk);
}

TEST(Session, RefusesABufferWithoutRoomForTheTrailer) {
  Pair x;
  auto m = message(0);
  EXPECT_EQ(x.tx.seal(std::span(m).first(m.size() - 1), m.size() - kTrailerLen, kHead), 0u);
  EXPECT_EQ(x.tx.seal(m, 10, kHead), 0u) << "header longer than the message";
}

}  // namespace
}  // namespace sg::crypto
