// Checks that need more than one key: references between sections, uniqueness, sizes that
// must fit each other. Runs after every key read cleanly.
#include <algorithm>
#include <set>

#include "config/load.h"
#include "wire/ltp_header.h"

namespace sg::config {
namespace {

constexpr uint32_t kPerChunkOverhead = chunk_overhead_bytes();

}  // namespace

GatewayConfig for_job(const GatewayConfig& c, size_t index) {
  GatewayConfig j = c;
  if (index < c.jobs.size()) j.job = c.jobs[index];
  return j;
}

uint32_t max_chunk_bytes(uint32_t mtu) { return mtu > kPerChunkOverhead ? (mtu - kPerChunkOverhead) / 4 * 4 : 0; }

void validate(const GatewayConfig& cfg, ErrorList& errs) {
  if (cfg.ports.empty()) errs.add_at("ports", "at least one port", "an empty list");

  std::set<std::string> port_names;
  const PortConfig* smallest = nullptr;
  for (size_t i = 0; i < cfg.ports.size(); ++i) {
    const auto& p = cfg.ports[i];
    if (!port_names.insert(p.name).second)
      errs.add_at("ports[" + std::to_string(i) + "].name", "a port name used once",
                  "a second port named '" + p.name + "'");
    if (!smallest || p.mtu < smallest->mtu) smallest = &p;
  }
  const PortConfig* largest = nullptr;
  for (const auto& p : cfg.ports)
    if (!largest || p.mtu > largest->mtu) largest = &p;
  auto check_job = [&](const JobConfig& job, const std::string& at) {
    if (const uint32_t wc = job.worker_chunk_bytes) {
      if (wc % 4 != 0 || wc < 64)
        errs.add_at(at + ".worker_chunk_bytes", "0, or a multiple of 4 of at least 64", std::to_string(wc));
      if (largest && wc > largest->mtu - kPerChunkOverhead)
        errs.add_at(at + ".worker_chunk_bytes",
                    "at most " + std::to_string(largest->mtu - kPerChunkOverhead) +
                        " so a chunk fits the largest port's mtu (port '" + largest->name + "', mtu " +
                        std::to_string(largest->mtu) + ")",
                    std::to_string(wc));
    }
    if (job.worker_timeout_ms >= job.round_timeout_ms)
      errs.add_at(at + ".worker_timeout_ms",
                  "0 or less than " + at + ".round_timeout_ms (" + std::to_string(job.round_timeout_ms) +
                      "): the site must give up on a dead worker before its peers give up on the site",
                  std::to_string(job.worker_timeout_ms));
    if (!job.token_file.empty() && job.workers == 0)
      errs.add_at(at + ".token_file", "only with " + at + ".workers > 0 (it admits the job's workers)", job.token_file);
    if (job.model_bytes % 4 != 0)
      errs.add_at(at + ".model_bytes", "a multiple of 4 (whole float32 values)", std::to_string(job.model_bytes));
    // The largest transfer: a worker's push of the whole gradient (in the workers' chunks), or
    // one shard between gateways (at most the whole gradient in transport.chunk_bytes).
    const uint32_t chunk = job.workers > 0 && job.worker_chunk_bytes > 0
                               ? std::min(job.worker_chunk_bytes, cfg.transport.chunk_bytes)
                               : cfg.transport.chunk_bytes;
    if (chunk > 0 && (job.model_bytes + chunk - 1) / chunk > cfg.transport.max_chunks_per_transfer)
      errs.add_at(at + ".model_bytes",
                  "at most transport.max_chunks_per_transfer chunks of " + std::to_string(chunk) + " B (" +
                      std::to_string(cfg.transport.max_chunks_per_transfer) + ")",
                  std::to_string(job.model_bytes) + " bytes, " +
                      std::to_string((job.model_bytes + chunk - 1) / chunk) + " chunks");
  };
  if (!cfg.jobs_listed) {
    check_job(cfg.job, "job");
  } else {
    if (cfg.jobs.size() > kMaxJobs)
      errs.add_at("jobs", "at most " + std::to_string(kMaxJobs) + " jobs", std::to_string(cfg.jobs.size()));
    std::set<uint32_t> ids;
    for (size_t i = 0; i < cfg.jobs.size(); ++i) {
      const JobConfig& j = cfg.jobs[i];
      const std::string at = "jobs[" + std::to_string(i) + "]";
      check_job(j, at);
      if (!ids.insert(j.id).second) errs.add_at(at + ".id", "a job id used once", "a second job " + std::to_string(j.id));
      if (j.model_bytes == 0) errs.add_at(at + ".model_bytes", "the job's gradient bytes (more than 0)", "0");
      if (j.weight != 1 && cfg.sync.mode == SyncMode::kSelmcast)
        errs.add_at(at + ".weight", "1 with sync.mode selmcast (its senders do not share links by weight)",
                    std::to_string(j.weight));
      // The workers' token is checked per engine with one key set: one job's for now.
      if (!j.token_file.empty() && cfg.jobs.size() > 1)
        errs.add_at(at + ".token_file", "unset when the gateway runs several jobs (per-job tokens: not yet supported)",
                    j.token_file);
    }
  }
  if (smallest) {
    const uint32_t room = smallest->mtu - kPerChunkOverhead;
    if (cfg.transport.chunk_bytes > room)
      errs.add_at("transport.chunk_bytes",
                  "at most " + std::to_string(room) + " so a chunk fits port '" + smallest->name + "' (mtu " +
                      std::to_string(smallest->mtu) + ")",
                  std::to_string(cfg.transport.chunk_bytes));
  }
  if (cfg.security.mode == SecurityMode::kAead && !cfg.peers.empty() && cfg.security.key_file.empty())
    errs.add_at("security.key_file",
                "the path of the deployment's key file (stormgate --keygen FILE makes one), or security.mode: plain "
                "(experiments only: traffic between gateways is then not authenticated)",
                "nothing");
  if (cfg.transport.link_share == LinkShareMode::kOff && cfg.transport.rate_controller == RateController::kLtp &&
      several_jobs(cfg))
    errs.add_at("transport.link_share",
                "auto or on when the gateway runs several jobs or announced ones (their weights are parts of one shared "
                "link state)",
                "off");
  if (cfg.admission.enabled) {
    if (cfg.sync.mode == SyncMode::kSelmcast)
      errs.add_at("admission.enabled", "false with sync.mode selmcast (announced jobs run tree all-reduce)", "true");
    if (cfg.jobs.size() + cfg.admission.max_jobs > kMaxJobs)
      errs.add_at("admission.max_jobs",
                  "at most " + std::to_string(kMaxJobs - std::min(cfg.jobs.size(), kMaxJobs)) + " beside the " +
                      std::to_string(cfg.jobs.size()) + " job(s) of the YAML (a gateway runs at most " +
                      std::to_string(kMaxJobs) + ")",
                  std::to_string(cfg.admission.max_jobs));
    for (size_t i = 0; i < (cfg.jobs_listed ? cfg.jobs.size() : 1); ++i) {
      const JobConfig& j = cfg.jobs_listed ? cfg.jobs[i] : cfg.job;
      if (!j.token_file.empty())
        errs.add_at(cfg.jobs_listed ? "jobs[" + std::to_string(i) + "].token_file" : "job.token_file",
                    "unset with admission.enabled (announced jobs' workers seal with their job's token, derived "
                    "from admission.token_file)",
                    j.token_file);
    }
  } else if (!cfg.admission.token_file.empty()) {
    errs.add_at("admission.token_file", "only with admission.enabled: true (it admits announced jobs' workers)",
                cfg.admission.token_file);
  }
  if (cfg.sync.mode == SyncMode::kSelmcast) {
    if (cfg.peers.empty())
      errs.add_at("sync.mode", "allreduce on a gateway without peers (selmcast multicasts to other sites)", "selmcast");
    else if (cfg.sync.p > cfg.peers.size())
      errs.add_at("sync.p", "at most the number of other sites (" + std::to_string(cfg.peers.size()) + ")",
                  std::to_string(cfg.sync.p));
    for (size_t i = 0; i < cfg.ports.size(); ++i)
      if (cfg.ports[i].rx_queues > 1)
        errs.add_at("ports[" + std::to_string(i) + "].rx_queues", "1 with sync.mode selmcast (the mode runs on one engine)",
                    std::to_string(cfg.ports[i].rx_queues));
    if (cfg.compression.mode != CompressionMode::kOff)
      errs.add_at("compression.mode", "off with sync.mode selmcast (its updates travel in full precision)",
                  cfg.compression.mode == CompressionMode::kAlways ? "always" : "adaptive");
  }
  // DPDK refuses a mempool whose per-lcore cache exceeds its size / 1.5.
  if (cfg.dataplane.mbufs && cfg.dataplane.mbuf_cache * 3ull > cfg.dataplane.mbufs * 2ull)
    errs.add_at("dataplane.mbuf_cache",
                "at most dataplane.mbufs / 1.5 (" + std::to_string(cfg.dataplane.mbufs * 2ull / 3) +
                    ": DPDK's rule for a mempool's per-lcore cache), or 0",
                std::to_string(cfg.dataplane.mbuf_cache));
  if (cfg.security.replay_window % 64 != 0)
    errs.add_at("security.replay_window", "a multiple of 64 (the window is kept in 64-bit words)",
                std::to_string(cfg.security.replay_window));
  if (cfg.transport.chunk_bytes % 4 != 0)
    errs.add_at("transport.chunk_bytes", "a multiple of 4 (whole float32 values)",
                std::to_string(cfg.transport.chunk_bytes));


  std::set<uint16_t> peer_ids;
  std::set<uint32_t> peer_addrs;
  for (size_t i = 0; i < cfg.peers.size(); ++i) {
    const auto& peer = cfg.peers[i];
    const std::string path = "peers[" + std::to_string(i) + "]";
    if (peer.id == cfg.site.id)
      errs.add_at(path + ".id", "a site id other than this site's own (" + std::to_string(cfg.site.id) + ")",
                  std::to_string(peer.id));
    else if (!peer_ids.insert(peer.id).second)
      errs.add_at(path + ".id", "a site id used once", "a second peer with id " + std::to_string(peer.id));
    if (!peer_addrs.insert(peer.address.host_order).second)
      errs.add_at(path + ".address", "an address used by one peer",
                  "a second peer at " + format_ipv4(peer.address));
    for (const auto& port : cfg.ports)
      if (port.ipv4 == peer.address)
        errs.add_at(path + ".address", "a peer address, not one of ours",
                    format_ipv4(peer.address) + " (port '" + port.name + "')");
  }

  for (size_t i = 0; i < cfg.peers.size(); ++i) {
    const auto& peer = cfg.peers[i];
    std::set<uint8_t> path_ids;
    for (size_t j = 0; j < peer.paths.size(); ++j) {
      const auto& pa = peer.paths[j];
      const std::string path = "peers[" + std::to_string(i) + "].paths[" + std::to_string(j) + "]";
      if (udp_src_port(cfg, pa) > 65535u)
        errs.add_at("transport.udp_port",
                    "at most " + std::to_string(65534 - pa.id) + " so that " + path +
                        "'s default source port (udp_port + 1 + path id) is a UDP port, or that path's "
                        "udp_src_port set",
                    std::to_string(cfg.transport.udp_port));
      if (!path_ids.insert(pa.id).second)
        errs.add_at(path + ".id", "a path id used once per peer", "a second path " + std::to_string(pa.id));
      if (!cfg.find_port(pa.port)) {
        std::string names;
        for (const auto& p : cfg.ports) names += (names.empty() ? "" : ", ") + p.name;
        errs.add_at(path + ".port", "the name of a configured port (" + names + ")", "'" + pa.port + "'");
      }
      if (pa.via && peer.id > wire::kMaxRelayedSite)
        errs.add_at(path + ".via", "no relay to a site whose id is above " + std::to_string(wire::kMaxRelayedSite) +
                                       " (a relayed DATA header names its destination in 12 bits)",
                    "peer id " + std::to_string(peer.id));
      if (pa.via) {
        if (*pa.via == peer.id || *pa.via == cfg.site.id)
          errs.add_at(path + ".via", "a third site to relay through", "site " + std::to_string(*pa.via));
        else if (!cfg.find_peer(*pa.via))
          errs.add_at(path + ".via", "the id of a configured peer", "unknown peer " + std::to_string(*pa.via));
      }
    }
  }
}

}  // namespace sg::config
