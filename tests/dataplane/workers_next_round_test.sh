#!/usr/bin/env bash
# Eight emulated workers (perf/dataplane/bench_dp_workers) push rounds as fast as the gateway
# answers them, over net_memif: each worker pushes round r + 1 the moment it has all of round
# r's result, and never resends. The gateway must have moved its workers' group to round r + 1
# before the last result chunk of round r left: no worker DATA early, no push timeout, every
# round answered, every mbuf back.
#   workers_next_round_test.sh STORMGATE_BINARY BENCH_DP_WORKERS_BINARY
set -uo pipefail
GW="$1"; WBIN="$2"
tmp="$(mktemp -d)"
sock="/run/sg-test-nr$$.sock"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$tmp" "$sock" /var/run/dpdk/sgnr$$-w /var/run/dpdk/sgnr$$-g
}
trap cleanup EXIT
W=8; PAYLOAD=1392; CHUNKS=2048; SECS=3
cat > "$tmp/gw.yaml" <<YAML
site: {id: 1, name: nr}
ports:
  - {name: lan, vdev: "net_memif0,role=client,id=0,socket=$sock,bsize=2048", ipv4: 10.0.0.1, mac: "02:00:00:00:00:02"}
telemetry: {stats_interval_ms: 0, pdump: false}
dataplane: {mbufs: 16383}
job: {id: 1, model_bytes: $((PAYLOAD * CHUNKS)), workers: $W, worker_chunk_bytes: $PAYLOAD, round_timeout_ms: 5000}
YAML
# As memif_two_process.sh: the memif PMD's cleanup may crash after the final report; under
# AddressSanitizer let that stay a plain SIGSEGV, judged below.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0"
EAL=(--no-huge --no-pci -m 512 --log-level='*:error')
"$WBIN" -l 1 --main-lcore 1 "${EAL[@]}" --file-prefix "sgnr$$-w" -- workers $((SECS + 1)) $PAYLOAD $W $CHUNKS "$sock" \
  > "$tmp/w.log" 2>&1 &
pids+=($!)
sleep 0.5
timeout 60 "$GW" -l 0-1 --main-lcore 1 "${EAL[@]}" --file-prefix "sgnr$$-g" -- --config "$tmp/gw.yaml" \
  --duration $((SECS + 1)) > "$tmp/gw.log" 2>&1
gc=$?
wait "${pids[0]}"; wc=$?
pids=()
grep -E '^workers' "$tmp/w.log"; grep -E 'results delivered|mbuf pool' "$tmp/gw.log"
rc=0
[[ $gc == 0 || ($gc == 139 && -n $(grep -E 'mbuf pool: ([0-9]+) of \1 back' "$tmp/gw.log")) ]] ||
  { echo "gateway exited with $gc"; tail -5 "$tmp/gw.log"; rc=1; }
[[ $wc == 0 || $wc == 139 ]] || { echo "workers exited with $wc"; tail -5 "$tmp/w.log"; rc=1; }
grep -qE 'mbuf pool: ([0-9]+) of \1 back' "$tmp/gw.log" || { echo "gateway: mbufs not all back"; rc=1; }
rounds=$(sed -nE 's/^workers [0-9]+ pushes [0-9]+ rounds_done ([0-9]+).*/\1/p' "$tmp/w.log")
((${rounds:-0} >= 20)) || { echo "only ${rounds:-0} rounds answered in $SECS s"; rc=1; }
grep -q 'worker waits timed out 0,' "$tmp/gw.log" || { echo "a round waited for a worker's push until the timeout"; rc=1; }
grep -q 'worker DATA early 0$' "$tmp/gw.log" || { echo "worker DATA of the next round came before the group moved there"; rc=1; }
exit $rc
