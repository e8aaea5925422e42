// A small world of gateways and in-flight messages for model checking the policy protocol:
// every event (deliver, drop, duplicate, tick, begin a round, restart) is explicit, so a
// search can try all of them and a seeded run can pick them at random.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "policy_test_util.h"

namespace sg::policy {

struct World {
  GatewayConfig base;
  std::vector<Gateway> gws;
  std::vector<Message> flight;     // unordered: any may be delivered next
  std::vector<Round> next_round;   // the next round each gateway will try to begin
  std::vector<Nanos> clock;        // per gateway; every tick advances it one retry interval
  std::vector<uint64_t> incarnation;
  std::map<Round, Version> used;   // the version each round ran under (first gateway to begin it)
  std::string violation;           // non-empty once safety is broken

  // Every gateway has begun rounds 0..start_round under the bootstrap policy.
  explicit World(int n, Round margin = 2, Round start_round = 0) {
    base.gateways = static_cast<uint16_t>(n);
    base.coordinator = 0;
    base.retry_interval = 10 * kMilli;
    base.switch_margin = margin;
    for (int g = 0; g < n; ++g) gws.push_back(Gateway::fresh(cfg(g), plan_bytes(n, 0)));
    next_round.assign(n, 0);
    clock.assign(n, 0);
    incarnation.assign(n, 1);
    for (Round r = 0; r <= start_round; ++r)
      for (int g = 0; g < n; ++g) begin(g);
  }
  GatewayConfig cfg(int g) const {
    GatewayConfig c = base;
    c.self = static_cast<uint16_t>(g);
    return c;
  }
  int n() const { return static_cast<int>(gws.size()); }
  void drain(int g) {
    for (Message& m : gws[g].take_outbox()) flight.push_back(std::move(m));
  }
  bool propose(int tag) {
    const bool ok = gws[0].propose(plan_bytes(n(), tag), clock[0]);
    drain(0);
    return ok;
  }
  void deliver(size_t i, bool keep_copy = false) {
    Message m = flight[i];
    if (!keep_copy) flight.erase(flight.begin() + static_cast<long>(i));
    gws[m.to].on_message(m, clock[m.to]);
    drain(m.to);
  }
  void drop(size_t i) { flight.erase(flight.begin() + static_cast<long>(i)); }
  void tick(int g) {
    clock[g] += base.retry_interval;
    gws[g].tick(clock[g]);
    drain(g);
  }
  // Rounds advance in near lockstep, as an all-reduce forces: nobody begins round r+1
  // before everyone began round r. (Safety does not rely on this; liveness needs rounds.)
  bool can_begin(int g) {
    // Rounds before the first one a gateway has a policy for are abandoned (only after a
    // whole-cluster restart): it moves on to that round.
    const Snapshot& st = gws[g].state();
    if (st.synced && st.active && !st.prev && next_round[g] < st.active->from_round) next_round[g] = st.active->from_round;
    const Round r = next_round[g];
    for (int o = 0; o < n(); ++o)
      if (next_round[o] < r) return false;
    return gws[g].may_begin(r).go;
  }
  bool begin(int g) {
    const Round r = next_round[g];
    const PolicyRecord* p = gws[g].begin_round(r);
    if (!p) return false;
    auto [it, fresh] = used.emplace(r, p->version);
    if (!fresh && it->second != p->version && violation.empty())
      violation = "round " + std::to_string(r) + " ran under versions " + std::to_string(it->second) + " and " +
                  std::to_string(p->version);
    ++next_round[g];
    return true;
  }
  void restart(int g) {
    // Its workers are in the last round it began (it will begin the next one after that);
    // messages to its old self stay in flight.
    gws[g] = Gateway::restarted(cfg(g), ++incarnation[g], plan_bytes(n(), 0), next_round[g] - 1);
  }
  Version min_active() const {
    Version v = ~0ull;
    for (const Gateway& g : gws) v = std::min(v, g.synced() ? g.active_version() : 0);
    return v;
  }
  // Lets every message through (in order), ticks everyone and advances rounds until
  // nothing changes for a while. Returns false if the step budget ran out.
  void settle(int steps) {
    for (int s = 0; s < steps; ++s) {
      while (!flight.empty()) deliver(0);
      for (int g = 0; g < n(); ++g) tick(g);
      while (!flight.empty()) deliver(0);
      for (int g = 0; g < n(); ++g)
        if (can_begin(g)) begin(g);
    }
  }
  std::string key() const {
    std::string k;
    for (const Gateway& g : gws) GatewayPeer::key(k, g);
    std::vector<std::string> mk;
    for (const Message& m : flight) mk.push_back(message_key(m));
    std::sort(mk.begin(), mk.end());
    for (const std::string& s : mk) k += s;
    for (Round r : next_round) put(k, static_cast<uint64_t>(r));
    for (auto [r, v] : used) {
      put(k, static_cast<uint64_t>(r));
      put(k, v);
    }
    return k;
  }
};

}  // namespace sg::policy
