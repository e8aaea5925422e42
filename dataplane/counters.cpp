#include "dataplane/counters.h"

namespace sg::dp {

const char* drop_reason_name(Drop d) {
  switch (d) {
    case Drop::kRuntFrame: return "runt_frame";
    case Drop::kMultiSegment: return "multi_segment";
    case Drop::kNotForUs: return "not_for_us";
    case Drop::kUnknownEthertype: return "unknown_ethertype";
    case Drop::kBadArp: return "bad_arp";
    case Drop::kBadIpv4: return "bad_ipv4";
    case Drop::kBadIpChecksum: return "bad_ip_checksum";
    case Drop::kNotUdp: return "not_udp";
    case Drop::kBadUdp: return "bad_udp";
    case Drop::kWrongUdpPort: return "wrong_udp_port";
    case Drop::kBadLtp: return "bad_ltp";
    case Drop::kLtpRefused: return "ltp_refused";
    case Drop::kNoRoute: return "no_route";
    case Drop::kImpairment: return "impairment";
    case Drop::kCount: break;
  }
  return "unknown";
}

}  // namespace sg::dp
