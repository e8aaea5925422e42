#include "crypto/peer_sessions.h"

#include <algorithm>

namespace sg::crypto {
namespace {

SessionConfig session_config(const PeerSecurity& sec, uint16_t from, uint16_t to, uint8_t lane) {
  SessionConfig c;
  c.suite = sec.suite;
  c.protection = sec.protection;
  c.from = from;
  c.to = to;
  c.lane = lane;
  c.rekey_after = sec.rekey_after;
  c.replay_window = sec.replay_window;
  c.first_epoch = sec.first_epoch;
  return c;
}

}  // namespace

Sealer::Sealer(const PeerSecurity& sec, uint8_t lane) : peers_(sec.peers), lane_(lane) {
  for (uint16_t p : peers_) {
    tx_.push_back(std::make_unique<TxSession>(sec.secret, session_config(sec, sec.self, p, lane)));
    ok_ = ok_ && tx_.back()->ok();
  }
}

size_t Sealer::seal(uint16_t peer, std::span<uint8_t> buf, size_t len, size_t aad_len) {
  for (size_t i = 0; i < peers_.size(); ++i)
    if (peers_[i] == peer) return tx_[i]->seal(buf, len, aad_len);
  return 0;
}

Opener::Opener(const PeerSecurity& sec) : peers_(sec.peers), lanes_(std::clamp(sec.lanes, 1u, kMaxLanes)) {
  for (uint16_t p : peers_)
    for (unsigned l = 0; l < lanes_; ++l)
      rx_.push_back(std::make_unique<RxSession>(sec.secret, session_config(sec, p, sec.self, static_cast<uint8_t>(l))));
}

int Opener::index(uint16_t peer) const {
  for (size_t i = 0; i < peers_.size(); ++i)
    if (peers_[i] == peer) return static_cast<int>(i);
  return -1;
}

OpenVerdict Opener::open(uint16_t peer, std::span<uint8_t> msg, size_t aad_len, size_t* len) {
  const int i = index(peer);
  const int lane = trailer_lane(msg);
  if (lane < 0 || msg.size() < aad_len + kTrailerLen) return OpenVerdict::kTruncated;
  if (i < 0 || static_cast<unsigned>(lane) >= lanes_) return OpenVerdict::kUnknownEpoch;
  return rx_[static_cast<size_t>(i) * lanes_ + static_cast<unsigned>(lane)]->open(msg, aad_len, len);
}

}  // namespace sg::crypto
