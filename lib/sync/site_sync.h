// One site's part of a gradient all-reduce round over the WAN: the state machine every
// gateway engine runs (and the simulator runs unchanged for many sites).
//
// For each shard of the policy's Plan, a tree names a root and each site's parent:
//   up    a site adds its children's chunks to its own (SIMD, straight from the packet
//         payload) and, once every child's transfer has ended (complete or Early Close),
//         sends the shard's sum to its parent over LTP;
//   root  the root turns the sum into the mean and sends it down;
//   down  a site takes its parent's mean as the round's result and forwards it to its
//         children.
// The round is done at this site when every shard has its result and every transfer it
// sent has ended. Shards are independent, so different shards pipeline through the tree.
//
// Bubbles. A chunk that did not arrive going up contributes nothing and its contributor
// count says so; before forwarding, a shard's chunks are rescaled to the full count of the
// subtree (sum * expected / present), so the root's mean is the mean of the contributions
// that arrived, never biased towards zero. A chunk missing going down is filled by
// `down_fill` (default: this site's own gradient, so training still steps).
//
// Dead peers. A round that has not finished `round_timeout` after it began is completed
// with what arrived: missing up-transfers count as absent contributors, missing down-
// transfers are filled like bubbles. Counted in stats().timeouts.
//
// Time is passed in; packets come in as LTP messages (byte spans) and leave through an
// ltp::PacketSink. Owner: one engine. Memory is sized in set_plan (control time), never on
// the packet path.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "aggregate/accumulator.h"
#include "common/rng.h"
#include "ltp/receiver.h"
#include "ltp/sender.h"
#include "topology/plan.h"

namespace sg::sync {

struct SyncConfig {
  uint32_t job = 1;
  uint16_t self_node = 0;              // this gateway's site id (the LTP node id)
  std::vector<uint16_t> site_nodes;    // plan site index -> site id; must contain self_node
  uint32_t chunk_bytes = 1400;         // multiple of 4
  ltp::ReceiverConfig receiver;        // local_node and max_chunks are set by SiteSync
  ltp::SenderConfig sender;            // paths, bursts; nodes and max_chunks set per sender
  bool reliable_baseline = false;      // AIMD controller and no Early Close: the TCP-like baseline
  ltp::FillRule down_fill = ltp::FillRule::kLocal;
  Nanos round_timeout = 30 * kSecond;
  uint64_t seed = 1;
};

struct SyncStats {
  uint64_t rounds = 0;
  uint64_t up_bubbles = 0;       // chunks that never arrived from a child
  uint64_t down_bubbles = 0;     // chunks that never arrived from the parent
  uint64_t early_closes = 0;     // transfers we received that closed early
  uint64_t fallbacks = 0;        // transfers that crossed the loss bound
  uint64_t timeouts = 0;         // rounds completed by round_timeout
  uint64_t bad_chunks = 0;       // chunk for an unexpected shard/source/size: ignored
  uint64_t stray_acks = 0;       // ACK/CLOSE for no running transfer of ours
  uint64_t bytes_sent = 0;       // LTP DATA payload bytes, first sends and retransmits
  uint64_t retransmits = 0;
};

// Per DATA arrival, for the passive throughput estimator (control thread, lib/measure).
class SampleSink {
 public:
  virtual ~SampleSink() = default;
  virtual void on_sample(const ltp::ArrivalSample& s) = 0;
};

class SiteSync final : private ltp::ReceiverSink {
 public:
  explicit SiteSync(const SyncConfig& cfg);
  ~SiteSync() override;

  // Installs the plan used from the next begin_round on. Validates it against the config
  // (sites, chunk size); false with nothing changed if it does not fit. Allocates.
  bool set_plan(const topo::Plan& plan, uint32_t policy_version);

  // Starts `round` with this site's contribution (`local` must hold plan.model_bytes / 4
  // floats and stay valid until round_done()). False if a round is still running or no plan.
  bool begin_round(uint32_t round, std::span<const float> local, Nanos now, ltp::PacketSink& tx);

  // An LTP message addressed to this site's job (the UDP payload). DATA goes to the
  // receiver; ACK, CLOSE and REJECT to the sender they answer.
  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx);

  // Timers of every transfer, phase progress, round timeout. Returns the next time it wants
  // to run (ltp::kNever when idle).
  Nanos poll(Nanos now, ltp::PacketSink& tx);

  bool running() const { return running_; }
  bool round_done() const { return done_; }
  uint32_t round() const { return round_; }
  uint32_t policy_version() const { return policy_; }
  Nanos round_started() const { return started_; }
  Nanos round_finished() const { return finished_; }
  // The round's result (the mean over sites), valid once round_done().
  std::span<const float> result() const { return {result_.data(), result_.size()}; }

  void set_sample_sink(SampleSink* s) { samples_ = s; }
  const SyncStats& stats() const { return stats_; }
  const ltp::Receiver& receiver() const { return *receiver_; }
  const topo::Plan& plan() const { return plan_; }

 private:
  struct Out;    // one sending slot (sender + its rate controller)
  struct Shard;  // per-shard round state

  int index_of(uint16_t node) const;
  void on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) override;
  void on_bubble(const ltp::ChunkRef& c, ltp::FillRule rule) override;
  void on_transfer_end(const ltp::TransferSummary& s) override;
  void on_sample(const ltp::ArrivalSample& s) override;

  void up_complete(int s, Nanos now, ltp::PacketSink& tx);
  void down_complete(int s, Nanos now, ltp::PacketSink& tx);
  void send(int s, int peer_index, std::span<const float> data, uint16_t contributors, Nanos now,
            ltp::PacketSink& tx);
  void advance(Nanos now, ltp::PacketSink& tx);
  void finish_round_if_done(Nanos now);
  std::span<float> result_range(int s);

  SyncConfig cfg_;
  int self_ = -1;
  topo::Plan plan_;
  uint32_t policy_ = 0;
  bool have_plan_ = false;
  std::unique_ptr<ltp::Receiver> receiver_;
  std::vector<Shard> shards_;
  std::vector<std::unique_ptr<Out>> outs_;
  std::vector<float> result_;
  std::span<const float> local_;
  Rng rng_;
  SampleSink* samples_ = nullptr;
  SyncStats stats_;
  uint32_t round_ = 0;
  bool running_ = false;
  bool done_ = false;
  Nanos started_ = 0, finished_ = 0;
  Nanos now_ = 0;                  // time of the call in progress (for sink callbacks)
  std::vector<int> pending_up_, pending_down_;  // phase completions found inside sink callbacks
};

}  // namespace sg::sync
