// Gateway::reload: SIGHUP's config reload (what may change live: config/reload.h).
#include <algorithm>
#include <string>

#include "config/reload.h"
#include "control/gateway.h"
#include "dataplane/log.h"

namespace sg::ctl {
namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

bool Gateway::reload() {
  const config::ReloadPlan p = config::plan_reload(config_text_, cfg_.source);
  if (!p.loaded.config) {
    SG_LOG(ERR, control, "%s: reload refused, the running config goes on (%zu problem%s):\n", cfg_.source.c_str(),
           p.loaded.errors.size(), p.loaded.errors.size() == 1 ? "" : "s");
    for (const auto& e : p.loaded.errors) SG_LOG(ERR, control, "  %s\n", e.to_string().c_str());
    return false;
  }
  if (!p.accepted()) {
    SG_LOG(ERR, control, "%s: reload refused, the running config goes on: %s change%s only with a restart "
                         "(a reload applies %s)\n",
           cfg_.source.c_str(), joined(p.restart_keys).c_str(), p.restart_keys.size() == 1 ? "s" : "",
           joined(config::live_keys()).c_str());
    return false;
  }
  const config::GatewayConfig& n = *p.loaded.config;
  // The engines take the job's values when they begin their next round; the controller its
  // rule at its next decision (a new policy then switches at a round boundary, agreed).
  for (size_t k = 0; k < stacks_.size() && k < n.jobs.size(); ++k) {
    for (auto& r : stacks_[k]->runners) r->set_live(n.jobs[k].rounds, n.jobs[k].round_timeout_ms);
    if (stacks_[k]->agent)
      stacks_[k]->agent->retune(n.topology.recompute_change, static_cast<Nanos>(n.topology.min_interval_ms) * kMilli);
  }
  stats_interval_ms_ = n.telemetry.stats_interval_ms;
  config_text_ = p.loaded.text;
  if (p.live_changes.empty())
    SG_LOG(INFO, control, "%s: reloaded, nothing changed\n", cfg_.source.c_str());
  else
    SG_LOG(INFO, control, "%s: reloaded: %s (job values from the next round each engine begins)\n",
           cfg_.source.c_str(), joined(p.live_changes).c_str());
  return true;
}

}  // namespace sg::ctl
