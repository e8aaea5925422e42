// Configuration problems, one per line: "FILE:LINE:COL: KEY.PATH: expected X, found Y".
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sg::config {

struct ConfigError {
  std::string file;
  int line = 0;    // 1-based; 0 when the problem has no single place (a missing section)
  int column = 0;  // 1-based
  std::string key_path;  // e.g. "peers[1].paths[0].port"
  std::string expected;
  std::string found;

  std::string to_string() const;
};

class ErrorList {
 public:
  explicit ErrorList(std::string file) : file_(std::move(file)) {}
  void add(int line0, int col0, std::string path, std::string expected, std::string found);
  const std::vector<ConfigError>& list() const { return list_; }
  bool empty() const { return list_.empty(); }
  const std::string& file() const { return file_; }

  // Positions of key paths seen while reading, so checks made after reading (cross references)
  // can still point at the line.
  void remember(const std::string& path, int line0, int col0) { marks_[path] = {line0, col0}; }
  void add_at(const std::string& path, std::string expected, std::string found);

 private:
  std::string file_;
  std::vector<ConfigError> list_;
  std::map<std::string, std::pair<int, int>> marks_;
};

}  // namespace sg::config
