// A gateway's sessions with its peer sites, per thread. Every thread that puts LTP messages on
// the wire is a lane with a Sealer (one TxSession per peer); every thread that receives them
// has an Opener (one RxSession per peer and sending lane: each lane of each peer numbers its
// packets on its own, so each needs its own replay window).
//
// Built on the control thread before traffic starts (key derivation allocates); seal and open
// then allocate nothing except at an epoch switch (session.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "crypto/session.h"

namespace sg::crypto {

struct PeerSecurity {
  std::vector<uint8_t> secret;
  Suite suite = Suite::kAes128Gcm;
  Protection protection = Protection::kEncrypt;
  uint32_t replay_window = 8192;
  uint64_t rekey_after = uint64_t{1} << 22;
  uint32_t first_epoch = 0;      // boot_epoch() of this run
  uint16_t self = 0;             // this site
  std::vector<uint16_t> peers;   // the sites we exchange sealed traffic with
  unsigned lanes = 1;            // sending threads per gateway (every gateway of a deployment)
};

class Sealer {
 public:
  Sealer(const PeerSecurity& sec, uint8_t lane);
  bool ok() const { return ok_; }
  // Seals buf[0, len) for the next hop `peer` (header buf[0, aad_len) authenticated, the
  // rest per the protection) and appends the trailer; buf needs kTrailerLen bytes of room.
  // Returns the sealed length, or 0 (peer not configured, no room, OpenSSL failed).
  size_t seal(uint16_t peer, std::span<uint8_t> buf, size_t len, size_t aad_len);
  uint8_t lane() const { return lane_; }

 private:
  std::vector<uint16_t> peers_;
  std::vector<std::unique_ptr<TxSession>> tx_;
  uint8_t lane_;
  bool ok_ = true;
};

class Opener {
 public:
  explicit Opener(const PeerSecurity& sec);
  // msg: a message sealed by `peer` (the previous hop) with its trailer. On kOk the plain
  // message is msg[0, *len). A lane beyond the configured ones is kUnknownEpoch.
  OpenVerdict open(uint16_t peer, std::span<uint8_t> msg, size_t aad_len, size_t* len);
  bool knows(uint16_t peer) const { return index(peer) >= 0; }

 private:
  int index(uint16_t peer) const;
  std::vector<uint16_t> peers_;
  unsigned lanes_;
  std::vector<std::unique_ptr<RxSession>> rx_;  // [peer index * lanes + lane]
};

}  // namespace sg::crypto
