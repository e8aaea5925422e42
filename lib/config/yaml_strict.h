// Strict reading on top of yaml-cpp. yaml-cpp alone keeps the last of two duplicate keys and
// lets a misspelt key fall back to a default silently; here both are errors with a position.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/config.h"
#include "config/errors.h"

namespace sg::config {

// Scans the raw event stream of `text` and reports every mapping key that occurs twice in the
// same mapping (yaml-cpp's node API cannot see them). Syntax errors are reported too.
// Returns false if the text is not well-formed YAML.
bool scan_duplicate_keys(const std::string& text, ErrorList& errors);

// What a node is, for "found ..." in messages.
std::string describe(const YAML::Node& node);

// Reads one mapping, remembering which keys were asked for so unknown ones become errors.
class MapReader {
 public:
  // A null/absent node reads as an empty mapping (all defaults); anything else not a map is an error.
  MapReader(const YAML::Node& node, std::string path, ErrorList& errors);
  ~MapReader();  // reports keys never asked for
  MapReader(const MapReader&) = delete;
  MapReader& operator=(const MapReader&) = delete;

  bool ok() const { return ok_; }
  bool has(const std::string& key);
  YAML::Node child(const std::string& key);  // marks the key as known
  std::string path_of(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  ErrorList& errors() { return errors_; }
  const YAML::Node& node() const { return node_; }
  void require(const std::string& key, const std::string& expected);

  // Each reader leaves `out` untouched when the key is absent; with required=true absence is an error.
  void integer(const std::string& key, int64_t min, int64_t max, auto& out, bool required = false) {
    int64_t v = 0;
    if (read_int(key, min, max, v, required)) out = static_cast<std::remove_reference_t<decltype(out)>>(v);
  }
  // For a key whose absence means "unset": `out` is set only when the key is present and valid.
  template <typename T>
  void integer_opt(const std::string& key, int64_t min, int64_t max, std::optional<T>& out) {
    int64_t v = 0;
    if (read_int(key, min, max, v, false)) out = static_cast<T>(v);
  }
  void number(const std::string& key, double min, double max, double& out, bool required = false);
  void boolean(const std::string& key, bool& out);
  void string(const std::string& key, std::string& out, bool required = false, size_t max_len = 255);
  void mac(const std::string& key, std::optional<MacAddr>& out);
  void ipv4(const std::string& key, Ipv4Addr& out, bool required = false);
  void ipv4_opt(const std::string& key, std::optional<Ipv4Addr>& out);
  // One of `names`; returns the index or -1 when absent or wrong.
  int choice(const std::string& key, const std::vector<std::string>& names);

 private:
  void note(const std::string& key);  // asked for (known), and told to the key observer
  bool read_int(const std::string& key, int64_t min, int64_t max, int64_t& out, bool required);
  // A number or boolean written as a quoted string ("1", "true") is an error: false then.
  bool unquoted(const YAML::Node& n, const std::string& key, const std::string& expected);
  bool scalar(const std::string& key, YAML::Node& n, const std::string& expected, bool required);

  YAML::Node node_;
  std::string path_;
  ErrorList& errors_;
  std::set<std::string> asked_;
  bool ok_ = true;
};

// Every key a MapReader asks for, as "section.key" paths ("peers[0].paths[1].id"), goes to
// this observer while one is set: how a test lists the keys the loader knows. Not for
// concurrent loads.
void set_key_observer(std::function<void(const std::string& key_path)> observer);

// Calls fn(node, "path[i]") for each item of a sequence; a non-sequence is an error, and so
// is an empty one when `if_empty` says what is expected instead.
void for_each_item(const YAML::Node& seq, const std::string& path, ErrorList& errors,
                   const std::function<void(const YAML::Node&, const std::string&)>& fn,
                   const char* if_empty = nullptr);

}  // namespace sg::config
