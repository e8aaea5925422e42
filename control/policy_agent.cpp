#include "control/policy_agent.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "control/ring_frame_io.h"
#include "dataplane/log.h"
#include "dataplane/mbuf_ring.h"
#include "wire/frame.h"
#include "wire/ltp_codec.h"

namespace sg::ctl {

namespace {
controller::ControlPlaneConfig plane_config(const config::GatewayConfig& cfg, uint64_t incarnation) {
  controller::ControlPlaneConfig c = controller::control_plane_config(cfg);
  c.incarnation = incarnation;
  return c;
}
}  // namespace

PolicyAgent::PolicyAgent(const config::GatewayConfig& cfg, const topo::Plan& initial, rte_mempool* pool,
                         const std::vector<dp::Port>& ports, const dp::Neighbours& nbrs,
                         const std::vector<dp::PeerRoute>& routes, rte_ring* frames_in, rte_ring* frames_out,
                         dp::PolicySlot& slot, uint64_t incarnation)
    : job_(cfg.job.id),
      in_(frames_in),
      slot_(slot),
      plane_(plane_config(cfg, incarnation), initial),
      restarts_(static_cast<size_t>(plane_.controller().config().sites)) {
  io_ = std::make_unique<RingFrameIo>(pool, frames_out);
  tx_ = std::make_unique<dp::LtpTx>(ports, nbrs, routes, tx_counters_);
  tx_->bind_st(io_.get());
}

PolicyAgent::~PolicyAgent() { dp::free_ring_mbufs(in_); }

void PolicyAgent::receive_frames(Nanos now) {
  void* objs[dp::kRingBurst];
  unsigned n;
  while ((n = rte_ring_dequeue_burst(in_, objs, dp::kRingBurst, nullptr)) > 0) {
    for (unsigned i = 0; i < n; ++i) {
      auto* m = static_cast<rte_mbuf*>(objs[i]);
      std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
      // Engine 0 validated the frame; it is parsed again here only to find the LTP message.
      if (auto f = wire::parse_udp_frame(frame, wire::FrameChecks{false, false})) {
        plane_.on_message(wire::frame_payload(frame, *f), now);
      } else {
        ++frames_bad_;  // not even a UDP frame: engine 0 would not have passed it
      }
      rte_pktmbuf_free(m);
    }
  }
}

void PolicyAgent::approve_rounds(uint32_t completed, uint32_t wanted) {
  if (!plane_.synced()) return;
  // A restarted site rejoins at the cluster's round: rounds before it are never begun here.
  if (rejoin_.load(std::memory_order_relaxed) == 0 && approved_.load(std::memory_order_relaxed) == 0) {
    // Sites approve one round beyond the one they run (below), so the cluster runs the
    // round before the highest one begun.
    const uint32_t begun = plane_.cluster_round();
    const uint32_t first = std::max({1u, plane_.first_round(), begun > 1 ? begun - 1 : 1u});
    rejoin_.store(first, std::memory_order_release);
    SG_LOG(INFO, control, "job %u: policy state learnt from the peers: %s round %u, policy version %u\n", job_,
           first > 1 ? "rejoining the running job at" : "starting at", first,
           static_cast<unsigned>(plane_.active_version() + 1));
  }
  // Engine 0 may run one round ahead of what it completed; each approval marks the round
  // begun in lib/policy, which then promises no switch at or before it. Rounds engine 0
  // jumped over (its workers moved on, or it rejoined) are not approved one by one.
  uint32_t r = std::max(approved_.load(std::memory_order_relaxed) + 1, rejoin_.load(std::memory_order_relaxed));
  if (wanted > r) r = wanted;
  const uint32_t last = std::max({completed, r - 1 > completed + 2 ? r - 1 : 0u, wanted > 0 ? wanted - 1 : 0u}) + 2;
  for (; r <= last; ++r) {
    const auto a = plane_.begin_round(r);
    if (!a) break;  // a switch is undecided, or not synced: engine 0 waits
    if (a->changed) {
      auto snap = std::make_unique<dp::PolicySnapshot>();
      snap->version = static_cast<uint32_t>(a->version + 1);  // the dataplane counts from 1
      snap->from_round = r;
      snap->plan = *a->plan;
      // The plan itself, so that two runs' logs show whether they trained on the same trees.
      const std::string plan = topo::describe(*a->plan, plane_.config().nodes);
      SG_LOG(INFO, control, "job %u: policy version %u agreed, in force from round %u (%zu shards, %zu compressed links): %s\n",
             job_, snap->version, r, a->plan->shards.size(), a->plan->codecs.size(), plan.c_str());
      slot_.publish(std::move(snap));
    }
    approved_.store(r, std::memory_order_release);
  }
}

void PolicyAgent::publish_stats() {
  const auto& p = plane_.stats();
  const auto& c = plane_.controller().stats();
  stats_.proposals.store(p.proposals, std::memory_order_relaxed);
  stats_.switches.store(p.switches, std::memory_order_relaxed);
  stats_.rows_sent.store(p.rows_sent, std::memory_order_relaxed);
  stats_.rows_received.store(p.rows_received, std::memory_order_relaxed);
  stats_.control_in.store(p.control_in, std::memory_order_relaxed);
  stats_.control_bad.store(frames_bad_ + p.control_bad + p.rows_bad + p.probes_bad, std::memory_order_relaxed);
  stats_.replans_considered.store(c.replans_considered, std::memory_order_relaxed);
  stats_.codec_proposals.store(c.codec_proposals, std::memory_order_relaxed);
  stats_.regrets.store(c.regrets, std::memory_order_relaxed);
  stats_.switch_aborts.store(plane_.switch_aborts(), std::memory_order_relaxed);
  stats_.switch_aborts_later.store(plane_.switch_aborts_later(), std::memory_order_relaxed);
  stats_.probe_trains_sent.store(p.probe_trains_sent, std::memory_order_relaxed);
  stats_.probe_results.store(p.probe_results, std::memory_order_relaxed);
  stats_.probe_bounds.store(plane_.probe_receiver().bounds(), std::memory_order_relaxed);
  stats_.last_gain.store(c.last_gain, std::memory_order_relaxed);
}

// A peer that came back as a new process: the engines give up what the old one owed their
// running round (SiteSync::peer_restarted), so neither site waits for the round timeout.
void PolicyAgent::publish_restarts() {
  for (size_t i = 0; i < restarts_.sites(); ++i) {
    const auto n = static_cast<uint32_t>(plane_.peer_restarts(static_cast<int>(i)));
    if (n == restarts_.restarts(i)) continue;
    restarts_.publish(i, n);
    SG_LOG(INFO, control, "job %u: site %u restarted (a new process): the running round goes on without it\n", job_,
           static_cast<unsigned>(plane_.config().nodes[i]));
  }
}

void PolicyAgent::tick(Nanos now, uint32_t completed, std::span<const uint64_t> sent_to, uint64_t sent_total,
                       uint32_t wanted) {
  receive_frames(now);
  publish_restarts();
  const uint64_t proposals = plane_.stats().proposals;
  plane_.tick(now, completed, sent_to, sent_total, *tx_);
  if (plane_.stats().proposals != proposals) {
    // What adaptive compression weighed: each tree link's transfer time over the compute time.
    const controller::LinkCodecs& lc = plane_.controller().codecs();
    std::string weighed;
    const int n = plane_.controller().config().sites;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        if (const double e = lc.exposure(i, j); e > 0) {
          char b[48];
          std::snprintf(b, sizeof(b), "%s%d->%d %.1f", weighed.empty() ? "" : ", ", i, j, e);
          weighed += b;
        }
    char compute[96] = "";
    if (!weighed.empty())
      std::snprintf(compute, sizeof(compute), "; hideable compute per round %.0f ms, links' transfer over it: ",
                    static_cast<double>(lc.last_compute()) / 1e6);
    SG_LOG(INFO, control, "job %u: proposed a new policy (modelled gain %.2f%s%s)\n", job_,
           plane_.controller().stats().last_gain, compute, weighed.c_str());
  }
  approve_rounds(completed, wanted);
  if (started_ < 0) started_ = now;
  // A start-up exchange that takes under 2 s says nothing; then every 5 s.
  if (!plane_.synced() && now - started_ >= 2 * kSecond &&
      (unsynced_said_ < 0 || now - unsynced_said_ >= 5 * kSecond)) {
    SG_LOG(WARNING, control, "job %u: waiting for the peers' policy state (%s): no round begins before\n", job_,
           plane_.coordinator() ? "every peer's report" : "the coordinator's answer");
    unsynced_said_ = now;
  }
  publish_stats();
}

}  // namespace sg::ctl
