// MAC and IPv4 text forms. Strict: exactly six two-digit hex groups; four decimal octets
// without leading zeros (so "010.0.0.1" is not silently read as octal or decimal).
#include <charconv>
#include <cstdio>

#include "config/config.h"

namespace sg::config {

std::optional<MacAddr> parse_mac(const std::string& s) {
  if (s.size() != 17) return std::nullopt;
  MacAddr m;
  for (int i = 0; i < 6; ++i) {
    const char* p = s.data() + i * 3;
    if (i < 5 && p[2] != ':') return std::nullopt;
    unsigned v = 0;
    auto [end, ec] = std::from_chars(p, p + 2, v, 16);
    if (ec != std::errc() || end != p + 2) return std::nullopt;
    m.bytes[i] = static_cast<uint8_t>(v);
  }
  return m;
}

std::optional<Ipv4Addr> parse_ipv4(const std::string& s) {
  uint32_t addr = 0;
  const char* p = s.data();
  const char* e = s.data() + s.size();
  for (int i = 0; i < 4; ++i) {
    if (p == e || *p < '0' || *p > '9') return std::nullopt;
    if (*p == '0' && p + 1 != e && p[1] >= '0' && p[1] <= '9') return std::nullopt;
    unsigned v = 0;
    auto [q, ec] = std::from_chars(p, e, v);
    if (ec != std::errc() || v > 255) return std::nullopt;
    addr = (addr << 8) | v;
    p = q;
    if (i < 3) {
      if (p == e || *p != '.') return std::nullopt;
      ++p;
    }
  }
  if (p != e) return std::nullopt;
  return Ipv4Addr{addr};
}

std::string format_mac(const MacAddr& m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m.bytes[0], m.bytes[1], m.bytes[2],
                m.bytes[3], m.bytes[4], m.bytes[5]);
  return buf;
}

std::string format_ipv4(const Ipv4Addr& a) {
  const uint32_t v = a.host_order;
  return std::to_string(v >> 24) + "." + std::to_string((v >> 16) & 255) + "." + std::to_string((v >> 8) & 255) +
         "." + std::to_string(v & 255);
}

const PortConfig* GatewayConfig::find_port(const std::string& name) const {
  for (const auto& p : ports)
    if (p.name == name) return &p;
  return nullptr;
}

const PeerConfig* GatewayConfig::find_peer(uint16_t id) const {
  for (const auto& p : peers)
    if (p.id == id) return &p;
  return nullptr;
}

}  // namespace sg::config
