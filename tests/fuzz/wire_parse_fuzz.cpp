// Fuzz every lib/wire parser on the same bytes. Invariants (trap on violation): parsers never
// read outside the input (ASan), results point inside it, and build(parse(x)) parses back to
// the same fields.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "wire/arp.h"
#include "wire/frame.h"
#include "wire/job_msg.h"
#include "wire/ltp_codec.h"
#include "wire/measure_row.h"

using namespace sg::wire;

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

bool inside(std::span<const uint8_t> whole, std::span<const uint8_t> part) {
  return part.empty() || (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

bool same(const DataFields& a, const DataFields& b) {
  return a.src_node == b.src_node && a.job == b.job && a.round == b.round && a.policy_version == b.policy_version &&
         a.shard == b.shard && a.path_id == b.path_id && a.chunk_index == b.chunk_index && a.chunk_count == b.chunk_count &&
         a.contributors == b.contributors && a.codec == b.codec && a.flags == b.flags && a.send_ts == b.send_ts &&
         a.echo_ts == b.echo_ts;
}

void ltp_messages(std::span<const uint8_t> in) {
  std::vector<uint8_t> out(in.size() + 64);
  if (auto d = parse_data(in)) {
    check(inside(in, d->payload));
    auto n = build_data(out, d->f, d->payload);
    check(n.ok() && *n == in.size());
    auto again = parse_data(std::span<const uint8_t>(out).first(*n));
    check(again.ok() && same(again->f, d->f) && std::equal(again->payload.begin(), again->payload.end(), d->payload.begin()));
  }
  if (auto a = parse_ack(in)) {
    check(inside(in, a->sack) && a->sack.size() == kAckSackBits / 8 && a->f.received >= a->f.cum_ack);
    auto n = build_ack(out, a->f, a->sack);
    check(n.ok());
    auto again = parse_ack(std::span<const uint8_t>(out).first(*n));
    check(again.ok() && again->f.cum_ack == a->f.cum_ack && again->f.sack_base == a->f.sack_base &&
          std::memcmp(again->sack.data(), a->sack.data(), a->sack.size()) == 0);
  }
  if (auto c = parse_close(in)) {
    check(inside(in, c->bitmap) && c->f.kept_count <= c->f.chunk_count && c->bitmap.size() <= kCloseMaxBitmapBytes);
    auto n = build_close(out, c->f, c->bitmap);
    check(n.ok() && *n == in.size());
    auto again = parse_close(std::span<const uint8_t>(out).first(*n));
    check(again.ok() && again->f.kept_count == c->f.kept_count && again->f.more == c->f.more);
  }
  if (auto m = parse_control(in)) {
    check(inside(in, m->payload) && m->payload.size() <= kControlMaxPayload);
    if (!(in[offsetof(LtpCommon, flags)] & kFlagSealed)) {
      auto n = build_control(out, m->f, m->payload);
      check(n.ok() && *n == in.size());
      auto again = parse_control(std::span<const uint8_t>(out).first(*n));
      check(again.ok() && again->f.seq == m->f.seq && again->f.ack == m->f.ack);
    }
  }
  if (auto p = parse_probe(in)) {
    check(p->seq < p->count && p->count <= kProbeMaxCount && p->payload_len <= kProbeMaxPayload);
    if (!(in[offsetof(LtpCommon, flags)] & kFlagSealed)) {
      auto n = build_probe(out, *p, p->payload_len);
      check(n.ok() && *n == in.size());
      auto again = parse_probe(std::span<const uint8_t>(out).first(*n));
      check(again.ok() && again->train == p->train && again->seq == p->seq && again->dst_node == p->dst_node);
    }
  }
  if (auto r = parse_reject(in)) {
    check(r->min_version <= r->max_version);
    auto n = build_reject(out, *r);
    check(n.ok());
    auto again = parse_reject(std::span<const uint8_t>(out).first(*n));
    check(again.ok() && again->offending_version == r->offending_version);
  }
  if (auto j = parse_job(in)) {
    check(inside(in, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(j->text.data()), j->text.size())));
    std::vector<uint8_t> jb(sizeof(JobHeader) + kJobMaxText);
    auto n = build_job(jb, j->src_node, j->op, j->status, j->spec, j->text);
    check(n.ok());
    auto again = parse_job(std::span<const uint8_t>(jb).first(*n));
    check(again.ok() && again->op == j->op && again->status == j->status && again->spec == j->spec &&
          again->src_node == j->src_node && again->text == j->text);
  }
  (void)parse_common(in);
}

// Measurement rows: ids below the site count, ranges kept, and encode(parse(x)) == x.
void measure_rows(std::span<const uint8_t> in) {
  for (uint16_t sites : {uint16_t{2}, uint16_t{8}, uint16_t{1024}}) {
    auto r = parse_measure_row(in, sites);
    if (!r) continue;
    check(r->site < sites && r->links.size() < sites);
    for (const auto& l : r->links) check(l.from < sites && l.from != r->site && l.loss >= 0 && l.loss <= 1);
    const auto parts = encode_measure_row(*r, in.size() + 1);
    check(parts.size() == 1 && parts[0].size() == in.size());
    auto again = parse_measure_row(parts[0], sites);
    check(again.ok() && again->links.size() == r->links.size() && again->round == r->round);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy so ASan sees the exact bounds (fuzzers may hand us larger buffers).
  std::vector<uint8_t> buf(data, data + size);
  std::span<const uint8_t> in(buf);

  if (auto f = parse_udp_frame(in)) {
    check(f->payload_offset + f->payload_len <= in.size());
    check(f->l3_offset < f->l4_offset && f->l4_offset < f->payload_offset);
    ltp_messages(in.subspan(f->payload_offset, f->payload_len));
  }
  if (auto f = parse_udp_frame(in, {false, false})) check(f->payload_offset + f->payload_len <= in.size());
  if (auto e = parse_ethernet(in)) {
    check(e->l3_offset <= in.size());
    if (e->ethertype == kEtherTypeArp) (void)parse_arp(in.subspan(e->l3_offset));
  }
  if (auto ip = parse_ipv4(in, false)) {
    check(ip->payload_offset + ip->payload_len <= in.size());
    (void)parse_udp(in.subspan(ip->payload_offset, ip->payload_len), ip->src, ip->dst);
  }
  (void)parse_arp(in);
  (void)parse_udp(in, 0, 0);
  ltp_messages(in);
  measure_rows(in);
  return 0;
}
