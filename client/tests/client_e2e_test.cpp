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
#include "crypto/keys.h"
#include "wire/job_msg.h"
#include "wire/ltp_codec.h"
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

// A UDP socket bound to 127.0.0.1 on a free port (-1 on failure); *port says which.
int loopback_udp(uint16_t* port) {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (s >= 0) close(s);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return s;
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

// A waiter that hands the whole buffer over after the round already ended (Python's wait()
// when the result came while it was between ready() and wait()) must not release the next
// round's push before its values are written: begin_streaming() forgets it. Without it the
// next round pushed the buffer as it was (the last result) at once, and got back its own
// values (testbed_process_group: one site's parameters diverged).
TEST(Client, ReadyAfterTheRoundEndedDoesNotReleaseTheNextPush) {
  constexpr size_t kFloats = 30001;
  StubOptions so;
  so.workers = 2;
  so.model_floats = kFloats;
  RunningStub stub(so);
  Worker w0(opts_for(stub.gw.port(), 0)), w1(opts_for(stub.gw.port(), 1));
  for (uint32_t round = 1; round <= 3; ++round) {
    const auto g0 = gradient(0, round, kFloats), g1 = gradient(1, round, kFloats);
    std::vector<float> buf0(kFloats, std::nanf("")), buf1 = g1;  // NaN: not written yet
    Status st0, st1;
    w0.begin_streaming();
    std::thread t0([&] { st0 = w0.allreduce_streaming(buf0.data(), buf0.data(), kFloats, round, 10 * kSecond); });
    std::thread t1([&] { st1 = w1.allreduce(buf1.data(), kFloats, round, 10 * kSecond); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // "backward": nothing is ready yet
    std::copy(g0.begin(), g0.end(), buf0.begin());
    w0.make_ready(kFloats);
    t0.join();
    t1.join();
    w0.make_ready(kFloats);  // the late waiter
    ASSERT_TRUE(st0.ok()) << st0.message;
    ASSERT_TRUE(st1.ok()) << st1.message;
    for (size_t k = 0; k < kFloats; ++k)
      ASSERT_NEAR(buf0[k], (g0[k] + g1[k]) / 2, 4e-7f * (1 + std::abs(g0[k]))) << "round " << round << " index " << k;
  }
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
  uint16_t closed_port = 0;
  int s = loopback_udp(&closed_port);
  ASSERT_GE(s, 0);
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
  uint16_t sink_port = 0;
  int sink = loopback_udp(&sink_port);
  ASSERT_GE(sink, 0);
  Worker w(opts_for(sink_port, 0));
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
  // The push's window, set between rounds; out of range is refused and changes nothing.
  EXPECT_EQ(sg_worker_set_push_window_kb(w, 2000000), SG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sg_worker_last_error(w)).find("push_window_kb"), std::string::npos);
  EXPECT_EQ(sg_worker_set_push_window_kb(w, 0), SG_OK) << sg_worker_last_error(w);
  std::vector<float> k(1000, 0.75f);
  EXPECT_EQ(sg_worker_allreduce(w, k.data(), k.size(), 4, 5000), SG_OK) << sg_worker_last_error(w);
  EXPECT_EQ(k[999], 0.75f);
  EXPECT_EQ(sg_worker_set_push_window_kb(nullptr, 64), SG_ERR_INVALID_ARGUMENT);
  sg_worker_close(w);
}

// ---- Jobs announced by their workers (WorkerOptions::announce_workers) ----

WorkerOptions announcing(uint16_t port, uint32_t index, uint16_t workers) {
  WorkerOptions o = opts_for(port, index);
  o.announce_workers = workers;
  return o;
}

// Polls `cond` for up to 5 s (the stub runs in its own thread): true once it holds.
template <class F>
bool eventually(F cond) {
  const Nanos end = monotonic_now() + 5 * kSecond;
  while (!cond()) {
    if (monotonic_now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

StubOptions announced_stub(uint32_t workers, uint64_t floats) {
  StubOptions so;
  so.announced = true;
  so.workers = workers;
  so.model_floats = floats;
  return so;
}

TEST(ClientJob, OptionsAreChecked) {
  WorkerOptions o = opts_for(7400, 0);
  o.weight = 0;
  EXPECT_NE(Worker(o).status().message.find("weight must be 1..16"), std::string::npos);
  o.weight = 17;
  EXPECT_EQ(Worker(o).status().code, ErrorCode::kInvalidArgument);
  o.weight = 16;
  EXPECT_TRUE(Worker(o).status().ok());
  o.announce_workers = 4097;
  EXPECT_NE(Worker(o).status().message.find("announce_workers"), std::string::npos);
  o.announce_workers = 4096;
  EXPECT_TRUE(Worker(o).status().ok()) << Worker(o).status().message;
  o.announce_workers = 2;
  o.worker_index = 2;
  EXPECT_NE(Worker(o).status().message.find("below announce_workers"), std::string::npos);
}

TEST(ClientJob, PushWindowIsChecked) {
  WorkerOptions o = opts_for(7400, 0);
  o.push_window_kb = (1u << 20) + 1;
  EXPECT_NE(Worker(o).status().message.find("push_window_kb must be 0..1048576"), std::string::npos);
  o.push_window_kb = 1u << 20;
  EXPECT_TRUE(Worker(o).status().ok());
  o.push_window_kb = 0;
  EXPECT_TRUE(Worker(o).status().ok());
}

// Distinct chunks of one push that reach a gateway that never answers, within `wait`; the
// window set in the options, or after opening (set_push_window_kb).
uint32_t chunks_sent_unanswered(uint32_t window_kb, Nanos wait, bool set_after_open = false) {
  uint16_t port = 0;
  int sink = loopback_udp(&port);
  EXPECT_GE(sink, 0);
  // Room for a whole window at once (the sends land in this buffer within one burst; root may
  // exceed net.core.rmem_max), and a reader that drains it while the worker sends.
  int room = 16 << 20;
  if (setsockopt(sink, SOL_SOCKET, SO_RCVBUFFORCE, &room, sizeof(room)) != 0)
    setsockopt(sink, SOL_SOCKET, SO_RCVBUF, &room, sizeof(room));
  timeval tv{0, 20000};
  setsockopt(sink, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::vector<bool> seen(2000, false);
  uint32_t distinct = 0;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    std::vector<uint8_t> d(9000);
    for (;;) {
      const ssize_t n = recv(sink, d.data(), d.size(), 0);
      if (n <= 0) {
        if (done.load()) break;
        continue;
      }
      auto m = wire::parse_data(std::span<const uint8_t>(d.data(), static_cast<size_t>(n)));
      if (!m || m->f.chunk_index >= seen.size() || seen[m->f.chunk_index]) continue;
      seen[m->f.chunk_index] = true;
      ++distinct;
    }
  });
  {
    WorkerOptions o = opts_for(port, 0);
    if (!set_after_open) o.push_window_kb = window_kb;
    Worker w(o);
    EXPECT_TRUE(w.status().ok()) << w.status().message;
    if (set_after_open) {
      EXPECT_TRUE(w.set_push_window_kb(window_kb).ok());
    }
    std::vector<float> g(2000 * 1344 / 4, 1.0f);  // 2,000 chunks
    EXPECT_EQ(w.allreduce(g.data(), g.size(), 1, wait).code, ErrorCode::kTimeout);
  }
  done = true;
  reader.join();
  close(sink);
  return distinct;
}

// Unanswered, a push stops at its window (64 KiB: 46 chunks of 1344 B with their headers) and
// after its timeouts resends only those; a larger window lets more out (the rate model, as a
// contrast, sends its initial 10 chunks).
TEST(Client, PushStopsAtItsWindowWithoutAcks) {
  const uint32_t small = chunks_sent_unanswered(64, 150 * kMilli);
  EXPECT_GE(small, 40u);
  EXPECT_LE(small, 49u);
  const uint32_t large = chunks_sent_unanswered(512, 150 * kMilli);
  // At least the first poll's burst (64 chunks, sent in one call: no timeout can cut it short
  // on a loaded host); 368 fit the window.
  EXPECT_GE(large, 64u);
  EXPECT_LE(large, 391u);
  // Set after opening (as the C ABI does): the same bounds.
  const uint32_t later = chunks_sent_unanswered(512, 150 * kMilli, true);
  EXPECT_GE(later, 64u);
  EXPECT_LE(later, 391u);
}

// The stub holds no job (it drops every push) until a join: announcing workers register it
// before their first round and then run rounds; a worker that does not announce gets nowhere.
TEST(ClientJob, AnnouncingWorkersStartTheJobAndRunRounds) {
  constexpr size_t kFloats = 20001;
  RunningStub stub(announced_stub(2, kFloats));
  {
    Worker plain(opts_for(stub.gw.port(), 0));
    std::vector<float> g(kFloats, 1.0f);
    EXPECT_EQ(plain.allreduce(g.data(), kFloats, 1, 300 * kMilli).code, ErrorCode::kTimeout)
        << "the stub must hold no job before a join";
    EXPECT_EQ(plain.stats().job_joins_sent, 0u);
  }
  EXPECT_EQ(stub.gw.joins(), 0u);
  std::vector<std::unique_ptr<Worker>> ws;
  for (uint32_t w = 0; w < 2; ++w) ws.push_back(std::make_unique<Worker>(announcing(stub.gw.port(), w, 2)));
  for (uint32_t round = 1; round <= 3; ++round) {
    std::vector<std::vector<float>> got(2);
    std::vector<Status> st(2);
    std::vector<std::thread> ts;
    for (uint32_t w = 0; w < 2; ++w) {
      got[w] = gradient(w, round, kFloats);
      ts.emplace_back([&, w] { st[w] = ws[w]->allreduce(got[w].data(), kFloats, round, 10 * kSecond); });
    }
    for (auto& t : ts) t.join();
    for (uint32_t w = 0; w < 2; ++w) ASSERT_TRUE(st[w].ok()) << "worker " << w << ": " << st[w].message;
    const auto g0 = gradient(0, round, kFloats), g1 = gradient(1, round, kFloats);
    for (size_t k = 0; k < kFloats; ++k) ASSERT_NEAR(got[0][k], (g0[k] + g1[k]) / 2, 1e-6f * (1 + std::abs(g0[k])));
  }
  EXPECT_TRUE(stub.gw.job_running());
  EXPECT_GE(stub.gw.joins(), 2u);
  for (auto& w : ws) {
    EXPECT_GE(w->stats().job_joins_sent, 1u);
    EXPECT_GE(w->stats().job_replies, 1u);
    EXPECT_EQ(w->stats().job_replies_bad, 0u);
  }
  // While training a call sends at most one join, without waiting, and only if the last one
  // is over a second old (a restarted gateway re-learns the job).
  const uint64_t before = ws[0]->stats().job_joins_sent;
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  std::vector<std::vector<float>> got(2, std::vector<float>(kFloats, 1.0f));
  std::vector<Status> st(2);
  std::vector<std::thread> ts;
  for (uint32_t w = 0; w < 2; ++w)
    ts.emplace_back([&, w] { st[w] = ws[w]->allreduce(got[w].data(), kFloats, 4, 10 * kSecond); });
  for (auto& t : ts) t.join();
  ASSERT_TRUE(st[0].ok()) << st[0].message;
  ASSERT_TRUE(st[1].ok()) << st[1].message;
  EXPECT_EQ(ws[0]->stats().job_joins_sent, before + 1);
}

// A join that does not match the job the gateway holds is refused with the field that differs;
// a later call with the right size registers again and runs.
TEST(ClientJob, AnotherModelSizeIsRejectedNamingTheField) {
  StubOptions so = announced_stub(1, 1000);
  so.job = 7;
  RunningStub stub(so);
  WorkerOptions o = announcing(stub.gw.port(), 0, 1);
  o.job = 7;
  Worker w(o);
  std::vector<float> g(2000, 1.0f);
  auto r = w.allreduce(g.data(), g.size(), 1, 5 * kSecond);
  EXPECT_EQ(r.code, ErrorCode::kRejected) << r.message;
  EXPECT_NE(r.message.find("gateway 127.0.0.1:" + std::to_string(stub.gw.port()) + " refused job 7"),
            std::string::npos) << r.message;
  EXPECT_NE(r.message.find("site 1 holds job 7 with model_bytes 4000 (here 8000)"), std::string::npos) << r.message;
  EXPECT_EQ(g[0], 1.0f) << "data unchanged on error";
  EXPECT_EQ(stub.gw.job_refused(), 1u);
  g.assign(1000, 3.0f);
  r = w.allreduce(g.data(), g.size(), 1, 5 * kSecond);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(g[0], 3.0f);
  // Weight and dtype are part of the definition too.
  WorkerOptions heavy = o;
  heavy.weight = 3;
  Worker w3(heavy);
  r = w3.allreduce(g.data(), g.size(), 2, 5 * kSecond);
  EXPECT_EQ(r.code, ErrorCode::kRejected);
  EXPECT_NE(r.message.find("weight 1 (here 3)"), std::string::npos) << r.message;
  std::vector<uint16_t> h(1000);
  r = w.allreduce(h.data(), h.data(), h.size(), Dtype::kF16, 2, 5 * kSecond);
  EXPECT_EQ(r.code, ErrorCode::kRejected);
  EXPECT_NE(r.message.find("dtype float32 (here float16)"), std::string::npos) << r.message;
}

TEST(ClientJob, PendingRepliesKeepTheWorkerJoiningUntilRunning) {
  StubOptions so = announced_stub(1, 1000);
  so.pending_joins = 2;
  RunningStub stub(so);
  Worker w(announcing(stub.gw.port(), 0, 1));
  std::vector<float> g(1000, 2.0f);
  w.make_ready(g.size());  // the streaming entry point registers too
  auto r = w.allreduce_streaming(g.data(), g.data(), g.size(), 1, 10 * kSecond);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(g[0], 2.0f);
  EXPECT_GE(w.stats().job_joins_sent, 3u) << "two pending answers, then running";
  EXPECT_GE(stub.gw.joins(), 3u);
}

TEST(ClientJob, StillPendingAtTheTimeoutSaysWhatTheGatewayWaitsFor) {
  StubOptions so = announced_stub(1, 1000);
  so.pending_joins = 1000000;
  RunningStub stub(so);
  Worker w(announcing(stub.gw.port(), 0, 1));
  std::vector<float> g(1000, 2.0f);
  auto r = w.allreduce(g.data(), g.size(), 1, 1500 * kMilli);
  EXPECT_EQ(r.code, ErrorCode::kTimeout) << r.message;
  EXPECT_NE(r.message.find("job 1 not running"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("pending: waiting for site 9"), std::string::npos) << r.message;
}

TEST(ClientJob, UnansweredJoinsTimeOutNamingTheGatewayAndTheJob) {
  StubOptions so = announced_stub(1, 1000);
  so.ignore_joins = true;
  RunningStub stub(so);
  WorkerOptions o = announcing(stub.gw.port(), 0, 1);
  o.job = 5;
  Worker w(o);
  std::vector<float> g(1000, 2.0f);
  auto r = w.allreduce(g.data(), g.size(), 1, 300 * kMilli);
  EXPECT_EQ(r.code, ErrorCode::kTimeout) << r.message;
  EXPECT_NE(r.message.find("127.0.0.1:" + std::to_string(stub.gw.port())), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("job 5"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("no answer to the job's registration"), std::string::npos) << r.message;
  EXPECT_TRUE(eventually([&] { return stub.gw.joins() >= 1; }));
  EXPECT_EQ(g[0], 2.0f);
}

TEST(ClientJob, DestroyedWorkersLeaveAndTheJobEnds) {
  RunningStub stub(announced_stub(2, 1000));
  {
    Worker idle(announcing(stub.gw.port(), 0, 2));  // never joined: nothing to leave
  }
  auto w0 = std::make_unique<Worker>(announcing(stub.gw.port(), 0, 2));
  auto w1 = std::make_unique<Worker>(announcing(stub.gw.port(), 1, 2));
  std::vector<float> a(1000, 1.0f), b(1000, 3.0f);
  Status s0, s1;
  std::thread t([&] { s0 = w0->allreduce(a.data(), a.size(), 1, 10 * kSecond); });
  s1 = w1->allreduce(b.data(), b.size(), 1, 10 * kSecond);
  t.join();
  ASSERT_TRUE(s0.ok()) << s0.message;
  ASSERT_TRUE(s1.ok()) << s1.message;
  EXPECT_EQ(a[0], 2.0f);
  EXPECT_EQ(stub.gw.leaves(), 0u);
  w0->leave();  // explicit: the destructor then has nothing more to say
  EXPECT_TRUE(eventually([&] { return stub.gw.leaves() == 1; }));
  w0.reset();
  EXPECT_TRUE(stub.gw.job_running()) << "one worker of two is still in";
  w1.reset();
  EXPECT_TRUE(eventually([&] { return stub.gw.job_ended(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(stub.gw.leaves(), 2u) << "one kLeave per worker that joined";
  // The C ABI: sg_worker_open2 announces, sg_worker_close leaves.
  sg_worker_options o;
  sg_worker_options_init(&o);
  o.gateway_port = stub.gw.port();
  sg_job_options j;
  sg_job_options_init(&j);
  EXPECT_EQ(j.size, sizeof(sg_job_options));
  EXPECT_EQ(j.weight, 1);
  j.workers = 2;
  sg_worker* c0 = nullptr;
  sg_worker* c1 = nullptr;
  ASSERT_EQ(sg_worker_open2(&o, &j, &c0), SG_OK) << sg_worker_last_error(c0);
  o.worker_index = 1;
  ASSERT_EQ(sg_worker_open2(&o, &j, &c1), SG_OK) << sg_worker_last_error(c1);
  int rc0 = -1, rc1 = -1;
  std::thread t2([&] { rc0 = sg_worker_allreduce(c0, a.data(), a.size(), 2, 10000); });
  rc1 = sg_worker_allreduce(c1, b.data(), b.size(), 2, 10000);
  t2.join();
  EXPECT_EQ(rc0, SG_OK) << sg_worker_last_error(c0);
  EXPECT_EQ(rc1, SG_OK) << sg_worker_last_error(c1);
  EXPECT_TRUE(stub.gw.job_running()) << "a join after the end restarts the job";
  sg_worker_close(c0);
  sg_worker_close(c1);
  EXPECT_TRUE(eventually([&] { return stub.gw.leaves() == 4 && stub.gw.job_ended(); }));
  // Checked sizes and options.
  j.size = 0;
  sg_worker* bad = nullptr;
  EXPECT_EQ(sg_worker_open2(&o, &j, &bad), SG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sg_worker_last_error(bad)).find("sg_job_options_init"), std::string::npos);
  sg_worker_close(bad);
  sg_job_options_init(&j);
  j.weight = 17;
  EXPECT_EQ(sg_worker_open2(&o, &j, &bad), SG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sg_worker_last_error(bad)).find("weight"), std::string::npos);
  sg_worker_close(bad);
}

// A fresh token file (mode 0600) in a temporary directory.
struct TokenFile {
  std::string dir, path;
  TokenFile() {
    char tmpl[] = "/tmp/sg_client_token_XXXXXX";
    dir = mkdtemp(tmpl);
    path = dir + "/token";
    EXPECT_EQ(crypto::write_new_secret(path), "");
  }
  ~TokenFile() {
    unlink(path.c_str());
    rmdir(dir.c_str());
  }
};

TEST(ClientJob, WithATokenJoinsAreSealedAndPlainOnesRefused) {
  TokenFile token;
  StubOptions so = announced_stub(1, 1000);
  so.token_file = token.path;
  RunningStub stub(so);
  {
    Worker plain(announcing(stub.gw.port(), 0, 1));  // no token
    std::vector<float> g(1000, 1.0f);
    auto r = plain.allreduce(g.data(), g.size(), 1, 300 * kMilli);
    EXPECT_EQ(r.code, ErrorCode::kTimeout) << r.message;
    EXPECT_NE(r.message.find("token_file"), std::string::npos) << r.message;
    EXPECT_TRUE(eventually([&] { return stub.gw.refused() >= 1; }));
    EXPECT_EQ(stub.gw.joins(), 0u) << "a plain join must not reach the stub's registry";
  }
  WorkerOptions o = announcing(stub.gw.port(), 0, 1);
  o.token_file = token.path;
  Worker w(o);
  std::vector<float> g(1000, 5.0f);
  auto r = w.allreduce(g.data(), g.size(), 1, 10 * kSecond);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(g[0], 5.0f);
  EXPECT_GE(stub.gw.joins(), 1u);
  EXPECT_GE(w.stats().job_replies, 1u) << "the sealed reply opened";
}

// A fake gateway on a plain socket: what it sends back to a join is up to the test.
struct FakeGateway {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  uint16_t port = 0;
  FakeGateway() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~FakeGateway() { close(fd); }
  // Answers the next JOB message with each of `replies`, in order.
  std::thread answer(std::vector<std::vector<uint8_t>> replies) {
    return std::thread([this, replies = std::move(replies)] {
      uint8_t buf[2048];
      sockaddr_in from{};
      socklen_t len = sizeof(from);
      for (;;) {
        const ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &len);
        if (n <= 0) return;
        auto c = wire::parse_common(std::span<const uint8_t>(buf, static_cast<size_t>(n)));
        if (c && c->type == wire::MsgType::kJob) break;
      }
      for (const auto& r : replies) sendto(fd, r.data(), r.size(), 0, reinterpret_cast<sockaddr*>(&from), len);
    });
  }
};

std::vector<uint8_t> job_reply(uint32_t job, wire::JobStatus st, std::string_view text) {
  std::vector<uint8_t> b(sizeof(wire::JobHeader) + text.size());
  wire::JobSpec spec;
  spec.id = job;
  EXPECT_TRUE(wire::build_job(b, 1, wire::JobOp::kReply, st, spec, text).ok());
  return b;
}

TEST(ClientJob, MalformedRepliesAreDroppedAndCounted) {
  FakeGateway fake;
  // Truncated, a reply for another job, then a refusal: only the last one counts.
  auto truncated = job_reply(1, wire::JobStatus::kRunning, "");
  truncated.resize(20);
  auto th = fake.answer({truncated, job_reply(2, wire::JobStatus::kRunning, ""),
                         job_reply(1, wire::JobStatus::kRefused, "no room")});
  Worker w(announcing(fake.port, 0, 1));
  std::vector<float> g(1000, 1.0f);
  auto r = w.allreduce(g.data(), g.size(), 1, 5 * kSecond);
  th.join();
  EXPECT_EQ(r.code, ErrorCode::kRejected) << r.message;
  EXPECT_NE(r.message.find("refused job 1: no room"), std::string::npos) << r.message;
  EXPECT_EQ(w.stats().job_replies_bad, 2u);
  EXPECT_EQ(w.stats().job_replies, 1u);
}

// More than a receive batch of datagrams queued before the first round: the registration
// drains them batch by batch (before the first round there is no result receiver to ACK
// for; it once dereferenced one after every full batch) and still finds the verdict.
TEST(ClientJob, AQueueLongerThanABatchBeforeTheFirstRoundIsDrained) {
  FakeGateway fake;
  Worker w(announcing(fake.port, 0, 1));
  ASSERT_TRUE(w.status().ok()) << w.status().message;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(w.local_port());
  const auto other_job = job_reply(2, wire::JobStatus::kRunning, "");
  constexpr int kQueued = 150;  // two full batches and part of a third
  for (int i = 0; i < kQueued; ++i)
    ASSERT_EQ(sendto(fake.fd, other_job.data(), other_job.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
              static_cast<ssize_t>(other_job.size()));
  auto th = fake.answer({job_reply(1, wire::JobStatus::kRefused, "no room")});
  std::vector<float> g(1000, 1.0f);
  auto r = w.allreduce(g.data(), g.size(), 1, 5 * kSecond);
  th.join();
  EXPECT_EQ(r.code, ErrorCode::kRejected) << r.message;
  EXPECT_NE(r.message.find("refused job 1: no room"), std::string::npos) << r.message;
  EXPECT_EQ(w.stats().job_replies_bad, static_cast<uint64_t>(kQueued));
}

TEST(ClientJob, WithATokenAPlainReplyIsRefused) {
  TokenFile token;
  FakeGateway fake;
  auto th = fake.answer({job_reply(1, wire::JobStatus::kRunning, "")});
  WorkerOptions o = announcing(fake.port, 0, 1);
  o.token_file = token.path;
  Worker w(o);
  std::vector<float> g(1000, 1.0f);
  auto r = w.allreduce(g.data(), g.size(), 1, kSecond);  // room for the fake's thread to answer
  th.join();
  EXPECT_EQ(r.code, ErrorCode::kTimeout) << r.message;
  EXPECT_NE(r.message.find("did not authenticate"), std::string::npos) << r.message;
  EXPECT_EQ(w.stats().job_replies, 0u);
  EXPECT_EQ(w.stats().refused, 1u);
}

// A gateway whose result transfer has one chunk of the wrong size: that chunk must not be left
// as whatever the output held (the receiver counts it delivered, so no bubble comes for it).
// It keeps the worker's own values, counted; an exact job fails the round naming it.
std::thread answer_with_a_malformed_result(FakeGateway& fake, uint32_t round, size_t n, float value) {
  return std::thread([&fake, round, n, value] {
    uint8_t buf[2048];
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    for (;;) {  // the worker's first push chunk
      const ssize_t got = recvfrom(fake.fd, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (got <= 0) return;
      auto c = wire::parse_common(std::span<const uint8_t>(buf, static_cast<size_t>(got)));
      if (c && c->type == wire::MsgType::kData) break;
    }
    const size_t per = 1344 / 4;
    const uint32_t chunks = static_cast<uint32_t>((n + per - 1) / per);
    std::vector<float> vals(per, value);
    for (uint32_t i = 0; i < chunks; ++i) {
      wire::DataFields f;
      f.src_node = 1;
      f.job = 1;
      f.round = round;
      f.chunk_index = i;
      f.chunk_count = chunks;
      const size_t floats = i == 1 ? 100 : std::min(per, n - i * per);  // chunk 1: short
      std::vector<uint8_t> pkt(2048);
      auto m = wire::build_data(pkt, f, {reinterpret_cast<const uint8_t*>(vals.data()), floats * 4});
      ASSERT_TRUE(m.ok());
      sendto(fake.fd, pkt.data(), *m, 0, reinterpret_cast<sockaddr*>(&from), len);
    }
  });
}

TEST(Client, AMalformedResultChunkKeepsTheOwnGradientNotStaleValues) {
  const size_t n = 1000;  // 3 chunks of 336 floats: 336, 336, 328
  for (const bool exact : {false, true}) {
    FakeGateway fake;
    auto th = answer_with_a_malformed_result(fake, 1, n, 7.0f);
    WorkerOptions o = opts_for(fake.port, 0);
    o.exact = exact;
    Worker w(o);
    ASSERT_TRUE(w.status().ok()) << w.status().message;
    std::vector<float> g(n, 2.0f), out(n, std::nanf(""));
    auto r = w.allreduce(g.data(), out.data(), n, 1, 5 * kSecond);
    th.join();
    if (exact) {
      EXPECT_EQ(r.code, ErrorCode::kProtocol) << r.message;
      EXPECT_NE(r.message.find("1 of them arrived malformed"), std::string::npos) << r.message;
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(out[0], 7.0f);
    EXPECT_EQ(out[335], 7.0f);
    EXPECT_EQ(out[336], 2.0f) << "the malformed chunk keeps the worker's own value";
    EXPECT_EQ(out[671], 2.0f);
    EXPECT_EQ(out[672], 7.0f);
    EXPECT_EQ(out[999], 7.0f);
    EXPECT_EQ(w.stats().result_malformed, 1u);
    EXPECT_EQ(w.stats().result_bubbles, 1u);
  }
}

}  // namespace
}  // namespace sg::client
