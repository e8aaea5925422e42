#include "sim/cluster.h"

#include <algorithm>

#include "sim/gloo_ring.h"

namespace sg::sim {

Cluster::Cluster(Wan& wan, std::vector<std::unique_ptr<Participant>> sites) : wan_(wan), sites_(std::move(sites)) {
  for (int i = 0; i < size(); ++i) wan_.attach(i, static_cast<uint16_t>(i + 1), sites_[i].get());
  counted_.assign(sites_.size(), 0);
  before_.resize(sites_.size());
}

RoundResult Cluster::run_round(uint32_t round, const std::vector<std::span<const float>>& locals, Nanos limit) {
  RoundResult r;
  r.start = wan_.now();
  int pending = 0;
  for (int i = 0; i < size(); ++i) {
    counted_[i] = 1;
    if (!sites_[i]) continue;
    before_[i] = sites_[i]->stats();
    const auto local = locals.size() > static_cast<size_t>(i) ? locals[i] : locals[0];
    if (!sites_[i]->begin_round(round, local, r.start, wan_.port(i))) continue;
    counted_[i] = 0;
    ++pending;
    wan_.wake(i, r.start);
  }
  if (pending == 0) return r;
  auto done = [&](int site) {
    if (counted_[site] || !sites_[site]->round_done()) return false;
    counted_[site] = 1;
    return --pending == 0;
  };
  r.ok = wan_.run(done, r.start + limit);
  r.end = r.start;
  for (int i = 0; i < size(); ++i) {
    if (!sites_[i]) continue;
    if (sites_[i]->round_done()) r.end = std::max(r.end, sites_[i]->round_finished());
    const ParticipantStats s = sites_[i]->stats();
    r.stats.bubbles += s.bubbles - before_[i].bubbles;
    r.stats.retransmits += s.retransmits - before_[i].retransmits;
    r.stats.early_closes += s.early_closes - before_[i].early_closes;
    r.stats.fallbacks += s.fallbacks - before_[i].fallbacks;
    r.stats.timeouts += s.timeouts - before_[i].timeouts;
    r.stats.bytes_sent += s.bytes_sent - before_[i].bytes_sent;
  }
  if (!r.ok) r.end = wan_.now();
  r.seconds = static_cast<double>(r.end - r.start) * 1e-9;
  return r;
}

std::vector<std::unique_ptr<Participant>> make_sync_sites(int n, uint32_t chunk_bytes, bool reliable, uint64_t seed,
                                                          const SimTimeouts& t, bool wire_compression, TcpCc cc) {
  std::vector<std::unique_ptr<Participant>> v;
  for (int i = 0; i < n; ++i) {
    sync::SyncConfig c = make_sync_config(n, i, chunk_bytes, reliable, seed, t, cc);
    c.wire_compression = wire_compression;
    v.push_back(std::make_unique<SyncParticipant>(c));
  }
  return v;
}

namespace {
RingConfig ring_site(const std::vector<int>& order, size_t i, uint32_t chunk_bytes, size_t floats, uint64_t seed,
                     const SimTimeouts& t, TcpCc cc) {
  RingConfig rc;
  rc.order = order;
  rc.self = static_cast<int>(i);
  rc.chunk_bytes = chunk_bytes;
  rc.floats = floats;
  rc.seed = seed * 104729 + i;
  rc.timeouts = t;
  rc.cc = cc;
  return rc;
}
}  // namespace

std::vector<std::unique_ptr<Participant>> make_ring_sites(const std::vector<int>& order, uint32_t chunk_bytes,
                                                          size_t floats, uint64_t seed, const SimTimeouts& t,
                                                          TcpCc cc) {
  std::vector<std::unique_ptr<Participant>> v;
  for (size_t i = 0; i < order.size(); ++i)
    v.push_back(std::make_unique<RingParticipant>(ring_site(order, i, chunk_bytes, floats, seed, t, cc)));
  return v;
}

std::vector<std::unique_ptr<Participant>> make_gloo_ring_sites(const std::vector<int>& order, uint32_t chunk_bytes,
                                                               size_t floats, uint64_t max_segment_bytes, uint64_t seed,
                                                               const SimTimeouts& t, TcpCc cc) {
  std::vector<std::unique_ptr<Participant>> v;
  for (size_t i = 0; i < order.size(); ++i)
    v.push_back(std::make_unique<GlooRingParticipant>(
        GlooRingConfig{ring_site(order, i, chunk_bytes, floats, seed, t, cc), max_segment_bytes}));
  return v;
}

bool install_plan(Cluster& c, const topo::Plan& plan, uint32_t version) {
  bool ok = true;
  for (int i = 0; i < c.size(); ++i)
    if (auto* s = dynamic_cast<SyncParticipant*>(c.site(i))) ok &= s->sync().set_plan(plan, version);
  c.wan().set_splits(plan.splits);
  return ok;
}

}  // namespace sg::sim
