// Fuzz the LTP receiver (and the sender's ACK/CLOSE handling) with a stream of messages.
// Input: records of [1 byte time step][2 bytes length][length bytes], until the input ends.
// Invariants (trap on violation): no chunk delivered twice per transfer, bubbles + deliveries
// cover each ended transfer exactly once, payloads point into the packet, limits hold.
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <span>
#include <tuple>
#include <vector>

#include "common/rng.h"
#include "ltp/aimd_controller.h"
#include "ltp/control_channel.h"
#include "ltp/receiver.h"
#include "ltp/sender.h"

using namespace sg;
using namespace sg::ltp;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

using Key = std::tuple<uint32_t, uint32_t, uint16_t, uint16_t>;
Key key_of(const TransferKey& k) { return {k.job, k.round, k.shard, k.src_node}; }

class CheckingSink final : public ReceiverSink {
 public:
  std::span<const uint8_t> packet;
  void on_chunk(const ChunkRef& c, std::span<const uint8_t> p) override {
    check(c.chunk_index < c.chunk_count);
    check(p.empty() || (p.data() >= packet.data() && p.data() + p.size() <= packet.data() + packet.size()));
    check(seen_[key_of(c.key)].insert(c.chunk_index).second);
  }
  void on_bubble(const ChunkRef& c, FillRule) override {
    check(c.chunk_index < c.chunk_count);
    check(seen_[key_of(c.key)].insert(c.chunk_index).second);
  }
  void on_transfer_end(const TransferSummary& s) override {
    auto& s_seen = seen_[key_of(s.key)];
    check(s_seen.size() == s.chunk_count);
    check(s.received + s.filled == s.chunk_count);
    seen_.erase(key_of(s.key));
  }

 private:
  std::map<Key, std::set<uint32_t>> seen_;
};

class NullTx final : public PacketSink {
 public:
  void send(const TxMeta&, std::span<const uint8_t> head, std::span<const uint8_t>) override {
    check(!head.empty() && head.size() <= 2048);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ReceiverConfig rc;
  rc.local_node = 0;
  rc.max_transfers = 4;
  rc.max_chunks = 64;
  rc.max_jobs = 2;
  rc.closed_memory = 8;
  rc.abandon_after = 50 * kMilli;
  Receiver rx(rc);
  CheckingSink sink;
  NullTx tx;
  Nanos now = 1 * kSecond;
  rx.begin_round(1, 5, 1, now, sink, tx);
  rx.begin_round(2, 0, 0, now, sink, tx);

  // The sender side sees the same bytes as if they were ACK/CLOSE/REJECT from its peer.
  AimdController aimd;
  Rng rng(1);
  SenderConfig sc;
  sc.local_node = 1;
  sc.peer_node = 0;
  sc.max_chunks = 64;
  Sender snd(sc, aimd, rng);
  std::vector<uint8_t> msg(64 * 16);
  TransferSpec spec;
  spec.job = 1;
  spec.round = 5;
  spec.policy_version = 1;
  spec.chunk_size = 16;
  spec.data = msg;
  check(snd.start(spec, now));

  ControlConfig cc;
  cc.peer_node = 0;
  cc.window = 4;
  ControlChannel ctl(cc);
  uint64_t delivered = 0;

  size_t off = 0;
  while (off + 3 <= size) {
    now += static_cast<Nanos>(data[off]) * 100 * kMicro;
    const size_t len = static_cast<size_t>(data[off + 1]) << 8 | data[off + 2];
    off += 3;
    const size_t n = std::min(len, size - off);
    std::vector<uint8_t> pkt(data + off, data + off + n);  // exact bounds for ASan
    off += n;
    sink.packet = pkt;
    rx.on_packet(pkt, now, sink, tx);
    snd.on_packet(pkt, now);
    ctl.on_packet(pkt, now, [&](std::span<const uint8_t> p) {
      check(p.size() <= wire::kControlMaxPayload);
      ++delivered;
    });
    rx.poll(now, sink, tx);
    snd.poll(now, tx);
    ctl.poll(now, tx);
    check(rx.open_transfers() <= rc.max_transfers);
    check(snd.acked_chunks() <= snd.chunk_count());
    if (data[off - n - 3] == 0xff) rx.begin_round(1, 6, 1, now, sink, tx);  // rounds move on sometimes
  }
  // Everything ends: moving both jobs on closes whatever is open.
  rx.begin_round(1, 100, 1, now, sink, tx);
  rx.begin_round(2, 100, 0, now, sink, tx);
  check(rx.open_transfers() == 0);
  return 0;
}
