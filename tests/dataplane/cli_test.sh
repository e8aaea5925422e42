#!/usr/bin/env bash
# The stormgate binary as a user meets it: --check-config on every shipped example (exit 0),
# on a broken file (exit 1, one positioned line per problem), a warning for a key file that is
# not there, and a clean stop on SIGINT (exit 0, final counters, every mbuf back).
#   cli_test.sh STORMGATE_BINARY SOURCE_ROOT
set -uo pipefail
BIN="$1"; ROOT="$2"
tmp="$(mktemp -d)"; prefix="sgcli$$"
trap 'rm -rf "$tmp" /var/run/dpdk/$prefix' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Every site config shipped (config/testbed/defaults/ holds sections, not sites: its own unit
# test, ConfigExamples.TestbedDefaultsAreGatewaySections, checks them).
examples=("$ROOT"/config/testbed/*.yaml "$ROOT"/config/examples/*.yaml)
[[ ${#examples[@]} -ge 5 ]] || fail "shipped examples not found under $ROOT/config"
"$BIN" --check-config "${examples[@]}" || fail "a shipped example does not validate"

printf 'site: {id: 1, name: a}\nports:\n  - {name: p, vdev: net_ring0, ipv4: 10.0.0.1, mtu: 100}\npeers:\n  - {id: 1, name: b, address: 10.0.0.2}\ntransprot: {}\n' > "$tmp/bad.yaml"
"$BIN" --check-config "$tmp/bad.yaml" 2> "$tmp/err.txt"; rc=$?
[[ $rc == 1 ]] || fail "broken config: exit $rc, expected 1"
cat "$tmp/err.txt"
grep -q "bad.yaml:3:53: ports\[0\].mtu: expected an integer in \[576, 9600\], found 100" "$tmp/err.txt" || fail "mtu message"
grep -q "bad.yaml:6:1: transprot: expected one of the keys {" "$tmp/err.txt" || fail "unknown key message"
[[ $(wc -l < "$tmp/err.txt") == 2 ]] || fail "expected exactly 2 problem lines (the peer id clash is checked once keys are clean)"

# A valid config whose key file is not there (yet): valid (exit 0), with a warning naming the key.
printf 'site: {id: 1, name: a}\nports:\n  - {name: p, vdev: net_ring0, ipv4: 10.0.0.1}\npeers:\n  - {id: 2, name: b, address: 10.0.0.2}\nsecurity: {key_file: %s/none.key}\n' "$tmp" > "$tmp/nokey.yaml"
"$BIN" --check-config "$tmp/nokey.yaml" 2> "$tmp/warn.txt" || fail "a config whose key file is missing is still valid"
grep -q "nokey.yaml: warning: security.key_file: .*none.key" "$tmp/warn.txt" || { cat "$tmp/warn.txt"; fail "no warning about the missing key file"; }

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

# --log-level works per component: the dataplane's debug lines (a port's start-up) appear
# only when stormgate.dataplane is raised to debug, and nothing else gets louder.
run_briefly() {  # run_briefly OUT EAL_LOG_ARGS...: start the gateway, stop it once running
  local out="$1"; shift
  "$BIN" -l 0-1 --no-huge --no-pci -m 128 --file-prefix "$prefix" "$@" -- \
    --config "$ROOT/config/examples/single-ring.yaml" > "$out" 2>&1 &
  local p=$!
  for _ in $(seq 50); do grep -q running "$out" && break; sleep 0.2; done
  kill -INT "$p"; wait "$p"
}
run_briefly "$tmp/quiet.txt" --log-level='*:warning'
run_briefly "$tmp/debug.txt" --log-level='*:warning' --log-level='stormgate.dataplane:debug'
cat "$tmp/debug.txt"
grep -q "port 'ring0' (net_ring0).*started" "$tmp/debug.txt" || fail "stormgate.dataplane:debug shows no port start-up line"
grep -q "started" "$tmp/quiet.txt" && fail "a debug line appeared at the default level"
grep -q "engine 0 on lcore" "$tmp/debug.txt" && fail "stormgate.control printed at info although only dataplane was raised"
run_briefly "$tmp/control.txt" --log-level='*:warning' --log-level='stormgate.control:info'
grep -q "engine 0 on lcore" "$tmp/control.txt" || fail "stormgate.control:info shows no engine line"

# telemetry.enabled: the /stormgate/* endpoints exist on DPDK's telemetry socket, or not.
query() {  # query OUT ENABLED: start a gateway, ask /stormgate/stats on its telemetry socket
  local out="$1" enabled="$2"
  printf 'telemetry:\n  stats_interval_ms: 0\n  enabled: %s\n' "$enabled" > "$tmp/tel-extra.yaml"
  grep -v '^telemetry:\|stats_interval_ms' "$ROOT/config/examples/single-ring.yaml" > "$tmp/tel.yaml"
  cat "$tmp/tel-extra.yaml" >> "$tmp/tel.yaml"
  "$BIN" -l 0-1 --no-huge --no-pci -m 128 --file-prefix "$prefix" --log-level='*:warning' -- \
    --config "$tmp/tel.yaml" > "$tmp/tel-run.txt" 2>&1 &
  local p=$!
  for _ in $(seq 50); do grep -q running "$tmp/tel-run.txt" && break; sleep 0.2; done
  python3 - "/var/run/dpdk/$prefix/dpdk_telemetry.v2" > "$out" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.recv(4096)  # the greeting
s.send(b"/stormgate/stats")
print(s.recv(65536).decode())
PY
  kill -INT "$p"; wait "$p"
}
# Operators' views of a running gateway: stormctl over the telemetry socket, Prometheus text.
port=$(( 20000 + $$ % 20000 ))
grep -v '^telemetry:\|stats_interval_ms' "$ROOT/config/examples/single-ring.yaml" > "$tmp/ops.yaml"
printf 'telemetry:\n  stats_interval_ms: 0\n  prometheus_port: %s\n' "$port" >> "$tmp/ops.yaml"
# Two jobs (one site: synthetic rounds) and the desk for announced ones: metrics per job.
printf 'jobs:\n  - {id: 3, model_bytes: 65536}\n  - {id: 4, model_bytes: 32768}\nadmission: {enabled: true}\n' >> "$tmp/ops.yaml"
"$BIN" -l 0-1 --no-huge --no-pci -m 128 --file-prefix "$prefix" --log-level='*:warning' -- \
  --config "$tmp/ops.yaml" > "$tmp/ops-run.txt" 2>&1 &
op=$!
for _ in $(seq 50); do grep -q running "$tmp/ops-run.txt" && break; sleep 0.2; done
"$ROOT/tools/stormctl" --prefix "$prefix" status > "$tmp/ctl.txt" 2>&1 || { cat "$tmp/ctl.txt"; fail "stormctl status"; }
"$ROOT/tools/stormctl" --prefix "$prefix" links >> "$tmp/ctl.txt" 2>&1 || fail "stormctl links"
python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$port/metrics', timeout=5).read().decode())" \
  > "$tmp/metrics.txt" 2>&1 || { cat "$tmp/metrics.txt"; fail "GET /metrics"; }
code=$(python3 -c "import urllib.request,urllib.error
try: urllib.request.urlopen('http://127.0.0.1:$port/other', timeout=5); print(200)
except urllib.error.HTTPError as e: print(e.code)")
kill -INT "$op"; wait "$op"
cat "$tmp/ctl.txt"; head -12 "$tmp/metrics.txt"
grep -q "^site ring-lab, 1 engine" "$tmp/ctl.txt" || fail "stormctl status: no site line"
grep -q "rx_packets" "$tmp/ctl.txt" || fail "stormctl status: no counters"
grep -q '^stormgate_rx_packets_total{site="ring-lab"} [0-9]' "$tmp/metrics.txt" || fail "metrics: rx_packets_total"
grep -q '^stormgate_drops_total{site="ring-lab",reason="bad_udp"} 0' "$tmp/metrics.txt" || fail "metrics: drops by reason"
grep -q '^# TYPE stormgate_drops_total counter' "$tmp/metrics.txt" || fail "metrics: TYPE lines"
grep -q '^stormgate_rounds_total{site="ring-lab",job="4"} [1-9]' "$tmp/metrics.txt" || fail "metrics: rounds of job 4"
grep -q '^stormgate_rounds_total{site="ring-lab",job="3"} [1-9]' "$tmp/metrics.txt" || fail "metrics: rounds of job 3"
[[ $(grep -c '^# TYPE stormgate_rounds_total' "$tmp/metrics.txt") == 1 ]] || fail "metrics: one family per name"
grep -q '^stormgate_worker_update_overlap_seconds{site="ring-lab",job="4"} -1$' "$tmp/metrics.txt" || fail "metrics: synthetic rounds have no worker update to measure"
grep -q '^stormgate_announced_jobs{site="ring-lab",status="running"} 2' "$tmp/metrics.txt" || fail "metrics: job registry"
[[ $code == 404 ]] || fail "GET /other answered $code, expected 404"
nogw="$("$ROOT/tools/stormctl" --prefix "nosuch$$" status 2>&1)" && fail "stormctl without a gateway succeeded"
grep -q "cannot reach" <<< "$nogw" || fail "stormctl without a gateway: $nogw"

query "$tmp/tel-on.txt" true
query "$tmp/tel-off.txt" false
cat "$tmp/tel-on.txt" "$tmp/tel-off.txt"
grep -q '"rx_packets"' "$tmp/tel-on.txt" || fail "telemetry.enabled true: /stormgate/stats answers no counters"
grep -q '"/stormgate/stats": *null' "$tmp/tel-off.txt" || fail "telemetry.enabled false: /stormgate/stats still answers"
echo ok
