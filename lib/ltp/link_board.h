// LinkBoard: what every engine's LinkShare for one peer link sees of the others. A gateway
// with several engines (lcores) has one LinkShare per engine and link (a share is owned by
// its engine and not thread-safe); without a common board each engine's share splits only
// its own part of the link, and the engines' link controllers compete as flows do. Weights
// then hold only while every job is backlogged on every engine: a job whose shard ended on
// one engine leaves that engine's whole part to the others (measured: 2:1 weights gave
// 1.57:1 with two engines). With one board the weights are the link's, across engines:
//
//   delivered, inflight   summed over every engine's flows: each engine's link controller
//                         measures the whole link's delivery rate and window, so the
//                         engines' controllers agree on one link model instead of
//                         competing for it;
//   groups (jobs)         weight, flows sending now (all engines): a flow's part is its
//                         group's weight over the weights of the groups sending anywhere,
//                         split among the group's sending flows anywhere;
//   last delivery         per engine: one engine's timeout is no outage if another engine's
//                         flow got through since.
//
// Concurrency: engines update counters with relaxed atomic adds, only when a flow starts or
// stops sending and per ACK (two adds); readers clamp what two engines' interleaved updates
// can show for an instant (a weight sum one group short). No lock, no allocation after
// construction. Groups of a shared board are opened and closed by one control thread while
// no flow of theirs is attached (a gateway: when it builds and frees a job); a private board
// (one engine) opens a group at its first attach and closes it with its last flow.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "common/clock.h"

namespace sg::ltp {

class LinkBoard {
 public:
  static constexpr uint64_t kNoKey = ~0ull - 1;  // a free group entry
  static constexpr uint32_t kMaxMembers = 64;    // engines on one link

  // `shared`: several engines (groups opened by open_group only); else one owner.
  LinkBoard(uint32_t max_groups, bool shared);
  LinkBoard(const LinkBoard&) = delete;
  LinkBoard& operator=(const LinkBoard&) = delete;

  bool shared() const { return shared_; }
  // Control thread, shared boards: a job's group, before any of its flows attaches. False
  // if the key is open already or every entry is taken (nothing changed then).
  bool open_group(uint64_t key, uint32_t weight);
  bool is_open(uint64_t key) const;
  // After the last of its flows detached (a gateway: after the job's runners are freed).
  void close_group(uint64_t key);
  uint32_t open_groups() const;

  uint64_t delivered() const { return delivered_.load(std::memory_order_relaxed); }
  uint64_t inflight() const;
  uint64_t backlogged_weight() const;
  uint32_t backlogged_flows() const;

 private:
  friend class LinkShare;
  struct alignas(64) Group {
    std::atomic<uint64_t> key{kNoKey};
    std::atomic<uint32_t> weight{0};
    std::atomic<int32_t> flows{0};       // attached
    std::atomic<int32_t> backlogged{0};  // attached with something to send
  };

  int32_t join();  // a LinkShare's member index; -1 if kMaxMembers joined
  Group* find(uint64_t key);
  uint32_t index(const Group& g) const { return static_cast<uint32_t>(&g - groups_.get()); }
  Group& group(uint32_t i) { return groups_[i]; }
  void set_backlogged(Group& g, bool b);

  const bool shared_;
  const uint32_t max_groups_;
  std::unique_ptr<Group[]> groups_;
  alignas(64) std::atomic<uint64_t> delivered_{0};
  alignas(64) std::atomic<int64_t> inflight_{0};
  std::atomic<int64_t> backlogged_weight_{0};
  std::atomic<int32_t> backlogged_flows_{0};
  std::atomic<int32_t> members_{0};
  // Per member: its newest ACK that acknowledged something (its own line: one writer).
  struct alignas(64) Member {
    std::atomic<Nanos> last_delivery{-1};
  };
  Member last_[kMaxMembers];
};

}  // namespace sg::ltp
