#include "crypto/session.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/endian.h"

#include "crypto/keys.h"

namespace sg::crypto {
namespace {

std::unique_ptr<Aead> keyed(std::span<const uint8_t> secret, const SessionConfig& c, uint32_t epoch) {
  const std::vector<uint8_t> key = derive_key(secret, c.suite, c.from, c.to, epoch);
  return std::make_unique<Aead>(c.suite, key);
}

}  // namespace

uint32_t boot_epoch(uint64_t unix_seconds) {
  constexpr uint64_t kBase = 1735689600;  // 2025-01-01T00:00:00Z
  const uint64_t e = unix_seconds > kBase ? (unix_seconds - kBase) * 16 : 0;
  return static_cast<uint32_t>(std::min<uint64_t>(e, 0xfff00000u));  // room left to rekey
}

int trailer_lane(std::span<const uint8_t> msg) {
  if (msg.size() < kTrailerLen) return -1;
  return msg[msg.size() - kTrailerLen + 4];  // byte 4 of the big-endian seq
}

const char* verdict_name(OpenVerdict v) {
  switch (v) {
    case OpenVerdict::kOk: return "ok";
    case OpenVerdict::kTruncated: return "truncated";
    case OpenVerdict::kUnknownEpoch: return "unknown_epoch";
    case OpenVerdict::kDuplicate: return "replayed";
    case OpenVerdict::kTooOld: return "too_old";
    case OpenVerdict::kBadTag: return "bad_tag";
  }
  return "?";
}

TxSession::TxSession(std::span<const uint8_t> secret, const SessionConfig& cfg)
    : secret_(secret.begin(), secret.end()), cfg_(cfg) {
  cfg_.rekey_after = std::clamp<uint64_t>(cfg_.rekey_after, 1, kAesGcmPacketLimit);
  epoch_ = cfg_.first_epoch;
  cur_ = keyed(secret_, cfg_, epoch_);
}

void TxSession::rekey_now() {
  ++epoch_;
  pn_ = 0;
  cur_ = keyed(secret_, cfg_, epoch_);
}

size_t TxSession::seal(std::span<uint8_t> buf, size_t len, size_t aad_len) {
  if (!ok() || aad_len > len || len + kTrailerLen > buf.size()) return 0;
  if (pn_ >= cfg_.rekey_after) rekey_now();
  const uint64_t seq = static_cast<uint64_t>(epoch_) << kEpochShift | uint64_t{cfg_.lane} << kLaneShift | pn_;
  uint8_t* t = buf.data() + len;
  const be64 wire_seq(seq);
  std::memcpy(t, &wire_seq, kSeqLen);
  // The trailer's packet number is authenticated with the header: nobody can move a packet
  // into another slot of the window.
  std::span<const uint8_t> aad(buf.data(), aad_len);
  std::span<uint8_t> text(buf.data() + aad_len, len - aad_len);
  const Nonce nonce = make_nonce(seq);
  if (!cur_->seal(nonce, aad, text, cfg_.protection, std::span<uint8_t, kTagLen>(t + kSeqLen, kTagLen))) return 0;
  ++pn_;
  ++total_;
  return len + kTrailerLen;
}

RxSession::RxSession(std::span<const uint8_t> secret, const SessionConfig& cfg)
    : secret_(secret.begin(), secret.end()), cfg_(cfg) {}

void RxSession::resync(uint32_t epoch) {
  slots_[0] = Slot{};
  slots_[1] = make(epoch);
  slots_[2] = make(epoch + 1);
}

RxSession::Slot RxSession::make(uint32_t epoch) const {
  Slot s;
  s.epoch = epoch;
  s.aead = keyed(secret_, cfg_, epoch);
  s.window = std::make_unique<ReplayWindow>(cfg_.replay_window);
  s.valid = s.aead->ok();
  return s;
}

void RxSession::advance() {
  slots_[0] = std::move(slots_[1]);
  slots_[1] = std::move(slots_[2]);
  slots_[2] = make(slots_[1].epoch + 1);
}

OpenVerdict RxSession::trial(uint32_t epoch, uint64_t seq, std::span<uint8_t> msg, size_t aad_len) {
  const size_t body = msg.size() - kTrailerLen;
  const uint8_t* t = msg.data() + body;
  std::span<const uint8_t> aad(msg.data(), aad_len);
  std::span<uint8_t> text(msg.data() + aad_len, body - aad_len);
  auto try_candidate = [&](Candidate& c) {
    if (!c.slot.aead->open(make_nonce(seq), aad, text, cfg_.protection, std::span<const uint8_t, kTagLen>(t + kSeqLen, kTagLen))) {
      ++c.failures;  // the candidate failing most is the first replaced
      return OpenVerdict::kBadTag;
    }
    slots_[0] = Slot{};
    slots_[1] = std::move(c.slot);
    slots_[2] = make(epoch + 1);
    for (auto& x : candidates_) x = Candidate{};
    claims_.fill(Claim{});
    return OpenVerdict::kOk;
  };
  for (auto& c : candidates_)
    if (c.slot.valid && c.slot.epoch == epoch) return try_candidate(c);
  // Tally the claim (the least claimed entry makes room).
  Claim* claim = nullptr;
  for (auto& c : claims_)
    if (c.count && c.epoch == epoch) claim = &c;
  if (!claim) {
    claim = &claims_[0];
    for (auto& c : claims_)
      if (c.count < claim->count) claim = &c;
    *claim = Claim{epoch, 0};
  }
  ++claim->count;
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  if (now_ms - last_trial_ms_ < static_cast<int64_t>(cfg_.trial_interval_ms)) return OpenVerdict::kUnknownEpoch;
  // Derive the most claimed epoch without a candidate (claims are tallied only for those); it
  // replaces an empty candidate, else the one that failed most. A fixed forged epoch thus
  // holds at most one candidate while the real epoch, claimed by every real packet, gets the
  // other at the next interval.
  Claim* best = &claims_[0];
  for (auto& c : claims_)
    if (c.count > best->count) best = &c;
  last_trial_ms_ = now_ms;
  ++trials_;
  Candidate* slot = &candidates_[0];
  for (auto& c : candidates_)
    if (!c.slot.valid || c.failures > slot->failures) slot = &c;
  *slot = Candidate{make(best->epoch), 0};
  *best = Claim{};
  if (!slot->slot.valid) return OpenVerdict::kBadTag;
  return slot->slot.epoch == epoch ? try_candidate(*slot) : OpenVerdict::kUnknownEpoch;
}

OpenVerdict RxSession::open(std::span<uint8_t> msg, size_t aad_len, size_t* len) {
  if (msg.size() < aad_len + kTrailerLen) return OpenVerdict::kTruncated;
  const size_t body = msg.size() - kTrailerLen;
  const uint8_t* t = msg.data() + body;
  be64 wire_seq;
  std::memcpy(&wire_seq, t, kSeqLen);
  const uint64_t seq = wire_seq.load();
  const uint32_t epoch = static_cast<uint32_t>(seq >> kEpochShift);
  const uint64_t pn = seq & kPacketMask;
  if ((seq >> kLaneShift & 0xff) != cfg_.lane) return OpenVerdict::kUnknownEpoch;  // the caller picks by lane
  int k = -1;
  for (int i = 0; i < 3; ++i)
    if (slots_[i].valid && slots_[i].epoch == epoch) k = i;
  if (k < 0) {
    // Older than what we hold: refused for good (a replay from an earlier epoch or run).
    const bool older = slots_[1].valid && epoch < (slots_[0].valid ? slots_[0].epoch : slots_[1].epoch);
    if (older) return OpenVerdict::kUnknownEpoch;
    const OpenVerdict v = trial(epoch, seq, msg, aad_len);
    if (v != OpenVerdict::kOk) return v;
    slots_[1].window->accept(pn);
    *len = body;
    return OpenVerdict::kOk;
  }
  Slot& s = slots_[k];
  switch (s.window->check(pn)) {
    case ReplayVerdict::kDuplicate: return OpenVerdict::kDuplicate;
    case ReplayVerdict::kTooOld: return OpenVerdict::kTooOld;
    case ReplayVerdict::kFresh: break;
  }
  std::span<const uint8_t> aad(msg.data(), aad_len);
  std::span<uint8_t> text(msg.data() + aad_len, body - aad_len);
  if (!s.aead->open(make_nonce(seq), aad, text, cfg_.protection, std::span<const uint8_t, kTagLen>(t + kSeqLen, kTagLen)))
    return OpenVerdict::kBadTag;
  s.window->accept(pn);
  if (k == 2) advance();  // the sender moved on: its next epoch is now current
  *len = body;
  return OpenVerdict::kOk;
}

}  // namespace sg::crypto
