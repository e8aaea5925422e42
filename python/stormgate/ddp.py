"""A DistributedDataParallel communication hook that synchronises gradients through the
stormgate gateway instead of the process group.

    ddp = torch.nn.parallel.DistributedDataParallel(model)
    stormgate.ddp.register(ddp)             # or register(ddp, stormgate.Client(...))

The gateway reduces one fixed-size gradient per round (its job.model_bytes = 4 x the number
of trainable parameters), while DDP hands its hook one bucket at a time, in bucket order,
while backward is still computing the later ones. With `overlap=True` (the default) each
bucket is copied into the round's buffer at its place and handed to the gateway at once
(Client.allreduce_start / PendingRound.ready): the gateway takes a push chunk by chunk and
streams it into the WAN round, so the transfer runs during the rest of backward. At the last
bucket the hook waits for the result and completes every bucket's future. `overlap=False`
gathers all buckets first and synchronises them as one round after backward (compute, then
communication). DDP waits for the futures only at the end of backward, so neither blocks
early. Every worker lays the buffer out in DDP's bucket order, which DDP keeps identical on
every rank, so the same value sits at the same place everywhere.

The round carries the buckets' dtype: float16 / bfloat16 buckets (a half or bfloat16 model,
or DDP's reduced-precision buckets) go out as they are, half the bytes, and the result is
rounded back into them; float32 buckets as float32. The dtype of a pass is that of its first
bucket (a later bucket of another dtype is converted into it); a model whose trainable
parameters mix dtypes goes out as float32 (lossless for the half ones); register(dtype=...)
forces one. job.model_bytes stays 4 x the number of trainable parameters either way. Buckets
on a GPU are staged through a pinned host buffer of the round's dtype.

The process group is used by DDP itself (parameter broadcast at construction), never for
gradients. With make_local_group() each worker can be a process group of its own (world
size 1): then no process group spans the sites, and the workers start from the same seed.
"""
import time

import torch

from . import default_client

__all__ = ["HookState", "stormgate_hook", "register", "make_local_group"]


class HookState:
    def __init__(self, client, floats=None, overlap=True, dtype=None):
        self.client = client
        self.overlap = overlap
        self.floats = floats     # gradient values per round (trainable parameters); None: learnt
        self.dtype = dtype       # the rounds' dtype; None: each pass's first bucket's
        self.wire = None         # this pass's dtype
        self.pending = []        # (bucket buffer, future, offset) of this backward pass
        self.flat = None         # round buffer of the pass's dtype (pinned when the gradients live on a GPU)
        self.round = None        # the PendingRound in flight (overlap)
        self.filled = 0          # values of this pass handed over so far
        self.streaming = False   # this pass streams into the round (overlap, decided at its first bucket)
        self.buckets_seen = 0
        self.rounds_overlapped = 0
        self.last_wait_seconds = 0.0  # how long the last pass waited for the round after its last bucket
        self.first_bucket_at = 0.0    # time.perf_counter() when DDP handed over the pass's first bucket
        self.last_bucket_at = 0.0     # time.perf_counter() when DDP handed over the last bucket

    def _buffer(self, n, device, dtype):
        pin = device.type == "cuda"
        if self.flat is None or self.flat.numel() != n or self.flat.dtype != dtype or self.flat.is_pinned() != pin:
            self.flat = torch.empty(n, dtype=dtype, pin_memory=pin)
        return self.flat


_WIRE = (torch.float32, torch.float16, torch.bfloat16)


def _pass_dtype(state, buf):
    if state.dtype is not None:
        return state.dtype
    return buf.dtype if buf.dtype in _WIRE else torch.float32


def _fail(pending, fut, err):
    for _, f, _ in pending:
        f.set_exception(err)
    return fut


def stormgate_hook(state, bucket):
    buf = bucket.buffer()
    fut = torch.futures.Future()
    state.buckets_seen += 1
    if not state.pending:  # the pass's first bucket
        state.first_bucket_at = time.perf_counter()
        state.filled = 0
        state.wire = _pass_dtype(state, buf)
        state.streaming = state.overlap and state.floats is not None
        if state.streaming:  # the round starts now
            state.round = state.client.allreduce_start(state._buffer(state.floats, buf.device, state.wire))
    off, k = state.filled, buf.numel()
    state.pending.append((buf, fut, off))  # each bucket's place in the round's buffer
    state.filled = off + k
    if state.streaming:
        if state.filled > state.floats:
            return _end_failed(state, fut, RuntimeError(
                "stormgate.ddp: DDP's buckets hold more than the %d trainable parameters of the model" % state.floats))
        state.flat[off:off + k].copy_(buf.reshape(-1), non_blocking=buf.is_cuda)
        if buf.is_cuda:
            torch.cuda.current_stream(buf.device).synchronize()  # the bytes must be final before ready()
        state.round.ready(state.filled)
    if not bucket.is_last():
        return fut
    if state.streaming and state.filled != state.floats:
        return _end_failed(state, fut, RuntimeError(
            "stormgate.ddp: DDP's buckets hold %d values, the model %d trainable parameters"
            % (state.filled, state.floats)))
    pending, rnd = state.pending, state.round
    state.pending, state.round = [], None
    if not state.streaming:  # gather every bucket now, then one round
        flat = state._buffer(state.filled, buf.device, state.wire)
        for b, _, o in pending:
            flat[o:o + b.numel()].copy_(b.reshape(-1))
    t0 = state.last_bucket_at = time.perf_counter()
    try:
        if state.streaming:
            rnd.wait()  # GIL released: the rest of the round
        else:
            state.client.allreduce(state.flat)  # the mean over all workers of all sites
    except Exception as e:  # the error reaches backward() through every future
        return _fail(pending, fut, e)
    state.last_wait_seconds = time.perf_counter() - t0
    state.rounds_overlapped += state.streaming
    for b, _, o in pending:
        b.copy_(state.flat[o:o + b.numel()].view_as(b), non_blocking=b.is_cuda)
    if buf.is_cuda:
        torch.cuda.current_stream(buf.device).synchronize()  # the buckets final before DDP sees them
    for b, f, _ in pending:
        f.set_result(b)
    return fut


def _end_failed(state, fut, err):
    """Gives the streaming round up (the gateway goes on without this worker's missing part)
    and fails the pass's futures."""
    pending, rnd = state.pending, state.round
    state.pending, state.round = [], None
    rnd.cancel()
    return _fail(pending, fut, err)


def register(ddp_model, client=None, overlap=True, dtype=None):
    """Installs the hook on a DistributedDataParallel model; returns its state. overlap:
    stream each bucket into the round as backward produces it (default), or synchronise
    after backward. dtype: the rounds' dtype (torch.float32, float16 or bfloat16); None: the
    buckets' own, float32 when the trainable parameters mix dtypes."""
    params = [p for p in ddp_model.module.parameters() if p.requires_grad]
    floats = sum(p.numel() for p in params)
    if dtype is None and len({p.dtype for p in params}) > 1:
        dtype = torch.float32
    if dtype is not None and dtype not in _WIRE:
        raise ValueError("stormgate.ddp: dtype must be torch.float32, float16 or bfloat16, got %s" % dtype)
    state = HookState(client if client is not None else default_client(), floats=floats, overlap=overlap,
                      dtype=dtype)
    ddp_model.register_comm_hook(state, stormgate_hook)
    return state


def make_local_group():
    """A process group of this worker alone (gloo, world size 1, in-process store), for DDP
    when the gateways carry every gradient: nothing spans the sites. Seed the model
    identically on every worker (torch.manual_seed) so that all start from the same values."""
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    return dist.group.WORLD
