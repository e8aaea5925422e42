// The emulator's data path: one AF_PACKET socket per site port in the WAN namespace, a
// learning bridge between them (frames to a known MAC go to its port, the rest to every other
// port), and each copy through the Pair of its (from, to) site pair, held until its delivery
// time. Everything is forwarded: ARP, ICMP, TCP and UDP cross the same impairments.
//
// Idle back-off: the loop sleeps in ppoll until a frame arrives or the next held frame is
// due (timer slack lowered to 1 us for delay accuracy), so a quiet WAN costs nothing. Each
// wake sends every frame due within the next 20 us, one sendmmsg per port. A busy WAN wakes
// on a fixed quantum instead (coalesce.h). Every frame's delay counts from the kernel's
// receive time, not from when the loop got to it.
// Memory: held frames live in buffers recycled through a free list; none is allocated once
// the peak number in flight was reached.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "coalesce.h"
#include "early_wake.h"
#include "impairment.h"
#include "profile.h"

namespace sg::wanem {

struct PortSpec {
  int site = 0;        // 1..sites
  std::string ifname;
};

class Forwarder {
 public:
  Forwarder(const Profile& profile, std::vector<PortSpec> ports, uint64_t seed);
  ~Forwarder();
  // Opens the sockets. False with a message naming the port.
  bool open(std::string& error);
  // Runs until `stop` is set (checked at least every 100 ms) or `duration` (0: none) passes.
  // With a stats path, the counters are written there every second, when `dump` is set, and
  // at the end (by this thread: nothing reads the counters concurrently).
  void run(const std::atomic<bool>& stop, Nanos duration, const std::string& stats_path = {},
           std::atomic<bool>* dump = nullptr);
  // Counters as JSON: {"pairs": [{"from": 1, "to": 2, "forwarded": ..}, ...], ...}.
  std::string stats_json() const;
  void write_stats(const std::string& path) const;

 private:
  struct Held {
    Nanos at;
    uint64_t seq;
    int port;
    uint32_t buf;
    bool operator>(const Held& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  struct TxBatch;  // one port's frames due in this wake, sent with one sendmmsg
  // Drains up to a visit's bursts from `port`; returns the frames taken.
  int receive(int port, Nanos now);
  void forward(int in_port, const uint8_t* frame, uint32_t len, Nanos at);
  // Sends every held frame due by `now + ahead`.
  void release_due(Nanos now, Nanos ahead);
  void apply_schedule(Nanos now);
  uint32_t take_buffer();
  void count_socket_drops();  // adds the kernel's receive drops since the last call
  Nanos clock_now() const;

  const Profile& profile_;
  std::vector<PortSpec> ports_;
  std::vector<int> fds_;
  std::vector<Pair> pairs_;  // [from0 * sites + to0]
  const std::vector<PairSpec>* applied_ = nullptr;
  std::unordered_map<uint64_t, int> mac_port_;
  std::vector<std::unique_ptr<uint8_t[]>> bufs_;
  std::vector<uint32_t> buf_len_;
  std::vector<uint32_t> free_;
  std::unique_ptr<uint8_t[]> rx_buf_;  // one burst of receptions, sized in open()
  std::vector<TxBatch> tx_;            // per port, sized in open()
  std::priority_queue<Held, std::vector<Held>, std::greater<Held>> held_;
  uint64_t seq_ = 0;
  Nanos start_ = 0;
  uint64_t rx_frames_ = 0, tx_frames_ = 0, tx_errors_ = 0, peak_held_ = 0;
  uint64_t rx_socket_drops_ = 0;  // PACKET_STATISTICS tp_drops over all ports
  Nanos late_max_ = 0;  // the most a frame left after its delivery time (the emulator's error)
  EarlyWake wake_;  // how long to sleep before a held frame is due
  Coalescer coalesce_;
  uint64_t busy_wakes_ = 0;
};

}  // namespace sg::wanem
