"""One worker of the worker-killed system test (run by scripts/testbed --worker-cmd). Worker
rank r pushes the value r + 1 everywhere, so every round's exact result is known. The victim
(--victim RANK) is killed with SIGKILL while its round --kill-at runs (or right after it, if the
killer starts late), never later; every other worker
runs --rounds rounds and checks each result: the mean of all workers' site means before the
kill, and after it the same without the victim (its site's mean is over the workers left).
In the round the victim died in, each value is a mean with or without the victim (per chunk:
over the workers whose copy arrived). Exit 1 on any wrong value or error."""
import argparse
import os
import signal
import subprocess
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--kill-at", type=int, default=3)
    ap.add_argument("--victim", type=int, default=1)
    ap.add_argument("--bytes", type=int, default=400000)
    a = ap.parse_args()
    rank, sites, per_site = int(os.environ["SG_TB_RANK"]), int(os.environ["SG_TB_SITES"]), int(os.environ["SG_TB_WORKERS"])
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import stormgate
    c = stormgate.init(timeout=30.0)

    def expected(without):
        means = []
        for s in range(sites):
            ranks = [r for r in range(s * per_site, (s + 1) * per_site) if r != without]
            means.append(sum(r + 1 for r in ranks) / len(ranks))
        return sum(means) / sites

    for rnd in range(1, a.rounds + 1):
        buf = np.full(a.bytes // 4, float(rank + 1), dtype=np.float32)
        if rank == a.victim and rnd == a.kill_at:
            # Killed mid-round: 5 ms into the round, by another process (whatever this one's
            # threads do). A round's result takes longer than that to come back.
            subprocess.Popen(["/bin/sh", "-c", "sleep 0.005; kill -KILL %d" % os.getpid()])
        c.allreduce(buf)
        if rank == a.victim and rnd == a.kill_at:
            # The killer may start late on a loaded machine (fork and exec of a shell): the
            # victim must never push the next round, whose exact result leaves it out.
            os.kill(os.getpid(), signal.SIGKILL)
        if rnd == a.kill_at:
            # Each chunk's site mean is over the workers whose copy arrived: with or without the victim.
            lo, hi = sorted((expected(-1), expected(a.victim)))
            bad = int(np.sum((buf < lo - 1e-5 * hi) | (buf > hi + 1e-5 * hi)))
            print("round %d (the victim's last): %s" % (rnd, "ok" if bad == 0 else "%d out of range" % bad), flush=True)
            if bad:
                sys.exit(1)
            continue
        want = expected(a.victim if rnd > a.kill_at else -1)
        wrong = int(np.sum(np.abs(buf - want) > 1e-5 * want))
        print("round %d: %s (want %.4f, got %.4f..%.4f)" % (rnd, "ok" if wrong == 0 else "%d wrong" % wrong, want,
                                                           float(buf.min()), float(buf.max())), flush=True)
        if wrong:
            sys.exit(1)
    print("done", flush=True)


if __name__ == "__main__":
    main()
