// One direction of one site pair from one sending thread (a "lane"), packet by packet: the
// sender seals each message and appends a trailer; the receiver checks the trailer's packet
// number against a replay window, opens, and only then accepts the number.
//
// Trailer (kTrailerLen bytes after the message): be64 seq = epoch << 32 | lane << 24 | packet
// number, then the 16-byte tag. The nonce is make_nonce(seq): unique per key because keys are
// per directed pair and epoch (keys.h) and every sending thread of a gateway has its own lane.
// The sender moves to the next epoch after rekey_after packets -- RFC 9001 bounds AES-GCM at
// 2^23 packets per key -- and the receiver keeps the previous, current and next epoch's keys,
// so packets in flight across a switch (and sprayed over paths of different delay) are all
// accepted: none is lost to it.
//
// Restarts: a restarted sender must never seal again under an (epoch, packet number) it used
// before, so it starts at boot_epoch() of the wall clock, past every epoch an earlier run can
// have reached. A receiver meets an epoch beyond its next one (a restarted or long-silent
// sender, or its own first packet) by deriving that epoch's key -- a candidate -- and moves
// there once a packet verifies under it. It never goes back to an older epoch. Floods of
// forged epochs cannot make it derive keys at line rate nor keep the real epoch out: unknown
// epochs are tallied by how many packets claim them, and at most once per trial_interval_ms
// the most claimed one becomes a candidate (two are kept; the one failing most is replaced).
//
// Owner: one thread each. seal/open allocate nothing; an epoch switch or trial derives a key
// (HKDF inside OpenSSL allocates) once per rekey_after packets or trial interval.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "crypto/aead.h"
#include "crypto/replay_window.h"

namespace sg::crypto {

inline constexpr size_t kSeqLen = 8;
inline constexpr size_t kTrailerLen = kSeqLen + kTagLen;
inline constexpr unsigned kEpochShift = 32;
inline constexpr unsigned kLaneShift = 24;
inline constexpr uint64_t kPacketMask = (uint64_t{1} << kLaneShift) - 1;
inline constexpr unsigned kMaxLanes = 256;
inline constexpr uint64_t kAesGcmPacketLimit = uint64_t{1} << 23;  // RFC 9001, section 6.6
static_assert(kAesGcmPacketLimit <= kPacketMask + 1);
inline constexpr uint32_t kTrialIntervalMs = 10;

// The first epoch of a sender started at `unix_seconds`: 16 epochs per second since 2025, so
// a restart lands past every epoch the previous run reached unless one lane sealed more than
// 16 x 2^22 packets per second (67 Mpps) or the clock stepped back. Good until about 2033.
uint32_t boot_epoch(uint64_t unix_seconds);

// The lane a sealed message's trailer names (its sender thread); -1 if too short.
int trailer_lane(std::span<const uint8_t> msg);

struct SessionConfig {
  Suite suite = Suite::kAes128Gcm;
  Protection protection = Protection::kEncrypt;
  uint16_t from = 0;  // the sealing site
  uint16_t to = 0;    // the opening site
  uint8_t lane = 0;   // the sending thread (its own packet-number space under the pair's key)
  uint64_t rekey_after = kAesGcmPacketLimit / 2;  // well before the limit
  uint32_t replay_window = 8192;                  // bits (packets), per epoch
  // The sender's first epoch (boot_epoch() in a gateway). The receiver ignores it: it learns
  // the sender's epoch from the first packet that authenticates.
  uint32_t first_epoch = 0;
  uint32_t trial_interval_ms = kTrialIntervalMs;  // receiver: at most one key trial per this
};

class TxSession {
 public:
  TxSession(std::span<const uint8_t> secret, const SessionConfig& cfg);
  bool ok() const { return cur_ && cur_->ok(); }

  // buf holds the message in [0, len) and room for the trailer after it; the first aad_len
  // bytes (the header) are authenticated, the rest encrypted or authenticated per the
  // protection. Returns the sealed length (len + kTrailerLen), or 0 if buf is too short or
  // OpenSSL failed (then nothing may be sent).
  size_t seal(std::span<uint8_t> buf, size_t len, size_t aad_len);

  uint32_t epoch() const { return epoch_; }
  uint64_t packets() const { return total_; }
  void rekey_now();  // start the next epoch (operator rotation, tests)

 private:
  std::vector<uint8_t> secret_;
  SessionConfig cfg_;
  uint32_t epoch_ = 0;
  uint64_t pn_ = 0, total_ = 0;
  std::unique_ptr<Aead> cur_;
};

enum class OpenVerdict : uint8_t {
  kOk = 0,
  kTruncated,     // shorter than its header plus a trailer
  kUnknownEpoch,  // older than the previous epoch, or newer and within trial_interval_ms of
                  // the last key trial
  kDuplicate,     // replayed
  kTooOld,        // behind the replay window
  kBadTag,        // forged, corrupted, or sealed with another secret (also a failed trial)
};
inline constexpr int kOpenVerdictCount = 6;
const char* verdict_name(OpenVerdict v);

class RxSession {
 public:
  RxSession(std::span<const uint8_t> secret, const SessionConfig& cfg);
  // msg: a received message with its trailer, sealed by lane cfg.lane; on kOk the plain
  // message is msg[0, *len).
  OpenVerdict open(std::span<uint8_t> msg, size_t aad_len, size_t* len);
  uint32_t epoch() const { return slots_[1].epoch; }
  bool synced() const { return slots_[1].valid; }
  // Moves to `epoch` now (its key derived): older epochs are forgotten.
  void resync(uint32_t epoch);
  uint64_t trials() const { return trials_; }  // candidate keys derived

 private:
  struct Slot {
    uint32_t epoch = 0;
    std::unique_ptr<Aead> aead;
    std::unique_ptr<ReplayWindow> window;
    bool valid = false;
  };
  Slot make(uint32_t epoch) const;
  void advance();  // next becomes current
  // An epoch past the next one: tried under a candidate key if one is derived for it, else
  // tallied (kUnknownEpoch) and maybe derived now.
  OpenVerdict trial(uint32_t epoch, uint64_t seq, std::span<uint8_t> msg, size_t aad_len);
  struct Candidate {
    Slot slot;
    uint32_t failures = 0;
  };
  struct Claim {
    uint32_t epoch = 0;
    uint32_t count = 0;
  };


  std::vector<uint8_t> secret_;
  SessionConfig cfg_;
  std::array<Slot, 3> slots_;  // previous, current, next
  int64_t last_trial_ms_ = INT64_MIN / 2;
  uint64_t trials_ = 0;
  std::array<Candidate, 2> candidates_;
  std::array<Claim, 8> claims_{};
};

}  // namespace sg::crypto
