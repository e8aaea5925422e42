#include "sync/gateway_settings.h"

namespace sg::sync {

ltp::ReceiverConfig wan_receiver(const config::GatewayConfig& cfg) {
  ltp::ReceiverConfig r;
  r.max_transfers = cfg.transport.max_transfers;
  r.fill_rule = static_cast<ltp::FillRule>(cfg.transport.bubble_fill);
  r.early_close.enabled = cfg.transport.early_close.enabled;
  r.early_close.max_loss_fraction = cfg.transport.max_loss_fraction;
  r.early_close.quiet_rtts = cfg.transport.early_close.quiet_rtts;
  r.early_close.min_fraction = cfg.transport.early_close.min_fraction;
  // Without it a descheduled peer gateway left a bubble in an exact round (testbed_selmcast
  // under load: 1 chunk).
  r.early_close.quiet_min = ltp::kSharedHostQuietFloor;
  r.ack_batch = true;  // the engine polls the job after every burst (on_packet_st: next_wake_ = 0)
  // A WAN link's share of a few thousand chunks a second got an ACK per chunk (each arrival
  // came after ack_delay): about a tenth of the reverse path's bytes. Round trips between
  // sites are milliseconds long, so waiting up to 2 ms for the second chunk costs nothing.
  r.ack_delay_max = kWanAckDelayMax;
  return r;
}

ltp::DeliveryRateConfig wan_rate(const config::GatewayConfig& cfg) {
  ltp::DeliveryRateConfig r;
  r.initial_rate = cfg.transport.initial_rate_mbit * 1e6 / 8;
  // Its peers' receivers (wan_receiver) may hold an ACK this long: on the testbed's sub-ms
  // paths a timeout of srtt + 4 rttvar (1 ms at least) fired while the ACK was only delayed.
  r.peer_ack_delay = kWanAckDelayMax;
  return r;
}

SyncConfig site_sync_config(const config::GatewayConfig& cfg, const std::vector<uint16_t>& sites) {
  SyncConfig sc;
  sc.job = cfg.job.id;
  sc.self_node = cfg.site.id;
  sc.site_nodes = sites;
  sc.chunk_bytes = cfg.transport.chunk_bytes;
  sc.receiver = wan_receiver(cfg);
  sc.rate = wan_rate(cfg);
  sc.share_links = false;  // the gateway's own shares (link_shares), or none
  sc.weight = cfg.job.weight;
  sc.early_hold_packets = cfg.transport.early_hold_packets;
  sc.reliable_baseline = cfg.transport.rate_controller == config::RateController::kAimd;
  sc.down_early_close = cfg.transport.early_close.down;
  sc.down_fill = static_cast<ltp::FillRule>(cfg.transport.bubble_fill);
  sc.round_timeout = static_cast<Nanos>(cfg.job.round_timeout_ms) * kMilli;
  sc.seed = cfg.site.id * 31u;
  // Links compress as the policy's plan says (compression.mode always / adaptive).
  sc.wire_compression = cfg.compression.mode != config::CompressionMode::kOff;
  sc.topk_ratio = static_cast<float>(cfg.compression.topk_ratio);
  return sc;
}

}  // namespace sg::sync
