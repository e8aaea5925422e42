#include "control/policy_agent.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "dataplane/job_runner.h"
#include "dataplane/log.h"
#include "dataplane/mbuf_ring.h"
#include "policy/messages.h"
#include "topology/fapt.h"
#include "topology/plan_codec.h"
#include "topology/round_time.h"
#include "wire/frame.h"
#include "wire/ltp_codec.h"

namespace sg::ctl {
namespace {

constexpr uint16_t kPolicyChannel = 1;
constexpr uint16_t kMeasureChannel = 2;
constexpr uint32_t kRowEveryRounds = 2;  // a measurement row per peer every this many rounds

}  // namespace

// Frames the control thread builds go to engine 0 through a ring; engine 0 transmits them
// on its own queue (the port index rides in the mbuf's hash field).
class PolicyAgent::FrameIo final : public dp::EngineIo {
 public:
  FrameIo(rte_mempool* pool, rte_ring* out) : pool_(pool), out_(out) {}
  void tx_st(uint16_t port_index, rte_mbuf* m) override {
    m->hash.usr = port_index;
    if (rte_ring_enqueue(out_, m) != 0) {
      counters_.tx_dropped.add();
      rte_pktmbuf_free(m);
    } else {
      counters_.tx_packets.add();
    }
  }
  rte_mempool* pool() const override { return pool_; }
  dp::EngineCounters& counters() override { return counters_; }
  uint16_t queue() const override { return 0; }

 private:
  rte_mempool* pool_;
  rte_ring* out_;
  dp::EngineCounters counters_;
};

PolicyAgent::PolicyAgent(const config::GatewayConfig& cfg, const std::vector<uint16_t>& sites,
                         const topo::Plan& initial, rte_mempool* pool, const std::vector<dp::Port>& ports,
                         const dp::Neighbours& nbrs, const std::vector<dp::PeerRoute>& routes, rte_ring* frames_in,
                         rte_ring* frames_out, dp::PolicySlot& slot)
    : cfg_(cfg), sites_(sites), in_(frames_in), slot_(slot), current_(initial),
      codecs_(cfg.compression, static_cast<int>(sites.size())) {
  for (size_t i = 0; i < sites_.size(); ++i)
    if (sites_[i] == cfg.site.id) self_ = static_cast<int>(i);
  io_ = std::make_unique<FrameIo>(pool, frames_out);
  tx_ = std::make_unique<dp::LtpTx>(ports, nbrs, routes, tx_counters_);
  tx_->bind_st(io_.get());

  policy::GatewayConfig pc;
  pc.self = static_cast<uint16_t>(self_);
  pc.coordinator = 0;  // the lowest site id plans
  pc.gateways = static_cast<uint16_t>(sites_.size());
  pc.switch_margin = static_cast<policy::Round>(cfg.control.switch_rounds_ahead);
  std::vector<uint8_t> boot;
  topo::encode(initial, boot);
  gw_ = std::make_unique<policy::Gateway>(policy::Gateway::fresh(pc, std::move(boot)));
  published_version_ = 0;  // lib/policy version 0 == the initial plan engine 0 already runs

  for (size_t i = 0; i < sites_.size(); ++i) {
    for (auto* chans : {&policy_ch_, &measure_ch_}) {
      if (static_cast<int>(i) == self_) {
        chans->push_back(nullptr);
        continue;
      }
      ltp::ControlConfig cc;
      cc.local_node = cfg.site.id;
      cc.peer_node = sites_[i];
      cc.job = cfg.job.id;
      cc.channel = chans == &policy_ch_ ? kPolicyChannel : kMeasureChannel;
      chans->push_back(std::make_unique<ltp::ControlChannel>(cc));
    }
  }
  matrix_.assign(sites_.size() * sites_.size(), 0.0);
}

PolicyAgent::~PolicyAgent() { dp::free_ring_mbufs(in_); }

void PolicyAgent::receive_frames(Nanos now) {
  void* objs[32];
  unsigned n;
  while ((n = rte_ring_dequeue_burst(in_, objs, 32, nullptr)) > 0) {
    for (unsigned i = 0; i < n; ++i) {
      auto* m = static_cast<rte_mbuf*>(objs[i]);
      std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
      // Engine 0 validated the frame; it is parsed again here only to find the LTP message.
      auto f = wire::parse_udp_frame(frame, wire::FrameChecks{false, false});
      if (f) {
        auto msg = wire::frame_payload(frame, *f);
        auto common = wire::parse_common(msg);
        int from = -1;
        if (common)
          for (size_t k = 0; k < sites_.size(); ++k)
            if (sites_[k] == common->src_node) from = static_cast<int>(k);
        if (from >= 0 && from != self_) {
          on_control(static_cast<uint16_t>(from), msg, now);
        } else {
          stats_.control_bad.fetch_add(1, std::memory_order_relaxed);
        }
      } else {
        stats_.control_bad.fetch_add(1, std::memory_order_relaxed);
      }
      rte_pktmbuf_free(m);
    }
  }
}

void PolicyAgent::on_control(uint16_t from, std::span<const uint8_t> msg, Nanos now) {
  auto c = wire::parse_control(msg);
  if (!c) {
    stats_.control_bad.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  stats_.control_in.fetch_add(1, std::memory_order_relaxed);
  if (c->f.channel == kPolicyChannel) {
    policy_ch_[from]->on_packet(msg, now, [&](std::span<const uint8_t> p) { gw_->on_bytes(p, now); });
  } else if (c->f.channel == kMeasureChannel) {
    measure_ch_[from]->on_packet(msg, now, [&](std::span<const uint8_t> p) {
      // Row: the sender's measured bytes/s of every link k -> sender, as n doubles.
      const size_t n = sites_.size();
      if (p.size() != n * sizeof(double) || !coordinator()) return;
      for (size_t k = 0; k < n; ++k) {
        double v;
        std::memcpy(&v, p.data() + k * sizeof(double), sizeof v);
        if (v > 0 && v < 1e13 && k != from) matrix_[k * n + from] = v;
      }
      stats_.rows_received.fetch_add(1, std::memory_order_relaxed);
    });
  } else {
    stats_.control_bad.fetch_add(1, std::memory_order_relaxed);
  }
}

void PolicyAgent::send_policy_messages(Nanos now) {
  gw_->tick(now);
  std::vector<uint8_t> bytes;
  for (const auto& m : gw_->take_outbox()) {
    if (m.to >= sites_.size() || static_cast<int>(m.to) == self_) continue;
    bytes.clear();
    policy::encode(m, bytes);
    // Larger than one CONTROL message (plans of very many sites) is refused and counted by
    // the channel; the protocol retries, and the planner's plans stay far below the limit.
    policy_ch_[m.to]->send(bytes, now);
  }
}

void PolicyAgent::approve_rounds(uint32_t completed) {
  // Engine 0 may run one round ahead of what it completed; each approval marks the round
  // begun in lib/policy, which then promises no switch at or before it.
  for (uint32_t r = approved_.load(std::memory_order_relaxed) + 1; r <= completed + 2; ++r) {
    const policy::PolicyRecord* rec = gw_->begin_round(r);
    if (!rec) break;  // a switch is undecided, or not synced: engine 0 waits
    if (rec->version != published_version_) {
      topo::Plan plan;
      if (topo::decode(rec->plan, plan) != topo::PlanError::kOk) break;
      auto snap = std::make_unique<dp::PolicySnapshot>();
      const uint32_t snap_version = static_cast<uint32_t>(rec->version + 1);  // the dataplane counts from 1
      snap->version = snap_version;
      snap->from_round = r;
      snap->plan = plan;
      slot_.publish(std::move(snap));
      published_version_ = rec->version;
      current_ = std::move(plan);
      stats_.switches.fetch_add(1, std::memory_order_relaxed);
      SG_LOG(INFO, control, "policy version %u agreed, in force from round %u\n", snap_version, r);
    }
    approved_.store(r, std::memory_order_release);
  }
}

void PolicyAgent::exchange_measurements(Nanos now, uint32_t completed, const measure::LinkEstimator& est) {
  if (completed < kRowEveryRounds || completed == last_row_round_ || completed % kRowEveryRounds) return;
  last_row_round_ = completed;
  const size_t n = sites_.size();
  std::vector<uint8_t> row(n * sizeof(double));
  for (size_t k = 0; k < n; ++k) {
    const double v = k == static_cast<size_t>(self_)
                         ? 0.0
                         : est.bytes_per_s(static_cast<uint16_t>(k), static_cast<uint16_t>(self_), now);
    std::memcpy(row.data() + k * sizeof(double), &v, sizeof v);
    if (coordinator() && v > 0) matrix_[k * n + self_] = v;
  }
  if (!coordinator() && measure_ch_[0]->send(row, now)) stats_.rows_sent.fetch_add(1, std::memory_order_relaxed);
}

void PolicyAgent::maybe_replan(Nanos now) {
  if (!coordinator() || !gw_->synced() || gw_->switch_in_progress()) return;
  if (now - last_switch_ < static_cast<Nanos>(cfg_.topology.min_interval_ms) * kMilli) return;
  const int n = static_cast<int>(sites_.size());
  std::vector<double> known;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j && matrix_[i * n + j] > 0) known.push_back(matrix_[i * n + j]);
  if (known.size() < static_cast<size_t>(n)) return;  // not enough measured yet
  std::nth_element(known.begin(), known.begin() + known.size() / 2, known.end());
  const double prior = known[known.size() / 2];  // links nobody measured: the median
  topo::Network net = topo::Network::uniform(n, prior, 0.010, 5e9);
  // Measured rates are what links achieved while sharing their sites' uplinks; the uplinks
  // themselves (config) bound every site's total.
  net.set_uplinks(dp::site_uplinks(cfg_));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j && matrix_[i * n + j] > 0) net.link_bw(i, j) = matrix_[i * n + j];
  topo::PlannerOptions opt;
  opt.max_shards = cfg_.topology.shards;
  opt.chunk_bytes = cfg_.transport.chunk_bytes;
  // Relays the plan names but no configured path reaches fall back to direct (dataplane/spray).
  opt.multipath = cfg_.topology.multipath;
  topo::Plan cand = topo::plan_fapt(net, cfg_.job.model_bytes, opt);
  if (!cfg_.topology.multipath) cand.splits.clear();
  dp::spread_shards(cand, cfg_.topology.shards, cfg_.transport.chunk_bytes);
  if (topo::validate(cand) != topo::PlanError::kOk) return;
  stats_.replans_considered.fetch_add(1, std::memory_order_relaxed);
  const double cur = topo::round_time(net, current_, cfg_.transport.chunk_bytes).total_s;
  const double next = topo::round_time(net, cand, cfg_.transport.chunk_bytes).total_s;
  const double gain = next > 0 ? cur / next - 1.0 : 0.0;
  stats_.last_gain.store(gain, std::memory_order_relaxed);
  if (gain <= cfg_.topology.recompute_change) {
    // Same trees; only a codec decision can still justify a switch.
    cand = current_;
    cand.codecs = codecs_.decide(cand, matrix_);
    if (same_codecs(cand.codecs, current_.codecs) || topo::validate(cand) != topo::PlanError::kOk) return;
    stats_.codec_proposals.fetch_add(1, std::memory_order_relaxed);
  } else {
    cand.codecs = codecs_.decide(cand, matrix_);
  }
  std::vector<uint8_t> bytes;
  if (topo::encode(cand, bytes) != topo::PlanError::kOk) return;
  if (gw_->propose(std::move(bytes), now)) {
    SG_LOG(INFO, control, "proposing a new policy: %zu shards, modelled gain %.2f, %zu compressed links\n",
           cand.shards.size(), gain, cand.codecs.size());
    stats_.proposals.fetch_add(1, std::memory_order_relaxed);
    last_switch_ = now;
  }
}

void PolicyAgent::tick(Nanos now, uint32_t completed_round, const measure::LinkEstimator& est) {
  receive_frames(now);
  exchange_measurements(now, completed_round, est);
  maybe_replan(now);
  send_policy_messages(now);
  approve_rounds(completed_round);
  for (auto* chans : {&policy_ch_, &measure_ch_})
    for (auto& ch : *chans)
      if (ch) ch->poll(now, *tx_);
}

}  // namespace sg::ctl
