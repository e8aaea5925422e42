// Fuzz the config loader with arbitrary text: it must return a config or errors, never crash,
// hang or throw; and a config it accepts must pass validation again.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config/load.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;  // deeper YAML only explores yaml-cpp's recursion limits
  const std::string text(reinterpret_cast<const char*>(data), size);
  sg::config::LoadResult r = sg::config::load_config_text(text, "fuzz.yaml");
  if (r.config.has_value() == !r.errors.empty()) std::abort();  // exactly one of the two
  if (r.config) {
    sg::config::ErrorList again("fuzz.yaml");
    sg::config::validate(*r.config, again);
    if (!again.empty()) std::abort();
  }
  for (const auto& e : r.errors)
    if (e.to_string().empty()) std::abort();
  return 0;
}
