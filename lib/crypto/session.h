// One direction of one site pair, packet by packet: the sender seals each message and appends
// a trailer; the receiver checks the trailer's packet number against a replay window, opens,
// and only then accepts the number.
//
// Trailer (kTrailerLen bytes after the message): be64 seq = epoch << 48 | packet number, then
// the 16-byte tag. The nonce is make_nonce(seq), unique per key because keys are per directed
// pair and epoch (keys.h). The sender moves to the next epoch after rekey_after packets --
// RFC 9001 bounds AES-GCM at 2^23 packets per key for QUIC's confidentiality limit -- and the
// receiver keeps the previous, current and next epoch's keys, so packets in flight across a
// switch (and sprayed over paths of different delay) are all accepted: none is lost to it.
//
// Owner: one thread each. seal/open allocate nothing; an epoch switch derives the following
// epoch's key (HKDF inside OpenSSL allocates) once per rekey_after packets.
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
inline constexpr unsigned kEpochShift = 48;
inline constexpr uint64_t kPacketMask = (uint64_t{1} << kEpochShift) - 1;
inline constexpr uint64_t kAesGcmPacketLimit = uint64_t{1} << 23;  // RFC 9001, section 6.6

struct SessionConfig {
  Suite suite = Suite::kAes128Gcm;
  Protection protection = Protection::kEncrypt;
  uint16_t from = 0;  // the sealing site
  uint16_t to = 0;    // the opening site
  uint64_t rekey_after = kAesGcmPacketLimit / 2;  // well before the limit
  uint32_t replay_window = 8192;                  // bits (packets), per epoch
  // The sender's first epoch. A restarted sender must not start again where an earlier run
  // did (same key, same packet numbers: a reused nonce), so it starts past every epoch it may
  // have used (the gateway takes it from a persisted boot counter) and tells the receiver,
  // which resync()s, over authenticated CONTROL.
  uint32_t first_epoch = 0;
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
  kUnknownEpoch,  // not the previous, current or next epoch
  kDuplicate,     // replayed
  kTooOld,        // behind the replay window
  kBadTag,        // forged, corrupted, or sealed with another secret
};
inline constexpr int kOpenVerdictCount = 6;
const char* verdict_name(OpenVerdict v);

class RxSession {
 public:
  RxSession(std::span<const uint8_t> secret, const SessionConfig& cfg);
  bool ok() const { return slots_[1].aead && slots_[1].aead->ok(); }

  // msg: a received message with its trailer; on kOk the plain message is msg[0, *len).
  OpenVerdict open(std::span<uint8_t> msg, size_t aad_len, size_t* len);
  uint32_t epoch() const { return slots_[1].epoch; }
  // The peer announced (authenticated) that it seals from `epoch` on: forget older epochs.
  void resync(uint32_t epoch);

 private:
  struct Slot {
    uint32_t epoch = 0;
    std::unique_ptr<Aead> aead;
    std::unique_ptr<ReplayWindow> window;
    bool valid = false;
  };
  Slot make(uint32_t epoch) const;
  void advance();  // next becomes current

  std::vector<uint8_t> secret_;
  SessionConfig cfg_;
  std::array<Slot, 3> slots_;  // previous, current, next
};

}  // namespace sg::crypto
