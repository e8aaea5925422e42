"""One testbed worker's DDP training with torch.distributed's "stormgate" backend
(python/stormgate/process_group.py): no process group, store or TCP connection between sites;
the rendezvous, DDP's parameter broadcast, barrier and all_gather go through the gateways
(an exact announced job), the gradients through stormgate.ddp's hook (the model's own
announced job, also exact here so that the sites' parameters can be compared bit for bit). Every rank starts from a different seed, so identical parameters after DDP's
construction prove the broadcast. Writes OUT/pg-JOB-SITE.json; the caller compares sites.

    process_group_ddp.py --model mlp|cnn --steps N --out DIR   (STORMGATE_JOB per process)"""
import argparse
import hashlib
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import stormgate  # noqa: E402
import stormgate.ddp  # noqa: E402
import stormgate.process_group  # noqa: E402,F401  (registers the backend)


def make_model(kind):
    if kind == "mlp":
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                   torch.nn.Linear(128, 10))
    return torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                               torch.nn.Flatten(), torch.nn.Linear(32 * 4 * 4, 10))


def digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def refused(a):
    """A third job beside the trainings, too large for what the gateways have left: the
    refusal (with the gateway's numbers) goes to OUT/pg-refused-SITE.txt."""
    import numpy as np
    site = os.environ["SG_TB_SITE"]
    c = stormgate.Client.from_env(timeout=30)
    try:
        c.allreduce(np.zeros(a.refused_model_mb << 18, dtype=np.float32))
    except stormgate.StormgateError as e:
        with open(os.path.join(a.out, "pg-refused-%s.txt" % site), "w") as f:
            f.write(str(e))
        print("refused as expected:", e, flush=True)
        return
    raise SystemExit("job %s with a %d MB model was admitted beside the trainings" % (os.environ["STORMGATE_JOB"],
                                                                                    a.refused_model_mb))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", required=True)
    ap.add_argument("--refused-model-mb", type=int, default=0,
                    help="instead of training: announce a model this large, which must be refused")
    a = ap.parse_args()
    if a.refused_model_mb:
        return refused(a)
    torch.set_num_threads(1)
    rank, world = int(os.environ["SG_TB_RANK"]), int(os.environ["SG_TB_WORLD"])
    job, site = int(os.environ["STORMGATE_JOB"]), os.environ["SG_TB_SITE"]
    t0 = time.time()
    dist.init_process_group("stormgate", init_method="stormgate://", rank=rank, world_size=world)
    t_init = time.time() - t0

    torch.manual_seed(100 + rank)  # a different start at every rank: DDP's broadcast must fix it
    model = make_model(a.model)
    before = digest(model)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    after = digest(model)
    # The gradient job exact as well: every site must end bit-identical, and an Early Close
    # bubble at a CPU-starved worker (LTP's design, counted; testbed_stormgate judges those) would
    # make the sites differ by design.
    stormgate.ddp.register(ddp, stormgate.Client.from_env(exact=True))

    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x[rank::world], dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
    y = torch.tensor(y[rank::world], dtype=torch.long)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    losses = []
    for step in range(a.steps):
        lo = (step * 64) % (len(x) - 64)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x[lo:lo + 64]), y[lo:lo + 64])
        loss.backward()
        opt.step()
        losses.append(float(loss))

    dist.barrier()
    final = digest(model)
    # The same check through the group itself: every rank's digest, gathered bit-exact.
    mine = torch.tensor([int(final, 16) >> 1], dtype=torch.int64)
    everyone = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(everyone, mine)
    pg = dist.distributed_c10d._get_default_group()
    res = {"job": job, "site": site, "rank": rank, "model": a.model,
           "params": sum(p.numel() for p in model.parameters()), "before": before, "after": after, "final": final,
           "gathered_equal": all(int(e) == int(mine) for e in everyone), "loss_first": losses[0],
           "loss_last": losses[-1], "init_seconds": round(t_init, 3), "control_rounds": pg.rounds}
    with open(os.path.join(a.out, "pg-%d-%s.json" % (job, site)), "w") as f:
        json.dump(res, f)
    print(json.dumps(res), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
