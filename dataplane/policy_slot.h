// How a new policy reaches the engines that run the job: the control thread publishes an
// immutable snapshot (version, plan, first round it governs); each engine looks at it only
// at a round boundary and copies the plan into its SiteSync. A replaced snapshot is freed
// once every engine has passed a quiescent point after the swap (DPDK rte_rcu_qsbr, one
// reader id per engine), so no engine reads freed memory and none takes a lock.
#pragma once

#include <rte_rcu_qsbr.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "topology/plan.h"

namespace sg::dp {

struct PolicySnapshot {
  uint32_t version = 0;
  uint32_t from_round = 0;  // first round run under this plan; every gateway uses the same
  topo::Plan plan;
  // Policies agreed before this one, oldest first (PolicySlot::publish fills it, the newest
  // kEarlier): a switch may be agreed while the one before it has not come into force, and
  // an engine that reaches that one's first round must still find it.
  std::vector<std::shared_ptr<const PolicySnapshot>> earlier;
  static constexpr size_t kEarlier = 8;
  // The policy round r runs under: the newest whose first round is r or earlier (null: none
  // of these; the engine keeps what it runs).
  const PolicySnapshot* for_round(uint32_t r) const {
    if (from_round <= r) return this;
    for (auto it = earlier.rbegin(); it != earlier.rend(); ++it)
      if ((*it)->from_round <= r) return it->get();
    return nullptr;
  }
};

class PolicySlot {
 public:
  explicit PolicySlot(unsigned readers = 1);
  ~PolicySlot();
  PolicySlot(const PolicySlot&) = delete;
  PolicySlot& operator=(const PolicySlot&) = delete;

  // Control thread. The new snapshot carries the ones published before it (`earlier`).
  void publish(std::unique_ptr<PolicySnapshot> p);
  // Frees retired snapshots whose grace period is over; returns how many remain retired.
  size_t reclaim();
  uint32_t published_version() const { return published_version_; }

  // Reader `id` (the engine's index, < readers).
  void online_st(unsigned id = 0) { rte_rcu_qsbr_thread_online(qsbr_, id); }
  void offline_st(unsigned id = 0) { rte_rcu_qsbr_thread_offline(qsbr_, id); }
  void quiescent_st(unsigned id = 0) { rte_rcu_qsbr_quiescent(qsbr_, id); }
  const PolicySnapshot* peek_st() const { return current_.load(std::memory_order_acquire); }

 private:
  struct Retired {
    PolicySnapshot* p;
    uint64_t token;
  };
  rte_rcu_qsbr* qsbr_ = nullptr;
  std::atomic<PolicySnapshot*> current_{nullptr};
  std::vector<Retired> retired_;
  std::vector<std::shared_ptr<const PolicySnapshot>> history_;  // published, newest last (copies without `earlier`)
  uint32_t published_version_ = 0;
};

}  // namespace sg::dp
