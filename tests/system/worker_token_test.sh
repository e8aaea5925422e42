#!/usr/bin/env bash
# Workers admitted by the job token (job.token_file): a gateway on net_tap in a network
# namespace of its own, one site, one worker; the worker runs on the kernel side of the tap
# (the gateway's subnet) through the Python client.
#   worker_token_test.sh STORMGATE_BINARY SOURCE_ROOT PYEXT_DIR
# The gateway's one peer never answers, so no WAN round begins: what is checked is what the
# gateway takes from its workers. A worker with the job's token has its push delivered (every
# chunk acknowledged; it then waits for the round's result); a worker without a token and one
# with another token get no answer at all (their pushes are refused before any state: counted
# as unsealed and bad_tag, and said by the gateway with the source); the pool is full.
# MODE admission: the same with the job's token derived from the gateway's admission.token_file
# (stormgate --job-token) and the "other token" another job's token from the same secret.
set -uo pipefail
BIN="$1"; ROOT="$2"; PYEXT="$3"; MODE="${4:-job}"
ns="sgtk$$"; prefix="sgtk$$"; tmp="$(mktemp -d)"
cleanup() { [[ -n "${gw:-}" ]] && kill -9 "$gw" 2>/dev/null; ip netns del "$ns" 2>/dev/null; rm -rf "$tmp" "/var/run/dpdk/$prefix"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$tmp/gw.log" 2>/dev/null; exit 1; }
[[ $(id -u) == 0 ]] || { echo "SKIP: needs root (network namespace)"; exit 77; }
/usr/bin/python3 -c "import numpy" 2>/dev/null || { echo "SKIP: no python3-numpy"; exit 77; }

if [[ $MODE == admission ]]; then
  for k in admission.key wan.key; do "$BIN" --keygen "$tmp/$k" > /dev/null || fail "keygen"; done
  "$BIN" --job-token "$tmp/admission.key" 1 "$tmp/job.token" > /dev/null || fail "job token"
  "$BIN" --job-token "$tmp/admission.key" 2 "$tmp/other.token" > /dev/null || fail "job token"
  job_keys="job: {id: 1, model_bytes: 40000, workers: 1, rounds: 1, round_timeout_ms: 2000}
admission: {enabled: true, token_file: admission.key}"
  said="workers admitted with their job's token"
else
  for k in job.token other.token wan.key; do "$BIN" --keygen "$tmp/$k" > /dev/null || fail "keygen"; done
  job_keys="job: {id: 1, model_bytes: 40000, workers: 1, rounds: 1, round_timeout_ms: 2000, token_file: job.token}"
  said="workers admitted with the job token"
fi
cat > "$tmp/gw.yaml" <<YAML
site: {id: 1, name: tokened}
ports:
  - {name: lan, vdev: "net_tap0,iface=sgtk0", ipv4: 10.56.0.1, prefix_len: 24, mac: "02:00:00:00:00:01"}
telemetry: {stats_interval_ms: 0}
dataplane: {mbufs: 4095}
peers:
  - {id: 2, name: silent, address: 10.56.0.3, mac: "02:00:00:00:00:03"}
$job_keys
security: {key_file: wan.key}
YAML
ip netns add "$ns" || fail "cannot create a network namespace"
ip netns exec "$ns" "$BIN" -l 0-1 --no-huge --no-pci -m 128 --file-prefix "$prefix" --log-level='*:warning' \
  --log-level='stormgate.control:info' -- --config "$tmp/gw.yaml" --duration 14 > "$tmp/gw.log" 2>&1 &
gw=$!
for _ in $(seq 50); do ip netns exec "$ns" ip link show sgtk0 >/dev/null 2>&1 && grep -q running "$tmp/gw.log" && break; sleep 0.1; done
grep -q "$said" "$tmp/gw.log" || fail "the gateway did not say it admits workers by token"
ip netns exec "$ns" ip link set sgtk0 address 02:00:00:00:00:02
ip netns exec "$ns" ip addr add 10.56.0.2/24 dev sgtk0
ip netns exec "$ns" ip link set sgtk0 up

worker() {  # TOKEN_FILE (empty: none) -> prints "ok EXACT" or "error MESSAGE"
  ip netns exec "$ns" env PYTHONPATH="$PYEXT" /usr/bin/python3 - "$1" <<'PY'
import sys
import numpy as np
import _stormgate as sg
w = sg.Worker(host="10.56.0.1", port=7400, worker_index=0, gateway_node=1, job=1, chunk_bytes=1344,
              token_file=sys.argv[1])
g = (np.arange(10000, dtype=np.float32) * 0.25 - 7.0)
want = g.copy()
try:
    w.allreduce(g, 1, 3.0)
    print("ok", int(np.sum(g == want)))  # not expected: the silent peer holds the round
except sg.StormgateError as e:
    print("error", e)
PY
}
none="$(worker "")"; echo "no token:    $none"
other="$(worker "$tmp/other.token")"; echo "other token: $other"
right="$(worker "$tmp/job.token")"; echo "job token:   $right"
wait "$gw"; rc=$?; gw=""
grep -v '^TELEMETRY' "$tmp/gw.log"
[[ $rc == 0 ]] || fail "gateway exit $rc"
[[ $right == *"push delivered"* ]] || fail "the push of the worker with the job's token was not delivered"
[[ $none == error*unreachable* ]] || fail "a worker without the token got an answer"
[[ $other == error*unreachable* ]] || fail "a worker with another token got an answer"
grep -Eq 'refused:.* unsealed=[1-9]' "$tmp/gw.log" || fail "plain pushes not counted as unsealed"
grep -Eq 'refused:.* bad_tag=[1-9]' "$tmp/gw.log" || fail "pushes sealed with another token not counted as bad_tag"
grep -q 'messages from .*refused (unsealed' "$tmp/gw.log" || fail "the refusals were not said with their source"
grep -Eq 'mbuf pool: ([0-9]+) of \1 back' "$tmp/gw.log" || fail "pool not full"
echo ok
