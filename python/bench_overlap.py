"""perf/bench overlap: DDP training steps across 2 sites of scripts/testbed (tools/wanem WAN:
each of --rtts round trips, --mbit each way), through the stormgate gateways and through gloo.

  stormgate  each worker a process group of its own (stormgate.ddp.make_local_group: nothing
             but the gateways joins the sites), the hook streaming each bucket into the round
             while backward computes the rest (overlap=True) alternating step by step with the
             hook that synchronises after backward (overlap=False: compute, then communication).
  gloo       plain DDP over a gloo process group spanning the sites (its own bucket overlap),
             the gateway namespaces routing in the kernel over the same emulated WAN.

Model: an MLP with 1.38 M parameters (5.5 MB of float32 gradient per step), batch --batch
(4096: backward about as long as the WAN transfer) at site 1. Site 2 (--peers emulated, default)
takes as long as that batch would, sleeping instead of computing, so that each site's upload is
on its step's critical path, as between data centers where every site computes on its own
hardware, while only site 1 computes on this 2-core machine. --peers train computes both
(the two trainings then share the cores with the gateways and the emulator). --peers light gives site 2 a batch of 1: its gradient is ready at once and reaches
site 1 during site 1's backward, whichever hook site 1 uses (its gateway begins the round at
the peer's first DATA), so there is little for the overlapping hook to hide. Every site must
end with identical parameters.

Figures (per WAN, suffix _rtt<ms>): step_ratio_overlap_vs_sequential (median overlapped step / median sequential step at
site 1; target at most 0.8 where backward and the WAN transfer are comparable: backward_s and
sync_s say how comparable they were) and step_ratio_stormgate_vs_gloo (the overlapping hook's
step / gloo DDP's; below 1: stormgate faster end to end)."""
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
IN, WIDTH, DEPTH = 128, 512, 6


def make_model(torch):
    """128 -> 512 x 6 -> 10: layers of similar size, so that DDP's buckets (1 MB) come one
    by one through backward and the last one is small."""
    layers, d = [], IN
    for _ in range(DEPTH):
        layers += [torch.nn.Linear(d, WIDTH), torch.nn.ReLU()]
        d = WIDTH
    return torch.nn.Sequential(*layers, torch.nn.Linear(d, 10))


def model_params():
    return IN * WIDTH + WIDTH + (DEPTH - 1) * (WIDTH * WIDTH + WIDTH) + WIDTH * 10 + 10


def worker(a):
    import datetime
    import numpy as np
    import torch
    import torch.distributed as dist
    sys.path.insert(0, HERE)
    torch.set_num_threads(1)
    rank, world = int(os.environ["SG_TB_RANK"]), int(os.environ["SG_TB_WORLD"])
    torch.manual_seed(0)  # the same initial parameters everywhere (stormgate: no broadcast needed)
    model = make_model(torch)
    nparams = sum(p.numel() for p in model.parameters())
    batch = a.batch if rank == 0 or a.peers != "light" else 1
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(batch, IN, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)

    # Compute alone (no DDP, no hook): what forward and backward cost here.
    plain = make_model(torch)
    fw, bw = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(plain(x), y)
        t1 = time.perf_counter()
        loss.backward()
        bw.append(time.perf_counter() - t1)
        fw.append(t1 - t0)
    # --peers emulated: site 2 takes as long as its full batch would, sleeping instead of
    # computing (forward before backward; backward spread over the layers, so that DDP hands
    # its buckets over one by one), a site with hardware of its own.
    emulate = rank != 0 and a.peers == "emulated"
    if emulate:
        x, y = x[:1], y[:1]
        per_layer = min(bw) / (DEPTH + 1)  # min: both sites measure at once, on shared cores
        for m in model:
            if isinstance(m, torch.nn.Linear):
                m.register_full_backward_hook(lambda mod, gin, gout: time.sleep(per_layer))

    if a.backend == "stormgate":
        import stormgate
        import stormgate.ddp
        stormgate.ddp.make_local_group()
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
        client = stormgate.init(timeout=120)
        state = stormgate.ddp.register(ddp, client)
    else:
        dist.init_process_group("gloo", init_method="tcp://%s:29511" % os.environ["SG_TB_MASTER"], rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=120))
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
        state = None
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = {True: [], False: []}
    waits = {True: [], False: []}
    backs = {True: [], False: []}  # backward up to its last bucket (stormgate: the compute part)
    for i in range(a.warmup + 2 * a.steps):
        overlap = i % 2 == 0  # every site alternates the same way: rounds stay aligned
        if state is not None:
            state.overlap = overlap
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        if emulate:
            time.sleep(min(fw))
        tb = time.perf_counter()
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if i >= a.warmup:
            steps[overlap].append(dt)
            if state is not None:
                waits[overlap].append(state.last_wait_seconds)
                backs[overlap].append(state.last_bucket_at - tb)
    out = {"rank": rank, "backend": a.backend, "params": nparams, "batch": batch, "overlap": steps[True],
           "sequential": steps[False], "backward_compute": bw, "loss": float(loss)}
    if state is not None:
        flat = np.ones(nparams, dtype=np.float32)  # synchronisation alone, as the sequential hook does it
        sync = []
        for _ in range(3):
            t0 = time.perf_counter()
            client.allreduce(flat)
            sync.append(time.perf_counter() - t0)
        out.update({"wait_overlap": waits[True], "wait_sequential": waits[False], "back_overlap": backs[True],
                    "back_sequential": backs[False], "sync": sync, "buckets": state.buckets_seen,
                    "client": dict(client.stats)})
    out["digest"] = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    with open(os.path.join(a.out, "%s-rank-%d.json" % (a.backend, rank)), "w") as f:
        json.dump(out, f)


def run(a, backend, tmp):
    """One testbed run of `backend`; returns every worker's result."""
    cmd = [os.path.join(ROOT, "scripts", "testbed"), "--sites", "2", "--workers", "1",
           "--wan", os.path.join(tmp, "wan.yaml"), "--model-bytes", str(4 * model_params()), "--quiet",
           "--gateway", "stormgate" if backend == "stormgate" or a.pmd == "af_xdp" else "router", "--pmd", a.pmd,
           "--worker-cmd", "/usr/bin/python3 %s --worker --backend %s --out %s --steps %d --warmup %d --batch %d "
           "--bucket-mb %g --peers %s" % (os.path.abspath(__file__), backend, tmp, a.steps, a.warmup, a.batch,
                                          a.bucket_mb, a.peers)]
    if backend == "stormgate":
        cmd += ["--config-extra", os.path.join(tmp, "extra.yaml")]
    rc = subprocess.call(cmd)
    res = []
    for r in range(2):
        p = os.path.join(tmp, "%s-rank-%d.json" % (backend, r))
        if rc != 0 or not os.path.exists(p):
            raise SystemExit("overlap: the %s run failed (testbed exit %d, worker %d's result %s); rerun "
                             "scripts/testbed with --keep-logs to see the logs" % (backend, rc, r,
                                                                                  "written" if os.path.exists(p) else "missing"))
        with open(p) as f:
            res.append(json.load(f))
    if len({r["digest"] for r in res}) != 1:
        raise SystemExit("overlap: the %s run ended with different parameters at the sites" % backend)
    return res


def one_wan(a, rtt, tmp):
    """Both backends over one emulated WAN; returns the figures."""
    with open(os.path.join(tmp, "wan.yaml"), "w") as f:
        f.write("# two regions, %g ms round trip, %g Mbit/s each way, %g%% random loss\nsites: 2\n"
                "source: \"bench overlap\"\ndefault: {delay_ms: %g, rate_mbit: %g, loss: %g, queue_kb: 2000}\n"
                % (rtt, a.mbit, 100 * a.loss, rtt / 2, a.mbit, a.loss))
    with open(os.path.join(tmp, "extra.yaml"), "w") as f:
        f.write("compression:\n  mode: off\n")  # full precision, like gloo's
    sg, gl = run(a, "stormgate", tmp), run(a, "gloo", tmp)
    s1 = sg[0]
    med = lambda r, k: statistics.median(r[k])  # noqa: E731
    ov, sq = med(s1, "overlap"), med(s1, "sequential")
    gloo = statistics.median(gl[0]["overlap"] + gl[0]["sequential"])
    bubbles = sum(r["client"]["result_bubbles"] for r in sg)
    print("WAN %g ms RTT, %g Mbit/s, loss %g: site 1 (batch %d; site 2 batch %d), median step over %d steps per hook:"
          % (rtt, a.mbit, a.loss, a.batch, sg[1]["batch"], a.steps))
    print("  stormgate, overlapping hook   %.3f s   (waited %.3f s after the last bucket; backward to it %.3f s)"
          % (ov, med(s1, "wait_overlap"), med(s1, "back_overlap")))
    print("  stormgate, sequential hook    %.3f s   (waited %.3f s after the last bucket; backward to it %.3f s)"
          % (sq, med(s1, "wait_sequential"), med(s1, "back_sequential")))
    print("  gloo DDP (same WAN, %d steps) %.3f s" % (2 * a.steps, gloo))
    print("  backward alone %.3f s, stormgate synchronisation alone %.3f s, %.1f buckets per step; result chunks "
          "never delivered: %d; parameters identical at both sites in both runs"
          % (med(s1, "backward_compute"), med(s1, "sync"), s1["buckets"] / (a.warmup + 2 * a.steps), bubbles))
    r = lambda v: round(v, 4)  # noqa: E731
    return {"step_ratio_overlap_vs_sequential": r(ov / sq), "step_ratio_stormgate_vs_gloo": r(ov / gloo),
            "step_s_overlap": r(ov), "step_s_sequential": r(sq), "step_s_gloo": r(gloo),
            "backward_s": r(med(s1, "backward_compute")), "sync_s": r(med(s1, "sync")),
            "wait_s_overlap": r(med(s1, "wait_overlap")), "wait_s_sequential": r(med(s1, "wait_sequential")),
            "result_bubbles": bubbles}


def driver(a):
    tmp = tempfile.mkdtemp(prefix="sg-overlap-")
    rtts = [float(x) for x in a.rtts.split(",")]
    out = {"bench": "overlap"}
    for rtt in rtts:
        for k, v in one_wan(a, rtt, tmp).items():
            out["%s_rtt%g" % (k, rtt)] = v
    shutil.rmtree(tmp, ignore_errors=True)
    out.update({"params": model_params(), "sites": 2, "peers": a.peers, "mbit": a.mbit, "loss": a.loss,
                "batch": a.batch, "steps_per_hook": a.steps})
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true", help="(internal) one training worker on the testbed")
    ap.add_argument("--backend", choices=["stormgate", "gloo"], default="stormgate")
    ap.add_argument("--out", default="")
    ap.add_argument("--steps", type=int, default=10, help="steps per hook")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--bucket-mb", type=float, default=1.0)
    ap.add_argument("--rtts", default="40,150", help="round trips (ms) of the emulated WANs, one run pair each")
    ap.add_argument("--mbit", type=float, default=200.0)
    ap.add_argument("--pmd", choices=["af_packet", "af_xdp"], default="af_packet",
                    help="the gateways' ports (scripts/testbed --pmd); with af_xdp gloo runs through the same "
                         "gateways, idle, whose kernels route its TCP")
    ap.add_argument("--loss", type=float, default=0.0, help="random loss per packet, each direction")
    ap.add_argument("--peers", choices=["emulated", "light", "train"], default="emulated",
                    help="emulated: site 2 takes a full batch's time, sleeping instead of computing; light: "
                         "site 2 trains on a batch of 1 (its gradient is ready at once); train: the full batch")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.steps, a.warmup, a.rtts = 3, 1, a.rtts if a.rtts != "40,150" else "150"
    worker(a) if a.worker else driver(a)


if __name__ == "__main__":
    main()
