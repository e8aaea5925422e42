"""stormgate for training scripts: synchronise gradients through the site's gateway.

    import stormgate
    stormgate.init()                    # from STORMGATE_* environment variables, or pass them
    stormgate.allreduce(tensor)         # in place: tensor := mean over every worker of every site

Each call is one round; rounds count up from 1 per Client. What allreduce takes:
  numpy float32 / float16, torch CPU float32 / float16 / bfloat16, contiguous: in place, no
      copy. Half-precision values go out as they are (half the bytes of float32); the gateway
      sums in float32 and the result is rounded (nearest even) into the buffer in C++.
  torch CUDA tensors of those dtypes: staged through a pinned host buffer of the same dtype
      (allocated once per size and dtype, reused), copied asynchronously on a side stream in
      pieces that are pushed as they land; the stream is synchronised before allreduce returns.
  non-contiguous torch tensors of those dtypes: one contiguous staging copy of the same dtype.
  any other torch dtype (float64, integers): one float32 staging copy (values rounded to
      float32 and back). Other numpy dtypes: TypeError.
Client.allreduce_start streams a CPU buffer that is still being filled (the push of its first
part overlaps the computation of the rest). For DistributedDataParallel see stormgate.ddp.register.

Environment (defaults): STORMGATE_GATEWAY=127.0.0.1:7400, STORMGATE_WORKER_INDEX=0,
STORMGATE_SITE_ID=1 (the gateway's site.id), STORMGATE_JOB=1, STORMGATE_CHUNK_BYTES=1344,
STORMGATE_TIMEOUT=60 (seconds), STORMGATE_TOKEN_FILE (the gateway's job.token_file; unset:
plain LTP, which a gateway with a token refuses), STORMGATE_WORKERS (workers per site; set and
> 0: the worker announces the job to the gateway, which then needs no job in its config; unset
or 0: the gateway's config holds the job), STORMGATE_WEIGHT=1 (an announced job's WAN share,
1..16), STORMGATE_PUSH_WINDOW_KB=64 (KiB of the push in flight to the gateway; 0: paced by a
rate model).
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


def _env_int(name, default, lo, hi):
    """An integer variable (unset or empty: default) within [lo, hi], else a ValueError naming it."""
    v = os.environ.get(name, "").strip()
    if not v:
        return default
    try:
        n = int(v)
    except ValueError:
        n = None
    if n is None or not lo <= n <= hi:
        raise ValueError("%s: expected an integer in %d..%d, got %r" % (name, lo, hi, v))
    return n


def _env_number(name, default):
    """A positive number variable (unset or empty: default), else a ValueError naming it."""
    v = os.environ.get(name, "").strip()
    if not v:
        return default
    try:
        x = float(v)
    except ValueError:
        x = float("nan")
    if not x > 0 or x == float("inf"):
        raise ValueError("%s: expected a positive number of seconds, got %r" % (name, v))
    return x


class Client:
    """One worker's connection to its gateway; counts rounds itself."""

    def __init__(self, host="127.0.0.1", port=7400, worker_index=0, gateway_node=1, job=1,
                 chunk_bytes=1344, timeout=60.0, first_round=1, token_file="", model_floats=None,
                 workers=0, weight=1, exact=False, push_window_kb=64):
        """model_floats: the gateway's job.model_bytes / 4; when given, every buffer's element
        count is checked against it before anything is sent (else a wrong size shows up as an
        error from the gateway).
        workers: workers per site. > 0: this client announces the job (id, size of the first
        buffer, chunk_bytes, workers, dtype, weight) to the gateway before its first round and
        waits until the gateway runs it (StormgateError if it refuses, naming the field that
        differs; GatewayTimeout if it never says running); close() or the client's end tells
        the gateway it left. 0: the gateway's config holds the job.
        weight: an announced job's share of the WAN against other jobs, 1..16.
        exact: an announced job whose every round is exactly the mean of every worker's push or
        no result (GatewayTimeout): no compression, no Early Close, no bubbles anywhere.
        push_window_kb: KiB of the push in flight to the gateway, unpaced (a window, as the
        gateway's results to its workers); 0: paced by a delivery-rate model instead."""
        self.worker = _native.Worker(host=host, port=port, worker_index=worker_index,
                                     gateway_node=gateway_node, job=job, chunk_bytes=chunk_bytes,
                                     token_file=token_file or "", announce_workers=workers,
                                     weight=weight, exact=exact, push_window_kb=push_window_kb)
        self.timeout = timeout
        self.model_floats = model_floats
        self.round = first_round - 1  # the last round synchronised
        self._staging = None  # host staging tensor, reused while size, dtype and pinning match
        self._streams = {}    # CUDA device -> side stream for the staging copies

    @classmethod
    def from_env(cls, **overrides):
        """A Client from the STORMGATE_* variables (module docstring); a malformed or
        out-of-range value is a ValueError naming the variable."""
        gw = os.environ.get("STORMGATE_GATEWAY", "127.0.0.1:7400")
        host, _, port = gw.rpartition(":")
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError("STORMGATE_GATEWAY: expected HOST:PORT (the gateway's address and "
                             "transport.udp_port, 1..65535), got %r" % gw)
        kw = dict(host=host or "127.0.0.1", port=int(port),
                  worker_index=_env_int("STORMGATE_WORKER_INDEX", 0, 0, 32767),
                  gateway_node=_env_int("STORMGATE_SITE_ID", 1, 1, 32767),
                  job=_env_int("STORMGATE_JOB", 1, 0, 2 ** 32 - 1),
                  chunk_bytes=_env_int("STORMGATE_CHUNK_BYTES", 1344, 64, 9000),
                  timeout=_env_number("STORMGATE_TIMEOUT", 60.0),
                  token_file=os.environ.get("STORMGATE_TOKEN_FILE", ""),
                  workers=_env_int("STORMGATE_WORKERS", 0, 0, 4096),
                  weight=_env_int("STORMGATE_WEIGHT", 1, 1, 16),
                  push_window_kb=_env_int("STORMGATE_PUSH_WINDOW_KB", 64, 0, 1 << 20))
        kw.update(overrides)
        return cls(**kw)

    def allreduce(self, tensor, round=None, timeout=None):
        """tensor := mean over all workers (in place); returns tensor. `round` defaults to
        the next one. Dtypes and devices: see the module docstring."""
        self._check_size(tensor)
        self.round = self.round + 1 if round is None else round
        t = self.timeout if timeout is None else timeout
        if _is_torch(tensor):
            _allreduce_torch(self, tensor, self.round, t)
        else:
            self.worker.allreduce(tensor, self.round, t)  # float32 or float16, else TypeError
        return tensor

    def allreduce_start(self, buffer, round=None, timeout=None):
        """Starts a streaming round on `buffer` (contiguous, CPU: a numpy float32/float16 array
        or a torch float32/float16/bfloat16 tensor, pushed in its dtype) and returns its
        PendingRound: ready(k) hands buffer[:k] over (pushed at once, while the caller computes
        the rest), wait() blocks until buffer holds the result, cancel() gives the round up.
        One round at a time per Client. CUDA tensors: use allreduce."""
        self._check_size(buffer)
        dtype = ""
        if _is_torch(buffer):
            if buffer.device.type != "cpu" or buffer.dtype not in _wire_dtypes() or not buffer.is_contiguous():
                raise ValueError("stormgate: allreduce_start needs a contiguous float32, float16 or bfloat16 "
                                 "CPU tensor (got %s %s%s)" % (buffer.dtype, buffer.device,
                                                               "" if buffer.is_contiguous() else ", non-contiguous"))
            buffer, dtype = _native_view(buffer.detach())
        self.round = self.round + 1 if round is None else round
        t = self.timeout if timeout is None else timeout
        return self.worker.allreduce_start(buffer, self.round, t, dtype=dtype)

    def _check_size(self, x):
        n = x.numel() if _is_torch(x) else getattr(x, "size", None)
        if self.model_floats is not None and n != self.model_floats:
            raise ValueError("stormgate: the buffer holds %s values, the job %d (model_floats = job.model_bytes / 4)"
                             % (n, self.model_floats))

    def _host(self, n, dtype, pin):
        """The staging tensor: allocated once, reused while n, dtype and pinning stay."""
        s = self._staging
        if s is None or s.numel() != n or s.dtype != dtype or s.is_pinned() != pin:
            import torch
            s = self._staging = torch.empty(n, dtype=dtype, pin_memory=pin)
        return s

    def _side_stream(self, device):
        import torch
        if device not in self._streams:
            self._streams[device] = torch.cuda.Stream(device=device)
        return self._streams[device]

    def close(self):
        """Announcing clients: tells the gateway this worker left the job (best effort); a
        later allreduce registers it again. Nothing to do otherwise."""
        self.worker.leave()

    @property
    def last_round_seconds(self):
        return self.worker.last_round_seconds

    @property
    def stats(self):
        return self.worker.stats


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _wire_dtypes():
    import torch
    return (torch.float32, torch.float16, torch.bfloat16)


def _native_view(t):
    """(buffer, dtype) of a contiguous CPU tensor of a wire dtype, sharing its memory."""
    import torch
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy(), "bf16"  # numpy has no bfloat16: the same bits
    return t.numpy(), ("f16" if t.dtype == torch.float16 else "f32")


def _allreduce_torch(client, tensor, round_, timeout):
    import torch
    t = tensor.detach()
    wire = t.dtype if t.dtype in _wire_dtypes() else torch.float32
    if t.is_cuda:
        return _allreduce_cuda(client, t, wire, round_, timeout)
    if t.device.type != "cpu":
        raise ValueError("stormgate: CPU or CUDA tensors only (got %s)" % t.device)
    if t.dtype == wire and t.is_contiguous():
        buf, dtype = _native_view(t)
        client.worker.allreduce(buf, round_, timeout, dtype=dtype)  # shares memory: zero-copy
        return
    s = client._host(t.numel(), wire, pin=False)
    s.copy_(t.reshape(-1))
    buf, dtype = _native_view(s)
    client.worker.allreduce(buf, round_, timeout, dtype=dtype)
    t.copy_(s.view(t.shape))


_CUDA_PIECE = 1 << 20  # elements per device-to-host copy handed to the push as it lands


def _allreduce_cuda(client, t, wire, round_, timeout):
    """Pinned host staging in the wire dtype. The device-to-host copy runs on a side stream
    (after the work that produced t) in pieces, each handed to the push once its event fired,
    so the copy of the rest overlaps the network; the result goes back on the same stream,
    which is synchronised before t is returned (on error t is unchanged)."""
    import torch
    n = t.numel()
    host = client._host(n, wire, pin=True)
    stream = client._side_stream(t.device)
    stream.wait_stream(torch.cuda.current_stream(t.device))
    landed = []
    with torch.cuda.stream(stream):
        src = t.reshape(-1)  # a copy on the side stream when t is not contiguous
        for a in range(0, n, _CUDA_PIECE):
            b = min(n, a + _CUDA_PIECE)
            host[a:b].copy_(src[a:b], non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(stream)
            landed.append((b, ev))
    buf, dtype = _native_view(host)
    pending = None
    try:
        pending = client.worker.allreduce_start(buf, round_, timeout, dtype=dtype)
        for b, ev in landed:
            ev.synchronize()
            pending.ready(b)
        pending.wait()
        with torch.cuda.stream(stream):
            t.copy_(host.view(t.shape), non_blocking=True)
    except BaseException:
        if pending is not None:
            pending.cancel()
        raise
    finally:
        stream.synchronize()  # host is free for the next round and t final before anyone reads it


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
