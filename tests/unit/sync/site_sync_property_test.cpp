// SiteSync and the LTP pair at scale: 1,000 seeded clusters of 3-5 sites, 0-30% loss with
// reordering, duplication and corruption, every packet sealed and opened by lib/crypto as the
// gateways do (a corrupted packet fails its tag and counts as lost; a duplicate is a replay).
// Every round must end at every site; where no chunk was lost for good (no bubble, no timeout)
// every site holds the exact mean; values are always finite; no corrupted packet is ever
// accepted; no transfer stays open afterwards; the network's queue stays bounded.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "crypto/session.h"
#include "sync_cluster.h"

namespace sg::sync::testing {
namespace {

// One sealing and one opening session per directed pair of sites.
class CryptoWire final : public Wire {
 public:
  explicit CryptoWire(int n) : n_(n) {
    const std::vector<uint8_t> secret(32, 0x6b);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        crypto::SessionConfig c;
        c.from = static_cast<uint16_t>(a + 1);
        c.to = static_cast<uint16_t>(b + 1);
        c.replay_window = 1024;
        c.first_epoch = 77;
        c.trial_interval_ms = 0;  // the fake clock runs far ahead of the real one
        tx_.push_back(std::make_unique<crypto::TxSession>(secret, c));
        rx_.push_back(std::make_unique<crypto::RxSession>(secret, c));
      }
  }
  void seal(int src, int dst, std::vector<uint8_t>& b) override {
    const size_t len = b.size();
    b.resize(len + crypto::kTrailerLen);
    const size_t aad = std::min<size_t>(len, 56);
    ASSERT_EQ(tx_[static_cast<size_t>(src * n_ + dst)]->seal(b, len, aad), b.size());
  }
  bool open(int src, int dst, std::vector<uint8_t>& b) override {
    size_t len = 0;
    const size_t aad = std::min<size_t>(b.size() >= crypto::kTrailerLen ? b.size() - crypto::kTrailerLen : 0, 56);
    if (rx_[static_cast<size_t>(src * n_ + dst)]->open(b, aad, &len) != crypto::OpenVerdict::kOk) return false;
    b.resize(len);
    return true;
  }

 private:
  int n_;
  std::vector<std::unique_ptr<crypto::TxSession>> tx_;
  std::vector<std::unique_ptr<crypto::RxSession>> rx_;
};

TEST(SiteSyncProperty, ThousandSeedsOfLossReorderingDuplicationAndCorruption) {
  int exact_rounds = 0, lossy_rounds = 0;
  uint64_t corrupted = 0, refused = 0;
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    Rng pick(seed * 0x9e3779b97f4a7c15ull);
    const int n = 3 + static_cast<int>(pick.below(3));
    const double loss = 0.3 * pick.uniform();
    const int shards = 1 + static_cast<int>(pick.below(3));
    Cluster c(n, static_cast<uint64_t>(n) * 16384, shards, 2 * kMilli, loss, seed);
    CryptoWire wire(n);
    c.net.wire_ = &wire;
    c.net.reorder_ = 0.2;
    c.net.dup_ = 0.02;
    c.net.corrupt_ = 0.01;
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " sites " << n << " shards " << shards << " loss " << loss);
    for (uint32_t round = 1; round <= 2; ++round) {
      SyncStats before[5];
      for (int i = 0; i < n; ++i) before[i] = c.sites[i]->stats();
      c.fill_round(round);
      ASSERT_TRUE(c.run_round(round, 60 * kSecond)) << "round " << round << " never ended";
      uint64_t lost_for_good = 0;
      for (int i = 0; i < n; ++i) {
        const SyncStats& s = c.sites[i]->stats();
        lost_for_good += s.up_bubbles - before[i].up_bubbles + s.down_bubbles - before[i].down_bubbles +
                         s.timeouts - before[i].timeouts;
      }
      const auto m = c.mean();
      for (int i = 0; i < n; ++i) {
        const auto r = c.sites[i]->result();
        ASSERT_EQ(r.size(), m.size());
        for (size_t k = 0; k < m.size(); ++k) {
          ASSERT_TRUE(std::isfinite(r[k])) << "site " << i << " value " << k;
          if (lost_for_good == 0) {
            ASSERT_NEAR(r[k], m[k], 1e-4 * (1 + std::abs(m[k]))) << "site " << i << " value " << k << " round " << round;
          }
        }
      }
      (lost_for_good == 0 ? exact_rounds : lossy_rounds)++;
    }
    // Let late packets drain (retransmissions, ACKs for closed transfers), then nothing is open.
    for (int step = 0; step < 100000 && !c.net.q_.empty(); ++step) {
      Packet p = c.net.q_.top();
      c.net.q_.pop();
      c.net.now_ = std::max(c.net.now_, p.at);
      if (wire.open(p.src, p.dst, p.bytes)) c.sites[p.dst]->on_packet(p.bytes, c.net.now_, *c.ports[p.dst]);
    }
    for (int i = 0; i < n; ++i) EXPECT_EQ(c.sites[i]->receiver().open_transfers(), 0u) << "site " << i;
    EXPECT_EQ(c.net.corrupted_opened_, 0u) << "a corrupted packet passed its tag";
    EXPECT_LT(c.net.peak_queue_, 20000u) << "the network's queue grew without bound";
    corrupted += c.net.corrupted_;
    refused += c.net.refused_;
  }
  EXPECT_GT(exact_rounds, 200) << "loss-free rounds must occur (and be exact)";
  EXPECT_GT(lossy_rounds, 0);
  EXPECT_GE(refused, corrupted) << "every corrupted copy was refused (duplicates too, as replays)";
  std::printf("rounds exact %d, with chunks lost for good %d; corrupted copies %llu, refused %llu\n", exact_rounds,
              lossy_rounds, static_cast<unsigned long long>(corrupted), static_cast<unsigned long long>(refused));
  RecordProperty("exact_rounds", exact_rounds);
  RecordProperty("lossy_rounds", lossy_rounds);
}

}  // namespace
}  // namespace sg::sync::testing
