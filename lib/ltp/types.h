// Vocabulary shared by the LTP sender, receiver and their users (dataplane, simulator).
#pragma once

#include <cstdint>
#include <span>

#include "common/clock.h"
#include "common/codec_id.h"
#include "wire/ltp_header.h"

namespace sg::ltp {

using wire::CloseReason;

inline constexpr Nanos kNever = INT64_MAX;

// An echoed timestamp from the network gives an RTT sample only if it is one of ours: not
// zero, not in the future, and at most kMaxRttSample old. Anything else (including values
// beyond int64, which would overflow the subtraction) yields no sample (-1).
inline constexpr Nanos kMaxRttSample = 60 * kSecond;
constexpr Nanos rtt_from_echo(uint64_t echo, Nanos now) {
  if (echo == 0 || now < 0 || echo > static_cast<uint64_t>(now)) return -1;
  const Nanos rtt = now - static_cast<Nanos>(echo);
  return rtt <= kMaxRttSample ? rtt : -1;
}

// A DATA's send stamp gives a one-way delay sample (offset by the clocks' difference) unless
// it is zero (not stamped) or beyond int64 (the subtraction would overflow).
constexpr Nanos owd_from_stamp(uint64_t send_ts, Nanos now) {
  if (send_ts == 0 || send_ts > static_cast<uint64_t>(INT64_MAX) || now < 0) return kNoOwd;
  return now - static_cast<Nanos>(send_ts);
}

// How a chunk that never arrived is filled at close (wire value: CLOSE::fill_rule).
enum class FillRule : uint8_t {
  kZero = 0,      // zeros, contributor count 0: the mean divides by who really contributed
  kPrevious = 1,  // the previous round's aggregate for this chunk
  kLocal = 2,     // the receiver's own local gradient for this chunk
};

// One transfer = one sender's chunks of one shard in one round of one job.
struct TransferKey {
  uint32_t job = 0;
  uint32_t round = 0;
  uint16_t shard = 0;
  uint16_t src_node = 0;
  bool operator==(const TransferKey&) const = default;
};

// What a delivered (or filled) chunk is; passed to the sink with the payload.
struct ChunkRef {
  TransferKey key;
  uint32_t policy_version = 0;
  uint32_t chunk_index = 0;
  uint32_t chunk_count = 0;
  uint16_t contributors = 0;  // as sent; a bubble reports 0 (nobody's data arrived)
  CodecId codec = CodecId::kF32;
  uint16_t path_id = 0;
  uint8_t holes = 0;  // as sent (wire::DataHeader::holes): parts the sender had nothing for
};

// One DATA arrival, for the passive throughput estimator (lib/measure).
struct ArrivalSample {
  uint16_t src_node = 0;
  uint16_t path_id = 0;
  uint32_t bytes = 0;     // LTP message bytes (header + payload)
  Nanos arrival = 0;
  Nanos rtt = -1;         // receiver-side RTT from the echoed ACK timestamp; -1 = none
  bool retransmit = false;
  // Arrival minus the DATA's send timestamp (the sender's clock): the one-way delay plus the
  // two clocks' offset, so only its variation means something (kNoOwd: not stamped).
  Nanos owd = kNoOwd;
  bool app_limited = false;  // the sender said it had nothing more to send (kFlagAppLimited)
};

struct TransferSummary {
  TransferKey key;
  uint32_t policy_version = 0;
  uint32_t chunk_count = 0;
  uint32_t received = 0;       // distinct chunks that arrived
  uint32_t filled = 0;         // bubbles (chunk_count - received)
  CloseReason reason = CloseReason::kComplete;
  bool fell_back = false;      // the loss bound was crossed: delivered reliably
  double threshold = 1.0;      // Early Close threshold in force at close
  Nanos opened = 0;
  Nanos closed = 0;
};

// Where a packet produced by a state machine goes. head/payload are only valid during the
// call: the implementation copies them into its own buffer (an mbuf, a simulator packet).
// Splitting head and payload lets the dataplane place the payload in an mbuf straight from
// the message buffer, with no staging copy.
struct TxMeta {
  uint16_t peer_node = 0;
  uint16_t path_id = 0;
  wire::MsgType type = wire::MsgType::kData;
  // DATA whose payload several transfers send (a site's result to each of its workers): the
  // slot where a sink may keep the payload's folded checksum sum (kPayloadSumValid set), so it
  // sums the payload once for all of them. Owned by the transfer's owner, who clears it
  // whenever the payload's bytes change. Null: no such slot.
  uint32_t* payload_sum = nullptr;
};
inline constexpr uint32_t kPayloadSumValid = 1u << 16;

class PacketSink {
 public:
  virtual ~PacketSink() = default;
  virtual void send(const TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) = 0;
};

}  // namespace sg::ltp
