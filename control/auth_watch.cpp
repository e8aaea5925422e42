#include "control/auth_watch.h"

#include <cstdio>

namespace sg::ctl {
namespace {

std::string ipv4_text(uint32_t a) {
  char b[16];
  std::snprintf(b, sizeof b, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
  return b;
}

uint64_t bad_tags(const AuthSnapshot& s) {
  uint64_t n = 0;
  for (const auto& p : s.by_peer) n += p[static_cast<size_t>(dp::AuthDrop::kBadTag)];
  return n;
}

}  // namespace

AuthWatch::AuthWatch(std::vector<std::string> peer_names, std::string fingerprint, Clock::duration every)
    : names_(std::move(peer_names)), fingerprint_(std::move(fingerprint)), every_(every), peers_(names_.size()) {}

// A line for this source if it refused something since its last line and that line is at
// least `every_` old; `what` lists the reasons with their counts since then.
bool AuthWatch::due(Source& src, const AuthCounts& now_counts, Clock::time_point now, std::string* what) {
  if (src.spoke && now - src.last_line < every_) return false;
  uint64_t total = 0;
  std::string reasons;
  for (size_t r = 0; r < now_counts.size(); ++r) {
    const uint64_t d = now_counts[r] - src.said[r];
    if (d == 0) continue;
    total += d;
    reasons += (reasons.empty() ? "" : ", ") + std::string(dp::auth_drop_name(static_cast<dp::AuthDrop>(r))) + " " +
               std::to_string(d);
  }
  if (total == 0) return false;
  *what = std::to_string(total) + " refused (" + reasons + ")";
  src.said = now_counts;
  src.last_line = now;
  src.spoke = true;
  return true;
}

std::vector<std::string> AuthWatch::poll(const AuthSnapshot& s, Clock::time_point now) {
  std::vector<std::string> lines;
  if (!primed_) {  // counts before the first snapshot are nobody's news
    primed_ = true;
    for (size_t i = 0; i < peers_.size() && i < s.by_peer.size(); ++i) peers_[i].said = s.by_peer[i];
    strangers_.said = s.strangers;
    key_opened_ = s.opened;
    key_bad_tags_ = bad_tags(s);
    return lines;
  }
  // The key check looks at the last poll interval: every tag failed and nothing opened.
  const uint64_t bad = bad_tags(s) - key_bad_tags_;
  if (bad > 0 && s.opened == key_opened_ && (!key_spoke_ || now - key_last_line_ >= every_)) {
    lines.push_back(std::to_string(bad) + " packets from peers failed authentication since the last check and none "
                    "passed: do the key files match? this site's key fingerprint is " + fingerprint_ +
                    " (compare it with the peers' logs)");
    key_last_line_ = now;
    key_spoke_ = true;
  }
  key_opened_ = s.opened;
  key_bad_tags_ = bad_tags(s);
  std::string what;
  for (size_t i = 0; i < peers_.size() && i < s.by_peer.size(); ++i)
    if (due(peers_[i], s.by_peer[i], now, &what))
      lines.push_back("messages from peer " + names_[i] + ": " + what);
  if (due(strangers_, s.strangers, now, &what))
    lines.push_back("messages from addresses of no peer site (local workers or strangers): " + what + ", the last from " +
                    ipv4_text(s.last_stranger));
  return lines;
}

}  // namespace sg::ctl
