"""The Python binding and python/stormgate against the gateway stub (a subprocess on
127.0.0.1): numpy and torch buffers synchronised in place (float32, float16, bfloat16; CUDA
tensors where CUDA is present), the DDP communication hook, and the errors Python users see.
Run by meson: test_python.py --stub PATH/sg_gateway_stub"""
import argparse
import subprocess
import sys
import threading
import unittest

import numpy as np

STUB = None


class Stub:
    def __init__(self, workers, model_bytes, push_timeout_ms=10000, extra=()):
        self.p = subprocess.Popen([STUB, "--workers", str(workers), "--model-bytes", str(model_bytes),
                                   "--push-timeout-ms", str(push_timeout_ms)] + [str(a) for a in extra],
                                  stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        assert line.startswith("listening on "), line
        self.port = int(line.rsplit(":", 1)[1])

    def close(self):
        """Stops the stub; returns what its workers pushed per codec, each chunk counted once:
        {"f32": (chunks, payload bytes), "f16": ..., "bf16": ...}."""
        self.p.terminate()
        out = self.p.stdout.read()
        self.p.wait(timeout=10)
        self.p.stdout.close()
        pushed = {}
        for line in out.splitlines():
            f = line.split()
            if f and f[0] == "pushed":  # pushed CODEC chunks C bytes B
                pushed[f[1]] = (int(f[3]), int(f[5]))
            if f and f[0] == "joins":  # joins J leaves L job_refused R refused X
                self.jobs = {f[i]: int(f[i + 1]) for i in range(0, len(f) - 1, 2)}
        return pushed


def half_bound(m, dtype):
    """Half a unit in the last place of float16 / bfloat16 at |m| (its binade's), plus float32
    summation slack: how far a correctly rounded mean may be from the exact one."""
    mant, emin = (10, -14) if dtype == np.float16 else (7, -126)
    e = np.maximum(np.floor(np.log2(np.maximum(np.abs(m), 2.0 ** emin))), emin)
    return 2.0 ** (e - mant) / 2 + 1e-6 * np.abs(m)


def _cuda_available():
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


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

    def test_numpy_float16_is_pushed_as_float16(self):
        import _stormgate
        n = 30001
        stub = Stub(3, 4 * n)  # model_bytes stays 4 x values whatever the dtype
        try:
            ws = [_stormgate.Worker(port=stub.port, worker_index=i) for i in range(3)]
            rng = np.random.default_rng(1)
            arrs = [rng.standard_normal(n).astype(np.float16) for _ in range(3)]
            exact = sum(a.astype(np.float64) for a in arrs) / 3
            ts = [threading.Thread(target=w.allreduce, args=(a, 1)) for w, a in zip(ws, arrs)]
            [t.start() for t in ts]
            [t.join() for t in ts]
            for a in arrs:
                self.assertEqual(a.dtype, np.float16)
                self.assertTrue(np.all(np.abs(a.astype(np.float64) - exact) <= half_bound(exact, np.float16)))
            self.assertTrue(np.array_equal(arrs[0], arrs[1]) and np.array_equal(arrs[0], arrs[2]))
        finally:
            pushed = stub.close()
        self.assertEqual(pushed["f16"][1], 3 * n * 2, "float16 on the LAN: 2 bytes a value")
        self.assertEqual(pushed["f32"][0], 0, "nothing upcast to float32")

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
        with self.assertRaisesRegex(ValueError, "contiguous"):
            w.allreduce(np.ones((10, 10), dtype=np.float16)[:, 0], 1)
        with self.assertRaisesRegex(TypeError, "bf16"):
            w.allreduce(np.ones(10, dtype=np.int16), 1)  # bfloat16 bits need dtype="bf16"
        with self.assertRaisesRegex(TypeError, "16-bit integers"):
            w.allreduce(np.ones(10, dtype=np.float16), 1, dtype="bf16")
        with self.assertRaisesRegex(TypeError, "float16"):
            w.allreduce(np.ones(10, dtype=np.float32), 1, dtype="f16")
        with self.assertRaisesRegex(ValueError, "dtype must be"):
            w.allreduce(np.ones(10, dtype=np.float32), 1, dtype="fp8")


class JobTest(unittest.TestCase):
    """Jobs announced by their workers: the stub (--announced 1) holds no job until a join."""

    def test_client_workers_announces_the_job(self):
        import stormgate
        n = 3001
        stub = Stub(2, 4 * n, extra=["--announced", 1])
        try:
            cs = [stormgate.Client(port=stub.port, worker_index=i, workers=2, timeout=10) for i in range(2)]
            arrs = [np.full(n, float(i + 1), dtype=np.float32) for i in range(2)]
            for _ in range(2):
                th = [threading.Thread(target=c.allreduce, args=(a,)) for c, a in zip(cs, arrs)]
                [t.start() for t in th]
                [t.join() for t in th]
                for a in arrs:
                    np.testing.assert_allclose(a, 1.5)
            self.assertGreaterEqual(cs[0].stats["job_joins_sent"], 1)
            self.assertEqual(cs[0].stats["rounds"], 2)
            wrong = stormgate.Client(port=stub.port, worker_index=0, workers=2, timeout=10)
            with self.assertRaisesRegex(stormgate.StormgateError, r"refused job 1: .*model_bytes 12004 \(here 8\)"):
                wrong.allreduce(np.ones(2, dtype=np.float32))
            with self.assertRaisesRegex(ValueError, "weight"):
                stormgate.Client(port=stub.port, workers=2, weight=17)
            other = stormgate.Client(port=stub.port, worker_index=0, workers=2, job=5, timeout=10)
            with self.assertRaisesRegex(stormgate.StormgateError, "refused job 5: .*no room for job 5"):
                other.allreduce(np.ones(2, dtype=np.float32))
            for c in cs:
                c.close()
        finally:
            stub.close()
        self.assertEqual(stub.jobs["leaves"], 2)
        self.assertEqual(stub.jobs["job_refused"], 2)

    def test_environment_announces_with_workers_and_weight(self):
        import os
        import stormgate
        n = 1000
        stub = Stub(1, 4 * n, extra=["--announced", 1, "--job-weight", 2])
        env = {"STORMGATE_GATEWAY": "127.0.0.1:%d" % stub.port, "STORMGATE_WORKERS": "1",
               "STORMGATE_WEIGHT": "2", "STORMGATE_TIMEOUT": "10"}
        saved = {k: os.environ.get(k) for k in env}
        try:
            os.environ.update(env)
            a = np.full(n, 4.0, dtype=np.float32)
            stormgate.init()
            stormgate.allreduce(a)
            np.testing.assert_allclose(a, 4.0)
            os.environ["STORMGATE_WEIGHT"] = "3"
            with self.assertRaisesRegex(stormgate.StormgateError, r"weight 2 \(here 3\)"):
                stormgate.init().allreduce(a)
            # Not announcing: no join. The announcing clients above are gone, so they left and the
            # stub's job has ended: the plain push gets no answer.
            os.environ["STORMGATE_WORKERS"] = ""
            c = stormgate.init()
            with self.assertRaises(stormgate.GatewayTimeout):
                c.allreduce(a, round=5, timeout=0.3)
            self.assertEqual(c.stats["job_joins_sent"], 0)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            stormgate._default = None
            stub.close()
        self.assertGreaterEqual(stub.jobs["joins"], 2)

    def test_malformed_environment_is_refused_naming_the_variable(self):
        import os
        import stormgate
        cases = [("STORMGATE_GATEWAY", "gateway-host"), ("STORMGATE_GATEWAY", "h:70000"),
                 ("STORMGATE_SITE_ID", "40000"), ("STORMGATE_WORKER_INDEX", "-1"), ("STORMGATE_JOB", "x"),
                 ("STORMGATE_WEIGHT", "17"), ("STORMGATE_TIMEOUT", "0"), ("STORMGATE_TIMEOUT", "nan"),
                 ("STORMGATE_CHUNK_BYTES", "12"), ("STORMGATE_PUSH_WINDOW_KB", "-1"),
                 ("STORMGATE_PUSH_WINDOW_KB", "2000000")]
        for name, value in cases:
            saved = os.environ.get(name)
            os.environ[name] = value
            try:
                with self.assertRaisesRegex(ValueError, "^%s: expected .*%r" % (name, value)):
                    stormgate.Client.from_env()
            finally:
                if saved is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = saved
        # The native layer checks what a caller passes directly.
        with self.assertRaisesRegex(ValueError, "gateway_node .* must be 1..32767, got 40000"):
            stormgate.Client(port=7400, gateway_node=40000)
        with self.assertRaisesRegex(ValueError, "push_window_kb must be 0..1048576"):
            stormgate.Client(port=7400, push_window_kb=2000000)


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

    def test_half_and_bfloat16_tensors_go_out_in_their_dtype(self):
        import torch
        import stormgate
        n = 20001
        stub = Stub(2, 4 * n)
        try:
            cs = [stormgate.Client(port=stub.port, worker_index=i) for i in range(2)]
            g = torch.Generator().manual_seed(2)
            base = [torch.randn(n, generator=g) * 3 for _ in range(2)]

            def round_of(make):
                ts_ = [make(b) for b in base]
                want = ((ts_[0].float() + ts_[1].float()) / 2).to(ts_[0].dtype)  # the gateway's float32 mean, rounded once
                ptrs = [t.data_ptr() for t in ts_]
                th = [threading.Thread(target=c.allreduce, args=(t,)) for c, t in zip(cs, ts_)]
                [t.start() for t in th]
                [t.join() for t in th]
                for t, p in zip(ts_, ptrs):
                    self.assertEqual(t.data_ptr(), p)
                    self.assertTrue(torch.equal(t, want.view_as(t)), (t.dtype, t.reshape(-1)[:3], want[:3]))

            round_of(lambda b: b.half())                            # zero-copy float16
            round_of(lambda b: b.bfloat16())                        # zero-copy bfloat16 (int16 bits)
            round_of(lambda b: b.bfloat16().view(3, n // 3).t())    # non-contiguous: a bfloat16 staging copy
            self.assertEqual(cs[0]._staging.dtype, torch.bfloat16)
            round_of(lambda b: b.double())                          # other dtypes: a float32 staging copy
            self.assertEqual(cs[0].round, 4)
            # Wrong size against the job, and allreduce_start's checks: clear errors, no round used.
            c = stormgate.Client(port=stub.port, worker_index=0, model_floats=n)
            with self.assertRaisesRegex(ValueError, "model_floats"):
                c.allreduce(torch.zeros(n - 1, dtype=torch.float16))
            with self.assertRaisesRegex(ValueError, "float16 or bfloat16"):
                c.allreduce_start(torch.zeros(n, dtype=torch.float64))
            with self.assertRaisesRegex(ValueError, "non-contiguous"):
                c.allreduce_start(torch.zeros(3, n // 3, dtype=torch.float16).t())
            self.assertEqual(c.round, 0)
        finally:
            pushed = stub.close()
        self.assertEqual(pushed["f16"][1], 2 * n * 2, "one float16 round: 2 bytes a value")
        self.assertEqual(pushed["bf16"][1], 2 * 2 * n * 2, "two bfloat16 rounds: 2 bytes a value")
        self.assertEqual(pushed["f32"][1], 2 * n * 4, "only the float64 round went out as float32")

    def test_pending_round_streams_bfloat16(self):
        import torch
        import stormgate
        n = 30001
        stub = Stub(2, 4 * n)
        try:
            a = torch.full((n,), float("nan"), dtype=torch.bfloat16)  # NaN until handed over
            b = np.full(n, 2.0, dtype=np.float32)
            ca, cb = stormgate.Client(port=stub.port, worker_index=0), stormgate.Client(port=stub.port, worker_index=1)
            other = threading.Thread(target=lambda: cb.allreduce(b))
            other.start()
            p = ca.allreduce_start(a)
            for k in (n // 2, n):
                a[:k] = 1.0
                p.ready(k)
            p.wait()
            other.join()
            self.assertTrue(torch.all(a == 1.5) and np.all(b == 1.5), (a[:3], b[:3]))
        finally:
            pushed = stub.close()
        self.assertEqual(pushed["bf16"][1], n * 2)
        self.assertEqual(pushed["f32"][1], n * 4)

    def test_ddp_hook_sends_half_buckets_as_half(self):
        import torch
        import torch.distributed as dist
        import stormgate.ddp
        # A float16 model of elementwise ops (torch 1.13 has no CPU float16 matmul, and gloo
        # cannot broadcast bfloat16 when DDP is built: the bfloat16 hook path is the same code).
        # Over DDP's 1 MB first bucket, so that DDP splits it after the first pass.
        class Half(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = torch.nn.Parameter(torch.randn(1000, 1000).half())
                self.b = torch.nn.Parameter(torch.randn(1000).half())
                self.c = torch.nn.Parameter(torch.randn(1000, 1000).half())

            def forward(self, x):
                return (x * self.a + self.b) * self.c
        torch.manual_seed(0)
        model = Half()
        nparams = sum(p.numel() for p in model.parameters())
        stub = Stub(2, 4 * nparams)  # a float32 peer pushes ones: every gradient becomes (g + 1) / 2
        stormgate.ddp.make_local_group()
        try:
            ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.5)
            client = stormgate.Client(port=stub.port, worker_index=0)
            state = stormgate.ddp.register(ddp, client)
            peer = stormgate.Client(port=stub.port, worker_index=1)
            x = torch.randn(1000, 1000).half()
            ref = Half()
            for step in range(3):
                t = threading.Thread(target=lambda: peer.allreduce(np.ones(nparams, dtype=np.float32)))
                t.start()
                ddp.zero_grad()
                ddp(x).sum().backward()
                t.join()
                self.assertEqual(state.flat.dtype, torch.float16)
                ref.load_state_dict(model.state_dict())
                ref.zero_grad()
                ref(x).sum().backward()
                for p, q in zip(model.parameters(), ref.parameters()):
                    self.assertEqual(p.grad.dtype, torch.float16)
                    self.assertTrue(torch.equal(p.grad, ((q.grad.float() + 1) / 2).half()), "step %d" % step)
            self.assertEqual(state.rounds_overlapped, 3)
            self.assertGreater(state.buckets_seen, 3, "several buckets per pass")
        finally:
            dist.destroy_process_group()
            pushed = stub.close()
        self.assertEqual(pushed["f16"][1], 3 * nparams * 2, "the buckets went out as float16")
        self.assertEqual(pushed["f32"][1], 3 * nparams * 4, "the peer's float32 pushes")

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


# One rank of ProcessGroupTest: every collective the backend offers, results as one JSON line.
_PG_RANK = r"""
import json, os, sys
import torch, torch.distributed as dist
import stormgate.process_group
rank, world = int(sys.argv[1]), int(sys.argv[2])
dist.init_process_group("stormgate", init_method="stormgate://", rank=rank, world_size=world)
g = torch.Generator().manual_seed(7)
f64 = torch.randn(1001, generator=g, dtype=torch.float64) * (rank + 1)   # odd byte count / 2
out = {}
b = torch.arange(9, dtype=torch.int32) * (rank + 1) - 100
dist.broadcast(b, 2)
out["bcast"] = b.tolist()
parts = [torch.zeros(1001, dtype=torch.float64) for _ in range(world)]
dist.all_gather(parts, f64)
out["gather_hex"] = [p.numpy().tobytes().hex()[:64] + str(p.sum().item()) for p in parts]
i = torch.tensor([rank * 1000003, -rank, 2 ** 40 + rank], dtype=torch.int64)
for name, op in (("max", dist.ReduceOp.MAX), ("min", dist.ReduceOp.MIN), ("sum_i", dist.ReduceOp.SUM)):
    t = i.clone(); dist.all_reduce(t, op=op); out[name] = t.tolist()
t = torch.tensor([rank + 0.5, -1.25 * rank]); dist.all_reduce(t); out["sum_f"] = t.tolist()
t = torch.tensor([rank + 0.5], dtype=torch.bfloat16); dist.all_reduce(t, op=dist.ReduceOp.AVG); out["avg_bf16"] = t.tolist()
bo = torch.tensor([rank == 1, False, True]); dist.all_reduce(bo, op=dist.ReduceOp.BOR); out["bor"] = bo.tolist()
sc = torch.zeros(2, dtype=torch.int16)
dist.scatter(sc, [torch.tensor([10 * r, 10 * r + 1], dtype=torch.int16) for r in range(world)] if rank == 1 else None, src=1)
out["scatter"] = sc.tolist()
rs = torch.zeros(2, dtype=torch.int64)
dist.reduce_scatter(rs, [torch.tensor([r * 10 + rank, rank], dtype=torch.int64) for r in range(world)])
out["reduce_scatter"] = rs.tolist()
rt = torch.zeros(2, dtype=torch.int64)
dist._reduce_scatter_base(rt, torch.tensor([v for r in range(world) for v in (r * 10 + rank, rank)], dtype=torch.int64))
out["reduce_scatter_tensor"] = rt.tolist()
dist.barrier()
torch.manual_seed(rank)
m = torch.nn.Linear(5, 3)
ddp = torch.nn.parallel.DistributedDataParallel(m)
out["ddp_w"] = m.weight.detach().numpy().tobytes().hex()
ddp(torch.full((2, 5), float(rank))).sum().backward()  # DDP's gradient buckets through the group
out["ddp_g"] = m.weight.grad.tolist()
out["rounds"] = dist.distributed_c10d._get_default_group().rounds
print(json.dumps(out), flush=True)
dist.destroy_process_group()
"""


class ProcessGroupTest(unittest.TestCase):
    """torch.distributed's "stormgate" backend (python/stormgate/process_group.py) against the
    stub: three ranks as processes, every collective through the gateway's exact job."""

    def setUp(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skipTest("torch not installed")

    def test_every_collective_is_exact_and_the_same_at_every_rank(self):
        import json
        import os
        world = 3
        stub = Stub(world, 0, push_timeout_ms=30000, extra=["--announced", 1, "--job", 2 ** 31 + 1])
        try:
            env = dict(os.environ, STORMGATE_GATEWAY="127.0.0.1:%d" % stub.port, STORMGATE_JOB="1",
                       STORMGATE_WORKERS=str(world), STORMGATE_PG_ROUND_BYTES=str(16 << 10))
            ps = [subprocess.Popen([sys.executable, "-c", _PG_RANK, str(r), str(world)], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=dict(env, STORMGATE_WORKER_INDEX=str(r)))
                  for r in range(world)]
            outs = []
            for p in ps:
                o, e = p.communicate(timeout=90)
                self.assertEqual(p.returncode, 0, e[-2000:])
                outs.append(json.loads(o.strip().splitlines()[-1]))
        finally:
            stub.close()
        import torch
        for o in outs:
            self.assertEqual(o["bcast"], [k * 3 - 100 for k in range(9)])  # rank 2's
            self.assertEqual(o["max"], [2000006, 0, 2 ** 40 + 2])
            self.assertEqual(o["min"], [0, -2, 2 ** 40])
            self.assertEqual(o["sum_i"], [3000009, -3, 3 * 2 ** 40 + 3])
            self.assertEqual(o["sum_f"], [4.5, -3.75])
            self.assertEqual(o["avg_bf16"], [1.5])
            self.assertEqual(o["bor"], [True, False, True])
            self.assertEqual(o["ddp_w"], outs[0]["ddp_w"], "DDP's broadcast: every rank holds rank 0's weights")
            # each rank's input is `rank` everywhere: the mean gradient is the mean over ranks
            self.assertEqual(o["ddp_g"], outs[0]["ddp_g"])
            self.assertGreater(o["rounds"], 8)  # 16 KiB rounds: the 8 KB all_gather slots span several
        self.assertEqual([o["scatter"] for o in outs], [[0, 1], [10, 11], [20, 21]])
        # rank r gets the sum over ranks of their r-th piece [r * 10 + rank, rank]: [30r + 3, 3]
        self.assertEqual([o["reduce_scatter"] for o in outs], [[3, 3], [33, 3], [63, 3]])
        self.assertEqual([o["reduce_scatter_tensor"] for o in outs], [[3, 3], [33, 3], [63, 3]])
        g = torch.Generator().manual_seed(7)
        base = torch.randn(1001, generator=g, dtype=torch.float64)
        want = [(base * (r + 1)).numpy().tobytes().hex()[:64] + str((base * (r + 1)).sum().item()) for r in range(world)]
        for o in outs:
            self.assertEqual(o["gather_hex"], want, "all_gather must give every rank's float64 bits back")
        self.assertAlmostEqual(outs[0]["ddp_g"][0][0], 2.0, places=5)  # d(sum)/dW = mean over ranks of 2 * rank

    def test_a_round_not_over_the_world_is_refused_by_name(self):
        import torch
        from stormgate.process_group import ProcessGroupStormgate

        class HalfClient:  # a gateway averaging over twice the ranks the group thinks it has
            def allreduce(self, buf, timeout=None):
                buf *= 0.5
                return buf

        pg = ProcessGroupStormgate(0, 1, client=HalfClient(), round_floats=64)
        with self.assertRaisesRegex(RuntimeError, r"slot\(s\) \[0\] did not come back from exactly one rank"):
            pg.barrier()
        t = torch.zeros(3)
        with self.assertRaisesRegex(ValueError, "one tensor per call"):
            pg.allreduce([t, t])
        with self.assertRaisesRegex(ValueError, "not a multiple of STORMGATE_WORKERS"):
            import os
            os.environ["STORMGATE_WORKERS"] = "2"
            try:
                ProcessGroupStormgate(0, 3)
            finally:
                del os.environ["STORMGATE_WORKERS"]


@unittest.skipUnless(_cuda_available(), "CUDA not present (torch.cuda.is_available() is False): the pinned-staging "
                     "path for GPU tensors is not exercised here")
class CudaTest(unittest.TestCase):
    def test_cuda_tensors_through_pinned_staging(self):
        import torch
        import stormgate
        n = 7 * 450000  # several staging pieces (stormgate._CUDA_PIECE)
        stub = Stub(2, 4 * n)
        try:
            cs = [stormgate.Client(port=stub.port, worker_index=i) for i in range(2)]
            base = [torch.randn(n, device="cuda") for _ in range(2)]
            pinned = []
            for make in (lambda b: b.half(), lambda b: b.half(),
                         lambda b: b.bfloat16().view(7, -1).t(),  # non-contiguous
                         lambda b: b.clone()):
                ts_ = [make(b) for b in base]
                want = ((ts_[0].float() + ts_[1].float()) / 2).to(ts_[0].dtype)
                th = [threading.Thread(target=c.allreduce, args=(t,)) for c, t in zip(cs, ts_)]
                [t.start() for t in th]
                [t.join() for t in th]
                for t in ts_:
                    self.assertTrue(t.is_cuda)
                    self.assertTrue(torch.equal(t, want), t.dtype)
                s = cs[0]._staging
                self.assertTrue(s.is_pinned() and s.dtype == ts_[0].dtype, (s.is_pinned(), s.dtype))
                pinned.append(s.data_ptr())
            self.assertEqual(pinned[0], pinned[1], "the pinned buffer is reused while size and dtype stay")
        finally:
            pushed = stub.close()
        self.assertEqual(pushed["f16"][1], 2 * 2 * n * 2)
        self.assertEqual(pushed["bf16"][1], 2 * n * 2)
        self.assertEqual(pushed["f32"][1], 2 * n * 4)

    def test_ddp_hook_with_a_half_model_on_the_gpu(self):
        import torch
        import torch.distributed as dist
        import stormgate.ddp
        def make():
            return torch.nn.Sequential(torch.nn.Linear(8, 300), torch.nn.ReLU(), torch.nn.Linear(300, 300)).cuda().half()
        torch.manual_seed(0)
        model = make()
        nparams = sum(p.numel() for p in model.parameters())
        stub = Stub(1, 4 * nparams)
        stormgate.ddp.make_local_group()
        try:
            ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.1)
            state = stormgate.ddp.register(ddp, stormgate.Client(port=stub.port, worker_index=0))
            x = torch.randn(4, 8, device="cuda", dtype=torch.float16)
            ddp(x).sum().backward()
            self.assertTrue(state.flat.is_pinned() and state.flat.dtype == torch.float16)
            ref = make()
            ref.load_state_dict(model.state_dict())
            ref(x).sum().backward()
            for p, q in zip(model.parameters(), ref.parameters()):
                self.assertTrue(torch.equal(p.grad, q.grad))  # one worker: its own gradient
        finally:
            dist.destroy_process_group()
            pushed = stub.close()
        self.assertEqual(pushed["f16"][1], nparams * 2)
        self.assertEqual(pushed["f32"][0], 0)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--stub", required=True)
    args, rest = ap.parse_known_args()
    STUB = args.stub
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
