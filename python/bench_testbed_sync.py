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
sys.path.insert(0, HERE)
import wan_profile  # noqa: E402


GLOO_TCP_CC = set()  # the congestion control(s) the baselines' TCP ran with (scripts/testbed --tcp-cc)


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


def fluctuation_cycle(a, rotate):
    """Seconds after which the links' rates repeat (0: they never change): the WAN profile's
    schedule, or the rotation among the sites."""
    if rotate:
        return rotate * a.sites
    if a.wan:
        sched = wan_profile.load(a.wan).get("schedule") or {}
        return float(sched.get("repeat_s", 0) or 0)
    return 0.0


def one(backend, gateway, a, rotate, tmp, k, codec=None):
    """One testbed run: `backend` (stormgate, gloo or gloo-fp16) for a.rounds rounds; returns
    the median round time. Where the rates change on a cycle, every setting measures rounds
    spanning two whole cycles and returns their mean: a few rounds would sample whichever phase
    they fell in (one setting the fast phase, the next the slow one)."""
    out = os.path.join(tmp, "%s-%s-%d-%s.json" % (backend, codec or "", k, "rot" if rotate else "fixed"))
    cycle = fluctuation_cycle(a, rotate) if a.warmup > 0 and gateway != "stub" else 0.0
    worker = ("/usr/bin/python3 %s/sync_bench.py --backend %s --bytes %d --rounds %d --warmup %d --out %s "
              "--timeout %g%s%s%s" % (HERE, backend, a.bytes, a.rounds, a.warmup, out, a.timeout,
                                      " --expect site" if gateway == "stub" else "",
                                      # Early Close over a lossy WAN: at most its loss bound in bubbles
                                      " --bubbles 0.1" if a.wan else "",
                                      " --cover-seconds %g" % (2 * cycle) if cycle else ""))
    cmd = [os.path.join(ROOT, "scripts", "testbed"), "--sites", str(a.sites), "--workers", str(a.workers),
           "--gateway", gateway, "--model-bytes", str(a.bytes), "--worker-cmd", worker, "--quiet"]
    if a.rates:
        cmd += ["--rates", a.rates]
    if getattr(a, "tcp_cc", ""):
        cmd += ["--tcp-cc", a.tcp_cc]
    if a.wan:
        cmd += ["--wan", a.wan]
    if backend == "stormgate" and codec:
        cmd += ["--config-extra", compression_yaml(codec, tmp)]
    if rotate:
        cmd += ["--rotate", str(rotate)]
    rc = subprocess.call(cmd)
    if rc != 0 or not os.path.exists(out):
        raise SystemExit("testbed-sync: the %s run failed (testbed exit %d); rerun scripts/testbed with "
                         "--keep-logs to see the gateway and worker logs" % (backend, rc))
    with open(out) as f:
        res = json.load(f)
    if backend != "stormgate":
        GLOO_TCP_CC.add(res.get("tcp_cc", "unknown"))
    return res["mean"] if cycle else statistics.median(res["times"])


def series(a, codecs, rotate, tmp, baselines=("gloo",)):
    """Per pair: each stormgate setting, then each baseline, all on the same links. Returns
    {codec: [(stormgate, {baseline: seconds})]}."""
    pairs = {c: [] for c in codecs}
    for k in range(a.pairs):
        runs = {c: one("stormgate", a.gateway, a, rotate, tmp, k, c) for c in codecs}
        base = {b: one(b, "router", a, rotate, tmp, k) for b in baselines}
        for c in codecs:
            pairs[c].append((runs[c], base))
        print("  %-9s pair %d: %s   %s" % (
            "rotating" if rotate else "fixed", k + 1,
            "   ".join("stormgate %s %7.3f s" % (c, runs[c]) for c in codecs),
            "   ".join("%s %7.3f s" % (b, base[b]) for b in baselines)), flush=True)
    return pairs


def physical_bound(a):
    """The time no tree all-reduce can beat without compression. With the sites' uplinks (tbf):
    the slowest site must upload its whole gradient. With a WAN profile: every site sends and
    receives at least 2B(n-1)/n (its shards up, its own shard's mean out to the others) over
    its pairs' capacity (their average over the schedule's cycle), capped by its uplink; the
    last byte a site must send still has to cross its shortest one-way delay, the first byte it
    receives cannot arrive before its nearest peer's delay, and every site's result depends on
    every other site's gradient (shortest relay path). Payload bytes over the wire rate, no
    loss counted: the bound is generous to stormgate."""
    if not a.wan:
        slowest = min(float(r) for r in a.rates.split(",")) * 1e6 / 8
        return a.bytes / slowest
    p = wan_profile.load(a.wan)
    n = p["sites"]
    rates = lambda specs: {d: sp.get("rate_mbit", 0) for d, sp in specs.items()}  # noqa: E731
    base = rates(wan_profile.pair_specs(p))
    delay = {d: sp.get("delay_ms", 0) / 1e3 for d, sp in wan_profile.pair_specs(p).items()}
    for k in range(1, n + 1):  # shortest relay paths (Floyd-Warshall)
        for i in range(1, n + 1):
            for j in range(1, n + 1):
                if len({i, j, k}) == 3:
                    delay[(i, j)] = min(delay[(i, j)], delay[(i, k)] + delay[(k, j)])
    sched = p.get("schedule")
    if sched and sched.get("phases"):
        cycle = sched.get("repeat_s") or max(ph["at_s"] for ph in sched["phases"]) + 1
        phases = sorted(sched["phases"], key=lambda ph: ph["at_s"])
        avg = {d: 0.0 for d in base}
        edges = [0.0] + [ph["at_s"] for ph in phases] + [cycle]
        specs = [base] + [rates(wan_profile.pair_specs(p, ph)) for ph in phases]
        for spec, t0, t1 in zip(specs, edges[:-1], edges[1:]):
            for d in avg:
                avg[d] += spec[d] * (t1 - t0) / cycle
        rate = avg
    else:
        rate = base
    up = [float(r) for r in a.rates.split(",")] if a.rates else []
    per_site = 2 * a.bytes * (n - 1) / n
    worst = 0.0
    for i in range(1, n + 1):
        out = sum(rate[(i, j)] for j in range(1, n + 1) if j != i) * 1e6 / 8
        inn = sum(rate[(j, i)] for j in range(1, n + 1) if j != i) * 1e6 / 8
        if up:
            cap = up[(i - 1) % len(up)] * 1e6 / 8
            out, inn = min(out, cap), min(inn, cap)
        near_out = min(delay[(i, j)] for j in range(1, n + 1) if j != i)
        near_in = min(delay[(j, i)] for j in range(1, n + 1) if j != i)
        far = max(delay[(j, i)] for j in range(1, n + 1) if j != i)
        worst = max(worst, per_site / out + near_out, near_in + per_site / inn, far)
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--bytes", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rates", default=None, help="site uplinks, Mbit/s (default 200,100,50; with --wan: unshaped)")
    ap.add_argument("--wan", default="", help="a WAN profile (config/wan/*.yaml): the emulated WAN between the sites")
    ap.add_argument("--sites", type=int, default=3)
    ap.add_argument("--baselines", default="gloo", help="gloo (float32) and/or gloo-fp16 (DDP's fp16 compression hook)")
    ap.add_argument("--rotate", type=float, default=3.0, help="fluctuation: rotate rates every S seconds")
    ap.add_argument("--tcp-cc", default="", help="gloo's TCP congestion control (scripts/testbed --tcp-cc; default bbr)")
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
    if a.rates is None and not a.wan:
        a.rates = "200,100,50"
    if a.wan:
        a.wan = os.path.abspath(a.wan if os.path.exists(a.wan) else os.path.join(ROOT, "config", "wan", a.wan + ".yaml"))
    baselines = [b.strip() for b in a.baselines.split(",") if b.strip()]
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
    print("testbed-sync: %d MB per round, %d sites x %d workers, %s, gateway %s, stormgate %s, baselines %s"
          % (a.bytes >> 20, a.sites, a.workers, ("WAN " + os.path.basename(a.wan)) if a.wan else ("uplinks %s Mbit/s" % a.rates),
             a.gateway, ", ".join(codecs), ", ".join(baselines)), flush=True)
    try:
        fixed = series(a, codecs, 0, tmp, baselines)
        rot = {} if (a.quick or a.wan) else series(a, codecs[:1], a.rotate, tmp, baselines[:1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res = summarise(a, codecs, baselines, fixed, rot)
    print(json.dumps(res))
    return 0


def summarise(a, codecs, baselines, fixed, rot):
    """The table and the JSON figures: per setting and baseline the median over pairs of
    (baseline median round / stormgate median round)."""
    med = statistics.median
    where = ("WAN " + os.path.basename(a.wan)) if a.wan else ("fixed " + a.rates)
    print("\n%-28s %-9s %12s %12s %12s %10s" % ("links", "stormgate", "stormgate s", "baseline", "baseline s", "speedup"))
    res = {"bench": "testbed-sync", "bytes": a.bytes, "gateway": a.gateway, "codec": codecs[0]}
    if a.wan:
        res["wan"] = os.path.basename(a.wan)
    for c in codecs:
        p = fixed[c]
        res["stormgate_round_s_" + c] = round(med([x[0] for x in p]), 4)
        for b in baselines:
            sp = med([x[1][b] / x[0] for x in p])
            print("%-28s %-9s %12.3f %12s %12.3f %9.2fx" % (where, c, med([x[0] for x in p]), b, med([x[1][b] for x in p]), sp))
            key = "gloo" if b == "gloo" else b.replace("-", "_")
            res["speedup_vs_%s_%s" % (key, c)] = round(sp, 3)
    for b in baselines:
        res[b.replace("-", "_") + "_round_s"] = round(med([x[1][b] for x in fixed[codecs[0]]]), 4)
    if "gloo" in baselines:
        res["speedup_vs_gloo"] = res["speedup_vs_gloo_" + codecs[0]]
    res["stormgate_round_s"] = res["stormgate_round_s_" + codecs[0]]
    if rot:
        p = rot[codecs[0]]
        b0 = baselines[0]
        spr = med([x[1][b0] / x[0] for x in p])
        print("%-28s %-9s %12.3f %12s %12.3f %9.2fx" % ("rotating every %gs" % a.rotate, codecs[0], med([x[0] for x in p]),
                                                         b0, med([x[1][b0] for x in p]), spr))
        res["speedup_vs_gloo_fluctuating"] = round(spr, 3)
    res["gloo_tcp_cc"] = ",".join(sorted(GLOO_TCP_CC))
    bound = physical_bound(a)
    res["uncompressed_bound_s"] = round(bound, 4)
    if "gloo" in baselines:
        res["gloo_over_bound"] = round(res["gloo_round_s"] / bound, 3)
    if "f32" in codecs:
        res["f32_over_bound"] = round(res["stormgate_round_s_f32"] / bound, 3)
    print("lower bound without compression: %.3f s" % bound)
    return res


if __name__ == "__main__":
    sys.exit(main())
