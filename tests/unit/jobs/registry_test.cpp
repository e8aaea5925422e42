// The job registry's rules (lib/jobs/registry.h): admission, agreement between sites,
// refusals that name the site and the field, ends, restarts. Sites exchange announcements
// through a direct in-memory hand-over, as the gateways' JOB messages would.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "jobs/registry.h"

namespace sg::jobs {
namespace {

using wire::JobSpec;
using wire::JobStatus;

constexpr uint64_t kMiB = 1 << 20;

JobSpec job(uint32_t id, uint64_t model_bytes, uint16_t workers = 2) { return JobSpec{id, model_bytes, 8192, workers, 0, 1}; }

// Cost: 4x the model (the test's own rule); a model of 0 bytes is invalid.
bool cost(const JobSpec& s, Cost& c, std::string& err) {
  if (s.model_bytes == 0) {
    err = "model_bytes must be more than 0";
    return false;
  }
  c.memory_bytes = 4 * s.model_bytes;
  c.mbufs = 100;
  return true;
}

struct Cluster {
  std::vector<std::unique_ptr<Registry>> sites;  // site ids 1..n
  Nanos now = 0;
  explicit Cluster(size_t n, uint64_t memory = 100 * kMiB) {
    for (size_t i = 0; i < n; ++i) sites.push_back(make(static_cast<uint16_t>(i + 1), n, memory));
  }
  static std::unique_ptr<Registry> make(uint16_t self, size_t n, uint64_t memory) {
    RegistryConfig c;
    c.self = self;
    for (size_t j = 1; j <= n; ++j)
      if (j != self) c.peers.push_back(static_cast<uint16_t>(j));
    c.budget = Budget{memory, 1000, 16};
    c.idle_timeout = 10 * kSecond;
    return std::make_unique<Registry>(c, cost);
  }
  Registry& at(uint16_t site) { return *sites[site - 1]; }
  // One announce interval: every site ticks and its announcements reach every other site;
  // jobs agreed are built, jobs ended are torn down (as the gateway does).
  void step(Nanos dt = 200 * kMilli) {
    now += dt;
    std::vector<std::vector<Announcement>> out;
    for (auto& r : sites) out.push_back(r->tick(now));
    for (size_t i = 0; i < sites.size(); ++i)
      for (size_t j = 0; j < sites.size(); ++j)
        if (i != j)
          for (const auto& a : out[i]) sites[j]->on_announce(static_cast<uint16_t>(i + 1), a.spec, a.status, a.text, now);
    for (auto& r : sites) {
      for (const auto& s : r->to_start()) r->started(s.id, true, "", now);
      for (uint32_t id : r->to_stop()) r->stopped(id);
    }
  }
  JobStatus status(uint16_t site, uint32_t id) {
    const JobView* v = at(site).find(id);
    return v ? v->status : JobStatus::kNone;
  }
};

TEST(Registry, ALoneSiteRunsAJobAtItsWorkersFirstJoin) {
  Cluster c(1);
  Reply r = c.at(1).on_join(job(7, 4 * kMiB), 0x8000, 0);
  EXPECT_EQ(r.status, JobStatus::kPending) << "agreed, not built yet";
  ASSERT_EQ(c.at(1).to_start().size(), 1u);
  c.step();
  EXPECT_EQ(c.at(1).on_join(job(7, 4 * kMiB), 0x8001, c.now).status, JobStatus::kRunning);
  EXPECT_EQ(c.at(1).used().memory_bytes, 16 * kMiB);
}

TEST(Registry, ThreeSitesAgreeBeforeTheFirstRound) {
  Cluster c(3);
  Reply r = c.at(1).on_join(job(7, kMiB), 0x8000, 0);
  EXPECT_EQ(r.status, JobStatus::kPending);
  EXPECT_NE(r.text.find("waiting for site(s) 2, 3"), std::string::npos) << r.text;
  EXPECT_TRUE(c.at(1).to_start().empty()) << "not before the other sites hold it";
  c.step();  // sites 2 and 3 learn it from site 1
  EXPECT_EQ(c.status(2, 7), JobStatus::kPending) << "site 2 heard site 1, not yet site 3";
  EXPECT_TRUE(c.at(2).to_start().empty());
  c.step();
  for (uint16_t s = 1; s <= 3; ++s) {
    EXPECT_EQ(c.status(s, 7), JobStatus::kRunning) << "site " << s;
    EXPECT_TRUE(c.at(s).find(7)->built);
    EXPECT_EQ(c.at(s).find(7)->defined_by, 1);
  }
  EXPECT_EQ(c.at(2).on_join(job(7, kMiB), 0x8000, c.now).status, JobStatus::kRunning);
}

TEST(Registry, AWorkerWithAnotherDefinitionIsToldTheSiteAndField) {
  Cluster c(2);
  c.at(1).on_join(job(7, kMiB), 0x8000, 0);
  c.step();
  c.step();
  ASSERT_EQ(c.status(2, 7), JobStatus::kRunning);
  Reply r = c.at(2).on_join(job(7, 2 * kMiB), 0x8000, c.now);
  EXPECT_EQ(r.status, JobStatus::kRefused);
  EXPECT_NE(r.text.find("site 1"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("model_bytes 1048576"), std::string::npos) << r.text;
  EXPECT_EQ(c.status(2, 7), JobStatus::kRunning) << "the job itself goes on";
}

TEST(Registry, SitesThatDisagreeRefuseTheJobEverywhere) {
  Cluster c(2);
  c.at(1).on_join(job(7, kMiB), 0x8000, 0);
  JobSpec other = job(7, kMiB);
  other.workers = 4;
  c.at(2).on_join(other, 0x8000, 0);  // before either heard of the other
  c.step();
  for (uint16_t s = 1; s <= 2; ++s) {
    ASSERT_EQ(c.status(s, 7), JobStatus::kRefused) << "site " << s;
    const std::string& why = c.at(s).find(7)->reason;
    EXPECT_NE(why.find("site " + std::to_string(3 - s)), std::string::npos) << why;
    EXPECT_NE(why.find("workers"), std::string::npos) << why;
  }
  EXPECT_EQ(c.at(1).on_join(job(7, kMiB), 0x8000, c.now).status, JobStatus::kRefused);
  EXPECT_EQ(c.at(1).used().memory_bytes, 0u) << "a refused job holds nothing";
  EXPECT_TRUE(c.at(1).to_start().empty());
}

TEST(Registry, AJobThatDoesNotFitIsRefusedWithTheNumbers) {
  Cluster c(1, 100 * kMiB);
  c.at(1).on_join(job(1, 10 * kMiB), 0x8000, 0);  // 40 MiB
  c.at(1).on_join(job(2, 10 * kMiB), 0x8000, 0);  // 40 MiB
  c.step();
  Reply r = c.at(1).on_join(job(3, 10 * kMiB), 0x8000, c.now);
  EXPECT_EQ(r.status, JobStatus::kRefused);
  EXPECT_NE(r.text.find("job 3 does not fit: it needs 40.0 MiB"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("20.0 MiB of admission.memory_mb"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("jobs 1, 2 hold 80.0 MiB"), std::string::npos) << r.text;
  EXPECT_EQ(c.at(1).refusals(), 1u);
  // Job 1's workers leave: once torn down and the refusal's hold passed, job 3 fits.
  c.at(1).on_leave(1, 0x8000, c.now);
  EXPECT_EQ(c.status(1, 1), JobStatus::kRunning) << "one of two workers left";
  c.at(1).on_leave(1, 0x8001, c.now);
  EXPECT_EQ(c.status(1, 1), JobStatus::kEnded);
  c.step();
  EXPECT_EQ(c.at(1).used().memory_bytes, 40 * kMiB);
  c.step(4 * kSecond);
  EXPECT_EQ(c.at(1).on_join(job(3, 10 * kMiB), 0x8000, c.now).status, JobStatus::kPending);
}

TEST(Registry, ARefusalAtOneSiteReachesTheOthers) {
  Cluster c(2);
  c.sites[1] = Cluster::make(2, 2, 2 * kMiB);  // site 2 has room for little
  c.at(1).on_join(job(7, kMiB), 0x8000, 0);    // 4 MiB: fits at site 1 only
  c.step();
  EXPECT_EQ(c.status(2, 7), JobStatus::kRefused);
  c.step();
  ASSERT_EQ(c.status(1, 7), JobStatus::kRefused);
  EXPECT_NE(c.at(1).find(7)->reason.find("site 2 refused job 7: job 7 does not fit"), std::string::npos)
      << c.at(1).find(7)->reason;
  EXPECT_EQ(c.at(1).used().memory_bytes, 0u);
}

TEST(Registry, AnInvalidDefinitionIsRefusedWithTheError) {
  Cluster c(1);
  Reply r = c.at(1).on_join(job(7, 0), 0x8000, 0);
  EXPECT_EQ(r.status, JobStatus::kRefused);
  EXPECT_EQ(r.text, "job 7: model_bytes must be more than 0");
}

TEST(Registry, AnIdleJobEndsEverywhereAndFreesItsCost) {
  Cluster c(2);
  c.at(1).on_join(job(7, kMiB), 0x8000, 0);
  c.step();
  c.step();
  ASSERT_EQ(c.status(1, 7), JobStatus::kRunning);
  for (int i = 0; i < 40; ++i) {  // 8 s of rounds at site 1 only
    c.at(1).on_activity(7, c.now);
    c.at(2).on_activity(7, c.now);
    c.step();
  }
  EXPECT_EQ(c.status(2, 7), JobStatus::kRunning);
  c.step(11 * kSecond);
  EXPECT_EQ(c.status(1, 7), JobStatus::kEnded);
  EXPECT_NE(c.at(1).find(7)->reason.find("idle"), std::string::npos);
  c.step();
  EXPECT_EQ(c.status(2, 7), JobStatus::kEnded);
  EXPECT_EQ(c.at(1).used().memory_bytes, 0u);
  EXPECT_FALSE(c.at(2).find(7)->built);
  c.step(4 * kSecond);
  EXPECT_EQ(c.at(1).find(7), nullptr) << "forgotten after the hold";
}

// A peer's workers leave after their last result while this site's last round may still be
// on its way: the peer's end ends the job here once this site's workers left too, or after
// peer_end_grace with no round completed here (a CI run once cut a site's last round short).
TEST(Registry, APeersEndWaitsForThisSitesWorkersOrItsQuiet) {
  Cluster c(2);
  c.at(1).on_join(job(7, kMiB, 1), 0x8000, 0);
  c.at(1).on_join(job(8, kMiB, 1), 0x8001, 0);
  c.step();
  c.step();
  ASSERT_EQ(c.status(2, 7), JobStatus::kRunning);
  ASSERT_EQ(c.status(2, 8), JobStatus::kRunning);
  c.at(1).on_leave(7, 0x8000, c.now);
  c.at(1).on_leave(8, 0x8001, c.now);
  EXPECT_EQ(c.status(1, 7), JobStatus::kEnded);
  c.step();
  EXPECT_EQ(c.status(2, 7), JobStatus::kRunning) << "site 2's last round may still run";
  EXPECT_EQ(c.status(2, 8), JobStatus::kRunning);
  c.at(2).on_leave(7, 0x8000, c.now);  // site 2's worker of job 7 got its result and left
  EXPECT_EQ(c.status(2, 7), JobStatus::kEnded);
  for (int i = 0; i < 20; ++i) {  // job 8 still completes rounds at site 2 for 4 s
    c.at(2).on_activity(8, c.now);
    c.step();
  }
  EXPECT_EQ(c.status(2, 8), JobStatus::kRunning);
  c.step(kSecond);  // then nothing: half of peer_end_grace
  EXPECT_EQ(c.status(2, 8), JobStatus::kRunning);
  c.step(kSecond);
  EXPECT_EQ(c.status(2, 8), JobStatus::kEnded);
  EXPECT_NE(c.at(2).find(8)->reason.find("site 1 ended it"), std::string::npos) << c.at(2).find(8)->reason;
}

TEST(Registry, ARestartedGatewayRelearnsItsJobsFromItsPeers) {
  Cluster c(3);
  c.at(1).on_join(job(7, kMiB), 0x8000, 0);
  c.at(3).on_join(job(9, 2 * kMiB), 0x8000, 0);
  for (int i = 0; i < 3; ++i) c.step();
  ASSERT_EQ(c.status(2, 7), JobStatus::kRunning);
  c.sites[1] = Cluster::make(2, 3, 100 * kMiB);  // site 2 restarts with nothing
  EXPECT_TRUE(c.at(2).jobs().empty());
  c.step();
  for (uint32_t id : {7u, 9u}) {
    EXPECT_EQ(c.status(2, id), JobStatus::kRunning) << "job " << id;
    EXPECT_TRUE(c.at(2).find(id)->built);
  }
  EXPECT_EQ(c.at(2).find(9)->spec.model_bytes, 2 * kMiB);
}

TEST(Registry, AChangeIsAnnouncedAtOnceTheRestEveryInterval) {
  Cluster c(2);
  Registry& r = c.at(1);
  EXPECT_TRUE(r.tick(0).empty()) << "nothing held, nothing to say";
  r.on_join(job(7, kMiB), 0x8000, 10 * kMilli);
  auto a = r.tick(20 * kMilli);
  ASSERT_EQ(a.size(), 1u) << "a new job is announced without waiting for the interval";
  EXPECT_EQ(a[0].status, JobStatus::kPending);
  EXPECT_TRUE(r.tick(30 * kMilli).empty()) << "no change: quiet until the interval";
  EXPECT_EQ(r.tick(220 * kMilli).size(), 1u) << "repeated every interval";
  r.on_announce(2, job(7, kMiB), JobStatus::kPending, "", 230 * kMilli);
  a = r.tick(240 * kMilli);
  ASSERT_EQ(a.size(), 1u) << "running: said at once";
  EXPECT_EQ(a[0].status, JobStatus::kRunning);
}

TEST(Registry, AFloodOfAnnouncedJobsKeepsTheRegistryBounded) {
  Cluster c(1, 1);  // 1 byte of budget: every job is refused (and held for a while)
  size_t refused = 0;
  for (uint32_t id = 1; id <= 10000; ++id)
    refused += c.at(1).on_join(job(id, kMiB), 0x8000, c.now).status == JobStatus::kRefused;
  EXPECT_EQ(refused, 10000u);
  EXPECT_LE(c.at(1).jobs().size(), 4u * 16 + 64) << "records bounded";
  EXPECT_LE(c.at(1).tick(c.now).size(), 4u * 16 + 64) << "and so are the announcements";
  c.step(4 * kSecond);
  EXPECT_TRUE(c.at(1).jobs().empty()) << "held refusals expire";
  EXPECT_EQ(c.at(1).on_join(job(1, 1), 0x8000, c.now).status, JobStatus::kRefused) << "judged afresh: still no room";
}

TEST(Registry, PinnedJobsNeitherEndNorCountAgainstTheBudget) {
  Cluster c(1, 10 * kMiB);
  c.at(1).pin(job(1, 100 * kMiB));
  c.step(100 * kSecond);
  EXPECT_EQ(c.status(1, 1), JobStatus::kRunning);
  EXPECT_EQ(c.at(1).on_join(job(2, kMiB), 0x8000, c.now).status, JobStatus::kPending);
  EXPECT_EQ(c.at(1).on_join(job(1, 2 * kMiB), 0x8000, c.now).status, JobStatus::kRefused);
}

}  // namespace
}  // namespace sg::jobs
