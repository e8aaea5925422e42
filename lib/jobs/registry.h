// The jobs a gateway serves when its workers announce them (config: admission). One per
// gateway, on its control thread; no DPDK, no I/O: the gateway feeds it the JOB messages it
// received (wire/job_msg.h) and acts on what it asks for (start, stop, send).
//
// The rules, per job id:
//   join        A worker's kJoin defines the job at its site if the site has none: admitted
//               if its definition is valid and its cost fits what the budget has left
//               (memory, mbufs, job count), else refused with the reason. A kJoin that
//               differs from the definition the site holds is refused, naming the site that
//               defined it and the first field that differs.
//   agreement   Every live job is announced to every peer every announce interval (its
//               definition and status: idempotent state, no retransmission needed). A site
//               that hears of a job it does not hold admits it the same way (so a restarted
//               gateway re-learns its jobs from its peers as well as from its workers). Two
//               definitions that differ refuse the job at both sites, each naming the other
//               site and the field. A job runs once every peer announced the same definition
//               as admitted there (pending or running): every site has reserved its cost,
//               so none can refuse it later. It takes a peer's announcements for that
//               peer's: a host that speaks for the peers can tell each site the others agreed
//               to what it holds. Sealed control traffic (security:) keeps such hosts out.
//   refusal     A refusal is announced too (for `refusal_hold`), and every site that hears
//               it refuses the job, so no site waits for one that will never come; after the
//               hold, workers that join again are judged afresh (memory may have freed up).
//   end         When every worker of the site left (kLeave), or nothing happened for
//               `idle_timeout` (no round completed, no worker message), or a peer announced
//               it ended while it ran here -- then once this site's workers left too, or
//               nothing happened here for `peer_end_grace`: a peer's workers leave after
//               their last result, while this site's last round may still be on its way
//               (ending it then would cut its result short). The job's cost returns to the
//               budget once the gateway stopped it (stopped()). Ended jobs are announced for
//               `refusal_hold`.
//   pinned      Jobs from the YAML: running from the start, never ended, never refused
//               (their cost is outside the budget); workers joining them must match them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "wire/job_msg.h"

namespace sg::jobs {

// What a job holds at a gateway while it lives.
struct Cost {
  uint64_t memory_bytes = 0;
  uint64_t mbufs = 0;
};

struct Budget {
  uint64_t memory_bytes = 0;
  uint64_t mbufs = 0;
  uint32_t max_jobs = 16;
};

struct RegistryConfig {
  uint16_t self = 0;             // this site's id
  std::vector<uint16_t> peers;   // every other site's id
  Budget budget;
  Nanos announce_interval = 200 * kMilli;
  Nanos idle_timeout = 300 * kSecond;  // 0: never
  Nanos refusal_hold = 3 * kSecond;
  // A peer ended it: quiet this long here, then end. Shorter than refusal_hold, so that the
  // peer still holds its ended record when this site announces the end (after the hold it
  // would take this site's "running" for a new job).
  Nanos peer_end_grace = 2 * kSecond;
};

// A job's cost, or an error naming what is wrong with its definition (a config key).
using CostFn = std::function<bool(const wire::JobSpec&, Cost&, std::string& error)>;

struct Reply {
  wire::JobStatus status = wire::JobStatus::kPending;
  std::string text;
};

struct Announcement {
  wire::JobSpec spec;
  wire::JobStatus status = wire::JobStatus::kPending;
  std::string text;
};

// One job as the telemetry shows it.
struct JobView {
  wire::JobSpec spec;
  wire::JobStatus status = wire::JobStatus::kPending;
  std::string reason;      // refused / ended: why
  uint16_t defined_by = 0; // the site whose definition it is
  bool pinned = false;
  bool built = false;
  Cost cost;
  uint32_t workers_left = 0;
};

class Registry {
 public:
  Registry(RegistryConfig cfg, CostFn cost);

  // A YAML job: running, built by the gateway at start.
  void pin(const wire::JobSpec& spec);

  // A worker's kJoin (node: its LTP node id): the reply to send it.
  Reply on_join(const wire::JobSpec& spec, uint16_t node, Nanos now);
  void on_leave(uint32_t job, uint16_t node, Nanos now);
  // A peer gateway's kAnnounce.
  void on_announce(uint16_t site, const wire::JobSpec& spec, wire::JobStatus status, std::string_view text, Nanos now);
  // The job completed a round (or its workers pushed): not idle.
  void on_activity(uint32_t job, Nanos now);

  // Jobs agreed everywhere and not built yet: the gateway builds each, then calls started().
  std::vector<wire::JobSpec> to_start() const;
  // ok false: the gateway could not build it after all; the job is refused with `error`.
  void started(uint32_t job, bool ok, const std::string& error, Nanos now);
  // Jobs that ended or were refused while built: the gateway tears each down, then calls stopped().
  std::vector<uint32_t> to_stop() const;
  void stopped(uint32_t job);
  // Advances timers (idle jobs end, held refusals expire); returns what to announce to every
  // peer now: everything, every announce interval, and at once after any job changed status
  // here (so agreement takes a round trip, not an interval).
  std::vector<Announcement> tick(Nanos now);

  std::vector<JobView> jobs() const;
  const JobView* find(uint32_t job) const;
  Cost used() const;  // what the admitted jobs hold (pinned ones excluded)
  uint64_t refusals() const { return refusals_; }

 private:
  struct Entry {
    JobView v;
    std::map<uint16_t, wire::JobSpec> peer_spec;        // what each peer announced
    std::map<uint16_t, wire::JobStatus> peer_status;
    std::vector<uint16_t> left;  // worker nodes that left
    Nanos last_activity = 0;
    Nanos ended_at = 0;          // refused / ended: when (the hold counts from it)
    Nanos peer_ended_at = -1;    // a peer announced it ended (while it runs here)
    std::string peer_end;        // that peer's reason
    bool reserved = false;       // its cost counts against the budget
  };
  // Admits `spec` defined by `site` (self or a peer): a new pending entry, or a refused one.
  Entry& admit(const wire::JobSpec& spec, uint16_t site, Nanos now);
  void refuse(Entry& e, std::string reason, Nanos now);
  void end(Entry& e, std::string reason, Nanos now);
  // Refused or ended: held for refusal_hold, announced; false for a pinned job (never closed).
  bool close(Entry& e, wire::JobStatus status, std::string reason, Nanos now);
  void maybe_run(Entry& e);
  std::string waiting_for(const Entry& e) const;
  std::string fit_error(const wire::JobSpec& spec, const Cost& c) const;
  // Records kept at most (live jobs, refusals and ends held for refusal_hold).
  size_t max_entries() const { return 4 * size_t(cfg_.budget.max_jobs) + 64; }

  RegistryConfig cfg_;
  CostFn cost_;
  std::map<uint32_t, Entry> jobs_;
  Nanos last_announce_ = -1;
  bool changed_ = false;  // a job's status changed since the last announcement
  uint64_t refusals_ = 0;
};

}  // namespace sg::jobs
