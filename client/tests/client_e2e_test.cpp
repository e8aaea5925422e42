// The worker client end to end over real kernel UDP sockets on 127.0.0.1, against the
// gateway stub (LocalGroup + one-site SiteSync): exact means, missing workers, stale rounds,
// unreachable gateways, and the C ABI.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "stormgate_client.h"
#include "stub_gateway.h"
#include "worker.h"

namespace sg::client {
namespace {

struct RunningStub {
  std::atomic<bool> stop{false};
  StubGateway gw;
  std::thread th;
  explicit RunningStub(const StubOptions& o) : gw(o) {
    std::string err;
    EXPECT_TRUE(gw.open(err)) << err;
    th = std::thread([this] { gw.run(stop); });
  }
  ~RunningStub() {
    stop = true;
    th.join();
  }
};

WorkerOptions opts_for(uint16_t port, uint32_t index) {
  WorkerOptions o;
  o.gateway_port = port;
  o.worker_index = index;
  return o;
}

std::vector<float> gradient(uint32_t worker, uint32_t round, size_t n) {
  std::vector<float> g(n);
  for (size_t k = 0; k < n; ++k) g[k] = std::sin(0.001f * static_cast<float>(k) * (worker + 1) + round) * (worker + 1);
  return g;
}

TEST(Client, ThreeWorkersGetTheExactMean) {
  constexpr size_t kFloats = 100003;  // ~400 KB, last chunk short
  StubOptions so;
  so.workers = 3;
  so.model_floats = kFloats;
  RunningStub stub(so);
  std::vector<std::vector<float>> got(3);
  std::vector<Status> st(3);
  for (uint32_t round = 1; round <= 3; ++round) {
    std::vector<std::thread> ts;
    for (uint32_t w = 0; w < 3; ++w) {
      ts.emplace_back([&, w] {
        static thread_local std::unique_ptr<Worker> worker;
        if (!worker) worker = std::make_unique<Worker>(opts_for(stub.gw.port(), w));
        got[w] = gradient(w, round, kFloats);
        st[w] = worker->allreduce(got[w].data(), got[w].size(), round, 10 * kSecond);
        if (round == 3) worker.reset();
      });
    }
    for (auto& t : ts) t.join();
    for (uint32_t w = 0; w < 3; ++w) ASSERT_TRUE(st[w].ok()) << "worker " << w << ": " << st[w].message;
    const auto g0 = gradient(0, round, kFloats), g1 = gradient(1, round, kFloats), g2 = gradient(2, round, kFloats);
    for (size_t k = 0; k < kFloats; ++k) {
      const float mean = (g0[k] + g1[k] + g2[k]) / 3.0f;
      // The sum's order depends on arrival order: equal up to float rounding.
      ASSERT_NEAR(got[0][k], mean, 4e-7f * (1 + std::abs(mean))) << "round " << round << " index " << k;
    }
    EXPECT_EQ(0, std::memcmp(got[0].data(), got[1].data(), kFloats * 4)) << "every worker gets the same bytes";
    EXPECT_EQ(0, std::memcmp(got[0].data(), got[2].data(), kFloats * 4));
  }
  EXPECT_EQ(stub.gw.rounds_delivered(), 3u);
  EXPECT_EQ(stub.gw.group().stats().push_timeouts, 0u);
}

// A push handed over in parts while the rest is still being computed (the overlapping DDP
// hook): only what is ready goes out -- the parts not yet ready hold NaN until just before
// they are handed over, so a chunk sent early would poison the mean -- the gateway neither
// Early-Closes nor gives up on the quiet push, and nobody's round ends before the last part.
TEST(Client, StreamingPushSendsOnlyWhatIsReadyAndTheRoundWaitsForTheRest) {
  constexpr size_t kFloats = 60001;  // last chunk short
  constexpr int kParts = 4;
  StubOptions so;
  so.workers = 2;
  so.model_floats = kFloats;
  RunningStub stub(so);
  for (uint32_t round = 1; round <= 2; ++round) {
    const auto g0 = gradient(0, round, kFloats), g1 = gradient(1, round, kFloats);
    std::vector<float> buf0(kFloats, std::nanf("")), buf1 = g1;
    Worker w0(opts_for(stub.gw.port(), 0)), w1(opts_for(stub.gw.port(), 1));
    Status st0, st1;
    std::atomic<Nanos> last_ready{0}, done0{0}, done1{0};
    std::thread t0([&] {
      st0 = w0.allreduce_streaming(buf0.data(), buf0.data(), kFloats, round, 10 * kSecond);
      done0 = monotonic_now();
    });
    std::thread t1([&] {
      st1 = w1.allreduce(buf1.data(), kFloats, round, 10 * kSecond);
      done1 = monotonic_now();
    });
    for (int p = 1; p <= kParts; ++p) {
      std::this_thread::sleep_for(std::chrono::milliseconds(60));  // "backward" computes the next part
      const size_t upto = kFloats * p / kParts;
      std::copy(g0.begin() + static_cast<long>(kFloats * (p - 1) / kParts), g0.begin() + static_cast<long>(upto),
                buf0.begin() + static_cast<long>(kFloats * (p - 1) / kParts));
      if (p == kParts) last_ready = monotonic_now();
      w0.make_ready(upto);
    }
    t0.join();
    t1.join();
    ASSERT_TRUE(st0.ok()) << st0.message;
    ASSERT_TRUE(st1.ok()) << st1.message;
    EXPECT_GE(done0.load(), last_ready.load());
    EXPECT_GE(done1.load(), last_ready.load()) << "the other worker's round cannot end before the last part";
    for (size_t k = 0; k < kFloats; ++k) ASSERT_NEAR(buf0[k], (g0[k] + g1[k]) / 2, 4e-7f * (1 + std::abs(g0[k]))) << k;
    EXPECT_EQ(0, std::memcmp(buf0.data(), buf1.data(), kFloats * 4));
    EXPECT_EQ(w0.stats().result_bubbles, 0u);
  }
  EXPECT_EQ(stub.gw.group().stats().push_timeouts, 0u);
}

TEST(Client, UnreachableGatewayTimesOutNamingTheAddress) {
  // A port nobody listens on: ICMP port unreachable, retried until the deadline.
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  const uint16_t closed_port = ntohs(a.sin_port);
  close(s);
  {
    Worker w(opts_for(closed_port, 0));
    ASSERT_TRUE(w.status().ok()) << w.status().message;
    std::vector<float> g(5000, 1.0f);
    const Nanos t0 = monotonic_now();
    auto r = w.allreduce(g.data(), g.size(), 1, 300 * kMilli);
    EXPECT_EQ(r.code, ErrorCode::kTimeout);
    EXPECT_NE(r.message.find("127.0.0.1:" + std::to_string(closed_port)), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("unreachable"), std::string::npos) << r.message;
    EXPECT_GE(monotonic_now() - t0, 300 * kMilli);
    EXPECT_EQ(g[0], 1.0f) << "data unchanged on error";
  }
  // A socket that swallows everything (a gateway that is down but the port is held).
  int sink = socket(AF_INET, SOCK_DGRAM, 0);
  a.sin_port = 0;
  ASSERT_EQ(bind(sink, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  getsockname(sink, reinterpret_cast<sockaddr*>(&a), &len);
  Worker w(opts_for(ntohs(a.sin_port), 0));
  std::vector<float> g(5000, 1.0f);
  auto r = w.allreduce(g.data(), g.size(), 1, 200 * kMilli);
  EXPECT_EQ(r.code, ErrorCode::kTimeout);
  EXPECT_NE(r.message.find("unreachable"), std::string::npos) << r.message;
  close(sink);
}

TEST(Client, MissingWorkerTimesOutAtTheGatewayAndTheOthersGetTheirMean) {
  StubOptions so;
  so.workers = 3;
  so.model_floats = 20000;
  so.push_timeout = 300 * kMilli;
  RunningStub stub(so);
  std::vector<std::vector<float>> got(2);
  std::vector<Status> st(2);
  std::vector<std::thread> ts;
  for (uint32_t w = 0; w < 2; ++w) {
    ts.emplace_back([&, w] {
      Worker worker(opts_for(stub.gw.port(), w));
      got[w] = gradient(w, 1, so.model_floats);
      st[w] = worker.allreduce(got[w].data(), got[w].size(), 1, 10 * kSecond);
    });
  }
  for (auto& t : ts) t.join();
  for (uint32_t w = 0; w < 2; ++w) ASSERT_TRUE(st[w].ok()) << st[w].message;
  const auto g0 = gradient(0, 1, so.model_floats), g1 = gradient(1, 1, so.model_floats);
  for (size_t k = 0; k < g0.size(); ++k) ASSERT_NEAR(got[0][k], (g0[k] + g1[k]) / 2, 1e-6f);
  EXPECT_EQ(stub.gw.group().stats().push_timeouts, 1u);
  EXPECT_EQ(stub.gw.group().stats().missing_workers, 1u);
}

TEST(Client, PushForAPastRoundIsAStaleError) {
  StubOptions so;
  so.workers = 1;
  so.model_floats = 3000;
  RunningStub stub(so);
  Worker w(opts_for(stub.gw.port(), 0));
  std::vector<float> g(3000, 2.0f);
  ASSERT_TRUE(w.allreduce(g.data(), g.size(), 5, 5 * kSecond).ok());
  EXPECT_EQ(g[0], 2.0f) << "the mean of one worker is its gradient";
  auto r = w.allreduce(g.data(), g.size(), 3, 5 * kSecond);
  EXPECT_EQ(r.code, ErrorCode::kStale) << r.message;
  EXPECT_TRUE(w.allreduce(g.data(), g.size(), 6, 5 * kSecond).ok());
}

TEST(Client, CAbiRoundTripAndErrors) {
  StubOptions so;
  so.workers = 1;
  so.model_floats = 1000;
  RunningStub stub(so);
  sg_worker_options o;
  sg_worker_options_init(&o);
  o.gateway_port = stub.gw.port();
  sg_worker* w = nullptr;
  ASSERT_EQ(sg_worker_open(&o, &w), SG_OK) << sg_worker_last_error(w);
  std::vector<float> g(1000, 0.25f);
  EXPECT_EQ(sg_worker_allreduce(w, g.data(), g.size(), 1, 5000), SG_OK) << sg_worker_last_error(w);
  EXPECT_EQ(g[999], 0.25f);
  EXPECT_GT(sg_worker_last_round_seconds(w), 0.0);
  EXPECT_EQ(sg_worker_allreduce(w, nullptr, 0, 2, 100), SG_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(sg_worker_last_error(w), "");
  sg_worker_close(w);
  o.chunk_bytes = 1001;
  ASSERT_EQ(sg_worker_open(&o, &w), SG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sg_worker_last_error(w)).find("chunk_bytes"), std::string::npos);
  sg_worker_close(w);
  EXPECT_STREQ(sg_error_name(SG_ERR_TIMEOUT), "timeout");
  // The streaming call through the C ABI: everything handed over before it starts.
  o.chunk_bytes = 1344;
  ASSERT_EQ(sg_worker_open(&o, &w), SG_OK) << sg_worker_last_error(w);
  std::vector<float> h(1000, 0.5f);
  sg_worker_make_ready(w, h.size());
  EXPECT_EQ(sg_worker_allreduce_streaming(w, h.data(), h.size(), 3, 5000), SG_OK) << sg_worker_last_error(w);
  EXPECT_EQ(h[999], 0.5f);
  sg_worker_close(w);
}

}  // namespace
}  // namespace sg::client
