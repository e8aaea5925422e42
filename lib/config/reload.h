// Reloading a running gateway's config (SIGHUP): what the new file changes, and whether the
// gateway can take it without a restart.
//
// A reload is all or nothing. The new file must load without errors, and every key it
// changes must be live -- a key whose new value the running gateway applies at the next
// round boundary, on this site alone, without new memory, ports or keys:
//   job.rounds                  the job ends after this round (if already past: at the next boundary)
//   job.round_timeout_ms        from the next round each engine begins
//   topology.recompute_change   the controller's replan rule, from its next decision (a new
//   topology.min_interval_ms    policy still switches at a round boundary, agreed by every site)
//   telemetry.stats_interval_ms the console counter line
// Anything else (ports, peers, keys, sizes...) changes only with a restart: the reload is
// refused with the keys named, and the running config goes on, as it does for a bad file.
//
// Changes are found on the YAML trees, key by key ("ports[0].vdev"), so that a key written
// out with its default value counts as a change too: a reload applies what the file says.
#pragma once

#include <string>
#include <vector>

#include "config/load.h"

namespace sg::config {

inline const std::vector<std::string>& live_keys() {
  static const std::vector<std::string> k = {"job.rounds", "job.round_timeout_ms", "topology.recompute_change",
                                             "topology.min_interval_ms", "telemetry.stats_interval_ms"};
  return k;
}

// Key paths whose values differ between two YAML texts: "job.rounds", "ports[1].mtu", or a
// whole section or list item added or removed. A text that is not YAML counts as empty.
std::vector<std::string> changed_keys(const std::string& old_text, const std::string& new_text);

struct ReloadPlan {
  LoadResult loaded;                      // the new file: its errors, or its config and text
  std::vector<std::string> restart_keys;  // changed keys that need a restart
  std::vector<std::string> live_changes;  // changed keys the gateway applies
  bool accepted() const { return loaded.config.has_value() && restart_keys.empty(); }
};

// Loads `path` again and compares it with `running_text`, the text of the config in force.
ReloadPlan plan_reload(const std::string& running_text, const std::string& path);

}  // namespace sg::config
