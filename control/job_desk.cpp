#include "control/job_desk.h"

#include <rte_mbuf.h>

#include <algorithm>

#include "config/load.h"
#include "dataplane/job_memory.h"
#include "control/ring_frame_io.h"
#include "control/security.h"
#include "crypto/keys.h"
#include "dataplane/log.h"
#include "dataplane/mbuf_ring.h"
#include "sync/local_group.h"
#include "wire/frame.h"
#include "wire/job_msg.h"

namespace sg::ctl {

config::GatewayConfig announced_job_config(const config::GatewayConfig& base, const wire::JobSpec& spec) {
  config::GatewayConfig c = base;
  config::JobConfig j = base.job.model_bytes ? config::JobConfig{} : base.job;
  j.id = spec.id;
  j.model_bytes = spec.model_bytes;
  j.workers = spec.workers;
  j.worker_chunk_bytes = spec.chunk_bytes;
  j.weight = spec.weight;
  j.rounds = 0;
  j.token_file.clear();
  c.job = j;
  c.jobs = {j};
  c.jobs_listed = false;
  c.admission.enabled = false;  // the job alone, as if it were the YAML's
  if (spec.exact) {
    // Bit-exact rounds or none: every chunk waits for every contribution, nothing is coded,
    // and a round waits as long as a process group's collective would (gloo's default 30 min).
    c.compression.mode = config::CompressionMode::kOff;
    c.transport.early_close.enabled = false;
    c.job.round_timeout_ms = kExactRoundTimeoutMs;
    c.job.worker_timeout_ms = kExactRoundTimeoutMs - 1000;
    c.jobs = {c.job};
  }
  return c;
}

bool announced_job_cost(const config::GatewayConfig& base, unsigned engines, const wire::JobSpec& spec, jobs::Cost& cost,
                        std::string& error) {
  if (spec.model_bytes == 0 || spec.model_bytes > (uint64_t{1} << 36)) {
    error = "model_bytes " + std::to_string(spec.model_bytes) + ": expected 4..2^36";
    return false;
  }
  if (spec.workers == 0 || spec.workers > 4096) {
    error = "workers " + std::to_string(spec.workers) + ": expected 1..4096 workers per site";
    return false;
  }
  if (spec.weight == 0 || spec.weight > 16) {
    error = "weight " + std::to_string(spec.weight) + ": expected 1..16";
    return false;
  }
  if (spec.dtype >= wire::kJobDtypes) {
    error = "dtype " + std::to_string(spec.dtype) + ": expected float32, float16 or bfloat16";
    return false;
  }
  if (spec.chunk_bytes == 0) {
    error = "chunk_bytes 0: expected the workers' chunk size (64..9000, a multiple of 4)";
    return false;
  }
  const config::GatewayConfig c = announced_job_config(base, spec);
  config::ErrorList errs(base.source);
  config::validate(c, errs);
  for (const auto& e : errs.list())
    if (e.key_path.rfind("job.", 0) == 0 || e.key_path.rfind("transport.", 0) == 0) {
      error = e.key_path.substr(e.key_path.rfind("job.", 0) == 0 ? 4 : 0) + ": expected " + e.expected + ", found " +
              e.found;
      if (error.rfind("worker_chunk_bytes", 0) == 0) error = "chunk_bytes" + error.substr(18);
      return false;
    }
  cost.memory_bytes = dp::job_memory_estimate(c, engines);
  cost.mbufs = kJobMbufs;
  return true;
}

namespace {
jobs::RegistryConfig registry_config(const config::GatewayConfig& cfg, jobs::Budget budget) {
  jobs::RegistryConfig r;
  r.self = cfg.site.id;
  for (const auto& p : cfg.peers) r.peers.push_back(p.id);
  r.budget = budget;
  r.announce_interval = static_cast<Nanos>(cfg.admission.announce_interval_ms) * kMilli;
  r.idle_timeout = static_cast<Nanos>(cfg.admission.idle_timeout_s) * kSecond;
  // Long enough that every peer hears a refusal or an end several times over.
  r.refusal_hold = std::max<Nanos>(3 * kSecond, 10 * r.announce_interval);
  return r;
}
}  // namespace

JobDesk::JobDesk(const config::GatewayConfig& cfg, unsigned engines, jobs::Budget budget, rte_mempool* pool,
                 const std::vector<dp::Port>& ports, const dp::Neighbours& nbrs, const std::vector<dp::PeerRoute>& routes,
                 rte_ring* frames_in, rte_ring* frames_out)
    : cfg_(cfg),
      registry_(registry_config(cfg, budget),
                [&cfg, engines](const wire::JobSpec& s, jobs::Cost& c, std::string& e) {
                  return announced_job_cost(cfg, engines, s, c, e);
                }),
      in_(frames_in) {
  io_ = std::make_unique<RingFrameIo>(pool, frames_out);
  tx_ = std::make_unique<dp::LtpTx>(ports, nbrs, routes, tx_counters_);
  tx_->bind_st(io_.get());
  tx_->set_workers(4096, cfg.transport.udp_port);  // any worker index a join may carry
  for (const auto& p : cfg.peers) peers_.push_back(p.id);
  nports_ = ports.size();
}

JobDesk::~JobDesk() { dp::free_ring_mbufs(in_); }

JobDesk::WorkerSession* JobDesk::worker_session(uint32_t job, uint16_t node) {
  const auto key = std::make_pair(job, node);
  if (auto it = sessions_.find(key); it != sessions_.end()) return &it->second;
  if (sessions_.size() >= kMaxSessions) std::erase_if(sessions_, [](const auto& kv) { return !kv.second.proven; });
  if (sessions_.size() >= kMaxSessions) return nullptr;
  if (now_ - window_start_ >= kSecond) {
    window_start_ = now_;
    made_in_window_ = 0;
  }
  if (++made_in_window_ > kMaxNewSessionsPerSecond) return nullptr;
  crypto::PeerSecurity sec = worker_security(cfg_, crypto::derive_job_token(admission_secret_, job));
  sec.peers = {node};  // this worker only (its job's size is in the sealed part)
  WorkerSession ws;
  ws.opener = std::make_unique<crypto::Opener>(sec);
  ws.sealer = std::make_unique<crypto::Sealer>(sec, kControlLane);
  if (sec.secret.empty() || !ws.sealer->ok()) return nullptr;
  return &sessions_.emplace(key, std::move(ws)).first->second;
}

size_t JobDesk::open_worker(const wire::CommonInfo& c, std::span<uint8_t> msg) {
  if ((c.flags & wire::kFlagSealed) == 0) return 0;  // admit_source_st lets only sealed ones through
  WorkerSession* ws = worker_session(c.job, c.src_node);
  size_t len = 0;
  if (!ws || ws->opener->open(c.src_node, msg, wire::ltp_header_len(wire::MsgType::kJob), &len) != crypto::OpenVerdict::kOk)
    return 0;
  ws->proven = true;
  return len;
}

void JobDesk::send(uint16_t node, wire::JobOp op, wire::JobStatus status, const wire::JobSpec& spec,
                   const std::string& text) {
  uint8_t buf[sizeof(wire::JobHeader) + wire::kJobMaxText];
  auto n = wire::build_job(buf, cfg_.site.id, op, status, spec, text);
  if (!n) return;
  if (!admission_secret_.empty() && node >= sync::kWorkerNodeBase) {
    // To a worker: sealed with its job's token (nothing goes out if no session can be made).
    WorkerSession* ws = worker_session(spec.id, node);
    if (!ws) return;
    tx_->set_worker_sealer(ws->sealer.get());
  }
  ltp::TxMeta meta;
  meta.peer_node = node;
  meta.type = wire::MsgType::kJob;
  tx_->send(meta, std::span<const uint8_t>(buf, *n), {});
}

void JobDesk::receive(Nanos now) {
  now_ = now;
  void* objs[dp::kRingBurst];
  unsigned n;
  while ((n = rte_ring_dequeue_burst(in_, objs, dp::kRingBurst, nullptr)) > 0) {
    for (unsigned i = 0; i < n; ++i) {
      auto* m = static_cast<rte_mbuf*>(objs[i]);
      std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
      // Engine 0 validated (and opened) the frame; parsed again here to find the message.
      // Under admission tokens a worker's comes sealed: opened here with its job's token.
      auto f = wire::parse_udp_frame(frame, wire::FrameChecks{false, false});
      wire::Result<wire::JobMsg> msg = wire::WireError::kTruncated;
      bool token_refused = false;
      if (f) {
        std::span<uint8_t> body(rte_pktmbuf_mtod(m, uint8_t*) + f->payload_offset, f->payload_len);
        auto c = wire::parse_common(body);
        if (c && c->src_node >= sync::kWorkerNodeBase && !admission_secret_.empty()) {
          body = body.first(open_worker(*c, body));
          token_refused = body.empty();
        }
        msg = wire::parse_job(body);
      }
      if (!msg || m->hash.usr >= nports_) {
        (token_refused ? stats_.token_refused : stats_.bad).fetch_add(1, std::memory_order_relaxed);
        rte_pktmbuf_free(m);
        continue;
      }
      const wire::JobMsg& j = *msg;
      if (j.src_node >= sync::kWorkerNodeBase) {
        if (j.op == wire::JobOp::kJoin) {
          // Answer where the join came from (the worker's address, as for its results).
          dp::WorkerAddr a;
          a.valid = true;
          a.ipv4 = f->ip.src;
          a.udp_port = f->udp.src_port;
          a.port_index = static_cast<uint16_t>(m->hash.usr);  // engine 0: the port it came in on
          std::copy(f->eth.src.begin(), f->eth.src.end(), a.mac.addr_bytes);
          tx_->learn_worker_st(j.src_node, a);
          stats_.joins.fetch_add(1, std::memory_order_relaxed);
          const jobs::Reply r = registry_.on_join(j.spec, j.src_node, now);
          const jobs::JobView* v = registry_.find(j.spec.id);
          if (r.status == wire::JobStatus::kPending) {
            auto& w = waiting_[j.spec.id];
            if (std::find(w.begin(), w.end(), j.src_node) == w.end()) w.push_back(j.src_node);
          }
          send(j.src_node, wire::JobOp::kReply, r.status, v ? v->spec : j.spec, r.text);
          stats_.replies.fetch_add(1, std::memory_order_relaxed);
        } else if (j.op == wire::JobOp::kLeave) {
          stats_.leaves.fetch_add(1, std::memory_order_relaxed);
          registry_.on_leave(j.spec.id, j.src_node, now);
        } else {
          stats_.bad.fetch_add(1, std::memory_order_relaxed);
        }
      } else if (j.op == wire::JobOp::kAnnounce) {
        stats_.announcements_in.fetch_add(1, std::memory_order_relaxed);
        registry_.on_announce(j.src_node, j.spec, j.status, j.text, now);
      } else {
        stats_.bad.fetch_add(1, std::memory_order_relaxed);
      }
      rte_pktmbuf_free(m);
    }
  }
}

void JobDesk::tell_waiting() {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const jobs::JobView* v = registry_.find(it->first);
    const bool told = !v || (v->status == wire::JobStatus::kRunning && v->built) ||
                      v->status == wire::JobStatus::kRefused || v->status == wire::JobStatus::kEnded;
    if (!told) {
      ++it;
      continue;
    }
    if (v)
      for (uint16_t node : it->second) {
        send(node, wire::JobOp::kReply, v->status, v->spec, v->reason);
        stats_.replies.fetch_add(1, std::memory_order_relaxed);
      }
    it = waiting_.erase(it);
  }
}

void JobDesk::tick(Nanos now) {
  receive(now);
  tell_waiting();
  for (const auto& a : registry_.tick(now))
    for (uint16_t p : peers_) {
      send(p, wire::JobOp::kAnnounce, a.status, a.spec, a.text);
      stats_.announcements_out.fetch_add(1, std::memory_order_relaxed);
    }
  refusals_.store(registry_.refusals(), std::memory_order_relaxed);
  if (views_at_ < 0 || now - views_at_ >= 50 * kMilli) {
    views_at_ = now;
    auto v = registry_.jobs();
    std::lock_guard lk(views_mu_);
    views_ = std::move(v);
  }
}

}  // namespace sg::ctl
