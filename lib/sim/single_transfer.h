// One LTP transfer over one simulated link pair, for "does one transfer fill a long fat
// pipe": the LTP delivery-rate controller vs the TCP-like AIMD baseline on the same
// ltp::Sender/Receiver.
#pragma once

#include <cstdint>

#include "sim/link.h"

namespace sg::sim {

struct SingleTransferResult {
  bool ok = false;
  double seconds = 0;       // start to the sender's end (CLOSE or last ACK)
  double goodput_Bps = 0;   // payload bytes delivered / seconds (wire bytes, payload_scale applied)
  double utilisation = 0;   // goodput / nominal link rate
  uint64_t retransmits = 0;
  uint64_t packets = 0;
};

// `bytes` of payload in chunks of `chunk_bytes`, forward over `fwd`, ACKs back over `rev`.
SingleTransferResult run_single_transfer(const LinkSpec& fwd, const LinkSpec& rev, uint64_t bytes,
                                         uint32_t chunk_bytes, bool reliable, uint64_t seed,
                                         Nanos limit = 600 * kSecond);

}  // namespace sg::sim
