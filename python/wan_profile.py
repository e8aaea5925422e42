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


def pair_specs(profile, phase=None):
    """Each directed pair (i, j) -> its settings: the default, the pairs' entries on top, and a
    schedule phase's entries on top of those (every phase starts from the base, as
    tools/wanem/profile.h applies them)."""
    n = profile["sites"]
    spec = {(i, j): dict(profile.get("default") or {}) for i in range(1, n + 1) for j in range(1, n + 1) if i != j}
    _apply(spec, profile.get("pairs"))
    if phase:
        _apply(spec, phase.get("pairs"))
    return spec


def translate(profile):
    """Returns (scenario YAML text, [what the simulator leaves out])."""
    n = profile["sites"]
    base = pair_specs(profile)
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
        # tools/wanem counts queue_kb in thousands of bytes; the simulator's queue is in time at
        # the link's base rate (a rate dip of the schedule shrinks it in bytes, wanem's does not).
        queue_bytes = p["queue_kb"] * 1000 if "queue_kb" in p else 1 << 20  # wanem's default
        queue_ms = queue_bytes * 8 / (rate * 1e6) * 1e3
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


def _rate_specs(profile):
    """Every entry of the profile that may carry rate_mbit or queue_kb."""
    specs = [profile.get("default") or {}] + list(profile.get("pairs") or [])
    for ph in (profile.get("schedule") or {}).get("phases") or []:
        specs += list(ph.get("pairs") or [])
    return specs


def max_rate_mbit(profile):
    """The fastest rate any pair has at any time of the schedule (0: none set)."""
    return max((float(e["rate_mbit"]) for e in _rate_specs(profile) if e.get("rate_mbit")), default=0.0)


def scaled(profile, factor):
    """The profile with every rate and queue scaled by `factor`: the same delays, losses and
    schedule, and the same queueing delay at each rate."""
    import copy
    q = copy.deepcopy(profile)
    q.pop("name", None)
    for e in _rate_specs(q):
        for k in ("rate_mbit", "queue_kb"):
            if e.get(k):
                e[k] = float(e[k]) * factor
    return q


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
