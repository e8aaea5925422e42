// Messages between the engines that run one job when its shards are split over them
// (SyncConfig::shard_engines). Engine 0 leads: it holds the site's workers (LocalGroup),
// begins every round, and ends it once every engine reported its shards done; engine q >= 1
// follows. One single-producer/single-consumer rte_ring per direction and follower.
//
//   lead -> follower  kBegin  {round, a: 1 streaming local (the lead's contribution buffer), 0 synthetic}
//                     kLocal  {round, a: first float, b: count, c: 1 present / 0 absent}
//   follower -> lead  kResult {round, a: first float, b: count}  (its SiteSync result buffer)
//                     kDone   {round, a: early closes, b: bubbles up << 32 | down, c: retransmits, d: timeouts << 32 | peers moved on}
//                     kCheck  {round, a: values checked, b: values exact}  (synthetic gradients)
//                     kPeerBegan {round}  a peer's DATA of this next round reached the follower
//                                         between rounds: the lead may begin it (as its own)
//
// Memory the messages name (the lead's contribution, a follower's result) is written before
// the message is enqueued and read after it is dequeued (the ring orders them), and neither
// is written again before the round ends at every engine.
//
// Capacity: a round sends at most one kLocal per worker chunk down and one kResult per WAN
// chunk up, and a follower consumes a round's messages before it reports it done, so rings
// sized for one round never fill; if one does anyway, the message is dropped and counted (the
// round then completes by its timeout rather than hanging).
#pragma once

#include <rte_ring.h>

#include <cstdint>
#include <string>

#include "dataplane/counters.h"

namespace sg::dp {

enum class LinkMsg : uint32_t { kBegin = 1, kLocal, kResult, kDone, kCheck, kPeerBegan };

struct EngineMsg {
  LinkMsg type{};
  uint32_t round = 0;
  uint64_t a = 0, b = 0, c = 0, d = 0;
};
static_assert(sizeof(EngineMsg) % 4 == 0, "rte_ring element size");

// One direction. push_st on the producer's lcore only, pop_st on the consumer's.
class MsgRing {
 public:
  MsgRing(const std::string& name, uint32_t min_capacity);
  ~MsgRing();
  MsgRing(const MsgRing&) = delete;
  MsgRing& operator=(const MsgRing&) = delete;
  bool ok() const { return ring_ != nullptr; }
  bool push_st(const EngineMsg& m);
  unsigned pop_st(EngineMsg* out, unsigned n);
  uint64_t dropped() const { return dropped_.get(); }

 private:
  rte_ring* ring_ = nullptr;
  Counter dropped_;
};

// Both directions between the lead and one follower.
struct EngineLink {
  EngineLink(const std::string& name, uint32_t down_capacity, uint32_t up_capacity)
      : down(name + "d", down_capacity), up(name + "u", up_capacity) {}
  bool ok() const { return down.ok() && up.ok(); }
  MsgRing down;  // lead -> follower
  MsgRing up;    // follower -> lead
};

}  // namespace sg::dp
