// Config loader: the shipped examples load, and each kind of bad input is rejected with a
// message that names the place, the key, what was expected and what was found.
#include <gtest/gtest.h>

#include <algorithm>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "config/load.h"
#include "config/yaml_strict.h"

namespace sg::config {
namespace {

const char* kMinimal = R"(site:
  id: 1
  name: a
ports:
  - name: p0
    vdev: net_ring0
    ipv4: 10.0.0.1
peers:
  - id: 2
    name: b
    address: 10.0.0.2
)";

// Configs with peers name a key file (or say plain); tests of other sections append one at
// the end, where it moves no line number they check.
LoadResult load_keyed(const std::string& text, const std::string& source) {
  if (text.find("peers:") == std::string::npos || text.find("security:") != std::string::npos ||
      text.find('\0') != std::string::npos)
    return load_config_text(text, source);
  return load_config_text(text + "\nsecurity: {key_file: k.key}\n", source);
}

std::string all_errors(const LoadResult& r) {
  std::string s;
  for (const auto& e : r.errors) s += e.to_string() + "\n";
  return s;
}

// Loads text that must fail and returns the single error it must produce.
ConfigError one_error(const std::string& text) {
  LoadResult r = load_keyed(text, "t.yaml");
  EXPECT_FALSE(r.config.has_value());
  EXPECT_EQ(r.errors.size(), 1u) << all_errors(r);
  return r.errors.empty() ? ConfigError{} : r.errors.front();
}

TEST(ConfigExamples, EveryShippedExampleLoads) {
  for (const char* f : {"config/testbed/site-a.yaml", "config/testbed/site-b.yaml", "config/testbed/site-c.yaml",
                        "config/examples/mlx5-deployment.yaml", "config/examples/single-ring.yaml"}) {
    LoadResult r = load_config_file(std::string(SG_SOURCE_ROOT) + "/" + f);
    EXPECT_TRUE(r.config.has_value()) << f << "\n" << all_errors(r);
  }
}

// scripts/testbed copies these sections into every gateway config it writes, and the
// simulator's check against the testbed loads them the same way: they must be valid sections
// of a gateway config, and only the four the script's --config-extra may replace.
TEST(ConfigExamples, TestbedDefaultsAreGatewaySections) {
  const std::string path = std::string(SG_SOURCE_ROOT) + "/config/testbed/defaults/gateway.yaml";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const YAML::Node root = YAML::Load(text);
  for (const auto& kv : root) {
    const std::string k = kv.first.as<std::string>();
    EXPECT_TRUE(k == "transport" || k == "dataplane" || k == "topology" || k == "compression") << k;
  }
  const LoadResult r = load_config_text(
      "site: {id: 1, name: a}\nports:\n  - {name: wan, vdev: net_null0, ipv4: 10.99.0.1}\n" + text, path);
  ASSERT_TRUE(r.config) << all_errors(r);
  EXPECT_EQ(r.config->transport.link_share, LinkShareMode::kOn) << "not the default: the file is read";
  EXPECT_TRUE(r.config->topology.probes);
  EXPECT_EQ(r.config->compression.mode, CompressionMode::kOff) << "the testbed's workers check exact means";
}

TEST(ConfigExamples, DeploymentValuesAreRead) {
  LoadResult r = load_config_file(std::string(SG_SOURCE_ROOT) + "/config/examples/mlx5-deployment.yaml");
  ASSERT_TRUE(r.config) << all_errors(r);
  const GatewayConfig& c = *r.config;
  EXPECT_EQ(c.site.id, 11);
  ASSERT_EQ(c.ports.size(), 1u);
  EXPECT_EQ(c.ports[0].pci, "0000:3b:00.0");
  EXPECT_EQ(c.ports[0].device_string(), "0000:3b:00.0,txq_inline_max=128,mprq_en=1");
  EXPECT_EQ(c.ports[0].rx_queues, 4);
  EXPECT_EQ(c.ports[0].vlan.value_or(0), 210);
  EXPECT_EQ(format_ipv4(*c.ports[0].gateway), "198.51.100.1");
  ASSERT_EQ(c.peers.size(), 3u);
  EXPECT_EQ(c.peers[1].paths[1].via.value_or(0), 12);
  EXPECT_EQ(c.peers[0].paths[1].udp_src_port.value_or(0), 41001);
  // A peer without paths gets one direct path on the first port; its UDP port defaults.
  ASSERT_EQ(c.peers[2].paths.size(), 1u);
  EXPECT_EQ(c.peers[2].paths[0].port, "wan0");
  EXPECT_EQ(c.peers[2].udp_port, 7400);
  EXPECT_EQ(c.transport.chunk_bytes, 8192u);
  EXPECT_DOUBLE_EQ(c.transport.early_close.min_fraction, 0.98);
  EXPECT_EQ(c.compression.codec, CodecId::kTopK);
  EXPECT_EQ(c.compression.mode, CompressionMode::kAdaptive);
  EXPECT_EQ(c.topology.shards, 8);
  EXPECT_EQ(c.dataplane.burst, 64);
}

TEST(ConfigExamples, MinimalGetsDefaults) {
  LoadResult r = load_keyed(kMinimal, "m.yaml");
  ASSERT_TRUE(r.config) << all_errors(r);
  EXPECT_EQ(r.config->transport.udp_port, 7400);
  EXPECT_EQ(r.config->ports[0].rx_queues, 1);
  EXPECT_TRUE(r.config->transport.early_close.enabled);
  EXPECT_EQ(r.config->topology.planner, Planner::kFapt);
}

TEST(ConfigErrors, UnknownKeyIsNamedWithPosition) {
  std::string t = kMinimal;
  t += "transport:\n  chunk_byte: 1024\n";  // misspelt chunk_bytes
  ConfigError e = one_error(t);
  EXPECT_EQ(e.line, 13);
  EXPECT_EQ(e.column, 3);
  EXPECT_EQ(e.key_path, "transport.chunk_byte");
  EXPECT_NE(e.found.find("unknown key 'chunk_byte'"), std::string::npos);
  EXPECT_NE(e.expected.find("chunk_bytes"), std::string::npos) << "the message lists the keys that exist";
  EXPECT_EQ(e.to_string().rfind("t.yaml:13:3: transport.chunk_byte: expected one of the keys {", 0), 0u) << e.to_string();
}

TEST(ConfigErrors, UnknownSectionIsAnError) {
  std::string t = kMinimal;
  t += "telemtry:\n  enabled: true\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "telemtry");
  EXPECT_EQ(e.line, 12);
}

TEST(ConfigErrors, DuplicateKeyIsAnError) {
  std::string t = kMinimal;
  t += "transport:\n  udp_port: 7400\n  udp_port: 7500\n";
  LoadResult r = load_keyed(t, "t.yaml");
  ASSERT_FALSE(r.config);
  ASSERT_GE(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].key_path, "transport.udp_port");
  EXPECT_EQ(r.errors[0].line, 14);
  EXPECT_NE(r.errors[0].found.find("duplicate"), std::string::npos);
}

TEST(ConfigErrors, DuplicateKeyInsideListItem) {
  std::string t = kMinimal;
  t += "    name: c\n";  // second 'name' in peers[0]
  LoadResult r = load_keyed(t, "t.yaml");
  ASSERT_FALSE(r.config);
  ASSERT_GE(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].key_path, "peers[0].name");
}

TEST(ConfigErrors, WrongTypeSaysWhatWasFound) {
  std::string t = kMinimal;
  t += "transport:\n  udp_port: seven\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "transport.udp_port");
  EXPECT_EQ(e.expected, "an integer in [1, 65535]");
  EXPECT_EQ(e.found, "'seven'");
  EXPECT_EQ(e.line, 13);
  EXPECT_EQ(e.column, 13);
}

TEST(ConfigErrors, MappingWhereScalarExpected) {
  std::string t = kMinimal;
  t += "transport:\n  udp_port: {a: 1}\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.found, "a mapping");
}

TEST(ConfigErrors, OutOfRange) {
  std::string t = kMinimal;
  t += "transport:\n  max_loss_fraction: 0.9\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "transport.max_loss_fraction");
  EXPECT_EQ(e.found, "0.9");
  EXPECT_NE(e.expected.find("[0, 0.5]"), std::string::npos);
}

TEST(ConfigErrors, BadEnumListsChoices) {
  std::string t = kMinimal;
  t += "topology:\n  planner: mst\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.expected, "one of fapt, star, blind_tree, netstorm_rule");
  EXPECT_EQ(e.found, "'mst'");
}

TEST(ConfigErrors, RingIsNotAGatewayPlanner) {
  // Ring all-reduce is not a tree: refused when the file is checked, not when the gateway starts.
  std::string t = kMinimal;
  t += "topology:\n  planner: ring\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "topology.planner");
  EXPECT_EQ(e.found, "'ring'");
}

TEST(ConfigErrors, BooleansMustBeTrueOrFalse) {
  std::string t = kMinimal;
  t += "topology:\n  multipath: yes\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.expected, "true or false");
}

TEST(ConfigErrors, NumbersAndBooleansWrittenAsQuotedStringsAreRefused) {
  for (const std::string line : {"transport:\n  udp_port: \"7400\"\n", "transport:\n  max_loss_fraction: '0.1'\n",
                                   "topology:\n  multipath: \"true\"\n"}) {
    ConfigError e = one_error(kMinimal + line);
    EXPECT_NE(e.expected.find("(unquoted)"), std::string::npos) << e.to_string();
    EXPECT_NE(e.found.find("quoted string"), std::string::npos) << e.to_string();
  }
}

TEST(ConfigErrors, ControlCharactersFromEscapesAreRefused) {
  // The raw file is clean text; the escapes decode to a newline and a NUL.
  std::string t = R"(site: {id: 1, name: "a\nb"}
ports:
  - {name: "p\0", vdev: net_ring0, ipv4: 10.0.0.1}
)";
  LoadResult r = load_config_text(t, "t.yaml");
  ASSERT_FALSE(r.config);
  ASSERT_EQ(r.errors.size(), 2u) << all_errors(r);
  EXPECT_EQ(r.errors[0].key_path, "site.name");
  EXPECT_NE(r.errors[0].found.find("control character 0x0a"), std::string::npos) << all_errors(r);
  EXPECT_EQ(r.errors[1].key_path, "ports[0].name");
  EXPECT_NE(r.errors[1].found.find("0x00"), std::string::npos) << all_errors(r);
}

TEST(ConfigErrors, AnAliasAsAKeyIsRefused) {
  // With an alias for a key the duplicate check cannot see the key: this one repeats
  // stats_interval_ms, and yaml-cpp would keep the first value unchecked.
  std::string t = kMinimal;
  t += "telemetry: {&k stats_interval_ms : 5, *k : -1}\n";
  LoadResult r = load_keyed(t, "t.yaml");
  ASSERT_FALSE(r.config);
  ASSERT_GE(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].found, "an alias (*name) used as a key") << all_errors(r);
  EXPECT_EQ(r.errors[0].key_path, "telemetry");
}

TEST(ConfigErrors, SiteIdsStopWhereWorkerNodeIdsBegin) {
  // Node ids from 32768 are a site's workers' (kWorkerNodeBase): a gateway there would be
  // taken for a worker by its peers.
  std::string t = kMinimal;
  t.replace(t.find("id: 2"), 5, "id: 32768");
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "peers[0].id");
  EXPECT_EQ(e.expected, "an integer in [1, 32767]");
  t = kMinimal;
  t.replace(t.find("id: 1"), 5, "id: 40000");
  EXPECT_EQ(one_error(t).key_path, "site.id");
}

TEST(ConfigErrors, EmptyListsOfPathsOrJobsAreRefused) {
  std::string t = kMinimal;
  t += "    paths: []\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "peers[0].paths");
  EXPECT_EQ(e.found, "an empty list");
  t = kMinimal;
  t += "jobs: []\n";
  e = one_error(t);
  EXPECT_EQ(e.key_path, "jobs");
  EXPECT_EQ(e.found, "an empty list");
}

TEST(ConfigErrors, ADefaultSourcePortPast65535IsRefused) {
  std::string t = kMinimal;
  t += "    paths: [{id: 0, port: p0}, {id: 3, port: p0, udp_src_port: 9000}]\ntransport: {udp_port: 65535}\n";
  ConfigError e = one_error(t);  // path 3 has its own port; path 0's default would be 0
  EXPECT_EQ(e.key_path, "transport.udp_port");
  EXPECT_NE(e.expected.find("peers[0].paths[0]"), std::string::npos) << e.to_string();
  t = kMinimal;
  t += "transport: {udp_port: 65534}\n";  // the implicit direct path 0: 65535
  EXPECT_TRUE(load_keyed(t, "t.yaml").config.has_value());
}

TEST(ConfigErrors, MaxChunksPerTransferCountsWholeChunksOfTheLargestTransfer) {
  // Exactly the limit: 4 chunks of 64 B. One byte more is a fifth chunk.
  std::string t = kMinimal;
  t += "transport: {chunk_bytes: 64, max_chunks_per_transfer: 4}\njob: {model_bytes: 256}\n";
  EXPECT_TRUE(load_keyed(t, "t.yaml").config.has_value()) << all_errors(load_keyed(t, "t.yaml"));
  t = kMinimal;
  t += "transport: {chunk_bytes: 64, max_chunks_per_transfer: 4}\njob: {model_bytes: 260}\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "job.model_bytes");
  EXPECT_NE(e.found.find("5 chunks"), std::string::npos) << e.to_string();
  // The workers' pushes are the whole gradient in their own (smaller) chunks.
  t = kMinimal;
  t += "transport: {chunk_bytes: 128, max_chunks_per_transfer: 4}\n"
       "job: {model_bytes: 512, workers: 1, worker_chunk_bytes: 64}\n";
  e = one_error(t);
  EXPECT_NE(e.expected.find("chunks of 64 B"), std::string::npos) << e.to_string();
}

TEST(ConfigErrors, AMempoolCacheLargerThanDpdkAllowsIsRefused) {
  ConfigError e = one_error(std::string(kMinimal) + "dataplane: {mbufs: 300}\n");  // default cache 256
  EXPECT_EQ(e.key_path, "dataplane.mbuf_cache");
  EXPECT_NE(e.expected.find("at most dataplane.mbufs / 1.5 (200"), std::string::npos) << e.to_string();
  EXPECT_TRUE(load_keyed(std::string(kMinimal) + "dataplane: {mbufs: 300, mbuf_cache: 200}\n", "t").config);
}

TEST(ConfigErrors, NestingPastTheParsersLimitSaysSo) {
  std::string t = "site: ";
  for (int i = 0; i < 3000; ++i) t += "{a: ";
  ConfigError e = one_error(t);
  EXPECT_NE(e.expected.find("nested a few levels deep"), std::string::npos) << e.to_string();
  EXPECT_NE(e.found.find("levels"), std::string::npos) << e.to_string();
}

TEST(ConfigErrors, APciAddressMustLookLikeOne) {
  const std::string head = "site: {id: 1, name: a}\nports:\n  - {name: p, pci: ";
  for (const char* good : {"\"0000:3b:00.0\"", "\"3b:00.7\"", "\"ffff:ff:1f.0\""})
    EXPECT_TRUE(load_config_text(head + good + ", ipv4: 10.0.0.1}\n", "t").config) << good;
  for (const char* bad : {"zzz", "\"0000:3b:00\"", "\"3b:00.8\"", "\"000:3b:00.0\"", "\"0000-3b:00.0\""}) {
    LoadResult r = load_config_text(head + bad + ", ipv4: 10.0.0.1}\n", "t");
    ASSERT_EQ(r.errors.size(), 1u) << bad << "\n" << all_errors(r);
    EXPECT_EQ(r.errors[0].key_path, "ports[0].pci");
  }
}

TEST(ConfigErrors, BadAddresses) {
  std::string t = std::string(kMinimal);
  t.replace(t.find("10.0.0.2"), 8, "10.0.0.256");
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "peers[0].address");
  EXPECT_EQ(e.found, "'10.0.0.256'");
  for (const char* bad : {"010.0.0.2", "10.0.0", "10.0.0.2.1", "10.0.0.2 ", "a.b.c.d"}) {
    EXPECT_FALSE(parse_ipv4(bad)) << bad;
  }
  EXPECT_FALSE(parse_mac("02:00:00:00:00"));
  EXPECT_FALSE(parse_mac("02-00-00-00-00-01"));
  EXPECT_TRUE(parse_mac("02:aB:00:00:00:01"));
}

TEST(ConfigErrors, UnknownPeerInVia) {
  std::string t = kMinimal;
  t += "    paths:\n      - {id: 0, port: p0, via: 9}\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "peers[0].paths[0].via");
  EXPECT_EQ(e.found, "unknown peer 9");
  EXPECT_EQ(e.line, 13);
}

TEST(ConfigErrors, UnknownPortInPath) {
  std::string t = kMinimal;
  t += "    paths:\n      - {id: 0, port: wan9}\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "peers[0].paths[0].port");
  EXPECT_EQ(e.found, "'wan9'");
  EXPECT_NE(e.expected.find("p0"), std::string::npos);
}

TEST(ConfigErrors, DuplicateSiteIds) {
  std::string t = kMinimal;
  t += "  - id: 2\n    name: c\n    address: 10.0.0.3\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "peers[1].id");
  EXPECT_NE(e.found.find("second peer with id 2"), std::string::npos);
}

TEST(ConfigErrors, PeerWithOwnSiteId) {
  std::string t = kMinimal;
  t.replace(t.find("  - id: 2"), 9, "  - id: 1");
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "peers[0].id");
}

TEST(ConfigErrors, ChunkMustFitMtu) {
  std::string t = kMinimal;
  t += "transport:\n  chunk_bytes: 8192\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "transport.chunk_bytes");
  EXPECT_NE(e.expected.find("mtu 1500"), std::string::npos);
  EXPECT_EQ(e.line, 13);
}

TEST(ConfigErrors, WorkerChunkMustFitTheLargestMtu) {
  std::string t = kMinimal;
  t += "job:\n  model_bytes: 4096\n  worker_chunk_bytes: 8192\n";
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "job.worker_chunk_bytes");
  EXPECT_NE(e.expected.find("mtu 1500"), std::string::npos);

  // A jumbo port carries it; the WAN chunk stays at its own size.
  std::string ok = kMinimal;
  ok.replace(ok.find("    ipv4: 10.0.0.1\n"), 19, "    ipv4: 10.0.0.1\n    mtu: 9000\n");
  ok += "job:\n  model_bytes: 4096\n  worker_chunk_bytes: 8192\n";
  LoadResult r = load_keyed(ok, "t.yaml");
  ASSERT_TRUE(r.config) << all_errors(r);
  EXPECT_EQ(worker_chunk_bytes(*r.config), 8192u);
  EXPECT_EQ(r.config->transport.chunk_bytes, 1344u);

  std::string odd = kMinimal;
  odd += "job:\n  worker_chunk_bytes: 1001\n";
  EXPECT_EQ(one_error(odd).key_path, "job.worker_chunk_bytes");
}

TEST(ConfigErrors, PortNeedsExactlyOneDevice) {
  std::string t = kMinimal;
  t.replace(t.find("    vdev: net_ring0\n"), 20, "");
  ConfigError e = one_error(t);
  EXPECT_EQ(e.key_path, "ports[0]");
  EXPECT_EQ(e.found, "neither");
}

TEST(ConfigErrors, MissingRequiredSection) {
  ConfigError e = one_error("ports:\n  - {name: p, vdev: net_ring0, ipv4: 10.0.0.1}\n");
  EXPECT_EQ(e.key_path, "site");
}

TEST(ConfigErrors, SyntaxErrorHasPosition) {
  ConfigError e = one_error("site:\n  id: [1, 2\n");
  EXPECT_GT(e.line, 0);
  EXPECT_EQ(e.expected, "well-formed YAML");
}

TEST(ConfigErrors, NotAMappingAtTop) {
  ConfigError e = one_error("- 1\n- 2\n");
  EXPECT_EQ(e.found, "a list");
}

TEST(ConfigErrors, EveryProblemIsReportedNotJustTheFirst) {
  std::string t = kMinimal;
  t += "transport:\n  udp_port: 0\n  chunk_bytes: x\ntopology:\n  shards: 0\n";
  LoadResult r = load_keyed(t, "t.yaml");
  EXPECT_EQ(r.errors.size(), 3u) << all_errors(r);
}

TEST(ConfigErrors, BinaryInputIsRefusedBeforeParsing) {
  // The input config_fuzz found making yaml-cpp spin: NUL and control bytes.
  const std::string bin("\0\0\0,&a 7*\x19" "a\n", 12);
  ConfigError e = one_error(bin);
  EXPECT_EQ(e.expected, "a UTF-8 text file");
  EXPECT_EQ(e.found, "the control byte 0x00");
  ConfigError e2 = one_error("site:\n  id: 1\x01\n");
  EXPECT_EQ(e2.line, 2);
  EXPECT_EQ(e2.column, 8);
  // The second spinning input: an anchor name with an invalid UTF-8 byte.
  ConfigError e3 = one_error("&\xff, i*a]\n");
  EXPECT_EQ(e3.found, "a malformed UTF-8 byte 0xff");
  // Real UTF-8 is fine.
  LoadResult ok = load_keyed(std::string(kMinimal) + "# caf\xc3\xa9 \xe2\x9c\x93\n", "u.yaml");
  EXPECT_TRUE(ok.config) << all_errors(ok);
}

TEST(ConfigErrors, StrayCommaDoesNotHang) {
  // yaml-cpp 0.7 reports empty documents forever after a lone ',' (its issue #1040).
  for (const char* t : {",", ",\n", "site: {id: 1}\n---\nsite: {id: 2}\n"}) {
    LoadResult r = load_keyed(t, "c.yaml");
    EXPECT_FALSE(r.config) << t;
    ASSERT_FALSE(r.errors.empty()) << t;
  }
  EXPECT_EQ(load_keyed(",", "c.yaml").errors[0].expected, "one YAML document");
}

TEST(ConfigErrors, MissingFileIsClear) {
  LoadResult r = load_config_file("/nonexistent/stormgate.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].to_string(), "/nonexistent/stormgate.yaml: expected a readable config file, found none (cannot open)");
}

const char* kTwoSites = "site: {id: 1, name: a}\nports:\n  - {name: p0, vdev: net_ring0, ipv4: 10.0.0.1}\n"
                        "peers:\n  - {id: 2, name: b, address: 10.0.0.2}\n";

TEST(ConfigSecurity, SealedByDefaultAndEveryKeyRead) {
  LoadResult d = load_config_text(std::string(kTwoSites) + "security: {key_file: /k}\n", "t.yaml");
  ASSERT_TRUE(d.config) << all_errors(d);
  EXPECT_EQ(d.config->security.mode, SecurityMode::kAead);
  EXPECT_EQ(d.config->security.suite, SecuritySuite::kAes128Gcm);
  EXPECT_EQ(d.config->security.protection, SecurityProtection::kEncrypt);
  EXPECT_EQ(d.config->security.replay_window, 8192u);
  EXPECT_EQ(d.config->security.rekey_after_packets, 4194304u);
  LoadResult r = load_config_text(std::string(kTwoSites) +
                                      "security: {key_file: /etc/k, suite: chacha20-poly1305, protection: auth-only, "
                                      "replay_window: 65536, rekey_after_packets: 100000}\n",
                                  "t.yaml");
  ASSERT_TRUE(r.config) << all_errors(r);
  EXPECT_EQ(r.config->security.key_file, "/etc/k");
  EXPECT_EQ(r.config->security.suite, SecuritySuite::kChaCha20Poly1305);
  EXPECT_EQ(r.config->security.protection, SecurityProtection::kAuthOnly);
  EXPECT_EQ(r.config->security.replay_window, 65536u);
  EXPECT_EQ(r.config->security.rekey_after_packets, 100000u);
}

TEST(ConfigSecurity, PeersWithoutAKeyFileIsOneClearError) {
  LoadResult missing = load_config_text(kTwoSites, "t.yaml");
  ASSERT_EQ(missing.errors.size(), 1u) << all_errors(missing);
  const ConfigError& e = missing.errors[0];
  EXPECT_EQ(e.key_path, "security.key_file");
  EXPECT_NE(e.expected.find("security.mode: plain"), std::string::npos) << e.to_string();
  EXPECT_EQ(e.found, "nothing");
  // Plain mode must be asked for; no peers need no key.
  LoadResult plain = load_config_text(std::string(kTwoSites) + "security: {mode: plain}\n", "t.yaml");
  ASSERT_TRUE(plain.config) << all_errors(plain);
  EXPECT_EQ(plain.config->security.mode, SecurityMode::kPlain);
  EXPECT_TRUE(plain.config->security.key_file.empty());
  EXPECT_TRUE(load_config_text("site: {id: 1, name: a}\nports:\n  - {name: p0, vdev: net_ring0, ipv4: 10.0.0.1}\n",
                               "t.yaml").config);
}

TEST(ConfigSecurity, BadValuesAreRefusedByName) {
  ConfigError suite = one_error(std::string(kTwoSites) + "security: {key_file: /k, suite: aes-256-cbc}\n");
  EXPECT_EQ(suite.key_path, "security.suite");
  EXPECT_NE(suite.expected.find("aes-128-gcm"), std::string::npos) << suite.to_string();
  EXPECT_NE(suite.expected.find("chacha20-poly1305"), std::string::npos) << suite.to_string();
  ConfigError protection = one_error(std::string(kTwoSites) + "security: {key_file: /k, protection: none}\n");
  EXPECT_EQ(protection.key_path, "security.protection");
  ConfigError window = one_error(std::string(kTwoSites) + "security: {key_file: /k, replay_window: 1000}\n");
  EXPECT_EQ(window.key_path, "security.replay_window");
  ConfigError rekey = one_error(std::string(kTwoSites) + "security: {key_file: /k, rekey_after_packets: 9000000}\n");
  EXPECT_EQ(rekey.key_path, "security.rekey_after_packets");
}

TEST(ConfigDataplane, SpinPollsReadAndBounded) {
  LoadResult r = load_keyed(std::string(kMinimal) + "dataplane: {spin_polls: 8}\n", "t.yaml");
  ASSERT_TRUE(r.config) << all_errors(r);
  EXPECT_EQ(r.config->dataplane.spin_polls, 8u);
  LoadResult d = load_keyed(kMinimal, "t.yaml");
  ASSERT_TRUE(d.config) << all_errors(d);
  EXPECT_EQ(d.config->dataplane.spin_polls, 256u);
  ConfigError e = one_error(std::string(kMinimal) + "dataplane: {spin_polls: -1}\n");
  EXPECT_EQ(e.key_path, "dataplane.spin_polls");
}

TEST(ConfigTransport, LanWindowInKibWithinItsRange) {
  LoadResult d = load_keyed(kMinimal, "t.yaml");
  ASSERT_TRUE(d.config) << all_errors(d);
  EXPECT_EQ(d.config->transport.lan_window_kb, 256u);
  LoadResult r = load_keyed(std::string(kMinimal) + "transport: {lan_window_kb: 2048}\n", "t.yaml");
  ASSERT_TRUE(r.config) << all_errors(r);
  EXPECT_EQ(r.config->transport.lan_window_kb, 2048u);
  for (const char* bad : {"8", "65537", "-1", "big"}) {
    ConfigError e = one_error(std::string(kMinimal) + "transport: {lan_window_kb: " + bad + "}\n");
    EXPECT_EQ(e.key_path, "transport.lan_window_kb") << bad;
  }
}

TEST(ConfigTransport, EarlyHoldPacketsWithinItsRange) {
  LoadResult d = load_keyed(kMinimal, "t.yaml");
  ASSERT_TRUE(d.config) << all_errors(d);
  EXPECT_EQ(d.config->transport.early_hold_packets, 16384u);
  LoadResult r = load_keyed(std::string(kMinimal) + "transport: {early_hold_packets: 0}\n", "t.yaml");
  ASSERT_TRUE(r.config) << all_errors(r);
  EXPECT_EQ(r.config->transport.early_hold_packets, 0u);
  for (const char* bad : {"262145", "-1", "many"}) {
    ConfigError e = one_error(std::string(kMinimal) + "transport: {early_hold_packets: " + bad + "}\n");
    EXPECT_EQ(e.key_path, "transport.early_hold_packets") << bad;
  }
}

TEST(ConfigTransport, LinkShareAutoByDefaultAndOffOnlyForOneJob) {
  LoadResult d = load_keyed(kMinimal, "t.yaml");
  ASSERT_TRUE(d.config) << all_errors(d);
  EXPECT_EQ(d.config->transport.link_share, LinkShareMode::kAuto);
  EXPECT_FALSE(links_shared(*d.config)) << "auto: one job keeps a controller per transfer";
  LoadResult on = load_keyed(std::string(kMinimal) + "transport: {link_share: on}\n", "t.yaml");
  ASSERT_TRUE(on.config) << all_errors(on);
  EXPECT_TRUE(links_shared(*on.config));
  LoadResult two = load_keyed(std::string(kMinimal) + "jobs:\n  - {id: 2, model_bytes: 64}\n  - {id: 3, model_bytes: 64}\n", "t.yaml");
  ASSERT_TRUE(two.config) << all_errors(two);
  EXPECT_TRUE(links_shared(*two.config)) << "auto: several jobs share by weight";
  LoadResult off = load_keyed(std::string(kMinimal) + "transport: {link_share: off}\n", "t.yaml");
  ASSERT_TRUE(off.config) << all_errors(off);
  EXPECT_FALSE(links_shared(*off.config));
  // Jobs' weights are parts of one shared link state: without it they would mean nothing.
  ConfigError e = one_error(std::string(kMinimal) +
                            "transport: {link_share: off}\njobs:\n  - {id: 2, model_bytes: 64}\n  - {id: 3, model_bytes: 64}\n");
  EXPECT_EQ(e.key_path, "transport.link_share");
  // The AIMD baseline keeps its own controllers anyway: nothing to refuse, nothing shared.
  LoadResult aimd = load_keyed(std::string(kMinimal) +
                                   "transport: {link_share: on, rate_controller: aimd}\n",
                               "t.yaml");
  ASSERT_TRUE(aimd.config) << all_errors(aimd);
  EXPECT_FALSE(links_shared(*aimd.config));
  e = one_error(std::string(kMinimal) + "transport: {link_share: true}\n");
  EXPECT_EQ(e.key_path, "transport.link_share");
}

TEST(ConfigSecurity, ARelativeKeyFileIsFoundNextToTheConfig) {
  char dir[] = "/tmp/sgcfgXXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/site.yaml";
  std::ofstream(path) << kTwoSites << "security: {key_file: keys/wan.key}\n";
  LoadResult r = load_config_file(path);
  ASSERT_TRUE(r.config) << all_errors(r);
  EXPECT_EQ(r.config->security.key_file, std::string(dir) + "/keys/wan.key");
  // From text there is no file to be next to: the path stays as written.
  LoadResult t = load_config_text(std::string(kTwoSites) + "security: {key_file: keys/wan.key}\n", "t.yaml");
  ASSERT_TRUE(t.config) << all_errors(t);
  EXPECT_EQ(t.config->security.key_file, "keys/wan.key");
  std::remove(path.c_str());
  rmdir(dir);
}

TEST(ConfigJob, TheWorkerTimeoutIsShorterThanTheRoundTimeout) {
  const std::string keyed = std::string(kTwoSites) + "security: {key_file: /k}\n";
  ConfigError e = one_error(keyed + "job: {model_bytes: 4096, workers: 2, round_timeout_ms: 1000, worker_timeout_ms: 1000}\n");
  EXPECT_EQ(e.key_path, "job.worker_timeout_ms");
  EXPECT_NE(e.expected.find("less than job.round_timeout_ms (1000)"), std::string::npos) << e.to_string();
  LoadResult r = load_config_text(keyed + "job: {model_bytes: 4096, workers: 2, round_timeout_ms: 1000, worker_timeout_ms: 300}\n", "t.yaml");
  ASSERT_TRUE(r.config) << all_errors(r);
  EXPECT_EQ(r.config->job.worker_timeout_ms, 300u);
}

TEST(ConfigSecurity, AJobTokenNeedsWorkersAndIsFoundNextToTheConfig) {
  const std::string keyed = std::string(kTwoSites) + "security: {key_file: /k}\n";
  ConfigError e = one_error(keyed + "job: {model_bytes: 4096, token_file: /t}\n");
  EXPECT_EQ(e.key_path, "job.token_file");
  EXPECT_NE(e.expected.find("job.workers > 0"), std::string::npos) << e.to_string();
  char dir[] = "/tmp/sgcfgXXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/site.yaml";
  std::ofstream(path) << keyed << "job: {model_bytes: 4096, workers: 2, token_file: job.token}\n";
  LoadResult r = load_config_file(path);
  ASSERT_TRUE(r.config) << all_errors(r);
  EXPECT_EQ(r.config->job.token_file, std::string(dir) + "/job.token");
  std::remove(path.c_str());
  rmdir(dir);
}

TEST(ConfigSecurity, AdmissionTokenOnlyWithAdmissionFoundNextToTheConfigAndNotBesideAJobToken) {
  const std::string keyed = std::string(kTwoSites) + "security: {key_file: /k}\n";
  ConfigError e = one_error(keyed + "admission: {token_file: /a}\n");
  EXPECT_EQ(e.key_path, "admission.token_file");
  EXPECT_NE(e.expected.find("admission.enabled: true"), std::string::npos) << e.to_string();
  e = one_error(keyed + "admission: {enabled: true, token_file: /a}\njob: {workers: 1, token_file: /t}\n");
  EXPECT_EQ(e.key_path, "job.token_file");
  EXPECT_NE(e.expected.find("derived from admission.token_file"), std::string::npos) << e.to_string();
  // A jobs list: the error names the item that holds the token, with its position.
  e = one_error(keyed + "admission: {enabled: true}\njobs:\n  - {id: 1, model_bytes: 4000, workers: 1, token_file: /t}\n");
  EXPECT_EQ(e.key_path, "jobs[0].token_file");
  EXPECT_GT(e.line, 0);
  char dir[] = "/tmp/sgcfgXXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/site.yaml";
  std::ofstream(path) << keyed << "admission: {enabled: true, token_file: admission.key}\n";
  LoadResult r = load_config_file(path);
  ASSERT_TRUE(r.config) << all_errors(r);
  EXPECT_EQ(r.config->admission.token_file, std::string(dir) + "/admission.key");
  std::remove(path.c_str());
  rmdir(dir);
}

TEST(ConfigJobs, SeveralJobsLoadAndEachIsCheckedByName) {
  std::string two = std::string(kMinimal) +
                     "jobs:\n  - {id: 7, model_bytes: 4096, rounds: 3}\n  - {id: 9, model_bytes: 8192, workers: 2, weight: 3}\n";
  LoadResult r = load_keyed(two, "t.yaml");
  ASSERT_TRUE(r.config) << all_errors(r);
  ASSERT_EQ(r.config->jobs.size(), 2u);
  EXPECT_TRUE(r.config->jobs_listed);
  EXPECT_EQ(r.config->jobs[1].id, 9u);
  EXPECT_EQ(r.config->jobs[1].workers, 2u);
  EXPECT_EQ(r.config->jobs[1].weight, 3u);
  EXPECT_EQ(r.config->jobs[0].weight, 1u);
  EXPECT_EQ(r.config->job.id, 7u) << "job is the first of the list";
  const GatewayConfig j9 = for_job(*r.config, 1);
  EXPECT_EQ(j9.job.id, 9u);
  EXPECT_EQ(j9.job.model_bytes, 8192u);
  // The one-job section still gives a one-job list; no model: no job.
  r = load_keyed(std::string(kMinimal) + "job: {id: 3, model_bytes: 64}\n", "t.yaml");
  ASSERT_TRUE(r.config);
  ASSERT_EQ(r.config->jobs.size(), 1u);
  EXPECT_EQ(r.config->jobs[0].id, 3u);
  EXPECT_TRUE(load_keyed(kMinimal, "t.yaml").config->jobs.empty());
  // Errors name the entry.
  ConfigError e = one_error(std::string(kMinimal) + "job: {id: 1}\njobs:\n  - {id: 2, model_bytes: 64}\n");
  EXPECT_EQ(e.key_path, "jobs");
  e = one_error(std::string(kMinimal) + "jobs:\n  - {id: 2, model_bytes: 64}\n  - {id: 2, model_bytes: 128}\n");
  EXPECT_EQ(e.key_path, "jobs[1].id");
  e = one_error(std::string(kMinimal) + "jobs:\n  - {id: 2, model_bytes: 64}\n  - {id: 3}\n");
  EXPECT_EQ(e.key_path, "jobs[1].model_bytes");
  e = one_error(std::string(kMinimal) + "jobs:\n  - {id: 2, model_bytes: 66}\n");
  EXPECT_EQ(e.key_path, "jobs[0].model_bytes");
  e = one_error(std::string(kMinimal) + "jobs:\n  - {id: 2, model_bytes: 64, worker_timeout_ms: 40000}\n");
  EXPECT_EQ(e.key_path, "jobs[0].worker_timeout_ms");
  e = one_error(std::string(kMinimal) + "jobs:\n  - {id: 2, model_bytes: 64, modelbytes: 3}\n");
  EXPECT_EQ(e.key_path, "jobs[0].modelbytes");
  e = one_error(std::string(kMinimal) +
                "jobs:\n  - {id: 2, model_bytes: 64, workers: 1, token_file: t.key}\n  - {id: 3, model_bytes: 64}\n");
  EXPECT_EQ(e.key_path, "jobs[0].token_file");
  e = one_error(std::string(kMinimal) + "jobs:\n  - {id: 2, model_bytes: 64, weight: 17}\n");
  EXPECT_EQ(e.key_path, "jobs[0].weight");
  e = one_error(std::string(kMinimal) + "job: {id: 2, model_bytes: 64, weight: 2}\n");
  EXPECT_EQ(e.key_path, "job.weight") << "a weight needs other jobs to weigh against";
  e = one_error(std::string(kMinimal) + "sync: {mode: selmcast, p: 1}\ncompression: {mode: off}\n"
                                        "jobs:\n  - {id: 2, model_bytes: 64, weight: 2}\n  - {id: 3, model_bytes: 64}\n");
  EXPECT_EQ(e.key_path, "jobs[0].weight");
  std::string many = std::string(kMinimal) + "jobs:\n";
  for (int i = 1; i <= 17; ++i) many += "  - {id: " + std::to_string(i) + ", model_bytes: 64}\n";
  e = one_error(many);
  EXPECT_EQ(e.key_path, "jobs");
}

}  // namespace
}  // namespace sg::config

namespace sg::config {
namespace {

// Keys as "section.key", list items without their index ("peers.paths.id").
std::string normalise(std::string k) {
  std::string out;
  for (size_t i = 0; i < k.size(); ++i) {
    if (k[i] == '[') {
      while (i < k.size() && k[i] != ']') ++i;
      continue;
    }
    out += k[i];
  }
  return out;
}

// Every key of every table in config/README.md: rows start with "| `key`" (several keys in one
// row as "`a`, `b`"); "## section" headers and "`paths[]`:" sub-tables give the prefix.
std::set<std::string> documented_keys() {
  std::ifstream in(std::string(SG_SOURCE_ROOT) + "/config/README.md");
  std::set<std::string> keys;
  std::string line, section, sub;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) {
      section = line.substr(3, line.find(' ', 3) - 3);
      sub.clear();
      keys.insert(section);  // a section or list is a key too (`jobs` has no table of its own)
    } else if (line.rfind("`paths[]`:", 0) == 0) {
      sub = "paths.";
    } else if (line.rfind("| `", 0) == 0 && !section.empty()) {
      const std::string cell = line.substr(2, line.find(" |", 2) - 2);
      for (size_t p = cell.find('`'); p != std::string::npos; p = cell.find('`', cell.find('`', p + 1) + 1)) {
        const size_t e = cell.find('`', p + 1);
        keys.insert(section + "." + sub + cell.substr(p + 1, e - p - 1));
      }
    }
  }
  return keys;
}

TEST(ConfigDocs, EveryKeyTheLoaderReadsIsDocumentedAndNoOther) {
  // A config that visits every reader: one port, one peer with one path.
  const std::string text =
      "site: {id: 1, name: a}\nports:\n  - {name: p0, vdev: net_ring0, ipv4: 10.0.0.1}\n"
      "peers:\n  - {id: 2, name: b, address: 10.0.0.2, paths: [{id: 0, port: p0}]}\nsecurity: {key_file: k.key}\n";
  std::set<std::string> loaded;
  set_key_observer([&](const std::string& k) { loaded.insert(normalise(k)); });
  const LoadResult r = load_config_text(text, "docs");
  set_key_observer(nullptr);
  ASSERT_TRUE(r.config) << all_errors(r);
  const std::set<std::string> documented = documented_keys();
  ASSERT_GT(documented.size(), 50u) << "the README's tables were not found";
  for (const auto& k : loaded) {
    // Section names themselves are asked for too ("transport", "peers.paths"): not keys.
    const bool is_section = std::any_of(loaded.begin(), loaded.end(), [&](const std::string& o) {
      return o.size() > k.size() && o.compare(0, k.size() + 1, k + ".") == 0;
    });
    if (!is_section) {
      EXPECT_TRUE(documented.count(k)) << k << " is read by the loader but not documented";
    }
  }
  for (const auto& k : documented) EXPECT_TRUE(loaded.count(k)) << k << " is documented but the loader never reads it";
}


}  // namespace
}  // namespace sg::config

namespace sg::config {
namespace {

TEST(ConfigSync, SelmcastLoadsAndWhatItCannotServeIsRefused) {
  std::string ok = std::string(kMinimal) + "sync: {mode: selmcast, receivers: random, p: 1, staleness: 2}\n"
                                           "compression: {mode: off}\n";
  LoadResult r = load_keyed(ok, "t.yaml");
  ASSERT_TRUE(r.config) << all_errors(r);
  EXPECT_EQ(r.config->sync.mode, SyncMode::kSelmcast);
  EXPECT_EQ(r.config->sync.receivers, ReceiverChoice::kRandom);
  EXPECT_EQ(r.config->sync.staleness, 2u);
  // Compression left at its default (adaptive): the mode sends full precision only.
  ConfigError e = one_error(std::string(kMinimal) + "sync: {mode: selmcast, p: 1}\n");
  EXPECT_EQ(e.key_path, "compression.mode");
  // More receivers than other sites.
  e = one_error(std::string(kMinimal) + "sync: {mode: selmcast, p: 2}\ncompression: {mode: off}\n");
  EXPECT_EQ(e.key_path, "sync.p");
  // More than one engine.
  std::string two = ok;
  two.replace(two.find("    ipv4: 10.0.0.1"), 0, "    rx_queues: 2\n");
  e = one_error(two);
  EXPECT_EQ(e.key_path, "ports[0].rx_queues");
  e = one_error(std::string(kMinimal) + "sync: {mode: gossip}\n");
  EXPECT_EQ(e.key_path, "sync.mode");
}

}  // namespace
}  // namespace sg::config
