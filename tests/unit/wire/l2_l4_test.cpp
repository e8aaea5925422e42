// Ethernet/VLAN, ARP, IPv4 and UDP parsers and builders, alone and as a whole frame.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "wire/arp.h"
#include "wire/checksum.h"
#include "wire/frame.h"

namespace sg::wire {
namespace {

constexpr MacAddr kMacA{0x02, 0, 0, 0, 0, 0x0a};
constexpr MacAddr kMacB{0x02, 0, 0, 0, 0, 0x0b};
constexpr uint32_t kIpA = 0x0a000001;  // 10.0.0.1
constexpr uint32_t kIpB = 0x0a000002;

UdpFrameSpec spec(bool vlan) {
  UdpFrameSpec s;
  s.eth.dst = kMacB;
  s.eth.src = kMacA;
  if (vlan) s.eth.vlan_tci = 0x2064;  // PCP 1, VID 100
  s.ip.src = kIpA;
  s.ip.dst = kIpB;
  s.udp.src_port = 4791;
  s.udp.dst_port = 4792;
  return s;
}

std::vector<uint8_t> make_frame(const UdpFrameSpec& s, size_t payload_len) {
  std::vector<uint8_t> f(udp_frame_headroom(s) + payload_len);
  for (size_t i = 0; i < payload_len; ++i) f[udp_frame_headroom(s) + i] = static_cast<uint8_t>(i * 31 + 1);
  auto n = finish_udp_frame(f, s, payload_len);
  EXPECT_TRUE(n.ok());
  EXPECT_EQ(*n, f.size());
  return f;
}

TEST(Ethernet, UntaggedRoundTrip) {
  std::vector<uint8_t> b(14);
  EthSpec s{kMacB, kMacA, kEtherTypeArp, {}};
  ASSERT_EQ(*build_ethernet(b, s), 14u);
  auto e = parse_ethernet(b);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->dst, kMacB);
  EXPECT_EQ(e->src, kMacA);
  EXPECT_EQ(e->ethertype, kEtherTypeArp);
  EXPECT_FALSE(e->has_vlan);
  EXPECT_EQ(e->l3_offset, 14);
}

TEST(Ethernet, VlanTagIsSkippedAndReported) {
  std::vector<uint8_t> b(18);
  EthSpec s{kMacB, kMacA, kEtherTypeIpv4, 0x0123};
  ASSERT_EQ(*build_ethernet(b, s), 18u);
  auto e = parse_ethernet(b);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->has_vlan);
  EXPECT_EQ(e->vlan_tci, 0x0123);
  EXPECT_EQ(e->ethertype, kEtherTypeIpv4);
  EXPECT_EQ(e->l3_offset, 18);
}

TEST(Ethernet, TruncatedAndDoubleTagged) {
  std::vector<uint8_t> b(18);
  EXPECT_EQ(parse_ethernet(std::span(b).first(13)).error(), WireError::kTruncated);
  EthSpec s{kMacB, kMacA, kEtherTypeVlan, 0x0001};  // inner type is another tag
  ASSERT_TRUE(build_ethernet(b, s).ok());
  EXPECT_EQ(parse_ethernet(std::span(b).first(17)).error(), WireError::kTruncated);
  EXPECT_EQ(parse_ethernet(b).error(), WireError::kUnsupported);
  EXPECT_EQ(build_ethernet(std::span(b).first(17), s).error(), WireError::kNoSpace);
}

TEST(Arp, RoundTripAndValidation) {
  std::vector<uint8_t> b(28);
  ArpInfo a;
  a.op = kArpReply;
  a.sha = kMacA;
  a.spa = kIpA;
  a.tha = kMacB;
  a.tpa = kIpB;
  ASSERT_EQ(*build_arp(b, a), 28u);
  auto p = parse_arp(b);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->op, kArpReply);
  EXPECT_EQ(p->sha, kMacA);
  EXPECT_EQ(p->spa, kIpA);
  EXPECT_EQ(p->tpa, kIpB);
  EXPECT_EQ(parse_arp(std::span(b).first(27)).error(), WireError::kTruncated);
  auto bad = b;
  bad[7] = 9;  // op 9
  EXPECT_EQ(parse_arp(bad).error(), WireError::kBadType);
  bad = b;
  bad[4] = 8;  // hlen 8
  EXPECT_EQ(parse_arp(bad).error(), WireError::kBadLength);
  bad = b;
  bad[1] = 6;  // htype 6 (IEEE 802)
  EXPECT_EQ(parse_arp(bad).error(), WireError::kUnsupported);
}

TEST(Ipv4, BuildWritesAValidChecksum) {
  std::vector<uint8_t> b(20 + 10);
  Ipv4Spec s;
  s.src = kIpA;
  s.dst = kIpB;
  ASSERT_EQ(*build_ipv4(b, s, 10), 20u);
  EXPECT_EQ(ipv4_header_checksum(std::span(b).first(20)), 0);
  auto p = parse_ipv4(b);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->src, kIpA);
  EXPECT_EQ(p->dst, kIpB);
  EXPECT_EQ(p->total_len, 30);
  EXPECT_EQ(p->payload_offset, 20);
  EXPECT_EQ(p->payload_len, 10);
  EXPECT_FALSE(p->is_fragment);
}

TEST(Ipv4, EveryLengthAndFieldIsChecked) {
  std::vector<uint8_t> b(20 + 10 + 6);  // 6 bytes of link padding after total_len
  Ipv4Spec s;
  ASSERT_TRUE(build_ipv4(b, s, 10).ok());
  EXPECT_TRUE(parse_ipv4(b).ok()) << "trailing link padding is fine";
  EXPECT_EQ(parse_ipv4(std::span(b).first(19)).error(), WireError::kTruncated);
  EXPECT_EQ(parse_ipv4(std::span(b).first(29)).error(), WireError::kTruncated) << "total_len beyond the buffer";

  auto bad = b;
  bad[0] = 0x65;  // version 6
  EXPECT_EQ(parse_ipv4(bad).error(), WireError::kBadVersion);
  bad = b;
  bad[0] = 0x44;  // IHL 4 words < 20 bytes
  EXPECT_EQ(parse_ipv4(bad).error(), WireError::kBadLength);
  bad = b;
  bad[0] = 0x4f;  // IHL 60 bytes > buffer
  EXPECT_EQ(parse_ipv4(bad).error(), WireError::kTruncated);
  bad = b;
  bad[2] = 0;
  bad[3] = 12;  // total_len < header
  EXPECT_EQ(parse_ipv4(bad).error(), WireError::kBadLength);
  bad = b;
  bad[8] ^= 1;  // TTL flipped, checksum now wrong
  EXPECT_EQ(parse_ipv4(bad).error(), WireError::kBadChecksum);
  EXPECT_TRUE(parse_ipv4(bad, /*verify_checksum=*/false).ok());
}

TEST(Ipv4, FragmentsAreFlagged) {
  std::vector<uint8_t> b(28);
  Ipv4Spec s;
  s.dont_fragment = false;
  ASSERT_TRUE(build_ipv4(b, s, 8).ok());
  b[6] = 0x20;  // MF
  b[10] = b[11] = 0;
  const uint16_t c = ipv4_header_checksum(std::span(b).first(20));
  b[10] = static_cast<uint8_t>(c >> 8);
  b[11] = static_cast<uint8_t>(c);
  auto p = parse_ipv4(b);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->is_fragment);
}

TEST(Udp, ChecksumCoversPseudoHeaderAndPayload) {
  std::vector<uint8_t> seg(8 + 5, 0);
  std::memcpy(seg.data() + 8, "hello", 5);
  ASSERT_EQ(*build_udp(seg, {1000, 2000, L4Checksum::kSoftware}, kIpA, kIpB, 5), 13u);
  auto p = parse_udp(seg, kIpA, kIpB);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->checksum_present);
  EXPECT_EQ(p->payload_len, 5);
  // Same bytes, other addresses: the pseudo-header makes it fail.
  EXPECT_EQ(parse_udp(seg, kIpA, kIpA).error(), WireError::kBadChecksum);
  seg[9] ^= 0x40;
  EXPECT_EQ(parse_udp(seg, kIpA, kIpB).error(), WireError::kBadChecksum);
}

// A payload's sum known beforehand (UdpSpec::tail_sum: a result sent to several workers)
// gives the checksum of the whole segment, for every payload length and every head length;
// where the tail would start at an odd offset the whole segment is summed instead.
TEST(Udp, KnownTailSumGivesTheSameChecksum) {
  for (size_t head : {0u, 1u, 2u, 55u, 56u}) {
    for (size_t tail : {1u, 2u, 3u, 64u, 1392u, 1393u}) {
      const size_t n = head + tail;
      std::vector<uint8_t> full(8 + n), part(8 + n);
      for (size_t i = 0; i < n; ++i) full[8 + i] = part[8 + i] = static_cast<uint8_t>(i * 131 + head * 7 + 0xa5);
      ASSERT_TRUE(build_udp(full, {1000, 2000, L4Checksum::kSoftware}, kIpA, kIpB, static_cast<uint16_t>(n)).ok());
      UdpSpec spec{1000, 2000, L4Checksum::kSoftware};
      spec.tail_len = static_cast<uint16_t>(tail);
      spec.tail_sum = csum_fold(csum_add(std::span(part).subspan(8 + head)));
      ASSERT_TRUE(build_udp(part, spec, kIpA, kIpB, static_cast<uint16_t>(n)).ok());
      EXPECT_EQ(part, full) << "head " << head << " tail " << tail;
      EXPECT_TRUE(parse_udp(part, kIpA, kIpB).ok());
    }
  }
  // A wrong sum is not checked here (the caller keeps it); it makes a checksum receivers refuse.
  std::vector<uint8_t> seg(8 + 64, 3);
  UdpSpec spec{1000, 2000, L4Checksum::kSoftware};
  spec.tail_len = 32;
  spec.tail_sum = static_cast<uint16_t>(csum_fold(csum_add(std::span(seg).subspan(40))) + 1);
  ASSERT_TRUE(build_udp(seg, spec, kIpA, kIpB, 64).ok());
  EXPECT_EQ(parse_udp(seg, kIpA, kIpB).error(), WireError::kBadChecksum);
}

TEST(Udp, ZeroChecksumMeansNone) {
  std::vector<uint8_t> seg(8 + 4, 7);
  ASSERT_TRUE(build_udp(seg, {1, 2, L4Checksum::kNone}, kIpA, kIpB, 4).ok());
  EXPECT_EQ(seg[6], 0);
  EXPECT_EQ(seg[7], 0);
  auto p = parse_udp(seg, 0, 0);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->checksum_present);
}

TEST(Udp, OffloadLeavesWhatTheNicCompletes) {
  // Offload: the field holds the pseudo-header sum; a NIC adds the segment's one's-complement
  // sum and stores the complement. Done here by hand, it must equal the software checksum.
  std::vector<uint8_t> soft(8 + 7, 0), off(8 + 7, 0);
  std::memcpy(soft.data() + 8, "gradien", 7);
  std::memcpy(off.data() + 8, "gradien", 7);
  ASSERT_TRUE(build_udp(soft, {1000, 2000, L4Checksum::kSoftware}, kIpA, kIpB, 7).ok());
  ASSERT_TRUE(build_udp(off, {1000, 2000, L4Checksum::kOffload}, kIpA, kIpB, 7).ok());
  EXPECT_EQ((off[6] << 8 | off[7]), udp_pseudo_header_sum(kIpA, kIpB, 15));
  EXPECT_EQ(parse_udp(off, kIpA, kIpB).error(), WireError::kBadChecksum) << "not a valid checksum until the NIC runs";
  const uint16_t nic = csum_finish(csum_add(off));  // the field already carries the pseudo-header
  off[6] = static_cast<uint8_t>(nic >> 8);
  off[7] = static_cast<uint8_t>(nic);
  EXPECT_EQ(off, soft);
  EXPECT_TRUE(parse_udp(off, kIpA, kIpB).ok());
}

TEST(Ipv4, OffloadLeavesTheChecksumZero) {
  std::vector<uint8_t> b(20);
  Ipv4Spec s;
  s.src = kIpA;
  s.dst = kIpB;
  s.checksum = false;
  ASSERT_TRUE(build_ipv4(b, s, 0).ok());
  EXPECT_EQ(b[10], 0);
  EXPECT_EQ(b[11], 0);
  EXPECT_EQ(parse_ipv4(b).error(), WireError::kBadChecksum);
  EXPECT_TRUE(parse_ipv4(b, false).ok()) << "what the receiver does when its NIC verified the header";
}

TEST(Udp, LengthFieldLies) {
  std::vector<uint8_t> seg(8 + 4, 0);
  ASSERT_TRUE(build_udp(seg, {1, 2, L4Checksum::kNone}, kIpA, kIpB, 4).ok());
  seg[5] = 13;  // longer than the segment
  EXPECT_EQ(parse_udp(seg, kIpA, kIpB).error(), WireError::kTruncated);
  seg[5] = 7;  // shorter than the header
  EXPECT_EQ(parse_udp(seg, kIpA, kIpB).error(), WireError::kBadLength);
  EXPECT_EQ(parse_udp(std::span(seg).first(7), kIpA, kIpB).error(), WireError::kTruncated);
}

TEST(Frame, PayloadIsParsedInPlace) {
  for (bool vlan : {false, true}) {
    const auto s = spec(vlan);
    auto f = make_frame(s, 100);
    auto p = parse_udp_frame(f);
    ASSERT_TRUE(p.ok()) << to_string(p.error());
    EXPECT_EQ(p->eth.has_vlan, vlan);
    EXPECT_EQ(p->payload_offset, udp_frame_headroom(s));
    EXPECT_EQ(p->payload_len, 100u);
    EXPECT_EQ(p->udp.dst_port, 4792);
    // The payload view is the frame's own memory, not a copy.
    auto view = frame_payload(std::span<uint8_t>(f), *p);
    EXPECT_EQ(view.data(), f.data() + udp_frame_headroom(s));
    EXPECT_EQ(view[0], 1);
  }
}

TEST(Frame, NonUdpAndCorruption) {
  auto s = spec(false);
  auto f = make_frame(s, 40);
  auto arp = f;
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_EQ(parse_udp_frame(arp).error(), WireError::kBadType);
  auto tcp = f;
  tcp[14 + 9] = 6;  // protocol TCP; fix the IP checksum so only the protocol differs
  tcp[14 + 10] = tcp[14 + 11] = 0;
  const uint16_t c = ipv4_header_checksum(std::span(tcp).subspan(14, 20));
  tcp[14 + 10] = static_cast<uint8_t>(c >> 8);
  tcp[14 + 11] = static_cast<uint8_t>(c);
  EXPECT_EQ(parse_udp_frame(tcp).error(), WireError::kUnsupported);
  auto flip = f;
  flip.back() ^= 0xff;  // payload corruption: only the UDP checksum can tell
  EXPECT_EQ(parse_udp_frame(flip).error(), WireError::kBadChecksum);
  EXPECT_TRUE(parse_udp_frame(flip, {true, false}).ok());
  for (size_t n = 0; n < f.size(); ++n) {
    EXPECT_FALSE(parse_udp_frame(std::span(f).first(n)).ok()) << "prefix of " << n << " bytes";
  }
}

TEST(Frame, BuilderNeverOverruns) {
  auto s = spec(true);
  std::vector<uint8_t> f(udp_frame_headroom(s) + 10 + 4, 0xee);
  EXPECT_EQ(finish_udp_frame(std::span(f).first(udp_frame_headroom(s) + 9), s, 10).error(), WireError::kNoSpace);
  EXPECT_TRUE(finish_udp_frame(std::span(f).first(udp_frame_headroom(s) + 10), s, 10).ok());
  for (size_t i = f.size() - 4; i < f.size(); ++i) EXPECT_EQ(f[i], 0xee);
}

}  // namespace
}  // namespace sg::wire
