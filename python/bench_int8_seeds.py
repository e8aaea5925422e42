"""perf/bench int8-seeds: how much of time-to-accuracy's `final_loss_ratio_int8_vs_gloo` is the
codec and how much is the training's own trajectory noise. The same task (the digits CNN,
1,070,218 parameters, 3 sites, batch 32, SGD lr 0.05 momentum 0.9, 8 epochs) trained in one
process, once with the exact mean (what gloo f32 and stormgate f32 compute, bit for bit) and
once with stormgate's int8 codec emulated in numpy: one float32 scale per chunk of
CHUNK_FLOATS values (max|x| / 127, round to nearest), error feedback on every site's uplink
and on the root's result (the root encodes the mean once and keeps the decoded value, as
lib/sync/site_sync.cpp does), the root's own contribution exact. One tree (a star at site 0)
stands in for the controller's plans. Several seeds (model initialisation, data split, data
order), because one run's final validation loss moves by several percent from seed to seed.

Figures (last line; `_component`: a numpy model of the codec, not the product path):
  final_loss_ratio_int8_vs_f32_median_component   median over seeds of int8's final
                                                  validation loss over the exact mean's
  final_loss_ratio_int8_vs_f32_min_component / _max_component
  f32_final_loss_spread_component                 max/min of the exact mean's final loss
                                                  over the seeds (the trajectory noise)"""
import argparse
import json
import os
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_digits as td  # noqa: E402


def int8_roundtrip(x, chunk):
    """What the int8 codec's decoder returns for x, chunk by chunk (lib/compress/codec.h)."""
    import numpy as np
    n = len(x)
    y = np.concatenate([x, np.zeros((-n) % chunk, np.float32)]).reshape(-1, chunk)
    scale = np.abs(y).max(axis=1, keepdims=True) / np.float32(127.0)
    safe = np.where(scale > 0, scale, np.float32(1.0))
    q = np.clip(np.rint(y / safe), -127, 127) * scale
    return q.reshape(-1)[:n].astype(np.float32)


def train(seed, codec, epochs, sites=3, batch=32, lr=0.05, chunk=td.CHUNK_FLOATS):
    import numpy as np
    _, xte, _, yte = td.load_data(seed)
    n = td.n_params(0, "cnn")
    up_res = [np.zeros(n, np.float32) for _ in range(sites)]
    down_res = [np.zeros(n, np.float32)]

    def combine(site):
        if codec != "int8":
            return [np.mean(site, axis=0).astype(np.float32)] * sites
        total = site[0].copy()
        for r in range(1, sites):
            v = site[r] + up_res[r]
            sent = int8_roundtrip(v, chunk)
            up_res[r] = v - sent
            total += sent
        v = total / np.float32(sites) + down_res[0]
        mean = int8_roundtrip(v, chunk)
        down_res[0] = v - mean
        return [mean] * sites

    return td.train_in_process(seed, 0, "cnn", sites, 1, batch, lr, epochs, combine,
                               lambda ep, models: td.val_loss(models[0], xte, yte))


def one_seed(args):
    seed, epochs = args
    return seed, train(seed, "f32", epochs), train(seed, "int8", epochs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds, 2 epochs (CI smoke)")
    ap.add_argument("--seeds", type=int, default=0, help="seeds 1..N (default 8; 2 with --quick)")
    ap.add_argument("--epochs", type=int, default=0, help="default 8 (time-to-accuracy's); 2 with --quick")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    seeds = a.seeds or (2 if a.quick else 8)
    epochs = a.epochs or (2 if a.quick else 8)
    if seeds < 1 or epochs < 1:
        ap.error("--seeds and --epochs must be at least 1")
    with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        runs = sorted(pool.map(one_seed, [(s, epochs) for s in range(1, seeds + 1)]))
    print("%-5s %14s %14s %8s" % ("seed", "f32 final loss", "int8 final loss", "ratio"))
    ratios, finals = [], []
    for seed, f32, int8 in runs:
        ratios.append(int8[-1] / f32[-1])
        finals.append(f32[-1])
        print("%-5d %14.4f %14.4f %8.4f" % (seed, f32[-1], int8[-1], ratios[-1]))
    res = {"bench": "int8-seeds", "mode": "quick" if a.quick else "full", "seeds": seeds, "epochs": epochs,
           "chunk_floats": td.CHUNK_FLOATS,
           "final_loss_ratio_int8_vs_f32_median_component": round(statistics.median(ratios), 4),
           "final_loss_ratio_int8_vs_f32_min_component": round(min(ratios), 4),
           "final_loss_ratio_int8_vs_f32_max_component": round(max(ratios), 4),
           "f32_final_loss_spread_component": round(max(finals) / min(finals), 4),
           "per_seed": {str(s): [round(f[-1], 4), round(i[-1], 4)] for s, f, i in runs}}
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
