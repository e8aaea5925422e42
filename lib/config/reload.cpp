#include "config/reload.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>

namespace sg::config {
namespace {

YAML::Node parse(const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception&) {
    return YAML::Node();
  }
}

// Absent (nullptr, undefined, or `key:` with no value) is the same as unset.
YAML::NodeType::value kind(const YAML::Node* n) {
  if (!n || !n->IsDefined() || n->IsNull()) return YAML::NodeType::Undefined;
  return n->Type();
}

std::map<std::string, YAML::Node> entries(const YAML::Node* n) {
  std::map<std::string, YAML::Node> m;
  if (kind(n) == YAML::NodeType::Map)
    for (const auto& kv : *n) m[kv.first.IsScalar() ? kv.first.Scalar() : "?"] = kv.second;
  return m;
}

void diff(const YAML::Node* a, const YAML::Node* b, const std::string& path, std::vector<std::string>& out) {
  const auto ka = kind(a), kb = kind(b);
  const bool absent_a = ka == YAML::NodeType::Undefined, absent_b = kb == YAML::NodeType::Undefined;
  if (absent_a && absent_b) return;
  // A section or list added or removed is compared key by key, so that live keys stay live.
  const auto shape = absent_a ? kb : ka;
  const bool nested = shape == YAML::NodeType::Map || shape == YAML::NodeType::Sequence;
  if (ka != kb && !((absent_a || absent_b) && nested)) {
    out.push_back(path);
    return;
  }
  if (shape == YAML::NodeType::Map) {
    const auto ea = entries(a), eb = entries(b);
    std::map<std::string, int> keys;
    for (const auto& kv : ea) keys[kv.first] = 1;
    for (const auto& kv : eb) keys[kv.first] = 1;
    for (const auto& kv : keys) {
      const auto ia = ea.find(kv.first), ib = eb.find(kv.first);
      diff(ia == ea.end() ? nullptr : &ia->second, ib == eb.end() ? nullptr : &ib->second,
           path.empty() ? kv.first : path + "." + kv.first, out);
    }
  } else if (shape == YAML::NodeType::Sequence) {
    const size_t na = absent_a ? 0 : a->size(), nb = absent_b ? 0 : b->size();
    for (size_t i = 0; i < std::max(na, nb); ++i) {
      const YAML::Node ia = i < na ? (*a)[i] : YAML::Node(), ib = i < nb ? (*b)[i] : YAML::Node();
      diff(i < na ? &ia : nullptr, i < nb ? &ib : nullptr, path + "[" + std::to_string(i) + "]", out);
    }
  } else if (a->Scalar() != b->Scalar()) {
    out.push_back(path);
  }
}

}  // namespace

std::vector<std::string> changed_keys(const std::string& old_text, const std::string& new_text) {
  std::vector<std::string> out;
  const YAML::Node a = parse(old_text), b = parse(new_text);
  diff(&a, &b, "", out);
  return out;
}

ReloadPlan plan_reload(const std::string& running_text, const std::string& path) {
  ReloadPlan p;
  p.loaded = load_config_file(path);
  if (!p.loaded.config) return p;
  const auto& live = live_keys();
  for (auto& k : changed_keys(running_text, p.loaded.text)) {
    if (std::find(live.begin(), live.end(), k) != live.end())
      p.live_changes.push_back(std::move(k));
    else
      p.restart_keys.push_back(std::move(k));
  }
  return p;
}

}  // namespace sg::config
