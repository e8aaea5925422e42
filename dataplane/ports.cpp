#include "dataplane/ports.h"

#include "dataplane/log.h"

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace sg::dp {
namespace {

uint32_t round_up_pow2_minus1(uint32_t n) {
  // A mempool of 2^k - 1 elements uses its ring best (the ring holds 2^k - 1).
  uint32_t p = 1;
  while (p - 1 < n) p <<= 1;
  return p - 1;
}

// The device name DPDK gives the port: the vdev name before its first comma, or the PCI address.
std::string device_name(const config::PortConfig& pc) {
  const std::string& s = pc.vdev.empty() ? pc.pci : pc.vdev;
  return s.substr(0, s.find(','));
}

bool probe(const config::PortConfig& pc, uint16_t& port_id) {
  const std::string name = device_name(pc);
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) == 0) return true;  // given with -a/--vdev
  // rte_dev_probe finds the bus (vdev or PCI) from the device string itself.
  const int rc = rte_dev_probe(pc.device_string().c_str());
  if (rc < 0) {
    SG_LOG(ERR, dataplane, "port '%s': cannot probe device '%s': %s\n", pc.name.c_str(),
                 pc.device_string().c_str(), rte_strerror(-rc));
    return false;
  }
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0) {
    SG_LOG(ERR, dataplane, "port '%s': device '%s' probed but no ethdev port appeared\n",
                 pc.name.c_str(), name.c_str());
    return false;
  }
  return true;
}

}  // namespace

uint32_t mbufs_needed(const config::GatewayConfig& cfg, unsigned workers) {
  if (cfg.dataplane.mbufs) return cfg.dataplane.mbufs;
  uint64_t n = 0;
  for (const auto& p : cfg.ports) n += uint64_t(p.rx_queues) * p.rx_desc + uint64_t(p.tx_queues) * p.tx_desc;
  n += uint64_t(rte_lcore_count()) * cfg.dataplane.mbuf_cache;
  n += uint64_t(workers) * cfg.ports.size() * cfg.dataplane.burst * 2;  // RX burst + TX buffer
  n += 4096;                                                          // control, ARP, held chunks
  return round_up_pow2_minus1(static_cast<uint32_t>(std::min<uint64_t>(n, 1u << 24)));
}

uint16_t mbuf_data_room(const config::GatewayConfig& cfg) {
  uint32_t mtu = 1500;
  for (const auto& p : cfg.ports) mtu = std::max<uint32_t>(mtu, p.mtu);
  if (mtu <= 1500) return RTE_MBUF_DEFAULT_BUF_SIZE;
  // Jumbo ports: a whole frame in one mbuf (Ethernet header, two VLAN tags, FCS), rounded up
  // to 1 KB so that net_af_packet's framesz (e.g. 9216 for mtu 9000) fits the mbuf too.
  const uint32_t frame = (mtu + RTE_ETHER_HDR_LEN + 2 * RTE_VLAN_HLEN + RTE_ETHER_CRC_LEN + 1023) / 1024 * 1024;
  return static_cast<uint16_t>(frame + RTE_PKTMBUF_HEADROOM);
}

rte_mempool* create_pool(const std::string& name, uint32_t mbufs, uint16_t cache, uint16_t data_room) {
  rte_mempool* mp = rte_pktmbuf_pool_create(name.c_str(), mbufs, std::min<uint32_t>(cache, RTE_MEMPOOL_CACHE_MAX_SIZE),
                                            0, data_room, rte_socket_id());
  if (!mp)
    SG_LOG(ERR, dataplane, "cannot create mbuf pool of %u mbufs: %s (raise -m or lower dataplane.mbufs)\n",
                 mbufs, rte_strerror(rte_errno));
  return mp;
}

bool pool_full(const rte_mempool* pool) { return rte_mempool_avail_count(pool) == pool->size; }

bool setup_ports(const config::GatewayConfig& cfg, unsigned workers, rte_mempool* pool, std::vector<Port>& out) {
  for (const auto& pc : cfg.ports) {
    Port p;
    p.name = pc.name;
    if (!probe(pc, p.id)) return false;
    rte_eth_dev_info info{};
    if (int rc = rte_eth_dev_info_get(p.id, &info); rc != 0) {
      SG_LOG(ERR, dataplane, "port '%s': no device info: %s\n", pc.name.c_str(), rte_strerror(-rc));
      return false;
    }
    p.rx_queues = pc.rx_queues;
    p.tx_queues = std::max<uint16_t>(pc.tx_queues, static_cast<uint16_t>(workers));
    if (pc.rx_queues > info.max_rx_queues || p.tx_queues > info.max_tx_queues) {
      SG_LOG(ERR, dataplane, "port '%s': device offers %u RX / %u TX queues, config needs %u / %u "
                   "(one TX queue per worker)\n",
                   pc.name.c_str(), info.max_rx_queues, info.max_tx_queues, p.rx_queues, p.tx_queues);
      return false;
    }
    rte_eth_conf conf{};
    if (pc.rx_queues > 1) {
      // RSS spreads flows (distinct UDP source ports per path) over the engines.
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_hf = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
      if (!conf.rx_adv_conf.rss_conf.rss_hf) conf.rxmode.mq_mode = RTE_ETH_MQ_RX_NONE;
    }
    const uint64_t want_tx = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
    conf.txmode.offloads = info.tx_offload_capa & want_tx;
    p.tx_ip_cksum_offload = conf.txmode.offloads & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
    p.tx_udp_cksum_offload = conf.txmode.offloads & RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
    const uint64_t want_rx = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
    conf.rxmode.offloads = info.rx_offload_capa & want_rx;
    p.rx_cksum_offload = (conf.rxmode.offloads & want_rx) == want_rx;
    if (int rc = rte_eth_dev_configure(p.id, p.rx_queues, p.tx_queues, &conf); rc != 0) {
      SG_LOG(ERR, dataplane, "port '%s': configure failed: %s\n", pc.name.c_str(), rte_strerror(-rc));
      return false;
    }
    // Virtual devices may refuse MTU changes; that is fine when they already carry our frames
    // (net_af_packet / net_af_xdp: the kernel interface's MTU and the PMD's framesz decide).
    if (pc.mtu != 1500) {
      if (int rc = rte_eth_dev_set_mtu(p.id, pc.mtu); rc != 0) {
        SG_LOG(WARNING, dataplane, "port '%s': cannot set mtu %u: %s%s\n", pc.name.c_str(), pc.mtu,
                     rte_strerror(-rc), pc.vdev.empty() ? "" : " (virtual device: using its own; it must carry such frames)");
        if (pc.vdev.empty()) return false;
      }
    }
    uint16_t rxd = pc.rx_desc, txd = pc.tx_desc;
    rte_eth_dev_adjust_nb_rx_tx_desc(p.id, &rxd, &txd);
    const int socket = rte_eth_dev_socket_id(p.id);
    for (uint16_t q = 0; q < p.rx_queues; ++q) {
      if (int rc = rte_eth_rx_queue_setup(p.id, q, rxd, socket < 0 ? SOCKET_ID_ANY : socket, nullptr, pool); rc) {
        SG_LOG(ERR, dataplane, "port '%s': RX queue %u setup failed: %s\n", pc.name.c_str(), q,
                     rte_strerror(-rc));
        return false;
      }
    }
    for (uint16_t q = 0; q < p.tx_queues; ++q) {
      rte_eth_txconf txc = info.default_txconf;
      txc.offloads = conf.txmode.offloads;
      if (int rc = rte_eth_tx_queue_setup(p.id, q, txd, socket < 0 ? SOCKET_ID_ANY : socket, &txc); rc) {
        SG_LOG(ERR, dataplane, "port '%s': TX queue %u setup failed: %s\n", pc.name.c_str(), q,
                     rte_strerror(-rc));
        return false;
      }
    }
    if (pc.mac) {
      rte_ether_addr m;
      std::copy(pc.mac->bytes.begin(), pc.mac->bytes.end(), m.addr_bytes);
      if (int rc = rte_eth_dev_default_mac_addr_set(p.id, &m); rc != 0) {
        // Some virtual devices cannot change their address; we still send and accept ours.
        (void)rc;
      }
      p.mac = m;
    } else {
      rte_eth_macaddr_get(p.id, &p.mac);
    }
    p.ipv4 = pc.ipv4.host_order;
    p.prefix_len = pc.prefix_len;
    p.gateway = pc.gateway ? pc.gateway->host_order : 0;
    p.vlan = pc.vlan.value_or(0);
    // A memif client cannot start before its server listens: retry, bounded (10 s).
    int rc = rte_eth_dev_start(p.id);
    for (int attempt = 0; rc != 0 && attempt < 50; ++attempt) {
      rte_delay_us_sleep(200 * 1000);
      rc = rte_eth_dev_start(p.id);
    }
    if (rc != 0) {
      SG_LOG(ERR, dataplane, "port '%s': start failed after 10 s of retries: %s\n", pc.name.c_str(),
                   rte_strerror(-rc));
      return false;
    }
    rte_eth_promiscuous_enable(p.id);  // virtual devices and fixed MACs: we filter by address ourselves
    SG_LOG(DEBUG, dataplane,
           "port '%s' (%s): started, %u RX / %u TX queues of %u / %u descriptors; checksum offload: TX IPv4 %s, "
           "TX UDP %s, RX %s\n",
           pc.name.c_str(), pc.device_string().c_str(), p.rx_queues, p.tx_queues, rxd, txd,
           p.tx_ip_cksum_offload ? "on" : "off", p.tx_udp_cksum_offload ? "on" : "off", p.rx_cksum_offload ? "on" : "off");
    out.push_back(p);
  }
  return true;
}

bool await_memif_peers_gone(const std::vector<Port>& ports, uint32_t grace_ms) {
  std::vector<uint16_t> memif;
  for (const auto& p : ports) {
    rte_eth_dev_info info{};
    if (rte_eth_dev_info_get(p.id, &info) == 0 && info.driver_name && std::strcmp(info.driver_name, "net_memif") == 0)
      memif.push_back(p.id);
  }
  const uint64_t deadline = rte_get_timer_cycles() + rte_get_timer_hz() * grace_ms / 1000;
  for (;;) {
    bool connected = false;
    for (uint16_t id : memif) {
      rte_eth_link link{};
      connected |= rte_eth_link_get_nowait(id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
    }
    if (!connected) return true;
    if (rte_get_timer_cycles() >= deadline) return false;
    rte_delay_us_sleep(10 * 1000);
  }
}

void teardown_ports(std::vector<Port>& ports) {
  for (auto& p : ports) {
    rte_eth_dev_stop(p.id);
    rte_eth_dev_close(p.id);
  }
  ports.clear();
}

}  // namespace sg::dp
