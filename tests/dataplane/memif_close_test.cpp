// A stopping gateway waits for its memif peers to close first (ports.h: await_memif_peers_gone):
// a memif pair in one process, the server side waits while the client is connected and returns
// once the client has closed.
#include <gtest/gtest.h>
#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "dataplane/ports.h"

namespace sg::dp {
namespace {

bool link_up(uint16_t port) {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

class MemifClose : public ::testing::Test {
 protected:
  void SetUp() override {
    sock_ = "/tmp/sg-memif-close-" + std::to_string(getpid()) + ".sock";
    pool_ = rte_pktmbuf_pool_create("memif_close", 2047, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    ASSERT_NE(pool_, nullptr);
    server_ = add("net_memif_close_s", "role=server,id=0,socket=" + sock_);
    client_ = add("net_memif_close_c", "role=client,id=0,socket=" + sock_);
    // The two sides connect over the socket from the EAL's interrupt thread.
    const uint64_t deadline = rte_get_timer_cycles() + 10 * rte_get_timer_hz();
    while (!(link_up(server_.id) && link_up(client_.id)) && rte_get_timer_cycles() < deadline) rte_delay_ms(10);
    ASSERT_TRUE(link_up(server_.id) && link_up(client_.id)) << "the memif pair did not connect";
  }
  void TearDown() override {
    for (const char* name : {"net_memif_close_c", "net_memif_close_s"}) {
      uint16_t id;
      if (rte_eth_dev_get_port_by_name(name, &id) == 0) {
        rte_eth_dev_stop(id);
        rte_eth_dev_close(id);
      }
      rte_vdev_uninit(name);
    }
    rte_mempool_free(pool_);
    unlink(sock_.c_str());
  }
  Port add(const char* name, const std::string& args) {
    Port p;
    EXPECT_EQ(rte_vdev_init(name, args.c_str()), 0) << name;
    EXPECT_EQ(rte_eth_dev_get_port_by_name(name, &p.id), 0) << name;
    rte_eth_conf conf{};
    EXPECT_EQ(rte_eth_dev_configure(p.id, 1, 1, &conf), 0);
    EXPECT_EQ(rte_eth_rx_queue_setup(p.id, 0, 256, SOCKET_ID_ANY, nullptr, pool_), 0);
    EXPECT_EQ(rte_eth_tx_queue_setup(p.id, 0, 256, SOCKET_ID_ANY, nullptr), 0);
    EXPECT_EQ(rte_eth_dev_start(p.id), 0);
    p.rx_queues = p.tx_queues = 1;
    return p;
  }

  std::string sock_;
  rte_mempool* pool_ = nullptr;
  Port server_, client_;
};

// One test: DPDK's vdev bus does not take a memif device of the same name again in one process.
TEST_F(MemifClose, WaitsWhileThePeerIsConnectedAndReturnsOnceItHasClosed) {
  const std::vector<Port> mine = {server_};
  EXPECT_FALSE(await_memif_peers_gone(mine, 100)) << "the client is still connected: the grace runs out";
  EXPECT_TRUE(link_up(server_.id)) << "waiting closes nothing";

  // Only memif links are waited for.
  Port null_port = add("net_null_close", "");
  ASSERT_TRUE(link_up(null_port.id));
  EXPECT_TRUE(await_memif_peers_gone({null_port}, 10000)) << "a net_null link is up, but it is no memif link";
  EXPECT_FALSE(await_memif_peers_gone({null_port, server_}, 100)) << "the memif one among them still counts";
  rte_eth_dev_stop(null_port.id);
  rte_eth_dev_close(null_port.id);
  rte_vdev_uninit("net_null_close");

  rte_eth_dev_stop(client_.id);
  rte_eth_dev_close(client_.id);
  EXPECT_TRUE(await_memif_peers_gone(mine, 10000)) << "the client closed: the server's link goes down";
  EXPECT_FALSE(link_up(server_.id));
}

}  // namespace
}  // namespace sg::dp
