"""The Python binding and python/stormgate against the gateway stub (a subprocess on
127.0.0.1): numpy and torch buffers synchronised in place, the DDP communication hook,
and the errors Python users see. Run by meson: test_python.py --stub PATH/sg_gateway_stub"""
import argparse
import subprocess
import sys
import threading
import unittest

import numpy as np

STUB = None


class Stub:
    def __init__(self, workers, model_bytes, push_timeout_ms=10000):
        self.p = subprocess.Popen([STUB, "--workers", str(workers), "--model-bytes", str(model_bytes),
                                   "--push-timeout-ms", str(push_timeout_ms)],
                                  stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        assert line.startswith("listening on "), line
        self.port = int(line.rsplit(":", 1)[1])

    def close(self):
        self.p.terminate()
        self.p.wait(timeout=10)
        self.p.stdout.close()


class NativeTest(unittest.TestCase):
    def test_numpy_in_place_mean_of_three_workers(self):
        import _stormgate
        n = 30001
        stub = Stub(3, 4 * n)
        try:
            ws = [_stormgate.Worker(port=stub.port, worker_index=i) for i in range(3)]
            arrs = [np.full(n, float(i + 1), dtype=np.float32) for i in range(3)]
            arrs[2][::7] = 10.0
            expect = (arrs[0] + arrs[1] + arrs[2]) / 3
            ts = [threading.Thread(target=w.allreduce, args=(a, 1)) for w, a in zip(ws, arrs)]
            [t.start() for t in ts]
            [t.join() for t in ts]
            for a in arrs:
                np.testing.assert_allclose(a, expect, rtol=1e-6)
            self.assertEqual(ws[0].stats["rounds"], 1)
        finally:
            stub.close()

    def test_errors(self):
        import _stormgate
        w = _stormgate.Worker(port=9, worker_index=0)  # discard port: nothing answers
        a = np.ones(100, dtype=np.float32)
        with self.assertRaises(_stormgate.GatewayTimeout) as cm:
            w.allreduce(a, 1, timeout=0.2)
        self.assertIn("127.0.0.1:9", str(cm.exception))
        self.assertTrue(issubclass(_stormgate.GatewayTimeout, _stormgate.StormgateError))
        with self.assertRaises(TypeError):
            w.allreduce(np.ones(10, dtype=np.float64), 1)
        with self.assertRaises(ValueError):
            w.allreduce(np.ones((10, 10), dtype=np.float32)[:, 0], 1)


class TorchTest(unittest.TestCase):
    def setUp(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skipTest("python3-torch not installed")

    def test_allreduce_tensor_and_noncontiguous(self):
        import torch
        import stormgate
        n = 5000
        stub = Stub(2, 4 * n)
        try:
            cs = [stormgate.Client(port=stub.port, worker_index=i) for i in range(2)]
            ts_ = [torch.full((50, 100), float(i), dtype=torch.float32) for i in range(2)]
            views = [t.t() for t in ts_]  # non-contiguous: copied through a staging buffer
            th = [threading.Thread(target=c.allreduce, args=(v,)) for c, v in zip(cs, views)]
            [t.start() for t in th]
            [t.join() for t in th]
            for t in ts_:
                self.assertTrue(torch.allclose(t, torch.full_like(t, 0.5)))
            # Next round, contiguous tensors: zero-copy.
            ts_ = [torch.arange(n, dtype=torch.float32) * (i + 1) for i in range(2)]
            th = [threading.Thread(target=c.allreduce, args=(t,)) for c, t in zip(cs, ts_)]
            [t.start() for t in th]
            [t.join() for t in th]
            self.assertTrue(torch.allclose(ts_[0], torch.arange(n, dtype=torch.float32) * 1.5))
            self.assertEqual(cs[0].round, 2)
        finally:
            stub.close()

    def test_ddp_hook_synchronises_through_the_gateway(self):
        import os
        import torch
        import torch.distributed as dist
        import stormgate.ddp
        # Over DDP's 1 MB first bucket: after the first pass DDP splits it into several buckets.
        def make():
            return torch.nn.Sequential(torch.nn.Linear(8, 600), torch.nn.ReLU(), torch.nn.Linear(600, 600))
        torch.manual_seed(0)
        model = make()
        nparams = sum(p.numel() for p in model.parameters())
        stub = Stub(1, 4 * nparams)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("gloo", rank=0, world_size=1)
        try:
            ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
            client = stormgate.Client(port=stub.port, worker_index=0)
            state = stormgate.ddp.register(ddp, client, overlap=False)  # gather, then one round
            x = torch.randn(4, 8)
            for _ in range(3):
                ddp.zero_grad()
                ddp(x).sum().backward()
            self.assertEqual(client.round, 3)
            self.assertGreater(state.buckets_seen, 3, "several buckets per pass, gathered into one round")
            # One worker: the mean is its own gradient, so the gradients are plain autograd's.
            ref = make()
            ref.load_state_dict(model.state_dict())
            ref(x).sum().backward()
            for p, q in zip(model.parameters(), ref.parameters()):
                self.assertTrue(torch.allclose(p.grad, q.grad, atol=1e-6))
        finally:
            dist.destroy_process_group()
            stub.close()

    def test_pending_round_pushes_only_what_is_ready(self):
        import stormgate
        n = 50001
        stub = Stub(2, 4 * n)
        try:
            a = np.full(n, np.nan, dtype=np.float32)  # NaN until handed over: an early send would show
            b = np.full(n, 3.0, dtype=np.float32)
            ca, cb = stormgate.Client(port=stub.port, worker_index=0), stormgate.Client(port=stub.port, worker_index=1)
            other = threading.Thread(target=lambda: cb.allreduce(b))
            other.start()
            p = ca.allreduce_start(a)
            self.assertIsInstance(p, stormgate.PendingRound)
            for k in (n // 3, 2 * n // 3, n):
                a[:k] = 1.0
                p.ready(k)
            with self.assertRaises(ValueError):
                p.ready(n + 1)
            p.wait()
            other.join()
            self.assertTrue(np.all(a == 2.0) and np.all(b == 2.0), (a[:3], b[:3]))
            self.assertEqual(ca.round, 1)
        finally:
            stub.close()

    def test_ddp_overlapping_hook_streams_each_bucket_into_the_round(self):
        import torch
        import stormgate.ddp
        def make():
            return torch.nn.Sequential(torch.nn.Linear(8, 600), torch.nn.ReLU(), torch.nn.Linear(600, 600))
        torch.manual_seed(0)
        model = make()
        nparams = sum(p.numel() for p in model.parameters())
        stub = Stub(2, 4 * nparams)  # a second worker pushes ones: every gradient becomes (g + 1) / 2
        stormgate.ddp.make_local_group()  # no process group beyond this worker
        import torch.distributed as dist
        try:
            ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.5)
            client = stormgate.Client(port=stub.port, worker_index=0)
            state = stormgate.ddp.register(ddp, client)
            self.assertTrue(state.overlap)
            peer = stormgate.Client(port=stub.port, worker_index=1)
            ones = np.ones(nparams, dtype=np.float32)
            x = torch.randn(4, 8)
            ref = make()
            for step in range(3):
                t = threading.Thread(target=lambda: peer.allreduce(ones.copy()))
                t.start()
                ddp.zero_grad()
                ddp(x).sum().backward()
                t.join()
                ref.load_state_dict(model.state_dict())
                ref.zero_grad()
                ref(x).sum().backward()
                for p, q in zip(model.parameters(), ref.parameters()):
                    self.assertTrue(torch.allclose(p.grad, (q.grad + 1) / 2, atol=1e-6), "step %d" % step)
            self.assertEqual(state.rounds_overlapped, 3)
            self.assertGreater(state.buckets_seen, 3, "several buckets per pass, each streamed into the round")
            # Buckets that do not add up to the model: the round is given up, backward fails.
            state.floats = nparams - 1
            ddp.zero_grad()
            with self.assertRaisesRegex(RuntimeError, "trainable parameters"):
                ddp(x).sum().backward()
        finally:
            dist.destroy_process_group()
            stub.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--stub", required=True)
    args, rest = ap.parse_known_args()
    STUB = args.stub
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
