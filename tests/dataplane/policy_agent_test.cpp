// control/policy_agent: the gateway's adapter to its control plane, three of them in one
// process, their frame rings joined as engine 0 would carry them (out of one agent, into the
// one its frame is addressed to). What must hold: measurement rows reach the coordinator as
// CONTROL frames, a better plan is proposed and agreed, every agent approves the same rounds
// and publishes the new plan for the same first round, probe trains become measurements,
// frames from strangers change nothing, and every mbuf comes back.
#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <memory>
#include <vector>

#include "control/policy_agent.h"
#include "dataplane/job_runner.h"
#include "dataplane/mbuf_ring.h"
#include "dataplane/ports.h"
#include "dataplane/routes.h"
#include "wire/frame.h"

namespace sg::dp {
namespace {

constexpr int kSites = 3;

config::MacAddr mac_of(int i) { return config::MacAddr{{0x02, 0, 0, 0, 0x0c, static_cast<uint8_t>(i + 1)}}; }
uint32_t ip_of(int i) { return 0x0a0c0001 + static_cast<uint32_t>(i); }

struct Agent {
  config::GatewayConfig cfg;
  std::vector<Port> ports;
  Neighbours nbrs;
  std::vector<PeerRoute> routes;
  rte_ring* in = nullptr;
  rte_ring* out = nullptr;
  std::unique_ptr<PolicySlot> slot;
  std::unique_ptr<ctl::PolicyAgent> agent;
};

struct Cluster {
  rte_mempool* pool = nullptr;
  Agent a[kSites];
  topo::Plan first;
  uint64_t moved = 0, strangers = 0;

  explicit Cluster(const std::string& tag, bool probes) {
    pool = create_pool("pa" + tag, 4095, 0, RTE_MBUF_DEFAULT_BUF_SIZE);
    for (int i = 0; i < kSites; ++i) {
      auto& c = a[i].cfg;
      c.site = {static_cast<uint16_t>(i + 1), "s" + std::to_string(i)};
      c.job.model_bytes = 16 << 20;
      c.topology.min_interval_ms = 10;
      c.topology.probes = probes;
      c.topology.probe_rate_kbit = 100000;
      c.control.interval_ms = 1;
      config::PortConfig pc;
      pc.name = "wan";
      pc.ipv4.host_order = ip_of(i);
      pc.mac = mac_of(i);
      c.ports.push_back(pc);
      for (int j = 0; j < kSites; ++j) {
        if (j == i) continue;
        config::PeerConfig p;
        p.id = static_cast<uint16_t>(j + 1);
        p.name = "s" + std::to_string(j);
        p.address.host_order = ip_of(j);
        p.udp_port = c.transport.udp_port;
        p.mac = mac_of(j);
        p.paths.push_back(config::PathConfig{0, "wan", {}, {}});
        c.peers.push_back(p);
      }
      Port port;  // no device: the agent only builds frames into a ring
      port.name = "wan";
      std::copy(pc.mac->bytes.begin(), pc.mac->bytes.end(), port.mac.addr_bytes);
      port.ipv4 = ip_of(i);
      a[i].ports.push_back(port);
      a[i].routes = build_routes(c, a[i].ports, a[i].nbrs);
      a[i].in = rte_ring_create(("pai" + tag + std::to_string(i)).c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
      a[i].out = rte_ring_create(("pao" + tag + std::to_string(i)).c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
      a[i].slot = std::make_unique<PolicySlot>(1);
    }
    std::string err;
    EXPECT_TRUE(initial_plan(a[0].cfg, first, err)) << err;
    for (auto& x : a)
      x.agent = std::make_unique<ctl::PolicyAgent>(x.cfg, first, pool, x.ports, x.nbrs, x.routes, x.in, x.out, *x.slot);
  }

  // What engine 0 would do: frames an agent built go out, and arrive at the agent their IP
  // destination names.
  void carry() {
    for (auto& x : a) {
      void* objs[kRingBurst];
      unsigned n;
      while ((n = rte_ring_dequeue_burst(x.out, objs, kRingBurst, nullptr)) > 0) {
        for (unsigned k = 0; k < n; ++k) {
          auto* m = static_cast<rte_mbuf*>(objs[k]);
          std::span<const uint8_t> frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
          auto f = wire::parse_udp_frame(frame);
          int to = -1;
          for (int j = 0; j < kSites && f; ++j)
            if (f->ip.dst == ip_of(j)) to = j;
          if (to < 0 || rte_ring_enqueue(a[to].in, m) != 0) {
            ++strangers;
            rte_pktmbuf_free(m);
          } else {
            ++moved;
          }
        }
      }
    }
  }

  void tick(Nanos now, uint32_t completed) {
    std::vector<uint64_t> sent(kSites, 0);
    for (auto& x : a) x.agent->tick(now, completed, sent, 0);
    carry();
  }

  ~Cluster() {
    for (auto& x : a) {
      x.agent.reset();  // frees what is left in its in-ring
      free_ring_mbufs(x.in);
      free_ring_mbufs(x.out);
      x.slot->reclaim();
      rte_ring_free(x.in);
      rte_ring_free(x.out);
    }
  }
};

TEST(PolicyAgent, RowsProposalAndTheSameSwitchRoundEverywhere) {
  Cluster c("a", false);
  Nanos now = 0;
  uint32_t completed = 0;
  // Rounds complete; after round 3 every link into site 0 is measured much slower than the
  // rest (as its engines' samples would show): the coordinator's controller replans.
  for (int step = 0; step < 4000 && c.a[0].slot->published_version() == 0; ++step) {
    now += 1 * kMilli;
    if (step % 20 == 0) ++completed;
    if (completed == 3)
      for (int i = 0; i < kSites; ++i)
        for (int k = 0; k < kSites; ++k)
          if (k != i)
            c.a[i].agent->estimator().on_probe_pair(static_cast<uint16_t>(k), static_cast<uint16_t>(i), 100000,
                                                   i == 0 ? 100 * kMilli : 1 * kMilli, now);
    c.tick(now, completed);
  }
  ASSERT_GT(c.a[0].slot->published_version(), 0u) << "no new policy was published";
  EXPECT_GE(c.a[0].agent->stats().rows_received.load(), 2u) << "rows from both members";
  EXPECT_GE(c.a[0].agent->stats().proposals.load(), 1u);
  // Every agent publishes the same version, effective from the same round, and approved the
  // rounds before it under the old one.
  for (int s = 0; s < 200; ++s) c.tick(now += kMilli, completed);
  const PolicySnapshot* p0 = c.a[0].slot->peek_st();
  ASSERT_NE(p0, nullptr);
  for (int i = 1; i < kSites; ++i) {
    const PolicySnapshot* p = c.a[i].slot->peek_st();
    ASSERT_NE(p, nullptr) << "site " << i;
    EXPECT_EQ(p->version, p0->version);
    EXPECT_EQ(p->from_round, p0->from_round);
    ASSERT_EQ(p->plan.shards.size(), p0->plan.shards.size());
    for (size_t s = 0; s < p->plan.shards.size(); ++s) EXPECT_EQ(p->plan.shards[s].parent, p0->plan.shards[s].parent);
  }
  for (auto& x : c.a) EXPECT_GE(x.agent->approved_through().load(), p0->from_round);
  EXPECT_EQ(c.strangers, 0u);
  EXPECT_GT(c.moved, 0u);
}

TEST(PolicyAgent, ProbeTrainsCrossAsFramesAndAreMeasured) {
  Cluster c("p", true);
  Nanos now = 0;
  for (int step = 0; step < 3000; ++step) c.tick(now += 1 * kMilli, 0);
  for (auto& x : c.a) {
    EXPECT_GT(x.agent->stats().probe_trains_sent.load(), 0u) << x.cfg.site.name;
    // The frames arrive all at once here (no engine stamps them): a train with no spread is
    // never taken for a rate, only for a lower bound (counted).
    EXPECT_EQ(x.agent->stats().probe_results.load(), 0u);
    EXPECT_GT(x.agent->stats().probe_bounds.load(), 0u);
  }
}

TEST(PolicyAgent, FramesThatAreNotControlFromAPeerChangeNothing) {
  Cluster c("x", false);
  // Junk and a CONTROL from a site that is not a peer, straight into site 0's ring.
  for (int k = 0; k < 2; ++k) {
    rte_mbuf* m = rte_pktmbuf_alloc(c.pool);
    ASSERT_NE(m, nullptr);
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, 100));
    std::fill(p, p + 100, static_cast<uint8_t>(0x5a + k));
    ASSERT_EQ(rte_ring_enqueue(c.a[0].in, m), 0);
  }
  c.tick(1 * kMilli, 0);
  EXPECT_EQ(c.a[0].agent->stats().control_bad.load(), 2u);
  EXPECT_EQ(c.a[0].agent->stats().control_in.load(), 0u);
}

TEST(PolicyAgent, EveryMbufComesBack) {
  rte_mempool* pool;
  {
    Cluster c("m", true);
    pool = c.pool;
    for (int step = 0; step < 500; ++step) c.tick(step * kMilli, static_cast<uint32_t>(step / 50));
  }
  EXPECT_TRUE(pool_full(pool)) << rte_mempool_avail_count(pool) << " of " << pool->size;
  rte_mempool_free(pool);
}

}  // namespace
}  // namespace sg::dp
