// One site's part of a gradient all-reduce round over the WAN: the state machine every
// gateway engine runs (and the simulator runs unchanged for many sites).
//
// For each shard of the policy's Plan, a tree names a root and each site's parent. Work is
// chunk by chunk, so a shard streams through the tree instead of being stored and forwarded
// whole at every hop (a tree of depth d costs ~one shard time plus d chunk times, not d shard
// times):
//   up    a site adds its children's chunks to its own (SIMD, straight from the packet
//         payload); chunk c goes on to the parent as soon as every child's copy of c arrived
//         (or was given up: Early Close, bubble), on a streaming LTP transfer started at the
//         round's beginning (ltp::TransferSpec::streaming);
//   root  turns each complete chunk into the mean and sends it down at once;
//   down  a site takes its parent's chunk as the round's result and forwards it to its
//         children as it arrives.
// The round is done at this site when every shard has its result and every transfer it
// sent has ended. Shards are independent, so different shards pipeline too.
//
// Compression on the wire (NetSenseML). set_link_codec() names the codec for a link (the
// owner decides it per round from the link's measurements). Going up, each sender encodes
// its partial sum with error feedback (per-link residual: what the codec dropped is added to
// the next round's). Going down, every site must end with the same model update, so the root
// alone encodes each mean chunk (with its own residual), takes the decoded value as its own
// result, and every site below forwards the root's bytes unchanged. The down codec is the
// strongest of the root's links to its children in that shard, and never top-k (a sparse
// mean would move most weights by nothing; the fixed-size codecs keep every coordinate).
//
// Packing. Compressed chunks are small: each DATA packs as many consecutive chunks as fit
// chunk_bytes of payload (int8: three at 1344), a function of codec and chunk size only, so
// sender and receiver agree; a lost packet is a bubble of every chunk it carried.
//
// Holes. A chunk nobody below contributed to (this site's own part absent -- its workers'
// copies never came -- and every child's a bubble) goes up as a hole (wire DataHeader::holes)
// and adds nothing at the parent, instead of zeros counted as contributions.
//
// Bubbles. A chunk that did not arrive going up contributes nothing and its contributor
// count says so; before forwarding, a chunk is rescaled to the full count of the subtree
// (sum * expected / present), so the root's mean is the mean of the contributions that
// arrived, never biased towards zero. Going down, a result transfer is taken whole (no Early
// Close unless down_early_close), so every site applies the same mean; a chunk that still
// never comes (the parent's round timed out, or it died) is filled by `down_fill` (default:
// this site's own gradient, so training still steps) and forwarded as filled.
//
// Dead peers. A round that has not finished `round_timeout` after it began is completed
// with what arrived: missing up-chunks count as absent contributors, missing down-chunks
// are filled like bubbles. Counted in stats().timeouts. A peer seen running a later round
// (its DATA, or its CLOSE kStale for ours) will send nothing more for this one: what it has
// not delivered is given up at once (stats().peers_moved_on), so sites that fell out of
// phase meet again in the next round instead of timing out round after round.
//
// Time is passed in; packets come in as LTP messages (byte spans) and leave through an
// ltp::PacketSink. Owner: one engine. Memory is sized in set_plan / set_link_codec
// (control time, at a round boundary), never on the packet path.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "aggregate/accumulator.h"
#include "compress/encoder.h"
#include "common/rng.h"
#include "ltp/receiver.h"
#include "ltp/sender.h"
#include "ltp/delivery_rate_controller.h"
#include "ltp/link_share.h"
#include "ltp/tcp_cc.h"
#include "topology/plan.h"

namespace sg::sync {

struct SyncConfig {
  uint32_t job = 1;
  uint16_t self_node = 0;              // this gateway's site id (the LTP node id)
  std::vector<uint16_t> site_nodes;    // plan site index -> site id; must contain self_node
  uint32_t chunk_bytes = 1400;         // multiple of 4
  ltp::ReceiverConfig receiver;        // local_node and max_chunks are set by SiteSync
  ltp::SenderConfig sender;            // paths, bursts; nodes and max_chunks set per sender
  bool reliable_baseline = false;      // TCP-like controller and no Early Close: the baseline
  ltp::TcpCc reliable_cc = ltp::TcpCc::kNewReno;  // ... its congestion control
  ltp::DeliveryRateConfig rate;        // LTP's rate controller (every sender's)
  ltp::FillRule down_fill = ltp::FillRule::kLocal;
  // Early Close on the result's way down (transport.early_close.down). Off: a site takes its
  // parent's result transfer only whole, so every site applies the same mean; a chunk given
  // up going down would leave this site's replica with down_fill's values for it, and the
  // replicas would drift apart from round to round.
  bool down_early_close = false;
  Nanos round_timeout = 30 * kSecond;
  // This site may compress (set_link_codec) and forwards the root's compressed bytes as they
  // came. Off: no encode buffers (they cost up to one model size); compressed chunks from a
  // parent are then forwarded decoded, as f32, which every child decodes to the same values.
  bool wire_compression = false;
  float topk_ratio = 0.01f;  // for top-k links named by the plan's codecs
  uint64_t seed = 1;
  // Several engines of one gateway split the shards: this one runs shard s only where
  // s % shard_engines == shard_engine (the others' traffic is steered to them); the round is
  // done here when its own shards are. 1: every shard.
  uint32_t shard_engine = 0;
  uint32_t shard_engines = 1;
  // Several jobs on one engine share the WAN by weight: link_shares[i] (plan site index i;
  // null: none) is the engine's shared congestion state toward that site (ltp/link_share.h),
  // owned by the gateway, used by every job's senders on this engine. This job's senders to
  // a site form one group of `weight` (1..16) and split it among those with something to
  // send, so the job draws its weight whatever its shard count. Empty: see share_links.
  std::vector<ltp::LinkShare*> link_shares;
  // Without link_shares given, SiteSync may keep its own, one per peer: every shard's sender
  // toward a peer then draws on one congestion state for that link instead of each running
  // its own controller against the others (what transport.link_share: on does in a gateway,
  // for simulations and tests without one). false: every sender its own controller. Never
  // for the reliable baseline.
  bool share_links = false;
  uint32_t weight = 1;
  // DATA of the next round that arrives before this site begins it (a peer whose round ended
  // sooner began the next at once) is held, up to this many packets (and one model's worth),
  // and replayed when the round begins here. Dropped, each would cost the peer a resend about
  // a round trip later. Allocated by set_plan; 0: dropped.
  uint32_t early_hold_packets = 16384;
};

struct SyncStats {
  uint64_t rounds = 0;
  uint64_t up_bubbles = 0;       // chunks that never arrived from a child
  uint64_t down_bubbles = 0;     // chunks that never arrived from the parent
  uint64_t early_closes = 0;     // transfers we received that closed early
  uint64_t fallbacks = 0;        // transfers that crossed the loss bound
  uint64_t timeouts = 0;         // rounds completed by round_timeout
  uint64_t peers_moved_on = 0;   // a peer ran a later round: what it had not sent was given up
  uint64_t peer_restarts = 0;    // a peer came back as a new process mid-round: given up for the round
  uint64_t bad_chunks = 0;       // chunk for an unexpected shard/source/size: ignored
  uint64_t stray_acks = 0;       // ACK/CLOSE for no running transfer of ours
  uint64_t bytes_sent = 0;       // LTP DATA payload bytes, first sends and retransmits
  uint64_t retransmits = 0;
  uint64_t rto_expiries = 0;    // our transfers' retransmission timeouts (all in flight presumed lost)
  uint64_t early_data = 0;       // peer DATA of a round this site had not begun
  uint64_t early_held = 0;       // ... of it held and replayed when the round began (the rest dropped, resent)
  uint64_t early_acked = 0;      // ... of it acknowledged on arrival (its senders need not resend it)
  uint64_t encoded_chunks = 0;   // chunks sent compressed (up: per link; down: at the root)
};

// Each piece of the round's result as soon as it is final here (arrived from the parent,
// computed at the root, or filled), so that the gateway can stream it on to its workers.
// Called from inside begin_round / local_ready / on_packet / poll; every float of the
// result is named exactly once per round.
class ResultSink {
 public:
  virtual ~ResultSink() = default;
  virtual void on_result(size_t first, size_t count) = 0;
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
  // (sites, chunk size); false with nothing changed if it does not fit. Allocates. With
  // wire_compression, every link from this site takes the plan's codec (f32 where the plan
  // names none; set_link_codec overrides until the next plan); without, f32 everywhere
  // (always decodable, so sites may differ in this setting). A plan with the same trees
  // (topo::same_trees: a codec switch) keeps the senders, their rate controllers and the
  // receiver; the error-feedback residuals outlive every plan.
  bool set_plan(const topo::Plan& plan, uint32_t policy_version);

  // The codec for DATA this site sends to plan site `peer` from the next begin_round on
  // (kF32: none; anything else needs SyncConfig::wire_compression). top-k keeps
  // `topk_ratio` of each chunk's values. Allocates the encode
  // buffers and the error-feedback residuals the first time a link compresses. False if
  // peer or ratio is out of range.
  bool set_link_codec(int peer, CodecId codec, float topk_ratio = 0.01f);
  CodecId link_codec(int peer) const { return peer >= 0 && peer < static_cast<int>(links_.size()) ? links_[peer].codec : CodecId::kF32; }

  // Starts `round` with this site's contribution (`local` must hold plan.model_bytes / 4
  // floats and stay valid until round_done()). False if a round is still running or no plan.
  // local_streaming: `local` is still being filled (the site's workers are pushing); only
  // the parts named by local_ready() are read, each chunk as soon as it is complete, and a
  // chunk whose local part never comes is completed without it by the round timeout.
  bool begin_round(uint32_t round, std::span<const float> local, Nanos now, ltp::PacketSink& tx,
                   bool local_streaming = false);
  // Floats [first, first + count) of the running round's `local` are final. Each float is
  // named at most once per round (repeats are ignored only where a whole chunk was counted).
  // present false: this site has nothing there (none of its workers' copies arrived); a
  // chunk with any such part contributes nothing, and a chunk nobody below contributed to
  // goes up as a hole (kFlagHole), so means stay over what arrived.
  void local_ready(size_t first, size_t count, Nanos now, ltp::PacketSink& tx, bool present = true);

  // An LTP message addressed to this site's job (the UDP payload). DATA goes to the
  // receiver; ACK, CLOSE and REJECT to the sender they answer.
  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx);

  // Timers of every transfer, phase progress, round timeout. Returns the next time it wants
  // to run (ltp::kNever when idle).
  Nanos poll(Nanos now, ltp::PacketSink& tx);

  bool running() const { return running_; }
  // Senders to plan site `peer` draw from a shared link state (SyncConfig::link_shares).
  bool shared(int peer) const {
    return peer >= 0 && static_cast<size_t>(peer) < cfg_.link_shares.size() && cfg_.link_shares[peer] != nullptr;
  }
  bool round_done() const { return done_; }
  // Between rounds: a peer site sent DATA of `round` (the next one), so it has begun it. Its
  // DATA is dropped until this site begins the round too (the sender resends), so a gateway
  // whose workers stream their update in begins at once rather than at their first push.
  bool peer_began(uint32_t round) const { return !running_ && peer_began_ == round && round == round_ + 1; }
  // Plan site `peer` is a new process (its control channel started over): the old one's part
  // of the running round is given up and our sends to it dropped (see the .cpp). The
  // gateway calls it when its control plane sees the restart.
  void peer_restarted(int peer, Nanos now, ltp::PacketSink& tx);
  size_t early_held_now() const { return hold_n_; }  // DATA of the next round held (tests)
  // Between rounds (a config reload): the timeout of the rounds begun from now on.
  void set_round_timeout(Nanos t) { cfg_.round_timeout = t; }
  uint32_t round() const { return round_; }
  uint32_t policy_version() const { return policy_; }
  Nanos round_started() const { return started_; }
  Nanos round_finished() const { return finished_; }
  // The round's result (the mean over sites), valid once round_done().
  std::span<const float> result() const { return {result_.data(), result_.size()}; }

  void set_sample_sink(SampleSink* s) { samples_ = s; }
  void set_result_sink(ResultSink* s) { results_ = s; }
  const SyncStats& stats() const { return stats_; }
  const ltp::Receiver& receiver() const { return *receiver_; }
  const topo::Plan& plan() const { return plan_; }

 private:
  struct Out;    // one sending slot (sender + its rate controller)
  struct Shard;  // per-shard round state

  int index_of(uint16_t node) const;
  void on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) override;
  uint32_t pack_of(const Shard& sh, CodecId codec, uint32_t chunk_count) const;
  void on_part(int s, int src, uint32_t a, CodecId codec, uint16_t contributors, bool hole,
               std::span<const uint8_t> payload);
  void on_bubble(const ltp::ChunkRef& c, ltp::FillRule rule) override;
  void on_transfer_end(const ltp::TransferSummary& s) override;
  void on_sample(const ltp::ArrivalSample& s) override;
  bool early_close_allowed(const ltp::TransferKey& k) const override;
  void peer_moved_on(int p, ltp::PacketSink& tx);
  void abandon_out(Out& o);  // a fresh, unstarted sender in its place

  struct Link {
    CodecId codec = CodecId::kF32;
    float topk_ratio = 0.01f;
  };

  void apply_codecs();  // links_ from plan_.codecs (wire_compression only)
  void size_buffers();
  bool start_out(int oi, CodecId codec, std::span<const uint8_t> data, uint32_t chunk_size, uint16_t contributors,
                 Nanos now, uint32_t pack);
  void start_down(int s, CodecId codec, Nanos now);
  void release(int oi, uint32_t c, bool hole = false);
  void try_up(int s, uint32_t c);
  void up_chunk_ready(int s, uint32_t c);
  void down_chunk_ready(int s, uint32_t c);
  void fill_down(int s, uint32_t c);
  void up_complete(int s, bool without_local);
  void down_complete(int s);
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
  // SyncConfig::share_links without shares given: ours, per plan site, made when a plan
  // first sends there (declared before outs_: the shares outlive their senders).
  bool own_shares_ = false;
  std::vector<std::unique_ptr<ltp::LinkShare>> own_link_shares_;
  std::vector<std::unique_ptr<Out>> outs_;
  std::vector<float> result_;
  // Error feedback, model-wide (see size_buffers): what this site's up codecs held back, and
  // as a root what its down codec held back of the means. Empty until a link compresses.
  std::vector<float> up_residual_, down_residual_;
  std::vector<Link> links_;        // per plan site: codec of DATA we send there
  std::vector<uint8_t> moved_on_;  // per plan site: seen running a later round (this round)
  compress::Encoder encoder_;
  std::vector<int> dirty_;         // outs with newly released chunks, polled in advance()
  std::span<const float> local_;
  Rng rng_;
  SampleSink* samples_ = nullptr;
  ResultSink* results_ = nullptr;
  SyncStats stats_;
  uint32_t round_ = 0;
  uint32_t peer_began_ = 0;
  // Early DATA held for the next round (SyncConfig::early_hold_packets): hold_n_ messages of
  // up to hold_slot_ bytes each, all of round hold_round_.
  bool hold_early(std::span<const uint8_t> msg);
  void replay_held(uint32_t round, Nanos now, ltp::PacketSink& tx);
  std::vector<uint8_t> hold_;
  std::vector<uint16_t> hold_len_;
  std::vector<Nanos> hold_at_;  // arrival times: the replay moves the DATA's stamps by the hold
  size_t hold_slot_ = 0, hold_cap_ = 0, hold_n_ = 0;
  uint32_t hold_round_ = 0;
  bool replaying_ = false;  // arrival samples of held DATA would carry the replay's time  // round + 1 once a peer's DATA of it arrived between rounds
  bool running_ = false;
  bool done_ = false;
  Nanos started_ = 0, finished_ = 0;
  Nanos now_ = 0;                  // time of the call in progress (for sink callbacks)
  std::vector<int> pending_up_, pending_down_;  // phase completions found inside sink callbacks
};

}  // namespace sg::sync
