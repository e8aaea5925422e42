// A WAN profile: what every directed site pair does, and how that changes over time. YAML,
// read strictly (unknown keys, wrong types and out-of-range values are positioned errors):
//
//   sites: 3                               # pairs are between sites 1..sites
//   source: "where the RTTs come from"     # free text, for the reader
//   default: {delay_ms: 10, rate_mbit: 1000}   # every directed pair starts from this
//   pairs:                                 # then per pair (from -> to) or both ways (between)
//     - {from: 1, to: 2, delay_ms: 20}
//     - {between: [1, 3], loss: 0.001}
//   schedule:                              # optional: phases that override pairs from at_s on
//     repeat_s: 30                         # optional: the phases repeat with this period
//     phases:
//       - {at_s: 10, pairs: [{between: [1, 2], rate_mbit: 50}]}
//
// Pair keys: delay_ms (one way), jitter_ms, loss, burst {p_enter, p_exit, loss_good,
// loss_bad} (Gilbert-Elliott), reorder, reorder_ms, duplicate, rate_mbit (0: no limit),
// queue_kb (drop-tail), blackholes [{at_s, for_s}]. A phase's pairs start from the base
// (default + pairs), not from the previous phase.
#pragma once

#include <string>
#include <vector>

#include "config/errors.h"
#include "impairment.h"

namespace sg::wanem {

struct Phase {
  Nanos at = 0;
  std::vector<PairSpec> specs;  // every pair, [from0 * sites + to0]
};

struct Profile {
  int sites = 0;
  std::string source;
  std::vector<PairSpec> base;  // [from0 * sites + to0]
  std::vector<Phase> phases;   // by at, ascending
  Nanos repeat = 0;            // 0: phases once

  // The specs in force `since` the start (base before the first phase).
  const std::vector<PairSpec>& at(Nanos since) const;
  // The smallest one-way delay less jitter of any pair between two sites in any phase.
  Nanos min_delay() const;
};

struct ProfileResult {
  Profile profile;
  std::vector<config::ConfigError> errors;  // empty: the profile is good
};

ProfileResult parse_profile(const std::string& text, const std::string& source_name);
ProfileResult load_profile(const std::string& path);

}  // namespace sg::wanem
