// Loading a gateway config: YAML text -> GatewayConfig, strictly. Every problem found is
// reported (not just the first), one ConfigError each, with file, line:column and key path.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/errors.h"
#include "wire/ipv4.h"
#include "wire/ltp_header.h"
#include "wire/udp.h"

namespace sg::config {

struct LoadResult {
  std::optional<GatewayConfig> config;  // set only when errors is empty
  std::vector<ConfigError> errors;
  std::string text;  // load_config_file: the file as read (a reload compares it with the next)
};

// `source` names the text in messages (a file path, or "<string>").
LoadResult load_config_text(const std::string& text, const std::string& source);
LoadResult load_config_file(const std::string& path);

// Bytes every chunk's packet carries besides the chunk, inside the MTU (which counts from the
// IP header): IPv4 + UDP + the LTP DATA header + the sealed trailer, from the wire structs.
constexpr uint32_t chunk_overhead_bytes() {
  return sizeof(wire::Ipv4Header) + sizeof(wire::UdpHeader) + sizeof(wire::DataHeader) + wire::kAuthTrailerLen;
}
// The largest chunk_bytes (a multiple of 4) that fits `mtu`.
uint32_t max_chunk_bytes(uint32_t mtu);

// A path's UDP source port: its udp_src_port, else transport.udp_port + 1 + its id (distinct
// per path, so ECMP spreads them). validate() refuses a default past 65535.
inline uint32_t udp_src_port(const GatewayConfig& cfg, const PathConfig& p) {
  return p.udp_src_port ? *p.udp_src_port : cfg.transport.udp_port + 1u + p.id;
}

// Checks across sections (unknown peers and ports, duplicate ids, MTU vs chunk size...).
// Called by the loaders; exposed for configs built in code.
void validate(const GatewayConfig& cfg, ErrorList& errors);

}  // namespace sg::config
