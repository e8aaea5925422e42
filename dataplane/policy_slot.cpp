#include "dataplane/policy_slot.h"

#include <rte_malloc.h>

#include <algorithm>
#include <stdexcept>

namespace sg::dp {

PolicySlot::PolicySlot(unsigned readers) {
  readers = std::max(readers, 1u);
  const size_t sz = rte_rcu_qsbr_get_memsize(readers);
  qsbr_ = static_cast<rte_rcu_qsbr*>(rte_zmalloc("sg_policy_qsbr", sz, RTE_CACHE_LINE_SIZE));
  if (!qsbr_ || rte_rcu_qsbr_init(qsbr_, readers) != 0)
    throw std::runtime_error("cannot set up the policy RCU state");
  for (unsigned r = 0; r < readers; ++r)
    if (rte_rcu_qsbr_thread_register(qsbr_, r) != 0) throw std::runtime_error("cannot register a policy reader");
}

PolicySlot::~PolicySlot() {
  delete current_.exchange(nullptr);
  for (auto& r : retired_) delete r.p;
  rte_free(qsbr_);
}

void PolicySlot::publish(std::unique_ptr<PolicySnapshot> p) {
  published_version_ = p->version;
  p->earlier = history_;
  auto copy = std::make_shared<PolicySnapshot>();
  copy->version = p->version;
  copy->from_round = p->from_round;
  copy->plan = p->plan;
  history_.push_back(std::move(copy));
  if (history_.size() > PolicySnapshot::kEarlier) history_.erase(history_.begin());
  PolicySnapshot* old = current_.exchange(p.release(), std::memory_order_acq_rel);
  if (old) retired_.push_back({old, rte_rcu_qsbr_start(qsbr_)});
  reclaim();
}

size_t PolicySlot::reclaim() {
  size_t kept = 0;
  for (auto& r : retired_) {
    if (rte_rcu_qsbr_check(qsbr_, r.token, false) == 1) {
      delete r.p;
    } else {
      retired_[kept++] = r;
    }
  }
  retired_.resize(kept);
  return kept;
}

}  // namespace sg::dp
