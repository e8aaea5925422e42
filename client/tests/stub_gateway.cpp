#include "stub_gateway.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <ctime>

#include "crypto/keys.h"
#include "topology/plan.h"
#include "wire/ltp_codec.h"

namespace sg::client {

// With a token: every message to a worker sealed toward it, as the gateway's engines do.
class StubGateway::Sealing final : public ltp::PacketSink {
 public:
  Sealing(ltp::PacketSink& inner, crypto::Sealer& sealer) : inner_(inner), sealer_(sealer), buf_(kMaxDatagram) {}
  void send(const ltp::TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) override {
    const size_t len = head.size() + payload.size();
    if (len + crypto::kTrailerLen > buf_.size()) return;
    std::memcpy(buf_.data(), head.data(), head.size());
    if (!payload.empty()) std::memcpy(buf_.data() + head.size(), payload.data(), payload.size());
    buf_[offsetof(wire::LtpCommon, flags)] |= wire::kFlagSealed;
    const size_t n = sealer_.seal(meta.peer_node, buf_, len, wire::ltp_header_len(meta.type));
    if (n > 0) inner_.send(meta, std::span<const uint8_t>(buf_.data(), n), {});
  }

 private:
  ltp::PacketSink& inner_;
  crypto::Sealer& sealer_;
  std::vector<uint8_t> buf_;
};

StubGateway::StubGateway(const StubOptions& o) : o_(o), udp_(sock_, &StubGateway::route, this) {
  // Any worker index may show up (announced jobs learn the count from the join).
  worker_addr_.resize(sync::kMaxLocalWorkers);
  known_.assign(sync::kMaxLocalWorkers, 0);
  seen_round_.assign(sync::kMaxLocalWorkers, 0);
  seen_.resize(sync::kMaxLocalWorkers);
  pending_left_ = o.pending_joins;
}

StubGateway::~StubGateway() = default;

bool StubGateway::make_job(uint64_t model_floats, uint32_t workers, uint32_t chunk_bytes, std::string& err) {
  sync::LocalGroupConfig lc;
  lc.job = o_.job;
  lc.gateway_node = o_.site_id;
  lc.workers = workers;
  lc.model_floats = model_floats;
  lc.chunk_bytes = chunk_bytes;
  lc.push_timeout = o_.push_timeout;
  auto group = std::make_unique<sync::LocalGroup>(lc);
  if (!group->ok()) {
    err = "bad stub options (workers, chunk_bytes or model size)";
    return false;
  }
  sync::SyncConfig sc;
  sc.job = o_.job;
  sc.self_node = o_.site_id;
  sc.site_nodes = {o_.site_id};
  sc.chunk_bytes = chunk_bytes;
  auto site = std::make_unique<sync::SiteSync>(sc);
  if (!site->set_plan(topo::single_site_plan(model_floats * 4), 1)) {
    err = "SiteSync refused the one-site plan";
    return false;
  }
  group_ = std::move(group);
  site_ = std::move(site);
  left_.assign(workers, 0);
  return true;
}

bool StubGateway::open(std::string& err) {
  if (!o_.announced) {
    if (!make_job(o_.model_floats, o_.workers, o_.chunk_bytes, err)) return false;
    running_ = true;
  }
  if (!o_.token_file.empty()) {
    crypto::SecretFile f = crypto::load_secret(o_.token_file);
    if (f.secret.empty()) {
      err = "token_file: " + f.error;
      return false;
    }
    crypto::PeerSecurity sec;  // as the gateway's load_worker_security
    sec.secret = std::move(f.secret);
    sec.suite = crypto::Suite::kAes128Gcm;
    sec.protection = crypto::Protection::kEncrypt;
    sec.first_epoch = crypto::boot_epoch(static_cast<uint64_t>(std::time(nullptr)));
    sec.self = o_.site_id;
    for (uint32_t w = 0; w < o_.workers; ++w) sec.peers.push_back(static_cast<uint16_t>(sync::kWorkerNodeBase + w));
    sec.lanes = 1;
    sealer_ = std::make_unique<crypto::Sealer>(sec, 0);
    opener_ = std::make_unique<crypto::Opener>(sec);
    if (!sealer_->ok()) {
      err = "token_file: the crypto library refused the keys";
      return false;
    }
    sealing_ = std::make_unique<Sealing>(udp_, *sealer_);
    tx_ = sealing_.get();
  }
  sockaddr_in a{};
  if (!resolve_ipv4(o_.bind_host, o_.port, a, err)) return false;
  return sock_.open(a, nullptr, err);
}

bool StubGateway::route(void* self, uint16_t node, sockaddr_in& out) {
  auto* s = static_cast<StubGateway*>(self);
  const int w = node - sync::kWorkerNodeBase;
  if (w < 0 || w >= static_cast<int>(s->known_.size()) || !s->known_[w]) return false;
  out = s->worker_addr_[w];
  return true;
}

void StubGateway::count_push(int w, std::span<const uint8_t> msg) {
  auto d = wire::parse_data(msg);
  if (!d || !codec_id_valid(static_cast<uint8_t>(d->f.codec)) || d->f.chunk_index >= d->f.chunk_count) return;
  auto& seen = seen_[static_cast<size_t>(w)];
  if (seen_round_[static_cast<size_t>(w)] != d->f.round || seen.size() != d->f.chunk_count) {
    seen_round_[static_cast<size_t>(w)] = d->f.round;
    seen.assign(d->f.chunk_count, 0);
  }
  if (seen[d->f.chunk_index]) return;
  seen[d->f.chunk_index] = 1;
  PushedCount& p = pushed_[static_cast<size_t>(d->f.codec)];
  ++p.chunks;
  p.payload_bytes += d->payload.size();
}

void StubGateway::reply(uint16_t worker_node, wire::JobStatus st, std::string_view text, uint32_t job) {
  uint8_t buf[sizeof(wire::JobHeader) + wire::kJobMaxText];
  wire::JobSpec spec = job_;
  spec.id = job ? job : o_.job;
  auto len = wire::build_job(buf, o_.site_id, wire::JobOp::kReply, st, spec, text);
  if (!len) return;
  ltp::TxMeta meta;
  meta.peer_node = worker_node;
  meta.type = wire::MsgType::kJob;
  tx_->send(meta, std::span<const uint8_t>(buf, *len), {});  // routed to where the join came from
}

// The announced job, as a one-job registry would keep it.
void StubGateway::on_job(std::span<const uint8_t> msg) {
  auto j = wire::parse_job(msg);
  if (!j) return;
  const int w = j->src_node - sync::kWorkerNodeBase;
  if (j->op == wire::JobOp::kLeave) {
    ++leaves_;
    if (o_.announced && held_ && w >= 0 && static_cast<size_t>(w) < left_.size() && running_) {
      left_[static_cast<size_t>(w)] = 1;
      if (std::all_of(left_.begin(), left_.end(), [](uint8_t l) { return l != 0; })) {
        running_ = false;
        ended_ = true;
      }
    }
    return;
  }
  if (j->op != wire::JobOp::kJoin) return;
  ++joins_;
  if (o_.ignore_joins) return;
  const std::string site = "site " + std::to_string(o_.site_id);
  if (j->spec.id != o_.job) {
    ++job_refused_;
    // Answered as that job's (a worker reads only replies for its own job).
    reply(j->src_node, wire::JobStatus::kRefused, site + " has no room for job " + std::to_string(j->spec.id),
          j->spec.id);
    return;
  }
  if (!held_) {
    job_ = j->spec;
    if (o_.model_floats > 0) {  // what the stub was told to expect
      job_ = wire::JobSpec{o_.job, o_.model_floats * 4, o_.chunk_bytes, static_cast<uint16_t>(o_.workers),
                           o_.job_dtype, o_.job_weight};
    }
    held_ = true;
  }
  const std::string diff = wire::job_spec_difference(job_, j->spec);
  if (!diff.empty()) {
    ++job_refused_;
    reply(j->src_node, wire::JobStatus::kRefused,
          site + " holds job " + std::to_string(o_.job) + " with " + diff);
    return;
  }
  if (pending_left_ > 0) {
    --pending_left_;
    reply(j->src_node, wire::JobStatus::kPending, "waiting for site 9");
    return;
  }
  if (!group_) {
    std::string err;
    if (!make_job(job_.model_bytes / 4, job_.workers, job_.chunk_bytes, err)) {
      ++job_refused_;
      reply(j->src_node, wire::JobStatus::kRefused, site + ": " + err);
      return;
    }
  }
  if (!running_) {  // started, or restarted after every worker left
    std::fill(left_.begin(), left_.end(), 0);
    running_ = true;
    ended_ = false;
  }
  if (w >= 0 && static_cast<size_t>(w) < left_.size()) left_[static_cast<size_t>(w)] = 0;
  reply(j->src_node, wire::JobStatus::kRunning, {});
}

void StubGateway::receive_all() {
  for (;;) {
    const int r = sock_.receive();
    if (r <= 0) return;
    const Nanos now = monotonic_now();
    for (int i = 0; i < r; ++i) {
      std::span<const uint8_t> msg = sock_.data(i);
      auto c = wire::parse_common(msg);
      if (!c) continue;
      if (opener_) {
        size_t len = 0;
        if (!(c->flags & wire::kFlagSealed) ||
            opener_->open(c->src_node, sock_.data(i), wire::ltp_header_len(c->type), &len) !=
                crypto::OpenVerdict::kOk) {
          ++refused_;
          continue;
        }
        msg = msg.first(len);
      }
      const int w = c->src_node - sync::kWorkerNodeBase;
      if (w >= 0 && w < static_cast<int>(known_.size())) {
        // Where a worker's packets come from is where its results go.
        worker_addr_[w] = sock_.from(i);
        known_[w] = 1;
      }
      if (c->type == wire::MsgType::kJob) {
        on_job(msg);
        continue;
      }
      if (!running_) continue;  // no job (yet, or any more): pushes are dropped
      if (w >= 0 && w < static_cast<int>(known_.size()) && c->type == wire::MsgType::kData) count_push(w, msg);
      group_->on_packet(msg, now, *tx_);
    }
  }
}

void StubGateway::run(const std::atomic<bool>& stop, uint64_t rounds) {
  while (!stop.load(std::memory_order_relaxed) && (rounds == 0 || delivered_ < rounds)) {
    receive_all();
    Nanos now = monotonic_now();
    Nanos next = now + 20 * kMilli;
    if (group_) {
      next = std::min(next, group_->poll(now, *tx_));
      const uint32_t round = group_->round();
      if (group_->contribution_ready(round) && !site_->running()) {
        site_->begin_round(round, group_->contribution(), now, *tx_);
      }
      next = std::min(next, site_->poll(now, *tx_));
      if (site_->round_done() && site_->round() == round && group_->contribution_ready(round)) {
        group_->deliver(round, site_->result(), now, *tx_);
        ++delivered_;
        next = now;
      }
    }
    sock_.flush();
    // Wake at least every 20 ms to look at `stop`.
    sock_.wait_readable(std::min(next, monotonic_now() + 20 * kMilli));
  }
  // Let the last results go out.
  const Nanos end = monotonic_now() + 500 * kMilli;
  while (group_ && !group_->round_delivered() && monotonic_now() < end) {
    receive_all();
    const Nanos next = group_->poll(monotonic_now(), *tx_);
    sock_.flush();
    sock_.wait_readable(std::min(next, monotonic_now() + kMilli));
  }
  // What is already in the socket (a worker's kLeave sent just before the stop) is counted:
  // on loopback a datagram is there once its sendto returned, so tests need not wait.
  receive_all();
}

}  // namespace sg::client
