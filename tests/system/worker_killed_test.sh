#!/usr/bin/env bash
# A training worker killed with SIGKILL mid-round (scripts/testbed: 2 sites, 2 workers each,
# the real gateways on net_af_packet, workers sealed with the job token): the other workers'
# rounds finish -- the dead worker's site goes on with the worker that is left after
# job.worker_timeout_ms -- every later result is the exact mean without the dead worker, and
# the site's gateway counts the rounds it went on without a worker.
#   worker_killed_test.sh  (SG_GATEWAY_BIN, STORMGATE_PYEXT_DIR from meson)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[[ $(id -u) -eq 0 ]] || { echo "skip: needs root"; exit 77; }
/usr/bin/python3 -c "import numpy" 2>/dev/null || { echo "skip: no python3-numpy"; exit 77; }
out="$(mktemp -d /tmp/sg-wk.XXXX)"
trap 'rm -rf "$out" "${dir:-/nonexistent}"' EXIT
# The victim (rank 1: site 1, worker 1) dies by SIGKILL (status 137): that is its success.
cmd="/usr/bin/python3 $ROOT/tests/system/worker_killed.py --rounds 6 --kill-at 3 --victim 1; rc=\$?;"
cmd+=" if [ \"\$SG_TB_RANK\" = 1 ]; then [ \$rc = 137 ]; else exit \$rc; fi"
set +e
"$ROOT/scripts/testbed" --sites 2 --workers 2 --rates 200,200 --gateway stormgate --model-bytes 400000 \
  --round-timeout-ms 6000 --push-timeout-ms 1500 --duration 90 --keep-logs --worker-cmd "$cmd" 2> "$out/testbed.err"
rc=$?
set -e
cat "$out/testbed.err"
dir="$(sed -n 's/.*, dir \(\/tmp\/[^ ]*\).*/\1/p' "$out/testbed.err" | head -1)"
[[ -n $dir && -d $dir ]] || { echo "FAIL: no testbed dir"; exit 1; }
for f in "$dir"/worker-*.log; do echo "--- $(basename "$f")"; cat "$f"; done
grep -h "job 1:" "$dir"/*.log || true
[[ $rc == 0 ]] || { echo "FAIL: testbed exit $rc"; exit 1; }
for w in 1-0 2-0 2-1; do
  grep -q '^done' "$dir/worker-$w.log" || { echo "FAIL: worker $w did not finish its rounds"; exit 1; }
done
grep -q "round 4: ok" "$dir/worker-1-0.log" || { echo "FAIL: no exact round after the kill"; exit 1; }
grep -hE 'results delivered to workers, worker waits timed out [1-9][0-9]*, workers missing [1-9]' "$dir"/*.log ||
  { echo "FAIL: the dead worker's site did not count the rounds without it"; exit 1; }
echo ok
