// Which path each DATA chunk to a peer takes. A peer has up to 8 path slots: its direct paths
// (config paths without `via`, each with its own UDP source port so WAN ECMP keeps them apart)
// and relayed ones (through another site's gateway). Each slot has a weight: the plan's split
// for the link (LinkSplit::direct_weight shared by the direct slots, Relay::weight by the slots
// through that relay), times an optional per-path factor from measurement.
//
// Modes:
//   kAdaptive  smooth weighted round robin over the slots whose in-flight bytes / weight is
//              within a slack (16 chunks) of the least loaded slot's: the plan's weights set
//              the shares while every path keeps up, and a path that drains slower than its
//              weight says accumulates in-flight data and is passed over until it catches up,
//              so it never holds the transfer back.
//   kWeighted  smooth weighted round robin by weight alone (the Wan's split for sites without one).
//   kEqual     round robin over the usable slots: the naive split, limited by the slowest path.
//
// Measured weights (on by default): every slot keeps its own delivery rate from the ACK clock
// (bytes that left the path per time, the maximum over the last kRateEpochs epochs of 4
// minimum RTTs), and once every slot of a peer the plan uses has one, a slot's weight is that
// rate instead of the plan's split. A slot whose share of the traffic is below what its path
// carries delivers only its share, so one slot at a time is given 25% more than its rate for
// an epoch (probing, as BBR's gain cycle): a path with room delivers more and its rate rises.
// Paths the plan gives no weight stay out.
//
// Standby relays (kAdaptive, on by default): a relayed slot the plan gives no weight is kept in
// reserve. When the slot the round robin picks is backlogged -- its smoothed RTT over twice its
// minimum and more in flight than twice its measured delivery rate times that minimum, i.e. a
// queue of a round trip has built up on it -- the chunk takes the least loaded standby relay
// that is not backlogged itself (before it has a rate, up to 16 chunks in flight). A direct path whose capacity drops mid-round
// (another tenant's traffic on the backbone) so sheds what it cannot carry onto the relay
// within round trips, long before the controller measures the drop and replans; while the
// direct path keeps up nothing is relayed (a relayed chunk crosses two links). A slot without
// a measured rate is never called backlogged.
//
// In-flight per slot: bytes sent minus bytes known to have left the path. The receiver's ACK
// echoes the path_id and send_ts of the DATA that triggered it; a path delivers in order, so
// everything sent on that slot up to that send_ts has arrived or is lost. Entries older than a
// few of the slot's RTTs expire (ACKs are coalesced and may name another slot for a while).
//
// DPDK-free: the gateway's dataplane (dataplane/ltp_tx.cpp) and the simulator (lib/sim/wan.cpp)
// run this same class. Owner: the engine that sends the job's DATA (one state machine);
// setup (add_path, set_plan) allocates, the rest does not. Counters are relaxed atomics
// readable from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <vector>

#include "common/clock.h"
#include "common/counter.h"
#include "topology/plan.h"
#include "wire/path_id.h"

namespace sg::spray {

enum class SprayMode : uint8_t { kAdaptive, kWeighted, kEqual };

struct SlotCounters {
  Counter chunks, bytes;
  Counter acks;     // ACKs that named this slot
  Counter expired;  // in-flight entries aged out without an ACK naming them
};

class Sprayer {
 public:
  static constexpr unsigned kMaxSlots = wire::pathid::kMaxSlots;
  static constexpr size_t kFlightRing = 1024;  // per slot: sends not yet covered by an ACK

  // Setup. `route` is the caller's handle (index into its route table); via == 0: direct.
  // Returns the slot, or -1 if the peer already has kMaxSlots paths.
  int add_path(uint16_t peer, int route, uint16_t via);
  // Weights from the plan (sites: plan index -> site id; self: this site's index). Links the
  // plan does not split send everything direct, shared equally. A relay the plan names but no
  // config path reaches gives its weight to the direct paths. Allocation-free.
  void set_plan(const topo::Plan& plan, const std::vector<uint16_t>& sites, int self);
  // A fixed factor for one slot on top of its weight (1.0 = none); 0 takes the slot out.
  void set_path_factor(uint16_t peer, unsigned slot, double factor);
  void set_mode(SprayMode m) { mode_ = m; }
  // Weights from each path's measured delivery rate (default) or from the plan alone.
  void set_measured_weights(bool on) { measured_ = on; }
  // Relays at all (topology.multipath; default on): off, the plan's relay splits are ignored
  // (set_plan after this) and no chunk takes a relay as overflow for a backlogged slot.
  void set_standby_relays(bool on) { standby_ = on; }
  bool standby_relays() const { return standby_; }
  static constexpr int kRateEpochs = 4;
  static constexpr double kProbeGain = 1.25;
  SprayMode mode() const { return mode_; }

  // Hot path (owner only). pick returns the slot for a chunk of `bytes` to `peer`, or -1 if
  // the peer has no paths (the caller falls back to its direct route).
  int pick_st(uint16_t peer, uint32_t bytes, Nanos now);
  void on_sent_st(uint16_t peer, unsigned slot, uint32_t bytes, Nanos send_ts);
  // An ACK from `peer` that echoes path_id's slot and the send_ts of the DATA it answers.
  void on_ack_st(uint16_t peer, uint16_t path_id, Nanos echo_ts, Nanos now);

  // Inspection (tests, telemetry).
  unsigned slots(uint16_t peer) const;
  int route(uint16_t peer, unsigned slot) const;
  uint16_t via(uint16_t peer, unsigned slot) const;
  double weight(uint16_t peer, unsigned slot) const;
  uint64_t inflight(uint16_t peer, unsigned slot) const;
  double delivery_rate(uint16_t peer, unsigned slot) const;  // bytes/s measured; 0: not yet
  const SlotCounters* counters(uint16_t peer, unsigned slot) const;
  uint64_t standby_chunks() const { return standby_chunks_.get(); }  // sent on a standby relay

 private:
  struct Flight {
    Nanos ts;
    uint64_t end;  // slot's cumulative bytes sent after this chunk
  };
  struct Slot {
    int route = -1;
    uint16_t via = 0;
    double plan_weight = 1, factor = 1, weight = 1;
    int64_t current = 0;  // smooth weighted round robin state (kWeighted)
    uint64_t sent = 0, done = 0;  // cumulative bytes: sent, and known delivered or lost
    Nanos srtt = 0;
    Nanos min_rtt = 0;  // the smallest RTT seen: the path's propagation, without its queue
    // Delivery rate: bytes that left the path since the mark, per time; max per epoch.
    uint64_t mark_done = 0;
    Nanos mark_t = -1;
    std::array<double, kRateEpochs> rate_max{};
    std::array<Flight, kFlightRing> ring{};
    size_t head = 0, len = 0;
    SlotCounters c;
  };
  struct Peer {
    uint16_t id = 0;
    unsigned count = 0;
    unsigned rr = 0;  // kEqual
    uint64_t epoch = 0;     // rate epochs so far (the probing slot is epoch % count)
    Nanos epoch_t = -1;
    std::array<Slot, kMaxSlots> slot;
  };
  Peer* find(uint16_t peer);
  const Peer* find(uint16_t peer) const;
  static void expire(Slot& s, Nanos now, Nanos peer_srtt);
  static void refresh(Slot& s) { s.weight = s.plan_weight * s.factor; }
  static double rate_of(const Slot& s);
  static bool backlogged(const Slot& s, uint32_t bytes);
  int standby_for(Peer& p, uint32_t bytes, Nanos now, Nanos peer_srtt);
  void sample_rate(Peer& p, Slot& s, Nanos now);
  void reweigh(Peer& p);

  std::deque<Peer> peers_;  // grows at setup only (a deque: slots hold atomics, never moved)
  SprayMode mode_ = SprayMode::kAdaptive;
  bool measured_ = true;
  bool standby_ = true;
  Counter standby_chunks_;
};

}  // namespace sg::spray
