#include "topology/chunk_sim.h"

#include <algorithm>
#include <cstdint>
#include <queue>
#include <vector>

namespace sg::topo {
namespace {

enum class Kind : uint8_t { kReady, kArriveUp, kArriveDown, kAtRelay, kServerFree, kStage };

struct Event {
  double t;
  uint64_t seq;
  Kind kind;
  int shard, chunk, site;
  int dest;    // kAtRelay: final site of the hop; kServerFree: server index
  bool up;     // kAtRelay: which arrival the hop ends in
  // kStage: the chunk left one server of the physical hop hop_from->hop_to and enters
  // stage `stage` (1 link, 2 receiver's ingress cap); the hop then ends in an event of
  // kind `then` with the fields above.
  Kind then = Kind::kReady;
  int stage = 0, hop_from = 0, hop_to = 0;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// Work waiting at a server; lower chunk index first (keeps every shard's pipeline moving,
// as a sender that interleaves its flows would), then arrival order.
struct Job {
  int chunk;
  uint64_t seq;
  double seconds;
  double delay;  // added after service (propagation)
  Event done;    // pushed at finish + delay
  bool operator>(const Job& o) const { return chunk != o.chunk ? chunk > o.chunk : seq > o.seq; }
};

struct Server {
  bool busy = false;
  std::priority_queue<Job, std::vector<Job>, std::greater<Job>> waiting;
};

class Sim {
 public:
  Sim(const Network& net, const Plan& plan, double chunk)
      : net_(net), plan_(plan), chunk_(chunk),
        servers_(static_cast<size_t>(resource_count(net))),
        rr_(static_cast<size_t>(net.n) * net.n) {}

  double run() {
    const int n = net_.n;
    children_.assign(plan_.shards.size(), std::vector<int>(n, 0));
    nchunks_.resize(plan_.shards.size());
    pending_.resize(plan_.shards.size());
    int max_chunks = 0;
    for (size_t s = 0; s < plan_.shards.size(); ++s) {
      const ShardTree& sh = plan_.shards[s];
      for (int v = 0; v < n; ++v)
        if (sh.parent[v] != kNoSite) ++children_[s][sh.parent[v]];
      nchunks_[s] = static_cast<int>((sh.bytes() + static_cast<uint64_t>(chunk_) - 1) / static_cast<uint64_t>(chunk_));
      pending_[s].assign(static_cast<size_t>(nchunks_[s]) * n, 0);
      max_chunks = std::max(max_chunks, nchunks_[s]);
    }
    // Every site's own chunk is ready at 0; a site is ready to forward once its children's
    // copies are added as well (handled in on_ready counting).
    for (int c = 0; c < max_chunks; ++c)
      for (size_t s = 0; s < plan_.shards.size(); ++s)
        if (c < nchunks_[s])
          for (int v = 0; v < n; ++v)
            if (children_[s][v] == 0) push({0.0, 0, Kind::kReady, static_cast<int>(s), c, v, 0, false});
    double done = 0;
    while (!q_.empty()) {
      Event e = q_.top();
      q_.pop();
      done = std::max(done, e.t);
      switch (e.kind) {
        case Kind::kReady:
          if (e.dest == -1) {
            on_added(e);
          } else {
            on_ready(e);
          }
          break;
        case Kind::kArriveUp: on_arrive_up(e); break;
        case Kind::kArriveDown: on_arrive_down(e); break;
        case Kind::kAtRelay: send_link(e.site, e.dest, e.t, e); break;
        case Kind::kServerFree: start_next(e.dest, e.t); break;
        case Kind::kStage: {
          Event cont = e;
          cont.kind = e.then;
          enter(e.stage, e.hop_from, e.hop_to, e.t, cont);
          break;
        }
      }
    }
    return done;
  }

 private:
  double bytes_of(int s, int c) const {
    const double total = static_cast<double>(plan_.shards[s].bytes());
    return std::min(chunk_, total - chunk_ * c);
  }
  void push(Event e) {
    e.seq = seq_++;
    q_.push(e);
  }
  int link_server(int from, int to) const { return from * net_.n + to; }
  int agg_server(int site) const { return net_.n * net_.n + site; }
  int egress_server(int site) const { return egress_resource(net_, site); }
  int ingress_server(int site) const { return ingress_resource(net_, site); }
  // Queues `seconds` of work at server `sv`; `done` fires `delay` after it is served.
  void serve(int sv, double t, int chunk, double seconds, double delay, const Event& done) {
    servers_[sv].waiting.push({chunk, seq_++, seconds, delay, done});
    if (!servers_[sv].busy) start_next(sv, t);
  }
  void start_next(int sv, double t) {
    Server& s = servers_[sv];
    s.busy = false;
    if (s.waiting.empty()) return;
    Job j = s.waiting.top();
    s.waiting.pop();
    s.busy = true;
    Event done = j.done;
    done.t = t + j.seconds + j.delay;
    push(done);
    push({t + j.seconds, 0, Kind::kServerFree, 0, 0, 0, sv, false});
  }
  // Sends chunk e.(shard,chunk) over one physical link from->to, ending in arrival `up`.
  void send_link(int from, int to, double t, const Event& e) {
    enter(0, from, to, t, {0, 0, e.up ? Kind::kArriveUp : Kind::kArriveDown, e.shard, e.chunk, to, 0, e.up});
  }
  // Stage `stage` of the physical hop from->to for done's chunk: 0 the sender's egress cap,
  // 1 the link, 2 the receiver's ingress cap (uncapped stages are skipped); `done` fires
  // when the hop is over.
  void enter(int stage, int from, int to, double t, const Event& done) {
    const double bytes = bytes_of(done.shard, done.chunk);
    auto next = [&](int st) {
      Event e = done;
      e.then = done.kind;
      e.kind = Kind::kStage;
      e.stage = st;
      e.hop_from = from;
      e.hop_to = to;
      return e;
    };
    if (stage == 0) {
      if (const double cap = net_.egress_cap(from); cap > 0) {
        serve(egress_server(from), t, done.chunk, bytes / cap, 0.0, next(1));
        return;
      }
      stage = 1;
    }
    if (stage == 1) {
      const bool capped = net_.ingress_cap(to) > 0;
      serve(link_server(from, to), t, done.chunk, bytes / net_.link_bw(from, to), net_.prop(from, to),
            capped ? next(2) : done);
      return;
    }
    serve(ingress_server(to), t, done.chunk, bytes / net_.ingress_cap(to), 0.0, done);
  }
  // Sends a chunk over the tree edge from->to, via a relay if the link's split says so.
  void send_edge(int from, int to, double t, int s, int c, bool up) {
    Event e{t, 0, Kind::kAtRelay, s, c, from, to, up};
    const int via = pick_path(from, to);
    if (via < 0) {
      send_link(from, to, t, e);
      return;
    }
    enter(0, from, via, t, {0, 0, Kind::kAtRelay, s, c, via, to, up});
  }
  // Smooth weighted round robin over {direct, relays}; returns the relay or -1 for direct.
  int pick_path(int from, int to) {
    const LinkSplit* sp = plan_.split_for(from, to);
    if (!sp) return -1;
    std::vector<int64_t>& cur = rr_[static_cast<size_t>(from) * net_.n + to];
    cur.resize(sp->relays.size() + 1, 0);
    const int64_t total = sp->total_weight();
    size_t best = 0;
    for (size_t k = 0; k < cur.size(); ++k) {
      cur[k] += k == 0 ? sp->direct_weight : sp->relays[k - 1].weight;
      if (cur[k] > cur[best]) best = k;
    }
    cur[best] -= total;
    return best == 0 ? -1 : sp->relays[best - 1].via;
  }
  void on_ready(const Event& e) {
    const ShardTree& sh = plan_.shards[e.shard];
    if (e.site == sh.root) {
      broadcast(e.site, e.t, e.shard, e.chunk);
    } else {
      send_edge(e.site, sh.parent[e.site], e.t, e.shard, e.chunk, true);
    }
  }
  // A child's chunk is added into the site's accumulator (a server); the chunk is ready to
  // forward once every child's copy has been added.
  void on_arrive_up(const Event& e) {
    serve(agg_server(e.site), e.t, e.chunk, bytes_of(e.shard, e.chunk) / net_.agg[e.site], 0.0,
          {0, 0, Kind::kReady, e.shard, e.chunk, e.site, -1, true});
  }
  void on_added(const Event& e) {
    int& got = pending_[e.shard][static_cast<size_t>(e.chunk) * net_.n + e.site];
    if (++got == children_[e.shard][e.site]) push({e.t, 0, Kind::kReady, e.shard, e.chunk, e.site, 0, false});
  }
  void on_arrive_down(const Event& e) { broadcast(e.site, e.t, e.shard, e.chunk); }
  void broadcast(int v, double t, int s, int c) {
    const ShardTree& sh = plan_.shards[s];
    for (int u = 0; u < net_.n; ++u)
      if (sh.parent[u] == v) send_edge(v, u, t, s, c, false);
  }

  const Network& net_;
  const Plan& plan_;
  const double chunk_;
  std::vector<Server> servers_;
  std::vector<std::vector<int64_t>> rr_;
  std::vector<std::vector<int>> children_, pending_;
  std::vector<int> nchunks_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> q_;
  uint64_t seq_ = 0;
};

}  // namespace

double simulate_round(const Network& net, const Plan& plan, double chunk_bytes) {
  return Sim(net, plan, chunk_bytes).run();
}

}  // namespace sg::topo
