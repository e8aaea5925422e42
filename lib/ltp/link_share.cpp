#include "ltp/link_share.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace sg::ltp {

LinkShare::LinkShare(std::unique_ptr<RateController> link, const LinkShareConfig& cfg)
    : link_(std::move(link)),
      own_board_(std::make_unique<LinkBoard>(std::max<uint32_t>(cfg.max_flows, 1), false)),
      board_(own_board_.get()),
      slots_(std::max<uint32_t>(cfg.max_flows, 1)),
      marks_(std::max<uint32_t>(cfg.history, 16)) {
  if (!link_) throw std::invalid_argument("LinkShare: no link controller");
  member_ = board_->join();
}

LinkShare::LinkShare(std::unique_ptr<RateController> link, LinkBoard& board, const LinkShareConfig& cfg)
    : link_(std::move(link)),
      board_(&board),
      slots_(std::max<uint32_t>(cfg.max_flows, 1)),
      marks_(std::max<uint32_t>(cfg.history, 16)) {
  if (!link_) throw std::invalid_argument("LinkShare: no link controller");
  member_ = board_->join();
  if (member_ < 0)
    throw std::length_error("LinkShare: more than " + std::to_string(LinkBoard::kMaxMembers) + " engines on one board");
}

LinkShare::~LinkShare() {
  for (uint32_t i = 0; i < slots_.size(); ++i) detach(i);  // flows outliving the share: none by contract
}

const char* LinkShare::weight_error(uint64_t weight) {
  if (weight == 0) return "weight 0: a flow needs a weight of at least 1 (detach a job to stop it)";
  if (weight > kMaxWeight) return "weight above 1000: weights are relative shares, 1 to 1000";
  return nullptr;
}

std::unique_ptr<LinkShare::Flow> LinkShare::attach(uint64_t weight, uint64_t group) {
  if (const char* e = weight_error(weight)) throw std::invalid_argument(std::string("LinkShare::attach: ") + e);
  uint32_t i = 0;
  while (i < slots_.size() && slots_[i].used) ++i;
  if (i == slots_.size())
    throw std::length_error("LinkShare::attach: all " + std::to_string(slots_.size()) + " flow slots in use");
  LinkBoard& b = *board_;
  LinkBoard::Group* g = nullptr;
  if (b.shared()) {
    g = group == kOwnGroup ? nullptr : b.find(group);
    if (!g || g->weight.load(std::memory_order_relaxed) != weight)
      throw std::invalid_argument("LinkShare::attach: group " + std::to_string(group) +
                                  " is not open on the link's board with weight " + std::to_string(weight));
  } else {
    // One owner: its group is the one with this key, else a free entry (one per slot).
    if (group != kOwnGroup) g = b.find(group);
    if (!g) {
      g = b.find(LinkBoard::kNoKey);
      g->weight.store(0, std::memory_order_relaxed);
      g->flows.store(0, std::memory_order_relaxed);
      g->backlogged.store(0, std::memory_order_relaxed);
      g->key.store(group, std::memory_order_relaxed);
    }
    const uint32_t old = g->weight.load(std::memory_order_relaxed);
    if (g->backlogged.load(std::memory_order_relaxed) > 0)
      b.backlogged_weight_.fetch_add(static_cast<int64_t>(weight) - old, std::memory_order_relaxed);
    g->weight.store(static_cast<uint32_t>(weight), std::memory_order_relaxed);
  }
  g->flows.fetch_add(1, std::memory_order_relaxed);
  slots_[i] = Slot{};
  slots_[i].used = true;
  slots_[i].weight = static_cast<uint32_t>(weight);
  slots_[i].group = b.index(*g);
  ++attached_;
  return std::unique_ptr<Flow>(new Flow(*this, i));
}

void LinkShare::detach(uint32_t slot) {
  Slot& s = slots_[slot];
  if (!s.used) return;
  stop(s);
  s.used = false;
  --attached_;
  LinkBoard::Group& g = board_->group(s.group);
  // A private board frees the entry with its last flow; a shared one's owner closes it.
  if (g.flows.fetch_sub(1, std::memory_order_relaxed) == 1 && !board_->shared())
    g.key.store(LinkBoard::kNoKey, std::memory_order_relaxed);
}

void LinkShare::set_backlogged(Slot& s, bool b) {
  if (s.backlogged == b) return;
  s.backlogged = b;
  if (b) ++backlogged_flows_;
  else --backlogged_flows_;
  board_->set_backlogged(board_->group(s.group), b);
}

void LinkShare::set_inflight(Slot& s, uint64_t v) {
  if (v != s.inflight)
    board_->inflight_.fetch_add(static_cast<int64_t>(v) - static_cast<int64_t>(s.inflight), std::memory_order_relaxed);
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
  // The link's delivered bytes (every engine's) at this engine's ACK times.
  const uint64_t delivered = board_->delivered();
  if (marks_len_ > 0) {
    Mark& last = marks_[(marks_head_ + marks_len_ - 1) % marks_.size()];
    if (last.t >= t) {  // same instant (time never goes back for one owner)
      last.delivered = std::max(last.delivered, delivered);
      return;
    }
  }
  if (marks_len_ == marks_.size()) {
    marks_head_ = (marks_head_ + 1) % marks_.size();
    --marks_len_;
  }
  marks_[(marks_head_ + marks_len_) % marks_.size()] = Mark{t, delivered};
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
  const uint64_t delivered = board_->delivered();
  if (ev.now <= from || delivered <= m->delivered) return 0;
  return static_cast<double>(delivered - m->delivered) * 1e9 / static_cast<double>(ev.now - from);
}

void LinkShare::ack(uint32_t slot, const AckEvent& ev) {
  Slot& s = slots_[slot];
  if (!s.running) return;
  set_inflight(s, ev.inflight_bytes);
  AckEvent le = ev;
  if (ev.acked_bytes > 0) {
    board_->delivered_.fetch_add(ev.acked_bytes, std::memory_order_relaxed);
    s.last_delivery = ev.now;
    board_->last_[member_].last_delivery.store(ev.now, std::memory_order_relaxed);
    record(ev.now);
    const Mark* m = mark_at(ev.newest_acked_send);
    le.prior_delivered = m ? m->delivered : marks_[marks_head_].delivered;
    le.delivery_rate = link_rate(ev);
  }
  le.delivered = board_->delivered();
  le.inflight_bytes = board_->inflight();
  // App-limited only if the whole link was: another flow (any engine's) with chunks to send
  // kept it busy.
  le.app_limited = ev.app_limited && board_->backlogged_flows() <= (s.backlogged ? 1u : 0u);
  link_->on_ack(le);
}

void LinkShare::loss(uint32_t slot, const LossEvent& ev) {
  Slot& s = slots_[slot];
  if (!s.running) return;
  const uint64_t before = board_->inflight();
  set_inflight(s, ev.inflight_bytes >= ev.lost_bytes ? ev.inflight_bytes - ev.lost_bytes : 0);
  if (ev.timeout) {
    // Another flow got through after this one's data was lost: here, or on another engine.
    bool through = false;
    for (uint32_t i = 0; i < slots_.size() && !through; ++i)
      through = i != slot && slots_[i].used && slots_[i].last_delivery > ev.lost_send;
    const int32_t members = std::min<int32_t>(board_->members_.load(std::memory_order_relaxed), LinkBoard::kMaxMembers);
    for (int32_t m = 0; m < members && !through; ++m)
      through = m != member_ && board_->last_[m].last_delivery.load(std::memory_order_relaxed) > ev.lost_send;
    if (through) {
      ++timeouts_absorbed_;
      return;
    }
  }
  LossEvent le = ev;
  le.inflight_bytes = before;
  link_->on_loss(le);
}

double LinkShare::part(uint32_t slot) const {
  // A flow with nothing to send is counted in as if it had (its group with it). Sums over
  // engines: clamped, as two engines' updates may cross (link_board.h).
  const Slot& s = slots_[slot];
  const LinkBoard::Group& g = board_->groups_[s.group];
  const uint64_t gw = g.weight.load(std::memory_order_relaxed);
  const int32_t gb = std::max<int32_t>(g.backlogged.load(std::memory_order_relaxed), 0);
  const uint64_t w = std::max(board_->backlogged_weight() + (gb == 0 ? gw : 0), gw);
  const int32_t n = std::max(gb + (s.backlogged ? 0 : 1), 1);
  return static_cast<double>(gw) / static_cast<double>(w) / static_cast<double>(n);
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
