"""perf/bench selmcast: SelMCast's receiver selection against p random receivers.

Three parts, one JSON line:
  model    the selection model on random instances, fed their true rates (*_model_oracle);
  sim      the peer-to-peer rounds (sync::PeerSync) in the WAN simulator, receivers chosen by
           the controller's code from what the sites measured: link rates, RTTs and each
           site's update lag (*_sim, *_sim_ssp); against the same selection blind to the
           lags (*_vs_load_blind_*), also with a compute straggler (one site 20x slower,
           *_straggler_*): both from perf/topology/bench_selmcast;
  testbed  real gateways in sync.mode selmcast on scripts/testbed over the intercontinental
           WAN profile (3 sites, uneven pair rates), p = 1: rounds of 4 MB updates with
           `receivers: selmcast` against `receivers: random`, alternated (round time as the
           workers see it, updates mixed per round from the gateways' summaries), under BSP and
           SSP (staleness 2); and the digits task trained in selmcast mode (gossip: workers
           send their parameters after each local step and take the site's mix) against
           all-reduce of gradients on the same testbed: every site's replica's accuracy after
           the same epochs (acc_gap_vs_allreduce_pct_points: all-reduce's accuracy minus the
           worst site's). A third testbed arm loads site 3 (its workers take 1 s per update):
           *_straggler."""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import train_digits  # noqa: E402

WAN = os.path.join(ROOT, "config", "wan", "intercontinental.yaml")


def extra(tmp, receivers, staleness, mode="selmcast"):
    path = os.path.join(tmp, "%s-%s-%d.yaml" % (mode, receivers, staleness))
    with open(path, "w") as f:
        if mode == "selmcast":
            f.write("sync: {mode: selmcast, receivers: %s, p: 1, staleness: %d}\ncompression: {mode: off}\n"
                    % (receivers, staleness))
        else:
            f.write("compression: {mode: off}\n")
        f.write("topology: {min_interval_ms: 300}\n")
    return path


def sync_run(tmp, receivers, staleness, rounds, warmup, straggler_ms=0):
    """One testbed run of `rounds` synchronisations; returns (median seconds, updates mixed per round).
    straggler_ms: the last site's workers take that long per update (a loaded site)."""
    out = os.path.join(tmp, "sync-%s-%d.json" % (receivers, staleness))
    worker = ("/usr/bin/python3 %s/sync_bench.py --backend stormgate --bytes %d --rounds %d --warmup %d --timeout 120 "
              "--expect mix --bubbles 1 --copies %d --straggler-ms %g --out %s"
              % (HERE, 4 << 20, rounds, warmup, staleness + 2 if staleness else 1, straggler_ms, out))
    cmd = [os.path.join(ROOT, "scripts", "testbed"), "--sites", "3", "--workers", "1", "--wan", WAN,
           "--model-bytes", str(4 << 20), "--config-extra", extra(tmp, receivers, staleness), "--keep-logs",
           "--worker-cmd", worker]
    p = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"logs kept in (\S+)", p.stderr + p.stdout)
    logs = m.group(1) if m else ""
    try:
        if p.returncode != 0 or not os.path.exists(out):
            raise SystemExit("selmcast sync run failed (%s, staleness %d): %s" % (receivers, staleness, p.stderr[-2000:]))
        mixed = []
        for g in sorted(glob.glob(os.path.join(logs, "gateway-*.log"))):
            with open(g) as f:
                mm = re.search(r"updates mixed ([0-9.]+) per round", f.read())
            if mm:
                mixed.append(float(mm.group(1)))
        with open(out) as f:
            times = json.load(f)["times"]
        return statistics.median(times), (statistics.mean(mixed) if mixed else 0.0)
    finally:
        if logs.startswith("/tmp/"):
            shutil.rmtree(logs, ignore_errors=True)


def train(tmp, label, config_extra, epochs, seed, sync="grads"):
    """Digits on the testbed; returns every site's final accuracy. sync params: gossip averaging
    (the SelMCast setting: workers send their parameters after a local step)."""
    ns = argparse.Namespace(sites=3, workers=2, rates="", rotate=0, epochs=epochs, batch=16, hidden=128, lr=0.05,
                            seed=seed, timeout=120.0, config_extra=config_extra, quiet=True, model="mlp", wan=WAN,
                            sync=sync)
    out = os.path.join(tmp, "%s-%d.json" % (label, seed))
    train_digits.testbed_run(ns, "stormgate", "stormgate", out, os.path.join(tmp, "%s.progress" % label), label)
    accs = []
    for k in range(3):
        with open("%s.site%d" % (out, k)) as f:
            accs.append(json.load(f)["epochs"][-1]["acc"])
    return accs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    build = os.environ.get("SG_BUILD", os.path.join(ROOT, "build"))
    model = subprocess.run([os.path.join(build, "perf", "topology", "bench_selmcast")] + (["--quick"] if a.quick else []),
                           capture_output=True, text=True, check=True).stdout
    # The model and simulator tables; their JSON line joins this bench's single line.
    print("\n".join(l for l in model.splitlines() if not l.startswith("{")), flush=True)
    line = json.loads([l for l in model.splitlines() if l.startswith("{")][-1])
    if os.geteuid() != 0:
        print("testbed part skipped: needs root", flush=True)
        print(json.dumps(line))
        return 0
    train_digits.use_build()
    tmp = tempfile.mkdtemp(prefix="sg-selmcast-")
    try:
        rounds, warmup, alts = (4, 3, 1) if a.quick else (8, 4, 2)
        print("\ntestbed: 3 sites on the intercontinental profile, p = 1, 4 MB updates, %d rounds per run "
              "(after %d warm-up), %d alternation(s)" % (rounds, warmup, alts), flush=True)
        # The last arm: site 3's workers take 1 s per update; the controller learns that load
        # from site 3's rows and fills the others' idle links with extra receivers.
        for s, suffix, slow in ((0, "", 0), (2, "_ssp", 0), (0, "_straggler", 1000)):
            res = {"selmcast": [], "random": []}
            for _ in range(alts):
                for recv in ("selmcast", "random"):
                    t, mixed = sync_run(tmp, recv, s, rounds, warmup, slow)
                    res[recv].append((t, mixed))
                    print("  %s staleness %d%s receivers %-8s round %.3f s, updates mixed %.2f per round"
                          % ("BSP" if s == 0 else "SSP", s, ", site 3 loaded" if slow else "", recv, t, mixed),
                          flush=True)
            ts = statistics.median(r[0] for r in res["selmcast"])
            tr = statistics.median(r[0] for r in res["random"])
            ms = statistics.mean(r[1] for r in res["selmcast"])
            mr = statistics.mean(r[1] for r in res["random"])
            line["round_time_ratio_vs_random" + suffix] = round(ts / tr, 3)
            line["mean_p_ratio_vs_random" + suffix] = round(ms / mr, 3) if mr > 0 else None
        epochs = 3 if a.quick else 15
        print("\ndigits MLP, 3 sites x 2 workers, %d epochs, same testbed:" % epochs, flush=True)
        base = train(tmp, "allreduce", extra(tmp, "-", 0, mode="allreduce"), epochs, 1)[0]
        print("  all-reduce: accuracy %.4f" % base, flush=True)
        for s, suffix in ((0, ""), (2, "_ssp")):
            accs = train(tmp, "selmcast-%d" % s, extra(tmp, "selmcast", s), epochs, 1, sync="params")
            print("  selmcast staleness %d: site accuracies %s" % (s, " ".join("%.4f" % x for x in accs)), flush=True)
            line["acc_gap_vs_allreduce_pct_points" + suffix] = round(100 * (base - min(accs)), 3)
        line["testbed_epochs"] = epochs
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
