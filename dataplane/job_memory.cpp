#include "dataplane/job_memory.h"

#include <algorithm>

#include "measure/link_estimator.h"
#include "sync/site_sync.h"
#include "wire/ltp_codec.h"

namespace sg::dp {

uint64_t job_memory_estimate(const config::GatewayConfig& c, unsigned engines) {
  const uint64_t m = c.job.model_bytes;
  const bool compress = c.compression.mode != config::CompressionMode::kOff;
  // Compression: the encoded copies once (split over the engines), and per engine the
  // model-wide residuals, up and down (SiteSync keeps them across plans, indexed by float).
  const uint64_t buffers = 2 * uint64_t(engines) + 2 + (compress ? 1 + 2 * uint64_t(engines) : 0);
  const uint64_t chunks = m / config::worker_chunk_bytes(c) + m / c.transport.chunk_bytes + 2;
  constexpr uint64_t kSampleRing = 16384;  // per engine (control/gateway.cpp)
  // Each engine's SiteSync holds early DATA of the next round (transport.early_hold_packets).
  const uint64_t hold = std::min<uint64_t>(c.transport.early_hold_packets, m / c.transport.chunk_bytes + 1) *
                        (wire::data_msg_len(static_cast<uint16_t>(c.transport.chunk_bytes)) + 2);
  return buffers * m + chunks * 64 + uint64_t(engines) * (kSampleRing * sizeof(measure::ArrivalSample) + hold) +
         (uint64_t{1} << 20);
}

}  // namespace sg::dp
