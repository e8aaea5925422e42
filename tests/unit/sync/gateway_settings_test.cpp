// The settings a gateway's config gives SiteSync (lib/sync/gateway_settings): the gateway's
// JobRunner and the simulator's sites both take them from here, so a config key must reach
// the field that acts on it.
#include <gtest/gtest.h>

#include "sync/gateway_settings.h"

namespace sg::sync {
namespace {

config::GatewayConfig three_sites() {
  config::GatewayConfig c;
  c.site.id = 7;
  c.job.id = 42;
  return c;
}

TEST(GatewaySettings, TransportAndJobKeysReachSiteSync) {
  config::GatewayConfig c = three_sites();
  c.transport.chunk_bytes = 1200;
  c.transport.early_hold_packets = 77;
  c.transport.initial_rate_mbit = 250;
  c.transport.max_transfers = 9;
  c.transport.max_loss_fraction = 0.2;
  c.transport.early_close.enabled = false;
  c.transport.early_close.down = true;
  c.transport.early_close.min_fraction = 0.9;
  c.transport.bubble_fill = config::BubbleFill::kPrevious;
  c.job.round_timeout_ms = 1500;
  c.job.weight = 3;
  c.compression.mode = config::CompressionMode::kAdaptive;
  c.compression.topk_ratio = 0.05;
  const SyncConfig s = site_sync_config(c, {3, 7, 9});
  EXPECT_EQ(s.job, 42u);
  EXPECT_EQ(s.self_node, 7);
  EXPECT_EQ(s.site_nodes, (std::vector<uint16_t>{3, 7, 9}));
  EXPECT_EQ(s.chunk_bytes, 1200u);
  EXPECT_EQ(s.early_hold_packets, 77u);
  EXPECT_DOUBLE_EQ(s.rate.initial_rate, 250e6 / 8);
  EXPECT_EQ(s.rate.peer_ack_delay, kWanAckDelayMax);
  EXPECT_EQ(s.receiver.max_transfers, 9u);
  EXPECT_DOUBLE_EQ(s.receiver.early_close.max_loss_fraction, 0.2);
  EXPECT_FALSE(s.receiver.early_close.enabled);
  EXPECT_DOUBLE_EQ(s.receiver.early_close.min_fraction, 0.9);
  EXPECT_EQ(s.receiver.ack_delay_max, kWanAckDelayMax);
  EXPECT_TRUE(s.down_early_close);
  EXPECT_EQ(s.down_fill, ltp::FillRule::kPrevious);
  EXPECT_EQ(s.receiver.fill_rule, ltp::FillRule::kPrevious);
  EXPECT_EQ(s.round_timeout, 1500 * kMilli);
  EXPECT_EQ(s.weight, 3u);
  EXPECT_TRUE(s.wire_compression);
  EXPECT_FLOAT_EQ(s.topk_ratio, 0.05f);
  EXPECT_FALSE(s.reliable_baseline);
  EXPECT_FALSE(s.share_links);  // the gateway passes its own link states, or none
}

TEST(GatewaySettings, AimdIsTheReliableBaselineAndOffCompressesNothing) {
  config::GatewayConfig c = three_sites();
  c.transport.rate_controller = config::RateController::kAimd;
  c.compression.mode = config::CompressionMode::kOff;
  const SyncConfig s = site_sync_config(c, {7});
  EXPECT_TRUE(s.reliable_baseline);
  EXPECT_FALSE(s.wire_compression);
}

}  // namespace
}  // namespace sg::sync
