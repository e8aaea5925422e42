#include "jobs/registry.h"

#include <algorithm>
#include <cstdio>

namespace sg::jobs {

using wire::JobSpec;
using wire::JobStatus;

namespace {
bool live(JobStatus s) { return s == JobStatus::kPending || s == JobStatus::kRunning; }
std::string mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return b;
}
}  // namespace

Registry::Registry(RegistryConfig cfg, CostFn cost) : cfg_(std::move(cfg)), cost_(std::move(cost)) {}

void Registry::pin(const JobSpec& spec) {
  Entry& e = jobs_[spec.id];
  e = Entry{};
  e.v.spec = spec;
  e.v.status = JobStatus::kRunning;
  e.v.defined_by = cfg_.self;
  e.v.pinned = true;
  e.v.built = true;
}

Cost Registry::used() const {
  Cost c;
  for (const auto& [id, e] : jobs_)
    if (e.reserved) {
      c.memory_bytes += e.v.cost.memory_bytes;
      c.mbufs += e.v.cost.mbufs;
    }
  return c;
}

std::string Registry::fit_error(const JobSpec& spec, const Cost& c) const {
  const Cost u = used();
  uint32_t n = 0;
  std::string holders;
  for (const auto& [id, e] : jobs_)
    if (e.reserved) {
      ++n;
      holders += (holders.empty() ? "" : ", ") + std::to_string(id);
    }
  const std::string held = n ? " (jobs " + holders + " hold " + mib(u.memory_bytes) + ", " + std::to_string(u.mbufs) +
                                   " mbufs)"
                             : "";
  const std::string job = "job " + std::to_string(spec.id);
  if (n + 1 > cfg_.budget.max_jobs)
    return job + " does not fit: this gateway serves at most " + std::to_string(cfg_.budget.max_jobs) +
           " announced jobs (admission.max_jobs)" + held;
  if (c.memory_bytes > cfg_.budget.memory_bytes - std::min(u.memory_bytes, cfg_.budget.memory_bytes))
    return job + " does not fit: it needs " + mib(c.memory_bytes) + " of gateway memory for a " +
           std::to_string(spec.model_bytes) + "-byte model, " +
           mib(cfg_.budget.memory_bytes - std::min(u.memory_bytes, cfg_.budget.memory_bytes)) + " of admission.memory_mb (" +
           mib(cfg_.budget.memory_bytes) + ") are free" + held;
  if (c.mbufs > cfg_.budget.mbufs - std::min(u.mbufs, cfg_.budget.mbufs))
    return job + " does not fit: it needs " + std::to_string(c.mbufs) + " mbufs, " +
           std::to_string(cfg_.budget.mbufs - std::min(u.mbufs, cfg_.budget.mbufs)) + " of the pool's " +
           std::to_string(cfg_.budget.mbufs) + " for jobs are free (dataplane.mbufs)" + held;
  return {};
}

Registry::Entry& Registry::admit(const JobSpec& spec, uint16_t site, Nanos now) {
  Entry& e = jobs_[spec.id];
  e = Entry{};
  e.v.spec = spec;
  e.v.defined_by = site;
  e.last_activity = now;
  std::string err;
  Cost c;
  if (!cost_(spec, c, err)) {
    refuse(e, "job " + std::to_string(spec.id) + ": " + err, now);
    return e;
  }
  if (std::string why = fit_error(spec, c); !why.empty()) {
    refuse(e, std::move(why), now);
    return e;
  }
  e.v.cost = c;
  e.reserved = true;
  e.v.status = JobStatus::kPending;
  changed_ = true;
  maybe_run(e);
  return e;
}

void Registry::refuse(Entry& e, std::string reason, Nanos now) {
  if (close(e, JobStatus::kRefused, std::move(reason), now)) ++refusals_;
}

void Registry::end(Entry& e, std::string reason, Nanos now) { close(e, JobStatus::kEnded, std::move(reason), now); }

bool Registry::close(Entry& e, JobStatus status, std::string reason, Nanos now) {
  if (e.v.pinned) return false;
  e.v.status = status;
  e.v.reason = std::move(reason);
  e.ended_at = now;
  if (!e.v.built) e.reserved = false;  // a built job's cost returns in stopped()
  changed_ = true;
  return true;
}

void Registry::maybe_run(Entry& e) {
  if (e.v.status != JobStatus::kPending) return;
  for (uint16_t p : cfg_.peers) {
    auto st = e.peer_status.find(p);
    if (st == e.peer_status.end() || !live(st->second) || e.peer_spec[p] != e.v.spec) return;
  }
  e.v.status = JobStatus::kRunning;
  changed_ = true;
}

std::string Registry::waiting_for(const Entry& e) const {
  std::string sites;
  for (uint16_t p : cfg_.peers) {
    auto st = e.peer_status.find(p);
    if (st == e.peer_status.end() || !live(st->second))
      sites += (sites.empty() ? "" : ", ") + std::to_string(p);
  }
  return "job " + std::to_string(e.v.spec.id) + " admitted at site " + std::to_string(cfg_.self) +
         ", waiting for site(s) " + sites + " to hold it (their workers, or their gateways, have not announced it yet)";
}

Reply Registry::on_join(const JobSpec& spec, uint16_t node, Nanos now) {
  auto it = jobs_.find(spec.id);
  if (it != jobs_.end()) {
    Entry& e = it->second;
    // An ended job that is no longer built: its workers (or new ones) start it afresh.
    if (e.v.status == JobStatus::kEnded && !e.v.built) {
      jobs_.erase(it);
      it = jobs_.end();
    } else if (!live(e.v.status)) {
      return Reply{e.v.status, e.v.reason};
    } else if (spec != e.v.spec) {
      return Reply{JobStatus::kRefused, "site " + std::to_string(e.v.defined_by) + " defines job " +
                                            std::to_string(spec.id) + " with " +
                                            wire::job_spec_difference(e.v.spec, spec) + ", this worker sent another"};
    }
  }
  if (it == jobs_.end() && jobs_.size() >= max_entries()) {
    // A LAN host announcing job after job must not grow the registry without bound (each
    // refusal is held and announced for a while): refused without a record.
    ++refusals_;
    return Reply{JobStatus::kRefused, "job " + std::to_string(spec.id) + " not considered: site " +
                                          std::to_string(cfg_.self) + " holds " + std::to_string(jobs_.size()) +
                                          " job records (running, pending, lately refused or ended); try again later"};
  }
  Entry& e = it != jobs_.end() ? it->second : admit(spec, cfg_.self, now);
  if (live(e.v.status)) {
    e.last_activity = now;
    e.left.erase(std::remove(e.left.begin(), e.left.end(), node), e.left.end());
    e.v.workers_left = static_cast<uint32_t>(e.left.size());
  }
  if (e.v.status == JobStatus::kPending) return Reply{JobStatus::kPending, waiting_for(e)};
  if (e.v.status == JobStatus::kRunning && !e.v.built)
    return Reply{JobStatus::kPending, "job " + std::to_string(spec.id) + " agreed by every site, being built"};
  return Reply{e.v.status, e.v.reason};
}

void Registry::on_leave(uint32_t job, uint16_t node, Nanos now) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !live(it->second.v.status)) return;
  Entry& e = it->second;
  if (std::find(e.left.begin(), e.left.end(), node) == e.left.end()) e.left.push_back(node);
  e.v.workers_left = static_cast<uint32_t>(e.left.size());
  e.last_activity = now;
  if (e.left.size() >= e.v.spec.workers && e.v.spec.workers > 0)
    end(e, "every worker of site " + std::to_string(cfg_.self) + " left", now);
}

void Registry::on_announce(uint16_t site, const JobSpec& spec, JobStatus status, std::string_view text, Nanos now) {
  if (std::find(cfg_.peers.begin(), cfg_.peers.end(), site) == cfg_.peers.end()) return;
  auto it = jobs_.find(spec.id);
  const std::string job = "job " + std::to_string(spec.id);
  if (status == JobStatus::kRefused) {
    if (it != jobs_.end() && live(it->second.v.status))
      refuse(it->second, "site " + std::to_string(site) + " refused " + job + ": " + std::string(text), now);
    return;
  }
  if (status == JobStatus::kEnded) {
    if (it == jobs_.end()) return;
    Entry& e = it->second;
    e.peer_status[site] = status;
    if (e.v.status != JobStatus::kRunning || e.peer_ended_at >= 0) return;
    e.peer_end = "site " + std::to_string(site) + " ended it (" + std::string(text) + ")";
    e.peer_ended_at = now;
    if (!e.v.built || (e.v.spec.workers > 0 && e.left.size() >= e.v.spec.workers)) end(e, e.peer_end, now);
    return;
  }
  if (!live(status)) return;
  if (it == jobs_.end() && jobs_.size() >= max_entries()) return;  // heard again next interval
  if (it == jobs_.end()) {
    // A job this site does not hold: learnt from the peer (a restart, or its workers came
    // first), admitted here as if our own workers had announced it.
    Entry& e = admit(spec, site, now);
    e.peer_spec[site] = spec;
    e.peer_status[site] = status;
    maybe_run(e);
    return;
  }
  Entry& e = it->second;
  if (!live(e.v.status)) return;  // ended or refused here: announced as such until the hold ends
  if (spec != e.v.spec) {
    refuse(e, "site " + std::to_string(site) + " defines " + job + " with " + wire::job_spec_difference(spec, e.v.spec),
           now);
    return;
  }
  e.peer_spec[site] = spec;
  e.peer_status[site] = status;
  if (e.v.status == JobStatus::kPending) e.last_activity = now;  // a peer still waits for it
  maybe_run(e);
}

void Registry::on_activity(uint32_t job, Nanos now) {
  auto it = jobs_.find(job);
  if (it != jobs_.end()) it->second.last_activity = now;
}

std::vector<JobSpec> Registry::to_start() const {
  std::vector<JobSpec> out;
  for (const auto& [id, e] : jobs_)
    if (e.v.status == JobStatus::kRunning && !e.v.built) out.push_back(e.v.spec);
  return out;
}

void Registry::started(uint32_t job, bool ok, const std::string& error, Nanos now) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  if (ok) {
    it->second.v.built = true;
    it->second.last_activity = now;
  } else {
    refuse(it->second, "job " + std::to_string(job) + " could not be built at site " + std::to_string(cfg_.self) + ": " + error,
           now);
  }
}

std::vector<uint32_t> Registry::to_stop() const {
  std::vector<uint32_t> out;
  for (const auto& [id, e] : jobs_)
    if (!live(e.v.status) && e.v.built && !e.v.pinned) out.push_back(id);
  return out;
}

void Registry::stopped(uint32_t job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  it->second.v.built = false;
  it->second.reserved = false;
}

std::vector<Announcement> Registry::tick(Nanos now) {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Entry& e = it->second;
    if (live(e.v.status) && !e.v.pinned && cfg_.idle_timeout > 0 && now - e.last_activity > cfg_.idle_timeout) {
      char why[96];
      std::snprintf(why, sizeof why, "idle for %.0f s (admission.idle_timeout_s)", seconds(now - e.last_activity));
      end(e, why, now);
    } else if (live(e.v.status) && e.peer_ended_at >= 0 &&
               now - std::max(e.peer_ended_at, e.last_activity) >= cfg_.peer_end_grace) {
      end(e, e.peer_end, now);
    }
    if (!live(e.v.status) && !e.v.built && now - e.ended_at >= cfg_.refusal_hold) {
      it = jobs_.erase(it);
      continue;
    }
    ++it;
  }
  std::vector<Announcement> out;
  if (!changed_ && last_announce_ >= 0 && now - last_announce_ < cfg_.announce_interval) return out;
  last_announce_ = now;
  changed_ = false;
  for (const auto& [id, e] : jobs_) out.push_back(Announcement{e.v.spec, e.v.status, e.v.reason});
  return out;
}

std::vector<JobView> Registry::jobs() const {
  std::vector<JobView> out;
  for (const auto& [id, e] : jobs_) out.push_back(e.v);
  return out;
}

const JobView* Registry::find(uint32_t job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second.v;
}

}  // namespace sg::jobs
