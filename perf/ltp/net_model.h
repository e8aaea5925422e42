// Virtual-time network model for LTP benchmarks: N senders, each behind its own NIC and a
// WAN segment with random loss, into one switch egress port (drop-tail, shallow buffer) in
// front of one receiver; ACKs return over the receiver's NIC and a lossy WAN segment. It
// drives the real lib/ltp Sender and Receiver; only the wire is simulated.
// (A later simulator issue may generalise this to arbitrary topologies.)
#pragma once

#include <cstdint>
#include <string>

#include "common/clock.h"

namespace sg::perfmodel {

struct ModelParams {
  uint32_t senders = 8;
  uint64_t bytes_per_sender = 100'000'000 / 8;
  double link_bps = 1e9;              // every NIC and the switch port
  Nanos rtt = 20 * kMilli;            // base round trip (propagation only)
  uint64_t switch_buffer = 256 * 1024;  // bytes, drop-tail, at the port toward the receiver
  double loss = 0.01;                 // random loss per packet on each WAN segment, both ways
  uint32_t chunk = 1400;              // payload bytes per packet
  uint32_t wire_overhead = 66;        // Ethernet 14 + FCS 4 + preamble/IFG 20 + IPv4 20 + UDP 8
  bool ltp = true;                    // false: the reliable AIMD baseline
  uint64_t seed = 1;
  Nanos time_limit = 3600 * kSecond;  // virtual
};

struct ModelResult {
  bool finished = false;
  Nanos completion = 0;             // last transfer closed at the receiver
  double delivered_fraction = 0;    // chunks that arrived / chunks sent
  uint64_t data_packets = 0;
  uint64_t retransmits = 0;
  uint64_t timeouts = 0;
  uint64_t buffer_drops = 0;
  uint64_t random_drops = 0;
  uint64_t early_closes = 0;
  uint64_t events = 0;
};

ModelResult run_model(const ModelParams& p);
std::string describe(const ModelParams& p);

}  // namespace sg::perfmodel
