"""One worker of the testbed-sync benchmark: synchronises a float32 buffer of --bytes for
--rounds rounds through stormgate or torch.distributed's gloo all_reduce, and (rank 0)
writes the per-round times to --out as JSON. Run by scripts/testbed --worker-cmd, which
sets STORMGATE_* and SG_TB_* (rank, world, master address)."""
import argparse
import json
import os
import sys
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["stormgate", "gloo"], required=True)
    ap.add_argument("--bytes", type=int, default=16 << 20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--out", default="")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--expect", choices=["global", "site"], default="global",
                    help="site: the testbed's stub gateways return each site's own mean")
    a = ap.parse_args()
    rank, world = int(os.environ["SG_TB_RANK"]), int(os.environ["SG_TB_WORLD"])
    n = a.bytes // 4
    buf = np.full(n, float(rank + 1), dtype=np.float32)
    expect = (world + 1) / 2.0  # mean of 1..world
    if a.expect == "site":
        w = int(os.environ["SG_TB_WORKERS"])
        first = rank // w * w + 1
        expect = first + (w - 1) / 2.0
    times = []
    if a.backend == "stormgate":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import stormgate
        c = stormgate.init(timeout=a.timeout)
        do = lambda: c.allreduce(buf)  # noqa: E731
    else:
        import datetime
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://%s:%d" % (os.environ["SG_TB_MASTER"], a.port),
                                rank=rank, world_size=world, timeout=datetime.timedelta(seconds=a.timeout))
        t = torch.from_numpy(buf)

        def do():
            dist.all_reduce(t)
            t.div_(world)
    for r in range(a.warmup + a.rounds):
        buf[:] = float(rank + 1)
        t0 = time.perf_counter()
        do()
        dt = time.perf_counter() - t0
        err = float(np.max(np.abs(buf - expect)))
        if r >= a.warmup:
            times.append(dt)
        print(json.dumps({"rank": rank, "round": r, "seconds": dt, "max_err": err}), flush=True)
        if err > 1e-3 * expect:
            print("wrong result: max error %g" % err, file=sys.stderr)
            return 1
    if a.backend == "gloo":
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0 and a.out:
        with open(a.out, "w") as f:
            json.dump({"backend": a.backend, "bytes": a.bytes, "world": world, "times": times}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
