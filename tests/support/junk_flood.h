// Hostile traffic for a gateway's port, shared by tests/dataplane and perf/dataplane: frames
// addressed to the gateway (its MAC, address and LTP port) of four kinds in turn --
//   0  random bytes after the Ethernet header
//   1  a well-formed but unsealed DATA from a peer's address (refused as unsealed)
//   2  a DATA from a peer's address that looks sealed with the right epoch and lane and a
//      fresh packet number, with a forged tag (the expensive kind: a full tag check each)
//   3  a sealed-looking DATA from an address that is no peer (refused before any check)
// 64 frames of each kind are made up front (an attacker's cost is not the gateway's); each
// call copies them into fresh mbufs from `pool`, and the caller hands those to the gateway.
// A forged tag never authenticates, so its packet number stays fresh however often it comes.
#pragma once

#include <rte_mbuf.h>

#include <array>
#include <cstring>
#include <vector>

#include "common/rng.h"
#include "wire/frame.h"
#include "wire/ltp_codec.h"

namespace sg::test {

struct JunkTarget {
  std::array<uint8_t, 6> mac{};
  uint32_t ipv4 = 0;       // the gateway's
  uint16_t udp_port = 7400;
  uint32_t peer_ipv4 = 0;  // a configured peer's address
  uint16_t peer_node = 0;
  uint32_t job = 1;
  uint32_t epoch = 0;      // the peer's current key epoch (visible on the wire)
  uint8_t lane = 1;
  uint16_t payload = 1392;
};

class JunkFlood {
 public:
  JunkFlood(rte_mempool* pool, const JunkTarget& t, uint64_t seed) : pool_(pool), t_(t), rng_(seed) {
    for (int kind = 0; kind < 4; ++kind)
      for (int i = 0; i < kTemplates; ++i) templates_[kind].push_back(build(kind));
  }

  // Up to n frames, the kinds in turn; fewer if the pool runs dry.
  uint16_t make(rte_mbuf** out, uint16_t n) {
    uint16_t k = 0;
    for (; k < n; ++k) {
      rte_mbuf* m = rte_pktmbuf_alloc(pool_);
      if (!m) break;
      const uint64_t i = next_++;
      const int kind = static_cast<int>(i % 4);
      const auto& f = templates_[kind][(i / 4) % kTemplates];
      auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())));
      if (!p) {
        rte_pktmbuf_free(m);
        break;
      }
      std::memcpy(p, f.data(), f.size());
      ++made[kind];
      out[k] = m;
    }
    return k;
  }
  uint64_t made[4] = {0, 0, 0, 0};

 private:
  static constexpr int kTemplates = 64;

  std::vector<uint8_t> build(int kind) {
    wire::UdpFrameSpec spec;
    std::copy(t_.mac.begin(), t_.mac.end(), spec.eth.dst.begin());
    spec.eth.src = {0x02, 0xee, 0, 0, 0, 1};
    spec.ip.src = kind == 3 ? 0xc6336401 : t_.peer_ipv4;  // 198.51.100.1: no peer
    spec.ip.dst = t_.ipv4;
    spec.udp = wire::UdpSpec{40000, t_.udp_port, wire::L4Checksum::kNone};
    const size_t hr = wire::udp_frame_headroom(spec);
    const size_t msg = sizeof(wire::DataHeader) + t_.payload + (kind == 1 ? 0 : wire::kAuthTrailerLen);
    std::vector<uint8_t> frame(hr + msg);
    uint8_t* p = frame.data();
    if (kind == 0) {
      for (size_t i = 0; i < hr + msg; i += 8) {
        const uint64_t r = rng_.next();
        std::memcpy(p + i, &r, std::min<size_t>(8, hr + msg - i));
      }
      std::copy(t_.mac.begin(), t_.mac.end(), p);
      return frame;
    }
    wire::DataFields f;
    f.src_node = t_.peer_node;
    f.job = t_.job;
    f.round = static_cast<uint32_t>(1 + rng_.below(1000));
    f.policy_version = 1;
    f.chunk_count = 64;
    f.chunk_index = static_cast<uint32_t>(rng_.below(64));
    f.flags = kind == 1 ? 0 : wire::kFlagSealed;
    (void)wire::build_data_header(std::span<uint8_t>(p + hr, msg), f, t_.payload);
    for (size_t i = hr + sizeof(wire::DataHeader); i < hr + msg; i += 8) {
      const uint64_t r = rng_.next();
      std::memcpy(p + i, &r, std::min<size_t>(8, hr + msg - i));
    }
    if (kind != 1) {
      // Trailer: the peer's epoch and lane, a packet number far ahead of any real one.
      uint8_t* tr = p + hr + msg - wire::kAuthTrailerLen;
      const uint32_t pn = 0xf00000u + static_cast<uint32_t>(rng_.below(0x0fffff));
      const be32 e(t_.epoch);
      std::memcpy(tr, &e, 4);
      tr[4] = t_.lane;
      tr[5] = static_cast<uint8_t>(pn >> 16);
      tr[6] = static_cast<uint8_t>(pn >> 8);
      tr[7] = static_cast<uint8_t>(pn);
    }
    (void)wire::finish_udp_frame(std::span<uint8_t>(p, hr + msg), spec, msg);
    return frame;
  }

  rte_mempool* pool_;
  JunkTarget t_;
  Rng rng_;
  uint64_t next_ = 0;
  std::array<std::vector<std::vector<uint8_t>>, 4> templates_;
};

}  // namespace sg::test
