"""perf/bench ddp-step: the median DDP training step through stormgate against gloo, 3 sites of
scripts/testbed (one worker each) over one tools/wanem WAN, four arms on the same links:

  stormgate f32   each worker a process group of its own (stormgate.ddp.make_local_group), the
                  stormgate hook streaming each bucket into the round during backward
                  (register(overlap=True)); gateways with `compression: {mode: off}`.
  gloo f32        plain DDP over a gloo process group spanning the sites, beside the same
                  stormgate gateways up and idle (--gloo-gateways idle, the default). Those run on
                  --pmd af_xdp whatever --pmd says: an af_packet gateway takes its whole port and
                  passes nothing else, while the XDP program steers only LTP to DPDK and leaves
                  gloo's TCP to the kernel's routing. --gloo-gateways none runs gloo on the
                  testbed's kernel routers with no gateway up (--gateway router), to show what the
                  idle gateways cost it.
  stormgate int8  as stormgate f32, gateways with `compression: {mode: always, codec: int8}`.
  gloo fp16       gloo DDP plus the one line a PyTorch user adds:
                  ddp.register_comm_hook(None, default_hooks.fp16_compress_hook).

WAN: three regions with the average RTTs of the AWS inter-region table that
config/wan/intercontinental.yaml cites (Oregon-N. Virginia 87.0 ms, N. Virginia-Ireland
80.5 ms, Oregon-Ireland 137.0 ms), pair rates 200/200/100 Mbit/s, no loss (the same profile for
every arm, written to a temp file).

Model: bench_overlap's MLP, 1,384,458 parameters (5.5 MB of float32 gradient per step), the
same initial values everywhere (torch.manual_seed(0)). Site 1 trains on --batch; sites 2 and 3
on a batch of 1 (as bench_overlap's --peers light), so that only one site's compute shares this
2-core machine with the gateways and the emulator (between data centers every site computes on
its own hardware). The figure is site 1's step.

The arms alternate (A B C D, --repeats times); each arm's figure is the median over every
repeat of site 1's steps after --warmup. Every run must end with bit-identical parameters at
all sites, else the bench fails.

  step_speedup_vs_gloo_f32   gloo f32 step / stormgate f32 step    (target above 1.3)
  step_speedup_vs_gloo_fp16  gloo fp16 step / stormgate int8 step  (target above 1.5)"""
import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_overlap import IN, make_model, model_params  # noqa: E402

SITES = 3
# arm -> (label, backend, gateway compression section or None)
ARMS = {
    "sg-f32": ("stormgate f32", "stormgate", "compression:\n  mode: off\n"),
    "gloo-f32": ("gloo f32", "gloo", None),
    "sg-int8": ("stormgate int8", "stormgate", "compression:\n  mode: always\n  codec: int8\n"),
    "gloo-fp16": ("gloo fp16", "gloo", None),
}
TARGETS = {"step_speedup_vs_gloo_f32": 1.3, "step_speedup_vs_gloo_fp16": 1.5}
FIGURES = {"step_speedup_vs_gloo_f32": ("gloo-f32", "sg-f32"), "step_speedup_vs_gloo_fp16": ("gloo-fp16", "sg-int8")}
GLOO_SIDE = {"idle": "beside the stormgate gateways, up and idle (af_xdp ports)",
             "none": "on kernel routers, no gateway up"}
STEP_KEY = {"sg-f32": "stormgate_f32", "gloo-f32": "gloo_f32", "sg-int8": "stormgate_int8", "gloo-fp16": "gloo_fp16"}

# One-way delays are half the RTT (tools/wanem's delay_ms is per direction).
WAN = """# 1 = US West (Oregon), 2 = US East (N. Virginia), 3 = EU (Ireland).
# RTTs: AWS inter-region averages (us-west-2 / us-east-1 / eu-west-1) as cited in
# config/wan/intercontinental.yaml: 87.0, 80.5, 137.0 ms. Rates chosen for the bench.
sites: 3
source: "bench ddp-step: AWS inter-region average RTTs (2017 table)"
default: {jitter_ms: 1, loss: 0, queue_kb: 4000}
pairs:
  - {between: [1, 2], delay_ms: 43.5, rate_mbit: 200}
  - {between: [2, 3], delay_ms: 40.25, rate_mbit: 200}
  - {between: [1, 3], delay_ms: 68.5, rate_mbit: 100}
"""


def worker(a):
    import datetime
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    rank, world = int(os.environ["SG_TB_RANK"]), int(os.environ["SG_TB_WORLD"])
    backend = ARMS[a.arm][1]
    torch.manual_seed(0)  # identical initial parameters at every site (stormgate broadcasts nothing)
    model = make_model(torch)
    nparams = sum(p.numel() for p in model.parameters())
    batch = a.batch if rank == 0 else 1
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(batch, IN, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)

    # Backward alone (no DDP): how much of a step is compute on this machine.
    plain = make_model(torch)
    bw = []
    for _ in range(2):
        loss = torch.nn.functional.cross_entropy(plain(x), y)
        t0 = time.perf_counter()
        loss.backward()
        bw.append(time.perf_counter() - t0)

    state = client = None
    if backend == "stormgate":
        import stormgate
        import stormgate.ddp
        stormgate.ddp.make_local_group()
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        client = stormgate.init(timeout=120)
        state = stormgate.ddp.register(ddp, client)  # overlap=True: buckets stream during backward
    else:
        dist.init_process_group("gloo", init_method="tcp://%s:29512" % os.environ["SG_TB_MASTER"], rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=120))
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        if a.arm == "gloo-fp16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps, waits, phases = [], [], []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        c0 = time.process_time()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        t1 = time.perf_counter()
        c1 = time.process_time()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if i >= a.warmup:
            steps.append(t3 - t0)
            # Where a step goes: forward, backward with its synchronisation, optimizer; and for
            # stormgate, backward up to the first and the last bucket, and the wait after it.
            # forward_cpu: the worker's own CPU time in forward (all its threads); well below
            # twice the wall time on two cores means its threads waited for a core.
            ph = {"forward": t1 - t0, "forward_cpu": c1 - c0, "backward_sync": t2 - t1, "optimizer": t3 - t2}
            if state is not None:
                waits.append(state.last_wait_seconds)
                ph.update({"to_first_bucket": state.first_bucket_at - t1,
                           "to_last_bucket": state.last_bucket_at - t1, "wait": state.last_wait_seconds})
            phases.append(ph)
    out = {"rank": rank, "arm": a.arm, "params": nparams, "batch": batch, "steps": steps, "waits": waits,
           "phases": phases,
           "backward_compute": bw, "loss": float(loss)}
    if client is not None:
        out["client"] = dict(client.stats)
    out["digest"] = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    with open(os.path.join(a.out, "%s-%d-rank-%d.json" % (a.arm, a.rep, rank)), "w") as f:
        json.dump(out, f)


def testbed_gateways(a, backend):
    """scripts/testbed's gateway options for an arm on `backend`."""
    if backend == "stormgate":
        return ["--gateway", "stormgate", "--pmd", a.pmd]
    if a.gloo_gateways == "idle":  # only af_xdp gateways pass the kernel's traffic
        return ["--gateway", "stormgate", "--pmd", "af_xdp"]
    return ["--gateway", "router"]


def run(a, arm, rep, tmp):
    """One testbed run of `arm`; returns every site's result."""
    label, backend, extra = ARMS[arm]
    # Bounded: the testbed stops the workers after this long (then results are missing: fail).
    duration = 90 + 20 * (a.warmup + a.steps)
    cmd = [os.path.join(ROOT, "scripts", "testbed"), "--sites", str(SITES), "--workers", "1",
           "--wan", os.path.join(tmp, "wan.yaml"), "--model-bytes", str(4 * model_params()), "--quiet",
           "--duration", str(duration)] + testbed_gateways(a, backend) + [
           "--worker-cmd", "/usr/bin/python3 %s --worker --arm %s --rep %d --out %s --steps %d --warmup %d "
           "--batch %d" % (os.path.abspath(__file__), arm, rep, tmp, a.steps, a.warmup, a.batch)]
    if extra is not None:
        path = os.path.join(tmp, "extra-%s.yaml" % arm)
        with open(path, "w") as f:
            f.write(extra)
        cmd += ["--config-extra", path]
    t0 = time.monotonic()
    rc = subprocess.call(cmd)
    took = time.monotonic() - t0
    res = []
    for r in range(SITES):
        p = os.path.join(tmp, "%s-%d-rank-%d.json" % (arm, rep, r))
        if rc != 0 or not os.path.exists(p):
            raise SystemExit("ddp-step: the %s run failed (testbed exit %d, site %d's result %s); rerun "
                             "scripts/testbed with --keep-logs to see the logs"
                             % (label, rc, r + 1, "written" if os.path.exists(p) else "missing"))
        with open(p) as f:
            res.append(json.load(f))
    digests = [r["digest"][:12] for r in res]
    if len(set(digests)) != 1:
        raise SystemExit("ddp-step: FAILED: the %s run ended with different parameters at the sites (%s)"
                         % (label, ", ".join(digests)))
    print("  %-15s repeat %d: site 1 median step %.3f s over %d steps (run %.0f s), parameters identical "
          "at the %d sites" % (label, rep + 1, statistics.median(res[0]["steps"]), len(res[0]["steps"]), took,
                               SITES), flush=True)
    return res


def driver(a):
    t_start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="sg-ddp-step-")
    with open(os.path.join(tmp, "wan.yaml"), "w") as f:
        f.write(WAN)
    arms = {k: ARMS[k] for k in a.arms}
    steps = {k: [] for k in arms}
    waits = {k: [] for k in arms}
    phases = {k: [] for k in arms}
    backward = []
    bubbles = 0
    print("ddp-step: %d sites, %d repeat(s) of %d arm(s), %d steps after %d warm-up each; stormgate's gateway "
          "ports %s; gloo %s" % (SITES, a.repeats, len(arms), a.steps, a.warmup, a.pmd, GLOO_SIDE[a.gloo_gateways]),
          flush=True)
    try:
        for rep in range(a.repeats):
            for arm in arms:  # alternated, so a drift of the shared machine hits every arm alike
                res = run(a, arm, rep, tmp)
                steps[arm] += res[0]["steps"]
                waits[arm] += res[0]["waits"]
                phases[arm] += res[0]["phases"]
                backward += res[0]["backward_compute"]
                bubbles += sum(r.get("client", {}).get("result_bubbles", 0) for r in res)
    finally:
        os.environ.get("SG_DDP_KEEP") or shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in steps.items()}
    fig = {k: med[base] / med[ours] for k, (base, ours) in FIGURES.items() if base in med and ours in med}
    print()
    print("WAN: 1-2 87.0 ms RTT 200 Mbit/s, 2-3 80.5 ms 200 Mbit/s, 1-3 137.0 ms 100 Mbit/s (no loss); model %d "
          "parameters; site 1 batch %d, sites 2-3 batch 1" % (model_params(), a.batch))
    print("%-16s %14s %14s %8s" % ("arm", "median step", "min / max", "steps"))
    for arm, (label, _, _) in arms.items():
        print("%-16s %12.3f s %6.3f/%6.3f %8d" % (label, med[arm], min(steps[arm]), max(steps[arm]), len(steps[arm])))
    waited = "; ".join("%s %.3f s" % (arms[k][0], statistics.median(v)) for k, v in waits.items() if v)
    print("backward alone at site 1: %.3f s; stormgate waited after the last bucket: %s; result chunks never "
          "delivered: %d" % (statistics.median(backward), waited or "-", bubbles))
    print("site 1's step by phase (medians, s):")
    for arm, (label, _, _) in arms.items():
        keys = list(phases[arm][0]) if phases[arm] else []
        print("  %-15s %s" % (label, "  ".join("%s %.3f" % (k, statistics.median(p[k] for p in phases[arm]))
                                              for k in keys)))
    for k, v in fig.items():
        t = TARGETS[k]
        print("%s = %.3f (target above %g: %s)" % (k, v, t, "reached" if v > t else "NOT reached"))
    r = lambda v: round(v, 4)  # noqa: E731
    out = {"bench": "ddp-step"}
    out.update({k: r(v) for k, v in fig.items()})
    out.update({"step_s_" + STEP_KEY[arm]: r(v) for arm, v in med.items()})
    out.update({"backward_s": r(statistics.median(backward)),
                "targets_reached": {k: fig[k] > t for k, t in TARGETS.items() if k in fig},
                "params": model_params(), "sites": SITES, "workers_per_site": 1, "batch_site1": a.batch,
                "batch_other_sites": 1, "wan_rtt_ms": [87.0, 80.5, 137.0], "wan_mbit": [200, 200, 100],
                "steps_per_run": a.steps, "warmup": a.warmup, "pmd": a.pmd,
                "gloo_gateways": a.gloo_gateways, "repeats": a.repeats, "quick": a.quick,
                "phases_s": {arm: {k: r(statistics.median(p[k] for p in phases[arm])) for k in phases[arm][0]}
                             for arm in arms if phases[arm]},
                "result_bubbles": bubbles, "wall_s": round(time.monotonic() - t_start, 1)})
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description="median DDP step through stormgate vs gloo, 3 testbed sites")
    ap.add_argument("--worker", action="store_true", help="(internal) one training worker on the testbed")
    ap.add_argument("--arm", choices=list(ARMS), default="sg-f32")
    ap.add_argument("--rep", type=int, default=0)
    ap.add_argument("--out", default="")
    ap.add_argument("--steps", type=int, default=10, help="measured steps per run")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256, help="site 1's batch (the other sites: 1)")
    ap.add_argument("--repeats", type=int, default=3, help="times the four arms run, alternated")
    ap.add_argument("--quick", action="store_true", help="3 steps after 1 warm-up, one repeat (CI)")
    ap.add_argument("--pmd", choices=["af_packet", "af_xdp"], default="af_packet",
                    help="the stormgate arms' gateway ports (scripts/testbed --pmd)")
    ap.add_argument("--gloo-gateways", choices=list(GLOO_SIDE), default="idle",
                    help="idle: gloo beside the stormgate gateways, up and idle (on af_xdp ports); none: gloo on "
                         "kernel routers with no gateway up")
    ap.add_argument("--arms", default=",".join(ARMS), help="the arms to run, comma-separated (default: all four)")
    a = ap.parse_args()
    a.arms = [x for x in a.arms.split(",") if x]
    bad = [x for x in a.arms if x not in ARMS]
    if bad or not a.arms:
        ap.error("--arms: unknown arm %s (choose from %s)" % (", ".join(bad) or "(none)", ", ".join(ARMS)))
    if a.quick:
        a.steps, a.warmup, a.repeats = 3, 1, 1
    worker(a) if a.worker else driver(a)


if __name__ == "__main__":
    main()
