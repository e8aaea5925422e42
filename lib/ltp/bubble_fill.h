// Bubble Filling: what goes into a chunk that never arrived, and a reference sink that
// assembles one flat message per transfer (tests, the simulator and the worker client use
// it; the dataplane aggregates in place with its own sink).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ltp/receiver_sink.h"
#include "ltp/types.h"

namespace sg::ltp {

// Fills `dst` by `rule` and returns the contributor count to record for the chunk:
//   kZero     -> zeros, 0 contributors (a mean over contributors stays unbiased)
//   kPrevious -> copy of `previous` (last round's aggregate), `previous_contributors`
//   kLocal    -> copy of `local` (this site's own gradient), 1 contributor
// A source shorter than dst (or empty) falls back to zeros for the rest, contributors 0.
uint16_t fill_bubble(FillRule rule, std::span<uint8_t> dst, std::span<const uint8_t> previous,
                     uint16_t previous_contributors, std::span<const uint8_t> local);

// Places each transfer's chunks at chunk_index * chunk_size of one preallocated buffer.
// Handles one transfer at a time per instance (the one whose chunks it sees first; others
// are counted as foreign and ignored). Sized up front; nothing allocates after construction.
class MessageSink final : public ReceiverSink {
 public:
  MessageSink(size_t max_bytes, uint32_t chunk_size, uint32_t max_chunks);

  // Optional fill sources (must cover the message) for kPrevious / kLocal.
  void set_previous(std::span<const uint8_t> prev, uint16_t contributors) { previous_ = prev; prev_contrib_ = contributors; }
  void set_local(std::span<const uint8_t> local) { local_ = local; }
  void reset();

  void on_chunk(const ChunkRef& c, std::span<const uint8_t> payload) override;
  void on_bubble(const ChunkRef& c, FillRule rule) override;
  void on_transfer_end(const TransferSummary& s) override;
  void on_sample(const ArrivalSample& s) override { ++samples_; sample_bytes_ += s.bytes; }

  std::span<const uint8_t> message() const { return {buf_.data(), len_}; }
  const std::vector<uint16_t>& contributors() const { return contrib_; }
  const std::vector<uint8_t>& filled() const { return filled_; }  // 1 = bubble
  bool ended() const { return ended_; }
  const TransferSummary& summary() const { return summary_; }
  uint64_t chunks() const { return chunks_; }
  uint64_t bubbles() const { return bubbles_; }
  uint64_t errors() const { return errors_; }  // repeated delivery, bad sizes, foreign keys
  uint64_t samples() const { return samples_; }
  uint64_t sample_bytes() const { return sample_bytes_; }

 private:
  bool accept(const ChunkRef& c);
  std::vector<uint8_t> buf_;
  std::vector<uint16_t> contrib_;
  std::vector<uint8_t> filled_;
  std::vector<uint8_t> seen_;
  uint32_t chunk_size_;
  size_t len_ = 0;
  bool bound_ = false;
  TransferKey key_{};
  bool ended_ = false;
  TransferSummary summary_{};
  std::span<const uint8_t> previous_, local_;
  uint16_t prev_contrib_ = 0;
  uint64_t chunks_ = 0, bubbles_ = 0, errors_ = 0, samples_ = 0, sample_bytes_ = 0;
};

}  // namespace sg::ltp
