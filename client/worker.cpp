#include "worker.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <optional>

#include <sys/eventfd.h>
#include <unistd.h>
#include <vector>

#include "common/rng.h"
#include "compress/half.h"
#include "crypto/keys.h"
#include "crypto/peer_sessions.h"
#include "ltp/delivery_rate_controller.h"
#include "ltp/receiver.h"
#include "ltp/sender.h"
#include "ltp/window_controller.h"
#include "sync/local_group.h"
#include "udp_batch.h"
#include "wire/job_msg.h"
#include "wire/ltp_codec.h"
#include "wire/ltp_header.h"

namespace sg::client {

const char* error_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kSocket: return "socket error";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kStale: return "stale round";
    case ErrorCode::kRejected: return "rejected";
    case ErrorCode::kProtocol: return "protocol error";
  }
  return "unknown";
}

size_t dtype_size(Dtype d) { return d == Dtype::kF32 ? 4 : 2; }

namespace {

using sync::kWorkerNodeBase;  // a worker's LTP node id is kWorkerNodeBase + its index
constexpr Nanos kJoinEvery = 200 * kMilli;     // kJoin while waiting for the gateway's answer
constexpr Nanos kRejoinEvery = kSecond;        // kJoin while training (a restarted gateway re-learns)
constexpr uint32_t kMaxPushWindowKb = 1u << 20;  // 1 GiB in flight
constexpr uint8_t kMaxWeight = 16;             // as the gateway's jobs[].weight

uint8_t job_dtype(Dtype d) {  // JobSpec::dtype
  switch (d) {
    case Dtype::kF32: return 0;
    case Dtype::kF16: return 1;
    case Dtype::kBf16: return 2;
  }
  return 0;
}

CodecId codec_of(Dtype d) {
  switch (d) {
    case Dtype::kF32: return CodecId::kF32;
    case Dtype::kF16: return CodecId::kF16;
    case Dtype::kBf16: return CodecId::kBf16;
  }
  return CodecId::kF32;
}

// Writes the gateway's result transfer (float32) straight into the output buffer, rounded to
// its Dtype on the way; a chunk that never arrives keeps the worker's own gradient (Bubble
// Filling with the local rule). So does a chunk the receiver took but this sink could not
// (another size or codec): at the transfer's end no element of the output is left unwritten.
class ResultSink final : public ltp::ReceiverSink {
 public:
  void reset(uint32_t round, uint8_t* out, const uint8_t* local, size_t n, Dtype dtype, uint32_t chunk_bytes,
             uint32_t chunks) {
    round_ = round;
    out_ = out;
    local_ = local;
    n_ = n;
    dtype_ = dtype;
    es_ = dtype_size(dtype);
    chunk_floats_ = chunk_bytes / 4;
    chunks_ = chunks;
    seen_.assign(chunks, kUnseen);
    received_ = bubbles_ = mismatched_ = unfilled_ = 0;
    ended_ = false;
  }

  void on_chunk(const ltp::ChunkRef& c, std::span<const uint8_t> payload) override {
    if (c.key.round != round_ || ended_) return;  // a leftover of an older round
    if (c.holes & 1) {  // a hole: nothing to take, keep our own like a bubble
      on_bubble(c, ltp::FillRule::kLocal);
      return;
    }
    if (c.chunk_count != chunks_ || c.codec != CodecId::kF32 || c.chunk_index >= chunks_ ||
        seen_[c.chunk_index] != kUnseen) {
      ++mismatched_;
      return;
    }
    const size_t off = static_cast<size_t>(c.chunk_index) * chunk_floats_;
    const size_t want = std::min(chunk_floats_, n_ - off);
    if (payload.size() != want * 4) {
      ++mismatched_;
      return;
    }
    store(out_ + off * es_, payload.data(), want);
    seen_[c.chunk_index] = kTaken;
    ++received_;
  }

  void on_bubble(const ltp::ChunkRef& c, ltp::FillRule) override {
    if (c.key.round != round_ || ended_ || c.chunk_count != chunks_ || c.chunk_index >= chunks_ ||
        seen_[c.chunk_index] != kUnseen)
      return;
    fill_local(c.chunk_index);
  }

  void on_transfer_end(const ltp::TransferSummary& s) override {
    if (s.key.round != round_ || ended_) return;
    // Chunks the receiver counted as delivered but on_chunk refused (mismatched_), or bubbles
    // of another chunk count: the worker's own values, never last round's or uninitialised.
    for (uint32_t i = 0; i < chunks_; ++i)
      if (seen_[i] == kUnseen) {
        fill_local(i);
        ++unfilled_;
      }
    ended_ = true;
  }

  bool ended() const { return ended_; }
  uint32_t received() const { return received_; }
  uint32_t bubbles() const { return bubbles_; }
  uint32_t mismatched() const { return mismatched_; }
  uint32_t unfilled() const { return unfilled_; }  // of bubbles(): chunks filled only at the end

 private:
  enum : uint8_t { kUnseen, kTaken, kFilled };

  void fill_local(uint32_t i) {
    const size_t off = static_cast<size_t>(i) * chunk_floats_;
    const size_t cnt = std::min(chunk_floats_, n_ - off);
    if (out_ != local_) std::memcpy(out_ + off * es_, local_ + off * es_, cnt * es_);
    seen_[i] = kFilled;
    ++bubbles_;
  }

  // cnt float32 values (any alignment) into the buffer's type: the one rounding of the result.
  void store(uint8_t* dst, const uint8_t* src, size_t cnt) const {
    if (dtype_ == Dtype::kF32) {
      std::memcpy(dst, src, cnt * 4);
      return;
    }
    for (size_t i = 0; i < cnt; ++i) {
      float f;
      std::memcpy(&f, src + 4 * i, 4);
      const uint16_t h = dtype_ == Dtype::kF16 ? compress::float_to_half(f) : compress::float_to_bf16(f);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  }

  uint32_t round_ = 0;
  uint8_t* out_ = nullptr;
  const uint8_t* local_ = nullptr;
  size_t n_ = 0;
  Dtype dtype_ = Dtype::kF32;
  size_t es_ = 4;
  size_t chunk_floats_ = 1;
  uint32_t chunks_ = 0;
  std::vector<uint8_t> seen_;
  uint32_t received_ = 0, bubbles_ = 0, mismatched_ = 0, unfilled_ = 0;
  bool ended_ = false;
};

// With a job token: every message to the gateway sealed toward it (header authenticated,
// the rest encrypted), as the gateway's workers' opener expects.
class SealingSink final : public ltp::PacketSink {
 public:
  SealingSink(ltp::PacketSink& inner, crypto::Sealer& sealer, uint16_t gateway)
      : inner_(inner), sealer_(sealer), gateway_(gateway), buf_(kMaxDatagram) {}
  void send(const ltp::TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) override {
    const size_t len = head.size() + payload.size();
    if (len + crypto::kTrailerLen > buf_.size()) {
      ++failed_;
      return;
    }
    std::memcpy(buf_.data(), head.data(), head.size());
    if (!payload.empty()) std::memcpy(buf_.data() + head.size(), payload.data(), payload.size());
    buf_[offsetof(wire::LtpCommon, flags)] |= wire::kFlagSealed;
    const size_t n = sealer_.seal(gateway_, buf_, len, wire::ltp_header_len(meta.type));
    if (n == 0) {
      ++failed_;
      return;
    }
    inner_.send(meta, std::span<const uint8_t>(buf_.data(), n), {});
  }
  uint64_t failed() const { return failed_; }

 private:
  ltp::PacketSink& inner_;
  crypto::Sealer& sealer_;
  uint16_t gateway_;
  std::vector<uint8_t> buf_;
  uint64_t failed_ = 0;
};

std::string seconds(Nanos t) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.3g s", static_cast<double>(t) / kSecond);
  return b;
}

}  // namespace

struct Worker::Impl {
  UdpBatch sock;
  UdpSink udp{sock};
  // With a token (WorkerOptions::token_file): sealer toward the gateway, opener for what it
  // sends; `tx` is then the sealing sink.
  std::unique_ptr<crypto::Sealer> sealer;
  std::unique_ptr<crypto::Opener> opener;
  std::unique_ptr<SealingSink> sealing;
  ltp::PacketSink* tx = &udp;
  uint64_t refused = 0;  // received messages that did not open (or were plain with a token)
  sockaddr_in gateway{};
  // The push's controller (WorkerOptions::push_window_kb): a window, or the rate model.
  ltp::DeliveryRateController rate;
  std::unique_ptr<ltp::WindowController> window;
  ltp::RateController& push_controller() {
    return window ? static_cast<ltp::RateController&>(*window) : static_cast<ltp::RateController&>(rate);
  }
  Rng rng{1};
  std::unique_ptr<ltp::Sender> push;
  std::unique_ptr<ltp::Receiver> recv;
  ResultSink result;
  uint32_t chunks = 0;
  std::vector<uint8_t> tmp;  // result buffer when allreduce works in place
  WorkerStats stats;
  // Streaming pushes: what make_ready() allowed, and an eventfd that wakes the wait for it
  // (made with the Worker and never changed, so make_ready may use it from any thread).
  std::atomic<size_t> ready{0};
  std::atomic<bool> cancelled{false};
  int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

  // The announced job (WorkerOptions::announce_workers > 0).
  bool job_running = false;    // the gateway said running for job_spec
  wire::JobSpec job_spec;      // the definition last sent in a kJoin
  bool joined = false;         // a kJoin went out since the last kLeave
  bool admitted = false;       // the gateway said running since the last kLeave
  Nanos last_join = 0;
  // The gateway's last reply about the job: kNone until one arrived.
  wire::JobStatus reply_status = wire::JobStatus::kNone;
  wire::JobSpec reply_spec;
  std::string reply_text;

  ~Impl() {
    if (wake_fd >= 0) ::close(wake_fd);
  }

  // Datagram i of the last receive() as a plain LTP message: false if it is not one, or, with
  // a token, if the gateway did not seal it (counted in `refused`).
  bool take(int i, uint16_t gateway_node, std::span<const uint8_t>& msg, wire::CommonInfo& c) {
    msg = sock.data(i);
    auto p = wire::parse_common(msg);
    if (!p) return false;
    c = *p;
    if (opener) {
      size_t len = 0;
      if (!(c.flags & wire::kFlagSealed) ||
          opener->open(gateway_node, sock.data(i), wire::ltp_header_len(c.type), &len) != crypto::OpenVerdict::kOk) {
        ++refused;
        return false;
      }
      msg = msg.first(len);
    }
    return true;
  }

  // A JOB message from the gateway: its reply about `job` is kept (true); anything else is
  // dropped and counted.
  bool on_job(std::span<const uint8_t> msg, uint32_t job) {
    auto j = wire::parse_job(msg);
    if (!j || j->op != wire::JobOp::kReply || j->spec.id != job) {
      ++stats.job_replies_bad;
      return false;
    }
    ++stats.job_replies;
    reply_status = j->status;
    reply_spec = j->spec;
    reply_text.assign(j->text);
    return true;
  }

  // Everything queued on the socket, a batch at a time: `each(i)` for datagram i of a batch;
  // a Status it returns ends the drain and is returned (nullopt: go on). After every full
  // batch the result's receiver, if there is one yet, ACKs what it took and the ACK goes out
  // at once: more may be queued behind it. ECONNREFUSED (nothing listens yet: the gateway may
  // still be starting) sets `refused` and ends the drain; any other error is returned.
  template <class Each>
  std::optional<Status> drain(Nanos& now, const std::string& gw, bool& refused, Each&& each) {
    for (;;) {
      const int r = sock.receive();
      if (r < 0) {
        if (sock.last_errno() != ECONNREFUSED)
          return Status{ErrorCode::kSocket, "receive from gateway " + gw + ": " + std::strerror(sock.last_errno())};
        refused = true;
        return std::nullopt;
      }
      if (r == 0) return std::nullopt;
      now = monotonic_now();
      for (int i = 0; i < r; ++i)
        if (std::optional<Status> s = each(i)) return s;
      if (r < static_cast<int>(kBatch)) return std::nullopt;
      if (recv) recv->poll(now, result, *tx);
      sock.flush();
    }
  }

  // One JOB message to the gateway, sealed like everything else when there is a token.
  void send_job(uint16_t self, uint16_t gateway_node, wire::JobOp op, const wire::JobSpec& spec) {
    uint8_t buf[sizeof(wire::JobHeader)];
    auto len = wire::build_job(buf, self, op, wire::JobStatus::kNone, spec);
    if (!len) return;
    ltp::TxMeta meta;
    meta.peer_node = gateway_node;
    meta.type = wire::MsgType::kJob;
    tx->send(meta, std::span<const uint8_t>(buf, *len), {});
    sock.flush();  // an error (nothing listening) shows up on the next receive
    if (op == wire::JobOp::kJoin) {
      ++stats.job_joins_sent;
      joined = true;
    } else {
      joined = admitted = false;
    }
  }
};

Worker::Worker(const WorkerOptions& opts) : opts_(opts), impl_(std::make_unique<Impl>()) {
  auto fail = [&](ErrorCode c, std::string m) { open_status_ = {c, std::move(m)}; };
  if (opts_.chunk_bytes == 0 || opts_.chunk_bytes % 4 || opts_.chunk_bytes + 128 > kMaxDatagram) {
    fail(ErrorCode::kInvalidArgument, "chunk_bytes must be a positive multiple of 4 below 9000");
    return;
  }
  if (opts_.worker_index >= 0x8000) {
    fail(ErrorCode::kInvalidArgument, "worker_index must be < 32768");
    return;
  }
  if (opts_.gateway_node < 1 || opts_.gateway_node > wire::kMaxSiteId) {
    fail(ErrorCode::kInvalidArgument, "gateway_node (the gateway's site.id) must be 1..32767, got " +
                                          std::to_string(opts_.gateway_node));
    return;
  }
  if (opts_.gateway_port == 0) {
    fail(ErrorCode::kInvalidArgument, "gateway_port (the gateway's transport.udp_port) must be 1..65535, got 0");
    return;
  }
  if (Status st = set_push_window_kb(opts_.push_window_kb); !st.ok()) {
    fail(st.code, st.message);
    return;
  }
  if (opts_.weight < 1 || opts_.weight > kMaxWeight) {
    fail(ErrorCode::kInvalidArgument, "weight must be 1..16 (the job's share of the WAN), got " +
                                          std::to_string(opts_.weight));
    return;
  }
  if (opts_.announce_workers > sync::kMaxLocalWorkers) {
    fail(ErrorCode::kInvalidArgument, "announce_workers (workers per site) must be 0..4096, got " +
                                          std::to_string(opts_.announce_workers));
    return;
  }
  if (opts_.announce_workers > 0 && opts_.worker_index >= opts_.announce_workers) {
    fail(ErrorCode::kInvalidArgument, "worker_index " + std::to_string(opts_.worker_index) +
                                          " must be below announce_workers (" + std::to_string(opts_.announce_workers) +
                                          " workers per site)");
    return;
  }
  std::string err;
  sockaddr_in bind_addr{};
  if (!resolve_ipv4(opts_.gateway_host, opts_.gateway_port, impl_->gateway, err) ||
      !resolve_ipv4(opts_.bind_host, opts_.bind_port, bind_addr, err) ||
      !impl_->sock.open(bind_addr, &impl_->gateway, err)) {
    fail(ErrorCode::kSocket, err);
    return;
  }
  impl_->rng = Rng(0x5347ull << 32 | opts_.worker_index);
  if (!opts_.token_file.empty()) {
    // "{job}" stands for the job id: one directory of per-job tokens (admission.token_file).
    for (size_t at; (at = opts_.token_file.find("{job}")) != std::string::npos;)
      opts_.token_file.replace(at, 5, std::to_string(opts_.job));
    crypto::SecretFile f = crypto::load_secret(opts_.token_file);
    if (f.secret.empty()) {
      fail(ErrorCode::kInvalidArgument, "token_file: " + f.error);
      return;
    }
    crypto::PeerSecurity sec;  // as the gateway's load_worker_security, seen from the worker
    sec.secret = std::move(f.secret);
    sec.suite = crypto::Suite::kAes128Gcm;
    sec.protection = crypto::Protection::kEncrypt;
    sec.first_epoch = crypto::boot_epoch(static_cast<uint64_t>(std::time(nullptr)));
    sec.self = static_cast<uint16_t>(kWorkerNodeBase + opts_.worker_index);
    sec.peers = {opts_.gateway_node};
    sec.lanes = crypto::kMaxLanes;  // the gateway's engines seal as lanes of their own
    impl_->sealer = std::make_unique<crypto::Sealer>(sec, 0);
    impl_->opener = std::make_unique<crypto::Opener>(sec);
    if (!impl_->sealer->ok()) {
      fail(ErrorCode::kInvalidArgument, "token_file: the crypto library refused the token's keys");
      return;
    }
    impl_->sealing = std::make_unique<SealingSink>(impl_->udp, *impl_->sealer, opts_.gateway_node);
    impl_->tx = impl_->sealing.get();
  }
}

Worker::~Worker() {
  if (impl_) leave();
}

Status Worker::set_push_window_kb(uint32_t kb) {
  if (kb > kMaxPushWindowKb)
    return {ErrorCode::kInvalidArgument, "push_window_kb must be 0..1048576 (KiB in flight to the gateway; 0: paced "
                                         "by a rate model), got " + std::to_string(kb)};
  opts_.push_window_kb = kb;
  impl_->window.reset();
  if (kb > 0) {
    ltp::WindowConfig wc;
    wc.max_window = static_cast<uint64_t>(kb) * 1024;
    impl_->window = std::make_unique<ltp::WindowController>(wc);
  }
  impl_->push.reset();  // the next round's sender is made with this controller
  return {};
}

void Worker::leave() {
  Impl& m = *impl_;
  if (!open_status_.ok() || opts_.announce_workers == 0 || !m.joined) return;
  m.send_job(static_cast<uint16_t>(kWorkerNodeBase + opts_.worker_index), opts_.gateway_node, wire::JobOp::kLeave,
             m.job_spec);
  m.job_running = false;
}

// Before a round of the announced job: returns at once if the gateway already said running
// for this definition (re-sending kJoin if the last one is over a second old), else sends
// kJoin every kJoinEvery until the gateway answers running or refused, or `deadline`.
Status Worker::ensure_job(size_t n, Dtype dtype, Nanos deadline, Nanos timeout, bool streaming) {
  Impl& m = *impl_;
  const uint16_t self = static_cast<uint16_t>(kWorkerNodeBase + opts_.worker_index);
  wire::JobSpec spec;
  spec.id = opts_.job;
  spec.model_bytes = static_cast<uint64_t>(n) * 4;  // float32 bytes whatever the dtype
  spec.chunk_bytes = opts_.chunk_bytes;
  spec.workers = opts_.announce_workers;
  spec.dtype = job_dtype(dtype);
  spec.weight = opts_.weight;
  spec.exact = opts_.exact;
  Nanos now = monotonic_now();
  if (m.job_running && spec == m.job_spec) {
    if (now - m.last_join >= kRejoinEvery) {
      m.send_job(self, opts_.gateway_node, wire::JobOp::kJoin, spec);
      m.last_join = now;
    }
    return {};
  }
  // A new definition (first call, another size or dtype, or after leave()): wait for the
  // gateway's word on it.
  m.job_running = false;
  m.job_spec = spec;
  m.reply_status = wire::JobStatus::kNone;
  m.reply_text.clear();
  const std::string gw = to_string(m.gateway);
  const std::string job = "job " + std::to_string(opts_.job);
  const uint64_t refused_before = m.refused;
  bool icmp_refused = false;
  Nanos next_join = now;
  const Nanos asked = now;
  for (;;) {
    if (now >= next_join) {
      m.send_job(self, opts_.gateway_node, wire::JobOp::kJoin, spec);
      m.last_join = now;
      next_join = now + kJoinEvery;
    }
    const std::optional<Status> verdict = m.drain(now, gw, icmp_refused, [&](int i) -> std::optional<Status> {
      std::span<const uint8_t> msg;
      wire::CommonInfo c;
      // Only JOB messages matter here; leftovers of an earlier round are dropped.
      if (!m.take(i, opts_.gateway_node, msg, c) || c.type != wire::MsgType::kJob || !m.on_job(msg, opts_.job))
        return std::nullopt;
      switch (m.reply_status) {
        case wire::JobStatus::kRunning: {
          // The gateway's definition, when it sends one, must be ours.
          const std::string diff = m.reply_spec.model_bytes ? wire::job_spec_difference(m.reply_spec, spec) : "";
          if (!diff.empty()) return Status{ErrorCode::kRejected, "gateway " + gw + " runs " + job + " with " + diff};
          m.job_running = true;
          m.admitted = true;
          m.stats.last_register_seconds = sg::seconds(monotonic_now() - asked);
          return Status{};
        }
        case wire::JobStatus::kRefused:
          if (!m.admitted) m.joined = false;  // never admitted: nothing to leave
          return Status{ErrorCode::kRejected, "gateway " + gw + " refused " + job + ": " +
                                                  (m.reply_text.empty() ? std::string("no reason given") : m.reply_text)};
        default:  // pending, or ended (the gateway forgot it): keep registering
          return std::nullopt;
      }
    });
    if (verdict) return *verdict;
    now = monotonic_now();
    if (streaming && m.cancelled.load(std::memory_order_acquire))
      return {ErrorCode::kInvalidArgument, job + " registration cancelled by the caller"};
    if (now >= deadline) {
      std::string msg = "gateway " + gw + ": " + job + " not running after " + seconds(timeout) + ": ";
      if (m.reply_status != wire::JobStatus::kNone) {
        msg += std::string("the gateway says ") + wire::job_status_name(m.reply_status);
        if (!m.reply_text.empty()) msg += ": " + m.reply_text;
      } else {
        msg += "no answer to the job's registration: is the gateway running, and is transport.udp_port right?";
        if (icmp_refused) msg += " (ICMP port unreachable: nothing listens on that UDP port)";
        if (m.refused > refused_before)
          msg += " " + std::to_string(m.refused - refused_before) +
                 " answers did not authenticate with the token: does token_file match the gateway's job.token_file (or, for an announced job, its token from admission.token_file)?";
        else if (!m.opener)
          msg += " (a gateway with a job.token_file or an admission.token_file drops messages without the job's token: "
                 "pass token_file)";
        else
          msg += " (or it dropped the registration: is token_file this job's token? a gateway with an "
                 "admission.token_file opens job " + std::to_string(opts_.job) + "'s messages with job " +
                 std::to_string(opts_.job) + "'s token only)";
      }
      m.stats.refused = m.refused;
      return {ErrorCode::kTimeout, msg};
    }
    m.sock.wait_readable(std::min(next_join, deadline), streaming ? m.wake_fd : -1);
    now = monotonic_now();
  }
}

const WorkerStats& Worker::stats() const { return impl_->stats; }
std::string Worker::gateway_address() const { return to_string(impl_->gateway); }
uint16_t Worker::local_port() const { return impl_->sock.local_port(); }

Status Worker::allreduce(float* data, size_t n, uint32_t round, Nanos timeout) {
  return allreduce(data, data, n, round, timeout);
}

Status Worker::allreduce(const float* in, float* out, size_t n, uint32_t round, Nanos timeout) {
  return run(in, out, n, Dtype::kF32, round, timeout, false);
}

Status Worker::allreduce(const void* in, void* out, size_t n, Dtype dtype, uint32_t round, Nanos timeout) {
  return run(in, out, n, dtype, round, timeout, false);
}

Status Worker::allreduce_streaming(const float* in, float* out, size_t n, uint32_t round, Nanos timeout) {
  return allreduce_streaming(in, out, n, Dtype::kF32, round, timeout);
}

Status Worker::allreduce_streaming(const void* in, void* out, size_t n, Dtype dtype, uint32_t round, Nanos timeout) {
  Status s = run(in, out, n, dtype, round, timeout, true);
  impl_->ready.store(0, std::memory_order_relaxed);
  impl_->cancelled.store(false, std::memory_order_relaxed);
  return s;
}

void Worker::begin_streaming() {
  impl_->ready.store(0, std::memory_order_release);
  impl_->cancelled.store(false, std::memory_order_release);
}

void Worker::cancel() {
  impl_->cancelled.store(true, std::memory_order_release);
  make_ready(0);  // wakes the wait
}

void Worker::make_ready(size_t elements) {
  Impl& m = *impl_;
  size_t cur = m.ready.load(std::memory_order_relaxed);
  while (elements > cur && !m.ready.compare_exchange_weak(cur, elements, std::memory_order_release)) {
  }
  if (m.wake_fd >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(m.wake_fd, &one, sizeof(one));
  }
}

Status Worker::run(const void* in_v, void* out_v, size_t n, Dtype dtype, uint32_t round, Nanos timeout,
                   bool streaming) {
  if (!open_status_.ok()) return open_status_;
  if (!in_v || !out_v || n == 0) return {ErrorCode::kInvalidArgument, "empty gradient buffer"};
  if (dtype != Dtype::kF32 && dtype != Dtype::kF16 && dtype != Dtype::kBf16)
    return {ErrorCode::kInvalidArgument, "unknown gradient dtype"};
  const auto* in = static_cast<const uint8_t*>(in_v);
  auto* out = static_cast<uint8_t*>(out_v);
  const size_t es = dtype_size(dtype);
  Impl& m = *impl_;
  const uint64_t chunks64 = (static_cast<uint64_t>(n) * 4 + opts_.chunk_bytes - 1) / opts_.chunk_bytes;
  if (chunks64 > (1u << 24)) return {ErrorCode::kInvalidArgument, "gradient larger than 2^24 chunks"};
  const auto chunks = static_cast<uint32_t>(chunks64);
  const uint16_t self = static_cast<uint16_t>(kWorkerNodeBase + opts_.worker_index);
  const Nanos deadline = monotonic_now() + timeout;  // registration included
  if (opts_.announce_workers > 0) {
    Status s = ensure_job(n, dtype, deadline, timeout, streaming);
    if (!s.ok()) return s;
  }
  Nanos now = monotonic_now();

  // State machines are sized per model; a push left running by a failed call is dropped.
  if (chunks != m.chunks || !m.push || !m.push->done()) {
    ltp::SenderConfig sc;
    sc.local_node = self;
    sc.peer_node = opts_.gateway_node;
    sc.max_chunks = chunks;
    sc.give_up_after = 3600 * kSecond;  // the caller's timeout governs
    m.push = std::make_unique<ltp::Sender>(sc, m.push_controller(), m.rng);
  }
  if (chunks != m.chunks || !m.recv) {
    ltp::ReceiverConfig rc;
    rc.local_node = self;
    rc.max_chunks = chunks;
    rc.max_transfers = 4;
    rc.max_jobs = 1;
    rc.fill_rule = ltp::FillRule::kLocal;
    // The result is taken whole, never closed early: a chunk filled here from this worker's
    // own gradient would leave its model replica with other values than its peers' from then
    // on (the gateways take a parent's result whole for the same reason, SyncConfig::
    // down_early_close). On the LAN a lost chunk costs the gateway's RTO, and a pause is far
    // more often this process not running (a busy training host) than a lost packet.
    rc.early_close.enabled = false;
    // One ACK per receive batch (up to kBatch chunks; the loop below polls after each full
    // one), not one per two chunks: each ACK is a packet the gateway's engine takes, parses
    // and feeds to its result sender. ACKing only once the socket was drained held the
    // gateway's window shut through long bursts (continent: rounds 1.11x slower).
    rc.ack_batch = true;
    m.recv = std::make_unique<ltp::Receiver>(rc);
    m.chunks = chunks;
  }
  // In place, the result waits in tmp: the push may still retransmit from `in`.
  uint8_t* target = out;
  if (out == in) {
    m.tmp.resize(n * es);
    target = m.tmp.data();
  }
  m.result.reset(round, target, in, n, dtype, opts_.chunk_bytes, chunks);
  m.recv->begin_round(opts_.job, round, 0, now, m.result, *m.tx);

  ltp::TransferSpec spec;
  spec.job = opts_.job;
  spec.round = round;
  spec.shard = 0;
  spec.policy_version = 0;
  spec.contributors = 1;
  // Chunk i holds the same elements whatever the type (the gateway's chunks are float32's),
  // so a half push has as many chunks, each half as long; the gateway decodes it per chunk.
  spec.codec = codec_of(dtype);
  spec.chunk_size = static_cast<uint32_t>(opts_.chunk_bytes / 4 * es);
  spec.data = {in, n * es};
  spec.streaming = streaming;
  if (!m.push->start(spec, now)) return {ErrorCode::kInvalidArgument, "cannot start the push transfer"};
  // Streaming: chunk i is released once in[] is ready through its end (the last chunk may
  // be short).
  const size_t chunk_floats = opts_.chunk_bytes / 4;
  auto release_ready = [&](Nanos t) {
    const size_t r = std::min(m.ready.load(std::memory_order_acquire), n);
    const uint32_t upto = r == n ? chunks : static_cast<uint32_t>(r / chunk_floats);
    for (uint32_t i = m.push->released(); i < upto; ++i) m.push->release(i, t);
  };
  if (streaming) {
    if (m.wake_fd < 0) return {ErrorCode::kSocket, "eventfd: the streaming push has nothing to wake it"};
    release_ready(now);
  }

  const Nanos started = now;
  const std::string gw = to_string(m.gateway);
  bool refused_seen = false;
  for (;;) {
    // Everything that arrived, then the timers, then one batched send.
    if (std::optional<Status> err = m.drain(now, gw, refused_seen, [&](int i) -> std::optional<Status> {
          std::span<const uint8_t> msg;
          wire::CommonInfo c;
          if (!m.take(i, opts_.gateway_node, msg, c)) return std::nullopt;  // with a token: only what the gateway sealed
          if (c.type == wire::MsgType::kData) {
            m.recv->on_packet(msg, now, m.result, *m.tx);
          } else if (c.type == wire::MsgType::kJob) {
            // A late reply to a kJoin: kept for the timeout's message, never part of the round.
            m.on_job(msg, opts_.job);
          } else {
            m.push->on_packet(msg, now);
          }
          return std::nullopt;
        }))
      return *err;
    now = monotonic_now();
    if (streaming && m.cancelled.load(std::memory_order_acquire)) {
      m.push.reset();  // a fresh sender next time
      return {ErrorCode::kInvalidArgument, "round " + std::to_string(round) + " cancelled by the caller"};
    }
    if (streaming && m.push->released() < chunks) {
      uint64_t drained;
      while (::read(m.wake_fd, &drained, sizeof(drained)) > 0) {
      }
      release_ready(now);
    }
    Nanos next = m.recv->poll(now, m.result, *m.tx);
    if (!m.push->done()) next = std::min(next, m.push->poll(now, *m.tx));
    if (!m.sock.flush() && m.sock.last_errno() == ECONNREFUSED) refused_seen = true;

    if (m.push->state() == ltp::SenderState::kClosed) {
      const auto reason = m.push->close_reason();
      if (reason == ltp::CloseReason::kStale)
        return {ErrorCode::kStale, "gateway " + gw + " is past round " + std::to_string(round) +
                                       " (it refused the push as stale); use a later round number"};
      if (reason == ltp::CloseReason::kRefused)
        return {ErrorCode::kRejected, "gateway " + gw + " refused the push of " + std::to_string(n) +
                                          " values (too large for it, or no room)"};
    }
    if (m.push->state() == ltp::SenderState::kRejected)
      return {ErrorCode::kRejected, "gateway " + gw + " does not speak this LTP version"};
    if (m.result.ended()) {
      if (m.result.mismatched() > 0 && m.result.received() == 0)
        return {ErrorCode::kProtocol, "gateway " + gw + " sent a result of another size: its job.model_bytes " +
                                          "does not match this gradient (" + std::to_string(n) + " values = " + std::to_string(n * 4) +
                                          " model bytes)"};
      if (opts_.exact && m.result.bubbles() > 0)  // exact: never this worker's own values in place of the mean
        return {ErrorCode::kProtocol, "gateway " + gw + ": round " + std::to_string(round) + " of exact job " +
                                          std::to_string(opts_.job) + " came back with " +
                                          std::to_string(m.result.bubbles()) + " of " + std::to_string(chunks) +
                                          " chunks missing (" +
                                          (m.result.unfilled() > 0
                                               ? std::to_string(m.result.unfilled()) +
                                                     " of them arrived malformed: another size or codec)"
                                               : std::string("the round ended without them: a peer or the job gone)"))};
      if (target != out) std::memcpy(out, target, n * es);
      m.stats.rounds++;
      m.stats.push_retransmits += m.push->stats().retransmits;
      m.stats.push_bytes += m.push->stats().bytes_sent;
      m.stats.result_bubbles += m.result.bubbles();
      m.stats.result_malformed += m.result.unfilled();
      m.stats.datagrams_sent = m.sock.stats().sent;
      m.stats.datagrams_received = m.sock.stats().received;
      m.stats.send_dropped = m.sock.stats().send_dropped + (m.sealing ? m.sealing->failed() : 0);
      m.stats.refused = m.refused;
      m.stats.last_round_seconds = static_cast<double>(monotonic_now() - started) / kSecond;
      return {};
    }
    if (now >= deadline) {
      const uint32_t acked = m.push->acked_chunks();
      std::string msg;
      if (acked == 0 && m.result.received() == 0) {
        msg = "gateway " + gw + " unreachable: no answer within " + seconds(timeout) + " (sent " +
              std::to_string(m.push->stats().data_sent) + " DATA packets)";
        if (refused_seen) msg += "; ICMP port unreachable: nothing listens on that UDP port";
        if (m.refused > 0)
          msg += "; " + std::to_string(m.refused) + " answers did not authenticate with the token: does token_file " +
                 "match the gateway's job.token_file?";
        else if (!m.opener)
          msg += " (a gateway with a job.token_file drops pushes without its token: pass the same token_file)";
        else
          msg += " (a gateway with another job.token_file, or none, drops these pushes: check the token)";
      } else if (acked < chunks && m.push->state() == ltp::SenderState::kRunning) {
        msg = "gateway " + gw + ": push of round " + std::to_string(round) + " stalled at " + std::to_string(acked) +
              "/" + std::to_string(chunks) + " chunks acknowledged after " + seconds(timeout);
      } else {
        msg = "gateway " + gw + ": no result for round " + std::to_string(round) + " within " + seconds(timeout) +
              " (push delivered; " + std::to_string(m.result.received()) + "/" + std::to_string(chunks) +
              " result chunks). It waits for the site's other workers and the other sites; check job.workers, " +
              "job.model_bytes (" + std::to_string(n * 4) + " here) and the worker index";
      }
      if (opts_.announce_workers > 0 && m.reply_status != wire::JobStatus::kRunning &&
          m.reply_status != wire::JobStatus::kNone) {
        msg += std::string("; the gateway's last word on job ") + std::to_string(opts_.job) + ": " +
               wire::job_status_name(m.reply_status) + (m.reply_text.empty() ? "" : " (" + m.reply_text + ")");
        m.job_running = false;  // the next call registers again
      }
      m.push.reset();  // a fresh sender next time
      return {ErrorCode::kTimeout, msg};
    }
    const bool waiting_for_data = streaming && m.push->released() < chunks;
    m.sock.wait_readable(std::min(next, deadline), waiting_for_data ? m.wake_fd : -1);
  }
}

}  // namespace sg::client
