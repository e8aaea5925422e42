"""python/wan_profile.py: a profile scaled for wan-suite --below-mbit keeps its delays, losses
and schedule and its queues' time; the simulator's scenario reads queue_kb as tools/wanem
does (thousands of bytes, 1 MiB when unset)."""
import os
import re
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import wan_profile  # noqa: E402


def load(name):
    return wan_profile.load(os.path.join(ROOT, "config", "wan", name + ".yaml"))


def links(text):
    """{(from, to): {mbps, delay_ms, queue_ms, loss}} of a translated scenario."""
    out = {}
    for m in re.finditer(r"from: s(\d+), to: s(\d+), mbps: ([\d.e+]+), delay_ms: ([\d.]+), queue_ms: ([\d.]+), "
                         r"loss: ([\d.e-]+)", text):
        out[(int(m[1]), int(m[2]))] = dict(zip(("mbps", "delay_ms", "queue_ms", "loss"), map(float, m.groups()[2:])))
    return out


class Scaled(unittest.TestCase):
    def test_fastest_link_at_the_cap_and_everything_else_kept(self):
        for name in ("continent", "intercontinental", "lossy", "fluctuating"):
            p = load(name)
            top = wan_profile.max_rate_mbit(p)
            self.assertGreater(top, 0, name)
            q = wan_profile.scaled(p, 100 / top)
            self.assertAlmostEqual(wan_profile.max_rate_mbit(q), 100, msg=name)
            a, b = links(wan_profile.translate(p)[0]), links(wan_profile.translate(q)[0])
            self.assertEqual(len(a), 6, name)
            self.assertEqual(a.keys(), b.keys())
            for k in a:
                self.assertAlmostEqual(b[k]["mbps"], a[k]["mbps"] * 100 / top, places=3, msg=(name, k))
                self.assertEqual(b[k]["delay_ms"], a[k]["delay_ms"], (name, k))
                self.assertEqual(b[k]["loss"], a[k]["loss"], (name, k))
                self.assertAlmostEqual(b[k]["queue_ms"], a[k]["queue_ms"], delta=a[k]["queue_ms"] * 1e-3, msg=(name, k))
        self.assertIsNot(wan_profile.scaled(load("lossy"), 0.5)["default"], load("lossy")["default"])

    def test_schedule_dips_scale_with_the_rates(self):
        q = wan_profile.scaled(load("fluctuating"), 0.5)
        rates = [e["rate_mbit"] for ph in q["schedule"]["phases"] for e in ph["pairs"]]
        self.assertEqual(rates, [15, 15, 15])
        self.assertEqual(q["default"]["rate_mbit"], 150)


class Queue(unittest.TestCase):
    def test_queue_kb_in_thousands_of_bytes_and_wanems_default(self):
        base = {"sites": 2, "default": {"rate_mbit": 80, "delay_ms": 1}}
        set_ = dict(base, default=dict(base["default"], queue_kb=1000))
        self.assertAlmostEqual(links(wan_profile.translate(set_)[0])[(1, 2)]["queue_ms"], 100, delta=0.1)  # 1 MB at 80 Mbit/s
        self.assertAlmostEqual(links(wan_profile.translate(base)[0])[(1, 2)]["queue_ms"], (1 << 20) * 8 / 80e3, delta=0.1)  # printed to 4 digits


if __name__ == "__main__":
    unittest.main()
