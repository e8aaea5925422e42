#include "controller/control_plane.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "policy/messages.h"
#include "topology/plan_codec.h"
#include "wire/ltp_codec.h"

namespace sg::controller {
namespace {

constexpr uint16_t kPolicyChannel = 1;
constexpr uint16_t kMeasureChannel = 2;
// Policy fragments: one flag byte (more follow) and a part.
constexpr uint8_t kMoreFragments = 1;
constexpr size_t kFragmentPart = wire::kControlMaxPayload - 1;

measure::EstimatorConfig with_sites(measure::EstimatorConfig e, int sites) {
  e.sites = sites;
  return e;
}

}  // namespace

ControlPlaneConfig control_plane_config(const config::GatewayConfig& cfg) {
  ControlPlaneConfig c;
  c.controller = controller_config(cfg);
  c.nodes = job_sites(cfg);
  c.job = cfg.job.id;
  c.switch_rounds_ahead = cfg.control.switch_rounds_ahead;
  c.probes = cfg.topology.probes;
  c.probe.rate_bytes_per_s = cfg.topology.probe_rate_kbit * 1000.0 / 8;
  c.probe.packet_bytes = cfg.transport.chunk_bytes;
  c.probe.train_packets = 16;  // software timestamps: a longer train, measured over its second half
  // A packet may wait out a whole idle sleep before it is read.
  c.probe.resolution = std::max<Nanos>(kMilli, static_cast<Nanos>(cfg.dataplane.idle_sleep_max_us) * kMicro);
  c.controller.expect_full_view = cfg.topology.probes;
  return c;
}

ControlPlane::ControlPlane(ControlPlaneConfig cfg, const topo::Plan& initial)
    : cfg_(std::move(cfg)), n_(cfg_.controller.sites), self_(cfg_.controller.self), ctl_(cfg_.controller),
      est_(with_sites(cfg_.estimator, cfg_.controller.sites)), prober_(n_, self_, cfg_.probe), probe_rx_(n_, cfg_.probe.resolution),
      reassembly_(static_cast<size_t>(n_)), policy_out_(static_cast<size_t>(n_)), policy_out_off_(static_cast<size_t>(n_), 0),
      peer_restarts_(static_cast<size_t>(n_), 0), current_(initial) {
  policy::GatewayConfig pc;
  pc.self = static_cast<uint16_t>(self_);
  pc.coordinator = static_cast<uint16_t>(cfg_.controller.coordinator);
  pc.gateways = static_cast<uint16_t>(n_);
  pc.retry_interval = cfg_.retry_interval;
  pc.switch_margin = static_cast<policy::Round>(cfg_.switch_rounds_ahead);
  std::vector<uint8_t> boot;
  topo::encode(initial, boot);
  gw_ = std::make_unique<policy::Gateway>(
      cfg_.incarnation == 0 ? policy::Gateway::fresh(pc, std::move(boot))
                            : policy::Gateway::restarted(pc, cfg_.incarnation, std::move(boot), policy::kNoRound));
  for (int i = 0; i < n_; ++i) {
    for (auto* chans : {&policy_ch_, &measure_ch_}) {
      if (i == self_) {
        chans->push_back(nullptr);
        continue;
      }
      ltp::ControlConfig cc;
      cc.local_node = cfg_.nodes[self_];
      cc.peer_node = cfg_.nodes[i];
      cc.job = cfg_.job;
      cc.channel = chans == &policy_ch_ ? kPolicyChannel : kMeasureChannel;
      cc.session = cfg_.incarnation == 0 ? 1 : static_cast<uint32_t>(cfg_.incarnation);
      chans->push_back(std::make_unique<ltp::ControlChannel>(cc));
    }
  }
  probe_pad_.assign(std::min<uint32_t>(cfg_.probe.packet_bytes, wire::kProbeMaxPayload), 0);
  probe_buf_.resize(sizeof(wire::ProbeHeader));
}

ControlPlane::~ControlPlane() = default;

int ControlPlane::index_of(uint16_t node) const {
  for (int i = 0; i < n_; ++i)
    if (cfg_.nodes[i] == node) return i;
  return -1;
}

void ControlPlane::on_message(std::span<const uint8_t> msg, Nanos now) {
  auto common = wire::parse_common(msg);
  const int from = common ? index_of(common->src_node) : -1;
  if (!common || from < 0 || from == self_ || common->job != cfg_.job) {
    ++stats_.control_bad;
    return;
  }
  if (common->type == wire::MsgType::kControl) {
    on_control(from, msg, now);
  } else if (common->type == wire::MsgType::kProbe) {
    on_probe(from, msg, now);
  }
}

void ControlPlane::on_control(int from, std::span<const uint8_t> msg, Nanos now) {
  auto c = wire::parse_control(msg);
  if (!c) {
    ++stats_.control_bad;
    return;
  }
  ++stats_.control_in;
  if (c->f.channel == kPolicyChannel) {
    // The peer restarted and the channel started over: fragments of its previous run will
    // never be completed, nor will the peer see the first fragments of what we were sending.
    auto restarted = [&] {
      if (policy_ch_[from]->stats().peer_restarts == peer_restarts_[from]) return;
      peer_restarts_[from] = policy_ch_[from]->stats().peer_restarts;
      reassembly_[from].clear();
      policy_out_[from].clear();
    };
    policy_ch_[from]->on_packet(msg, now, [&](std::span<const uint8_t> p) {
      restarted();
      on_policy_bytes(from, p, now);
    });
    restarted();
  } else if (c->f.channel == kMeasureChannel) {
    measure_ch_[from]->on_packet(msg, now, [&](std::span<const uint8_t> p) {
      auto row = wire::parse_measure_row(p, static_cast<uint16_t>(n_));
      // A site reports only the links into itself.
      if (!row || row->site != from) {
        ++stats_.rows_bad;
        return;
      }
      ++stats_.rows_received;
      if (coordinator()) ctl_.on_row(*row, now);
    });
  } else {
    ++stats_.control_bad;
  }
}

void ControlPlane::on_policy_bytes(int from, std::span<const uint8_t> part, Nanos now) {
  auto& buf = reassembly_[from];
  if (part.empty() || buf.size() + part.size() > policy::kMaxPlanBytes + 4096) {
    buf.clear();
    ++stats_.control_bad;
    return;
  }
  buf.insert(buf.end(), part.begin() + 1, part.end());
  if (part[0] & kMoreFragments) return;
  gw_->on_bytes(buf, now);
  buf.clear();
}

void ControlPlane::send_policy(const policy::Message& m, Nanos now) {
  // A message goes out whole or not at all: its fragments enter the channel as its window
  // opens (flush_policy). One dropped midway would leave the receiver a head that the next
  // message's fragments complete into garbage. While one is still going out, newer ones
  // are dropped: the protocol retries whatever is not answered.
  if (!policy_out_[m.to].empty()) {
    ++stats_.policy_deferred;
    return;
  }
  policy::encode(m, policy_out_[m.to]);
  policy_out_off_[m.to] = 0;
  flush_policy(m.to, now);
}

void ControlPlane::flush_policy(int to, Nanos now) {
  std::vector<uint8_t>& out = policy_out_[to];
  size_t& off = policy_out_off_[to];
  while (off < out.size()) {
    const size_t len = std::min(kFragmentPart, out.size() - off);
    policy_part_.assign(1, off + len < out.size() ? kMoreFragments : 0);
    policy_part_.insert(policy_part_.end(), out.begin() + static_cast<std::ptrdiff_t>(off),
                        out.begin() + static_cast<std::ptrdiff_t>(off + len));
    if (!policy_ch_[to]->send(policy_part_, now)) return;  // the rest when the window opens
    off += len;
  }
  out.clear();
}

void ControlPlane::on_probe(int from, std::span<const uint8_t> msg, Nanos now) {
  auto p = wire::parse_probe(msg);
  if (!p || p->dst_node != cfg_.nodes[self_]) {
    ++stats_.probes_bad;
    return;
  }
  ++stats_.probe_packets_in;
  const Nanos rx = p->rx_ts ? static_cast<Nanos>(p->rx_ts) : now;
  ProbeResult r;
  if (probe_rx_.on_packet(from, p->train, p->seq, p->count, p->payload_len, rx, r)) take_probe(r);
}

void ControlPlane::take_probe(const ProbeResult& r) {
  const auto from = static_cast<uint16_t>(r.from), to = static_cast<uint16_t>(self_);
  if (r.bound) {
    est_.on_probe_bound(from, to, r.bytes / seconds(r.spread), r.at);
  } else {
    est_.on_probe_pair(from, to, r.bytes, r.spread, r.at);
    ++stats_.probe_results;
  }
}

void ControlPlane::send_row(Nanos now, uint32_t completed) {
  wire::MeasureRow row = make_row(est_, n_, self_, completed, egress_.peak(), now);
  row.update_lag_s = update_lag_s_;
  row.overlap = overlap_;
  ++stats_.rows_sent;
  if (coordinator()) {
    ctl_.on_row(row, now);
    return;
  }
  for (const auto& part : wire::encode_measure_row(row, wire::kControlMaxPayload))
    measure_ch_[cfg_.controller.coordinator]->send(part, now);
}

void ControlPlane::send_probes(Nanos now, std::span<const uint64_t> sent_to, ltp::PacketSink& tx) {
  for (const ProbeOrder& o : prober_.due(now, sent_to)) {
    ++stats_.probe_trains_sent;
    ++probe_train_;
    for (uint16_t k = 0; k < o.packets; ++k) {
      wire::ProbeFields f;
      f.src_node = cfg_.nodes[self_];
      f.job = cfg_.job;
      f.train = probe_train_;
      f.seq = k;
      f.count = o.packets;
      f.dst_node = cfg_.nodes[o.to];
      f.send_ts = static_cast<uint64_t>(now);
      const uint16_t pad = static_cast<uint16_t>(probe_pad_.size());
      std::vector<uint8_t> full(wire::probe_msg_len(pad));
      if (!wire::build_probe(full, f, pad)) continue;
      std::copy(full.begin(), full.begin() + sizeof(wire::ProbeHeader), probe_buf_.begin());
      ltp::TxMeta meta;
      meta.peer_node = f.dst_node;
      meta.type = wire::MsgType::kProbe;
      tx.send(meta, probe_buf_, probe_pad_);
    }
  }
}

Nanos ControlPlane::tick(Nanos now, uint32_t completed, std::span<const uint64_t> sent_to, uint64_t sent_total,
                         ltp::PacketSink& tx) {
  egress_.on_total(sent_total, now, sent_to);
  if (last_row_at_ < 0) last_row_at_ = now;
  if (completed > last_completed_) {
    // One round more: its time since the last one is what the plan cost the training.
    if (completed == last_completed_ + 1 && last_done_at_ >= 0 && completed > 0)
      ctl_.on_round_done(completed >= switch_round_ ? current_ : before_switch_, now - last_done_at_);
    last_done_at_ = now;
    last_completed_ = completed;
    est_.end_round(now);  // one estimator window per round
    if (completed >= last_row_round_ + std::max<uint32_t>(cfg_.row_every_rounds, 1)) {
      last_row_round_ = completed;
      last_row_at_ = now;
      send_row(now, completed);
    }
  } else if (cfg_.row_interval > 0 && now - last_row_at_ >= cfg_.row_interval) {
    last_row_at_ = now;
    send_row(now, completed);
  }
  for (const ProbeResult& r : probe_rx_.expire(now)) take_probe(r);
  if (coordinator() && gw_->synced() && !gw_->switch_in_progress()) {
    // Against the plan last proposed: agreed, it is what the next rounds run, even while its
    // switch round is still ahead (lib/policy re-proposes an aborted attempt by itself).
    if (auto plan = ctl_.decide(proposed_ ? *proposed_ : current_, now)) {
      std::vector<uint8_t> bytes;
      if (std::getenv("SG_SIM_DEBUG"))
        std::fprintf(stderr, "t=%.2f propose: gain %.2f, %zu shards, %zu codecs, rows %llu\n", seconds(now),
                     ctl_.stats().last_gain, plan->shards.size(), plan->codecs.size(),
                     static_cast<unsigned long long>(ctl_.stats().rows));
      if (std::getenv("SG_SIM_DEBUG_CODECS")) {  // which links' codecs the proposal changes
        const topo::Plan& was = proposed_ ? *proposed_ : current_;
        auto level = [](const topo::Plan& p, int a, int b) {
          for (const auto& c : p.codecs)
            if (c.from == a && c.to == b) return static_cast<int>(c.codec);
          return 0;
        };
        for (int a = 0; a < n_; ++a)
          for (int b = 0; b < n_; ++b)
            if (a != b && level(was, a, b) != level(*plan, a, b))
              std::fprintf(stderr, " %d>%d:%d->%d", a, b, level(was, a, b), level(*plan, a, b));
        std::fprintf(stderr, "\n");
      }
      if (std::getenv("SG_SIM_DEBUG_VIEW")) {
        const topo::Network v = ctl_.view();
        ctl_.print_inputs(stderr);
        for (int i = 0; i < n_; ++i) {
          for (int j = 0; j < n_; ++j)
            if (i != j) std::fprintf(stderr, " %4.0f", v.link_bw(i, j) * 8e-6);
          std::fprintf(stderr, "\n");
        }
        for (const topo::ShardTree& t : plan->shards) {
          std::fprintf(stderr, "  shard root %d bytes %llu parents", t.root, static_cast<unsigned long long>(t.bytes()));
          for (topo::SiteId p : t.parent) std::fprintf(stderr, " %d", p == topo::kNoSite ? -1 : static_cast<int>(p));
          std::fprintf(stderr, "\n");
        }
        for (const topo::LinkSplit& s : plan->splits) {
          std::fprintf(stderr, "  split %d->%d direct %u", s.from, s.to, s.direct_weight);
          for (const topo::Relay& r : s.relays) std::fprintf(stderr, " via %d: %u", r.via, r.weight);
          std::fprintf(stderr, "\n");
        }
      }
      if (topo::encode(*plan, bytes) == topo::PlanError::kOk && gw_->propose(std::move(bytes), now)) {
        ctl_.on_proposed(now);
        proposed_ = std::move(*plan);
        ++stats_.proposals;
      }
    }
  }
  gw_->tick(now);
  for (const auto& m : gw_->take_outbox())
    if (m.to < n_ && m.to != self_) send_policy(m, now);
  for (int i = 0; i < n_; ++i)
    if (i != self_) flush_policy(i, now);
  if (cfg_.probes) send_probes(now, sent_to, tx);
  Nanos next = now + cfg_.retry_interval;
  for (auto* chans : {&policy_ch_, &measure_ch_})
    for (auto& ch : *chans)
      if (ch) next = std::min(next, ch->poll(now, tx));
  return next;
}

std::optional<ControlPlane::Approval> ControlPlane::begin_round(uint32_t r) {
  const policy::PolicyRecord* rec = gw_->begin_round(r);
  if (!rec) return std::nullopt;
  Approval a;
  a.version = rec->version;
  if (rec->version != current_version_) {
    topo::Plan plan;
    if (topo::decode(rec->plan, plan) != topo::PlanError::kOk) return std::nullopt;
    before_switch_ = std::move(current_);
    switch_round_ = r;
    current_ = std::move(plan);
    current_version_ = rec->version;
    a.changed = true;
    ++stats_.switches;
  }
  a.plan = &current_;
  return a;
}

}  // namespace sg::controller
