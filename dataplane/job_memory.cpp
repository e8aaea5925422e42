#include "dataplane/job_memory.h"

#include "measure/link_estimator.h"

namespace sg::dp {

uint64_t job_memory_estimate(const config::GatewayConfig& c, unsigned engines) {
  const uint64_t m = c.job.model_bytes;
  const bool compress = c.compression.mode != config::CompressionMode::kOff;
  const uint64_t buffers = 2 * uint64_t(engines) + 2 + (compress ? 3 : 0);
  const uint64_t chunks = m / config::worker_chunk_bytes(c) + m / c.transport.chunk_bytes + 2;
  constexpr uint64_t kSampleRing = 16384;  // per engine (control/gateway.cpp)
  return buffers * m + chunks * 64 + uint64_t(engines) * kSampleRing * sizeof(measure::ArrivalSample) +
         (uint64_t{1} << 20);
}

}  // namespace sg::dp
