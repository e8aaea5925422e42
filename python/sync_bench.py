"""One worker of the testbed-sync benchmark: synchronises a float32 buffer of --bytes for
--rounds rounds through stormgate or torch.distributed's gloo all_reduce (gloo-fp16: what
DDP's fp16_compress_hook does -- divide, cast to float16, all_reduce, cast back), and (rank 0)
writes the per-round times to --out as JSON. Run by scripts/testbed --worker-cmd, which
sets STORMGATE_* and SG_TB_* (rank, world, master address)."""
import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np


MAX_ROUNDS = 1000  # a bound on --cover-seconds' count whatever the pace


def tcp_cc():
    """The congestion control this worker's TCP (gloo's) runs in its namespace."""
    try:
        with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


# --cover-seconds' agreement travels in the buffer's last VOTE floats, the rest of the round
# carrying the usual values; the sites' proposals differ, so their mean may not be exact under
# a codec, and error feedback carries that residue into later rounds: the checks leave out the
# last SPARE floats (the vote plus a margin wider than any chunk, so no chunk mixes the two).
VOTE, SPARE = 4096, 8192


def agree(do, buf, fill, want):
    """One number the sites agree on: each proposes its own, through one extra, untimed
    synchronisation of the same buffer. Every site reads the same bytes back, and the median of
    the vote ignores the few values Early Close may have left as bubbles."""
    buf[:] = fill
    buf[-VOTE:] = float(max(0, min(MAX_ROUNDS, want)))
    do()
    return max(0, int(math.ceil(float(np.median(buf[-VOTE:])) - 1e-3)))


def cover_rounds(a, do, buf, fill, warm, times):
    """How many more rounds to measure so that the measured ones span a.cover_seconds. Asked
    twice, at fixed points (every site asks at the same rounds): after the warm-up for three
    quarters of the span at the warm-up's pace, then after those for the rest at their pace."""
    if not times:
        pace = statistics.median(warm[-5:])
        return max(a.rounds, agree(do, buf, fill, int(math.ceil(0.75 * a.cover_seconds / max(pace, 1e-3)))))
    left = a.cover_seconds - sum(times)
    pace = sum(times) / len(times)
    return agree(do, buf, fill, int(math.ceil(left / max(pace, 1e-3))) if left > 0 else 0)


def off_fraction(got, expect, lo, hi):
    """(fraction of values off the expected mean by more than 1e-3 of it, largest error). The
    check runs between rounds on the machine the gateways share: two reductions settle the
    usual all-exact case without the 50 MB of temporaries (some 70 ms a round per worker) that
    the element-wise count needs, which also read to the gateways as compute between rounds.
    lo, hi: the values' minimum and maximum (the caller's range check takes them too)."""
    err = max(abs(lo - expect), abs(hi - expect))
    if err <= 1e-3 * expect:  # False for a NaN too: it is counted below
        return 0.0, err
    return float(np.count_nonzero(~(np.abs(got - expect) <= 1e-3 * expect))) / len(got), err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["stormgate", "gloo", "gloo-fp16"], required=True)
    ap.add_argument("--bytes", type=int, default=16 << 20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--out", default="")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--expect", choices=["global", "site", "mix"], default="global",
                    help="site: the testbed's stub gateways return each site's own mean; mix: sync.mode "
                         "selmcast, each value the mean of this site's mean and some other sites' means")
    ap.add_argument("--copies", type=int, default=1,
                    help="--expect mix: updates of one other site a mix may hold (SSP: staleness + 2)")
    ap.add_argument("--bubbles", type=float, default=0.0,
                    help="over a lossy WAN Early Close may leave this fraction of values a mean over the "
                         "sites whose chunk arrived (bubbles): more is an error; 0: every value exact")
    ap.add_argument("--straggler-ms", type=float, default=0.0,
                    help="the last site's workers compute this long before each push (a loaded site)")
    ap.add_argument("--compute-ms", type=float, default=0.0,
                    help="every worker computes this long before each push (a training step's backward)")
    ap.add_argument("--cover-seconds", type=float, default=0.0,
                    help="measure at least --rounds rounds and enough to span this many seconds of "
                         "synchronisation (whole cycles of a fluctuating WAN: a few rounds would sample "
                         "whichever phase they fell in); the sites agree on the count after the warm-up")
    a = ap.parse_args()
    if a.cover_seconds > 0 and (a.expect != "global" or a.warmup < 1 or a.bytes // 4 < 4 * SPARE):
        ap.error("--cover-seconds needs --expect global (every site reads the same result), a warm-up round "
                 "and at least %d bytes" % (16 * SPARE))
    rank, world = int(os.environ["SG_TB_RANK"]), int(os.environ["SG_TB_WORLD"])
    n = a.bytes // 4
    buf = np.full(n, float(rank + 1), dtype=np.float32)
    expect = (world + 1) / 2.0  # mean of 1..world
    if a.expect == "site":
        w = int(os.environ["SG_TB_WORKERS"])
        first = rank // w * w + 1
        expect = first + (w - 1) / 2.0
    w = int(os.environ.get("SG_TB_WORKERS", "1"))
    sites = world // w
    site_mean = [s * w + 1 + (w - 1) / 2.0 for s in range(sites)]
    own = rank // w
    # selmcast: the mean of this site's mean and the others' (each up to `copies` times: under
    # SSP a sender running ahead may deliver updates of two rounds before one mix).
    import itertools
    others = [o for o in range(sites) if o != own]
    mixes = sorted({(site_mean[own] + sum(k * site_mean[o] for k, o in zip(ks, others))) / (1 + sum(ks))
                    for ks in itertools.product(range(a.copies + 1), repeat=len(others))})
    times, inexact, warm = [], [], []
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

        if a.backend == "gloo":
            def do():
                dist.all_reduce(t)
                t.div_(world)
        else:
            def do():
                half = t.to(torch.float16).div_(world)  # divided first, as the hook does: no overflow
                dist.all_reduce(half)
                t.copy_(half)
    # With --cover-seconds the sites agree twice on how many rounds to measure, at rounds every
    # site reaches: after the warm-up and after the first batch.
    end = a.warmup + a.rounds
    asked = 0
    r = 0
    while True:
        if a.cover_seconds > 0 and asked < 2 and r == (end if asked else a.warmup):
            end = r + cover_rounds(a, do, buf, float(rank + 1), warm, times)
            asked += 1
            continue
        if r >= end:
            break
        buf[:] = float(rank + 1)
        if a.compute_ms > 0:
            time.sleep(a.compute_ms / 1e3)
        if a.straggler_ms > 0 and own == sites - 1:
            time.sleep(a.straggler_ms / 1e3)
        t0 = time.perf_counter()
        do()
        dt = time.perf_counter() - t0
        got = buf[:-SPARE] if a.cover_seconds > 0 else buf  # the vote's residue left out
        lo, hi = float(np.min(got)), float(np.max(got))
        if a.expect == "mix":
            near = np.min(np.abs(buf[:, None] - np.array(mixes, dtype=np.float32)[None, :]), axis=1)
            if float(np.max(near)) > 1e-3 * max(mixes):
                print("wrong result: a value is no mean of this site's and other sites' means", file=sys.stderr)
                return 1
            # Nothing mixed in: the site's own mean alone (counted like a bubble).
            off = np.abs(buf - site_mean[own]) <= 1e-3 * site_mean[own]
            err = float(np.max(near))
            frac = float(np.count_nonzero(off)) / len(off)
        else:
            frac, err = off_fraction(got, expect, lo, hi)
        if r >= a.warmup:
            times.append(dt)
            inexact.append(frac)
        else:
            warm.append(dt)
        print(json.dumps({"rank": rank, "round": r, "seconds": dt, "max_err": err, "inexact": frac}), flush=True)
        # A bubble leaves the mean over the sites that arrived: between the smallest and the
        # largest contribution. Anything else, or too many, is wrong.
        if math.isnan(err) or frac > a.bubbles or lo < 1 - 1e-3 or hi > world + 1e-3:
            print("wrong result: max error %g, %.4f%% of values off" % (err, 100 * frac), file=sys.stderr)
            return 1
        r += 1
    if a.backend != "stormgate":
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0 and a.out:
        with open(a.out, "w") as f:
            json.dump({"backend": a.backend, "bytes": a.bytes, "world": world, "times": times,
                       "mean": sum(times) / len(times) if times else 0.0, "inexact": inexact,
                       "tcp_cc": tcp_cc()}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
