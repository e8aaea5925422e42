// LTP message parse/build: round trips, and each length or field lying in turn.
#include "wire/ltp_codec.h"

#include <gtest/gtest.h>

#include <vector>

namespace sg::wire {
namespace {

DataFields data_fields() {
  DataFields f;
  f.src_node = 7;
  f.job = 42;
  f.round = 1000;
  f.policy_version = 3;
  f.shard = 5;
  f.path_id = 2;
  f.chunk_index = 9;
  f.chunk_count = 10;
  f.contributors = 4;
  f.codec = CodecId::kBf16;
  f.send_ts = 123456789;
  f.echo_ts = 987654321;
  return f;
}

std::vector<uint8_t> data_msg(const DataFields& f, size_t plen) {
  std::vector<uint8_t> payload(plen);
  for (size_t i = 0; i < plen; ++i) payload[i] = static_cast<uint8_t>(i);
  std::vector<uint8_t> b(data_msg_len(static_cast<uint16_t>(plen)));
  auto n = build_data(b, f, payload);
  EXPECT_TRUE(n.ok());
  EXPECT_EQ(*n, b.size());
  return b;
}

void put16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v >> 8);
  b[off + 1] = static_cast<uint8_t>(v);
}
void put32(std::vector<uint8_t>& b, size_t off, uint32_t v) {
  put16(b, off, static_cast<uint16_t>(v >> 16));
  put16(b, off + 2, static_cast<uint16_t>(v));
}

TEST(LtpData, RoundTripKeepsEveryField) {
  auto f = data_fields();
  f.flags = kFlagRetransmit;
  auto b = data_msg(f, 100);
  auto m = parse_data(b);
  ASSERT_TRUE(m.ok()) << to_string(m.error());
  EXPECT_EQ(m->f.src_node, 7);
  EXPECT_EQ(m->f.job, 42u);
  EXPECT_EQ(m->f.round, 1000u);
  EXPECT_EQ(m->f.policy_version, 3u);
  EXPECT_EQ(m->f.shard, 5);
  EXPECT_EQ(m->f.path_id, 2);
  EXPECT_EQ(m->f.chunk_index, 9u);
  EXPECT_EQ(m->f.chunk_count, 10u);
  EXPECT_EQ(m->f.contributors, 4);
  EXPECT_EQ(m->f.codec, CodecId::kBf16);
  EXPECT_EQ(m->f.flags, kFlagRetransmit);
  EXPECT_EQ(m->f.send_ts, 123456789u);
  EXPECT_EQ(m->f.echo_ts, 987654321u);
  ASSERT_EQ(m->payload.size(), 100u);
  EXPECT_EQ(m->payload.data(), b.data() + sizeof(DataHeader)) << "payload must not be copied";
}

TEST(LtpData, SealedFlagIsCarriedAndTheTrailerIsNotTheParsersBusiness) {
  auto f = data_fields();
  f.flags = kFlagSealed;
  auto b = data_msg(f, 64);
  EXPECT_EQ(b.size(), sizeof(DataHeader) + 64) << "the receiver cuts the trailer off before parsing";
  auto m = parse_data(b);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->f.flags, kFlagSealed);
  EXPECT_EQ(m->payload.size(), 64u);
  b.resize(b.size() + kAuthTrailerLen);
  EXPECT_EQ(parse_data(b).error(), WireError::kBadLength) << "a trailer left on is refused, not read as payload";
}

TEST(LtpData, EveryLengthFieldLying) {
  const auto good = data_msg(data_fields(), 32);
  auto b = good;
  put16(b, offsetof(DataHeader, payload_len), 33);  // claims more than is there
  EXPECT_EQ(parse_data(b).error(), WireError::kTruncated);
  b = good;
  put16(b, offsetof(DataHeader, payload_len), 31);  // claims less: a trailing byte is unexplained
  EXPECT_EQ(parse_data(b).error(), WireError::kBadLength);
  b = good;
  put16(b, offsetof(DataHeader, payload_len), 0xffff);
  EXPECT_EQ(parse_data(b).error(), WireError::kTruncated);
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(parse_data(std::span(good).first(n)).ok()) << n;
  }
}

TEST(LtpData, FieldsOutOfRange) {
  const auto good = data_msg(data_fields(), 8);
  auto b = good;
  put32(b, offsetof(DataHeader, chunk_index), 10);  // == chunk_count
  EXPECT_EQ(parse_data(b).error(), WireError::kBadField);
  b = good;
  put32(b, offsetof(DataHeader, chunk_count), 0);
  EXPECT_EQ(parse_data(b).error(), WireError::kBadField);
  b = good;
  put16(b, offsetof(DataHeader, contributors), 0);
  EXPECT_EQ(parse_data(b).error(), WireError::kBadField);
  b = good;
  b[offsetof(DataHeader, codec)] = kCodecCount;
  EXPECT_EQ(parse_data(b).error(), WireError::kBadField);
  b = good;
  b[offsetof(LtpCommon, flags)] = 0x80;  // unknown flag
  EXPECT_EQ(parse_data(b).error(), WireError::kBadField);
  b = good;
  b[offsetof(LtpCommon, flags)] = kFlagMore;  // a CLOSE flag on DATA
  EXPECT_EQ(parse_data(b).error(), WireError::kBadField);
}

TEST(LtpCommonHeader, MagicVersionType) {
  const auto good = data_msg(data_fields(), 8);
  auto b = good;
  b[0] ^= 1;
  EXPECT_EQ(parse_data(b).error(), WireError::kBadMagic);
  EXPECT_EQ(parse_common(b).error(), WireError::kBadMagic);
  b = good;
  b[offsetof(LtpCommon, version)] = 9;
  EXPECT_EQ(parse_data(b).error(), WireError::kBadVersion);
  auto c = parse_common(b);  // still readable, so the receiver can REJECT it
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->version, 9);
  EXPECT_EQ(c->src_node, 7);
  b = good;
  b[offsetof(LtpCommon, type)] = static_cast<uint8_t>(MsgType::kAck);
  EXPECT_EQ(parse_data(b).error(), WireError::kBadType);
}

TEST(LtpData, BuilderNeverOverruns) {
  std::vector<uint8_t> out(sizeof(DataHeader) + 10 + 8, 0xaa);
  std::vector<uint8_t> payload(11, 1);
  EXPECT_EQ(build_data(std::span(out).first(sizeof(DataHeader) + 10), data_fields(), payload).error(), WireError::kNoSpace);
  for (uint8_t v : out) EXPECT_EQ(v, 0xaa);
  auto f = data_fields();
  f.chunk_index = f.chunk_count;
  EXPECT_EQ(build_data(out, f, std::span(payload).first(4)).error(), WireError::kBadField);
}

TEST(LtpAck, RoundTripAndSackBits) {
  AckFields f;
  f.src_node = 1;
  f.job = 2;
  f.round = 3;
  f.policy_version = 4;
  f.shard = 5;
  f.path_id = 6;
  f.cum_ack = 100;
  f.received = 150;
  f.ack_ts = 77;
  f.echo_ts = 88;
  f.sack_base = 96;
  std::vector<uint8_t> sack(kAckSackBits / 8, 0);
  sack[0] = 0x0f;            // chunks 96..99
  sack[kAckSackBits / 8 - 1] = 0x80;  // chunk 96 + 511
  std::vector<uint8_t> b(sizeof(AckHeader));
  ASSERT_EQ(*build_ack(b, f, sack), sizeof(AckHeader));
  auto m = parse_ack(b);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->f.cum_ack, 100u);
  EXPECT_EQ(m->f.received, 150u);
  EXPECT_EQ(m->f.sack_base, 96u);
  EXPECT_TRUE(m->sack_bit(0));
  EXPECT_TRUE(m->sack_bit(3));
  EXPECT_FALSE(m->sack_bit(4));
  EXPECT_TRUE(m->sack_bit(kAckSackBits - 1));
  EXPECT_EQ(m->f.echo_ts, 88u);

  auto lie = b;
  put32(lie, offsetof(AckHeader, received), 99);  // holds fewer than its cumulative point
  EXPECT_EQ(parse_ack(lie).error(), WireError::kBadField);
  lie = b;
  lie.push_back(0);
  EXPECT_EQ(parse_ack(lie).error(), WireError::kBadLength);
  EXPECT_EQ(parse_ack(std::span(b).first(b.size() - 1)).error(), WireError::kTruncated);
  std::vector<uint8_t> too_long(kAckSackBits / 8 + 1);
  EXPECT_EQ(build_ack(b, f, too_long).error(), WireError::kBadLength);
}

// kFlagHeld: an ACK of replayed DATA says so; on DATA the flag means nothing and is refused.
TEST(LtpAck, HeldFlagOnAcksOnly) {
  AckFields f;
  f.cum_ack = 3;
  f.received = 3;
  std::vector<uint8_t> b(sizeof(AckHeader));
  ASSERT_TRUE(build_ack(b, f, {}).ok());
  EXPECT_FALSE(parse_ack(b)->f.held);
  f.held = true;
  ASSERT_TRUE(build_ack(b, f, {}).ok());
  EXPECT_EQ(b[offsetof(LtpCommon, flags)], kFlagHeld);
  EXPECT_TRUE(parse_ack(b)->f.held);

  auto data = data_msg(data_fields(), 16);
  ASSERT_TRUE(parse_data(data).ok());
  data[offsetof(LtpCommon, flags)] |= kFlagHeld;
  EXPECT_EQ(parse_data(data).error(), WireError::kBadField);
}

TEST(LtpClose, BitmapPartsAndLies) {
  CloseFields f;
  f.job = 1;
  f.round = 2;
  f.chunk_count = 20;
  f.kept_count = 18;
  f.reason = CloseReason::kEarlyClose;
  f.bitmap_base = 8;
  f.more = true;
  std::vector<uint8_t> bm = {0xff, 0x0e};  // chunks 8..19 (bits past 19 are padding)
  std::vector<uint8_t> b(sizeof(CloseHeader) + bm.size());
  ASSERT_EQ(*build_close(b, f, bm), b.size());
  auto m = parse_close(b);
  ASSERT_TRUE(m.ok()) << to_string(m.error());
  EXPECT_TRUE(m->f.more);
  EXPECT_EQ(m->f.reason, CloseReason::kEarlyClose);
  EXPECT_EQ(m->bitmap.size(), 2u);
  EXPECT_EQ(m->bitmap.data(), b.data() + sizeof(CloseHeader));

  auto lie = b;
  put16(lie, offsetof(CloseHeader, bitmap_bytes), 3);
  EXPECT_EQ(parse_close(lie).error(), WireError::kTruncated);
  put16(lie, offsetof(CloseHeader, bitmap_bytes), 1);
  EXPECT_EQ(parse_close(lie).error(), WireError::kBadLength);
  lie = b;
  put32(lie, offsetof(CloseHeader, bitmap_base), 12);  // not byte aligned
  EXPECT_EQ(parse_close(lie).error(), WireError::kBadField);
  lie = b;
  put32(lie, offsetof(CloseHeader, bitmap_base), 16);  // 16 + 16 bits > 24 (20 rounded up)
  EXPECT_EQ(parse_close(lie).error(), WireError::kBadLength);
  lie = b;
  put32(lie, offsetof(CloseHeader, kept_count), 21);
  EXPECT_EQ(parse_close(lie).error(), WireError::kBadField);
  lie = b;
  lie[offsetof(CloseHeader, reason)] = kCloseReasonCount;
  EXPECT_EQ(parse_close(lie).error(), WireError::kBadField);
  std::vector<uint8_t> huge(kCloseMaxBitmapBytes + 1);
  std::vector<uint8_t> out(sizeof(CloseHeader) + huge.size());
  EXPECT_EQ(build_close(out, f, huge).error(), WireError::kBadLength);
}

TEST(LtpControl, RoundTripPureAckAndLies) {
  ControlFields f;
  f.src_node = 3;
  f.job = 4;
  f.channel = 9;
  f.seq = 17;
  f.ack = 5;
  std::vector<uint8_t> body = {1, 2, 3};
  std::vector<uint8_t> b(sizeof(ControlHeader) + body.size());
  ASSERT_EQ(*build_control(b, f, body), b.size());
  auto m = parse_control(b);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->f.seq, 17u);
  EXPECT_EQ(m->f.ack, 5u);
  EXPECT_EQ(m->f.channel, 9);
  EXPECT_EQ(m->payload.size(), 3u);
  auto lie = b;
  put16(lie, offsetof(ControlHeader, payload_len), 4);
  EXPECT_EQ(parse_control(lie).error(), WireError::kTruncated);
  put16(lie, offsetof(ControlHeader, payload_len), kControlMaxPayload + 1);
  EXPECT_EQ(parse_control(lie).error(), WireError::kBadLength);
  lie = b;
  put32(lie, offsetof(ControlHeader, seq), 0);  // a pure ack with a body
  EXPECT_EQ(parse_control(lie).error(), WireError::kBadField);
  f.seq = 0;
  EXPECT_EQ(build_control(b, f, body).error(), WireError::kBadField);
}

TEST(LtpReject, ParsesWhateverVersionSentIt) {
  RejectFields f;
  f.src_node = 2;
  f.job = 8;
  f.offending_version = 7;
  std::vector<uint8_t> b(sizeof(RejectHeader));
  ASSERT_TRUE(build_reject(b, f).ok());
  b[offsetof(LtpCommon, version)] = 200;  // a future peer's REJECT
  auto r = parse_reject(b);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->offending_version, 7);
  EXPECT_EQ(r->min_version, kLtpMinVersion);
  EXPECT_EQ(r->max_version, kLtpMaxVersion);
  auto lie = b;
  lie[offsetof(RejectHeader, min_version)] = 5;
  lie[offsetof(RejectHeader, max_version)] = 4;
  EXPECT_EQ(parse_reject(lie).error(), WireError::kBadField);
  EXPECT_EQ(parse_reject(std::span(b).first(15)).error(), WireError::kTruncated);
}

}  // namespace
}  // namespace sg::wire

namespace sg::wire {
namespace {

TEST(LtpProbe, RoundTripStampAndLies) {
  ProbeFields f;
  f.src_node = 3;
  f.job = 9;
  f.train = 77;
  f.seq = 2;
  f.count = 8;
  f.dst_node = 5;
  f.send_ts = 123456789;
  std::vector<uint8_t> b(probe_msg_len(1000));
  ASSERT_EQ(*build_probe(b, f, 1000), b.size());
  auto p = parse_probe(b);
  ASSERT_TRUE(p.ok()) << to_string(p.error());
  EXPECT_EQ(p->train, 77u);
  EXPECT_EQ(p->seq, 2);
  EXPECT_EQ(p->count, 8);
  EXPECT_EQ(p->dst_node, 5);
  EXPECT_EQ(p->payload_len, 1000);
  EXPECT_EQ(p->rx_ts, 0u) << "zero on the wire";
  stamp_probe_arrival(b, 555);
  EXPECT_EQ(parse_probe(b)->rx_ts, 555u);
  EXPECT_EQ(parse_probe(b)->train, 77u) << "the stamp changes nothing else";
  // A train of one, a seq beyond it, a payload longer than the buffer, trailing bytes.
  auto bad = f;
  bad.count = 1;
  bad.seq = 0;
  EXPECT_FALSE(build_probe(b, bad, 0));
  std::vector<uint8_t> c = b;
  c[offsetof(ProbeHeader, seq) + 1] = 9;
  EXPECT_EQ(parse_probe(c).error(), WireError::kBadField);
  EXPECT_EQ(parse_probe(std::span(b).first(b.size() - 1)).error(), WireError::kTruncated);
  c = b;
  c.push_back(0);
  EXPECT_EQ(parse_probe(c).error(), WireError::kBadLength);
  EXPECT_EQ(peek_shard(b), std::nullopt) << "a probe belongs to no shard: engine 0 takes it";
}

}  // namespace
}  // namespace sg::wire
