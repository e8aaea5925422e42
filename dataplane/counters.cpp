#include "dataplane/counters.h"
#include "dataplane/ltp_counters.h"

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
    case Drop::kUnauthenticated: return "unauthenticated";
    case Drop::kCount: break;
  }
  return "unknown";
}

const char* auth_drop_name(AuthDrop d) {
  switch (d) {
    case AuthDrop::kUnknownSource: return "unknown_source";
    case AuthDrop::kUnsealed: return "unsealed";
    case AuthDrop::kTruncated: return "truncated";
    case AuthDrop::kUnknownEpoch: return "unknown_epoch";
    case AuthDrop::kReplayed: return "replayed";
    case AuthDrop::kTooOld: return "too_old";
    case AuthDrop::kBadTag: return "bad_tag";
    case AuthDrop::kSpoofed: return "spoofed";
    case AuthDrop::kRelayRefused: return "relay_refused";
    case AuthDrop::kWorkerRefused: return "worker_refused";
    case AuthDrop::kCount: break;
  }
  return "unknown";
}

}  // namespace sg::dp
