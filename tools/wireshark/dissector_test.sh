#!/usr/bin/env bash
# The LTP dissector in tshark:
#  1. on a capture ltpgen wrote for config/testbed/site-a.yaml (a round's DATA from its peers
#     and one message of every other type): every frame decodes as LTP, nothing malformed,
#     each type's fields read back as written;
#  2. on a capture of a running gateway: stormgate on net_tap in a network namespace of its
#     own sends its job's traffic to the kernel side of the tap, where tshark captures it
#     (no hugepages needed, unlike dpdk-dumpcap, which attaches as a secondary process).
#   dissector_test.sh LTPGEN STORMGATE SOURCE_ROOT
set -uo pipefail
LTPGEN="$1"; BIN="$2"; ROOT="$3"
# shellcheck source=../../tests/support/lone_gateway.sh
source "$ROOT/tests/support/lone_gateway.sh"
LUA="$ROOT/tools/wireshark/stormgate_ltp.lua"
tmp="$(mktemp -d)"; ns="sgws$$"; prefix="sgws$$"; gw=""
cleanup() { [[ -n "$gw" ]] && kill -9 "$gw" 2>/dev/null; ip netns del "$ns" 2>/dev/null; rm -rf "$tmp" "/var/run/dpdk/$prefix"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v tshark >/dev/null || fail "tshark missing (scripts/setup installs it)"
ts() { tshark -X lua_script:"$LUA" "$@" 2>/dev/null; }

# 1. Generated capture: sealed as the testbed's peers would seal it (a key of our own).
"$BIN" --keygen "$tmp/wan.key" > /dev/null || fail "keygen"
sed "s|key_file: .*|key_file: $tmp/wan.key|" "$ROOT/config/testbed/site-a.yaml" > "$tmp/site-a.yaml"
"$LTPGEN" --config "$tmp/site-a.yaml" --out "$tmp/gen.pcap" --all-types || fail "ltpgen"
total=$(ts -r "$tmp/gen.pcap" | wc -l)
ltp=$(ts -r "$tmp/gen.pcap" -Y stormgate_ltp | wc -l)
bad=$(ts -r "$tmp/gen.pcap" -Y '_ws.expert.severity >= warning' | wc -l)
echo "generated: $total frames, $ltp decoded as LTP, $bad with warnings"
[[ $total -gt 100 && $ltp == "$total" ]] || fail "not every frame decoded as LTP"
[[ $bad == 0 ]] || fail "$bad frames flagged malformed"
sealed=$(ts -r "$tmp/gen.pcap" -Y 'stormgate_ltp.flags.sealed == 1 && stormgate_ltp.trailer.lane == 1' | wc -l)
[[ $sealed == "$total" ]] || fail "$sealed of $total frames show the seal's trailer"
ts -r "$tmp/gen.pcap" -T fields -e stormgate_ltp.type > "$tmp/types"
for t in 2 3 4 5 6; do [[ $(grep -cx "$t" "$tmp/types") == 1 ]] || fail "type $t not decoded once"; done
data=$(grep -cx 1 "$tmp/types")
# DATA fields: site-a (1) hears from sites 2 and 3, job 1, round 1, policy 1, f32, chunk < count.
ts -r "$tmp/gen.pcap" -Y 'stormgate_ltp.type == 1' -T fields -E separator=, \
  -e stormgate_ltp.src_node -e stormgate_ltp.job -e stormgate_ltp.round -e stormgate_ltp.policy_version \
  -e stormgate_ltp.codec -e stormgate_ltp.chunk_index -e stormgate_ltp.chunk_count -e stormgate_ltp.payload_len > "$tmp/data"
awk -F, '($1 != 2 && $1 != 3) || $2 != 1 || $3 != 1 || $4 != 1 || $5 != 0 || $6 >= $7 || $8 < 1 || $8 > 1344 {bad++}
         END {exit bad > 0}' "$tmp/data" || fail "DATA fields off: $(head -3 "$tmp/data")"
[[ $(wc -l < "$tmp/data") == "$data" ]] || fail "DATA rows"
ts -r "$tmp/gen.pcap" -Y 'stormgate_ltp.type == 3' -T fields -e stormgate_ltp.close_reason -e stormgate_ltp.kept_count | grep -q "^1	15$" \
  || fail "CLOSE fields"
ts -r "$tmp/gen.pcap" -Y 'stormgate_ltp.type == 6' -T fields -e stormgate_ltp.probe_train -e stormgate_ltp.probe_count | grep -q "^7	8$" \
  || fail "PROBE fields"

# 2. A running gateway's traffic.
if [[ $(id -u) != 0 ]]; then echo "SKIP part 2: needs root"; exit 0; fi
lone_gateway_yaml "$tmp/gw.yaml" wireshark "net_tap0,iface=sgws0" 10.56.0 5 "security: {key_file: $tmp/wan.key}"
ip netns add "$ns" || fail "netns"
lone_gateway_start "$ns" "$BIN" "$prefix" "$tmp/gw.yaml" "$tmp/gw.log" 5
for _ in $(seq 50); do ip netns exec "$ns" ip link show sgws0 >/dev/null 2>&1 && break; sleep 0.1; done
ip netns exec "$ns" ip link set sgws0 address 02:00:00:00:00:02
ip netns exec "$ns" ip addr add 10.56.0.2/24 dev sgws0
ip netns exec "$ns" ip link set sgws0 up
ip netns exec "$ns" timeout 3 tshark -i sgws0 -w "$tmp/live.pcap" -f "udp port 7400" >/dev/null 2>&1
wait "$gw"; gw=""
live=$(ts -r "$tmp/live.pcap" -Y 'stormgate_ltp.job == 5' | wc -l)
ltypes=$(ts -r "$tmp/live.pcap" -T fields -e stormgate_ltp.type | sort -u | tr '\n' ' ')
echo "live capture: $live LTP messages of job 5, types: $ltypes"
[[ $live -gt 10 ]] || { cat "$tmp/gw.log"; fail "no LTP decoded in the live capture"; }
[[ $(ts -r "$tmp/live.pcap" -Y '_ws.expert.severity >= warning' | wc -l) == 0 ]] || fail "live frames flagged malformed"
echo ok
