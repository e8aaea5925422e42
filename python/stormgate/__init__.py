"""stormgate for training scripts: synchronise gradients through the site's gateway.

    import stormgate
    stormgate.init()                    # from STORMGATE_* environment variables, or pass them
    stormgate.allreduce(tensor)         # in place: tensor := mean over every worker of every site

Each call is one round; rounds count up from 1 per Client. torch CPU tensors and numpy
arrays are synchronised in place without a copy when they are float32 and contiguous
(anything else goes through one staging buffer). Client.allreduce_start streams a buffer
that is still being filled (the push of its first part overlaps the computation of the
rest). For DistributedDataParallel see stormgate.ddp.register.

Environment (defaults): STORMGATE_GATEWAY=127.0.0.1:7400, STORMGATE_WORKER_INDEX=0,
STORMGATE_SITE_ID=1 (the gateway's site.id), STORMGATE_JOB=1, STORMGATE_CHUNK_BYTES=1344,
STORMGATE_TIMEOUT=60 (seconds), STORMGATE_TOKEN_FILE (the gateway's job.token_file; unset:
plain LTP, which a gateway with a token refuses).
"""
import importlib
import os
import sys

__all__ = ["Client", "init", "allreduce", "default_client", "StormgateError", "GatewayTimeout", "StaleRound",
           "PendingRound"]


def _load_native():
    """The pybind11 module _stormgate: on sys.path, or in a build directory of this tree."""
    try:
        return importlib.import_module("_stormgate")
    except ImportError:
        pass
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    dirs = [os.environ.get("STORMGATE_PYEXT_DIR", "")]
    dirs += [os.path.join(root, b, "client") for b in ("build", "build-client", "build-release")]
    for d in dirs:
        if d and os.path.isdir(d) and any(f.startswith("_stormgate") and f.endswith(".so")
                                          and os.path.isfile(os.path.join(d, f)) for f in os.listdir(d)):
            sys.path.insert(0, d)
            try:
                return importlib.import_module("_stormgate")
            finally:
                sys.path.remove(d)
    raise ImportError("stormgate: the native module _stormgate is not built; run "
                      "`ninja -C build client/_stormgate.cpython-*.so` or set STORMGATE_PYEXT_DIR")


_native = _load_native()
StormgateError = _native.StormgateError
GatewayTimeout = _native.GatewayTimeout
StaleRound = _native.StaleRound
PendingRound = _native.PendingRound


class Client:
    """One worker's connection to its gateway; counts rounds itself."""

    def __init__(self, host="127.0.0.1", port=7400, worker_index=0, gateway_node=1, job=1,
                 chunk_bytes=1344, timeout=60.0, first_round=1, token_file=""):
        self.worker = _native.Worker(host=host, port=port, worker_index=worker_index,
                                     gateway_node=gateway_node, job=job, chunk_bytes=chunk_bytes,
                                     token_file=token_file or "")
        self.timeout = timeout
        self.round = first_round - 1  # the last round synchronised
        self._staging = None

    @classmethod
    def from_env(cls, **overrides):
        host, _, port = os.environ.get("STORMGATE_GATEWAY", "127.0.0.1:7400").rpartition(":")
        kw = dict(host=host or "127.0.0.1", port=int(port),
                  worker_index=int(os.environ.get("STORMGATE_WORKER_INDEX", "0")),
                  gateway_node=int(os.environ.get("STORMGATE_SITE_ID", "1")),
                  job=int(os.environ.get("STORMGATE_JOB", "1")),
                  chunk_bytes=int(os.environ.get("STORMGATE_CHUNK_BYTES", "1344")),
                  timeout=float(os.environ.get("STORMGATE_TIMEOUT", "60")),
                  token_file=os.environ.get("STORMGATE_TOKEN_FILE", ""))
        kw.update(overrides)
        return cls(**kw)

    def allreduce(self, tensor, round=None, timeout=None):
        """tensor := mean over all workers (in place); returns tensor. `round` defaults to
        the next one."""
        self.round = self.round + 1 if round is None else round
        t = self.timeout if timeout is None else timeout
        if _is_torch(tensor):
            _allreduce_torch(self, tensor, self.round, t)
        else:
            self.worker.allreduce(tensor, self.round, t)
        return tensor

    def allreduce_start(self, buffer, round=None, timeout=None):
        """Starts a streaming round on `buffer` (float32, contiguous, CPU: a numpy array or a
        torch tensor) and returns its PendingRound: ready(k) hands buffer[:k] over (pushed at
        once, while the caller computes the rest), wait() blocks until buffer holds the result,
        cancel() gives the round up. One round at a time per Client."""
        self.round = self.round + 1 if round is None else round
        t = self.timeout if timeout is None else timeout
        if _is_torch(buffer):
            import torch
            if buffer.device.type != "cpu" or buffer.dtype != torch.float32 or not buffer.is_contiguous():
                raise ValueError("stormgate: allreduce_start needs a contiguous float32 CPU tensor")
            buffer = buffer.detach().numpy()  # shares memory
        return self.worker.allreduce_start(buffer, self.round, t)

    @property
    def last_round_seconds(self):
        return self.worker.last_round_seconds

    @property
    def stats(self):
        return self.worker.stats


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _allreduce_torch(client, tensor, round_, timeout):
    import torch
    if tensor.device.type != "cpu":
        raise ValueError("stormgate: only CPU tensors are supported (got %s)" % tensor.device)
    t = tensor.detach()
    if t.dtype == torch.float32 and t.is_contiguous():
        client.worker.allreduce(t.numpy(), round_, timeout)  # shares memory: zero-copy
        return
    n = t.numel()
    if client._staging is None or client._staging.numel() != n:
        client._staging = torch.empty(n, dtype=torch.float32)
    client._staging.copy_(t.reshape(-1))
    client.worker.allreduce(client._staging.numpy(), round_, timeout)
    t.copy_(client._staging.view(t.shape))


_default = None


def init(**kwargs):
    """Creates the process's default client (STORMGATE_* environment, overridden by kwargs)."""
    global _default
    _default = Client.from_env(**kwargs)
    return _default


def default_client():
    return _default if _default is not None else init()


def allreduce(tensor, round=None, timeout=None):
    """tensor := mean over every worker of every site, in place, through the default client."""
    return default_client().allreduce(tensor, round=round, timeout=timeout)
