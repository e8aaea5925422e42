#include "sim/single_transfer.h"

#include <memory>
#include <vector>

#include "ltp/aimd_controller.h"
#include "ltp/delivery_rate_controller.h"
#include "ltp/receiver.h"
#include "ltp/sender.h"
#include "sim/wan.h"
#include "wire/ltp_codec.h"

namespace sg::sim {

namespace {

class SendSide final : public Endpoint {
 public:
  SendSide(ltp::Sender& s) : s_(s) {}
  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) override {
    s_.on_packet(msg, now);
    s_.poll(now, tx);
  }
  Nanos poll(Nanos now, ltp::PacketSink& tx) override { return s_.done() ? ltp::kNever : s_.poll(now, tx); }

 private:
  ltp::Sender& s_;
};

class RecvSide final : public Endpoint, public ltp::ReceiverSink {
 public:
  explicit RecvSide(const ltp::ReceiverConfig& c) : r_(c) { r_.begin_round(1, 1, 1, 0, *this, null_); }
  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) override { r_.on_packet(msg, now, *this, tx); }
  Nanos poll(Nanos now, ltp::PacketSink& tx) override { return r_.poll(now, *this, tx); }
  void on_chunk(const ltp::ChunkRef&, std::span<const uint8_t>) override {}
  void on_bubble(const ltp::ChunkRef&, ltp::FillRule) override {}
  void on_transfer_end(const ltp::TransferSummary&) override {}

 private:
  struct Null final : ltp::PacketSink {
    void send(const ltp::TxMeta&, std::span<const uint8_t>, std::span<const uint8_t>) override {}
  } null_;
  ltp::Receiver r_;
};

}  // namespace

SingleTransferResult run_single_transfer(const LinkSpec& fwd, const LinkSpec& rev, uint64_t bytes,
                                         uint32_t chunk_bytes, bool reliable, uint64_t seed, Nanos limit) {
  WanSpec spec;
  spec.seed = seed;
  spec.sites = {SiteSpec{"a"}, SiteSpec{"b"}};
  spec.links.assign(4, LinkSpec{});
  spec.links[0].bytes_per_s = spec.links[3].bytes_per_s = 0;
  spec.link(0, 1) = fwd;
  spec.link(1, 0) = rev;
  // The payload really sent is small; the wire carries `chunk_bytes` per chunk.
  const uint32_t real_chunk = 64;
  const uint32_t scale = chunk_bytes / real_chunk;
  Wan wan(spec, 4096, scale);
  const uint64_t chunks = (bytes + chunk_bytes - 1) / chunk_bytes;
  std::vector<uint8_t> data(chunks * real_chunk, 0x5a);

  Rng rng(seed);
  std::unique_ptr<ltp::RateController> rc;
  if (reliable) rc = std::make_unique<ltp::AimdController>();
  else rc = std::make_unique<ltp::DeliveryRateController>();
  ltp::SenderConfig sc;
  sc.local_node = 1;
  sc.peer_node = 2;
  sc.max_chunks = static_cast<uint32_t>(chunks);
  sc.give_up_after = limit;
  ltp::Sender sender(sc, *rc, rng);
  ltp::ReceiverConfig rcfg;
  rcfg.local_node = 2;
  rcfg.max_chunks = static_cast<uint32_t>(chunks);
  rcfg.abandon_after = limit;
  rcfg.early_close.enabled = false;  // both deliver everything: only the rate control differs
  rcfg.early_close.max_loss_fraction = 0;
  SendSide a(sender);
  RecvSide b(rcfg);
  wan.attach(0, 1, &a);
  wan.attach(1, 2, &b);

  ltp::TransferSpec t;
  t.job = 1;
  t.round = 1;
  t.policy_version = 1;
  t.chunk_size = real_chunk;
  t.data = data;
  SingleTransferResult r;
  if (!sender.start(t, 0)) return r;
  wan.wake(0, 0);
  wan.run([&](int) { return sender.done(); }, limit);
  r.ok = sender.state() == ltp::SenderState::kAcked || sender.state() == ltp::SenderState::kClosed;
  r.seconds = static_cast<double>(sender.finished_at()) * 1e-9;
  r.goodput_Bps = r.seconds > 0 ? static_cast<double>(bytes) / r.seconds : 0;
  r.utilisation = r.goodput_Bps / fwd.bytes_per_s;
  r.retransmits = sender.stats().retransmits;
  r.packets = sender.stats().data_sent;
  return r;
}

}  // namespace sg::sim
