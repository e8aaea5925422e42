#include "stub_gateway.h"

#include <algorithm>

#include "topology/plan.h"
#include "wire/ltp_codec.h"

namespace sg::client {

StubGateway::StubGateway(const StubOptions& o) : o_(o), tx_(sock_, &StubGateway::route, this) {
  sync::LocalGroupConfig lc;
  lc.job = o.job;
  lc.gateway_node = o.site_id;
  lc.workers = o.workers;
  lc.model_floats = o.model_floats;
  lc.chunk_bytes = o.chunk_bytes;
  lc.push_timeout = o.push_timeout;
  group_ = std::make_unique<sync::LocalGroup>(lc);
  sync::SyncConfig sc;
  sc.job = o.job;
  sc.self_node = o.site_id;
  sc.site_nodes = {o.site_id};
  sc.chunk_bytes = o.chunk_bytes;
  site_ = std::make_unique<sync::SiteSync>(sc);
  worker_addr_.resize(o.workers);
  known_.assign(o.workers, 0);
  seen_round_.assign(o.workers, 0);
  seen_.resize(o.workers);
}

bool StubGateway::open(std::string& err) {
  if (!group_->ok()) {
    err = "bad stub options (workers, chunk_bytes or model size)";
    return false;
  }
  const topo::Plan plan = topo::single_site_plan(o_.model_floats * 4);
  if (!site_->set_plan(plan, 1)) {
    err = "SiteSync refused the one-site plan";
    return false;
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

void StubGateway::receive_all() {
  for (;;) {
    const int r = sock_.receive();
    if (r <= 0) return;
    const Nanos now = monotonic_now();
    for (int i = 0; i < r; ++i) {
      const auto msg = sock_.data(i);
      auto c = wire::parse_common(msg);
      if (!c) continue;
      const int w = c->src_node - sync::kWorkerNodeBase;
      if (w >= 0 && w < static_cast<int>(known_.size())) {
        // Where a worker's packets come from is where its results go.
        worker_addr_[w] = sock_.from(i);
        known_[w] = 1;
        if (c->type == wire::MsgType::kData) count_push(w, msg);
      }
      group_->on_packet(msg, now, tx_);
    }
  }
}

void StubGateway::run(const std::atomic<bool>& stop, uint64_t rounds) {
  while (!stop.load(std::memory_order_relaxed) && (rounds == 0 || delivered_ < rounds)) {
    receive_all();
    const Nanos now = monotonic_now();
    Nanos next = group_->poll(now, tx_);
    const uint32_t round = group_->round();
    if (group_->contribution_ready(round) && !site_->running()) {
      site_->begin_round(round, group_->contribution(), now, tx_);
    }
    next = std::min(next, site_->poll(now, tx_));
    if (site_->round_done() && site_->round() == round && group_->contribution_ready(round)) {
      group_->deliver(round, site_->result(), now, tx_);
      ++delivered_;
      next = now;
    }
    sock_.flush();
    // Wake at least every 20 ms to look at `stop`.
    sock_.wait_readable(std::min(next, monotonic_now() + 20 * kMilli));
  }
  // Let the last results go out.
  const Nanos end = monotonic_now() + 500 * kMilli;
  while (!group_->round_delivered() && monotonic_now() < end) {
    receive_all();
    const Nanos next = group_->poll(monotonic_now(), tx_);
    sock_.flush();
    sock_.wait_readable(std::min(next, monotonic_now() + kMilli));
  }
}

}  // namespace sg::client
