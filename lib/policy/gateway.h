// The policy consistency protocol as a pure state machine (one per gateway; time passed
// in; messages in and out as structs, serialised by messages.h).
//
// A policy is a version plus a topo::Plan (trees, shard map, multipath split, codecs). One
// gateway is the coordinator (the one whose control thread plans); the others are members.
//
// Switching from version k to k+1 (two-phase, with the switch round as the barrier):
//   1. propose(): the coordinator picks switch round R = (highest round it has heard of)
//      + switch_margin and sends PROPOSE(k+1, attempt, R, plan) to every member.
//   2. A member that has not begun round R (and is not mid-way through another switch)
//      stores the proposal and answers PREPARED ok. From then on it will not begin round
//      R or later until it knows the decision. Otherwise it answers PREPARED refused.
//   3. The coordinator commits once every member promised, aborts on any refusal, and
//      resends the DECIDE until every member acknowledged it. An aborted switch is proposed
//      again automatically, with a later round. When a member refused because it had already
//      begun the switch round, the margin doubles (up to kMaxMargin rounds), so members
//      running ahead of what the coordinator has heard cannot starve it; a member that refused
//      while still before that round (it has yet to reach the previous committed switch) is
//      simply asked again with the same margin.
//   4. A gateway beginning round r >= R uses k+1 if committed, waits if undecided.
// Hence no round runs under two policies: R is only begun by anyone once everyone promised
// (commit) and all know it; a lost, duplicated or reordered message only delays. Every
// wait is bounded by retransmission (retry_interval) once messages get through.
//
// Restarts. A gateway starts unsynced and begins no round until it knows the state:
//   * a member asks the coordinator (STATE_REQUEST with a fresh nonce per incarnation) and
//     adopts only the reply carrying that nonce (generated after the restart, so it includes
//     any proposal the old incarnation had promised). It promises a proposal found there only
//     if its switch round is after the round the site's workers are in (resume_round): the
//     old incarnation may have begun that round under the old policy;
//   * a restarted coordinator asks every member and waits for all: the newest committed
//     policy anyone knows wins; an undecided proposal is committed iff every member reports
//     it prepared (the old coordinator may have committed it), else aborted (it cannot have
//     been committed). If nobody is synced (whole cluster restarted) the bootstrap policy
//     (version 0) is installed from the round after every member's resume round; the
//     dataplane abandons rounds before a policy's first round (may_begin never allows them).
// Attempt ids carry the coordinator's incarnation in their high half, so a restarted
// coordinator never reuses an id a message of its predecessor may still carry, and it
// answers a promise for a predecessor's attempt it did not recover as committed with abort
// (that attempt can no longer commit: its coordinator is gone).
// A member still holding an undecided proposal for a version the coordinator already runs
// is told it committed: it can only hold the attempt that committed (a newer attempt
// replaces an older one, and no attempt follows a commit).
// The coordinator itself never fails over; electing another one is not part of this layer.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/clock.h"
#include "policy/messages.h"

namespace sg::policy {

inline constexpr Round kMaxMargin = 64;  // the farthest a retried switch is pushed out

struct GatewayConfig {
  uint16_t self = 0;
  uint16_t coordinator = 0;
  uint16_t gateways = 0;           // ids 0..gateways-1
  Nanos retry_interval = 50 * kMilli;
  Round switch_margin = 3;         // rounds between proposal and switch
};

struct Gate {
  bool go = false;       // false: wait (unsynced or switch undecided)
  Version version = 0;   // the policy round r runs under, if go
};

class Gateway {
 public:
  // A gateway of a freshly started cluster: synced, running `bootstrap` (version 0) from round 0.
  static Gateway fresh(const GatewayConfig& cfg, std::vector<uint8_t> bootstrap_plan);
  // A gateway that (re)started while the cluster runs: unsynced until it learns the state.
  // `incarnation` must differ between restarts of the same gateway (e.g. a boot counter).
  // `resume_round` is the round its workers are in (kNoRound if none): the previous
  // incarnation may have begun it but no later one, so no switch at or before it is promised.
  static Gateway restarted(const GatewayConfig& cfg, uint64_t incarnation, std::vector<uint8_t> bootstrap_plan,
                           Round resume_round);

  // Coordinator only. Starts a switch to `plan` (topo::encode()d; checked). False if not
  // the coordinator, not synced, a switch is under way or the plan does not decode.
  bool propose(std::vector<uint8_t> plan, Nanos now);

  void on_message(const Message& m, Nanos now);
  void on_bytes(std::span<const uint8_t> bytes, Nanos now);  // decode + on_message; bad input counted
  void tick(Nanos now);                                      // retransmissions
  std::vector<Message> take_outbox();                        // messages to send, in order

  Gate may_begin(Round r) const;
  // Marks round r begun and returns the policy it runs under (switching if r reaches a
  // committed switch round), or nullptr if it may not begin yet. Idempotent per round.
  const PolicyRecord* begin_round(Round r);

  bool synced() const { return s_.synced; }
  // The highest round this gateway knows anyone began (its own, and what the state it
  // adopted or the reports it recovered from said): where a restarted site rejoins.
  Round cluster_round() const { return max_round_seen_; }
  // The lowest round may_begin() can allow (kNoRound while unsynced): earlier rounds are
  // abandoned, no policy covers them.
  Round first_round() const {
    if (!s_.synced || !s_.active) return kNoRound;
    return s_.prev ? s_.prev->from_round : s_.active->from_round;
  }
  bool is_coordinator() const { return cfg_.self == cfg_.coordinator; }
  const Snapshot& state() const { return s_; }
  Version active_version() const { return s_.active ? s_.active->version : 0; }
  bool switch_in_progress() const;  // coordinator: a proposal or its decision still outstanding
  uint64_t bad_messages() const { return bad_; }
  // Coordinator: switch attempts aborted (a member refused, or recovery could not finish
  // one), each retried; and of those, the ones whose retry was pushed out (a member was, or
  // may have been, past the switch round).
  uint64_t aborts() const { return aborts_; }
  uint64_t aborts_later() const { return aborts_later_; }

 private:
  friend class GatewayPeer;  // tests: canonical state key for model checking
  Gateway(const GatewayConfig& cfg, uint64_t incarnation, std::vector<uint8_t> bootstrap);
  void send(Message m);
  Message header(MsgType t, uint16_t to) const;
  bool plan_ok(const std::vector<uint8_t>& plan) const;
  // Member side.
  void member_propose(const Message& m);
  void member_decide(const Message& m);
  void adopt(const Snapshot& s);
  // Coordinator side.
  void start_attempt(Nanos now);
  void coord_prepared(const Message& m);
  // An abort with `later` doubles the next attempt's margin (a member may be past its round).
  void decide(Decision d, bool later = false);
  void coord_state(const Message& m);
  void finish_recovery();
  Snapshot reply_state() const;

  GatewayConfig cfg_;
  uint64_t incarnation_;
  uint64_t nonce_;
  std::vector<uint8_t> bootstrap_;
  Snapshot s_;
  std::vector<Message> outbox_;
  Nanos last_retry_ = -1;
  uint64_t bad_ = 0;
  uint64_t aborts_ = 0, aborts_later_ = 0;
  // Member: last decision seen, so stale PROPOSE/DECIDE are recognised.
  Version last_version_ = 0;
  uint64_t last_attempt_ = 0;
  Decision last_decision_ = Decision::kUndecided;
  // Coordinator: the switch in progress.
  std::vector<char> prepared_, acked_;
  std::vector<uint8_t> wanted_;  // plan to (re)propose after an abort
  bool deciding_ = false;        // a decision is out and not yet acknowledged by all
  Round margin_ = 0;             // switch margin of the next attempt; doubles after each abort
  Round max_round_seen_ = kNoRound;
  // Coordinator recovery: one report per member.
  std::vector<std::optional<Snapshot>> reports_;
};

}  // namespace sg::policy
