// Fuzz the WAN emulator's profile reader: any bytes give a profile or positioned errors,
// never a crash, a hang or a profile that breaks its own invariants.
#include <cstdint>
#include <string>

#include "profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto r = sg::wanem::parse_profile(text, "fuzz.yaml");
  if (r.errors.empty()) {
    const auto& p = r.profile;
    if (p.sites < 2 || p.base.size() != static_cast<size_t>(p.sites) * p.sites) __builtin_trap();
    for (const auto& ph : p.phases)
      if (ph.specs.size() != p.base.size()) __builtin_trap();
    (void)p.at(0);
    (void)p.at(sg::kSecond * 3600);
  }
  return 0;
}
