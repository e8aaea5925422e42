"""perf/bench testbed-sync: time to synchronise one gradient per round (16 MB by default)
across 3 sites on scripts/testbed (uplinks 200/100/50 Mbit/s, tbf both directions), through
the stormgate gateways vs torch.distributed all_reduce with gloo over the very same links,
in alternation (stormgate, gloo, stormgate, gloo ...); then the same while the link rates
rotate among the sites every few seconds. Figure: speedup_vs_gloo = median over pairs of
(gloo median round time / stormgate median round time)."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def one(backend, gateway, a, rotate, tmp, k):
    out = os.path.join(tmp, "%s-%d-%s.json" % (backend, k, "rot" if rotate else "fixed"))
    worker = ("/usr/bin/python3 %s/sync_bench.py --backend %s --bytes %d --rounds %d --warmup %d --out %s "
              "--timeout %g%s" % (HERE, backend, a.bytes, a.rounds, a.warmup, out, a.timeout,
                                  " --expect site" if gateway == "stub" else ""))
    cmd = [os.path.join(ROOT, "scripts", "testbed"), "--sites", "3", "--workers", str(a.workers), "--rates", a.rates,
           "--gateway", gateway, "--model-bytes", str(a.bytes), "--worker-cmd", worker, "--quiet"]
    if backend == "stormgate" and a.extra:
        cmd += ["--config-extra", a.extra]
    if rotate:
        cmd += ["--rotate", str(rotate)]
    rc = subprocess.call(cmd)
    if rc != 0 or not os.path.exists(out):
        raise SystemExit("testbed-sync: the %s run failed (testbed exit %d); rerun scripts/testbed with "
                         "--keep-logs to see the gateway and worker logs" % (backend, rc))
    with open(out) as f:
        return statistics.median(json.load(f)["times"])


def series(a, rotate, tmp):
    pairs = []
    for k in range(a.pairs):
        s = one("stormgate", a.gateway, a, rotate, tmp, k)
        g = one("gloo", "router", a, rotate, tmp, k)
        pairs.append((s, g, g / s))
        print("  %-12s pair %d: stormgate %7.3f s   gloo %7.3f s   ratio %5.2fx"
              % ("rotating" if rotate else "fixed", k + 1, s, g, g / s), flush=True)
    return pairs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--bytes", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rates", default="200,100,50")
    ap.add_argument("--rotate", type=float, default=3.0, help="fluctuation: rotate rates every S seconds")
    ap.add_argument("--gateway", choices=["stormgate", "stub"], default=os.environ.get("SG_TB_GATEWAY_KIND", "stormgate"),
                    help="stub: the DPDK-free per-site stub (plumbing only: no WAN round, not a valid figure)")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--codec", choices=["f32", "f16", "bf16", "int8", "topk", "adaptive"], default="f32",
                    help="stormgate compresses every tree link with this codec (compression: always); "
                         "adaptive: NetSenseML's rule on the measured links decides, up to int8 "
                         "(compression: adaptive); f32: no compression. gloo always sends f32.")
    a = ap.parse_args()
    a.bytes = a.bytes or ((1 << 20) if a.quick else (16 << 20))
    a.rounds = a.rounds or (1 if a.quick else 3)
    a.pairs = a.pairs or (1 if a.quick else 2)
    if a.quick:
        a.warmup = 0
        os.environ.setdefault("SG_TB_GATEWAY_WAIT", "1")
    build = os.environ.get("SG_BUILD", os.path.join(ROOT, "build"))
    os.environ.setdefault("SG_GATEWAY_BIN", os.path.join(build, "control", "stormgate"))
    os.environ.setdefault("SG_STUB_BIN", os.path.join(build, "client", "tests", "sg_gateway_stub"))
    os.environ.setdefault("STORMGATE_PYEXT_DIR", os.path.join(build, "client"))
    tmp = tempfile.mkdtemp(prefix="sg-tbsync-")
    a.extra = ""
    if True:  # always explicit: the config's default is compression: adaptive
        a.extra = os.path.join(tmp, "compression.yaml")
        with open(a.extra, "w") as f:
            if a.codec == "f32":
                f.write("compression:\n  mode: off\n")
            elif a.codec == "adaptive":
                f.write("compression:\n  mode: adaptive\n  codec: int8\n")
            else:
                f.write("compression:\n  mode: always\n  codec: %s\n" % a.codec)
    print("testbed-sync: %d MB per round, 3 sites x %d workers, uplinks %s Mbit/s, gateway %s, stormgate codec %s"
          % (a.bytes >> 20, a.workers, a.rates, a.gateway, a.codec), flush=True)
    try:
        fixed = series(a, 0, tmp)
        rot = [] if a.quick else series(a, a.rotate, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sp = statistics.median(p[2] for p in fixed)
    print("\n%-24s %12s %12s %10s" % ("links", "stormgate s", "gloo s", "speedup"))
    print("%-24s %12.3f %12.3f %9.2fx" % ("fixed " + a.rates, statistics.median(p[0] for p in fixed),
                                          statistics.median(p[1] for p in fixed), sp))
    res = {"bench": "testbed-sync", "bytes": a.bytes, "gateway": a.gateway, "codec": a.codec,
           "stormgate_round_s": round(statistics.median(p[0] for p in fixed), 4),
           "gloo_round_s": round(statistics.median(p[1] for p in fixed), 4), "speedup_vs_gloo": round(sp, 3)}
    if rot:
        spr = statistics.median(p[2] for p in rot)
        print("%-24s %12.3f %12.3f %9.2fx" % ("rotating every %gs" % a.rotate, statistics.median(p[0] for p in rot),
                                              statistics.median(p[1] for p in rot), spr))
        res["speedup_vs_gloo_fluctuating"] = round(spr, 3)
    # Without compression the slowest site must upload (and download) its whole gradient
    # once: bytes / slowest rate bounds any tree all-reduce from below.
    slowest = min(float(r) for r in a.rates.split(",")) * 1e6 / 8
    bound = a.bytes / slowest
    res["uncompressed_bound_s"] = round(bound, 4)
    res["gloo_over_bound"] = round(res["gloo_round_s"] / bound, 3)
    print("lower bound without compression (bytes / slowest uplink): %.3f s, i.e. at most %.2fx faster than gloo"
          % (bound, res["gloo_over_bound"]))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
