#include "wire/ltp_codec.h"
#include "wire/job_msg.h"

#include <cstring>

namespace sg::wire {
namespace {

template <typename H>
const H* as(std::span<const uint8_t> msg) {
  return reinterpret_cast<const H*>(msg.data());
}

void write_common(LtpCommon& c, MsgType type, uint8_t flags, uint16_t src_node, uint32_t job) {
  c.magic.store(kLtpMagic);
  c.version = kLtpVersion;
  c.type = static_cast<uint8_t>(type);
  c.flags = flags;
  c.reserved = 0;
  c.src_node.store(src_node);
  c.job.store(job);
}

// Magic, supported version, expected type, minimum length: shared by the typed parsers.
WireError check_common(std::span<const uint8_t> msg, MsgType want, size_t header_len) {
  if (msg.size() < sizeof(LtpCommon)) return WireError::kTruncated;
  const auto* c = as<LtpCommon>(msg);
  if (c->magic.load() != kLtpMagic) return WireError::kBadMagic;
  if (!ltp_version_supported(c->version)) return WireError::kBadVersion;
  if (c->type != static_cast<uint8_t>(want)) return WireError::kBadType;
  if ((c->flags & ~kKnownFlags) != 0) return WireError::kBadField;
  if (msg.size() < header_len) return WireError::kTruncated;
  return WireError::kOk;
}

}  // namespace

Result<CommonInfo> parse_common(std::span<const uint8_t> msg) {
  if (msg.size() < sizeof(LtpCommon)) return WireError::kTruncated;
  const auto* c = as<LtpCommon>(msg);
  if (c->magic.load() != kLtpMagic) return WireError::kBadMagic;
  CommonInfo info;
  info.version = c->version;
  info.raw_type = c->type;
  info.type = static_cast<MsgType>(c->type);
  info.flags = c->flags;
  info.src_node = c->src_node.load();
  info.job = c->job.load();
  return info;
}

size_t ltp_header_len(MsgType t) {
  switch (t) {
    case MsgType::kData: return sizeof(DataHeader);
    case MsgType::kAck: return sizeof(AckHeader);
    case MsgType::kClose: return sizeof(CloseHeader);
    case MsgType::kControl: return sizeof(ControlHeader);
    case MsgType::kReject: return sizeof(RejectHeader);
    case MsgType::kProbe: return sizeof(ProbeHeader);
    case MsgType::kJob: return sizeof(JobHeader);
  }
  return 0;
}

Result<DataMsg> parse_data(std::span<const uint8_t> msg) {
  if (auto e = check_common(msg, MsgType::kData, sizeof(DataHeader)); e != WireError::kOk) return e;
  const auto* h = as<DataHeader>(msg);
  DataMsg m;
  m.f.flags = h->common.flags;
  if (m.f.flags & (kFlagMore | kFlagHeld)) return WireError::kBadField;
  const uint16_t plen = h->payload_len.load();
  const size_t want = data_msg_len(plen);
  if (msg.size() < want) return WireError::kTruncated;
  if (msg.size() > want) return WireError::kBadLength;
  m.f.src_node = h->common.src_node.load();
  m.f.job = h->common.job.load();
  m.f.round = h->round.load();
  m.f.policy_version = h->policy_version.load();
  m.f.shard = h->shard.load();
  m.f.path_id = h->path_id.load();
  m.f.chunk_index = h->chunk_index.load();
  m.f.chunk_count = h->chunk_count.load();
  if (m.f.chunk_count == 0 || m.f.chunk_index >= m.f.chunk_count) return WireError::kBadField;
  m.f.contributors = h->contributors.load();
  if (m.f.contributors == 0) return WireError::kBadField;
  if (!codec_id_valid(h->codec)) return WireError::kBadField;
  m.f.codec = static_cast<CodecId>(h->codec);
  m.f.holes = h->holes;
  m.f.send_ts = h->send_ts.load();
  m.f.echo_ts = h->echo_ts.load();
  m.payload = msg.subspan(sizeof(DataHeader), plen);
  return m;
}

Result<size_t> build_data_header(std::span<uint8_t> out, const DataFields& f, uint16_t payload_len) {
  if (out.size() < sizeof(DataHeader)) return WireError::kNoSpace;
  if (f.chunk_count == 0 || f.chunk_index >= f.chunk_count || f.contributors == 0) return WireError::kBadField;
  auto* h = reinterpret_cast<DataHeader*>(out.data());
  write_common(h->common, MsgType::kData, f.flags & (kFlagRetransmit | kFlagSealed | kFlagPartial | kFlagAppLimited), f.src_node, f.job);
  h->round.store(f.round);
  h->policy_version.store(f.policy_version);
  h->shard.store(f.shard);
  h->path_id.store(f.path_id);
  h->chunk_index.store(f.chunk_index);
  h->chunk_count.store(f.chunk_count);
  h->contributors.store(f.contributors);
  h->codec = static_cast<uint8_t>(f.codec);
  h->holes = f.holes;
  h->payload_len.store(payload_len);
  h->reserved2.store(0);
  h->send_ts.store(f.send_ts);
  h->echo_ts.store(f.echo_ts);
  return sizeof(DataHeader);
}

Result<size_t> build_data(std::span<uint8_t> out, const DataFields& f, std::span<const uint8_t> payload) {
  if (payload.size() > 0xffff) return WireError::kBadLength;
  const auto plen = static_cast<uint16_t>(payload.size());
  if (out.size() < data_msg_len(plen)) return WireError::kNoSpace;
  auto h = build_data_header(out, f, plen);
  if (!h) return h.error();
  if (plen) std::memcpy(out.data() + sizeof(DataHeader), payload.data(), plen);
  return data_msg_len(plen);
}

Result<AckMsg> parse_ack(std::span<const uint8_t> msg) {
  if (auto e = check_common(msg, MsgType::kAck, sizeof(AckHeader)); e != WireError::kOk) return e;
  if (msg.size() != sizeof(AckHeader)) return WireError::kBadLength;
  const auto* h = as<AckHeader>(msg);
  if (h->common.flags & ~(kFlagSealed | kFlagHeld)) return WireError::kBadField;
  AckMsg m;
  m.f.held = (h->common.flags & kFlagHeld) != 0;
  m.f.src_node = h->common.src_node.load();
  m.f.job = h->common.job.load();
  m.f.round = h->round.load();
  m.f.policy_version = h->policy_version.load();
  m.f.shard = h->shard.load();
  m.f.path_id = h->path_id.load();
  m.f.cum_ack = h->cum_ack.load();
  m.f.received = h->received.load();
  // You cannot hold fewer chunks than the cumulative point says.
  if (m.f.received < m.f.cum_ack) return WireError::kBadField;
  m.f.ack_ts = h->ack_ts.load();
  m.f.echo_ts = h->echo_ts.load();
  m.f.sack_base = h->sack_base.load();
  m.sack = msg.subspan(offsetof(AckHeader, sack), sizeof(AckHeader::sack));
  return m;
}

Result<size_t> build_ack(std::span<uint8_t> out, const AckFields& f, std::span<const uint8_t> sack) {
  if (out.size() < sizeof(AckHeader)) return WireError::kNoSpace;
  if (sack.size() > sizeof(AckHeader::sack)) return WireError::kBadLength;
  auto* h = reinterpret_cast<AckHeader*>(out.data());
  write_common(h->common, MsgType::kAck, f.held ? kFlagHeld : 0, f.src_node, f.job);
  h->round.store(f.round);
  h->policy_version.store(f.policy_version);
  h->shard.store(f.shard);
  h->path_id.store(f.path_id);
  h->cum_ack.store(f.cum_ack);
  h->received.store(f.received);
  h->ack_ts.store(f.ack_ts);
  h->echo_ts.store(f.echo_ts);
  h->sack_base.store(f.sack_base);
  if (!sack.empty()) std::memcpy(h->sack, sack.data(), sack.size());
  std::memset(h->sack + sack.size(), 0, sizeof(h->sack) - sack.size());
  return sizeof(AckHeader);
}

Result<CloseMsg> parse_close(std::span<const uint8_t> msg) {
  if (auto e = check_common(msg, MsgType::kClose, sizeof(CloseHeader)); e != WireError::kOk) return e;
  const auto* h = as<CloseHeader>(msg);
  if (h->common.flags & ~(kFlagMore | kFlagSealed)) return WireError::kBadField;
  const uint16_t nbytes = h->bitmap_bytes.load();
  if (nbytes > kCloseMaxBitmapBytes) return WireError::kBadLength;
  if (msg.size() < sizeof(CloseHeader) + nbytes) return WireError::kTruncated;
  if (msg.size() > sizeof(CloseHeader) + nbytes) return WireError::kBadLength;
  CloseMsg m;
  m.f.src_node = h->common.src_node.load();
  m.f.job = h->common.job.load();
  m.f.more = (h->common.flags & kFlagMore) != 0;
  m.f.round = h->round.load();
  m.f.policy_version = h->policy_version.load();
  m.f.shard = h->shard.load();
  if (h->reason >= kCloseReasonCount) return WireError::kBadField;
  m.f.reason = static_cast<CloseReason>(h->reason);
  m.f.fill_rule = h->fill_rule;
  m.f.chunk_count = h->chunk_count.load();
  m.f.kept_count = h->kept_count.load();
  m.f.bitmap_base = h->bitmap_base.load();
  if (m.f.kept_count > m.f.chunk_count) return WireError::kBadField;
  if (m.f.bitmap_base % 8 != 0) return WireError::kBadField;
  // The bitmap must lie inside the transfer (rounded up to whole bytes).
  const uint64_t end_bits = static_cast<uint64_t>(m.f.bitmap_base) + 8ull * nbytes;
  if (nbytes > 0 && end_bits > (static_cast<uint64_t>(m.f.chunk_count) + 7) / 8 * 8) return WireError::kBadLength;
  m.bitmap = msg.subspan(sizeof(CloseHeader), nbytes);
  return m;
}

Result<size_t> build_close(std::span<uint8_t> out, const CloseFields& f, std::span<const uint8_t> bitmap) {
  if (bitmap.size() > kCloseMaxBitmapBytes) return WireError::kBadLength;
  if (f.bitmap_base % 8 != 0 || f.kept_count > f.chunk_count) return WireError::kBadField;
  const size_t len = sizeof(CloseHeader) + bitmap.size();
  if (out.size() < len) return WireError::kNoSpace;
  auto* h = reinterpret_cast<CloseHeader*>(out.data());
  write_common(h->common, MsgType::kClose, f.more ? kFlagMore : 0, f.src_node, f.job);
  h->round.store(f.round);
  h->policy_version.store(f.policy_version);
  h->shard.store(f.shard);
  h->reason = static_cast<uint8_t>(f.reason);
  h->fill_rule = f.fill_rule;
  h->chunk_count.store(f.chunk_count);
  h->kept_count.store(f.kept_count);
  h->bitmap_base.store(f.bitmap_base);
  h->bitmap_bytes.store(static_cast<uint16_t>(bitmap.size()));
  h->reserved.store(0);
  if (!bitmap.empty()) std::memcpy(out.data() + sizeof(CloseHeader), bitmap.data(), bitmap.size());
  return len;
}

Result<ControlMsg> parse_control(std::span<const uint8_t> msg) {
  if (auto e = check_common(msg, MsgType::kControl, sizeof(ControlHeader)); e != WireError::kOk) return e;
  const auto* h = as<ControlHeader>(msg);
  if (h->common.flags & ~kFlagSealed) return WireError::kBadField;
  const uint16_t plen = h->payload_len.load();
  if (plen > kControlMaxPayload) return WireError::kBadLength;
  const size_t want = sizeof(ControlHeader) + plen;
  if (msg.size() < want) return WireError::kTruncated;
  if (msg.size() > want) return WireError::kBadLength;
  ControlMsg m;
  m.f.src_node = h->common.src_node.load();
  m.f.job = h->common.job.load();
  m.f.channel = h->channel.load();
  m.f.seq = h->seq.load();
  m.f.ack = h->ack.load();
  m.f.session = h->session.load();
  m.f.send_ts = h->send_ts.load();
  if (m.f.seq == 0 && plen != 0) return WireError::kBadField;  // a pure ack carries nothing
  m.payload = msg.subspan(sizeof(ControlHeader), plen);
  return m;
}

Result<size_t> build_control(std::span<uint8_t> out, const ControlFields& f, std::span<const uint8_t> payload) {
  if (payload.size() > kControlMaxPayload) return WireError::kBadLength;
  if (f.seq == 0 && !payload.empty()) return WireError::kBadField;
  const size_t len = sizeof(ControlHeader) + payload.size();
  if (out.size() < len) return WireError::kNoSpace;
  auto* h = reinterpret_cast<ControlHeader*>(out.data());
  write_common(h->common, MsgType::kControl, 0, f.src_node, f.job);
  h->channel.store(f.channel);
  h->payload_len.store(static_cast<uint16_t>(payload.size()));
  h->seq.store(f.seq);
  h->ack.store(f.ack);
  h->session.store(f.session);
  h->send_ts.store(f.send_ts);
  if (!payload.empty()) std::memcpy(out.data() + sizeof(ControlHeader), payload.data(), payload.size());
  return len;
}

Result<ProbeFields> parse_probe(std::span<const uint8_t> msg) {
  if (auto e = check_common(msg, MsgType::kProbe, sizeof(ProbeHeader)); e != WireError::kOk) return e;
  const auto* h = as<ProbeHeader>(msg);
  if (h->common.flags & ~kFlagSealed) return WireError::kBadField;
  const uint16_t plen = h->payload_len.load();
  if (plen > kProbeMaxPayload) return WireError::kBadLength;
  const size_t want = sizeof(ProbeHeader) + plen;
  if (msg.size() < want) return WireError::kTruncated;
  if (msg.size() > want) return WireError::kBadLength;
  ProbeFields f;
  f.src_node = h->common.src_node.load();
  f.job = h->common.job.load();
  f.train = h->train.load();
  f.seq = h->seq.load();
  f.count = h->count.load();
  f.dst_node = h->dst_node.load();
  f.send_ts = h->send_ts.load();
  f.rx_ts = h->rx_ts.load();
  f.payload_len = plen;
  if (f.count < 2 || f.count > kProbeMaxCount || f.seq >= f.count) return WireError::kBadField;
  return f;
}

Result<size_t> build_probe(std::span<uint8_t> out, const ProbeFields& f, uint16_t payload_len) {
  if (payload_len > kProbeMaxPayload) return WireError::kBadLength;
  if (f.count < 2 || f.count > kProbeMaxCount || f.seq >= f.count) return WireError::kBadField;
  const size_t len = sizeof(ProbeHeader) + payload_len;
  if (out.size() < len) return WireError::kNoSpace;
  auto* h = reinterpret_cast<ProbeHeader*>(out.data());
  write_common(h->common, MsgType::kProbe, 0, f.src_node, f.job);
  h->train.store(f.train);
  h->seq.store(f.seq);
  h->count.store(f.count);
  h->dst_node.store(f.dst_node);
  h->payload_len.store(payload_len);
  h->send_ts.store(f.send_ts);
  h->rx_ts.store(0);
  std::memset(out.data() + sizeof(ProbeHeader), 0, payload_len);
  return len;
}

void stamp_probe_arrival(std::span<uint8_t> msg, uint64_t rx_ts) {
  if (msg.size() < sizeof(ProbeHeader)) return;
  reinterpret_cast<ProbeHeader*>(msg.data())->rx_ts.store(rx_ts);
}

Result<RejectFields> parse_reject(std::span<const uint8_t> msg) {
  if (msg.size() < sizeof(LtpCommon)) return WireError::kTruncated;
  const auto* h = as<RejectHeader>(msg);
  if (h->common.magic.load() != kLtpMagic) return WireError::kBadMagic;
  if (h->common.type != static_cast<uint8_t>(MsgType::kReject)) return WireError::kBadType;
  if (msg.size() < sizeof(RejectHeader)) return WireError::kTruncated;
  if (msg.size() > sizeof(RejectHeader)) return WireError::kBadLength;
  RejectFields f;
  f.src_node = h->common.src_node.load();
  f.job = h->common.job.load();
  if (h->reason != static_cast<uint8_t>(RejectReason::kVersion) &&
      h->reason != static_cast<uint8_t>(RejectReason::kType)) {
    return WireError::kBadField;
  }
  f.reason = static_cast<RejectReason>(h->reason);
  f.min_version = h->min_version;
  f.max_version = h->max_version;
  f.offending_version = h->offending_version;
  if (f.min_version > f.max_version) return WireError::kBadField;
  return f;
}

Result<size_t> build_reject(std::span<uint8_t> out, const RejectFields& f) {
  if (out.size() < sizeof(RejectHeader)) return WireError::kNoSpace;
  auto* h = reinterpret_cast<RejectHeader*>(out.data());
  write_common(h->common, MsgType::kReject, 0, f.src_node, f.job);
  h->reason = static_cast<uint8_t>(f.reason);
  h->min_version = f.min_version;
  h->max_version = f.max_version;
  h->offending_version = f.offending_version;
  return sizeof(RejectHeader);
}

std::optional<uint16_t> peek_shard(std::span<const uint8_t> msg) {
  if (msg.size() < sizeof(LtpCommon)) return std::nullopt;
  const auto type = static_cast<MsgType>(reinterpret_cast<const LtpCommon*>(msg.data())->type);
  switch (type) {
    case MsgType::kData:
      if (msg.size() < sizeof(DataHeader)) return std::nullopt;
      return reinterpret_cast<const DataHeader*>(msg.data())->shard.load();
    case MsgType::kAck:
      if (msg.size() < sizeof(AckHeader)) return std::nullopt;
      return reinterpret_cast<const AckHeader*>(msg.data())->shard.load();
    case MsgType::kClose:
      if (msg.size() < sizeof(CloseHeader)) return std::nullopt;
      return reinterpret_cast<const CloseHeader*>(msg.data())->shard.load();
    default: return std::nullopt;
  }
}

}  // namespace sg::wire
