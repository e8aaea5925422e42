#!/usr/bin/env bash
# System test: scripts/testbed --pmd af_xdp — 3 sites, the gateways on net_af_xdp with
# dataplane/xdp/steer_udp.bpf.o on up0 and lan0, 2 workers per site synchronising a 1 MB
# gradient for a few rounds. Checks:
#   - every worker got the exact global mean every round (sync_bench --expect global exits
#     non-zero otherwise, and the testbed returns that): stormgate's UDP port reached the
#     gateways, since the kernels beside them have no socket on it;
#   - kernel traffic to other ports kept flowing through the same interfaces: ICMP, UDP and
#     TCP echo across the sites before the workers start and every second while they run
#     (the testbed fails the run with 3 when a probe gets no answer; here we also require
#     that probes ran);
#   - nothing is left behind (namespaces, DPDK runtime directories).
# Skipped (exit 77) without root, network namespaces or python3-numpy.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[[ $(id -u) -eq 0 ]] || { echo "skip: needs root"; exit 77; }
ip netns list >/dev/null 2>&1 || { echo "skip: no network namespaces"; exit 77; }
/usr/bin/python3 -c "import numpy" 2>/dev/null || { echo "skip: no python3-numpy"; exit 77; }
[[ -f "${SG_XDP_PROG:-}" ]] || { echo "SG_XDP_PROG does not name the built XDP program"; exit 1; }
OUT="$(mktemp -d /tmp/sg-systest-xdp.XXXX)"
trap 'rm -rf "$OUT"' EXIT

BENCH="/usr/bin/python3 $ROOT/python/sync_bench.py --bytes 1048576 --rounds 3 --warmup 1 --timeout 60"
rc=0
"$ROOT/scripts/testbed" --pmd af_xdp --sites 3 --workers 2 --rates 200,100,50 --model-bytes 1048576 \
  --duration 90 --worker-cmd "$BENCH --backend stormgate --expect global --out $OUT/result.json" \
  2> >(tee "$OUT/testbed.err" >&2) || rc=$?
wait  # the tee
[[ $rc -eq 0 ]] || { echo "testbed failed with $rc"; exit 1; }
[[ -s "$OUT/result.json" ]] || { echo "no result from the workers"; exit 1; }
cat "$OUT/result.json"; echo

# Before the workers: each site reached the next one through both kernels.
n=$(grep -c 'kernel path site [0-9]* -> site [0-9]*: icmp=ok udp=ok tcp=ok' "$OUT/testbed.err" || true)
[[ $n -eq 3 ]] || { echo "expected 3 kernel-path checks before the workers, saw $n"; exit 1; }
# While they ran: at least one probe per site, all answered.
line="$(grep 'kernel path during the run:' "$OUT/testbed.err" || true)"
[[ "$line" =~ during\ the\ run:\ ([0-9]+)/([0-9]+)\ probes ]] || { echo "no kernel-path tally"; exit 1; }
ok=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
[[ $total -ge 3 && $ok -eq $total ]] || { echo "kernel path during the run: $ok/$total"; exit 1; }

# Other testbeds may run beside this one: look only for this run's prefix.
prefix="$(sed -n 's/.*, prefix \(sg-[0-9]*\), dir .*/\1/p' "$OUT/testbed.err" | head -1)"
[[ -n "$prefix" ]] || { echo "the testbed did not say its prefix"; exit 1; }
if ip netns list | grep -q "^$prefix-"; then
  echo "testbed namespaces left behind:"; ip netns list | grep "^$prefix-"; exit 1
fi
if compgen -G "/var/run/dpdk/$prefix-*" >/dev/null; then
  echo "DPDK runtime directories left behind:"; ls -d "/var/run/dpdk/$prefix-"*; exit 1
fi
echo "ok"
