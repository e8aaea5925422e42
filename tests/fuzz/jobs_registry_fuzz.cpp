// Fuzz target for the job registry (lib/jobs/registry.h) fed what the network brings: the
// bytes are a script of JOB messages for two sites (joins and leaves from any worker node,
// announcements from any site id, valid or not, with any status and text), the gateway's own
// calls (build, stop, activity) and time steps; each site's announcements reach the other
// in order unless the script drops them. Every message goes through build_job/parse_job,
// as on the wire.
// Invariants (trap on violation): a site never reserves more than its budget (memory, mbufs,
// job count), nor keeps more records than its bound; a refusal always says why; a job running
// and built at both sites has the same definition at both (the agreement the rounds rely on),
// unless the script forged a peer's live announcement: a sender that speaks for the peer can
// tell each site the other agreed to whatever it holds, and only sealed control traffic
// (security:) keeps such a sender out; the same script gives the same result twice (no
// dependence on anything but the input).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "jobs/registry.h"
#include "sync/local_group.h"
#include "wire/job_msg.h"

namespace {

using sg::Nanos;
using sg::jobs::Registry;
using sg::wire::JobOp;
using sg::wire::JobSpec;
using sg::wire::JobStatus;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

constexpr sg::jobs::Budget kBudget{1 << 20, 1000, 3};
constexpr size_t kMaxRecords = 4 * kBudget.max_jobs + 64;  // Registry::max_entries()

// Cost as the gateway's in spirit: memory from the model, mbufs from the workers; a zero model
// or an unknown dtype is an invalid definition.
bool cost(const JobSpec& s, sg::jobs::Cost& c, std::string& err) {
  if (s.model_bytes == 0 || s.dtype >= sg::wire::kJobDtypes || s.workers == 0) {
    err = "bad definition";
    return false;
  }
  c.memory_bytes = s.model_bytes;
  c.mbufs = 16ull * s.workers;
  return true;
}

struct Script {
  std::span<const uint8_t> in;
  size_t at = 0;
  bool more() const { return at < in.size(); }
  uint8_t u8() { return at < in.size() ? in[at++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | u8() << 8); }
};

// Definitions from a small space, so that sites and workers often meet on the same job.
JobSpec spec_from(Script& s) {
  JobSpec j;
  const uint8_t a = s.u8(), b = s.u8();
  j.id = 1 + (a & 3);
  static constexpr uint64_t kModels[] = {0, 4000, 300000, 900000, 2000000, 4000, 8000, 1};
  j.model_bytes = kModels[(a >> 2) & 7];
  j.chunk_bytes = (a & 0x20) ? 8192 : 1344;
  j.workers = static_cast<uint16_t>(b & 3);
  j.dtype = static_cast<uint8_t>((b >> 2) & 3);
  j.weight = static_cast<uint8_t>(1 + ((b >> 4) & 7));
  j.exact = (b & 0x80) != 0;
  return j;
}

// One message through the wire format: what the registry gets is what parse_job gives.
sg::wire::JobMsg wire_trip(uint16_t src, JobOp op, JobStatus status, const JobSpec& spec, std::string_view text,
                          std::vector<uint8_t>& buf) {
  buf.assign(sizeof(sg::wire::JobHeader) + sg::wire::kJobMaxText, 0);
  auto n = sg::wire::build_job(buf, src, op, status, spec, text);
  check(n.ok());
  auto m = sg::wire::parse_job(std::span<const uint8_t>(buf).first(*n));
  check(m.ok() && m->spec == spec && m->op == op && m->status == status);
  return *m;
}

struct Site {
  std::unique_ptr<Registry> r;
  uint16_t id;
};

void check_site(const Registry& r) {
  const auto used = r.used();
  check(used.memory_bytes <= kBudget.memory_bytes && used.mbufs <= kBudget.mbufs);
  const auto views = r.jobs();
  check(views.size() <= kMaxRecords);
  uint32_t reserved = 0;
  for (const auto& v : views) {
    if (v.status == JobStatus::kRefused || v.status == JobStatus::kEnded) check(!v.reason.empty());
    if (v.status == JobStatus::kPending || v.status == JobStatus::kRunning || v.built) ++reserved;
  }
  check(reserved <= kBudget.max_jobs);
}

// Runs the script; returns a digest of the final state.
std::string run(std::span<const uint8_t> in) {
  Script s{in};
  Site sites[2];
  for (uint16_t i = 0; i < 2; ++i) {
    sg::jobs::RegistryConfig c;
    c.self = static_cast<uint16_t>(i + 1);
    c.peers = {static_cast<uint16_t>(2 - i)};
    c.budget = kBudget;
    c.idle_timeout = 5 * sg::kSecond;
    sites[i] = Site{std::make_unique<Registry>(c, cost), c.self};
  }
  Nanos now = 0;
  bool forged = false;  // a peer's live announcement that the peer did not send
  std::vector<uint8_t> buf;
  std::string text;
  for (int steps = 0; s.more() && steps < 512; ++steps) {
    const uint8_t op = s.u8();
    Site& site = sites[op >> 7];
    Registry& r = *site.r;
    switch (op & 7) {
      case 0: {  // a worker's join
        const uint16_t node = static_cast<uint16_t>(sg::sync::kWorkerNodeBase + (s.u8() & 7));
        auto m = wire_trip(node, JobOp::kJoin, JobStatus::kNone, spec_from(s), {}, buf);
        const auto reply = r.on_join(m.spec, m.src_node, now);
        if (reply.status == JobStatus::kRefused) check(!reply.text.empty());
        break;
      }
      case 1: {  // a worker's leave
        const uint16_t node = static_cast<uint16_t>(sg::sync::kWorkerNodeBase + (s.u8() & 7));
        auto m = wire_trip(node, JobOp::kLeave, JobStatus::kNone, spec_from(s), {}, buf);
        r.on_leave(m.spec.id, m.src_node, now);
        break;
      }
      case 2: {  // an announcement from any site id (a peer, itself, or a stranger), any status
        const uint8_t who = s.u8();
        const uint16_t src = who & 0x80 ? s.u16() : static_cast<uint16_t>(1 + (who & 3));
        const auto status = static_cast<JobStatus>(1 + s.u8() % 4);
        text.assign(s.u8() & 15, 'x');
        auto m = wire_trip(src, JobOp::kAnnounce, status, spec_from(s), text, buf);
        const uint16_t peer = sites[1 - (op >> 7)].id;
        forged |= m.src_node == peer && (m.status == JobStatus::kPending || m.status == JobStatus::kRunning);
        r.on_announce(m.src_node, m.spec, m.status, m.text, now);
        break;
      }
      case 3: {  // both tick; announcements cross, each possibly lost
        uint8_t drop = s.u8();
        std::vector<sg::jobs::Announcement> out[2] = {sites[0].r->tick(now), sites[1].r->tick(now)};
        for (int i = 0; i < 2; ++i)
          for (const auto& a : out[i]) {
            const bool lost = drop & 1;
            drop = static_cast<uint8_t>(drop >> 1 | drop << 7);
            if (lost) continue;
            auto m = wire_trip(sites[i].id, JobOp::kAnnounce, a.status, a.spec, a.text, buf);
            sites[1 - i].r->on_announce(m.src_node, m.spec, m.status, m.text, now);
          }
        break;
      }
      case 4: {  // the gateway builds what was agreed (or fails to) and tears down what ended
        const bool ok = (s.u8() & 3) != 0;
        for (const auto& j : r.to_start()) r.started(j.id, ok, ok ? "" : "no room after all", now);
        for (uint32_t id : r.to_stop()) r.stopped(id);
        break;
      }
      case 5:
        r.on_activity(1 + (s.u8() & 3), now);
        break;
      default:  // time passes: up to ~6.5 s, past the idle timeout and the holds
        now += static_cast<Nanos>(s.u16()) * 100 * sg::kMicro;
        break;
    }
    check_site(r);
  }
  // Agreement: a job running and built at both sites has one definition.
  std::string digest;
  if (!forged)
    for (const auto& a : sites[0].r->jobs()) {
      const auto* b = sites[1].r->find(a.spec.id);
      if (b && a.status == JobStatus::kRunning && b->status == JobStatus::kRunning && a.built && b->built)
        check(a.spec == b->spec);
    }
  for (const auto& site : sites)
    for (const auto& v : site.r->jobs())
      digest += std::to_string(v.spec.id) + ":" + std::to_string(static_cast<int>(v.status)) + ":" + v.reason + ";";
  return digest;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  check(run(in) == run(in));
  return 0;
}
