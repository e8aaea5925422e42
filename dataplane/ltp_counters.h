// Counters of the LTP side of one engine's packet path (the generic ones -- packets, bytes,
// drops by reason -- are the engine's, counters.h). Relaxed atomics: the engine writes, the
// control thread and telemetry read.
#pragma once

#include <array>

#include "dataplane/counters.h"

namespace sg::dp {

// Why an LTP message was not admitted (each also counts as Drop::kUnauthenticated). Checked
// before any job or transfer state is touched.
enum class AuthDrop : uint8_t {
  kUnknownSource,  // a site's message from an address that is no configured peer
  kUnsealed,       // a site's message without the seal (or sealed while the config says plain)
  kTruncated,      // shorter than its header and trailer
  kUnknownEpoch,   // a key epoch we do not hold (older, or a newer one not yet tried)
  kReplayed,       // its packet number was already accepted
  kTooOld,         // behind the replay window
  kBadTag,         // forged, corrupted, or sealed with another key file
  kSpoofed,        // authenticated by one site but naming another as its sender
  kRelayRefused,   // a relayed copy along no configured path (origin or destination unknown)
  kWorkerRefused,  // a worker's message from outside this gateway's subnets (or from a peer)
  kCount
};
const char* auth_drop_name(AuthDrop d);

struct LtpCounters {
  Counter data_rx, data_rx_bytes, ack_rx, close_rx, control_rx, reject_rx, probe_rx;
  Counter bad_version;   // LTP version we do not speak
  Counter arp_requests_answered, arp_requests_sent, arp_learned;
  Counter data_tx, data_tx_bytes;
  Counter no_mbuf;       // pool empty when building a packet
  Counter handoff_full;  // job packet for another engine dropped: that engine's ring was full
  Counter handed_over;   // job packets passed to the engine owning their shard
  Counter other_job;     // LTP for a job this gateway does not run
  Counter control_full;  // CONTROL (or JOB) frame dropped: the control thread's ring was full
  Counter job_rx;        // JOB messages (joins, leaves, announcements) for the job registry
  static constexpr size_t kPeersCounted = 64;
  std::array<Counter, kPeersCounted> data_rx_from_site{};  // by peer index (first 64 peers), relayed included
  // Multipath (lib/wire/path_id.h, lib/spray/sprayer.h).
  Counter relayed_tx;        // DATA we sent through a relay site
  Counter relayed_rx;        // DATA for us that came through a relay
  Counter relay_forwarded, relay_forwarded_bytes;  // DATA we relayed for others, not aggregated
  Counter relay_no_route;    // relayed DATA for a site we have no direct route to (or unresolved)
  Counter relay_refused;     // relayed DATA that failed validation or came from no job site
  Counter txq_full;          // DATA meant for another engine's TX queue sent on our own
  static constexpr size_t kTxQueuesCounted = 8;  // queues beyond count in the last entry
  std::array<Counter, kTxQueuesCounted> data_tx_queue{};  // DATA by TX queue it was dealt to
  // Authentication (lib/crypto): messages opened, sealed, and refused by reason.
  Counter opened, sealed, seal_failed;
  std::array<Counter, static_cast<size_t>(AuthDrop::kCount)> auth_drops{};
  // The same refusals by source: by the previous hop's peer index (first 64 peers), so an
  // operator sees which link carries forgeries or a wrong key, and from addresses that are
  // no peer, with the last such address (host order).
  using AuthDropCounts = std::array<Counter, static_cast<size_t>(AuthDrop::kCount)>;
  std::array<AuthDropCounts, kPeersCounted> auth_drops_from_site{};
  AuthDropCounts auth_drops_from_stranger{};
  std::atomic<uint32_t> last_refused_stranger{0};
  void auth_drop(AuthDrop d, int peer_index, uint32_t src_ip) {
    const auto r = static_cast<size_t>(d);
    auth_drops[r].add();
    if (peer_index < 0) {
      auth_drops_from_stranger[r].add();
      last_refused_stranger.store(src_ip, std::memory_order_relaxed);
    } else if (static_cast<size_t>(peer_index) < kPeersCounted) {
      auth_drops_from_site[static_cast<size_t>(peer_index)][r].add();
    }
  }
};

}  // namespace sg::dp
