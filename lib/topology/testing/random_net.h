// Random heterogeneous networks for the topology tests and benchmarks (seeded, reproducible).
// Header-only and not part of sg_topology: only tests/ and perf/ include it.
#pragma once

#include <cmath>

#include "common/rng.h"
#include "topology/network.h"

namespace sg::topo::testing {

// Per pair a base throughput log-uniform in [50 Mbit/s, 10 Gbit/s], each direction
// 0.5..1 x base; RTT 5..150 ms; aggregation 2..20 GB/s.
inline Network random_net(int n, Rng& rng) {
  Network net = Network::uniform(n, 1, 0, 1);
  const double lo = std::log(50e6 / 8), hi = std::log(10e9 / 8);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      const double base = std::exp(lo + (hi - lo) * rng.uniform());
      net.bw[i * n + j] = base * (0.5 + 0.5 * rng.uniform());
      net.bw[j * n + i] = base * (0.5 + 0.5 * rng.uniform());
    }
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) net.rtt[i * n + j] = net.rtt[j * n + i] = 0.005 + 0.145 * rng.uniform();
  for (int i = 0; i < n; ++i) net.agg[i] = 2e9 + 18e9 * rng.uniform();
  return net;
}

}  // namespace sg::topo::testing
