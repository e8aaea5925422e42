"""A testbed WAN profile (config/wan/*.yaml, read by tools/wanem) as a simulator scenario
(perf/scenarios format, lib/sim/scenario.h): the same sites, directed pair rates, one-way
delays, random and Gilbert-Elliott loss, drop-tail queues, and the schedule's rate changes as
step traces. What the simulator does not model is listed, not silently dropped: jitter (below
a millisecond or two in the shipped profiles), reordering, duplication, blackholes.

    python3 python/wan_profile.py config/wan/lossy.yaml > /tmp/wan-lossy.yaml"""
import sys

import yaml

UNLIMITED_MBIT = 100000  # wanem's rate 0 (no limit): far above anything the testbed moves
HORIZON_S = 900          # a repeating schedule is unrolled this far


def _pair_dirs(e):
    if "from" in e:
        return [(e["from"], e["to"])]
    a, b = e["between"]
    return [(a, b), (b, a)]


def _apply(spec, entries):
    for e in entries or []:
        for d in _pair_dirs(e):
            spec[d] = {**spec[d], **{k: v for k, v in e.items() if k not in ("from", "to", "between")}}


def translate(profile):
    """Returns (scenario YAML text, [what the simulator leaves out])."""
    n = profile["sites"]
    default = profile.get("default", {})
    base = {(i, j): dict(default) for i in range(1, n + 1) for j in range(1, n + 1) if i != j}
    _apply(base, profile.get("pairs"))
    sched = profile.get("schedule") or {}
    phases = sorted(sched.get("phases") or [], key=lambda ph: ph["at_s"])
    repeat = sched.get("repeat_s", 0)
    # Every phase starts from the base (tools/wanem/profile.h), so a pair's rate at any time is
    # the base one unless the phase in force names it.
    starts = []
    cycles = int(HORIZON_S // repeat) + 1 if repeat else 1
    for c in range(cycles):
        for ph in phases:
            starts.append((c * repeat + ph["at_s"], ph))
    left_out = set()
    lines = ["name: wan-%s" % profile.get("name", "profile"), "seed: 14", "sites:"]
    lines += ["  - {name: s%d}" % i for i in range(1, n + 1)]
    lines.append("links:")
    for (i, j), p in sorted(base.items()):
        for k in ("jitter_ms", "reorder", "reorder_ms", "duplicate", "blackholes"):
            if p.get(k):
                left_out.add(k)
        rate = p.get("rate_mbit", 0) or UNLIMITED_MBIT
        queue_ms = p.get("queue_kb", 1000) * 1024 * 8 / (rate * 1e6) * 1e3
        fields = ["from: s%d" % i, "to: s%d" % j, "mbps: %g" % rate, "delay_ms: %g" % p.get("delay_ms", 0),
                  "queue_ms: %.4g" % max(0.1, queue_ms), "loss: %g" % p.get("loss", 0)]
        b = p.get("burst")
        if b:
            fields.append("gilbert_elliott: {p_good_bad: %g, p_bad_good: %g, loss_good: %g, loss_bad: %g}" % (
                b["p_enter"], b["p_exit"], b.get("loss_good", 0), b["loss_bad"]))
        steps = []
        for at, ph in starts:
            spec = dict(p)
            for e in ph.get("pairs") or []:
                if (i, j) in _pair_dirs(e):
                    spec.update({k: v for k, v in e.items() if k not in ("from", "to", "between")})
                    if any(k != "rate_mbit" for k in e if k not in ("from", "to", "between")):
                        left_out.add("schedule keys other than rate_mbit")
            steps.append((at, (spec.get("rate_mbit", 0) or UNLIMITED_MBIT) / rate))
        if any(abs(f - 1) > 1e-9 for _, f in steps):
            fields.append("trace: {kind: steps, steps: [%s]}" % ", ".join(
                "{at_s: %g, factor: %.6g}" % (at, f) for at, f in steps))
        lines.append("  - {%s}" % ", ".join(fields))
    return "\n".join(lines) + "\n", sorted(left_out)


def load(path):
    import os
    with open(path) as f:
        p = yaml.safe_load(f)
    p.setdefault("name", os.path.splitext(os.path.basename(path))[0])
    return p


if __name__ == "__main__":
    text, left = translate(load(sys.argv[1]))
    sys.stdout.write(text)
    if left:
        sys.stderr.write("not simulated: %s\n" % ", ".join(left))
