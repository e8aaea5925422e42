#!/usr/bin/env bash
# A gateway on a vhost-user port (net_vhost, the port type pktgen feeds through net_virtio_user):
# dpdk-testpmd replays ltpgen's capture in a loop from a net_pcap port through net_virtio_user
# into the gateway for 3 seconds. Every frame testpmd handed to virtio-user must reach the
# gateway and its LTP receiver as DATA (unsealed: security.mode plain), at least one whole pass
# of the capture, none dropped, and every mbuf must be back when the gateway stops.
#   vhost_port_test.sh STORMGATE_BINARY LTPGEN_BINARY
set -uo pipefail
BIN="$1"; GEN="$2"
tmp="$(mktemp -d)"; sock="/run/sg-vhost-test-$$.sock"; prefix="sgvh$$"
cleanup() { for p in "${gw:-}" "${tp:-}"; do [[ -n "$p" ]] && kill -9 "$p" 2>/dev/null; done
            [[ -n "${KEEP:-}" ]] || rm -rf "$tmp"; rm -rf "$sock" /var/run/dpdk/${prefix}*; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- gateway"; cat "$tmp/gw.log" 2>/dev/null; echo "--- testpmd"; tail -30 "$tmp/tp.log" 2>/dev/null; exit 1; }
command -v dpdk-testpmd > /dev/null || { echo "SKIP: no dpdk-testpmd"; exit 77; }

cat > "$tmp/site.yaml" <<YAML
site: {id: 1, name: vhost-site}
ports:
  - {name: wan, vdev: "net_vhost0,iface=$sock", ipv4: 10.77.0.1, mac: "02:00:00:00:01:02"}
peers:
  - {id: 2, name: b, address: 10.77.0.2, mac: "02:00:00:00:02:01"}
  - {id: 3, name: c, address: 10.77.0.3, mac: "02:00:00:00:03:01"}
transport: {chunk_bytes: 1344}
telemetry: {stats_interval_ms: 0}
dataplane: {mbufs: 8191}
job: {id: 1, model_bytes: 2000000, workers: 0, round_timeout_ms: 500}
security: {mode: plain}
YAML
"$GEN" --config "$tmp/site.yaml" --out "$tmp/round.pcap" > "$tmp/gen.txt" || fail "ltpgen"
frames=$(awk '{print $2}' "$tmp/gen.txt")
(( frames > 100 )) || fail "ltpgen wrote too few frames ($frames)"

# The gateway (vhost-user server) polls on lcore 0; testpmd (the virtio-user client) on lcore 1.
"$BIN" -l 0-1 --main-lcore 1 --no-huge --no-pci -m 256 --file-prefix "${prefix}g" --log-level='*:warning' -- \
  --config "$tmp/site.yaml" --duration 30 > "$tmp/gw.log" 2>&1 &
gw=$!
for _ in $(seq 100); do [[ -S "$sock" ]] && break; sleep 0.1; done
[[ -S "$sock" ]] || fail "the gateway made no vhost-user socket"
# Interactive, so that forwarding stops while virtio-user is still up: the gateway then takes
# what is left in the ring before the port closes, and the counts can be compared exactly.
{ sleep 1; echo start; sleep 3; echo stop; sleep 1; echo "show port stats 1"; echo quit; } |
  timeout -s INT 30 dpdk-testpmd -l 0-1 --main-lcore 0 --no-huge --no-pci -m 512 --file-prefix "${prefix}t" \
  --log-level='*:warning' --vdev "net_pcap0,rx_pcap=$tmp/round.pcap,tx_pcap=/dev/null,infinite_rx=1" \
  --vdev "net_virtio_user0,path=$sock" -- -i --forward-mode=io --no-mlockall --total-num-mbufs 16383 \
  > "$tmp/tp.log" 2>&1 &
tp=$!
wait "$tp"; tp=""
sleep 0.5  # what is still in the vhost ring is taken
kill -INT "$gw" 2>/dev/null; wait "$gw"; rc=$?; gw=""
cat "$tmp/gw.log"
[[ $rc == 0 ]] || fail "gateway exit $rc"
# testpmd's statistics after forwarding stopped: what it sent into virtio-user (port 1).
sent=$(awk '/NIC statistics for port 1/ {p = 1} /NIC statistics for port 0/ {p = 0} p && /TX-packets:/ {s = $2; exit} END {print s + 0}' "$tmp/tp.log")
rx=$(sed -n 's/.*final: rx \([0-9]*\) pkts.*/\1/p' "$tmp/gw.log")
got=$(sed -n 's/.*LTP DATA in \([0-9]*\) .*/\1/p' "$tmp/gw.log" | tail -1)
echo "testpmd sent $sent into virtio-user; the gateway received $rx, LTP DATA in $got; the capture holds $frames"
(( sent >= frames )) || fail "testpmd sent fewer frames ($sent) than one pass of the capture ($frames)"
[[ "$rx" == "$sent" ]] || fail "the gateway received $rx frames of the $sent sent"
[[ "$got" == "$rx" ]] || fail "LTP DATA in $got of $rx frames received"
grep -q "drops: none" "$tmp/gw.log" || fail "frames dropped"
grep -Eq "mbuf pool: ([0-9]+) of \1 back" "$tmp/gw.log" || fail "pool not full"
echo ok
