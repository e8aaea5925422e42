// What a gateway's config says for its part of a round: the WAN receiver, LTP's rate
// controller and SiteSync's settings. Written once, so that the gateway's JobRunner and the
// simulator's sites (perf/sim: the testbed's profiles) run the same transport from the same
// config; each then adds what only it knows (the engine's shard role and link shares, the
// simulator's byte scale).
#pragma once

#include "config/config.h"
#include "ltp/delivery_rate_controller.h"
#include "ltp/receiver.h"
#include "sync/site_sync.h"

namespace sg::sync {

// The longest a receiver on a link between sites holds an ACK back (wan_receiver), and so
// what its senders' timeouts allow for (wan_rate).
inline constexpr Nanos kWanAckDelayMax = 2 * kMilli;

// The receiver of WAN transfers as transport.* configures it (both sync modes).
ltp::ReceiverConfig wan_receiver(const config::GatewayConfig& cfg);
// LTP's rate controller settings for WAN senders (transport.*).
ltp::DeliveryRateConfig wan_rate(const config::GatewayConfig& cfg);
// SiteSync of the config's job at this site, one engine, no shared link states, no wire
// compression buffers unless compression.mode asks for them. `sites`: the job's site ids in
// plan order (controller::job_sites).
SyncConfig site_sync_config(const config::GatewayConfig& cfg, const std::vector<uint16_t>& sites);

}  // namespace sg::sync
