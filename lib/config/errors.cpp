#include "config/errors.h"

namespace sg::config {

std::string ConfigError::to_string() const {
  std::string s = file;
  if (line > 0) s += ":" + std::to_string(line) + ":" + std::to_string(column);
  s += ": ";
  if (!key_path.empty()) s += key_path + ": ";
  s += "expected " + expected;
  if (!found.empty()) s += ", found " + found;
  return s;
}

void ErrorList::add(int line0, int col0, std::string path, std::string expected, std::string found) {
  ConfigError e;
  e.file = file_;
  // yaml-cpp marks are 0-based and -1 when unknown.
  e.line = line0 >= 0 ? line0 + 1 : 0;
  e.column = col0 >= 0 ? col0 + 1 : 0;
  e.key_path = std::move(path);
  e.expected = std::move(expected);
  e.found = std::move(found);
  list_.push_back(std::move(e));
}

void ErrorList::add_at(const std::string& path, std::string expected, std::string found) {
  auto it = marks_.find(path);
  const auto [line0, col0] = it == marks_.end() ? std::pair<int, int>{-1, -1} : it->second;
  add(line0, col0, path, std::move(expected), std::move(found));
}

}  // namespace sg::config
