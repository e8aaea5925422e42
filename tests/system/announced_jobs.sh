#!/usr/bin/env bash
# One testbed worker of testbed_test.sh announced: two jobs of different models through the
# same gateways at once (none of them in the YAML: each announced by its workers), then,
# while both run, a third whose state does not fit the gateways' admission.memory_mb: it
# must be refused with the reason. Results: $OUT/announced-*.json (rank 0), the refusal's
# message in $OUT/refused-<site>.txt.
set -euo pipefail
OUT="$1"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Two jobs share tbf-shaped links with drop-tail queues: a stalled transfer may end by Early
# Close, its missing chunk a bubble (LTP by design, counted by the gateways): at most 1%.
BENCH="/usr/bin/python3 $ROOT/python/sync_bench.py --backend stormgate --warmup 1 --timeout 60 --bubbles 0.01"
STORMGATE_JOB=11 $BENCH --bytes 2097152 --rounds 40 --out "$OUT/announced-11.json" & a=$!
STORMGATE_JOB=12 $BENCH --bytes 524288 --rounds 60 --out "$OUT/announced-12.json" & b=$!
# Both jobs hold their memory once every site agreed on them (the gateway log says when);
# the third comes while they run.
sleep 4
STORMGATE_JOB=13 PYTHONPATH="$ROOT/python" /usr/bin/python3 - "$OUT/refused-$SG_TB_SITE.txt" <<'PY'
import sys
import numpy as np
import stormgate
c = stormgate.Client.from_env(timeout=30)
try:
    c.allreduce(np.zeros(3 << 18, dtype=np.float32))  # a 3 MiB model
except stormgate.StormgateError as e:
    open(sys.argv[1], "w").write(str(e))
    print("refused as expected:", e)
    sys.exit(0)
print("job 13 was admitted: it should not fit beside jobs 11 and 12")
sys.exit(1)
PY
wait $a
wait $b
