#!/usr/bin/python3
"""Trains an MLP on scikit-learn's digits with data-parallel workers spread over sites, the
gradients synchronised every step either through stormgate (the site gateways) or through
torch.distributed's gloo all_reduce, over the same shaped links of scripts/testbed.

  train_digits.py demo   [--sites 3] [--workers 2] [--rates 200,100,50] [--epochs 15] [--gateway stormgate|stub]
      Runs the training twice on the testbed -- through stormgate, then with gloo over the
      same links -- printing one line per epoch (round time, accuracy) and a side-by-side
      summary. --gateway stub uses the DPDK-free test gateway (each site then averages only
      its own workers: a plumbing check, not a global all-reduce).
  train_digits.py worker --backend stormgate|gloo ...
      One worker process (what the testbed starts in each site's worker namespace).
  train_digits.py sim    [--sites 3] [--workers 2] [--bubble-loss 0.05] ...
      Every worker in this process, no network: the exact mean (what gloo computes), or with
      --bubble-loss p the numerical semantics of LTP's Early Close + Bubble Filling over the
      WAN: every chunk of every site-to-root transfer is missing with probability p (the root
      averages the sites that arrived), and every chunk of the result missing at a site with
      probability p (the site keeps its own contribution, SiteSync's default down_fill).
      Pessimistic: real LTP retransmits first and closes early with at most ~p/2 missing.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CHUNK_FLOATS = 1344 // 4


def load_data(seed):
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    return train_test_split(x, d.target.astype(np.int64), test_size=0.25, random_state=seed, stratify=d.target)


def make_model(seed, hidden, kind="mlp"):
    """mlp: 64 -> hidden -> 10. cnn: two 3x3 convolutions (32, 64 channels) over the 8x8
    image, then 4096 -> 256 -> 10 (1,070,218 parameters: the time-to-accuracy task)."""
    import torch
    torch.manual_seed(seed)
    nn = torch.nn
    if kind == "cnn":
        return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.Flatten(),
                             nn.Linear(64 * 8 * 8, 256), nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def n_params(hidden, kind="mlp"):
    if kind == "cnn":
        return (9 * 32 + 32) + (9 * 32 * 64 + 64) + (4096 * 256 + 256) + (256 * 10 + 10)
    return 64 * hidden + hidden + hidden * 10 + 10


def shard(xtr, ytr, rank, world, batch):
    per = len(xtr) // world
    steps = per // batch
    lo = rank * per
    return xtr[lo:lo + per], ytr[lo:lo + per], steps


def accuracy(model, xte, yte):
    import torch
    with torch.no_grad():
        pred = model(torch.from_numpy(xte)).argmax(1).numpy()
    return float((pred == yte).mean())


def val_loss(model, xte, yte):
    import torch
    with torch.no_grad():
        return float(torch.nn.functional.cross_entropy(model(torch.from_numpy(xte)), torch.from_numpy(yte)))


def flat_grad(model):
    import torch
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def set_grad(model, flat):
    off = 0
    for p in model.parameters():
        n = p.numel()
        p.grad.copy_(flat[off:off + n].view_as(p))
        off += n


def step_grad(model, loss_fn, xb, yb):
    import torch
    model.zero_grad()
    loss = loss_fn(model(torch.from_numpy(xb)), torch.from_numpy(yb))
    loss.backward()
    return float(loss)


# --------------------------------------------------------------------------- worker
def run_worker(a):
    import numpy as np
    import torch
    rank, world = int(os.environ["SG_TB_RANK"]), int(os.environ["SG_TB_WORLD"])
    torch.set_num_threads(1)
    xtr, xte, ytr, yte = load_data(a.seed)
    xs, ys, steps = shard(xtr, ytr, rank, world, a.batch)
    model = make_model(a.seed, a.hidden, a.model)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    if a.backend == "stormgate":
        sys.path.insert(0, HERE)
        import stormgate
        client = stormgate.init(timeout=a.timeout)
        sync = client.allreduce
    else:
        import datetime
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://%s:%d" % (os.environ["SG_TB_MASTER"], a.port),
                                rank=rank, world_size=world, timeout=datetime.timedelta(seconds=a.timeout))

        if a.backend == "gloo-fp16":
            def sync(t):  # what DDP's fp16_compress_hook does: divide, cast, all_reduce, cast back
                half = t.to(torch.float16).div_(world)
                dist.all_reduce(half)
                t.copy_(half)
        else:
            def sync(t):
                dist.all_reduce(t)
                t.div_(world)
    progress = open(a.progress, "a") if (a.progress and rank == 0) else None
    rng = np.random.default_rng(a.seed + rank)
    epochs = []
    t_start = time.perf_counter()
    for ep in range(1, a.epochs + 1):
        order = rng.permutation(len(xs))
        sync_s, losses = [], []
        t_ep = time.perf_counter()
        for s in range(steps):
            idx = order[s * a.batch:(s + 1) * a.batch]
            losses.append(step_grad(model, loss_fn, xs[idx], ys[idx]))
            if a.sync == "params":
                # Gossip averaging (sync.mode selmcast): a local step, then the parameters
                # become the mix the gateway hands back.
                opt.step()
                with torch.no_grad():
                    flat = torch.cat([p.reshape(-1) for p in model.parameters()])
                    t0 = time.perf_counter()
                    sync(flat)
                    sync_s.append(time.perf_counter() - t0)
                    off = 0
                    for p in model.parameters():
                        p.copy_(flat[off:off + p.numel()].view_as(p))
                        off += p.numel()
                continue
            g = flat_grad(model)
            t0 = time.perf_counter()
            sync(g)
            sync_s.append(time.perf_counter() - t0)
            set_grad(model, g)
            opt.step()
        rec = {"epoch": ep, "round_ms": 1000 * sum(sync_s) / len(sync_s), "epoch_s": time.perf_counter() - t_ep,
               "loss": sum(losses) / len(losses), "acc": accuracy(model, xte, yte), "rounds": steps,
               "val_loss": val_loss(model, xte, yte), "t": time.perf_counter() - t_start}
        epochs.append(rec)
        if progress:
            progress.write(json.dumps(rec) + "\n")
            progress.flush()
    total = time.perf_counter() - t_start
    if a.backend != "stormgate":
        dist.barrier()
        dist.destroy_process_group()
    # The replica's final parameters, bit for bit: in all-reduce every site must end with the same.
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    res = {"backend": a.backend, "world": world, "epochs": epochs, "total_s": total, "digest": digest,
           "testbed_dir": os.environ.get("SG_TB_DIR", "")}  # the gateways' logs, if the testbed keeps them
    if rank == 0 and a.out:
        with open(a.out, "w") as f:
            json.dump(res, f)
    # Each site's first worker reports its site's replica too (sync.mode selmcast: the sites'
    # models differ).
    w = int(os.environ.get("SG_TB_WORKERS", "1"))
    if a.out and rank % w == 0:
        with open("%s.site%d" % (a.out, rank // w), "w") as f:
            json.dump(res, f)
    return 0


# --------------------------------------------------------------------------- sim
def train_in_process(seed, hidden, kind, sites, workers, batch, lr, epochs, combine, on_epoch):
    """Every worker's replica in one process, stepped together. combine(site_means) gets each
    site's mean gradient (its LocalGroup) and returns the gradient each site applies;
    on_epoch(epoch, models) returns the epoch's record."""
    import numpy as np
    import torch
    torch.set_num_threads(1)
    xtr, _, ytr, _ = load_data(seed)
    world = sites * workers
    models = [make_model(seed, hidden, kind) for _ in range(world)]
    opts = [torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9) for m in models]
    loss_fn = torch.nn.CrossEntropyLoss()
    shards = [shard(xtr, ytr, r, world, batch) for r in range(world)]
    rngs = [np.random.default_rng(seed + r) for r in range(world)]
    records = []
    for ep in range(1, epochs + 1):
        orders = [rngs[r].permutation(len(shards[r][0])) for r in range(world)]
        for s in range(shards[0][2]):
            grads = []
            for r in range(world):
                xs, ys, _ = shards[r]
                idx = orders[r][s * batch:(s + 1) * batch]
                step_grad(models[r], loss_fn, xs[idx], ys[idx])
                grads.append(flat_grad(models[r]).numpy().copy())
            site = [np.mean(grads[i * workers:(i + 1) * workers], axis=0) for i in range(sites)]
            results = combine(site)
            for r in range(world):
                set_grad(models[r], torch.from_numpy(np.ascontiguousarray(results[r // workers], dtype=np.float32)))
                opts[r].step()
        records.append(on_epoch(ep, models))
    return records


def run_sim(a):
    """All workers in one process: exact mean, or Bubble Filling semantics with loss p."""
    import numpy as np
    _, xte, _, yte = load_data(a.seed)
    S, W = a.sites, a.workers
    loss_rng = np.random.default_rng(a.seed * 7919 + 1)
    n = n_params(a.hidden, a.model)
    chunks = (n + CHUNK_FLOATS - 1) // CHUNK_FLOATS

    def combine(site):
        p = a.bubble_loss
        if p <= 0:
            return [np.mean(site, axis=0)] * S
        # Up: site i's chunk c reaches the root (site 0) unless lost.
        up = loss_rng.random((S, chunks)) >= p
        up[0, :] = True
        mask = np.repeat(up, CHUNK_FLOATS, axis=1)[:, :n]
        total = np.sum(np.where(mask, site, 0.0), axis=0)
        count = np.sum(mask, axis=0)
        mean = (total / np.maximum(count, 1)).astype(np.float32)
        results = []
        for i in range(S):
            if i == 0:
                results.append(mean)
                continue
            down = np.repeat(loss_rng.random(chunks) >= p, CHUNK_FLOATS)[:n]
            results.append(np.where(down, mean, site[i]).astype(np.float32))
        return results

    def on_epoch(ep, models):
        rec = {"epoch": ep, "acc": accuracy(models[0], xte, yte), "val_loss": val_loss(models[0], xte, yte),
               "acc_mean": float(np.mean([accuracy(m, xte, yte) for m in models]))}
        if not a.quiet:
            print("epoch %3d  accuracy %.4f (mean over replicas %.4f)  validation loss %.4f"
                  % (ep, rec["acc"], rec["acc_mean"], rec["val_loss"]), flush=True)
        return rec

    epochs = train_in_process(a.seed, a.hidden, a.model, S, W, a.batch, a.lr, a.epochs, combine, on_epoch)
    world = S * W
    out = {"backend": "sim", "bubble_loss": a.bubble_loss, "world": world, "epochs": epochs,
           "final_acc": epochs[-1]["acc_mean"]}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f)
    if a.quiet:
        print(json.dumps(out))
    if out["final_acc"] < a.min_acc:
        print("final accuracy %.4f below --min-acc %.4f" % (out["final_acc"], a.min_acc), file=sys.stderr)
        return 1
    return 0


# --------------------------------------------------------------------------- demo
def testbed_run(a, backend, gateway, out, progress, label, keep_logs=False):
    """Runs one training on a fresh testbed; streams rank 0's epoch lines. Returns the result
    (its testbed_dir: the testbed's logs, kept with keep_logs)."""
    worker = ("/usr/bin/python3 %s worker --backend %s --epochs %d --batch %d --hidden %d --lr %g --seed %d "
              "--out %s --progress %s --timeout %g --model %s --sync %s"
              % (os.path.abspath(__file__), backend, a.epochs, a.batch, a.hidden, a.lr, a.seed, out, progress,
                 a.timeout, a.model, getattr(a, "sync", "grads")))
    cmd = [os.path.join(ROOT, "scripts", "testbed"), "--sites", str(a.sites), "--workers", str(a.workers),
           "--gateway", gateway, "--model-bytes", str(4 * n_params(a.hidden, a.model)),
           "--worker-cmd", worker, "--quiet"]
    if a.rates:  # without: a WAN profile's pair rates are the only limit
        cmd += ["--rates", a.rates]
    if a.wan:
        cmd += ["--wan", a.wan]
    if a.rotate:
        cmd += ["--rotate", str(a.rotate)]
    if keep_logs:
        cmd.append("--keep-logs")
    if gateway == "stormgate" and a.config_extra:
        cmd += ["--config-extra", a.config_extra]
    open(progress, "w").close()
    done = threading.Event()

    def follow():
        with open(progress) as f:
            while True:
                line = f.readline()
                if line and not getattr(a, "quiet", False):
                    r = json.loads(line)
                    print("  [%-9s] epoch %3d  round %8.2f ms  epoch %6.2f s  loss %.4f  accuracy %.4f"
                          % (label, r["epoch"], r["round_ms"], r["epoch_s"], r["loss"], r["acc"]), flush=True)
                elif done.is_set():
                    return
                else:
                    time.sleep(0.2)
    th = threading.Thread(target=follow)
    th.start()
    rc = subprocess.call(cmd)
    done.set()
    th.join()
    if rc != 0 or not os.path.exists(out):
        raise SystemExit("%s training failed (testbed exit %d)" % (label, rc))
    with open(out) as f:
        return json.load(f)


def wan_source(path):
    """The profile's `source` line: where its RTTs come from."""
    try:
        import yaml
        with open(path) as f:
            return yaml.safe_load(f).get("source", "?")
    except (OSError, ImportError):
        return "?"


def use_build():
    """The testbed runs the binaries of the build perf/bench made (SG_BUILD), else build/."""
    build = os.environ.get("SG_BUILD", os.path.join(ROOT, "build"))
    os.environ.setdefault("SG_GATEWAY_BIN", os.path.join(build, "control", "stormgate"))
    os.environ.setdefault("SG_STUB_BIN", os.path.join(build, "client", "tests", "sg_gateway_stub"))
    os.environ.setdefault("SG_WANEM_BIN", os.path.join(build, "tools", "wanem", "wanem"))
    os.environ.setdefault("STORMGATE_PYEXT_DIR", os.path.join(build, "client"))


def run_demo(a):
    use_build()
    tmp = tempfile.mkdtemp(prefix="sg-digits-")
    where = ("WAN profile %s (%s)" % (os.path.basename(a.wan), wan_source(a.wan))) if a.wan else "no WAN delay or loss"
    print("digits MLP (%d parameters, %d bytes per round), %d sites x %d workers, uplinks %s Mbit/s, %s"
          % (n_params(a.hidden), 4 * n_params(a.hidden), a.sites, a.workers, a.rates, where))
    if a.gateway == "stub":
        print("NOTE: --gateway stub: each site averages only its own workers (no WAN round)")
    res = {}
    try:
        for backend, gateway, label in (("stormgate", a.gateway, "stormgate"), ("gloo", "router", "gloo")):
            print("\n== %s over the shaped links" % label, flush=True)
            res[label] = testbed_run(a, backend, gateway, os.path.join(tmp, label + ".json"),
                                     os.path.join(tmp, label + ".progress"), label)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n== summary (%d epochs; %s)" % (a.epochs, where))
    print("%-28s %14s %14s" % ("", "stormgate", "gloo"))

    def row(name, f, fmt):
        print("%-28s %14s %14s" % (name, fmt % f(res["stormgate"]), fmt % f(res["gloo"])))
    row("mean round time (ms)", lambda r: sum(e["round_ms"] for e in r["epochs"]) / len(r["epochs"]), "%.2f")
    row("final test accuracy", lambda r: r["epochs"][-1]["acc"], "%.4f")
    row("training time (s)", lambda r: r["total_s"], "%.1f")
    s_rt = sum(e["round_ms"] for e in res["stormgate"]["epochs"])
    g_rt = sum(e["round_ms"] for e in res["gloo"]["epochs"])
    print("round time speedup vs gloo: %.2fx" % (g_rt / s_rt if s_rt > 0 else float("nan")))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["demo", "worker", "sim"])
    ap.add_argument("--backend", choices=["stormgate", "gloo", "gloo-fp16"], default="stormgate")
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--sites", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rates", default="200,100,50")
    ap.add_argument("--rotate", type=float, default=0, help="rotate link rates every S seconds")
    ap.add_argument("--wan", default=os.path.join(ROOT, "config", "wan", "continent.yaml"),
                    help="WAN profile between the sites (tools/wanem; '' for none): delay, loss, pair rates")
    ap.add_argument("--config-extra", default="", help="YAML appended to the gateway configs (testbed)")
    ap.add_argument("--gateway", choices=["stormgate", "stub"], default="stormgate")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bubble-loss", type=float, default=0.0)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--out", default="")
    ap.add_argument("--progress", default="")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--min-acc", type=float, default=0.0, help="sim: fail below this final accuracy")
    ap.add_argument("--sync", choices=["grads", "params"], default="grads",
                    help="what the workers synchronise each step: gradients (all-reduce), or parameters after "
                         "a local step (gossip averaging, for sync.mode selmcast)")
    a = ap.parse_args()
    try:
        import sklearn  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print("train_digits: %s (Debian: python3-torch, python3-sklearn)" % e, file=sys.stderr)
        return 77  # "skipped" for meson test
    return {"demo": run_demo, "worker": run_worker, "sim": run_sim}[a.mode](a)


if __name__ == "__main__":
    sys.exit(main())
