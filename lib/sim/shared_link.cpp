#include "sim/shared_link.h"

#include <algorithm>

#include "ltp/delivery_rate_controller.h"
#include "ltp/receiver.h"
#include "sim/wan.h"
#include "wire/ltp_codec.h"

namespace sg::sim {

struct SharedLink::Flow {
  SharedFlowSpec spec;
  uint32_t job = 0;
  uint32_t round = 0;  // of the current transfer; 0 = not started
  uint32_t chunks = 0;
  std::vector<uint8_t> data;
  std::unique_ptr<ltp::RateController> rc;
  std::unique_ptr<ltp::Sender> sender;
  uint64_t completed = 0;  // payload bytes of ended transfers
  bool counted = false;    // the current transfer's bytes are in `completed`
  Nanos finished = -1;
  bool dropped = false;
};

class SharedLink::SendSide final : public Endpoint {
 public:
  explicit SendSide(SharedLink& l) : l_(l) {}
  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) override { l_.on_ack_packet(msg, now, tx); }
  Nanos poll(Nanos now, ltp::PacketSink& tx) override { return l_.poll_senders(now, tx); }

 private:
  SharedLink& l_;
};

class SharedLink::RecvSide final : public Endpoint, public ltp::ReceiverSink {
 public:
  explicit RecvSide(const ltp::ReceiverConfig& c) : r_(c) {}
  void begin(uint32_t job, uint32_t round, Nanos now, ltp::PacketSink& tx) { r_.begin_round(job, round, 1, now, *this, tx); }
  void on_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) override { r_.on_packet(msg, now, *this, tx); }
  Nanos poll(Nanos now, ltp::PacketSink& tx) override { return r_.poll(now, *this, tx); }
  void on_chunk(const ltp::ChunkRef&, std::span<const uint8_t>) override {}
  void on_bubble(const ltp::ChunkRef&, ltp::FillRule) override {}
  void on_transfer_end(const ltp::TransferSummary&) override {}

 private:
  ltp::Receiver r_;
};

SharedLink::SharedLink(const SharedLinkSpec& spec) : spec_(spec), rng_(spec.seed) {
  real_chunk_ = std::min<uint32_t>(64, spec.chunk_bytes);
  WanSpec w;
  w.seed = spec.seed;
  w.sites = {SiteSpec{"a"}, SiteSpec{"b"}};
  w.links.assign(4, LinkSpec{});
  w.links[0].bytes_per_s = w.links[3].bytes_per_s = 0;
  w.link(0, 1) = spec.fwd;
  w.link(1, 0) = spec.rev;
  // The payload really carried is small; the wire carries chunk_bytes per chunk.
  wan_ = std::make_unique<Wan>(w, 4096, spec.chunk_bytes / real_chunk_);

  const uint32_t engines = std::max<uint32_t>(spec.engines, 1);
  const bool board = spec.shared && engines > 1 && spec.one_board;
  // On a shared board every flow is in a group the owner opened: a flow of its own gets a key
  // no job uses.
  auto key = [&](size_t i) { return spec.flows[i].group != ltp::LinkShare::kOwnGroup ? spec.flows[i].group : (1ull << 40) + i; };
  if (board) {
    board_ = std::make_unique<ltp::LinkBoard>(static_cast<uint32_t>(spec.flows.size()) + 1, true);
    for (size_t i = 0; i < spec.flows.size(); ++i) board_->open_group(key(i), spec.flows[i].weight);
  }
  if (spec.shared)
    for (uint32_t e = 0; e < engines; ++e)
      shares_.push_back(board ? std::make_unique<ltp::LinkShare>(std::make_unique<ltp::DeliveryRateController>(), *board_)
                              : std::make_unique<ltp::LinkShare>(std::make_unique<ltp::DeliveryRateController>()));
  uint32_t max_chunks = 1;
  for (size_t i = 0; i < spec.flows.size(); ++i) {
    auto fl = std::make_unique<Flow>();
    fl->spec = spec.flows[i];
    fl->job = static_cast<uint32_t>(i + 1);
    fl->chunks = static_cast<uint32_t>(std::max<uint64_t>((fl->spec.bytes + spec.chunk_bytes - 1) / spec.chunk_bytes, 1));
    fl->data.assign(static_cast<size_t>(fl->chunks) * real_chunk_, 0x5a);
    if (!shares_.empty())
      fl->rc = shares_[std::min<uint32_t>(fl->spec.engine, engines - 1)]->attach(fl->spec.weight, board ? key(i) : fl->spec.group);
    else fl->rc = std::make_unique<ltp::DeliveryRateController>();
    ltp::SenderConfig sc;
    sc.local_node = 1;
    sc.peer_node = 2;
    sc.max_chunks = fl->chunks;
    sc.give_up_after = 60 * kSecond;
    fl->sender = std::make_unique<ltp::Sender>(sc, *fl->rc, rng_);
    max_chunks = std::max(max_chunks, fl->chunks);
    flows_.push_back(std::move(fl));
  }
  ltp::ReceiverConfig rc;
  rc.local_node = 2;
  rc.max_chunks = max_chunks;
  rc.max_jobs = static_cast<uint32_t>(flows_.size()) + 1;
  rc.max_transfers = 2 * static_cast<uint32_t>(flows_.size()) + 4;
  rc.abandon_after = 60 * kSecond;
  rc.early_close.enabled = false;  // everything is delivered: goodput is the rate control's
  rc.early_close.max_loss_fraction = 0;
  rx_ = std::make_unique<RecvSide>(rc);
  tx_ = std::make_unique<SendSide>(*this);
  wan_->attach(0, 1, tx_.get());
  wan_->attach(1, 2, rx_.get());
  for (const auto& fl : flows_) wan_->wake(0, fl->spec.start);
}

SharedLink::~SharedLink() = default;

void SharedLink::start_next(Flow& fl, Nanos now) {
  ++fl.round;
  fl.counted = false;
  rx_->begin(fl.job, fl.round, now, wan_->port(1));
  ltp::TransferSpec t;
  t.job = fl.job;
  t.round = fl.round;
  t.policy_version = 1;
  t.chunk_size = real_chunk_;
  t.data = fl.data;
  t.streaming = fl.spec.streaming;
  fl.sender->start(t, now);
}

Nanos SharedLink::poll_senders(Nanos now, ltp::PacketSink& tx) {
  Nanos next = ltp::kNever;
  for (auto& p : flows_) {
    Flow& fl = *p;
    if (fl.dropped || fl.finished >= 0) continue;
    if (fl.round == 0) {
      if (now < fl.spec.start) {
        next = std::min(next, fl.spec.start);
        continue;
      }
      start_next(fl, now);
    }
    if (fl.sender->done()) {
      all_ok_ &= fl.sender->state() == ltp::SenderState::kAcked;
      fl.completed += static_cast<uint64_t>(fl.sender->acked_chunks()) * spec_.chunk_bytes;
      fl.counted = true;
      if (fl.round >= fl.spec.transfers) {
        fl.finished = fl.sender->finished_at();
        continue;
      }
      start_next(fl, now);
    }
    next = std::min(next, fl.sender->poll(now, tx));
  }
  return next;
}

void SharedLink::on_ack_packet(std::span<const uint8_t> msg, Nanos now, ltp::PacketSink& tx) {
  auto c = wire::parse_common(msg);
  if (!c) return;
  uint32_t job = 0;
  if (c->type == wire::MsgType::kAck) {
    auto a = wire::parse_ack(msg);
    if (a) job = a->f.job;
  } else if (c->type == wire::MsgType::kClose) {
    auto a = wire::parse_close(msg);
    if (a) job = a->f.job;
  }
  for (auto& p : flows_) {
    if (p->job != job || p->dropped || p->round == 0 || p->sender->done()) continue;
    p->sender->on_packet(msg, now);
    p->sender->poll(now, tx);  // as SiteSync does; the next transfer starts in poll_senders
  }
}

void SharedLink::run_until(Nanos t) {
  wan_->run([](int) { return false; }, t);
  now_ = std::max(now_, t);
}

bool SharedLink::done(int f) const { return flows_[f]->dropped || flows_[f]->finished >= 0; }
Nanos SharedLink::finished_at(int f) const { return flows_[f]->finished; }
bool SharedLink::all_ok() const { return all_ok_; }

uint64_t SharedLink::delivered(int f) const {
  const Flow& fl = *flows_[f];
  uint64_t d = fl.completed;
  if (!fl.dropped && fl.round > 0 && !fl.counted)
    d += static_cast<uint64_t>(fl.sender->acked_chunks()) * spec_.chunk_bytes;
  return d;
}

void SharedLink::release(int f, double fraction) {
  Flow& fl = *flows_[f];
  if (fl.dropped || fl.round == 0) return;
  const auto upto = static_cast<uint32_t>(std::clamp(fraction, 0.0, 1.0) * fl.chunks);
  for (uint32_t i = 0; i < upto; ++i) fl.sender->release(i, now_);
  wan_->wake(0, now_);
}

void SharedLink::drop(int f) {
  Flow& fl = *flows_[f];
  if (fl.dropped) return;
  fl.completed = delivered(f);
  fl.dropped = true;
  fl.sender.reset();  // the sender first: it refers to its controller
  fl.rc.reset();
}

const ltp::RateController& SharedLink::controller(int f) const { return *flows_[f]->rc; }
const ltp::Sender& SharedLink::sender(int f) const { return *flows_[f]->sender; }

}  // namespace sg::sim
