// The simulated WAN: sites joined by directed Links, each site behind an optional egress and
// ingress cap, driven by one event queue in virtual time. Sites run Endpoints -- the same
// lib/ state machines a gateway runs (sync::SiteSync, or the ring baseline) -- which see
// LTP messages as byte spans and send through an ltp::PacketSink, exactly as in the
// dataplane. Deterministic for a seed: events are ordered by (time, insertion sequence) and
// every random draw comes from a seeded per-link generator.
//
// A packet's path: source egress cap -> link(src, next) -> next's ingress cap -> delivered
// (or, at a relay, forwarded unaggregated to its destination over the relay's egress).
// A site given the gateway's sprayer (use_sprayer) sends its DATA as a gateway does: the
// lib/spray Sprayer picks each chunk's path (direct, or through a relay site) from the plan's
// splits and each path's ACK clock, standby relays included, and the ACKs that reach the site
// feed it. Other sites deal the DATA of a split link (topo::Plan::splits) to the direct link
// and the relays by the splits' weights alone (smooth weighted round robin).
//
// Scale. A packet's wire size is head + payload * payload_scale (+ trailer): the simulator
// may carry 1/scale of the model's floats for real while links see full-size chunks. The
// LTP state machines count packets and time correctly either way; bytes they report are
// real bytes (divide rates by nothing, multiply by scale for wire bytes).
//
// Steady state allocates nothing: packets live in a slab that only grows when more are in
// flight than ever before, events in a reserved binary heap.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "ltp/types.h"
#include "sim/link.h"
#include "spray/sprayer.h"
#include "topology/plan.h"

namespace sg::sim {

struct SiteSpec {
  std::string name;
  double egress_bytes_per_s = 0;   // 0 = no cap
  double ingress_bytes_per_s = 0;  // 0 = no cap
  uint64_t cap_queue_bytes = 64u << 20;
};

struct WanSpec {
  std::vector<SiteSpec> sites;
  std::vector<LinkSpec> links;  // n*n, [from*n + to]; bytes_per_s <= 0 = no link
  uint64_t seed = 1;
  int n() const { return static_cast<int>(sites.size()); }
  LinkSpec& link(int i, int j) { return links[static_cast<size_t>(i) * sites.size() + j]; }
  const LinkSpec& link(int i, int j) const { return links[static_cast<size_t>(i) * sites.size() + j]; }
};

// What runs at a site.
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  virtual void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) = 0;
  virtual Nanos poll(Nanos now, ltp::PacketSink& tx) = 0;
  // A packet this site stores and forwards for another (a relay hop), as the gateway's
  // relay.cpp sees it; and, before on_packet, the node a relayed packet came from last.
  virtual void on_relay(std::span<const uint8_t> /*msg*/, Nanos /*now*/) {}
  virtual void set_relay_hop(uint16_t /*node*/) {}
};

struct WanStats {
  uint64_t events = 0;
  uint64_t packets_sent = 0;
  uint64_t delivered = 0;
  uint64_t relayed = 0;
  uint64_t dropped_queue = 0;  // links and caps
  uint64_t lost = 0;
  uint64_t no_route = 0;       // no link, or no endpoint at the destination
  uint64_t oversize = 0;       // larger than the largest message the Wan was built for
  uint64_t peak_packets = 0;   // packets in flight at once
};

class Wan {
 public:
  // max_msg_bytes: the largest LTP DATA message an endpoint sends (head + payload + trailer);
  // CONTROL messages of any size the wire allows are carried too.
  Wan(const WanSpec& spec, uint32_t max_msg_bytes, uint32_t payload_scale = 1);
  ~Wan();

  int sites() const { return n_; }
  // Site `site` answers to LTP node id `node` (TxMeta::peer_node); ep may be nullptr (dead).
  void attach(int site, uint16_t node, Endpoint* ep);
  ltp::PacketSink& port(int site);

  // Multipath splits of the plan in force (plan site index == simulator site index).
  void set_splits(const std::vector<topo::LinkSplit>& splits);
  // The gateway's sprayer at `site` (after attach): a direct path to every other site and a
  // relayed one through each third site, up to `max_relays` per peer (the testbed's configs
  // give three), as the gateway's config lists them. The site's DATA follows it from then on.
  spray::Sprayer& use_sprayer(int site, int max_relays = 3);
  // The plan in force at `site` (its switch): the sprayer's weights, as JobRunner installs them.
  void set_spray_plan(int site, const topo::Plan& plan);
  const spray::Sprayer* sprayer(int site) const { return sprayers_[site].get(); }
  // DATA bytes (wire) dealt to each path of the split of from->to since set_splits: direct
  // first, then the relays in the plan's order. Empty if the link is not split.
  std::vector<uint64_t> split_sent(int from, int to) const;
  // Payload bytes of DATA from->to (end to end) are divided by `factor` on the wire: the
  // byte reduction of the link's codec (compression is modelled on size only).
  void set_codec_factor(int from, int to, double factor);
  void clear_codec_factors();

  // Asks to poll `site` at `at` (earliest request wins).
  void wake(int site, Nanos at);

  // Processes events in time order until `site_done(site)` (asked after that site's endpoint
  // ran) returns true for the last pending site, the queue empties, or time passes `until`.
  // `site_done` returning true ends the run. Returns true if it ended by site_done.
  bool run(const std::function<bool(int site)>& site_done, Nanos until);

  Nanos now() const { return now_; }
  Link& link(int from, int to) { return links_[static_cast<size_t>(from) * n_ + to]; }
  Link& egress(int site) { return egress_[site]; }
  Link& ingress(int site) { return ingress_[site]; }
  const WanStats& stats() const { return stats_; }
  uint32_t payload_scale() const { return scale_; }
  // Delay from a delivery to the endpoint's next poll (0 = poll after every packet).
  void set_poll_coalesce(Nanos d) { poll_coalesce_ = d; }

  // Called for each packet that arrives over a WAN link (after the link, before the
  // ingress cap): per-hop arrivals for passive measurement, relayed traffic included.
  struct Hop {
    int from = 0, to = 0;
    uint32_t wire_bytes = 0;
    bool data = false;
    Nanos at = 0;
    Nanos one_way = 0;          // since it entered the hop (egress queue, link queue, serialisation, delay)
    uint64_t inflight = 0;      // wire bytes still on this link (queued or propagating) after it
  };
  using HopObserver = std::function<void(const Hop&)>;
  void set_hop_observer(HopObserver h) { hop_ = std::move(h); }

 private:
  class Port;
  struct Packet {
    uint32_t len = 0;    // real message bytes in the slot
    uint32_t wire = 0;   // bytes on the wire
    uint16_t src = 0, dst = 0, prev = 0, hop = 0;
    Nanos hop_start = 0;  // when it entered the current hop
    bool data = false;
  };
  struct Event {
    Nanos t;
    uint64_t seq;
    uint32_t id;
    uint8_t kind;
  };
  enum : uint8_t { kArrive, kDeliver, kWake };
  struct Split {
    int hops[topo::kMaxRelays + 1];  // next hop per path: dst itself, then relays
    int64_t weight[topo::kMaxRelays + 1];
    int64_t current[topo::kMaxRelays + 1];
    uint64_t sent[topo::kMaxRelays + 1];
    int64_t total = 0;
    int count = 0;
  };

  uint32_t alloc_packet();
  void free_packet(uint32_t id);
  uint8_t* slot(uint32_t id) { return blocks_[id / kBlock].get() + static_cast<size_t>(id % kBlock) * slot_bytes_; }
  void push(Nanos t, uint8_t kind, uint32_t id);
  void pop();
  void send_from(int site, const ltp::TxMeta& m, std::span<const uint8_t> head, std::span<const uint8_t> payload);
  void route(uint32_t id, int at, int next, Nanos now);
  void deliver(uint32_t id, int at);
  int next_hop(int from, int to, uint32_t wire);
  // The next hop of DATA from `site` to `dst` by the site's sprayer; marks the header's path_id.
  int spray_hop(int site, int dst, uint8_t* msg, uint32_t wire);
  void spray_ack(int at, std::span<const uint8_t> msg);

  static constexpr uint32_t kBlock = 512;
  int n_;
  uint32_t slot_bytes_;
  uint32_t scale_;
  std::vector<Link> links_, egress_, ingress_;
  std::vector<bool> has_egress_, has_ingress_;
  std::vector<std::unique_ptr<Port>> ports_;
  std::vector<Endpoint*> eps_;
  std::vector<int> node_to_site_;  // by node id (65536)
  std::vector<uint16_t> site_node_;  // by site
  std::vector<Nanos> wake_at_;
  std::vector<int> split_of_;      // per link: index into splits_ or -1
  std::vector<Split> splits_;
  std::vector<std::unique_ptr<spray::Sprayer>> sprayers_;  // per site, or nullptr
  std::vector<double> codec_factor_;
  std::vector<uint64_t> link_inflight_;  // wire bytes on each link (sent, not yet arrived)
  std::vector<std::unique_ptr<uint8_t[]>> blocks_;
  std::vector<Packet> pkts_;
  std::vector<uint32_t> free_;
  std::vector<Event> heap_;
  uint64_t seq_ = 0;
  uint64_t in_flight_ = 0;
  Nanos now_ = 0;
  Nanos poll_coalesce_ = 0;
  WanStats stats_;
  HopObserver hop_;
};

}  // namespace sg::sim
