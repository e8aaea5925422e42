// What the receiver hands to its owner. The dataplane implements this to aggregate chunks
// in place, straight from the packet buffer; MessageSink (bubble_fill.h) is a simple
// implementation that places chunks into one flat message buffer.
#pragma once

#include <span>

#include "ltp/types.h"

namespace sg::ltp {

class ReceiverSink {
 public:
  virtual ~ReceiverSink() = default;
  // A chunk arrived for the first time. `payload` points into the packet buffer given to
  // Receiver::on_packet and is valid only during this call (the caller still owns it).
  virtual void on_chunk(const ChunkRef& chunk, std::span<const uint8_t> payload) = 0;
  // A chunk is missing at close: fill it by `rule` (see fill_bubble). Called once per
  // bubble, after every on_chunk of the transfer and before on_transfer_end.
  virtual void on_bubble(const ChunkRef& chunk, FillRule rule) = 0;
  // The transfer ended: every chunk was delivered exactly once or reported as a bubble.
  virtual void on_transfer_end(const TransferSummary& summary) = 0;
  // Every accepted DATA (new or duplicate), for throughput estimation. Optional.
  virtual void on_sample(const ArrivalSample& /*sample*/) {}
  // Asked once as a transfer opens: may it close early (Early Close, the loss bound's
  // fall-back test)? False: it closes only complete (or abandoned, superseded). A round's
  // result on its way down the tree is one: a chunk given up there leaves that site's
  // replica with other values than every other site's.
  virtual bool early_close_allowed(const TransferKey& /*key*/) const { return true; }
};

}  // namespace sg::ltp
