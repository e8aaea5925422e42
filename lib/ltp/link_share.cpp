#include "ltp/link_share.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace sg::ltp {

LinkShare::LinkShare(std::unique_ptr<RateController> link, const LinkShareConfig& cfg)
    : link_(std::move(link)),
      slots_(std::max<uint32_t>(cfg.max_flows, 1)),
      marks_(std::max<uint32_t>(cfg.history, 16)),
      groups_(slots_.size()) {
  if (!link_) throw std::invalid_argument("LinkShare: no link controller");
}

LinkShare::~LinkShare() = default;

const char* LinkShare::weight_error(uint64_t weight) {
  if (weight == 0) return "weight 0: a flow needs a weight of at least 1 (detach a job to stop it)";
  if (weight > kMaxWeight) return "weight above 1000: weights are relative shares, 1 to 1000";
  return nullptr;
}

std::unique_ptr<LinkShare::Flow> LinkShare::attach(uint64_t weight, uint64_t group) {
  if (const char* e = weight_error(weight)) throw std::invalid_argument(std::string("LinkShare::attach: ") + e);
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].used) continue;
    // Its group: the one with this key, else a free entry (there is one per slot).
    uint32_t g = static_cast<uint32_t>(groups_.size());
    if (group != kOwnGroup)
      for (uint32_t k = 0; k < groups_.size() && g == groups_.size(); ++k)
        if (groups_[k].used && groups_[k].key == group) g = k;
    if (g == groups_.size()) {
      for (uint32_t k = 0; k < groups_.size() && g == groups_.size(); ++k)
        if (!groups_[k].used) g = k;
      groups_[g] = Group{};
      groups_[g].used = true;
      groups_[g].key = group;
    }
    Group& gr = groups_[g];
    if (gr.backlogged) backlogged_weight_ = backlogged_weight_ - gr.weight + weight;
    gr.weight = static_cast<uint32_t>(weight);
    ++gr.flows;
    slots_[i] = Slot{};
    slots_[i].used = true;
    slots_[i].weight = static_cast<uint32_t>(weight);
    slots_[i].group = g;
    ++attached_;
    return std::unique_ptr<Flow>(new Flow(*this, i));
  }
  throw std::length_error("LinkShare::attach: all " + std::to_string(slots_.size()) + " flow slots in use");
}

void LinkShare::detach(uint32_t slot) {
  Slot& s = slots_[slot];
  if (!s.used) return;
  stop(s);
  s.used = false;
  --attached_;
  if (--groups_[s.group].flows == 0) groups_[s.group].used = false;
}

void LinkShare::set_backlogged(Slot& s, bool b) {
  if (s.backlogged == b) return;
  s.backlogged = b;
  Group& g = groups_[s.group];
  if (b) {
    ++backlogged_flows_;
    if (g.backlogged++ == 0) backlogged_weight_ += g.weight;
  } else {
    --backlogged_flows_;
    if (--g.backlogged == 0) backlogged_weight_ -= g.weight;
  }
}

void LinkShare::set_inflight(Slot& s, uint64_t v) {
  inflight_ = inflight_ - s.inflight + v;
  s.inflight = v;
}

void LinkShare::stop(Slot& s) {
  // Whatever it still had in flight is abandoned: no ACK will report it gone.
  set_backlogged(s, false);
  set_inflight(s, 0);
  if (s.running) --running_;
  s.running = false;
}

void LinkShare::start(uint32_t slot, Nanos now, uint32_t mss) {
  Slot& s = slots_[slot];
  if (s.running) stop(s);  // restarted (a new Sender on a flow whose transfer never ended)
  if (running_ == 0) {
    // The link was idle: a new transfer for its controller (which keeps the path model).
    link_->reset(now, mss);
    record(now);
  }
  ++running_;
  s.running = true;
  s.mss = mss;
  set_backlogged(s, true);
}

void LinkShare::record(Nanos t) {
  if (marks_len_ > 0) {
    Mark& last = marks_[(marks_head_ + marks_len_ - 1) % marks_.size()];
    if (last.t >= t) {  // same instant (time never goes back for one owner)
      last.delivered = delivered_;
      return;
    }
  }
  if (marks_len_ == marks_.size()) {
    marks_head_ = (marks_head_ + 1) % marks_.size();
    --marks_len_;
  }
  marks_[(marks_head_ + marks_len_) % marks_.size()] = Mark{t, delivered_};
  ++marks_len_;
}

const LinkShare::Mark* LinkShare::mark_at(Nanos t) const {
  if (marks_len_ == 0 || marks_[marks_head_].t > t) return nullptr;
  size_t lo = 0, hi = marks_len_ - 1;  // invariant: mark lo is at or before t
  while (lo < hi) {
    const size_t mid = lo + (hi - lo + 1) / 2;
    if (marks_[(marks_head_ + mid) % marks_.size()].t <= t) lo = mid;
    else hi = mid - 1;
  }
  return &marks_[(marks_head_ + lo) % marks_.size()];
}

double LinkShare::link_rate(const AckEvent& ev) const {
  // The flow's sample covers [now - elapsed, now]; the link's delivery over the same interval.
  if (ev.delivery_rate <= 0 || ev.delivered <= ev.prior_delivered) return 0;
  const Nanos elapsed = std::llround(static_cast<double>(ev.delivered - ev.prior_delivered) * 1e9 / ev.delivery_rate);
  if (elapsed <= 0) return 0;
  Nanos from = ev.now - elapsed;
  const Mark* m = mark_at(from);
  if (!m) {  // the record does not reach back that far: measure over what it holds
    m = &marks_[marks_head_];
    from = m->t;
  }
  if (ev.now <= from || delivered_ <= m->delivered) return 0;
  return static_cast<double>(delivered_ - m->delivered) * 1e9 / static_cast<double>(ev.now - from);
}

void LinkShare::ack(uint32_t slot, const AckEvent& ev) {
  Slot& s = slots_[slot];
  if (!s.running) return;
  set_inflight(s, ev.inflight_bytes);
  AckEvent le = ev;
  if (ev.acked_bytes > 0) {
    delivered_ += ev.acked_bytes;
    s.last_delivery = ev.now;
    record(ev.now);
    const Mark* m = mark_at(ev.newest_acked_send);
    le.prior_delivered = m ? m->delivered : marks_[marks_head_].delivered;
    le.delivery_rate = link_rate(ev);
  }
  le.delivered = delivered_;
  le.inflight_bytes = inflight_;
  // App-limited only if the whole link was: another flow with chunks to send kept it busy.
  le.app_limited = ev.app_limited && backlogged_flows_ == (s.backlogged ? 1u : 0u);
  link_->on_ack(le);
}

void LinkShare::loss(uint32_t slot, const LossEvent& ev) {
  Slot& s = slots_[slot];
  if (!s.running) return;
  const uint64_t before = inflight_;
  set_inflight(s, ev.inflight_bytes >= ev.lost_bytes ? ev.inflight_bytes - ev.lost_bytes : 0);
  if (ev.timeout) {
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (i == slot || !slots_[i].used || slots_[i].last_delivery <= ev.lost_send) continue;
      ++timeouts_absorbed_;  // another flow got through after this one's data was lost
      return;
    }
  }
  LossEvent le = ev;
  le.inflight_bytes = before;
  link_->on_loss(le);
}

double LinkShare::part(uint32_t slot) const {
  // A flow with nothing to send is counted in as if it had (its group with it).
  const Slot& s = slots_[slot];
  const Group& g = groups_[s.group];
  const uint64_t w = backlogged_weight_ + (g.backlogged == 0 ? g.weight : 0);
  const uint32_t n = g.backlogged + (s.backlogged ? 0 : 1);
  return static_cast<double>(g.weight) / static_cast<double>(w) / static_cast<double>(n);
}

// Flow: forwards to its share.

LinkShare::Flow::~Flow() { share_.detach(slot_); }

void LinkShare::Flow::reset(Nanos now, uint32_t mss) { share_.start(slot_, now, mss); }
void LinkShare::Flow::on_ack(const AckEvent& ev) { share_.ack(slot_, ev); }
void LinkShare::Flow::on_loss(const LossEvent& ev) { share_.loss(slot_, ev); }
LossDetection LinkShare::Flow::loss_detection() const { return share_.link_->loss_detection(); }
uint32_t LinkShare::Flow::weight() const { return share_.slots_[slot_].weight; }
bool LinkShare::Flow::running() const { return share_.slots_[slot_].running; }
bool LinkShare::Flow::backlogged() const { return share_.slots_[slot_].backlogged; }
double LinkShare::Flow::share() const { return share_.part(slot_); }

void LinkShare::Flow::on_demand(Nanos /*now*/, Demand d) {
  Slot& s = share_.slots_[slot_];
  if (!s.running) return;
  if (d == Demand::kDone) share_.stop(s);
  else share_.set_backlogged(s, d == Demand::kBacklogged);
}

uint64_t LinkShare::Flow::cwnd_bytes() const {
  const uint64_t floor = 4ull * share_.slots_[slot_].mss;
  return std::max<uint64_t>(static_cast<uint64_t>(static_cast<double>(share_.link_->cwnd_bytes()) * share_.part(slot_)), floor);
}

double LinkShare::Flow::pacing_rate() const { return share_.link_->pacing_rate() * share_.part(slot_); }

}  // namespace sg::ltp
