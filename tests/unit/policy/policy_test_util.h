// Shared helpers for policy tests: valid plan bytes per version, a canonical state key
// for model checking (through the friend peer class), and message keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/gateway.h"
#include "topology/fapt.h"
#include "topology/plan_codec.h"

namespace sg::policy {

// A valid encoded Plan for `sites` gateways whose content depends on `tag`.
inline std::vector<uint8_t> plan_bytes(int sites, int tag) {
  const int root = tag % sites;
  const topo::Plan p = topo::plan_from_trees(sites, 1000 + tag, {{topo::star_tree(sites, root), root, 1.0}}, 4);
  std::vector<uint8_t> out;
  topo::encode(p, out);
  return out;
}

inline uint64_t hash_bytes(const std::vector<uint8_t>& b) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t c : b) h = (h ^ c) * 1099511628211ull;
  return h;
}

inline void put(std::string& k, uint64_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); }

inline void snapshot_key(std::string& k, const Snapshot& s) {
  put(k, s.synced);
  put(k, static_cast<uint64_t>(s.current_round));
  put(k, s.max_attempt);
  for (const auto* r : {&s.prev, &s.active}) {
    put(k, r->has_value());
    if (*r) {
      put(k, (*r)->version);
      put(k, static_cast<uint64_t>((*r)->from_round));
      put(k, hash_bytes((*r)->plan));
    }
  }
  put(k, s.next.has_value());
  if (s.next) {
    put(k, s.next->version);
    put(k, s.next->attempt);
    put(k, static_cast<uint64_t>(s.next->switch_round));
    put(k, static_cast<uint64_t>(s.next->decision));
    put(k, hash_bytes(s.next->plan));
  }
}

inline std::string message_key(const Message& m) {
  std::string k;
  put(k, static_cast<uint64_t>(m.type));
  put(k, m.from);
  put(k, m.to);
  put(k, m.nonce);
  put(k, m.version);
  put(k, m.attempt);
  put(k, static_cast<uint64_t>(m.round));
  put(k, m.status);
  put(k, hash_bytes(m.plan));
  if (m.type == MsgType::kState) snapshot_key(k, m.state);
  return k;
}

class GatewayPeer {
 public:
  // Everything that influences future behaviour except the retry clock (tests tick with
  // steps of retry_interval, so every tick fires).
  static void key(std::string& k, const Gateway& g) {
    put(k, g.nonce_);
    snapshot_key(k, g.s_);
    put(k, g.last_version_);
    put(k, g.last_attempt_);
    put(k, static_cast<uint64_t>(g.last_decision_));
    for (char c : g.prepared_) k.push_back(c);
    for (char c : g.acked_) k.push_back(c);
    put(k, hash_bytes(g.wanted_));
    put(k, g.deciding_);
    put(k, static_cast<uint64_t>(g.max_round_seen_));
    for (const auto& r : g.reports_) {
      put(k, r.has_value());
      if (r) snapshot_key(k, *r);
    }
  }
};

}  // namespace sg::policy
