// Several jobs' LTP senders at one site to one peer over one simulated link (Wan), each job's
// Sender either with a rate controller of its own (today's gateway) or attached to one
// ltp::LinkShare with the job's weight. For the LinkShare tests and perf/ltp/bench_link_share.
// Virtual time only: deterministic for a spec.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "ltp/link_share.h"
#include "ltp/sender.h"
#include "sim/link.h"

namespace sg::sim {

class Wan;

struct SharedFlowSpec {
  uint32_t weight = 1;
  uint64_t bytes = 10u << 20;  // per transfer, payload bytes on the wire
  uint32_t transfers = 1;      // back to back, as a gateway's rounds
  Nanos start = 0;
  bool streaming = false;      // chunks go only once released (SharedLink::release)
  uint64_t group = ltp::LinkShare::kOwnGroup;  // flows of one job share its weight
  uint32_t engine = 0;         // whose LinkShare it attaches to (SharedLinkSpec::engines)
};

struct SharedLinkSpec {
  LinkSpec fwd, rev;
  std::vector<SharedFlowSpec> flows;
  bool shared = true;          // false: a DeliveryRateController per sender
  // A gateway's engines: one LinkShare (and link controller) each, on one LinkBoard
  // (one_board) or each on its own (as before boards: the engines' shares compete).
  uint32_t engines = 1;
  bool one_board = true;
  uint32_t chunk_bytes = 1024; // payload per DATA on the wire
  uint64_t seed = 1;
};

class SharedLink {
 public:
  explicit SharedLink(const SharedLinkSpec& spec);
  ~SharedLink();

  void run_until(Nanos t);
  Nanos now() const { return now_; }
  int flows() const { return static_cast<int>(flows_.size()); }
  bool done(int f) const;            // every transfer ended (or dropped)
  Nanos finished_at(int f) const;    // when its last transfer ended
  uint64_t delivered(int f) const;   // payload bytes acknowledged so far, all its transfers
  bool all_ok() const;               // every ended transfer was fully acknowledged
  // Streaming flows: the first `fraction` of the current transfer's chunks may go.
  void release(int f, double fraction);
  // Destroys the flow's sender and controller mid-transfer (a job torn down).
  void drop(int f);

  ltp::LinkShare* share(uint32_t engine = 0) { return engine < shares_.size() ? shares_[engine].get() : nullptr; }
  const ltp::RateController& controller(int f) const;
  const ltp::Sender& sender(int f) const;

 private:
  class SendSide;
  class RecvSide;
  struct Flow;

  void start_next(Flow& fl, Nanos now);
  Nanos poll_senders(Nanos now, ltp::PacketSink& tx);
  void on_ack_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx);

  SharedLinkSpec spec_;
  uint32_t real_chunk_ = 64;
  std::unique_ptr<ltp::LinkBoard> board_;
  std::vector<std::unique_ptr<ltp::LinkShare>> shares_;  // per engine
  std::vector<std::unique_ptr<Flow>> flows_;
  std::unique_ptr<RecvSide> rx_;
  std::unique_ptr<SendSide> tx_;
  std::unique_ptr<Wan> wan_;
  Rng rng_;
  Nanos now_ = 0;
  bool all_ok_ = true;
};

}  // namespace sg::sim
