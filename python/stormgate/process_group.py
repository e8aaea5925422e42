"""torch.distributed backend "stormgate": a process group whose every collective crosses the
WAN through the gateways, so a DDP job starts and trains with nothing but each worker's path
to its own gateway (no rendezvous server, no TCP between sites).

    import stormgate.process_group  # registers the backend and the stormgate:// rendezvous
    torch.distributed.init_process_group("stormgate", init_method="stormgate://",
                                         rank=RANK, world_size=WORLD)
    ddp = torch.nn.parallel.DistributedDataParallel(model)   # parameters broadcast from rank 0
    stormgate.ddp.register(ddp)                              # gradients: the fast path

Each worker also needs STORMGATE_GATEWAY, STORMGATE_SITE_ID, STORMGATE_JOB,
STORMGATE_WORKER_INDEX (its index at its site) and STORMGATE_WORKERS (workers per site; default:
the world size, one site), as for stormgate.Client.from_env.

How collectives ride on the gateways. The group announces a job of its own (id
STORMGATE_PG_JOB, default the training job's id + 2^31) marked exact: the gateways compress
nothing and close nothing early, so each round's result is exactly the mean of every rank's
push, or there is no result (a timeout). Every collective is one or more rounds of
STORMGATE_PG_ROUND_BYTES (default 256 KiB), in the order the ranks call them (a process group's
rule already):
  broadcast, all_gather, gather, scatter and integer or float64 reductions (all_reduce,
  reduce, reduce_scatter) are bit-exact: each
  rank writes its bytes as 16-bit integers into float lanes of a slot of its own (zeros
  elsewhere) beside a marker lane of 1.0; the mean times the world size gives every slot back
  exactly (integers below 2^16 survive the float rounding), and the markers prove that every
  slot came from exactly one rank. Reductions other than sum and average (min, max, product,
  bitwise) are taken locally over the gathered tensors, identically at every rank.
  all_reduce of float32 / float16 / bfloat16 tensors with SUM or AVG is the gateways' mean
  itself (times the world size for SUM): every rank gets the same bytes.
  barrier is one round with a marker lane per rank.
Every call completes before it returns (the returned Work is done). Gradients should take
stormgate.ddp's hook (a job of the model's size, streamed during backward, compressible):
without it DDP's buckets go through the exact job above, correct but slower.

Why not make every collective a gradient round: a broadcast or all-gather must be bit-exact
and must not be compressed or Early-Closed, which the gradient job may be; the exact job gives
that guarantee per job, agreed between the gateways like any announced job."""
import os
from datetime import timedelta
from urllib.parse import parse_qs, urlparse

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future
from torch.futures import Future

from . import Client, StormgateError, _env_int

__all__ = ["ProcessGroupStormgate", "GatewayStore", "BACKEND"]

BACKEND = "stormgate"
_LANE_MAX = 1 << 16          # each float lane carries a 16-bit integer
_MARK_TOL = 0.25             # a decoded marker must be 1 within this (it is 1 +- 2^-13 at most)
_FLOAT_MEAN = (torch.float32, torch.float16, torch.bfloat16)


def _done(result):
    f = Future()
    f.set_result(result)
    return _create_work_from_future(f)


def _one(tensors, what):
    if len(tensors) != 1:
        raise ValueError("stormgate process group: %s takes one tensor per call (got %d)" % (what, len(tensors)))
    t = tensors[0]
    if t.device.type != "cpu":
        raise ValueError("stormgate process group: %s takes CPU tensors (got %s); gradients on a GPU go through "
                         "stormgate.ddp's hook" % (what, t.device))
    return t


def _to_lanes(t):
    """A tensor's bytes as 16-bit integers in float32 lanes."""
    b = t.detach().contiguous().view(-1).view(torch.uint8)
    if b.numel() % 2:
        b = torch.cat([b, torch.zeros(1, dtype=torch.uint8)])
    return b.view(torch.int16).to(torch.int32).bitwise_and(0xFFFF).to(torch.float32)


def _from_lanes(lanes, like):
    """Inverse of _to_lanes into `like`'s dtype and shape (a new tensor)."""
    nbytes = like.numel() * like.element_size()
    v = lanes.to(torch.int32).to(torch.int16).view(torch.uint8)[:nbytes]
    return v.clone().view(like.dtype).view(like.shape)


_LOCAL_OPS = {
    dist.ReduceOp.SUM: lambda xs: torch.stack(xs).sum(0),
    dist.ReduceOp.PRODUCT: lambda xs: torch.stack(xs).prod(0),
    dist.ReduceOp.MIN: lambda xs: torch.stack(xs).amin(0),
    dist.ReduceOp.MAX: lambda xs: torch.stack(xs).amax(0),
    dist.ReduceOp.BAND: lambda xs: _fold(xs, torch.bitwise_and),
    dist.ReduceOp.BOR: lambda xs: _fold(xs, torch.bitwise_or),
    dist.ReduceOp.BXOR: lambda xs: _fold(xs, torch.bitwise_xor),
}


def _fold(xs, f):
    out = xs[0].clone()
    for x in xs[1:]:
        out = f(out, x)
    return out


class ProcessGroupStormgate(dist.ProcessGroup):
    """One rank's process group over its gateway (see the module docstring)."""

    def __init__(self, rank, size, client=None, round_floats=None, timeout=None):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        if round_floats is None:
            round_floats = _env_int("STORMGATE_PG_ROUND_BYTES", 256 << 10, 256, 1 << 30) // 4
        if round_floats < max(64, size + 1):
            raise ValueError("stormgate process group: rounds of %d values cannot carry a marker per rank "
                             "(world size %d)" % (round_floats, size))
        self._n = round_floats
        self._timeout = 1800.0 if timeout is None else float(timeout)
        self._buf = torch.zeros(round_floats, dtype=torch.float32)
        self._client = client if client is not None else self._make_client(size)
        self.rounds = 0  # control rounds this group ran

    @staticmethod
    def _make_client(size):
        job = _env_int("STORMGATE_JOB", 1, 0, 2 ** 32 - 1)
        pg_job = _env_int("STORMGATE_PG_JOB", (job + (1 << 31)) % (1 << 32) or 1, 1, 2 ** 32 - 1)
        workers = _env_int("STORMGATE_WORKERS", 0, 0, 4096) or size
        if size % workers:
            raise ValueError("stormgate process group: world size %d is not a multiple of STORMGATE_WORKERS=%d "
                             "(every site runs the same number of workers)" % (size, workers))
        return Client.from_env(job=pg_job, workers=workers, exact=True, timeout=1800.0)

    def getBackendName(self):
        return BACKEND

    # -- rounds ------------------------------------------------------------------------------
    def _mean(self, contrib):
        """The mean over all ranks of `contrib` (float32, the same length at every rank), in
        rounds of the group's size."""
        out = torch.empty_like(contrib)
        n = contrib.numel()
        for lo in range(0, max(n, 1), self._n):
            m = min(self._n, n - lo)
            self._buf.zero_()
            self._buf[:m] = contrib[lo:lo + m]
            try:
                self._client.allreduce(self._buf, timeout=self._timeout)
            except StormgateError as e:
                raise RuntimeError("stormgate process group (rank %d): a control round failed: %s" % (self._rank, e))
            self.rounds += 1
            out[lo:lo + m] = self._buf[:m]
        return out

    def _slots(self, lanes, slot, nslots):
        """Exact exchange: this rank's `lanes` (16-bit integers as floats) go into slot `slot`
        of `nslots` (None: no slot, a receiver only); returns every slot's lanes [nslots, L]."""
        L = lanes.numel()
        contrib = torch.zeros(nslots * (L + 1), dtype=torch.float32)
        if slot is not None:
            base = slot * (L + 1)
            contrib[base] = 1.0
            contrib[base + 1:base + 1 + L] = lanes
        got = (self._mean(contrib) * self._size).view(nslots, L + 1)
        marks = got[:, 0]
        bad = ((marks - 1.0).abs() > _MARK_TOL).nonzero().view(-1).tolist()
        if bad:
            raise RuntimeError(
                "stormgate process group (rank %d, world size %d): slot(s) %s did not come back from exactly one "
                "rank (markers %s): the gateways' mean is not over %d workers (STORMGATE_WORKERS x sites must be "
                "the world size) or a rank missed the collective" %
                (self._rank, self._size, bad[:8], [round(float(marks[i]), 3) for i in bad[:8]], self._size))
        vals = got[:, 1:].round()
        if (vals < 0).any() or (vals >= _LANE_MAX).any():
            raise RuntimeError("stormgate process group: a lane decoded out of range: the round was not exact")
        return vals

    def _gather(self, t):
        """Every rank's copy of t (same shape and dtype everywhere), bit-exact, in rank order."""
        rows = self._slots(_to_lanes(t), self._rank, self._size)
        return [_from_lanes(rows[r], t) for r in range(self._size)]

    # -- collectives --------------------------------------------------------------------------
    def broadcast(self, tensors, opts):
        t = _one(tensors, "broadcast")
        root = opts.rootRank
        lanes = _to_lanes(t)
        row = self._slots(lanes, 0 if self._rank == root else None, 1)[0]
        t.copy_(_from_lanes(row, t))
        return _done(tensors)

    def allreduce(self, tensors, opts=None):
        t = _one(tensors, "all_reduce")
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        if t.dtype in _FLOAT_MEAN and op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
            mean = self._mean(t.detach().reshape(-1).to(torch.float32))
            if op == dist.ReduceOp.SUM:
                mean *= self._size
            t.copy_(mean.view(t.shape).to(t.dtype))
            return _done(tensors)
        if op == dist.ReduceOp.AVG:
            if not t.dtype.is_floating_point:
                raise ValueError("stormgate process group: AVG of %s tensors" % t.dtype)
            t.copy_(torch.stack(self._gather(t)).mean(0))
            return _done(tensors)
        f = _LOCAL_OPS.get(op)
        if f is None:
            raise ValueError("stormgate process group: reduce op %s is not supported" % op)
        t.copy_(f(self._gather(t)))
        return _done(tensors)

    def reduce(self, tensors, opts):
        ar = dist.AllreduceOptions()
        ar.reduceOp = opts.reduceOp
        return self.allreduce(tensors, ar)

    def allgather(self, output_tensors, input_tensors, opts=None):
        t = _one(input_tensors, "all_gather")
        outs = output_tensors[0] if len(output_tensors) == 1 else None
        if outs is None or len(outs) != self._size:
            raise ValueError("stormgate process group: all_gather needs one output list of %d tensors" % self._size)
        for o, g in zip(outs, self._gather(t)):
            if o.shape != g.shape or o.dtype != g.dtype:
                raise ValueError("stormgate process group: all_gather output %s %s, input %s %s" %
                                 (tuple(o.shape), o.dtype, tuple(g.shape), g.dtype))
            o.copy_(g)
        return _done(output_tensors)

    def _allgather_base(self, output, input, opts=None):
        parts = self._gather(_one([input], "all_gather_into_tensor"))
        output.copy_(torch.cat([p.reshape(-1) for p in parts]).view(output.shape))
        return _done([output])

    def gather(self, output_tensors, input_tensors, opts):
        parts = self._gather(_one(input_tensors, "gather"))
        if self._rank == opts.rootRank:
            for o, g in zip(output_tensors[0], parts):
                o.copy_(g)
        return _done(output_tensors)

    def scatter(self, output_tensors, input_tensors, opts):
        out = _one(output_tensors, "scatter")
        root = opts.rootRank
        if self._rank == root:
            flat = torch.cat([x.reshape(-1) for x in input_tensors[0]])
        else:
            flat = torch.empty(out.numel() * self._size, dtype=out.dtype)
        lanes = _to_lanes(flat)
        row = self._slots(lanes, 0 if self._rank == root else None, 1)[0]
        whole = _from_lanes(row, flat)
        out.copy_(whole[self._rank * out.numel():(self._rank + 1) * out.numel()].view(out.shape))
        return _done(output_tensors)

    def _reduce_own_part(self, flat, out, op):
        """all_reduce of `flat` (every rank's whole input), then this rank's slice into `out`."""
        ar = dist.AllreduceOptions()
        ar.reduceOp = op
        self.allreduce([flat], ar)
        n = out.numel()
        out.copy_(flat[self._rank * n:(self._rank + 1) * n].view(out.shape))

    def reduce_scatter(self, output_tensors, input_tensors, opts):
        out = _one(output_tensors, "reduce_scatter")
        if len(input_tensors) != 1 or len(input_tensors[0]) != self._size:
            raise ValueError("stormgate process group: reduce_scatter needs one input list of %d tensors" % self._size)
        self._reduce_own_part(torch.cat([x.reshape(-1) for x in input_tensors[0]]), out, opts.reduceOp)
        return _done(output_tensors)

    def _reduce_scatter_base(self, output, input, opts=None):
        if input.numel() != output.numel() * self._size:
            raise ValueError("stormgate process group: reduce_scatter_tensor input of %d values for %d ranks of %d" %
                             (input.numel(), self._size, output.numel()))
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        self._reduce_own_part(input.detach().reshape(-1).clone(), output, op)
        return _done([output])

    def barrier(self, opts=None):
        self._slots(torch.zeros(0), self._rank, self._size)
        return _done([])


class GatewayStore(dist.Store):
    """The stormgate:// rendezvous store: a local key-value store, with torch's start-up
    barrier answered by the process group itself (its creation is a barrier through the
    gateways, so every rank is known to be there). Nothing else crosses sites through it."""

    def __init__(self, world_size):
        super().__init__()
        self._world = world_size
        self._kv = {}

    def set(self, key, value):
        self._kv[key] = value if isinstance(value, bytes) else str(value).encode()

    def get(self, key):
        if key not in self._kv:
            raise RuntimeError("stormgate rendezvous: key %r is not in this rank's store (the stormgate:// store "
                               "holds nothing from other ranks)" % key)
        return self._kv[key]

    def add(self, key, amount):
        if "store_based_barrier_key" in key:
            return self._world  # the group's creation was the barrier (ProcessGroupStormgate.barrier)
        v = int(self._kv.get(key, b"0")) + amount
        self._kv[key] = str(v).encode()
        return v

    def compare_set(self, key, expected, desired):
        cur = self._kv.get(key)
        if cur is None and not expected or cur == expected:
            self._kv[key] = desired
            return desired
        return cur if cur is not None else expected

    def wait(self, keys, timeout=None):
        missing = [k for k in keys if k not in self._kv]
        if missing:
            raise RuntimeError("stormgate rendezvous: waiting for %s, which no other rank can set here" % missing)

    def check(self, keys):
        return all(k in self._kv for k in keys)

    def num_keys(self):
        return len(self._kv)

    def delete_key(self, key):
        return self._kv.pop(key, None) is not None

    def set_timeout(self, timeout):
        pass


_KEEP = []


def _rendezvous(url, timeout=timedelta(minutes=30), **kwargs):
    # torch passes rank and world_size in the URL's query (stormgate://?rank=0&world_size=4).
    q = {k: v[-1] for k, v in parse_qs(urlparse(url).query).items()}
    rank, world = q.get("rank", os.environ.get("RANK", "-1")), q.get("world_size", os.environ.get("WORLD_SIZE", "-1"))
    rank = int(rank) if str(rank).lstrip("-").isdigit() else rank
    world = int(world) if str(world).lstrip("-").isdigit() else world
    if not isinstance(rank, int) or not isinstance(world, int) or rank < 0 or world <= 0 or rank >= world:
        raise ValueError("stormgate:// rendezvous needs rank and world_size (arguments, or RANK and WORLD_SIZE); "
                         "got rank %s, world size %s" % (rank, world))
    store = GatewayStore(world)
    _KEEP.append(store)  # C++ holds it past this frame: its Python half must stay alive too
    yield store, rank, world
    raise RuntimeError("stormgate:// rendezvous cannot be repeated in one process")


def _create(store, rank, size, timeout):
    pg = ProcessGroupStormgate(rank, size, timeout=timeout.total_seconds() if timeout else None)
    pg.barrier()  # the rendezvous: every rank announced the group's job and reached its gateway
    return pg


def register():
    """Registers the backend and the stormgate:// rendezvous (done on import; idempotent)."""
    if not hasattr(dist.Backend, BACKEND.upper()):
        dist.Backend.register_backend(BACKEND, _create)
    dist.register_rendezvous_handler("stormgate", _rendezvous)


register()
