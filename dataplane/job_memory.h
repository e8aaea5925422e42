// What one job's state takes in a gateway's heap, estimated from its config before it is
// built: the admission budget of jobs announced by workers (control/job_desk.h) is spent by
// this figure. tests/dataplane (GatewayRounds.JobMemoryEstimateCoversWhatAJobTakes) checks it
// against the heap a job really takes through rounds.
#pragma once

#include <cstdint>

#include "config/config.h"

namespace sg::dp {

// Float32 model-sized buffers: per engine its runner's contribution and its SiteSync's
// result; once for the site the shards' sums (split over the engines) and the workers'
// LocalGroup result; with compression the encoded copies and, per engine, the
// error-feedback residuals (up and down, each model-wide). Plus the chunk bookkeeping, the
// measurement rings and 1 MiB of the rest.
uint64_t job_memory_estimate(const config::GatewayConfig& jcfg, unsigned engines);

}  // namespace sg::dp
