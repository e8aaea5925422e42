// Peers' restarts as a job's control thread sees them (a peer's control channel started over
// with a new session: a new process), for the job's engines, each of which gives up what the
// old process owed its running round (SiteSync::peer_restarted). One writer (the job's
// policy agent), any number of readers; the engines load one word per poll.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace sg::dp {

class PeerRestarts {
 public:
  explicit PeerRestarts(size_t sites) : count_(new std::atomic<uint32_t>[sites]()), sites_(sites) {}
  size_t sites() const { return sites_; }
  // Control thread: plan site `site` has restarted `restarts` times since this gateway began.
  void publish(size_t site, uint32_t restarts) {
    if (site >= sites_) return;
    count_[site].store(restarts, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  // Engines: the per-site counts are worth reading only when this moved.
  uint32_t generation() const { return generation_.load(std::memory_order_acquire); }
  uint32_t restarts(size_t site) const { return site < sites_ ? count_[site].load(std::memory_order_relaxed) : 0; }

 private:
  std::atomic<uint32_t> generation_{0};
  std::unique_ptr<std::atomic<uint32_t>[]> count_;
  size_t sites_;
};

}  // namespace sg::dp
