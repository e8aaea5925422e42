#include "config/yaml_strict.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include <charconv>
#include <cstdio>
#include <cmath>
#include <sstream>

namespace sg::config {
namespace {

// Tracks the mapping keys of every open mapping while yaml-cpp streams events.
class DuplicateKeyFinder final : public YAML::EventHandler {
 public:
  explicit DuplicateKeyFinder(ErrorList& errors) : errors_(errors) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { leaf(m, "~"); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override {
    // An alias as a key hides what the key is from this scan, so a duplicate could pass.
    if (!stack_.empty() && stack_.back().is_map && stack_.back().expect_key)
      errors_.add(m.line, m.column, stack_.back().path, "plain keys", "an alias (*name) used as a key");
    leaf(m, "*alias@" + std::to_string(m.pos));
  }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string& v) override { leaf(m, v); }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(false);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(true);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    bool is_map;
    bool expect_key = true;
    size_t index = 0;
    std::string path;
    std::string key;
    std::set<std::string> keys;
  };

  std::string child_path() const {
    if (stack_.empty()) return "";
    const Frame& f = stack_.back();
    if (!f.is_map) return f.path + "[" + std::to_string(f.index) + "]";
    if (f.expect_key) return f.path + ".<key>";
    return f.path.empty() ? f.key : f.path + "." + f.key;
  }

  void consumed() {
    if (stack_.empty()) return;
    Frame& f = stack_.back();
    if (f.is_map) {
      f.expect_key = !f.expect_key;
    } else {
      ++f.index;
    }
  }

  void leaf(const YAML::Mark& m, const std::string& v) {
    if (!stack_.empty() && stack_.back().is_map && stack_.back().expect_key) {
      Frame& f = stack_.back();
      if (!f.keys.insert(v).second) {
        const std::string where = f.path.empty() ? v : f.path + "." + v;
        errors_.add(m.line, m.column, where, "each key once per mapping", "a duplicate of key '" + v + "'");
      }
      f.key = v;
    }
    consumed();
  }

  void open(bool is_map) {
    Frame f{is_map};
    f.path = child_path();
    stack_.push_back(std::move(f));
  }

  void close() {
    if (!stack_.empty()) stack_.pop_back();
    consumed();
  }

  ErrorList& errors_;
  std::vector<Frame> stack_;
};

std::string quote(const std::string& s) { return "'" + s + "'"; }

}  // namespace

bool scan_duplicate_keys(const std::string& text, ErrorList& errors) {
  std::istringstream in(text);
  try {
    YAML::Parser parser(in);
    DuplicateKeyFinder finder(errors);
    // A config is one document. Never loop "while there are documents": on some malformed
    // streams (a stray ',') yaml-cpp 0.7 reports a new empty document forever without
    // consuming input (yaml-cpp issue #1040; found by config_fuzz).
    parser.HandleNextDocument(finder);
    if (parser.HandleNextDocument(finder)) {
      errors.add(-1, -1, "", "one YAML document", "a second document (or a stray ',', ']' or '}')");
      return false;
    }
  } catch (const YAML::DeepRecursion& e) {  // its message says only "bad file"
    errors.add(e.mark.line, e.mark.column, "", "YAML nested a few levels deep (a config needs five or six)",
               "nesting past yaml-cpp's limit of " + std::to_string(e.depth()) + " levels");
    return false;
  } catch (const YAML::Exception& e) {
    errors.add(e.mark.line, e.mark.column, "", "well-formed YAML", e.msg);
    return false;
  }
  return true;
}

std::string describe(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "nothing";
  if (n.IsMap()) return "a mapping";
  if (n.IsSequence()) return "a list";
  return quote(n.Scalar());
}

MapReader::MapReader(const YAML::Node& node, std::string path, ErrorList& errors)
    : node_(node), path_(std::move(path)), errors_(errors) {
  if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap()) {
    errors_.add(node_.Mark().line, node_.Mark().column, path_, "a mapping of keys", describe(node_));
    ok_ = false;
  }
}

MapReader::~MapReader() {
  if (!ok_ || !node_.IsDefined() || !node_.IsMap()) return;
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar()) {
      errors_.add(kv.first.Mark().line, kv.first.Mark().column, path_, "plain keys", describe(kv.first));
      continue;
    }
    const std::string k = kv.first.Scalar();
    if (!asked_.count(k)) {
      std::string known;
      for (const auto& a : asked_) known += (known.empty() ? "" : ", ") + a;
      errors_.add(kv.first.Mark().line, kv.first.Mark().column, path_of(k),
                  "one of the keys {" + known + "}", "unknown key " + quote(k));
    }
  }
}

namespace {
std::function<void(const std::string&)>& key_observer() {
  static std::function<void(const std::string&)> f;
  return f;
}
}  // namespace

void set_key_observer(std::function<void(const std::string&)> observer) { key_observer() = std::move(observer); }

void MapReader::note(const std::string& key) {
  if (asked_.insert(key).second && key_observer()) key_observer()(path_of(key));
}

bool MapReader::has(const std::string& key) {
  note(key);
  if (!ok_ || !node_.IsMap()) return false;
  const YAML::Node& cn = node_;
  return cn[key].IsDefined();
}

YAML::Node MapReader::child(const std::string& key) {
  note(key);
  if (!ok_ || !node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  // Const access: the non-const operator[] would insert the key.
  const YAML::Node& cn = node_;
  YAML::Node n = cn[key];
  // An absent key gives an "invalid" node whose Type() throws; hand out a plain undefined one.
  if (!n.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
  errors_.remember(path_of(key), n.Mark().line, n.Mark().column);
  return n;
}

void MapReader::require(const std::string& key, const std::string& expected) {
  if (!has(key)) {
    errors_.add(node_.Mark().line, node_.Mark().column, path_of(key), expected, "the key missing");
  }
}

bool MapReader::scalar(const std::string& key, YAML::Node& n, const std::string& expected, bool required) {
  if (!has(key)) {
    if (required) require(key, expected);
    return false;
  }
  n = child(key);
  if (!n.IsScalar()) {
    errors_.add(n.Mark().line, n.Mark().column, path_of(key), expected, describe(n));
    return false;
  }
  return true;
}

bool MapReader::unquoted(const YAML::Node& n, const std::string& key, const std::string& expected) {
  if (n.Tag() != "!") return true;  // yaml-cpp tags quoted scalars "!", plain ones "?"
  errors_.add(n.Mark().line, n.Mark().column, path_of(key), expected + " (unquoted)",
              "the quoted string " + quote(n.Scalar()));
  return false;
}

bool MapReader::read_int(const std::string& key, int64_t min, int64_t max, int64_t& out, bool required) {
  const std::string expected = "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  YAML::Node n;
  if (!scalar(key, n, expected, required) || !unquoted(n, key, expected)) return false;
  const std::string& s = n.Scalar();
  int64_t v = 0;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (b != e && *b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || b == e) {
    errors_.add(n.Mark().line, n.Mark().column, path_of(key), expected, quote(s));
    return false;
  }
  if (v < min || v > max) {
    errors_.add(n.Mark().line, n.Mark().column, path_of(key), expected, std::to_string(v));
    return false;
  }
  out = v;
  return true;
}

void MapReader::number(const std::string& key, double min, double max, double& out, bool required) {
  std::ostringstream exp;
  exp << "a number in [" << min << ", " << max << "]";
  YAML::Node n;
  if (!scalar(key, n, exp.str(), required) || !unquoted(n, key, exp.str())) return;
  const std::string& s = n.Scalar();
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty() || !std::isfinite(v)) {
    errors_.add(n.Mark().line, n.Mark().column, path_of(key), exp.str(), quote(s));
    return;
  }
  if (v < min || v > max) {
    errors_.add(n.Mark().line, n.Mark().column, path_of(key), exp.str(), s);
    return;
  }
  out = v;
}

void MapReader::boolean(const std::string& key, bool& out) {
  YAML::Node n;
  if (!scalar(key, n, "true or false", false) || !unquoted(n, key, "true or false")) return;
  const std::string& s = n.Scalar();
  if (s == "true") {
    out = true;
  } else if (s == "false") {
    out = false;
  } else {
    // yaml-cpp would also take yes/no/on/off; a config that means a boolean should say so.
    errors_.add(n.Mark().line, n.Mark().column, path_of(key), "true or false", quote(s));
  }
}

void MapReader::string(const std::string& key, std::string& out, bool required, size_t max_len) {
  const std::string expected = "a string of 1 to " + std::to_string(max_len) + " characters";
  YAML::Node n;
  if (!scalar(key, n, expected, required)) return;
  const std::string& s = n.Scalar();
  if (s.empty() || s.size() > max_len) {
    errors_.add(n.Mark().line, n.Mark().column, path_of(key), expected,
                s.empty() ? "an empty string" : std::to_string(s.size()) + " characters");
    return;
  }
  // The file's raw bytes were checked, but a quoted string's escapes ("\n", "\x1b", "\0")
  // decode to control characters: they would end up in logs, telemetry and DPDK's devargs.
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char found[64];
      std::snprintf(found, sizeof found, "the control character 0x%02x at offset %zu", c, i);
      errors_.add(n.Mark().line, n.Mark().column, path_of(key), expected + " without control characters", found);
      return;
    }
  }
  out = s;
}

void MapReader::mac(const std::string& key, std::optional<MacAddr>& out) {
  YAML::Node n;
  const std::string expected = "a MAC address like 02:00:00:00:00:01";
  if (!scalar(key, n, expected, false)) return;
  auto m = parse_mac(n.Scalar());
  if (!m) {
    errors_.add(n.Mark().line, n.Mark().column, path_of(key), expected, quote(n.Scalar()));
    return;
  }
  out = *m;
}

void MapReader::ipv4(const std::string& key, Ipv4Addr& out, bool required) {
  YAML::Node n;
  const std::string expected = "an IPv4 address like 10.0.0.1";
  if (!scalar(key, n, expected, required)) return;
  auto a = parse_ipv4(n.Scalar());
  if (!a) {
    errors_.add(n.Mark().line, n.Mark().column, path_of(key), expected, quote(n.Scalar()));
    return;
  }
  out = *a;
}

void MapReader::ipv4_opt(const std::string& key, std::optional<Ipv4Addr>& out) {
  if (!has(key)) return;
  Ipv4Addr a;
  const size_t before = errors_.list().size();
  ipv4(key, a, true);
  if (errors_.list().size() == before) out = a;
}

int MapReader::choice(const std::string& key, const std::vector<std::string>& names) {
  std::string expected = "one of";
  for (size_t i = 0; i < names.size(); ++i) expected += (i ? ", " : " ") + names[i];
  YAML::Node n;
  if (!scalar(key, n, expected, false)) return -1;
  for (size_t i = 0; i < names.size(); ++i)
    if (n.Scalar() == names[i]) return static_cast<int>(i);
  errors_.add(n.Mark().line, n.Mark().column, path_of(key), expected, quote(n.Scalar()));
  return -1;
}

void for_each_item(const YAML::Node& seq, const std::string& path, ErrorList& errors,
                   const std::function<void(const YAML::Node&, const std::string&)>& fn, const char* if_empty) {
  if (!seq.IsDefined() || seq.IsNull()) return;
  if (!seq.IsSequence()) {
    errors.add(seq.Mark().line, seq.Mark().column, path, "a list", describe(seq));
    return;
  }
  if (if_empty && seq.size() == 0) {
    errors.add(seq.Mark().line, seq.Mark().column, path, if_empty, "an empty list");
    return;
  }
  for (size_t i = 0; i < seq.size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    errors.remember(item_path, seq[i].Mark().line, seq[i].Mark().column);
    fn(seq[i], item_path);
  }
}

}  // namespace sg::config
