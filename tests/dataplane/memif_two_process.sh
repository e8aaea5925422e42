#!/usr/bin/env bash
# Two gateway processes over a net_memif pair run 5 gradient rounds of a 2 MB model; both must
# report every value equal to the exact mean, exit 0 and return every mbuf.
#   memif_two_process.sh STORMGATE_BINARY [QUEUES]
# With QUEUES=2 each gateway runs two engines, on two lcores sharing one CPU: each runs the
# job's shards s % 2 == its index and sends their DATA on its own queue; frames that arrive on
# the other engine's queue are handed over. Both engines must have carried DATA.
set -uo pipefail
BIN="$1"
Q="${2:-1}"
source "$(dirname "$0")/memif_pair.sh"
memif_pair_init sgt

for s in a b; do
  if [[ $s == a ]]; then me=1; peer=2; role=server; else me=2; peer=1; role=client; fi
  cat > "$tmp/$s.yaml" <<YAML
site: {id: $me, name: site-$s}
ports:
  - name: link
    vdev: net_memif0,role=$role,id=0,socket=$sock
    ipv4: 10.88.0.$me
    mac: 02:00:00:00:0$me:00
    rx_queues: $Q
    tx_queues: $Q
peers:
  - {id: $peer, name: site-x, address: 10.88.0.$peer}
telemetry: {stats_interval_ms: 0, pdump: false}
dataplane: {mbufs: 4095}
job: {model_bytes: 2000000, rounds: 5, round_timeout_ms: 20000}
security: {key_file: $tmp/wan.key}
# Exactness is what this test checks, of the memif path and the engines' hand-over. Early
# Close is LTP's answer to a quiet transfer, and here a transfer goes quiet only when the
# two processes' three lcores starve on shared CPUs (a CI run closed 14 chunks early while
# another testbed ran beside it): off, so a loaded machine costs time, not exactness.
transport: {early_close: {enabled: false}}
YAML
done
"$BIN" --keygen "$tmp/wan.key" > /dev/null || exit 1
"$BIN" --check-config "$tmp/a.yaml" "$tmp/b.yaml" || exit 1

lcore=(0 1)
run_pair() {  # both gateways, to their end; exit codes in codes[]
  local i=0 s
  for s in a b; do
    if [[ $Q == 1 ]]; then cores=(-l 0-1 --main-lcore "${lcore[$i]}"); else cores=(--lcores "0@${lcore[$i]},1@$((1 - lcore[$i])),2@$((1 - lcore[$i]))" --main-lcore 0); fi
    memif_pair_start $s "${cores[@]}" --no-huge --no-pci -m 192 \
      --log-level='*:warning' --log-level='pmd.net.memif:debug' -- --config "$tmp/$s.yaml" --duration 50
    i=$((i + 1))
  done
  memif_pair_wait
}
# Twice in many CI runs the two memif ports never exchanged a packet (both sides ran 50 s,
# nothing received; not reproduced here, and not our code's to decide: the memif control
# channel is DPDK's). Then the pair runs once more, after printing what the memif PMD said,
# so that the next occurrence shows why; any other failure, or the same twice, fails.
never_met() { grep -q "rows sent [0-9]* received 0;" "$tmp/a.log" && grep -q "rows sent [0-9]* received 0;" "$tmp/b.log"; }
run_pair
if never_met; then
  echo "memif: the two ports never exchanged a packet; the memif PMD said:"
  grep -h "memif" "$tmp/a.log" "$tmp/b.log" | sort | uniq -c | head -20
  echo "running the pair once more"
  rm -f "$sock"
  run_pair
fi
rc=0
for s in a b; do
  echo "--- site $s"; grep -E 'job 1:|mbuf pool|drops:|sealed:' "$tmp/$s.log"
  grep -qE 'sealed: [1-9][0-9]* messages sealed, [1-9][0-9]* opened, refused: none' "$tmp/$s.log" ||
    { echo "site $s: traffic between the gateways was not sealed and opened cleanly"; rc=1; }
  grep -q '5 rounds of 2000000 bytes' "$tmp/$s.log" || {
    # Seen once (both sides ran 50 s without a packet, nothing sealed): keep what the memif
    # PMD and the port said, so that the next occurrence shows why.
    echo "site $s: did not run 5 rounds"; grep -iE 'memif|link|port|error|fail' "$tmp/$s.log" | head -20
    tail -5 "$tmp/$s.log"; rc=1; }
  grep -q 'values equal to the exact mean 100.0000%' "$tmp/$s.log" || { echo "site $s: results differ from the exact mean"; rc=1; }
  grep -q 'LEAK' "$tmp/$s.log" && { echo "site $s: mbuf leak"; rc=1; }
  if [[ $Q == 2 ]]; then
    grep -E '^\[site-.\] engine [01]:' "$tmp/$s.log"
    for e in 0 1; do
      grep -qE "engine $e: [1-9][0-9]* shard\(s\), LTP DATA in [1-9][0-9]* out [1-9][0-9]*" "$tmp/$s.log" ||
        { echo "site $s: engine $e carried no DATA of its own shards"; rc=1; }
    done
  fi
done
i=0
for s in a b; do
  memif_exit_ok $s "${codes[$i]}" || { echo "site $s exited with ${codes[$i]}"; rc=1; }
  i=$((i + 1))
done
exit $rc
