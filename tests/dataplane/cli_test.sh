#!/usr/bin/env bash
# The stormgate binary as a user meets it: --check-config on every shipped example (exit 0),
# on a broken file (exit 1, one positioned line per problem), and a clean stop on SIGINT
# (exit 0, final counters, every mbuf back).
#   cli_test.sh STORMGATE_BINARY SOURCE_ROOT
set -uo pipefail
BIN="$1"; ROOT="$2"
tmp="$(mktemp -d)"; prefix="sgcli$$"
trap 'rm -rf "$tmp" /var/run/dpdk/$prefix' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$BIN" --check-config "$ROOT"/config/testbed/*.yaml "$ROOT"/config/examples/*.yaml || fail "a shipped example does not validate"

printf 'site: {id: 1, name: a}\nports:\n  - {name: p, vdev: net_ring0, ipv4: 10.0.0.1, mtu: 100}\npeers:\n  - {id: 1, name: b, address: 10.0.0.2}\ntransprot: {}\n' > "$tmp/bad.yaml"
"$BIN" --check-config "$tmp/bad.yaml" 2> "$tmp/err.txt"; rc=$?
[[ $rc == 1 ]] || fail "broken config: exit $rc, expected 1"
cat "$tmp/err.txt"
grep -q "bad.yaml:3:53: ports\[0\].mtu: expected an integer in \[576, 9600\], found 100" "$tmp/err.txt" || fail "mtu message"
grep -q "bad.yaml:6:1: transprot: expected one of the keys {" "$tmp/err.txt" || fail "unknown key message"
[[ $(wc -l < "$tmp/err.txt") == 2 ]] || fail "expected exactly 2 problem lines (the peer id clash is checked once keys are clean)"

"$BIN" -l 0-1 --no-huge --no-pci -m 128 --file-prefix "$prefix" --log-level='*:warning' -- \
  --config "$ROOT/config/examples/single-ring.yaml" > "$tmp/run.txt" 2>&1 &
pid=$!
for _ in $(seq 50); do grep -q running "$tmp/run.txt" && break; sleep 0.2; done
grep -q running "$tmp/run.txt" || { cat "$tmp/run.txt"; fail "gateway did not start"; }
kill -INT "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; fail "gateway ignored SIGINT for 10 s"; }
wait "$pid"; rc=$?
cat "$tmp/run.txt"
[[ $rc == 0 ]] || fail "exit $rc after SIGINT"
grep -q "final:" "$tmp/run.txt" || fail "no final counters"
grep -Eq "mbuf pool: ([0-9]+) of \1 back" "$tmp/run.txt" || fail "pool not full"
echo ok
