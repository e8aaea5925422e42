#include "policy/gateway.h"

#include <algorithm>

#include "topology/plan_codec.h"

namespace sg::policy {

Gateway::Gateway(const GatewayConfig& cfg, uint64_t incarnation, std::vector<uint8_t> bootstrap)
    : cfg_(cfg), incarnation_(incarnation), nonce_(incarnation << 16 | cfg.self), bootstrap_(std::move(bootstrap)),
      prepared_(cfg.gateways, 0), acked_(cfg.gateways, 0), reports_(cfg.gateways) {}

Gateway Gateway::fresh(const GatewayConfig& cfg, std::vector<uint8_t> bootstrap_plan) {
  Gateway g(cfg, 0, bootstrap_plan);
  g.s_.synced = true;
  g.s_.active = PolicyRecord{0, 0, std::move(bootstrap_plan)};
  return g;
}

Gateway Gateway::restarted(const GatewayConfig& cfg, uint64_t incarnation, std::vector<uint8_t> bootstrap_plan,
                           Round resume_round) {
  Gateway g(cfg, incarnation, std::move(bootstrap_plan));
  g.s_.current_round = std::max(kNoRound, resume_round);
  g.max_round_seen_ = g.s_.current_round;
  return g;
}

// --- plumbing -------------------------------------------------------------------------

void Gateway::send(Message m) { outbox_.push_back(std::move(m)); }

std::vector<Message> Gateway::take_outbox() {
  std::vector<Message> out;
  out.swap(outbox_);
  return out;
}

Message Gateway::header(MsgType t, uint16_t to) const {
  Message m;
  m.type = t;
  m.from = cfg_.self;
  m.to = to;
  return m;
}

bool Gateway::plan_ok(const std::vector<uint8_t>& plan) const {
  topo::Plan p;
  return topo::decode(plan, p) == topo::PlanError::kOk && p.num_sites == cfg_.gateways;
}

bool Gateway::switch_in_progress() const { return s_.next.has_value() || deciding_ || !wanted_.empty(); }

void Gateway::on_bytes(std::span<const uint8_t> bytes, Nanos now) {
  Message m;
  if (decode(bytes, m) != MsgError::kOk) {
    ++bad_;
    return;
  }
  on_message(m, now);
}

void Gateway::on_message(const Message& m, Nanos now) {
  (void)now;
  if (m.to != cfg_.self || m.from >= cfg_.gateways || m.from == cfg_.self) {
    ++bad_;
    return;
  }
  const bool from_coord = m.from == cfg_.coordinator;
  switch (m.type) {
    case MsgType::kPropose:
      if (from_coord) member_propose(m);
      break;
    case MsgType::kDecide:
      if (from_coord) member_decide(m);
      break;
    case MsgType::kPrepared:
      if (is_coordinator() && s_.synced) coord_prepared(m);
      break;
    case MsgType::kDecidedAck:
      if (is_coordinator() && deciding_ && m.version == last_version_ && m.attempt == last_attempt_) {
        acked_[m.from] = 1;
        deciding_ = std::count(acked_.begin(), acked_.end(), 1) < cfg_.gateways;
      }
      break;
    case MsgType::kStateRequest:
      // Members answer the coordinator (also while unsynced: that is part of the report);
      // the coordinator answers anyone once it knows the state itself.
      if ((!is_coordinator() && from_coord) || (is_coordinator() && s_.synced)) {
        Message r = header(MsgType::kState, m.from);
        r.nonce = m.nonce;
        r.state = reply_state();
        send(std::move(r));
      }
      break;
    case MsgType::kState:
      if (s_.synced || m.nonce != nonce_) break;  // not asked for, or for an older request
      if (is_coordinator()) {
        coord_state(m);
      } else if (from_coord && m.state.synced) {
        adopt(m.state);
      }
      break;
  }
}

Snapshot Gateway::reply_state() const {
  Snapshot s = s_;
  return s;
}

void Gateway::tick(Nanos now) {
  if (last_retry_ >= 0 && now - last_retry_ < cfg_.retry_interval) return;
  last_retry_ = now;
  if (!s_.synced) {
    for (uint16_t g = 0; g < cfg_.gateways; ++g) {
      const bool ask = is_coordinator() ? g != cfg_.self && !reports_[g] : g == cfg_.coordinator;
      if (!ask) continue;
      Message r = header(MsgType::kStateRequest, g);
      r.nonce = nonce_;
      send(std::move(r));
    }
    return;
  }
  if (!is_coordinator()) {
    if (s_.next && s_.next->decision == Decision::kUndecided) {  // also asks for the decision
      Message r = header(MsgType::kPrepared, cfg_.coordinator);
      r.version = s_.next->version;
      r.attempt = s_.next->attempt;
      r.round = s_.current_round;
      r.status = 1;
      send(std::move(r));
    }
    return;
  }
  if (s_.next && s_.next->decision == Decision::kUndecided) {
    for (uint16_t g = 0; g < cfg_.gateways; ++g) {
      if (prepared_[g]) continue;
      Message p = header(MsgType::kPropose, g);
      p.version = s_.next->version;
      p.attempt = s_.next->attempt;
      p.round = s_.next->switch_round;
      p.plan = s_.next->plan;
      send(std::move(p));
    }
  } else if (deciding_) {
    for (uint16_t g = 0; g < cfg_.gateways; ++g) {
      if (acked_[g]) continue;
      Message d = header(MsgType::kDecide, g);
      d.version = last_version_;
      d.attempt = last_attempt_;
      d.status = static_cast<uint8_t>(last_decision_);
      send(std::move(d));
    }
  } else if (!wanted_.empty() && !s_.next) {
    start_attempt(now);  // an aborted switch, tried again with a later round
  }
}

// --- rounds ---------------------------------------------------------------------------

Gate Gateway::may_begin(Round r) const {
  if (!s_.synced || r < 0) return {};
  if (s_.next && r >= s_.next->switch_round) {
    if (s_.next->decision == Decision::kCommit) return {true, s_.next->version};
    return {};
  }
  if (s_.active && r >= s_.active->from_round) return {true, s_.active->version};
  if (s_.prev && r >= s_.prev->from_round) return {true, s_.prev->version};
  return {};
}

const PolicyRecord* Gateway::begin_round(Round r) {
  if (!may_begin(r).go) return nullptr;
  if (s_.next && r >= s_.next->switch_round) {
    s_.prev = std::move(s_.active);
    s_.active = PolicyRecord{s_.next->version, s_.next->switch_round, std::move(s_.next->plan)};
    s_.next.reset();
  }
  s_.current_round = std::max(s_.current_round, r);
  max_round_seen_ = std::max(max_round_seen_, r);
  return r >= s_.active->from_round ? &*s_.active : &*s_.prev;
}

// --- member ---------------------------------------------------------------------------

void Gateway::member_propose(const Message& m) {
  if (!s_.synced || is_coordinator()) return;
  if (m.version <= active_version()) return;  // already in force: stale
  if (m.version == last_version_ && m.attempt <= last_attempt_ && last_decision_ != Decision::kUndecided) return;
  auto answer = [&](bool ok) {
    Message r = header(MsgType::kPrepared, cfg_.coordinator);
    r.version = m.version;
    r.attempt = m.attempt;
    r.round = s_.current_round;
    r.status = ok ? 1 : 0;
    send(std::move(r));
  };
  if (s_.next) {
    if (s_.next->version == m.version && s_.next->attempt == m.attempt) return answer(true);  // duplicate
    if (s_.next->version == m.version && s_.next->attempt > m.attempt) return;                 // stale attempt
    // A committed switch not yet reached, or another version undecided: not now.
    if (s_.next->decision == Decision::kCommit || s_.next->version != m.version) return answer(false);
    // Same version, newer attempt: the older attempt was aborted (a new attempt is only
    // made after every member acknowledged the abort, or after coordinator recovery).
  }
  if (s_.current_round >= m.round || m.round <= s_.active->from_round || !plan_ok(m.plan)) {
    if (s_.next && s_.next->version == m.version) s_.next.reset();  // its older attempt is dead too
    return answer(false);
  }
  s_.next = Proposal{m.version, m.attempt, m.round, Decision::kUndecided, m.plan};
  s_.max_attempt = std::max(s_.max_attempt, m.attempt);
  answer(true);
}

void Gateway::member_decide(const Message& m) {
  if (!s_.synced || is_coordinator()) return;
  const auto d = static_cast<Decision>(m.status);
  auto ack = [&] {
    Message r = header(MsgType::kDecidedAck, cfg_.coordinator);
    r.version = m.version;
    r.attempt = m.attempt;
    send(std::move(r));
  };
  if (d == Decision::kUndecided) return;
  if (s_.next && s_.next->version == m.version && s_.next->attempt == m.attempt) {
    if (d == Decision::kCommit) {
      s_.next->decision = Decision::kCommit;
    } else {
      s_.next.reset();
    }
    last_version_ = m.version;
    last_attempt_ = m.attempt;
    last_decision_ = d;
    return ack();
  }
  if (d == Decision::kAbort) return ack();  // nothing of ours to drop
  if (m.version <= active_version() ||
      (m.version == last_version_ && m.attempt == last_attempt_ && last_decision_ == Decision::kCommit))
    return ack();  // a duplicate of what we already know
  // A commit for a proposal we do not hold: our view is out of date. Stop and resync.
  s_.synced = false;
  nonce_ += 1ull << 16;
  last_retry_ = -1;
}

void Gateway::adopt(const Snapshot& s) {
  if (!s.active || !plan_ok(s.active->plan) || (s.prev && !plan_ok(s.prev->plan)) ||
      (s.next && !plan_ok(s.next->plan))) {
    ++bad_;
    return;
  }
  s_.prev = s.prev;
  s_.active = s.active;
  s_.next = s.next;
  s_.max_attempt = std::max(s_.max_attempt, s.max_attempt);
  max_round_seen_ = std::max(max_round_seen_, s.current_round);
  s_.synced = true;
  if (s_.next && s_.next->decision == Decision::kUndecided) {
    // Promise it now, unless this site may already have begun its switch round.
    const bool ok = s_.current_round < s_.next->switch_round;
    Message r = header(MsgType::kPrepared, cfg_.coordinator);
    r.version = s_.next->version;
    r.attempt = s_.next->attempt;
    r.round = s_.current_round;
    r.status = ok ? 1 : 0;
    send(std::move(r));
    if (!ok) s_.next.reset();
  }
}

// --- coordinator ----------------------------------------------------------------------

bool Gateway::propose(std::vector<uint8_t> plan, Nanos now) {
  if (!is_coordinator() || !s_.synced || switch_in_progress() || !plan_ok(plan)) return false;
  wanted_ = std::move(plan);
  start_attempt(now);
  return true;
}

void Gateway::start_attempt(Nanos now) {
  const Round base = std::max({max_round_seen_, s_.current_round, s_.active->from_round});
  s_.max_attempt = std::max(s_.max_attempt + 1, incarnation_ << 32 | 1);
  margin_ = std::max(margin_, std::max<Round>(1, cfg_.switch_margin));
  s_.next = Proposal{active_version() + 1, s_.max_attempt, base + margin_, Decision::kUndecided, wanted_};
  std::fill(prepared_.begin(), prepared_.end(), 0);
  prepared_[cfg_.self] = 1;
  last_retry_ = -1;
  tick(now);  // sends the PROPOSE to every member
  if (cfg_.gateways == 1) decide(Decision::kCommit);
}

void Gateway::coord_prepared(const Message& m) {
  max_round_seen_ = std::max(max_round_seen_, m.round);
  if (s_.next && s_.next->decision == Decision::kUndecided && m.version == s_.next->version &&
      m.attempt == s_.next->attempt) {
    if (m.status == 0) {
      // Refused. Only a member already at or past the switch round calls for a later one
      // (twice the margin); one still before it refused for another reason, most often a
      // committed switch it has not reached yet (the coordinator approves rounds ahead of
      // its engine, so it passes that round first), and the retry keeps the margin.
      return decide(Decision::kAbort, m.round >= s_.next->switch_round);
    }
    prepared_[m.from] = 1;
    if (std::count(prepared_.begin(), prepared_.end(), 1) == cfg_.gateways) decide(Decision::kCommit);
    return;
  }
  // A promise for an attempt that is no longer the live one: tell it how that ended.
  Message d = header(MsgType::kDecide, m.from);
  d.version = m.version;
  d.attempt = m.attempt;
  if (m.version == last_version_ && m.attempt == last_attempt_) {
    d.status = static_cast<uint8_t>(last_decision_);
  } else if (m.version <= active_version() && m.status == 1) {
    d.status = static_cast<uint8_t>(Decision::kCommit);  // see the header: it holds the attempt that won
  } else if (m.version > active_version() && (m.attempt < s_.max_attempt || m.attempt >> 32 < incarnation_)) {
    // Superseded attempts were all aborted; a predecessor's attempt not recovered as
    // committed can no longer commit.
    d.status = static_cast<uint8_t>(Decision::kAbort);
  } else {
    return;  // older than anything in progress: a stale duplicate
  }
  send(std::move(d));
}

void Gateway::decide(Decision d, bool later) {
  last_version_ = s_.next->version;
  last_attempt_ = s_.next->attempt;
  last_decision_ = d;
  if (d == Decision::kCommit) {
    s_.next->decision = Decision::kCommit;
    wanted_.clear();
    margin_ = cfg_.switch_margin;
  } else {
    s_.next.reset();
    ++aborts_;
    if (later) {
      margin_ = std::min<Round>(kMaxMargin, 2 * std::max<Round>(1, margin_));
      ++aborts_later_;
    }
  }
  std::fill(acked_.begin(), acked_.end(), 0);
  acked_[cfg_.self] = 1;
  deciding_ = cfg_.gateways > 1;
  for (uint16_t g = 0; g < cfg_.gateways; ++g) {
    if (g == cfg_.self) continue;
    Message m = header(MsgType::kDecide, g);
    m.version = last_version_;
    m.attempt = last_attempt_;
    m.status = static_cast<uint8_t>(d);
    send(std::move(m));
  }
}

void Gateway::coord_state(const Message& m) {
  if (m.from == cfg_.self) return;
  reports_[m.from] = m.state;
  max_round_seen_ = std::max(max_round_seen_, m.state.current_round);
  for (uint16_t g = 0; g < cfg_.gateways; ++g)
    if (g != cfg_.self && !reports_[g]) return;
  finish_recovery();
}

void Gateway::finish_recovery() {
  auto known = [](const Snapshot& s) {
    Version v = s.active ? s.active->version : 0;
    if (s.next && s.next->decision == Decision::kCommit) v = std::max(v, s.next->version);
    return v;
  };
  const Snapshot* best = nullptr;
  for (uint16_t g = 0; g < cfg_.gateways; ++g) {
    if (g == cfg_.self) continue;
    const Snapshot& s = *reports_[g];
    s_.max_attempt = std::max(s_.max_attempt, s.max_attempt);
    if (s.synced && s.active && plan_ok(s.active->plan) && (!best || known(s) > known(*best))) best = &s;
  }
  s_.synced = true;
  if (!best) {
    // Nobody knows anything: the whole cluster restarted. The bootstrap policy takes over
    // after every round anyone may have begun (rounds up to there are abandoned).
    s_.prev.reset();
    s_.next.reset();
    s_.active = PolicyRecord{0, max_round_seen_ + 1, bootstrap_};
    reports_.assign(cfg_.gateways, std::nullopt);
    return;
  }
  s_.prev = best->prev;
  s_.active = best->active;
  s_.next.reset();
  if (best->next && best->next->decision == Decision::kCommit) {
    s_.next = best->next;
    decide(Decision::kCommit);  // make sure everyone knows
    reports_.assign(cfg_.gateways, std::nullopt);
    return;
  }
  // An undecided proposal for the next version, newest attempt, anywhere?
  const Proposal* open = nullptr;
  for (uint16_t g = 0; g < cfg_.gateways; ++g) {
    if (g == cfg_.self) continue;
    const Snapshot& s = *reports_[g];
    if (s.next && s.next->version == active_version() + 1 && (!open || s.next->attempt > open->attempt)) open = &*s.next;
  }
  if (open) {
    bool all = true;
    for (uint16_t g = 0; g < cfg_.gateways; ++g) {
      if (g == cfg_.self) continue;
      const Snapshot& s = *reports_[g];
      all = all && s.synced && s.next && s.next->version == open->version && s.next->attempt == open->attempt;
    }
    s_.next = *open;
    s_.next->decision = Decision::kUndecided;
    if (!all) wanted_ = open->plan;  // try it again after the abort
    // Not every member promised: some may have begun the switch round, so retry later.
    decide(all ? Decision::kCommit : Decision::kAbort, /*later=*/true);
  }
  reports_.assign(cfg_.gateways, std::nullopt);
}

}  // namespace sg::policy
