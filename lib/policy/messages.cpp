#include "policy/messages.h"

#include <limits>

#include "common/byte_io.h"

namespace sg::policy {
namespace {

// Adds the message's two compound fields to the plain byte streams.
class Writer : public ByteWriter {
 public:
  using ByteWriter::ByteWriter;
  void round(Round r) { be<uint64_t>(static_cast<uint64_t>(r + 1)); }
  void blob(const std::vector<uint8_t>& b) {
    be<uint32_t>(static_cast<uint32_t>(b.size()));
    bytes(b);
  }
};

// The first error wins: an overrun reads as kTruncated, a bad value as what fail() was given.
class Reader : public ByteReader {
 public:
  using ByteReader::ByteReader;
  MsgError err() const {
    if (err_ != MsgError::kOk) return err_;
    return overrun() ? MsgError::kTruncated : MsgError::kOk;
  }
  void fail(MsgError e) {
    if (err() == MsgError::kOk) err_ = e;
    ByteReader::fail();
  }
  Round round() {
    const uint64_t raw = be<uint64_t>();
    if (raw > static_cast<uint64_t>(std::numeric_limits<Round>::max())) {
      fail(MsgError::kBadRound);
      return kNoRound;
    }
    return static_cast<Round>(raw) - 1;
  }
  void blob(std::vector<uint8_t>& out) {
    const uint32_t len = be<uint32_t>();
    if (!ok()) return;
    if (len > kMaxPlanBytes) return fail(MsgError::kPlanTooLarge);
    const std::span<const uint8_t> b = bytes(len);
    out.assign(b.begin(), b.end());
  }

 private:
  MsgError err_ = MsgError::kOk;
};

constexpr uint8_t kSynced = 1, kHasPrev = 2, kHasActive = 4, kHasNext = 8;

void write_record(Writer& w, const PolicyRecord& r) {
  w.be<uint64_t>(r.version);
  w.round(r.from_round);
  w.blob(r.plan);
}

PolicyRecord read_record(Reader& r) {
  PolicyRecord p;
  p.version = r.be<uint64_t>();
  p.from_round = r.round();
  r.blob(p.plan);
  return p;
}

}  // namespace

std::string_view msg_error_name(MsgError e) {
  switch (e) {
    case MsgError::kOk: return "ok";
    case MsgError::kTruncated: return "truncated";
    case MsgError::kBadMagic: return "bad magic";
    case MsgError::kBadVersion: return "bad format version";
    case MsgError::kBadType: return "bad message type";
    case MsgError::kBadStatus: return "bad status";
    case MsgError::kBadRound: return "round out of range";
    case MsgError::kPlanTooLarge: return "plan too large";
    case MsgError::kTrailingBytes: return "trailing bytes";
  }
  return "unknown";
}

void encode(const Message& m, std::vector<uint8_t>& out) {
  Writer w(out);
  w.u8('S');
  w.u8('P');
  w.u8(kMsgFormat);
  w.u8(static_cast<uint8_t>(m.type));
  w.be<uint16_t>(m.from);
  w.be<uint16_t>(m.to);
  w.be<uint64_t>(m.nonce);
  w.be<uint64_t>(m.version);
  w.be<uint64_t>(m.attempt);
  w.round(m.round);
  w.u8(m.status);
  if (m.type == MsgType::kPropose) w.blob(m.plan);
  if (m.type == MsgType::kState) {
    const Snapshot& s = m.state;
    w.u8(static_cast<uint8_t>((s.synced ? kSynced : 0) | (s.prev ? kHasPrev : 0) | (s.active ? kHasActive : 0) |
                              (s.next ? kHasNext : 0)));
    w.round(s.current_round);
    w.be<uint64_t>(s.max_attempt);
    if (s.prev) write_record(w, *s.prev);
    if (s.active) write_record(w, *s.active);
    if (s.next) {
      w.be<uint64_t>(s.next->version);
      w.be<uint64_t>(s.next->attempt);
      w.round(s.next->switch_round);
      w.u8(static_cast<uint8_t>(s.next->decision));
      w.blob(s.next->plan);
    }
  }
}

MsgError decode(std::span<const uint8_t> bytes, Message& m) {
  if (bytes.size() < kMsgHeaderBytes) return MsgError::kTruncated;
  Reader r(bytes);
  if (r.u8() != 'S' || r.u8() != 'P') return MsgError::kBadMagic;
  if (r.u8() != kMsgFormat) return MsgError::kBadVersion;
  const uint8_t type = r.u8();
  if (type == 0 || type > kMsgTypeMax) return MsgError::kBadType;
  m = Message{};
  m.type = static_cast<MsgType>(type);
  m.from = r.be<uint16_t>();
  m.to = r.be<uint16_t>();
  m.nonce = r.be<uint64_t>();
  m.version = r.be<uint64_t>();
  m.attempt = r.be<uint64_t>();
  m.round = r.round();
  m.status = r.u8();
  if (r.err() != MsgError::kOk) return r.err();
  if (m.type == MsgType::kPrepared && m.status > 1) return MsgError::kBadStatus;
  if (m.type == MsgType::kDecide && m.status > static_cast<uint8_t>(Decision::kAbort)) return MsgError::kBadStatus;
  if (m.type == MsgType::kPropose) r.blob(m.plan);
  if (m.type == MsgType::kState) {
    Snapshot& s = m.state;
    const uint8_t flags = r.u8();
    if (flags & ~(kSynced | kHasPrev | kHasActive | kHasNext)) return MsgError::kBadStatus;
    s.synced = flags & kSynced;
    s.current_round = r.round();
    s.max_attempt = r.be<uint64_t>();
    if (flags & kHasPrev) s.prev = read_record(r);
    if (flags & kHasActive) s.active = read_record(r);
    if (flags & kHasNext) {
      Proposal p;
      p.version = r.be<uint64_t>();
      p.attempt = r.be<uint64_t>();
      p.switch_round = r.round();
      const uint8_t d = r.u8();
      if (r.err() == MsgError::kOk && d > static_cast<uint8_t>(Decision::kAbort)) return MsgError::kBadStatus;
      p.decision = static_cast<Decision>(d);
      r.blob(p.plan);
      s.next = std::move(p);
    }
  }
  if (r.err() != MsgError::kOk) return r.err();
  if (r.left() != 0) return MsgError::kTrailingBytes;
  return MsgError::kOk;
}

}  // namespace sg::policy
