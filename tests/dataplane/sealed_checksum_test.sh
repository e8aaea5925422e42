#!/usr/bin/env bash
# UDP checksums on a port without checksum offload (net_af_packet on a veth pair in a network
# namespace of the test's own): a sealed gateway's LTP frames carry no UDP checksum (0, "none"
# in RFC 768: the AEAD tag covers every byte of the message) and a valid IPv4 checksum; with
# security.mode plain every UDP checksum is computed and valid. The kernel on the other end
# captures what the gateway sends (its CONTROL to a peer that never answers, through LtpTx as
# every LTP message).
#   sealed_checksum_test.sh STORMGATE_BINARY SOURCE_ROOT
set -uo pipefail
BIN="$1"; ROOT="$2"
# shellcheck source=../support/lone_gateway.sh
source "$ROOT/tests/support/lone_gateway.sh"
ns="sgsc$$"; prefix="sgsc$$"; tmp="$(mktemp -d)"; gw=""
cleanup() { [[ -n "$gw" ]] && kill -9 "$gw" 2>/dev/null; ip netns del "$ns" 2>/dev/null; rm -rf "$tmp" "/var/run/dpdk/$prefix"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$tmp/gw.log" 2>/dev/null; exit 1; }
[[ $(id -u) == 0 ]] || { echo "SKIP: needs root (network namespace)"; exit 77; }

"$BIN" --keygen "$tmp/wan.key" > /dev/null || fail "keygen"
ip netns add "$ns" || fail "cannot create a network namespace"
ip -n "$ns" link add sgsc0 type veth peer name sgsc1 || fail "veth"
ip -n "$ns" link set sgsc1 address 02:00:00:00:00:02
ip -n "$ns" addr add 10.56.0.2/24 dev sgsc1
# The kernel must not compute checksums the test wants to see as the gateway wrote them.
ip netns exec "$ns" ethtool -K sgsc0 tx off rx off >/dev/null 2>&1
ip netns exec "$ns" ethtool -K sgsc1 tx off rx off >/dev/null 2>&1
ip -n "$ns" link set sgsc0 up && ip -n "$ns" link set sgsc1 up || fail "links up"

run() {  # run sealed|plain -> the capture's line "udp_frames N valid V no_udp_checksum Z"
  local security="security: {key_file: $tmp/wan.key}"
  [[ $1 == plain ]] && security="security: {mode: plain}"
  lone_gateway_yaml "$tmp/gw.yaml" checksums "net_af_packet0,iface=sgsc0" 10.56.0 1 "$security"
  lone_gateway_start "$ns" "$BIN" "$prefix" "$tmp/gw.yaml" "$tmp/gw.log" 4
  ip netns exec "$ns" python3 "$ROOT/tests/dataplane/checksum_offload.py" capture sgsc1 1.5
  wait "$gw"; local rc=$?; gw=""
  [[ $rc == 0 ]] || fail "gateway ($1) exit $rc"
  grep -Eq "mbuf pool: ([0-9]+) of \1 back" "$tmp/gw.log" || fail "pool not full ($1)"
}

out="$(run sealed)"; echo "sealed: $out"
read -r _ frames _ valid _ none <<< "$out"
(( frames >= 10 )) || fail "the sealed gateway sent too few UDP frames ($frames) to judge"
(( none == frames )) || fail "$((frames - none)) of $frames sealed frames carried a UDP checksum (or a bad IPv4 one)"
out="$(run plain)"; echo "plain: $out"
read -r _ frames _ valid _ none <<< "$out"
(( frames >= 10 )) || fail "the plain gateway sent too few UDP frames ($frames) to judge"
(( valid == frames && none == 0 )) || fail "plain frames: $valid of $frames with valid checksums, $none without one"
echo ok
