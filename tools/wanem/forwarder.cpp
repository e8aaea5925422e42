#include "forwarder.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

namespace sg::wanem {
namespace {

constexpr size_t kMaxFrame = 9216 + 64;
constexpr int kBurst = 64;
constexpr int kBurstsPerVisit = 4;
constexpr Nanos kIdleWait = 100 * kMilli;
// Frames due within this much of a wake leave with it. Waking per frame made the emulator
// spend most of its cycles in the scheduler (one sleep and wake per held frame at WAN
// delays); 20 us early is nothing against the millisecond delays and 1 ms ping tolerance it
// emulates, and a pair's rate stays exact because each frame's time comes from its own clock.
constexpr Nanos kReleaseAhead = 20 * 1000;
// A receive time further back than this is not believed (a clock step): the frame counts
// from when it was read.
constexpr Nanos kStampTrust = 100 * kMilli;
constexpr size_t kCtrlSpace = CMSG_SPACE(sizeof(timespec));

uint64_t mac_key(const uint8_t* m) {
  uint64_t k = 0;
  for (int i = 0; i < 6; ++i) k = k << 8 | m[i];
  return k;
}

}  // namespace

struct Forwarder::TxBatch {
  mmsghdr msgs[kBurst];
  iovec iov[kBurst];
  uint32_t bufs[kBurst];
  int n = 0;
};

Forwarder::Forwarder(const Profile& profile, std::vector<PortSpec> ports, uint64_t seed)
    : profile_(profile), ports_(std::move(ports)), coalesce_(profile.min_delay()) {
  const int n = profile_.sites;
  for (int i = 0; i < n * n; ++i) pairs_.emplace_back(seed * 1000003u + static_cast<uint64_t>(i));
}

Forwarder::~Forwarder() {
  for (int fd : fds_)
    if (fd >= 0) close(fd);
}

Nanos Forwarder::clock_now() const {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * kSecond + ts.tv_nsec;
}

bool Forwarder::open(std::string& error) {
  for (const PortSpec& p : ports_) {
    if (p.site < 1 || p.site > profile_.sites) {
      error = "port " + p.ifname + ": site " + std::to_string(p.site) + " is not in the profile's 1.." +
              std::to_string(profile_.sites);
      return false;
    }
    const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
    if (fd < 0) {
      error = "port " + p.ifname + ": cannot open a packet socket: " + std::strerror(errno) + " (needs root)";
      return false;
    }
    fds_.push_back(fd);
    const unsigned idx = if_nametoindex(p.ifname.c_str());
    if (!idx) {
      error = "port " + p.ifname + ": no such interface";
      return false;
    }
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(idx);
    if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) {
      error = "port " + p.ifname + ": bind: " + std::strerror(errno);
      return false;
    }
    // Our own transmissions must not come back as receptions.
    const int one = 1;
    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
    // Each frame's receive time from the kernel: its delay counts from there, however late
    // the loop reads it.
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    // Room for a burst while the emulator is descheduled: the FORCE options pass the host's
    // rmem_max/wmem_max (we run as root; without the capability the capped size is taken).
    const int buf = 8 << 20;
    for (const auto& [forced, capped] : {std::pair{SO_RCVBUFFORCE, SO_RCVBUF}, std::pair{SO_SNDBUFFORCE, SO_SNDBUF}})
      if (setsockopt(fd, SOL_SOCKET, forced, &buf, sizeof buf) != 0) setsockopt(fd, SOL_SOCKET, capped, &buf, sizeof buf);
  }
  rx_buf_ = std::make_unique_for_overwrite<uint8_t[]>(kBurst * kMaxFrame);
  tx_.resize(ports_.size());
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  // wake within ~1 us of a due frame
  start_ = clock_now();
  return true;
}

uint32_t Forwarder::take_buffer() {
  if (free_.empty()) {
    bufs_.push_back(std::make_unique_for_overwrite<uint8_t[]>(kMaxFrame));
    buf_len_.push_back(0);
    return static_cast<uint32_t>(bufs_.size() - 1);
  }
  const uint32_t b = free_.back();
  free_.pop_back();
  return b;
}

void Forwarder::forward(int in_port, const uint8_t* frame, uint32_t len, Nanos now) {
  // `now`: when the frame arrived.
  if (len < 14) return;
  mac_port_[mac_key(frame + 6)] = in_port;  // learn the sender
  int only = -1;
  if (!(frame[0] & 1)) {
    const auto it = mac_port_.find(mac_key(frame));
    if (it != mac_port_.end()) only = it->second;
  }
  const int n = profile_.sites;
  const Nanos since = now - start_;
  for (int out = 0; out < static_cast<int>(ports_.size()); ++out) {
    if (out == in_port || (only >= 0 && out != only)) continue;
    const int from = ports_[in_port].site - 1, to = ports_[out].site - 1;
    if (from == to) continue;
    Nanos at[2];
    const int copies = pairs_[static_cast<size_t>(from) * n + to].admit(now, since, len, at);
    for (int c = 0; c < copies; ++c) {
      const uint32_t b = take_buffer();
      std::memcpy(bufs_[b].get(), frame, len);
      buf_len_[b] = len;
      held_.push(Held{at[c], seq_++, out, b});
    }
  }
  peak_held_ = std::max<uint64_t>(peak_held_, held_.size());
}

int Forwarder::receive(int port, Nanos now) {
  uint8_t* const buf = rx_buf_.get();
  mmsghdr msgs[kBurst];
  iovec iov[kBurst];
  alignas(cmsghdr) uint8_t ctrl[kBurst][kCtrlSpace];
  timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  const Nanos rt_minus_mono = static_cast<Nanos>(rt.tv_sec) * kSecond + rt.tv_nsec - now;
  for (int i = 0; i < kBurst; ++i) {
    iov[i] = {buf + i * kMaxFrame, kMaxFrame};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_control = ctrl[i];
  }
  int taken = 0;
  // A bounded number of bursts, so frames that are due leave between them however much
  // keeps arriving.
  for (int b = 0; b < kBurstsPerVisit; ++b) {
    // The kernel shortens each control length to what it wrote: room again for a stamp.
    for (int i = 0; i < kBurst; ++i) msgs[i].msg_hdr.msg_controllen = kCtrlSpace;
    const int got = recvmmsg(fds_[port], msgs, kBurst, MSG_DONTWAIT, nullptr);
    if (got <= 0) break;
    for (int i = 0; i < got; ++i) {
      ++rx_frames_;
      Nanos at = now;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
          timespec ts;
          std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
          const Nanos stamp = static_cast<Nanos>(ts.tv_sec) * kSecond + ts.tv_nsec - rt_minus_mono;
          if (stamp <= now && stamp > now - kStampTrust) at = stamp;
        }
      forward(port, buf + i * kMaxFrame, msgs[i].msg_len, at);
    }
    taken += got;
    if (got < kBurst) break;
  }
  return taken;
}

void Forwarder::release_due(Nanos now, Nanos ahead) {
  // Each port's due frames go out in one sendmmsg: the queue's time order is kept per port,
  // which is the only order a receiver can see.
  const size_t nports = ports_.size();
  auto flush = [&](int port) {
    TxBatch& b = tx_[static_cast<size_t>(port)];
    int done = 0;
    while (done < b.n) {
      const int sent = sendmmsg(fds_[port], b.msgs + done, static_cast<unsigned>(b.n - done), MSG_DONTWAIT);
      if (sent <= 0) {
        ++tx_errors_;  // the frame at `done` could not leave (a full socket buffer): dropped
        ++done;
        continue;
      }
      tx_frames_ += static_cast<uint64_t>(sent);
      done += sent;
    }
    for (int i = 0; i < b.n; ++i) free_.push_back(b.bufs[i]);
    b.n = 0;
  };
  while (!held_.empty() && held_.top().at <= now + ahead) {
    const Held h = held_.top();
    held_.pop();
    late_max_ = std::max(late_max_, now - h.at);
    TxBatch& b = tx_[static_cast<size_t>(h.port)];
    b.iov[b.n] = {bufs_[h.buf].get(), buf_len_[h.buf]};
    b.msgs[b.n] = {};
    b.msgs[b.n].msg_hdr.msg_iov = &b.iov[b.n];
    b.msgs[b.n].msg_hdr.msg_iovlen = 1;
    b.bufs[b.n] = h.buf;
    if (++b.n == kBurst) flush(h.port);
  }
  for (size_t p = 0; p < nports; ++p)
    if (tx_[p].n) flush(static_cast<int>(p));
}

void Forwarder::run(const std::atomic<bool>& stop, Nanos duration, const std::string& stats_path,
                    std::atomic<bool>* dump) {
  std::vector<pollfd> pfd(fds_.size());
  for (size_t i = 0; i < fds_.size(); ++i) pfd[i] = {fds_[i], POLLIN, 0};
  Nanos next_stats = start_ + kSecond;
  Nanos next_tick = start_;  // busy mode's cadence
  while (!stop.load(std::memory_order_relaxed)) {
    Nanos now = clock_now();
    if (duration > 0 && now - start_ >= duration) break;
    if (!stats_path.empty() && (now >= next_stats || (dump && dump->exchange(false)))) {
      count_socket_drops();
      write_stats(stats_path);
      next_stats = now + kSecond;
    }
    apply_schedule(now);
    if (coalesce_.busy()) {
      // Busy: one wake per quantum, on a steady cadence, whatever arrives in between.
      next_tick = std::max(next_tick + coalesce_.quantum(), now);
      const timespec tick{static_cast<time_t>(next_tick / kSecond), static_cast<long>(next_tick % kSecond)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &tick, nullptr);
      ++busy_wakes_;
      const Nanos woke = clock_now();
      uint64_t got = 0;
      for (size_t i = 0; i < fds_.size(); ++i) got += static_cast<uint64_t>(receive(static_cast<int>(i), woke));
      release_due(clock_now(), coalesce_.ahead());
      coalesce_.arrived(woke, got);
      continue;
    }
    release_due(now, kReleaseAhead);
    EarlyWake::Plan plan{kIdleWait, false};
    if (!held_.empty()) plan = wake_.plan(now, held_.top().at - kReleaseAhead);
    const Nanos wait = plan.wait;
    const timespec ts{static_cast<time_t>(wait / kSecond), static_cast<long>(wait % kSecond)};
    const int r = ppoll(pfd.data(), pfd.size(), &ts, nullptr);
    if (r < 0 && errno != EINTR) break;
    if (plan.early) {
      if (r == 0) wake_.woke(clock_now() - (now + wait));
      else wake_.interrupted();
    }
    uint64_t got = 0;
    for (size_t i = 0; i < pfd.size(); ++i)
      if (pfd[i].revents & POLLIN) {
        got += static_cast<uint64_t>(receive(static_cast<int>(i), clock_now()));
        release_due(clock_now(), kReleaseAhead);
      }
    coalesce_.arrived(clock_now(), got);
    next_tick = clock_now();
  }
  if (!stats_path.empty()) {
    count_socket_drops();
    write_stats(stats_path);
  }
}

void Forwarder::apply_schedule(Nanos now) {
  // Pairs take the phase in force.
  const std::vector<PairSpec>& specs = profile_.at(now - start_);
  if (&specs == applied_) return;
  for (size_t k = 0; k < pairs_.size(); ++k) pairs_[k].set(specs[k]);
  applied_ = &specs;
}

void Forwarder::count_socket_drops() {
  // Frames the kernel dropped because our receive buffer was full: lost before any
  // impairment, so they must show rather than pass for the profile's loss.
  for (int fd : fds_) {
    tpacket_stats st{};
    socklen_t len = sizeof st;
    if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) rx_socket_drops_ += st.tp_drops;
  }
}

std::string Forwarder::stats_json() const {
  const int n = profile_.sites;
  std::string s = "{\"rx_frames\": " + std::to_string(rx_frames_) + ", \"tx_frames\": " + std::to_string(tx_frames_) +
                  ", \"tx_errors\": " + std::to_string(tx_errors_) +
                  ", \"rx_socket_drops\": " + std::to_string(rx_socket_drops_) + ", \"peak_held\": " + std::to_string(peak_held_) +
                  ", \"late_max_us\": " + std::to_string(late_max_ / 1000) +
                  ", \"early_wakes\": " + std::to_string(wake_.early_wakes()) +
                  ", \"busy_wakes\": " + std::to_string(busy_wakes_) +
                  ", \"coalesce_quantum_us\": " + std::to_string(coalesce_.quantum() / 1000) +
                  ", \"wake_margin_us\": " + std::to_string(wake_.margin() / 1000) +
                  ", \"pairs\": [";
  bool first = true;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const PairCounters& c = pairs_[static_cast<size_t>(i) * n + j].counters();
      if (!c.forwarded && !c.dropped_loss && !c.dropped_burst && !c.dropped_queue && !c.dropped_blackhole) continue;
      char b[512];
      std::snprintf(b, sizeof b,
                    "%s{\"from\": %d, \"to\": %d, \"forwarded\": %llu, \"forwarded_bytes\": %llu, \"dropped_loss\": %llu, "
                    "\"dropped_burst\": %llu, \"dropped_queue\": %llu, \"dropped_blackhole\": %llu, \"duplicated\": %llu, "
                    "\"reordered\": %llu, \"queue_peak_bytes\": %llu}",
                    first ? "" : ", ", i + 1, j + 1, (unsigned long long)c.forwarded,
                    (unsigned long long)c.forwarded_bytes, (unsigned long long)c.dropped_loss,
                    (unsigned long long)c.dropped_burst, (unsigned long long)c.dropped_queue,
                    (unsigned long long)c.dropped_blackhole, (unsigned long long)c.duplicated,
                    (unsigned long long)c.reordered, (unsigned long long)c.queue_peak_bytes);
      s += b;
      first = false;
    }
  return s + "]}";
}

void Forwarder::write_stats(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << stats_json() << "\n";
  }
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace sg::wanem
