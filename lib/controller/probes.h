// Active probes for links that job traffic does not measure (NetStorm's optional low-rate
// probes). A probe is a short train of packets sent back to back; the receiver turns the
// spacing of the train's arrivals (its dispersion) into the rate the path carried it at.
//
// ProbeScheduler (sender side, one per site): which of this site's outgoing links to probe
// and when. A link is idle when no job bytes left on it for `idle_after`; idle links are
// probed in turn, each at most once per `min_period`, and all probes together stay within
// `rate_bytes_per_s` (a token bucket holding one train), so probing takes a bounded share of
// the site's uplink whatever the number of links.
//
// ProbeReceiver (receiver side): gathers the packets of each train by (source, train) and,
// once the last packet arrives or the train goes quiet, times it over its second half:
//   (bytes read after the middle packet's read) / (last read - the middle packet's read).
// Software stamps a packet when it reads it, not when it arrived. The gateway stamps every
// packet of one receive burst with that burst's time, so equal stamps mean "read together":
// those packets had waited (the engine slept through its idle back-off, the OS ran something
// else, an emulator or a NIC released them at once) and their spacing is lost. Starting at
// the middle packet skips a batch at the train's head. On top of the reader, the path's
// jitter moves each packet by up to a millisecond. A train is timed only if its measured
// part lasted at least `resolution` (the timing noise it has to outlast) and was read in at
// least kMinReads reads of at most kMaxPerRead packets on average. Any other train is
// reported as a lower bound: its bytes after the first packet took at most its read spread
// plus `resolution`, so the link carries at least bytes / (spread + resolution). On the
// 2-core testbed, timed without these rules, 16-packet trains read 0.1 to 34 Gbit/s on
// 1 Gbit/s links; a NIC's arrival timestamps would time them. Trains with fewer than two
// packets say nothing and are dropped (counted).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "common/clock.h"
#include "wire/ltp_header.h"

namespace sg::controller {

struct ProbeSettings {
  double rate_bytes_per_s = 100e3 / 8;  // topology.probe_rate_kbit
  uint32_t packet_bytes = 1344;          // payload per probe packet (a DATA packet's size)
  uint16_t train_packets = 8;
  // No job bytes for this long: the link is idle. Short enough that the gaps between rounds
  // (the workers' compute) count, so links the job uses are measured alone there too; with
  // 500 ms they never were, and their probe figures went stale while their rates changed.
  Nanos idle_after = 150 * kMilli;
  Nanos min_period = 1 * kSecond;        // a link is probed at most this often
  // The timing noise a train must outlast to be timed (probes.h, ProbeReceiver): the
  // engines' idle sleep and the WAN's jitter.
  Nanos resolution = 1 * kMilli;
};

struct ProbeOrder {
  int to = 0;                 // plan index of the peer
  uint16_t packets = 0;
  uint32_t packet_bytes = 0;  // payload per packet
};

class ProbeScheduler {
 public:
  ProbeScheduler(int sites, int self, const ProbeSettings& s);
  // `sent_to[j]`: cumulative job bytes this site has sent to site j. Returns the trains to
  // send now (at most one per call while the budget allows more than one train).
  std::vector<ProbeOrder> due(Nanos now, std::span<const uint64_t> sent_to);
  uint64_t trains() const { return trains_; }
  uint64_t probe_bytes() const { return bytes_; }
  // Bytes of one train on the wire as the budget counts it.
  double train_bytes() const;

 private:
  int n_, self_;
  ProbeSettings s_;
  std::vector<uint64_t> last_sent_;
  std::vector<Nanos> last_traffic_, last_probe_;
  double tokens_ = 0;
  Nanos refilled_ = -1;
  int next_ = 0;
  uint64_t trains_ = 0, bytes_ = 0;
};

struct ProbeResult {
  int from = 0;              // plan index of the sender
  uint32_t bytes = 0;        // bytes read after the start
  Nanos spread = 0;          // start read to last read (bound: plus the resolution)
  Nanos at = 0;
  bool bound = false;        // bytes / spread is a lower bound on the link's rate, not a rate
};

class ProbeReceiver {
 public:
  static constexpr int kMinReads = 2;     // reads after the start
  static constexpr int kMaxPerRead = 2;   // packets per read, on average

  // `resolution`: ProbeSettings::resolution.
  ProbeReceiver(int sites, Nanos resolution, Nanos quiet = 200 * kMilli)
      : resolution_(resolution), quiet_(quiet), trains_(static_cast<size_t>(sites)) {}
  // One probe packet from site `from` (train, seq, count), `bytes` long, read at `rx`.
  // Returns a result when this packet completes its train.
  bool on_packet(int from, uint32_t train, uint16_t seq, uint16_t count, uint32_t bytes, Nanos rx, ProbeResult& out);
  // Trains that went quiet: reported with what arrived.
  std::vector<ProbeResult> expire(Nanos now);
  uint64_t dropped() const { return dropped_; }
  uint64_t bounds() const { return bounds_; }  // trains reported as lower bounds

 private:
  struct Train {
    bool open = false;
    uint32_t id = 0;
    uint16_t count = 0, got = 0;
    Nanos last = 0;
    std::array<Nanos, wire::kProbeMaxCount> rx{};       // read times, in arrival order
    std::array<uint32_t, wire::kProbeMaxCount> bytes{};
  };
  bool finish(int from, Train& t, ProbeResult& out);
  Nanos resolution_, quiet_;
  std::vector<Train> trains_;  // one open train per source
  uint64_t dropped_ = 0, bounds_ = 0;
};

}  // namespace sg::controller
