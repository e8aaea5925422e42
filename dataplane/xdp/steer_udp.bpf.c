// XDP program for stormgate ports on net_af_xdp: frames carrying IPv4/UDP to stormgate's
// port go to the gateway's AF_XDP socket, every other frame goes on to the kernel (XDP_PASS).
// The kernel then keeps ARP, ICMP, TCP and other UDP ports working on the same interface,
// for example a routed ping across the testbed's sites while the gateway owns LTP.
//
// Loaded by DPDK's af_xdp PMD through libbpf: `net_af_xdp0,iface=IF,xdp_prog=steer_udp.bpf.o`.
// The PMD takes the object's first program, looks up the XSKMAP named `xsks_map` and stores
// each queue's socket at the queue's index, so the lookup key is the receive queue.
//
// Decisions (see README.md beside this file):
// - The port is a build-time constant (meson passes -DSG_STEER_UDP_PORT, default 7400, the
//   config's transport.udp_port default): the PMD gives no hook to fill a map or .rodata
//   between loading the object and attaching it.
// - ARP goes to the kernel. The kernel holds the gateway's addresses on the same interface
//   (same MAC), so its ARP answers are right for the gateway too; the gateway's own next hops
//   come from static MACs in its config, so it never needs to see an ARP reply.
// - Up to two VLAN tags (802.1Q, 802.1ad) are looked through: the gateway serves tagged ports.
// - IP fragments pass to the kernel: a later fragment has no UDP header to match, and the
//   gateway drops fragments anyway, so a fragmented datagram is handled by one party.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef SG_STEER_UDP_PORT
#define SG_STEER_UDP_PORT 7400
#endif
// What a frame for stormgate's port gets when its queue has no socket. The unit test builds
// with XDP_DROP to tell "steered" from "passed" without an AF_XDP socket.
#ifndef SG_STEER_NO_SOCKET
#define SG_STEER_NO_SOCKET XDP_PASS
#endif

// One slot per receive queue; the af_xdp PMD fills it (up to 64 queues per port).
struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, 64);
  __type(key, __u32);
  __type(value, __u32);
} xsks_map SEC(".maps");

struct vlan_tag {
  __be16 tci;
  __be16 next_proto;
};

static __always_inline int is_vlan(__be16 proto) {
  return proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD);
}

SEC("xdp")
int sg_steer_udp(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;

  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > end) return XDP_PASS;
  __be16 proto = eth->h_proto;
  void* l3 = eth + 1;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (!is_vlan(proto)) break;
    struct vlan_tag* tag = l3;
    if ((void*)(tag + 1) > end) return XDP_PASS;
    proto = tag->next_proto;
    l3 = tag + 1;
  }
  if (proto != bpf_htons(ETH_P_IP)) return XDP_PASS;

  struct iphdr* ip = l3;
  if ((void*)(ip + 1) > end) return XDP_PASS;
  if (ip->protocol != IPPROTO_UDP || ip->ihl < 5) return XDP_PASS;
  if (ip->frag_off & bpf_htons(0x3fff)) return XDP_PASS;  // MF set or a non-zero offset

  struct udphdr* udp = (void*)ip + ip->ihl * 4;
  if ((void*)(udp + 1) > end) return XDP_PASS;
  if (udp->dest != bpf_htons(SG_STEER_UDP_PORT)) return XDP_PASS;

  // No socket on this queue (gateway not started, or fewer queues than the device): the kernel
  // gets the frame rather than a silent drop.
  return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, SG_STEER_NO_SOCKET);
}

// Only helpers open to any licence are used (bpf_redirect_map); the project's licence applies.
char LICENSE[] SEC("license") = "Apache-2.0";
