#!/usr/bin/env bash
# A 2-second blackhole of a link mid-training, on the testbed's WAN emulator
# (tests/system/blackhole_wan.yaml: two sites, 10 ms RTT, the link dark both ways for 2 s at
# 7 s and at 13 s): the real gateways on net_af_packet, one worker per site synchronising a
# 2 MB gradient round after round. Checks: every round finishes (no round timeout: the
# transfers stall and resume), one round took the blackhole (> 1.5 s), the emulator dropped
# frames for it, and no result has more than 5% of its values filled by Early Close (the
# bound transport.early_close.min_fraction 0.95 sets).
#   blackhole_test.sh  (SG_GATEWAY_BIN, STORMGATE_PYEXT_DIR, SG_WANEM_BIN from meson)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[[ $(id -u) -eq 0 ]] || { echo "skip: needs root"; exit 77; }
/usr/bin/python3 -c "import numpy" 2>/dev/null || { echo "skip: no python3-numpy"; exit 77; }
out="$(mktemp -d /tmp/sg-bh.XXXX)"
trap 'rm -rf "$out" "${dir:-/nonexistent}"' EXIT
set +e
"$ROOT/scripts/testbed" --sites 2 --workers 1 --gateway stormgate --model-bytes 2097152 \
  --wan "$ROOT/tests/system/blackhole_wan.yaml" --round-timeout-ms 20000 --duration 90 --keep-logs \
  --worker-cmd "/usr/bin/python3 $ROOT/python/sync_bench.py --backend stormgate --bytes 2097152 --rounds 150 \
                --warmup 1 --timeout 60 --bubbles 0.05 --out $out/result.json" 2> "$out/testbed.err"
rc=$?
set -e
cat "$out/testbed.err"
dir="$(sed -n 's/.*, dir \(\/tmp\/[^ ]*\).*/\1/p' "$out/testbed.err" | head -1)"
[[ -n $dir && -d $dir ]] || { echo "FAIL: no testbed dir"; exit 1; }
grep -h "job 1:" "$dir"/*.log || true
[[ $rc == 0 ]] || { tail -5 "$dir"/worker-*.log; echo "FAIL: testbed exit $rc (a worker failed: error or too many filled values)"; exit 1; }
[[ -s $out/result.json ]] || { echo "FAIL: no result"; exit 1; }
/usr/bin/python3 - "$out/result.json" "$dir/wan-stats.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t, inexact = r["times"], r["inexact"]
stats = open(sys.argv[2]).read()
dark = sum(int(x) for x in __import__("re").findall(r'"dropped_blackhole": (\d+)', stats))
print("rounds %d, median %.3f s, longest %.3f s, most filled %.4f, frames dropped by the blackhole %d"
      % (len(t), sorted(t)[len(t) // 2], max(t), max(inexact), dark))
assert max(t) > 1.5, "no round met the blackhole: the training ran outside both windows"
assert dark > 0, "the emulator dropped nothing for the blackhole"
assert max(inexact) <= 0.05, "Early Close filled more than its bound"
PY
if grep -h "job 1:" "$dir"/*.log | grep -qE 'timeouts [1-9]'; then echo "FAIL: a round ended by timeout"; exit 1; fi
echo ok
