"""perf/bench testbed-sync: time to synchronise one gradient per round (16 MB by default)
across 3 sites on scripts/testbed (uplinks 200/100/50 Mbit/s, tbf both directions), through
the stormgate gateways vs torch.distributed all_reduce with gloo over the very same links,
in alternation (stormgate, gloo, stormgate, gloo ...); then the same while the link rates
rotate among the sites every few seconds. Several stormgate settings (--codecs, default int8
then f32) run in each pair beside the same gloo run. Figures: speedup_vs_gloo (the first
setting) and speedup_vs_gloo_<codec> = median over pairs of (gloo median round time /
stormgate median round time)."""
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


def compression_yaml(codec, tmp):
    """The gateway config section for a stormgate setting (the config's default is adaptive)."""
    path = os.path.join(tmp, "compression-%s.yaml" % codec)
    with open(path, "w") as f:
        if codec == "f32":
            f.write("compression:\n  mode: off\n")
        elif codec == "adaptive":
            f.write("compression:\n  mode: adaptive\n  codec: int8\n")
        else:
            f.write("compression:\n  mode: always\n  codec: %s\n" % codec)
    return path


def one(backend, gateway, a, rotate, tmp, k, codec=None):
    out = os.path.join(tmp, "%s-%s-%d-%s.json" % (backend, codec or "", k, "rot" if rotate else "fixed"))
    worker = ("/usr/bin/python3 %s/sync_bench.py --backend %s --bytes %d --rounds %d --warmup %d --out %s "
              "--timeout %g%s" % (HERE, backend, a.bytes, a.rounds, a.warmup, out, a.timeout,
                                  " --expect site" if gateway == "stub" else ""))
    cmd = [os.path.join(ROOT, "scripts", "testbed"), "--sites", "3", "--workers", str(a.workers), "--rates", a.rates,
           "--gateway", gateway, "--model-bytes", str(a.bytes), "--worker-cmd", worker, "--quiet"]
    if backend == "stormgate" and codec:
        cmd += ["--config-extra", compression_yaml(codec, tmp)]
    if rotate:
        cmd += ["--rotate", str(rotate)]
    rc = subprocess.call(cmd)
    if rc != 0 or not os.path.exists(out):
        raise SystemExit("testbed-sync: the %s run failed (testbed exit %d); rerun scripts/testbed with "
                         "--keep-logs to see the gateway and worker logs" % (backend, rc))
    with open(out) as f:
        return statistics.median(json.load(f)["times"])


def series(a, codecs, rotate, tmp):
    """Per pair: each stormgate setting, then gloo. Returns {codec: [(stormgate, gloo, ratio)]}."""
    pairs = {c: [] for c in codecs}
    for k in range(a.pairs):
        runs = {c: one("stormgate", a.gateway, a, rotate, tmp, k, c) for c in codecs}
        g = one("gloo", "router", a, rotate, tmp, k)
        for c in codecs:
            pairs[c].append((runs[c], g, g / runs[c]))
        print("  %-9s pair %d: %s   gloo %7.3f s" % (
            "rotating" if rotate else "fixed", k + 1,
            "   ".join("stormgate %s %7.3f s (%.2fx)" % (c, runs[c], g / runs[c]) for c in codecs), g), flush=True)
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
    choices = ["f32", "f16", "bf16", "int8", "topk", "adaptive"]
    ap.add_argument("--codecs", default="int8,f32",
                    help="stormgate settings, comma-separated, the first one the headline: a codec for every tree "
                         "link (compression: always), adaptive (NetSenseML's rule on the measured links, up to int8) "
                         "or f32 (compression: off). gloo always sends f32.")
    ap.add_argument("--codec", choices=choices, help="one setting only (same as --codecs C)")
    a = ap.parse_args()
    codecs = [a.codec] if a.codec else [c.strip() for c in a.codecs.split(",") if c.strip()]
    for c in codecs:
        if c not in choices:
            ap.error("unknown codec %r (choose from %s)" % (c, ", ".join(choices)))
    a.bytes = a.bytes or ((1 << 20) if a.quick else (16 << 20))
    a.rounds = a.rounds or (1 if a.quick else 3)
    a.pairs = a.pairs or (1 if a.quick else 2)
    if a.quick:
        a.warmup = 0
        codecs = codecs[:1]
        os.environ.setdefault("SG_TB_GATEWAY_WAIT", "1")
    build = os.environ.get("SG_BUILD", os.path.join(ROOT, "build"))
    os.environ.setdefault("SG_GATEWAY_BIN", os.path.join(build, "control", "stormgate"))
    os.environ.setdefault("SG_STUB_BIN", os.path.join(build, "client", "tests", "sg_gateway_stub"))
    os.environ.setdefault("STORMGATE_PYEXT_DIR", os.path.join(build, "client"))
    tmp = tempfile.mkdtemp(prefix="sg-tbsync-")
    print("testbed-sync: %d MB per round, 3 sites x %d workers, uplinks %s Mbit/s, gateway %s, stormgate %s"
          % (a.bytes >> 20, a.workers, a.rates, a.gateway, ", ".join(codecs)), flush=True)
    try:
        fixed = series(a, codecs, 0, tmp)
        rot = {} if a.quick else series(a, codecs[:1], a.rotate, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = lambda xs: statistics.median(xs)  # noqa: E731
    print("\n%-24s %-9s %12s %12s %10s" % ("links", "stormgate", "stormgate s", "gloo s", "speedup"))
    res = {"bench": "testbed-sync", "bytes": a.bytes, "gateway": a.gateway, "codec": codecs[0]}
    for c in codecs:
        p = fixed[c]
        sp = med([x[2] for x in p])
        print("%-24s %-9s %12.3f %12.3f %9.2fx" % ("fixed " + a.rates, c, med([x[0] for x in p]), med([x[1] for x in p]), sp))
        res["speedup_vs_gloo_" + c] = round(sp, 3)
        res["stormgate_round_s_" + c] = round(med([x[0] for x in p]), 4)
    res["speedup_vs_gloo"] = res["speedup_vs_gloo_" + codecs[0]]
    res["stormgate_round_s"] = res["stormgate_round_s_" + codecs[0]]
    res["gloo_round_s"] = round(med([x[1] for x in fixed[codecs[0]]]), 4)
    if rot:
        p = rot[codecs[0]]
        spr = med([x[2] for x in p])
        print("%-24s %-9s %12.3f %12.3f %9.2fx" % ("rotating every %gs" % a.rotate, codecs[0], med([x[0] for x in p]),
                                                   med([x[1] for x in p]), spr))
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
