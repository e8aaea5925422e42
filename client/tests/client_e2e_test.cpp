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

#include "compress/half.h"
#include "wire/ltp_header.h"
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

// Half-precision gradients as the gateway sees them: the values a buffer of `dt` holds.
std::vector<uint16_t> to_half(const std::vector<float>& g, Dtype dt) {
  std::vector<uint16_t> h(g.size());
  for (size_t k = 0; k < g.size(); ++k)
    h[k] = dt == Dtype::kF16 ? compress::float_to_half(g[k]) : compress::float_to_bf16(g[k]);
  return h;
}
double from_half(uint16_t h, Dtype dt) {
  return dt == Dtype::kF16 ? compress::half_to_float(h) : compress::bf16_to_float(h);
}
// Half a unit in the last place of `dt` at m (its binade's; subnormal halves: 2^-25), and a
// little float32 summation slack: how far a correctly rounded result may be from m.
double rounding_bound(double m, Dtype dt) {
  const int mant = dt == Dtype::kF16 ? 10 : 7;
  const int e = m == 0 ? -1000 : std::ilogb(m);
  const double ulp = std::ldexp(1.0, std::max(e, dt == Dtype::kF16 ? -14 : -126) - mant);
  return ulp / 2 + 1e-6 * std::abs(m);
}

// fp16 and bf16 pushes go out as kF16 / kBf16 chunks straight from the caller's buffer (half
// the bytes, counted per codec where the gateway receives them), the gateway decodes and sums
// them in float32, and each worker's buffer gets the mean rounded once to its type.
TEST(Client, HalfPrecisionPushesAreHalfTheBytesAndGiveTheMean) {
  constexpr size_t kFloats = 100003;  // last chunk short
  constexpr uint32_t kChunks = (kFloats * 4 + 1343) / 1344;
  StubOptions so;
  so.workers = 3;
  so.model_floats = kFloats;
  RunningStub stub(so);
  std::vector<std::unique_ptr<Worker>> ws;
  for (uint32_t w = 0; w < 3; ++w) ws.push_back(std::make_unique<Worker>(opts_for(stub.gw.port(), w)));
  uint32_t round = 0;
  for (Dtype dt : {Dtype::kF16, Dtype::kBf16}) {
    ++round;
    const auto before = stub.gw.pushed();
    const WorkerStats w0_before = ws[0]->stats();
    std::vector<std::vector<uint16_t>> buf(3);
    std::vector<Status> st(3);
    std::vector<std::thread> ts;
    for (uint32_t w = 0; w < 3; ++w) {
      buf[w] = to_half(gradient(w, round, kFloats), dt);
      ts.emplace_back([&, w] { st[w] = ws[w]->allreduce(buf[w].data(), buf[w].data(), kFloats, dt, round, 10 * kSecond); });
    }
    for (auto& t : ts) t.join();
    for (uint32_t w = 0; w < 3; ++w) ASSERT_TRUE(st[w].ok()) << st[w].message;
    const auto in0 = to_half(gradient(0, round, kFloats), dt), in1 = to_half(gradient(1, round, kFloats), dt),
               in2 = to_half(gradient(2, round, kFloats), dt);
    for (size_t k = 0; k < kFloats; ++k) {
      const double mean = (from_half(in0[k], dt) + from_half(in1[k], dt) + from_half(in2[k], dt)) / 3;
      ASSERT_NEAR(from_half(buf[0][k], dt), mean, rounding_bound(mean, dt)) << "round " << round << " index " << k;
    }
    EXPECT_EQ(buf[0], buf[1]) << "every worker gets the same bits";
    EXPECT_EQ(buf[0], buf[2]);
    const auto& after = stub.gw.pushed();
    const auto c = static_cast<size_t>(dt == Dtype::kF16 ? CodecId::kF16 : CodecId::kBf16);
    EXPECT_EQ(after[c].chunks - before[c].chunks, 3u * kChunks) << "pushed as " << codec_name(static_cast<CodecId>(c));
    EXPECT_EQ(after[c].payload_bytes - before[c].payload_bytes, 3u * kFloats * 2) << "2 bytes a value on the LAN";
    EXPECT_EQ(after[0].chunks, 0u) << "no float32 chunk: nothing was upcast";
    // The worker's own count: headers + 2 bytes a value, + whatever was retransmitted.
    const uint64_t sent = ws[0]->stats().push_bytes - w0_before.push_bytes;
    const uint64_t retx = ws[0]->stats().push_retransmits - w0_before.push_retransmits;
    const uint64_t base = kChunks * sizeof(wire::DataHeader) + kFloats * 2;
    EXPECT_GE(sent, base);
    EXPECT_LE(sent, base + retx * (sizeof(wire::DataHeader) + 1344 / 2));
  }
  // The same round in float32: twice the bytes in as many chunks.
  ++round;
  std::vector<std::vector<float>> f(3);
  std::vector<std::thread> ts;
  for (uint32_t w = 0; w < 3; ++w) {
    f[w] = gradient(w, round, kFloats);
    ts.emplace_back([&, w] { ASSERT_TRUE(ws[w]->allreduce(f[w].data(), kFloats, round, 10 * kSecond).ok()); });
  }
  for (auto& t : ts) t.join();
  const auto& p = stub.gw.pushed();
  EXPECT_EQ(p[0].chunks, 3u * kChunks);
  EXPECT_EQ(p[0].payload_bytes, 2 * p[static_cast<size_t>(CodecId::kF16)].payload_bytes);
  EXPECT_EQ(p[0].payload_bytes, 2 * p[static_cast<size_t>(CodecId::kBf16)].payload_bytes);
  EXPECT_EQ(stub.gw.group().stats().bad_chunks, 0u);
}

// One gateway round with a float16, a bfloat16 and a float32 worker: the gateway decodes each
// chunk by its own codec, and the half workers get the float32 worker's result rounded once
// (nearest even) into their type, bit for bit. Streaming and the C ABI with a dtype too.
TEST(Client, MixedDtypesInOneRoundRoundTheSameResult) {
  constexpr size_t kFloats = 30001;
  StubOptions so;
  so.workers = 3;
  so.model_floats = kFloats;
  RunningStub stub(so);
  const auto g0 = gradient(0, 1, kFloats), g1 = gradient(1, 1, kFloats), g2 = gradient(2, 1, kFloats);
  const auto in16 = to_half(g0, Dtype::kF16), inbf = to_half(g1, Dtype::kBf16);
  auto h16 = in16, hbf = inbf;
  std::vector<float> f32 = g2;
  Worker w0(opts_for(stub.gw.port(), 0));
  sg_worker_options o;
  sg_worker_options_init(&o);
  o.gateway_port = stub.gw.port();
  o.worker_index = 1;
  sg_worker* w1 = nullptr;
  ASSERT_EQ(sg_worker_open(&o, &w1), SG_OK) << sg_worker_last_error(w1);
  Worker w2(opts_for(stub.gw.port(), 2));
  Status s0, s2;
  int rc1 = -1;
  std::thread t0([&] { s0 = w0.allreduce_streaming(h16.data(), h16.data(), kFloats, Dtype::kF16, 1, 10 * kSecond); });
  std::thread t1([&] { rc1 = sg_worker_allreduce_typed(w1, hbf.data(), kFloats, SG_DTYPE_BF16, 1, 10000); });
  std::thread t2([&] { s2 = w2.allreduce(f32.data(), kFloats, 1, 10 * kSecond); });
  w0.make_ready(kFloats / 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  w0.make_ready(kFloats);
  t0.join();
  t1.join();
  t2.join();
  ASSERT_TRUE(s0.ok()) << s0.message;
  ASSERT_EQ(rc1, SG_OK) << sg_worker_last_error(w1);
  ASSERT_TRUE(s2.ok()) << s2.message;
  for (size_t k = 0; k < kFloats; ++k) {
    const double mean = (compress::half_to_float(in16[k]) + compress::bf16_to_float(inbf[k]) + g2[k]) / 3;
    ASSERT_NEAR(f32[k], mean, 1e-6 * (1 + std::abs(mean))) << k;
    ASSERT_EQ(h16[k], compress::float_to_half(f32[k])) << "f16 result = the f32 result rounded once, index " << k;
    ASSERT_EQ(hbf[k], compress::float_to_bf16(f32[k])) << "bf16 result = the f32 result rounded once, index " << k;
  }
  const auto& p = stub.gw.pushed();
  EXPECT_EQ(p[static_cast<size_t>(CodecId::kF16)].payload_bytes, kFloats * 2);
  EXPECT_EQ(p[static_cast<size_t>(CodecId::kBf16)].payload_bytes, kFloats * 2);
  EXPECT_EQ(p[static_cast<size_t>(CodecId::kF32)].payload_bytes, kFloats * 4);
  EXPECT_EQ(sg_worker_allreduce_typed(w1, hbf.data(), kFloats, 7, 2, 100), SG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sg_worker_last_error(w1)).find("dtype"), std::string::npos);
  sg_worker_close(w1);
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
