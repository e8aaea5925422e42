// Measurement rows between gateways: what a site measured of the links into it (passive
// windows and probe results) and of its own sending, for the coordinator's controller
// (lib/controller). They travel as the payload of reliable CONTROL messages on the
// measurement channel; a row too long for one message is split into several, each with
// explicit link ids, so any part is useful alone.
//
//   MeasureRowHeader  magic "MR", version, the reporting site (plan index), the round it
//                     closed, entry count, the site's own peak egress rate, and its update
//                     lag (its load: how long its workers take to make the next update)
//   MeasureEntry[]    one per link k -> site: rate, probe rate, RTT, RTT trend, loss, source
//
// All fields big-endian integers in fixed units (no floats on the wire): bytes/s, µs,
// RTT trend x 10^4, loss in parts per million. Parsing checks every length and range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/endian.h"
#include "wire/result.h"

namespace sg::wire {

inline constexpr uint16_t kMeasureRowMagic = 0x4d52;  // "MR"
inline constexpr uint8_t kMeasureRowVersion = 3;

struct MeasureRowHeader {
  be16 magic;
  uint8_t version;
  uint8_t overlap;  // share of update_lag the WAN could use, in kOverlapSteps (kUnknownOverlap: none)
  be16 site;        // the reporting site's index in the job's plan order
  be16 count;       // entries that follow
  be32 round;       // the last round the site completed when it measured
  be64 egress_peak; // bytes/s: the highest rate this site's own sending reached (0: unknown)
  be32 update_lag_us;  // from a round's result to the site's next update (kUnknownLag: none)
};
static_assert(sizeof(MeasureRowHeader) == 24 && alignof(MeasureRowHeader) == 1);

struct MeasureEntry {
  be16 from;        // the link from -> site (plan index)
  uint8_t source;   // how bytes_per_s is known: 0 none, 1 traffic, 2 probe, 3 prior (measure::Source)
  uint8_t reserved;
  be64 bytes_per_s; // the estimator's figure (traffic windows, else a probe, else a prior)
  be64 probe_bytes_per_s;  // the latest recent probe of the link alone; 0: none
  be32 rtt_us;      // minimum (propagation) RTT; kUnknownRtt if none
  be32 rtt_trend;   // x 10^4 (10000 = flat)
  be32 loss_ppm;    // 0..10^6
  be32 windows;     // traffic windows measured on the link so far (rising: it carries traffic now)
};
static_assert(sizeof(MeasureEntry) == 36 && alignof(MeasureEntry) == 1);

inline constexpr uint32_t kUnknownRtt = 0xffffffff;
inline constexpr uint32_t kUnknownLag = 0xffffffff;
inline constexpr uint32_t kMaxLagUs = 3600000000u;  // an hour: anything above is garbage
inline constexpr uint8_t kOverlapSteps = 200;     // overlap 0..200: 0..100% in half-percent steps
inline constexpr uint8_t kUnknownOverlap = 0xff;
inline constexpr uint8_t kMaxMeasureSource = 3;
inline constexpr uint64_t kMaxMeasuredRate = 1ull << 44;  // 17.6 TB/s: anything above is garbage

// A link as host-order values.
struct LinkMeasure {
  uint16_t from = 0;
  uint8_t source = 0;
  double bytes_per_s = 0;
  double probe_bytes_per_s = 0;
  double rtt_s = -1;      // < 0: unknown
  double rtt_trend = 1.0;
  double loss = 0;        // 0..1
  uint32_t windows = 0;
};

struct MeasureRow {
  uint16_t site = 0;
  uint32_t round = 0;
  double egress_peak = 0;  // bytes/s
  // Seconds from a round's result reaching the site's workers to their next update being
  // complete (compute plus the LAN hand-off); < 0: not measured.
  double update_lag_s = -1;
  // Of update_lag_s, the share from the update's first chunk complete to its last (0..1): how
  // much of the workers' compute a round's transfer can run behind; < 0: not measured.
  double overlap = -1;
  std::vector<LinkMeasure> links;
};

// Entries that fit one message of `max_bytes`.
constexpr size_t measure_entries_per_message(size_t max_bytes) {
  return max_bytes < sizeof(MeasureRowHeader) ? 0 : (max_bytes - sizeof(MeasureRowHeader)) / sizeof(MeasureEntry);
}

// Encodes `row` into one or more messages of at most `max_bytes` each (every part repeats the
// header with its own count). Values are clamped to their wire ranges.
std::vector<std::vector<uint8_t>> encode_measure_row(const MeasureRow& row, size_t max_bytes);

// Parses one message. `sites`: the job's site count; the reporting site and every link id
// must be below it, and no link may be the site itself.
Result<MeasureRow> parse_measure_row(std::span<const uint8_t> bytes, uint16_t sites);

}  // namespace sg::wire
