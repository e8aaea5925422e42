// LinkShare: one congestion state per peer link, shared by every sender to that peer, of any
// job, in the manner of the Congestion Manager (RFC 3124). Jobs share the WAN by configured
// weights: each flow (one Sender) draws its weight's part of the link's pacing rate and window.
//
// Design. The share owns ONE RateController for the link (normally DeliveryRateController)
// and hands each Sender a Flow: a RateController that is a view onto the share. So Sender is
// unchanged except for one hook (RateController::on_demand, a no-op for every other
// controller, so a Sender without a share behaves exactly as before): it tells the share on
// each poll whether it has anything to send, and when its transfer ends. Why a view and not a
// scheduler inside Sender: Sender already paces itself and honours a window; splitting the
// link's rate and window by weight (weighted credit) needs nothing else, keeps one Sender per
// transfer as today, and in the gateway it is a one-line change where controllers are made.
//
//   link rate/window    = the link controller's, fed by every flow's ACKs and losses;
//   flow i's part       = weight_i / (sum of the weights of flows with something to send)
//                         (a flow with nothing to send is counted in as if it had);
//   groups:               flows attached with one group key (a job's senders to this peer)
//                         share one weight: the group's part, split evenly among its flows
//                         with something to send, so a job draws its weight however many of
//                         its shards are sending at the moment;
//   work conserving:      a flow idle (waiting for ACKs or upstream chunks) or done gives its
//                         part to the others at their next poll; a Flow destroyed leaves.
//
// The link controller sees link-wide quantities: delivered bytes summed over flows, and each
// delivery-rate sample re-measured over the same interval on the link's delivery record (the
// flow's own sample would measure only its part). One flow alone gives the controller the
// same samples its own controller would get. A flow's retransmission timeout reaches the link
// controller only if no other flow has had data acknowledged since that flow's lost data
// left: their ACKs prove the path alive (one flow's lost tail is not an outage).
//
// The link controller is reset (a new transfer, in its terms) when a flow starts on an idle
// link, not when one joins others: the path model carries over as between a sender's rounds.
//
// Several engines: each has its own LinkShare for the link (and its own link controller),
// all on one LinkBoard (link_board.h), which sums delivery, inflight and the sending groups
// over the engines: weights then hold across engines and every engine's controller measures
// the whole link. Without a board given, a share has a private one (one engine).
//
// Owner: one engine (lcore), like Sender; not thread-safe (the board is). Slots for max_flows
// flows and the delivery record are allocated in the constructor; attach() allocates only the
// small Flow object (as making a controller does today); nothing else allocates, locks or
// blocks.
// The share must outlive its flows.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ltp/link_board.h"
#include "ltp/rate_controller.h"

namespace sg::ltp {

struct LinkShareConfig {
  uint32_t max_flows = 64;  // flows attached at once
  // Link delivery record, (time, delivered) per ACK: must span the oldest rate sample's
  // interval (about one round trip of ACKs); older samples are measured over what it holds.
  uint32_t history = 8192;
};

class LinkShare {
 public:
  // Weights are small integers: a ratio beyond this starves the light flow to a packet now
  // and then, which no configuration means.
  static constexpr uint32_t kMaxWeight = 1000;

  class Flow final : public RateController {
   public:
    ~Flow() override;  // leaves the share
    Flow(const Flow&) = delete;
    Flow& operator=(const Flow&) = delete;

    const char* name() const override { return "ltp-link-share"; }
    void reset(Nanos now, uint32_t mss) override;
    void on_ack(const AckEvent& ev) override;
    void on_loss(const LossEvent& ev) override;
    uint64_t cwnd_bytes() const override;
    double pacing_rate() const override;
    LossDetection loss_detection() const override;
    void on_demand(Nanos now, Demand d) override;

    uint32_t weight() const;
    bool running() const;     // between reset (Sender::start) and the transfer's end
    bool backlogged() const;  // running with something to send
    double share() const;     // its part of the link's rate now, 0..1

   private:
    friend class LinkShare;
    Flow(LinkShare& s, uint32_t slot) : share_(s), slot_(slot) {}
    LinkShare& share_;
    uint32_t slot_;
  };

  // `link`: the link's controller (the share owns it). Throws std::invalid_argument if null.
  explicit LinkShare(std::unique_ptr<RateController> link, const LinkShareConfig& cfg = {});
  // One of several engines' shares of a link: `board` (shared, outlives the share) holds
  // what they have in common. Throws std::length_error past LinkBoard::kMaxMembers.
  LinkShare(std::unique_ptr<RateController> link, LinkBoard& board, const LinkShareConfig& cfg = {});
  ~LinkShare();
  LinkShare(const LinkShare&) = delete;
  LinkShare& operator=(const LinkShare&) = delete;

  // nullptr if `weight` is valid, else why not (for config checks that must not throw).
  static const char* weight_error(uint64_t weight);

  // A controller for one Sender to this peer, with `weight`, alone or in the group `group`
  // (flows of one group share the group's weight; the last attach sets it). Throws
  // std::invalid_argument for a weight weight_error refuses, std::length_error when
  // max_flows flows are attached. On a shared board the group must be open
  // (LinkBoard::open_group) with this weight, else std::invalid_argument.
  static constexpr uint64_t kOwnGroup = ~0ull;
  std::unique_ptr<Flow> attach(uint64_t weight, uint64_t group = kOwnGroup);

  const RateController& link() const { return *link_; }
  uint32_t flows() const { return attached_; }
  uint32_t running_flows() const { return running_; }
  const LinkBoard& board() const { return *board_; }
  // Over the board (every engine's flows of this link):
  uint64_t backlogged_weight() const { return board_->backlogged_weight(); }
  uint64_t delivered() const { return board_->delivered(); }      // bytes, all flows, ever
  uint64_t inflight_bytes() const { return board_->inflight(); }  // as the flows last reported
  uint64_t timeouts_absorbed() const { return timeouts_absorbed_; }  // not passed on (see above)

 private:
  struct Slot {
    bool used = false;
    bool running = false;
    bool backlogged = false;
    uint32_t weight = 0;
    uint32_t group = 0;  // index into the board's groups
    uint32_t mss = 1400;
    uint64_t inflight = 0;
    Nanos last_delivery = -1;  // its newest ACK that acknowledged something
  };
  struct Mark {
    Nanos t = 0;
    uint64_t delivered = 0;
  };

  void detach(uint32_t slot);
  void start(uint32_t slot, Nanos now, uint32_t mss);
  void set_backlogged(Slot& s, bool b);
  void stop(Slot& s);
  void set_inflight(Slot& s, uint64_t v);
  void ack(uint32_t slot, const AckEvent& ev);
  void loss(uint32_t slot, const LossEvent& ev);
  double part(uint32_t slot) const;
  void record(Nanos t);
  const Mark* mark_at(Nanos t) const;  // latest mark at or before t; nullptr if older than all
  double link_rate(const AckEvent& ev) const;

  std::unique_ptr<RateController> link_;
  std::unique_ptr<LinkBoard> own_board_;  // one engine: a private board
  LinkBoard* board_;
  int32_t member_ = 0;
  std::vector<Slot> slots_;
  std::vector<Mark> marks_;  // ring, oldest at marks_head_
  size_t marks_head_ = 0, marks_len_ = 0;
  uint32_t attached_ = 0;
  uint32_t running_ = 0;
  uint32_t backlogged_flows_ = 0;  // of this engine
  uint64_t timeouts_absorbed_ = 0;
};

}  // namespace sg::ltp
