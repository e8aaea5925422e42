"""A DistributedDataParallel communication hook that synchronises gradients through the
stormgate gateway instead of the process group.

    ddp = torch.nn.parallel.DistributedDataParallel(model)
    stormgate.ddp.register(ddp)             # or register(ddp, stormgate.Client(...))

The gateway reduces one fixed-size gradient per round (its job.model_bytes =
4 * number of trainable parameters), while DDP hands its hook one bucket at a time. So the
hook gathers the buckets of a backward pass and, at the last one, synchronises them all as
one round; the futures of the earlier buckets complete then. DDP waits for every bucket's
future only at the end of backward, so nothing blocks early. The process group is still used
by DDP itself (parameter broadcast at construction), never for gradients.
"""
import torch

from . import default_client

__all__ = ["HookState", "stormgate_hook", "register"]


class HookState:
    def __init__(self, client):
        self.client = client
        self.pending = []  # (buffer, future) of this backward pass
        self.flat = None
        self.buckets_seen = 0


def stormgate_hook(state, bucket):
    buf = bucket.buffer()
    fut = torch.futures.Future()
    state.pending.append((buf, fut))
    state.buckets_seen += 1
    if not bucket.is_last():
        return fut
    pending, state.pending = state.pending, []
    n = sum(b.numel() for b, _ in pending)
    if state.flat is None or state.flat.numel() != n:
        state.flat = torch.empty(n, dtype=torch.float32)
    off = 0
    for b, _ in pending:
        state.flat[off:off + b.numel()].copy_(b.reshape(-1))
        off += b.numel()
    try:
        state.client.allreduce(state.flat)  # the mean over all workers of all sites
    except Exception as e:  # the error reaches backward() through every future
        for _, f in pending:
            f.set_exception(e)
        return fut
    off = 0
    for b, f in pending:
        b.copy_(state.flat[off:off + b.numel()].view_as(b))
        off += b.numel()
        f.set_result(b)
    return fut


def register(ddp_model, client=None):
    """Installs the hook on a DistributedDataParallel model; returns its state."""
    state = HookState(client if client is not None else default_client())
    ddp_model.register_comm_hook(state, stormgate_hook)
    return state
