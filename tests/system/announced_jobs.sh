#!/usr/bin/env bash
# One testbed worker of testbed_test.sh announced: two jobs of different models through the
# same gateways at once (none of them in the YAML: each announced by its workers), then,
# while both run, a third whose state does not fit the gateways' admission.memory_mb: it
# must be refused with the reason. Results: $OUT/announced-*.json (rank 0), the refusal's
# message in $OUT/refused-<site>.txt. Each job's workers seal with that job's token (the testbed's
# admission secret); a join for job 14 sealed with job 11's token must get no answer
# ($OUT/wrong-token-<site>.txt).
set -euo pipefail
OUT="$1"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Bubbles are LTP's design and counted, not failures here (exactness is testbed_stormgate's):
# two jobs share drop-tail tbf links (a stalled WAN transfer may end by Early Close), and the
# workers' Python processes, three gateways and the shaping share two cores, so a starved worker's
# receiver may Early-Close a result transfer (its own gradient fills the chunks it missed;
# CI measured 4.7% of one round's values once). At most 10% of a round, each value still
# between the smallest and the largest contribution (sync_bench checks both).
BENCH="/usr/bin/python3 $ROOT/python/sync_bench.py --backend stormgate --warmup 1 --timeout 60 --bubbles 0.1"
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
except Exception as e:  # a timeout, or anything else: say what
    print("job 13: %s: %s" % (type(e).__name__, e))
    sys.exit(1)
print("job 13 was admitted: it should not fit beside jobs 11 and 12")
sys.exit(1)
PY
# Another job's token opens nothing: job 14 announced with job 11's token gets no answer
# (the gateway drops the join before it reaches the registry, and counts it).
STORMGATE_JOB=14 PYTHONPATH="$ROOT/python" /usr/bin/python3 - "$OUT/wrong-token-$SG_TB_SITE.txt" <<'PY'
import os, sys
import numpy as np
import stormgate
c = stormgate.Client.from_env(timeout=3, token_file=os.environ["STORMGATE_TOKEN_FILE"].replace("{job}", "11"))
try:
    c.allreduce(np.zeros(1000, dtype=np.float32))
    print("job 14 ran with job 11's token"); sys.exit(1)
except stormgate.GatewayTimeout as e:
    open(sys.argv[1], "w").write("timeout: %s" % e)
    print("no answer, as expected:", e)
PY
wait $a
wait $b
