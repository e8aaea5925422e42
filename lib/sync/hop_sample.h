// What a site's link estimator takes from the DATA it receives, by the link each copy crossed
// last. Shared by the gateway (dataplane/job_runner.cpp, relay.cpp) and the simulator
// (lib/sim/gateway_site.cpp), so both measure the same links the same way.
//
// A copy relayed through site R (NetStorm multipath) crosses origin -> R, then R -> us:
//   - R samples origin -> R with the DATA's send stamp (a true one-way delay on that link);
//   - we sample R -> us, bytes only: its delays span both links.
// Without these, a link carrying relayed traffic beside its own shows only its own share, and
// a planner that splits over relays sees the links it loads as slow.
#pragma once

#include <cstdint>

#include "ltp/types.h"
#include "measure/link_estimator.h"

namespace sg::sync {

// A copy that arrived here: `hop` is the site index it came from (the origin, or for a
// relayed copy the relay), `self` ours.
inline measure::ArrivalSample arrival_hop_sample(const ltp::ArrivalSample& s, uint16_t hop, uint16_t self,
                                                 bool relayed) {
  measure::ArrivalSample m;
  m.from = hop;
  m.to = self;
  m.bytes = s.bytes;
  m.at = s.arrival;
  m.relayed = relayed;
  m.app_limited = s.app_limited;
  if (!relayed) {
    m.rtt = s.rtt;
    m.owd = s.owd;
  }
  return m;
}

// A copy this site relays on for another: the first hop, origin -> us.
inline measure::ArrivalSample relay_hop_sample(uint16_t origin, uint16_t self, uint32_t bytes, uint64_t send_ts,
                                               Nanos now, bool app_limited) {
  measure::ArrivalSample m;
  m.from = origin;
  m.to = self;
  m.bytes = bytes;
  m.at = now;
  m.owd = ltp::owd_from_stamp(send_ts, now);
  m.app_limited = app_limited;
  return m;
}

}  // namespace sg::sync
