// Authentication refusals said where operators look, per source. The dataplane counts every
// refusal by reason and by the previous hop (ltp_counters.h); the control thread hands this
// class a snapshot about once a second and logs the lines it returns.
//
// Per source, a line at most every `every` (10 s by default) with what that source had
// refused since its last line: a forger who floods us gets one line per period, not one per
// packet. Refusals from addresses of no peer site form one source -- strangers, dropped on an
// address compare before any key is used, and local workers without the job token -- and
// the line names the last such address.
//
// Failures are rate-limited only here, in what they cost the log -- not by ignoring a source
// that failed too often. Every address that reaches a tag check is a configured peer's, and
// UDP source addresses are forged for free: a penalty box keyed on them would let anyone on
// the internet switch off a link by sending junk in a peer's name. A failed check costs what
// an honest packet costs (one AEAD open; replays fail before it, on the window), so a flood
// of forgeries slows a gateway like the same flood of honest traffic would (perf/bench faults).
//
// Also the key-file check: packets from peers that all fail their tags while none opens
// means the key files differ (or everything is forged): said with this site's key
// fingerprint, which operators compare across sites.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/ltp_counters.h"

namespace sg::ctl {

using AuthCounts = std::array<uint64_t, static_cast<size_t>(dp::AuthDrop::kCount)>;

struct AuthSnapshot {
  uint64_t opened = 0;               // messages that authenticated
  std::vector<AuthCounts> by_peer;   // refusals by configured peer (index as in the config)
  AuthCounts strangers{};            // refusals of messages from no peer's address
  uint32_t last_stranger = 0;        // the last such address, host order (0: none)
};

class AuthWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // peer_names: the configured peers in config order; fingerprint: of this site's key.
  AuthWatch(std::vector<std::string> peer_names, std::string fingerprint,
            Clock::duration every = std::chrono::seconds(10));
  // Returns the warnings to log now (none most of the time).
  std::vector<std::string> poll(const AuthSnapshot& s, Clock::time_point now);

 private:
  struct Source {
    AuthCounts said{};  // counts as of its last line (or the first snapshot)
    Clock::time_point last_line{};
    bool spoke = false;
  };
  bool due(Source& src, const AuthCounts& now_counts, Clock::time_point now, std::string* what);

  std::vector<std::string> names_;
  std::string fingerprint_;
  Clock::duration every_;
  bool primed_ = false;
  std::vector<Source> peers_;
  Source strangers_;
  uint64_t key_opened_ = 0, key_bad_tags_ = 0;
  Clock::time_point key_last_line_{};
  bool key_spoke_ = false;
};

}  // namespace sg::ctl
