#include "dataplane/shaper.h"

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <algorithm>

namespace sg::dp {

ShapedLinks::ShapedLinks(PacketHandler& inner, std::vector<LinkShape> shapes) : inner_(inner), links_(shapes.size()) {
  const double hz = static_cast<double>(rte_get_tsc_hz());
  for (size_t i = 0; i < shapes.size(); ++i) {
    Link& l = links_[i];
    l.shape = shapes[i];
    if (l.shape.rate_mbit <= 0) continue;
    l.tsc_per_bit = hz / (l.shape.rate_mbit * 1e6);
    l.delay_tsc = static_cast<uint64_t>(l.shape.delay_us * hz / 1e6);
    l.fifo.resize(std::max<uint32_t>(l.shape.queue_frames, 1));
  }
}

void ShapedLinks::on_rx_st(EngineIo& io, uint16_t port, rte_mbuf** pkts, uint16_t n, uint64_t now_tsc) {
  if (port >= links_.size() || links_[port].shape.rate_mbit <= 0) {
    inner_.on_rx_st(io, port, pkts, n, now_tsc);
    return;
  }
  Link& l = links_[port];
  for (uint16_t i = 0; i < n; ++i) {
    if (l.len == l.fifo.size()) {
      rte_pktmbuf_free(pkts[i]);  // tail drop: the link's queue is full
      dropped.add();
      continue;
    }
    // Ethernet preamble, FCS and gap count on the wire too.
    const double bits = 8.0 * (rte_pktmbuf_pkt_len(pkts[i]) + 24);
    l.finish_tsc = std::max(l.finish_tsc, now_tsc) + static_cast<uint64_t>(bits * l.tsc_per_bit);
    l.fifo[(l.head + l.len) % l.fifo.size()] = Held{pkts[i], l.finish_tsc + l.delay_tsc};
    ++l.len;
  }
}

unsigned ShapedLinks::on_poll_st(EngineIo& io, uint64_t now_tsc) {
  unsigned work = 0;
  rte_mbuf* out[32];
  for (uint16_t p = 0; p < links_.size(); ++p) {
    Link& l = links_[p];
    while (l.len) {
      uint16_t k = 0;
      while (l.len && k < 32 && l.fifo[l.head].due_tsc <= now_tsc) {
        out[k++] = l.fifo[l.head].m;
        l.head = (l.head + 1) % l.fifo.size();
        --l.len;
      }
      if (k == 0) break;
      delivered.add(k);
      inner_.on_rx_st(io, p, out, k, now_tsc);  // owns them now
      work += k;
    }
  }
  return work + inner_.on_poll_st(io, now_tsc);
}

void ShapedLinks::on_stop_st(EngineIo& io) {
  for (Link& l : links_) {
    while (l.len) {
      rte_pktmbuf_free(l.fifo[l.head].m);
      l.head = (l.head + 1) % l.fifo.size();
      --l.len;
    }
  }
  inner_.on_stop_st(io);
}

}  // namespace sg::dp
