#!/usr/bin/env bash
# SIGHUP reloads a running gateway's config (config/reload.h): two gateways on a veth pair
# between two network namespaces this test creates (net_af_packet), a synthetic job without
# an end, sealed. Site a is sent three files in turn:
#   a file that is not valid        refused with its error; a keeps running rounds
#   a changed port device           refused, the key named as needing a restart; rounds go on
#   job.rounds = now + 80 (both     applied at both sites: both end the job at exactly that
#   sites) and a new round timeout  round by themselves, long before --duration, exact means
# Both pools full at the end; results exact wherever LTP gave nothing up.
#   reload_test.sh STORMGATE_BINARY
set -uo pipefail
BIN="$1"
tag="sgrl$$"
source "$(dirname "${BASH_SOURCE[0]}")/two_sites.sh"
config() {  # SITE ROUNDS TIMEOUT_MS [VDEV_EXTRA] -> the site's YAML
  local s="$1" me=1 peer=2 dev="$tag-x"
  [[ $s == b ]] && { me=2; peer=1; dev="$tag-y"; }
  cat <<YAML
site: {id: $me, name: site-$s}
ports:
  - {name: wan, vdev: "net_af_packet0,iface=$dev${4:-}", ipv4: 10.86.0.$me, mac: "02:00:00:00:0$me:00"}
peers:
  - {id: $peer, name: site-x, address: 10.86.0.$peer, mac: "02:00:00:00:0$peer:00"}
telemetry: {stats_interval_ms: 200, pdump: false}
dataplane: {mbufs: 4095}
job: {model_bytes: 400000, rounds: $2, round_timeout_ms: $3}
security: {key_file: $tmp/wan.key}
YAML
}
for s in a b; do config "$s" 0 5000 > "$tmp/$s.yaml"; done
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0"
lc=(0 1); i=0
for s in a b; do
  ip netns exec "$tag-$s" "$BIN" -l 0-1 --main-lcore "${lc[$i]}" --no-huge --no-pci -m 192 --file-prefix "$tag-$s" \
    --log-level='*:warning' --log-level='stormgate.control:info' --log-level='stormgate.dataplane:info' -- \
    --config "$tmp/$s.yaml" --duration 60 > "$tmp/$s.log" 2>&1 &
  pids+=($!); i=$((i + 1))
done
pid_a=${pids[0]}; pid_b=${pids[1]}
rounds() { sed -n 's/.*| rounds \([0-9]*\), last.*/\1/p' "$tmp/$1.log" | tail -1; }
wait_rounds() {  # SITE AT_LEAST
  for _ in $(seq 1 200); do
    local r; r=$(rounds "$1"); [[ -n $r && $r -ge $2 ]] && return 0
    kill -0 "$pid_a" 2>/dev/null && kill -0 "$pid_b" 2>/dev/null || fail "a gateway ended early"
    sleep 0.05
  done
  fail "site $1 did not reach round $2"
}
wait_log() {  # SITE PATTERN
  for _ in $(seq 1 100); do grep -q "$2" "$tmp/$1.log" && return 0; sleep 0.05; done
  fail "site $1 did not log: $2"
}
wait_rounds a 5

# 1. Not a valid file: refused with its error.
config a 0 5000 | sed 's/rounds: 0/rounds: -3/' > "$tmp/a.yaml"
kill -HUP "$pid_a"
wait_log a "reload refused, the running config goes on (1 problem)"
grep -q "job.rounds" "$tmp/a.log" || fail "the refusal does not name job.rounds"
r=$(rounds a); wait_rounds a $((r + 5))

# 2. A key that needs a restart: refused by name.
config a 0 5000 ",qdisc_bypass=0" > "$tmp/a.yaml"
kill -HUP "$pid_a"
wait_log a "ports\[0\].vdev changes only with a restart"
r=$(rounds a); wait_rounds a $((r + 5))

# 3. Live keys at both sites: the job ends at round `end`.
end=$(( $(rounds a) + 80 ))
for s in a b; do config "$s" "$end" 3000 > "$tmp/$s.yaml"; done
kill -HUP "$pid_a" "$pid_b"
t0=$(date +%s)
wait "$pid_a"; code_a=$?
wait "$pid_b"; code_b=$?
pids=()
t1=$(date +%s)
for s in a b; do
  echo "--- site $s"; grep -E 'reload|round timeout|job 1:|mbuf pool' "$tmp/$s.log"
  grep -q "reloaded: job.round_timeout_ms, job.rounds" "$tmp/$s.log" || fail "site $s did not apply the live keys"
  grep -q "round timeout 3000 ms from round" "$tmp/$s.log" || fail "site $s: the engine did not take the new timeout"
  grep -q "job 1: $end rounds" "$tmp/$s.log" || fail "site $s did not end the job at round $end"
  # Exact unless LTP gave something up at either site (Early Close on a loaded machine).
  grep -q 'values equal to the exact mean 100.0000%' "$tmp/$s.log" ||
    grep -Eq 'bubbles up [1-9]|bubbles up [0-9]+ down [1-9]' "$tmp/a.log" "$tmp/b.log" ||
    fail "site $s: results differ from the exact mean with nothing given up"
  grep -Eq 'mbuf pool: ([0-9]+) of \1 back' "$tmp/$s.log" || fail "site $s: pool not full"
done
[[ $code_a == 0 && $code_b == 0 ]] || fail "exit codes $code_a $code_b"
(( t1 - t0 < 40 )) || fail "the job did not end by its new round count (took $((t1 - t0)) s)"
echo ok
