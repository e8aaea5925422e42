// One site's part of a peer-to-peer round (SelMCast): every site keeps its own replica; each
// round it multicasts its update (its workers' mean) to the receivers the selection names for
// it, and mixes its own update with the updates it received into the round's result (the
// chunk-wise mean over its own update and every received copy of the chunk). What the vector
// is -- gradients, or parameters after a local step (gossip averaging) -- is the workers' call.
//
// Transfers. One LTP transfer per (sender, receiver, round): job, round, shard 0, policy
// version 0, f32 chunks of chunk_bytes, with Early Close and Bubble Filling at the receiver as
// in all-reduce (a chunk that never arrived is mixed over the copies that did). The
// selection is not on the wire: the owner installs the one every site agreed on (the policy
// protocol) between rounds, and a receiver mixes whatever update reaches it.
//
// Synchrony (staleness s, 0 = BSP):
//   done      round r ends once every transfer this site sent in r has ended (acked, closed,
//             given up) and, from every site the selection says sends here, an update of a
//             round >= r - s has ended here (BSP: round r's own). round_timeout ends it with
//             what arrived (counted).
//   mixing    at the end of round r the result is own update + every received update of a
//             round <= r not mixed before (chunk by chunk: a chunk still arriving is mixed
//             at the next round's end, if it is not stale by then). Updates of later rounds
//             (faster peers) wait in their own slot.
//   stale     an update chunk of a round < (last mixed round + 1) - s arrives too late to be
//             used: dropped and counted (stats().stale_chunks); the receiver closes such
//             transfers as stale, so their senders stop.
//   window    the receiver accepts rounds [r + 1 - s, r + 1 - s + 2s + 1] after mixing r, so
//             a peer may run up to s + 1 rounds ahead before its sends wait; 2s + 2 slots of
//             model size hold the updates of those rounds.
//
// Time is passed in; packets come in as LTP messages and leave through an ltp::PacketSink.
// Owner: one engine. Memory is sized in the constructor and set_selection (between rounds);
// the packet path allocates nothing. A send abandoned at a round timeout, or to a peer that
// restarted, gets a fresh sender: the only allocations after set_selection, and only on failure.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "aggregate/accumulator.h"
#include "common/rng.h"
#include "ltp/delivery_rate_controller.h"
#include "ltp/receiver.h"
#include "ltp/sender.h"
#include "sync/site_sync.h"  // SampleSink
#include "topology/selmcast.h"

namespace sg::sync {

struct PeerSyncConfig {
  uint32_t job = 1;
  uint16_t self_node = 0;             // this gateway's site id (LTP node id)
  std::vector<uint16_t> site_nodes;   // site index -> site id; must contain self_node
  uint64_t model_floats = 0;
  uint32_t chunk_bytes = 1400;        // multiple of 4
  uint32_t staleness = 0;             // 0: BSP; s > 0: SSP with bound s
  ltp::ReceiverConfig receiver;       // local_node, max_chunks, rounds_ahead set here
  ltp::SenderConfig sender;           // nodes and max_chunks set per receiver
  ltp::DeliveryRateConfig rate;
  Nanos round_timeout = 30 * kSecond;
  uint64_t seed = 1;
};

enum class PeerSyncError : uint8_t {
  kOk = 0,
  kSelf,        // self_node not in site_nodes, or more than kMaxPeerSites sites
  kChunkBytes,  // 0, not a multiple of 4, or > 9000
  kModel,       // 0 floats or more than 2^24 chunks
  kStaleness,   // above kMaxStaleness
};

inline constexpr uint32_t kMaxStaleness = 16;
inline constexpr size_t kMaxPeerSites = 1024;

struct PeerSyncStats {
  uint64_t rounds = 0;
  uint64_t updates_sent = 0;       // transfers started
  uint64_t updates_mixed = 0;      // received updates (transfers) that ended here and were mixed
  uint64_t chunks_mixed = 0;       // received chunks mixed into results
  uint64_t stale_updates = 0;      // updates that came too late for the staleness bound (refused)
  uint64_t stale_chunks = 0;       // chunks of them already held when the bound passed: dropped
  uint64_t bubbles = 0;            // received chunks that never arrived (Early Close, timeout)
  uint64_t early_closes = 0;
  uint64_t timeouts = 0;           // rounds ended by round_timeout
  uint64_t sends_abandoned = 0;    // sends still running at a timeout, replaced next round
  uint64_t bad_chunks = 0;         // wrong shard, size or sender: ignored
  uint64_t retransmits = 0;
  uint64_t bytes_sent = 0;
  uint64_t peer_restarts = 0;      // a peer came back as a new process mid-round (peer_restarted)
};

class PeerSync final : private ltp::ReceiverSink {
 public:
  explicit PeerSync(const PeerSyncConfig& cfg);
  ~PeerSync() override;

  PeerSyncError error() const { return error_; }
  bool ok() const { return error_ == PeerSyncError::kOk; }

  // receivers[i]: the site indices site i sends to (the agreed selection). Takes effect at
  // the next begin_round; false (nothing changed) while a round runs or if it is malformed
  // (wrong size, a self or out-of-range receiver, a duplicate).
  bool set_selection(const topo::Selection& receivers);

  // Starts `round` with this site's update (model_floats values, valid until round_done()).
  // Rounds only go up. False if a round runs, no selection, or the size is wrong.
  bool begin_round(uint32_t round, std::span<const float> update, Nanos now, ltp::PacketSink& tx);
  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx);
  Nanos poll(Nanos now, ltp::PacketSink& tx);
  // Site index `peer` is a new process (its control channel started over): what the old one
  // had not delivered of its update for the running round is given up, and our update goes
  // to the new one again, whole (see the .cpp). The gateway calls it when its control plane
  // sees the restart.
  void peer_restarted(int peer, Nanos now, ltp::PacketSink& tx);

  // Between rounds (a config reload): the timeout of the rounds begun from now on.
  void set_round_timeout(Nanos t) { cfg_.round_timeout = t; }
  bool running() const { return running_; }
  bool round_done() const { return done_; }
  uint32_t round() const { return round_; }
  // The round's mix, valid once round_done() and until the next begin_round.
  std::span<const float> result() const { return {result_.data(), result_.size()}; }
  // Received updates mixed into the last result (whole or in part): its p.
  uint32_t last_mixed() const { return last_mixed_; }
  // Per site index: some of its update went into the last result.
  std::span<const uint8_t> mixed_from() const { return mixed_from_; }
  Nanos round_started() const { return started_; }
  Nanos round_finished() const { return finished_; }
  const PeerSyncStats& stats() const { return stats_; }
  // Per DATA arrival, for the passive throughput estimator (as SiteSync).
  void set_sample_sink(SampleSink* s) { samples_ = s; }
  const ltp::Receiver& receiver() const { return *receiver_; }
  uint32_t chunk_count() const { return chunks_; }
  // Delivery rate the send to site `peer` measured (bytes/s; 0 before its first ACKs): what
  // this site observes of its links, for the selection.
  double measured_rate(int peer) const;
  // Smallest RTT the send to site `peer` saw (0 before its first ACK).
  Nanos measured_rtt(int peer) const;

 private:
  struct Out;
  struct Slot {
    std::unique_ptr<agg::Accumulator> acc;
    uint32_t round = 0;
    bool used = false;
  };

  int index_of(uint16_t node) const;
  Slot* slot_for(uint32_t round, size_t& k);
  void clear_slot(size_t k);
  void raise_floor(uint32_t floor, Nanos now, ltp::PacketSink& tx);
  bool sends_done() const;
  void check_done(Nanos now, ltp::PacketSink& tx);
  void abandon_sends();
  void start_send(int r, Nanos now, ltp::PacketSink& tx);
  void new_sender(int r);
  void count_sends(Out& o);
  void on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) override;
  void on_bubble(const ltp::ChunkRef& c, ltp::FillRule rule) override;
  void on_transfer_end(const ltp::TransferSummary& s) override;
  void on_sample(const ltp::ArrivalSample& s) override {
    if (samples_) samples_->on_sample(s);
  }
  bool inputs_ready() const;
  void finish(Nanos now, ltp::PacketSink& tx);

  PeerSyncConfig cfg_;
  PeerSyncError error_ = PeerSyncError::kOk;
  int self_ = -1;
  uint32_t chunks_ = 0;
  topo::Selection sel_;
  std::vector<int> senders_;              // sites that send here under the selection
  std::vector<std::unique_ptr<Out>> outs_;  // per site index (self unused)
  std::unique_ptr<ltp::Receiver> receiver_;
  std::vector<Slot> slots_;               // 2s + 2: updates per round of the window
  std::vector<uint8_t> slot_from_;        // [slot * sites + site]: the slot holds chunks of that site
  std::vector<uint32_t> counts_;          // per chunk: copies in the mix being made
  std::vector<uint32_t> ended_;           // per site: newest round whose update to us ended (+1; 0 none)
  std::vector<uint32_t> stale_round_;     // per site: last stale update counted (+1)
  std::vector<uint8_t> mixed_from_;       // per site: an update of it was mixed this round
  std::vector<float> result_;
  std::span<const float> update_;
  Rng rng_;
  SampleSink* samples_ = nullptr;
  PeerSyncStats stats_;
  uint32_t round_ = 0;
  uint32_t floor_ = 0;          // oldest round whose updates are still usable
  uint32_t last_mixed_ = 0;
  bool running_ = false, done_ = false;
  Nanos started_ = 0, finished_ = 0;
};

}  // namespace sg::sync
