#!/usr/bin/env bash
# Checksum offload on a device that offers it (net_tap: the PMD fills in the checksums the
# mbuf's offload flags ask for, as a NIC does): a gateway in a network namespace of its own
# sends its job's LTP traffic with the checksums left to the device, and the kernel on the
# other side of the tap must find every IPv4 and UDP checksum valid. Receive: frames with a
# bad UDP or IPv4 checksum are dropped by the device's verdict and counted by reason.
#   checksum_offload_test.sh STORMGATE_BINARY SOURCE_ROOT
set -uo pipefail
BIN="$1"; ROOT="$2"
# shellcheck source=../support/lone_gateway.sh
source "$ROOT/tests/support/lone_gateway.sh"
ns="sgck$$"; prefix="sgck$$"; tmp="$(mktemp -d)"
cleanup() { [[ -n "${gw:-}" ]] && kill -9 "$gw" 2>/dev/null; ip netns del "$ns" 2>/dev/null; rm -rf "$tmp" "/var/run/dpdk/$prefix"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$tmp/gw.log" 2>/dev/null; exit 1; }
[[ $(id -u) == 0 ]] || { echo "SKIP: needs root (network namespace)"; exit 77; }

lone_gateway_yaml "$tmp/gw.yaml" offload "net_tap0,iface=sgck0" 10.55.0 1 "security: {key_file: $tmp/wan.key}"
"$BIN" --keygen "$tmp/wan.key" > /dev/null || fail "keygen"
ip netns add "$ns" || fail "cannot create a network namespace"
lone_gateway_start "$ns" "$BIN" "$prefix" "$tmp/gw.yaml" "$tmp/gw.log" 6 --log-level='stormgate.dataplane:debug'
for _ in $(seq 50); do ip netns exec "$ns" ip link show sgck0 >/dev/null 2>&1 && break; sleep 0.1; done
grep -q "checksum offload: TX IPv4 on, TX UDP on, RX on" "$tmp/gw.log" || fail "net_tap did not offer the offloads"
ip netns exec "$ns" ip link set sgck0 address 02:00:00:00:00:02
ip netns exec "$ns" ip addr add 10.55.0.2/24 dev sgck0
ip netns exec "$ns" ip link set sgck0 up
out="$(ip netns exec "$ns" python3 "$ROOT/tests/dataplane/checksum_offload.py" capture sgck0 1.5)"
echo "$out"
read -r _ frames _ valid _ <<< "$out"
(( frames >= 20 )) || fail "the gateway sent too few UDP frames ($frames) to judge"
(( valid == frames )) || fail "$((frames - valid)) of $frames frames had a bad checksum"
ip netns exec "$ns" python3 "$ROOT/tests/dataplane/checksum_offload.py" corrupt sgck0 02:00:00:00:00:01 \
  02:00:00:00:00:02 10.55.0.1 10.55.0.2 7400 5 || fail "could not send the corrupted frames"
wait "$gw"; rc=$?; gw=""
cat "$tmp/gw.log"
[[ $rc == 0 ]] || fail "gateway exit $rc"
grep -q "bad_udp=5" "$tmp/gw.log" || fail "bad UDP checksums not dropped as bad_udp"
grep -q "bad_ip_checksum=5" "$tmp/gw.log" || fail "bad IPv4 checksums not dropped as bad_ip_checksum"
grep -Eq "mbuf pool: ([0-9]+) of \1 back" "$tmp/gw.log" || fail "pool not full"
echo ok
