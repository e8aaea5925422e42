// A simulated site that runs what a gateway runs: sync::SiteSync for the rounds and the
// gateway's control plane (lib/controller: the controller, the policy protocol over CONTROL,
// measurement rows, probes). CONTROL and PROBE messages cross the simulated links like any
// other packet, so a switch takes the links' delay and loss; a round begins only once the
// policy protocol approves it, under the plan it names. Nothing here reads a simulated
// link's rate: the controller sees what the site measured, as in a gateway.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "controller/control_plane.h"
#include "sim/participants.h"

namespace sg::sim {

struct GatewaySiteConfig {
  sync::SyncConfig sync;                   // SiteSync of this site (site_nodes: every site)
  controller::ControlPlaneConfig control;  // controller.self = this site's index
  Nanos control_interval = 5 * kMilli;     // the control thread's tick
  // Called when this site switches to a new plan (the simulator installs its multipath splits).
  std::function<void(const topo::Plan&)> on_switch;
};

class GatewaySite final : public Participant, private sync::SampleSink {
 public:
  GatewaySite(GatewaySiteConfig cfg, const topo::Plan& initial);

  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) override;
  Nanos poll(Nanos now, ltp::PacketSink& tx) override;
  void on_relay(std::span<const uint8_t> msg, Nanos now) override;
  void set_relay_hop(uint16_t node) override { relay_hop_ = node; }
  // Accepted at once; SiteSync begins the round when the policy protocol approves it.
  bool begin_round(uint32_t round, std::span<const float> local, Nanos now, ltp::PacketSink& tx) override;
  bool round_done() const override { return started_ && sync_.round_done(); }
  Nanos round_finished() const override { return sync_.round_finished(); }
  std::span<const float> result() const override { return sync_.result(); }
  ParticipantStats stats() const override;

  const controller::ControlPlane& plane() const { return plane_; }
  sync::SiteSync& sync() { return sync_; }
  uint32_t policy_version() const { return version_; }
  uint64_t gate_waits() const { return gate_waits_; }  // polls where the round waited for approval

 private:
  // Counts the job bytes this site sends to each peer (the probe scheduler's and the
  // egress meter's input, as the gateway's spray counters are).
  class CountingSink final : public ltp::PacketSink {
   public:
    CountingSink(GatewaySite& s) : s_(s) {}
    void bind(ltp::PacketSink* inner) { inner_ = inner; }
    void send(const ltp::TxMeta& meta, std::span<const uint8_t> head, std::span<const uint8_t> payload) override;

   private:
    GatewaySite& s_;
    ltp::PacketSink* inner_ = nullptr;
  };
  void on_sample(const ltp::ArrivalSample& s) override;
  void try_begin(Nanos now, ltp::PacketSink& tx);
  int index_of(uint16_t node) const;
  uint16_t relay_hop_ = 0;  // the packet on_packet is handling came through this site

  GatewaySiteConfig cfg_;
  sync::SiteSync sync_;
  controller::ControlPlane plane_;
  CountingSink out_;
  std::vector<uint64_t> sent_to_;
  uint64_t sent_total_ = 0;
  // The round the cluster asked for, until approved.
  bool pending_ = false, started_ = false;
  uint32_t round_ = 0, completed_ = 0;
  std::span<const float> local_;
  uint32_t version_ = 1;  // SiteSync's policy version (lib/policy's + 1, as in the dataplane)
  Nanos next_tick_ = 0;
  uint64_t gate_waits_ = 0;
};

}  // namespace sg::sim
