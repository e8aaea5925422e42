// Parse and build LTP messages. Parsers check every length before reading and return a
// WireError; the message must fill its span exactly (trailing bytes are an error, since the
// UDP length already delimits it). Results hold host-order fields plus spans INTO the input
// buffer: a DATA payload is never copied here.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "common/codec_id.h"
#include "wire/ltp_header.h"
#include "wire/result.h"

namespace sg::wire {

struct CommonInfo {
  uint8_t version = 0;
  MsgType type = MsgType::kData;
  uint8_t raw_type = 0;
  uint8_t flags = 0;
  uint16_t src_node = 0;
  uint32_t job = 0;
};

constexpr bool ltp_version_supported(uint8_t v) { return v >= kLtpMinVersion && v <= kLtpMaxVersion; }

// Magic and length only: the version is NOT checked, so a caller can REJECT it.
Result<CommonInfo> parse_common(std::span<const uint8_t> msg);

struct DataFields {
  uint16_t src_node = 0;
  uint32_t job = 0;
  uint32_t round = 0;
  uint32_t policy_version = 0;
  uint16_t shard = 0;
  uint16_t path_id = 0;
  uint32_t chunk_index = 0;
  uint32_t chunk_count = 0;
  uint16_t contributors = 1;
  CodecId codec = CodecId::kF32;
  uint8_t holes = 0;  // DataHeader::holes
  uint8_t flags = 0;
  uint64_t send_ts = 0;
  uint64_t echo_ts = 0;
};

struct DataMsg {
  DataFields f;
  std::span<const uint8_t> payload;  // points into the parsed buffer
};

inline constexpr size_t data_msg_len(uint16_t payload_len) { return sizeof(DataHeader) + payload_len; }

// The fixed header of a message of type t (what a sealed message authenticates without
// encrypting); 0 for a type we do not know.
size_t ltp_header_len(MsgType t);

Result<DataMsg> parse_data(std::span<const uint8_t> msg);
// Header only (the payload goes at out[sizeof(DataHeader)..] by whoever owns it).
Result<size_t> build_data_header(std::span<uint8_t> out, const DataFields& f, uint16_t payload_len);
// Header + copy of payload. Returns total length.
Result<size_t> build_data(std::span<uint8_t> out, const DataFields& f, std::span<const uint8_t> payload);

struct AckFields {
  uint16_t src_node = 0;
  uint32_t job = 0;
  uint32_t round = 0;
  uint32_t policy_version = 0;
  uint16_t shard = 0;
  uint16_t path_id = 0;
  uint32_t cum_ack = 0;
  uint32_t received = 0;
  uint64_t ack_ts = 0;
  uint64_t echo_ts = 0;
  uint32_t sack_base = 0;
  bool held = false;  // kFlagHeld
};

struct AckMsg {
  AckFields f;
  std::span<const uint8_t> sack;  // kAckSackBits / 8 bytes, into the parsed buffer
  bool sack_bit(uint32_t i) const { return (sack[i >> 3] >> (i & 7)) & 1; }
};

Result<AckMsg> parse_ack(std::span<const uint8_t> msg);

// The shard a DATA, ACK or CLOSE is about, read without validating the rest (for steering a
// message to the engine that owns its shard; the owner validates it fully). nullopt for
// other types or a message too short to hold the field.
std::optional<uint16_t> peek_shard(std::span<const uint8_t> msg);
// `sack` may be shorter than the field (rest zero) but not longer.
Result<size_t> build_ack(std::span<uint8_t> out, const AckFields& f, std::span<const uint8_t> sack);

struct CloseFields {
  uint16_t src_node = 0;
  uint32_t job = 0;
  uint32_t round = 0;
  uint32_t policy_version = 0;
  uint16_t shard = 0;
  CloseReason reason = CloseReason::kComplete;
  uint8_t fill_rule = 0;
  uint32_t chunk_count = 0;
  uint32_t kept_count = 0;
  uint32_t bitmap_base = 0;
  bool more = false;
};

struct CloseMsg {
  CloseFields f;
  std::span<const uint8_t> bitmap;  // kept bits for chunks bitmap_base.., into the buffer
};

Result<CloseMsg> parse_close(std::span<const uint8_t> msg);
Result<size_t> build_close(std::span<uint8_t> out, const CloseFields& f, std::span<const uint8_t> bitmap);

struct ControlFields {
  uint16_t src_node = 0;
  uint32_t job = 0;
  uint16_t channel = 0;
  uint32_t seq = 0;
  uint32_t ack = 0;
  uint32_t session = 0;  // the sender's incarnation (ltp::ControlChannel)
  uint64_t send_ts = 0;
};

struct ControlMsg {
  ControlFields f;
  std::span<const uint8_t> payload;  // into the parsed buffer
};

Result<ControlMsg> parse_control(std::span<const uint8_t> msg);
Result<size_t> build_control(std::span<uint8_t> out, const ControlFields& f, std::span<const uint8_t> payload);

struct ProbeFields {
  uint16_t src_node = 0;
  uint32_t job = 0;
  uint32_t train = 0;
  uint16_t seq = 0;
  uint16_t count = 2;
  uint16_t dst_node = 0;
  uint64_t send_ts = 0;
  uint64_t rx_ts = 0;
  uint16_t payload_len = 0;  // parsed: the padding after the header
};

inline constexpr size_t probe_msg_len(uint16_t payload_len) { return sizeof(ProbeHeader) + payload_len; }

// seq < count <= kProbeMaxCount, count >= 2, payload_len <= kProbeMaxPayload.
Result<ProbeFields> parse_probe(std::span<const uint8_t> msg);
// Header + payload_len zero bytes. Returns the total length.
Result<size_t> build_probe(std::span<uint8_t> out, const ProbeFields& f, uint16_t payload_len);
// The receiver's arrival time, written into a probe it holds (no other field changes).
void stamp_probe_arrival(std::span<uint8_t> msg, uint64_t rx_ts);

struct RejectFields {
  uint16_t src_node = 0;
  uint32_t job = 0;
  RejectReason reason = RejectReason::kVersion;
  uint8_t offending_version = 0;
  uint8_t min_version = kLtpMinVersion;
  uint8_t max_version = kLtpMaxVersion;
};

// REJECT is parsed whatever its version byte says (its layout is frozen).
Result<RejectFields> parse_reject(std::span<const uint8_t> msg);
Result<size_t> build_reject(std::span<uint8_t> out, const RejectFields& f);

}  // namespace sg::wire
