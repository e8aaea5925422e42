// Unit test of steer_udp.bpf.c: loads the test build (SG_STEER_NO_SOCKET=XDP_DROP, so a frame
// the program would hand to the gateway comes back as XDP_DROP when no AF_XDP socket is in the
// map) into the kernel and runs hand-built frames through it with BPF_PROG_TEST_RUN.
// Also proves the kernel's verifier accepts the program. Needs CAP_BPF (root): exit 77 without.
//   steer_udp_test PATH-TO-steer_udp_test.bpf.o
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef SG_STEER_UDP_PORT
#define SG_STEER_UDP_PORT 7400
#endif
enum { kPort = SG_STEER_UDP_PORT };

struct frame {
  uint8_t b[256];
  size_t len;
};

static void put16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

// Ethernet (with `tags` VLAN tags, outer 802.1ad when two) + IPv4 (ihl words, frag field) +
// an L4 header of 8 bytes with the destination port at offset 2.
static struct frame ipv4(int tags, uint8_t proto, uint16_t dport, uint8_t ihl, uint16_t frag) {
  struct frame f;
  memset(&f, 0, sizeof(f));
  uint8_t* p = f.b;
  memset(p, 0xff, 6);
  p[6] = 0x02;
  p += 12;
  for (int i = 0; i < tags; ++i) {
    put16(p, (tags > 1 && i == 0) ? 0x88a8 : 0x8100);
    put16(p + 2, (uint16_t)(10 + i));
    p += 4;
  }
  put16(p, 0x0800);
  p += 2;
  p[0] = (uint8_t)(0x40 | ihl);
  put16(p + 2, (uint16_t)(ihl * 4 + 8 + 16));
  put16(p + 6, frag);
  p[8] = 64;
  p[9] = proto;
  p += ihl * 4;
  put16(p, 40000);
  put16(p + 2, dport);
  put16(p + 4, 8 + 16);
  f.len = (size_t)(p + 8 + 16 - f.b);
  return f;
}

static int failures;

static void expect(const char* what, int prog_fd, const struct frame* f, size_t len, uint32_t want) {
  uint8_t out[256];
  LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = f->b, .data_size_in = (uint32_t)len, .data_out = out,
              .data_size_out = sizeof(out), .repeat = 1);
  int rc = bpf_prog_test_run_opts(prog_fd, &opts);
  if (rc != 0) {
    printf("FAIL %s: test run failed: %s\n", what, strerror(errno));
    ++failures;
  } else if (opts.retval != want) {
    printf("FAIL %s: action %u, expected %u\n", what, opts.retval, want);
    ++failures;
  } else {
    printf("ok   %s\n", what);
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s steer_udp_test.bpf.o\n", argv[0]);
    return 2;
  }
  if (geteuid() != 0) {
    printf("skip: loading BPF programs needs root\n");
    return 77;
  }
  libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
  struct bpf_object* obj = bpf_object__open_file(argv[1], NULL);
  if (!obj) {
    fprintf(stderr, "cannot open %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  // The af_xdp PMD's contract: a map named xsks_map, and the first program is the one attached.
  if (!bpf_object__find_map_by_name(obj, "xsks_map")) {
    fprintf(stderr, "%s has no map named xsks_map (the af_xdp PMD needs it)\n", argv[1]);
    return 1;
  }
  if (bpf_object__load(obj) != 0) {
    fprintf(stderr, "the kernel refused %s (verifier log above)\n", argv[1]);
    return 1;
  }
  struct bpf_program* prog = bpf_object__next_program(obj, NULL);
  const int fd = bpf_program__fd(prog);

  struct frame f = ipv4(0, 17, kPort, 5, 0);
  expect("UDP to stormgate's port: steered", fd, &f, f.len, XDP_DROP);
  f = ipv4(0, 17, kPort - 1, 5, 0);
  expect("UDP to another port: kernel", fd, &f, f.len, XDP_PASS);
  f = ipv4(0, 6, kPort, 5, 0);
  expect("TCP to stormgate's port number: kernel", fd, &f, f.len, XDP_PASS);
  f = ipv4(0, 1, 0, 5, 0);
  expect("ICMP: kernel", fd, &f, f.len, XDP_PASS);
  f = ipv4(1, 17, kPort, 5, 0);
  expect("802.1Q-tagged UDP to the port: steered", fd, &f, f.len, XDP_DROP);
  f = ipv4(2, 17, kPort, 5, 0);
  expect("QinQ-tagged UDP to the port: steered", fd, &f, f.len, XDP_DROP);
  f = ipv4(3, 17, kPort, 5, 0);
  expect("three tags (more than the program looks through): kernel", fd, &f, f.len, XDP_PASS);
  f = ipv4(0, 17, kPort, 6, 0);
  expect("IPv4 options before the UDP header: steered", fd, &f, f.len, XDP_DROP);
  f = ipv4(0, 17, kPort, 4, 0);
  expect("IHL below 5 (malformed): kernel", fd, &f, f.len, XDP_PASS);
  f = ipv4(0, 17, kPort, 5, 0x2000);
  expect("first fragment (MF): kernel", fd, &f, f.len, XDP_PASS);
  f = ipv4(0, 17, kPort, 5, 0x0010);
  expect("later fragment (offset): kernel", fd, &f, f.len, XDP_PASS);
  f = ipv4(0, 17, kPort, 5, 0x4000);
  expect("DF set, not a fragment: steered", fd, &f, f.len, XDP_DROP);
  f = ipv4(0, 17, kPort, 5, 0);
  expect("truncated inside the UDP header: kernel", fd, &f, 14 + 20 + 6, XDP_PASS);
  expect("truncated inside the IPv4 header: kernel", fd, &f, 14 + 10, XDP_PASS);
  expect("Ethernet header only: kernel", fd, &f, 14, XDP_PASS);
  f = ipv4(1, 17, kPort, 5, 0);
  expect("truncated inside a VLAN tag: kernel", fd, &f, 14 + 2, XDP_PASS);
  f = ipv4(0, 17, kPort, 5, 0);
  put16(f.b + 12, 0x0806);
  expect("ARP (the kernel answers for the shared address): kernel", fd, &f, f.len, XDP_PASS);
  put16(f.b + 12, 0x86dd);
  expect("IPv6: kernel", fd, &f, f.len, XDP_PASS);

  bpf_object__close(obj);
  if (failures) printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
