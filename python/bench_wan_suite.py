"""perf/bench wan-suite: stormgate against PyTorch's gloo over every WAN profile of
config/wan/ (the testbed's WAN emulator between 3 sites): stormgate in full precision
(compression: off), adaptive (NetSenseML's rule, up to int8) and always int8, against gloo
all_reduce in float32 and gloo with DDP's fp16 compression (cast, all_reduce, cast back), on
the same links, alternated, medians over pairs.

Figures (last line): speedup_f32_vs_gloo_lossy, f32_over_bound_max (stormgate full precision
over the uncompressed physical bound, worst profile), speedup_int8_vs_gloo_fp16_min,
adaptive_over_best_max (adaptive's time over the better of off/always, worst profile),
gain_adaptive_vs_off_fluctuating; per profile every time and ratio."""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_testbed_sync as tbs  # noqa: E402

PROFILES = ["continent", "intercontinental", "lossy", "fluctuating"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profiles", default=",".join(PROFILES))
    ap.add_argument("--bytes", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--pairs", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=180)
    a = ap.parse_args()
    profiles = ["lossy"] if a.quick else [p.strip() for p in a.profiles.split(",") if p.strip()]
    codecs = ["f32"] if a.quick else ["f32", "adaptive", "int8"]
    baselines = ["gloo"] if a.quick else ["gloo", "gloo-fp16"]
    a.bytes = a.bytes or ((1 << 20) if a.quick else (16 << 20))
    a.rounds = a.rounds or (1 if a.quick else 3)
    a.pairs = a.pairs or (1 if a.quick else 2)
    a.warmup = 0 if a.quick else 1
    a.sites, a.rates, a.gateway, a.rotate = 3, None, "stormgate", 0
    build = os.environ.get("SG_BUILD", os.path.join(ROOT, "build"))
    os.environ.setdefault("SG_GATEWAY_BIN", os.path.join(build, "control", "stormgate"))
    os.environ.setdefault("STORMGATE_PYEXT_DIR", os.path.join(build, "client"))
    med = statistics.median
    out = {"bench": "wan-suite", "bytes": a.bytes, "mode": "quick" if a.quick else "full"}
    table = []
    tmp = tempfile.mkdtemp(prefix="sg-wansuite-")
    try:
        for prof in profiles:
            a.wan = os.path.join(ROOT, "config", "wan", prof + ".yaml")
            print("== %s: %d MB per round, stormgate %s vs %s" % (prof, a.bytes >> 20, ", ".join(codecs), ", ".join(baselines)),
                  flush=True)
            pairs = tbs.series(a, codecs, 0, tmp, baselines)
            bound = tbs.physical_bound(a)
            t = {c: med([x[0] for x in pairs[c]]) for c in codecs}
            b = {bl: med([x[1][bl] for x in pairs[codecs[0]]]) for bl in baselines}
            row = {"profile": prof, "bound_s": bound, **{"stormgate_" + c: t[c] for c in codecs}, **b}
            table.append(row)
            ratio = lambda c, bl: med([x[1][bl] / x[0] for x in pairs[c]])  # noqa: E731
            out["speedup_f32_vs_gloo_" + prof] = round(ratio("f32", "gloo"), 3)
            out["f32_over_bound_" + prof] = round(t["f32"] / bound, 3)
            if "int8" in codecs and "gloo-fp16" in baselines:
                out["speedup_int8_vs_gloo_fp16_" + prof] = round(ratio("int8", "gloo-fp16"), 3)
            if "adaptive" in codecs:
                out["adaptive_over_best_" + prof] = round(t["adaptive"] / min(t["f32"], t["int8"]), 3)
                out["gain_adaptive_vs_off_" + prof] = round(t["f32"] / t["adaptive"], 3)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    keys = [k for k in table[0] if k not in ("profile",)]
    print("\n%-18s " % "profile" + " ".join("%14s" % k for k in keys))
    for row in table:
        print("%-18s " % row["profile"] + " ".join("%14.3f" % row[k] for k in keys))
    out["f32_over_bound_max"] = max(out["f32_over_bound_" + p] for p in profiles)
    if any(k.startswith("speedup_int8_vs_gloo_fp16_") for k in out):
        out["speedup_int8_vs_gloo_fp16_min"] = min(out["speedup_int8_vs_gloo_fp16_" + p] for p in profiles)
    if any(k.startswith("adaptive_over_best_") for k in out):
        out["adaptive_over_best_max"] = max(out["adaptive_over_best_" + p] for p in profiles)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
