#!/usr/bin/python3
"""Plots for perf/bench sim-sync: reads RESULTS/sim-sync.json, writes RESULTS/speedup.png
(stormgate's full stack: speedup per scenario and model size) and RESULTS/fluctuation.png (round time
over a fluctuating WAN, with the aware planner's policy switches and compressed links)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "perf/results"
with open(f"{out}/sim-sync.json") as f:
    d = json.load(f)

# Speedup of stormgate (FAPT + multipath, LTP) over each baseline.
rows = d.get("main", [])
if rows:
    labels = [f"{r['sites']} sites\n{r['model_bytes'] / 2**20:.0f} MB" if r["model_bytes"] < 0.99 * 2**30
              else f"{r['sites']} sites\n{r['model_bytes'] / 2**30:.0f} GB" for r in rows]
    ours = [r.get("stormgate full stack", r["stormgate FAPT+multipath"]) for r in rows]
    series = [("parameter server (reliable)", "PS (star, reliable)"),
              ("ring all-reduce (reliable)", "ring all-reduce (reliable)"),
              ("bandwidth-blind tree (reliable)", "blind tree (reliable)")]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    w = 0.26
    for k, (name, key) in enumerate(series):
        xs = [i + (k - 1) * w for i in range(len(rows))]
        ys = [r[key] / o for r, o in zip(rows, ours)]
        bars = ax.bar(xs, ys, w, label=f"vs {name}")
        for x, y in zip(xs, ys):
            ax.text(x, y, f"{y:.1f}", ha="center", va="bottom", fontsize=7)
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("speedup of stormgate (round-time ratio)")
    ax.set_title("Simulated round time: stormgate (full stack: FAPT, multipath, LTP, awareness,\n"
                 "adaptive compression) vs baselines", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{out}/speedup.png", dpi=120)
    print(f"wrote {out}/speedup.png", file=sys.stderr)

# Round time over the fluctuation trace.
fl = d.get("fluctuation", [])
if fl:
    f0 = fl[0]
    fig, ax = plt.subplots(figsize=(10, 4.8))
    styles = {"stuck": ("tab:red", "-"), "aware (passive)": ("tab:orange", ":"),
              "aware (passive+probes)": ("tab:blue", "-"), "aware+compress": ("tab:green", "--")}
    for mode, (color, ls) in styles.items():
        if mode not in f0:
            continue
        pts = f0[mode]
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        ax.step(xs, ys, where="post", color=color, linestyle=ls, label=mode)
        if mode == "aware (passive+probes)":
            sw = [p[0] + p[1] for p in pts if p[2]]
            for i, x in enumerate(sw):
                ax.axvline(x, color=color, alpha=0.25, linewidth=1, label="policy switch (aware)" if i == 0 else None)
    if "aware+compress" in f0:
        ax2 = ax.twinx()
        pts = f0["aware+compress"]
        ax2.step([p[0] for p in pts], [p[3] for p in pts], where="post", color="tab:green", alpha=0.35)
        ax2.set_ylabel("links compressed (aware+compress)", color="tab:green")
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("round time (s)")
    ax.set_title(f"{f0['scenario']}: round time over the fluctuation traces")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(f"{out}/fluctuation.png", dpi=120)
    print(f"wrote {out}/fluctuation.png", file=sys.stderr)

# The other experiments, appended to the markdown table the benchmark wrote.
md = [open(f"{out}/sim-sync.md").read().rstrip("\n").split("\n## ")[0], ""]
if d.get("loss1"):
    md += ["## 1% random loss on every link (same FAPT plan, 100 MB)", "",
           "| scenario | reliable (AIMD) | LTP (Early Close) | gain | LTP bubbles |", "|---|---|---|---|---|"]
    for r in d["loss1"]:
        md.append(f"| {r['scenario']} | {r['reliable_s']:.2f} s | {r['ltp_s']:.2f} s | "
                  f"{r['reliable_s'] / r['ltp_s']:.2f} | {r['bubbles']:.0f} |")
    md.append("")
if d.get("idle_multipath"):
    md += ["## Multipath where idle links exist (a single FAPT tree, LTP, without and with relays)", "",
           "| scenario | model | tree | tree + relays | splits | gain |", "|---|---|---|---|---|---|"]
    for r in d["idle_multipath"]:
        size = f"{r['model_bytes'] / 2**30:.0f} GB" if r["model_bytes"] >= 2**30 else f"{r['model_bytes'] / 2**20:.0f} MB"
        md.append(f"| {r['scenario']} | {size} | {r['tree_s']:.2f} s | {r['tree_mp_s']:.2f} s | {r['splits']:.0f} | "
                  f"{r['tree_s'] / r['tree_mp_s']:.2f} |")
    md.append("")
for f in d.get("fluctuation", []):
    modes = [m for m in ("stuck", "aware (passive)", "aware (passive+probes)", "aware+compress") if m in f]
    md += [f"## Fluctuation ({f['scenario']}, {len(f['stuck'])} rounds back to back, 100 MB)", "",
           "| planner | total | mean round | policy switches | gain vs stuck |", "|---|---|---|---|---|"]
    stuck = sum(p[1] for p in f["stuck"])
    for m in modes:
        tot = sum(p[1] for p in f[m])
        md.append(f"| {m} | {tot:.1f} s | {tot / len(f[m]):.2f} s | {sum(p[2] for p in f[m])} | {stuck / tot:.2f} |")
    md.append("")
keys = [k for k in sorted(d) if not isinstance(d[k], list)]
md += ["## Figures (the benchmark's JSON line)", "", "| figure | value |", "|---|---|"]
md += [f"| {k} | {d[k]:.4g} |" if isinstance(d[k], (int, float)) else f"| {k} | {d[k]} |" for k in keys]
md += ["", "Plots: [speedup.png](speedup.png), [fluctuation.png](fluctuation.png). "
       "How these were made and what they mean: [../README.md](../README.md#wan-simulator-sim-sync)."]
with open(f"{out}/sim-sync.md", "w") as fh:
    fh.write("\n".join(md) + "\n")
print(f"wrote {out}/sim-sync.md", file=sys.stderr)
