"""perf/bench accuracy: final test accuracy of the digits MLP (3 sites x 2 workers) when the
WAN all-reduce loses 5% of every transfer's chunks and Early Close + Bubble Filling keep
training going, against lossless all-reduce (the exact mean: what gloo computes).

Measured with train_digits.py's in-process emulation of Bubble Filling semantics (every
chunk of every site->root and root->site transfer missing with probability p; the root
averages the sites that arrived, a site missing a result chunk keeps its own contribution).
That is pessimistic: real LTP retransmits before Early Close and keeps >= 1 - p/2."""
import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_digits  # noqa: E402


def run(seed, loss, epochs):
    a = argparse.Namespace(sites=3, workers=2, epochs=epochs, batch=16, hidden=128, lr=0.05, seed=seed,
                           bubble_loss=loss, out="", quiet=True, min_acc=0.0, model="mlp")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        train_digits.run_sim(a)
    return json.loads(buf.getvalue().strip().splitlines()[-1])["final_acc"]


def testbed(a):
    """The real system: 3 sites x 2 workers on scripts/testbed, through the stormgate
    gateways (with --loss-config appended to their configs, e.g. the dataplane's loss
    injection) vs gloo over the same links."""
    import tempfile
    train_digits.use_build()  # the gateways of the build perf/bench made (SG_BUILD)
    tmp = tempfile.mkdtemp(prefix="sg-acc-")
    rows = []
    for s in range(1, a.seeds + 1):
        ns = argparse.Namespace(sites=3, workers=2, rates="200,100,50", rotate=0, epochs=a.epochs, batch=16,
                                hidden=128, lr=0.05, seed=s, timeout=120.0, config_extra=a.loss_config, quiet=True, model="mlp",
                                wan="")
        res = {}
        for backend, gw in (("stormgate", "stormgate"), ("gloo", "router")):
            res[backend] = train_digits.testbed_run(ns, backend, gw, os.path.join(tmp, "%s-%d.json" % (backend, s)),
                                                    os.path.join(tmp, "%s-%d.progress" % (backend, s)), backend)
        st, gl = res["stormgate"]["epochs"][-1]["acc"], res["gloo"]["epochs"][-1]["acc"]
        rows.append((s, gl, st))
        print("seed %d  gloo %.4f   stormgate%s %.4f   drop %+.2f pp"
              % (s, gl, " (+%s)" % os.path.basename(a.loss_config) if a.loss_config else "", st, 100 * (gl - st)),
              flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    gl_m = statistics.mean(r[1] for r in rows)
    st_m = statistics.mean(r[2] for r in rows)
    drop = 100 * (gl_m - st_m)
    print("accuracy drop vs gloo: %.2f percentage points, %d seeds x %d epochs on the testbed" % (drop, a.seeds, a.epochs))
    key = "acc_drop_loss5_pct_points" if a.loss_config else "acc_drop_lossless_pct_points"
    print(json.dumps({"bench": "accuracy", "acc_gloo": round(gl_m, 4), "acc_stormgate": round(st_m, 4), key: round(drop, 3),
                      "seeds": a.seeds, "epochs": a.epochs, "method": "testbed",
                      "gateway_config_extra": a.loss_config}))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=0)
    ap.add_argument("--testbed", action="store_true",
                    help="run the real gateways on scripts/testbed instead of the emulation")
    ap.add_argument("--loss-config", default="",
                    help="with --testbed: YAML appended to the gateway configs that makes them lose 5%%")
    a = ap.parse_args()
    seeds = a.seeds or (1 if a.quick else 3)
    epochs = a.epochs or (4 if a.quick else 25)
    if a.testbed:
        a.seeds, a.epochs = seeds, epochs
        return testbed(a)
    rows = []
    for s in range(1, seeds + 1):
        exact = run(s, 0.0, epochs)
        lossy = run(s, 0.05, epochs)
        rows.append((s, exact, lossy))
        print("seed %d  lossless (gloo's mean) %.4f   5%% loss + Bubble Filling %.4f   drop %+.2f pp"
              % (s, exact, lossy, 100 * (exact - lossy)), flush=True)
    exact_m = statistics.mean(r[1] for r in rows)
    lossy_m = statistics.mean(r[2] for r in rows)
    drop = 100 * (exact_m - lossy_m)
    print("\n%-40s %8s" % ("", "accuracy"))
    print("%-40s %8.4f" % ("lossless all-reduce (gloo's result)", exact_m))
    print("%-40s %8.4f" % ("5% chunk loss, Early Close + Bubble Fill", lossy_m))
    print("accuracy drop: %.2f percentage points (bound: 0.5), %d seeds x %d epochs, emulated WAN loss"
          % (drop, seeds, epochs))
    print(json.dumps({"bench": "accuracy", "acc_lossless": round(exact_m, 4), "acc_loss5": round(lossy_m, 4),
                      "acc_drop_loss5_pct_points": round(drop, 3), "seeds": seeds, "epochs": epochs,
                      "method": "in-process emulation of Bubble Filling semantics"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
