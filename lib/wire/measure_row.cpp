#include "wire/measure_row.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sg::wire {
namespace {

template <class T>
T clamp_to(double v, double lo, double hi) {
  if (!(v >= lo)) return static_cast<T>(lo);  // NaN too
  return static_cast<T>(std::min(v, hi));
}

}  // namespace

std::vector<std::vector<uint8_t>> encode_measure_row(const MeasureRow& row, size_t max_bytes) {
  std::vector<std::vector<uint8_t>> out;
  if (max_bytes < sizeof(MeasureRowHeader)) return out;
  const size_t per = measure_entries_per_message(max_bytes);
  if (per == 0 && !row.links.empty()) return out;  // an empty row still fits as a bare header
  size_t i = 0;
  do {
    const size_t count = std::min(per, row.links.size() - i);
    std::vector<uint8_t> msg(sizeof(MeasureRowHeader) + count * sizeof(MeasureEntry));
    auto* h = reinterpret_cast<MeasureRowHeader*>(msg.data());
    h->magic.store(kMeasureRowMagic);
    h->version = kMeasureRowVersion;
    h->overlap = row.overlap < 0 ? kUnknownOverlap : clamp_to<uint8_t>(std::round(row.overlap * kOverlapSteps), 0, kOverlapSteps);
    h->site.store(row.site);
    h->count.store(static_cast<uint16_t>(count));
    h->round.store(row.round);
    h->egress_peak.store(clamp_to<uint64_t>(row.egress_peak, 0, static_cast<double>(kMaxMeasuredRate)));
    h->update_lag_us.store(row.update_lag_s < 0 ? kUnknownLag : clamp_to<uint32_t>(row.update_lag_s * 1e6, 0, kMaxLagUs));
    auto* e = reinterpret_cast<MeasureEntry*>(msg.data() + sizeof(MeasureRowHeader));
    for (size_t k = 0; k < count; ++k, ++i) {
      const LinkMeasure& l = row.links[i];
      e[k].from.store(l.from);
      e[k].source = std::min(l.source, kMaxMeasureSource);
      e[k].reserved = 0;
      e[k].bytes_per_s.store(clamp_to<uint64_t>(l.bytes_per_s, 0, static_cast<double>(kMaxMeasuredRate)));
      e[k].probe_bytes_per_s.store(clamp_to<uint64_t>(l.probe_bytes_per_s, 0, static_cast<double>(kMaxMeasuredRate)));
      e[k].rtt_us.store(l.rtt_s < 0 ? kUnknownRtt : clamp_to<uint32_t>(l.rtt_s * 1e6, 0, kUnknownRtt - 1.0));
      e[k].rtt_trend.store(clamp_to<uint32_t>(l.rtt_trend * 1e4, 0, 1e9));
      e[k].loss_ppm.store(clamp_to<uint32_t>(l.loss * 1e6, 0, 1e6));
      e[k].windows.store(l.windows);
    }
    out.push_back(std::move(msg));
  } while (i < row.links.size());
  return out;
}

Result<MeasureRow> parse_measure_row(std::span<const uint8_t> bytes, uint16_t sites) {
  if (bytes.size() < sizeof(MeasureRowHeader)) return WireError::kTruncated;
  MeasureRowHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.magic.load() != kMeasureRowMagic) return WireError::kBadMagic;
  if (h.version != kMeasureRowVersion) return WireError::kBadVersion;
  const size_t count = h.count.load();
  if (bytes.size() != sizeof(MeasureRowHeader) + count * sizeof(MeasureEntry)) return WireError::kBadLength;
  MeasureRow row;
  row.site = h.site.load();
  if (row.site >= sites || count >= sites) return WireError::kBadField;
  row.round = h.round.load();
  const uint64_t peak = h.egress_peak.load();
  if (peak > kMaxMeasuredRate) return WireError::kBadField;
  row.egress_peak = static_cast<double>(peak);
  const uint32_t lag = h.update_lag_us.load();
  if (lag != kUnknownLag && lag > kMaxLagUs) return WireError::kBadField;
  row.update_lag_s = lag == kUnknownLag ? -1.0 : lag * 1e-6;
  if (h.overlap != kUnknownOverlap && h.overlap > kOverlapSteps) return WireError::kBadField;
  row.overlap = h.overlap == kUnknownOverlap ? -1.0 : static_cast<double>(h.overlap) / kOverlapSteps;
  row.links.reserve(count);
  for (size_t k = 0; k < count; ++k) {
    MeasureEntry e;
    std::memcpy(&e, bytes.data() + sizeof(MeasureRowHeader) + k * sizeof(MeasureEntry), sizeof e);
    LinkMeasure l;
    l.from = e.from.load();
    if (l.from >= sites || l.from == row.site || e.source > kMaxMeasureSource) return WireError::kBadField;
    l.source = e.source;
    const uint64_t rate = e.bytes_per_s.load(), probe = e.probe_bytes_per_s.load();
    const uint32_t loss = e.loss_ppm.load();
    if (rate > kMaxMeasuredRate || probe > kMaxMeasuredRate || loss > 1000000) return WireError::kBadField;
    for (const LinkMeasure& seen : row.links)
      if (seen.from == l.from) return WireError::kBadField;  // one entry per link
    l.bytes_per_s = static_cast<double>(rate);
    l.probe_bytes_per_s = static_cast<double>(probe);
    const uint32_t rtt = e.rtt_us.load();
    l.rtt_s = rtt == kUnknownRtt ? -1.0 : rtt * 1e-6;
    l.rtt_trend = e.rtt_trend.load() * 1e-4;
    l.loss = loss * 1e-6;
    l.windows = e.windows.load();
    row.links.push_back(l);
  }
  return row;
}

}  // namespace sg::wire
