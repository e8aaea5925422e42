#include "dataplane/gateway_handler.h"

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include "dataplane/job_runner.h"
#include "dataplane/ltp_tx.h"
#include "dataplane/mbuf_ring.h"

namespace sg::dp {

GatewayHandler::GatewayHandler(const config::GatewayConfig& cfg, const std::vector<Port>& ports, Neighbours& nbrs,
                               const std::vector<PeerRoute>& routes, bool arp_owner)
    : cfg_(cfg), ports_(ports), nbrs_(nbrs), routes_(routes), arp_owner_(arp_owner) {
  tsc_hz_ = rte_get_tsc_hz();
  tsc0_ = rte_get_tsc_cycles();
  impair_rng_.reseed(cfg.impairment.seed * 1000003u + cfg.site.id);
}

Nanos GatewayHandler::now_ns(uint64_t tsc) const {
  return static_cast<Nanos>(static_cast<__uint128_t>(tsc - tsc0_) * 1000000000u / tsc_hz_);
}

bool GatewayHandler::attach_job(JobRunner* job, LtpTx* tx, crypto::Opener* worker_opener) {
  if (njobs_ == kMaxJobs || job_of(job->id())) return false;
  jobs_[njobs_++] = JobSlot{job->id(), job, tx, nullptr, nullptr, worker_opener};
  return true;
}

bool GatewayHandler::attach_control(uint32_t job, rte_ring* to_control, rte_ring* from_control) {
  JobSlot* js = job_of(job);
  if (!js) return false;
  js->ctl_in = to_control;
  js->ctl_out = from_control;
  return true;
}

unsigned GatewayHandler::apply_commands_st() {
  void* objs[4];
  const unsigned n = rte_ring_sc_dequeue_burst(commands_, objs, 4, nullptr);
  for (unsigned i = 0; i < n; ++i) {
    auto* c = static_cast<JobCommand*>(objs[i]);
    if (c->kind == JobCommand::Kind::kAttach) {
      c->ok = attach_job(c->runner, c->tx, c->worker_opener);
      if (c->ok && c->ctl_in) attach_control(c->job, c->ctl_in, c->ctl_out);
    } else if (JobSlot* js = job_of(c->job)) {
      js->runner->on_stop_st();
      js->runner->release_st();
      *js = jobs_[--njobs_];  // order does not matter: looked up by id
      jobs_[njobs_] = JobSlot{};
    }
    c->done.store(true, std::memory_order_release);
  }
  return n;
}

void GatewayHandler::on_stop_st(EngineIo&) {
  for (unsigned j = 0; j < njobs_; ++j) jobs_[j].runner->on_stop_st();
  // What engine 0 dealt to our TX queue and we did not send. Engine 0 must be stopped first
  // (it is the ring's only producer), else a later enqueue stays in the ring.
  free_ring_mbufs(tx_ring_);
  for (unsigned j = 0; j < njobs_; ++j) free_ring_mbufs(jobs_[j].ctl_out);
  if (njobs_ || !owner_rings_.empty()) free_ring_mbufs(handoff_);
  free_ring_mbufs(registry_out_);
}

void GatewayHandler::on_rx_st(EngineIo& io, uint16_t port_index, rte_mbuf** pkts, uint16_t n, uint64_t now_tsc) {
  for (uint16_t i = 0; i < n; ++i) {
    if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void*));
    handle_one_st(io, port_index, pkts[i], now_tsc);
  }
}

unsigned GatewayHandler::on_poll_st(EngineIo& io, uint64_t now_tsc) {
  unsigned work = 0;
  void* objs[kRingBurst];
  if (commands_) work += apply_commands_st();
  if (registry_out_) {
    const unsigned n = rte_ring_dequeue_burst(registry_out_, objs, kRingBurst, nullptr);
    for (unsigned i = 0; i < n; ++i) {
      auto* m = static_cast<rte_mbuf*>(objs[i]);
      io.tx_st(static_cast<uint16_t>(m->hash.usr), m);
    }
    work += n;
  }
  if (tx_ring_) {
    const unsigned n = rte_ring_sc_dequeue_burst(tx_ring_, objs, kRingBurst, nullptr);
    for (unsigned i = 0; i < n; ++i) {
      auto* m = static_cast<rte_mbuf*>(objs[i]);
      if (m->hash.usr < ports_.size()) {
        io.tx_st(static_cast<uint16_t>(m->hash.usr), m);
      } else {
        rte_pktmbuf_free(m);  // cannot happen: LtpTx writes a valid port index
      }
    }
    work += n;
  }
  if (handoff_ && (njobs_ || !owner_rings_.empty())) {
    // Frames other engines received for our shards: validated again as if from the wire.
    const unsigned n = rte_ring_dequeue_burst(handoff_, objs, kRingBurst, nullptr);
    for (unsigned i = 0; i < n; ++i) {
      auto* m = static_cast<rte_mbuf*>(objs[i]);
      const uint16_t pi = static_cast<uint16_t>(m->hash.usr < ports_.size() ? m->hash.usr : 0);
      handle_one_st(io, pi, m, now_tsc);
    }
    work += n;
  }
  if (njobs_) {
    const Nanos now = now_ns(now_tsc);
    for (unsigned j = 0; j < njobs_; ++j) {
      JobSlot& js = jobs_[j];
      if (js.ctl_out) {
        const unsigned n = rte_ring_dequeue_burst(js.ctl_out, objs, kRingBurst, nullptr);
        for (unsigned i = 0; i < n; ++i) {
          auto* m = static_cast<rte_mbuf*>(objs[i]);
          io.tx_st(static_cast<uint16_t>(m->hash.usr), m);
        }
        work += n;
      }
      js.tx->bind_st(&io);
      work += js.runner->poll_st(now);
    }
  }
  if (arp_owner_) work += resolve_st(io, now_tsc);
  return work;
}

}  // namespace sg::dp
