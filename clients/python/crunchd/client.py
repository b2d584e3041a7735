"""The client: numpy arrays in and out of crunchd over HTTP (requests), JSON or .npy."""

import functools
import json
import random
import time

import numpy as np
import requests

from . import _wire
from .errors import JobTimeout, NonFiniteResult, error_from_response
from .tensor import Tensor, output_field

__all__ = ["Client", "Crunchd", "Retry", "Result", "HistogramResult", "Job", "Tensor",
           "DEFAULT_JSON_THRESHOLD", "TRANSPORTS"]

DEFAULT_JSON_THRESHOLD = 64 * 1024
TRANSPORTS = ("auto", "json", "npy", "raw")
FINAL_STATES = ("done", "failed", "cancelled")
_MATRIX_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_JSON_HIST_DTYPES = {np.dtype(np.uint8): "uint8", np.dtype(np.float32): "float32",
                     np.dtype(np.float64): "float64"}
_UNSET = object()


@functools.lru_cache(maxsize=None)
def _bfloat16():
    """ml_dtypes' bfloat16 when it is installed (numpy has none, and this package does not
    require it); None otherwise. Asked once: a failed import is not cached by Python and costs
    about 50 us each time, on every small call of a client without ml_dtypes."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


class Retry:
    """When and how long to retry a refused request.

    crunchd refuses with 429/503 and Retry-After *before* a job runs (queue full, memory budget,
    draining), so every request, compute POSTs included, is safe to send again after such an
    answer. Retried: statuses in ``statuses`` whose error code is in ``codes`` (or that carry no
    crunchd code at all, e.g. a proxy's 503). Not retried by default: 503 device_fault (the
    daemon exits to be restarted) and everything else.

    attempts: tries in all, the first included (1: never retry); max_time: seconds from the
    first try after which no retry starts (a wait that would end past it is not begun);
    backoff, max_backoff: the wait (doubling per attempt) when the answer has no Retry-After;
    jitter: up to this fraction added to each wait, so refused clients do not return in step.
    """

    DEFAULT_CODES = frozenset({"queue_full", "memory_budget", "draining", "host_memory"})

    def __init__(self, attempts=5, max_time=30.0, backoff=0.1, max_backoff=5.0, jitter=0.1,
                 codes=DEFAULT_CODES, statuses=(429, 503)):
        if attempts < 1:
            raise ValueError("attempts counts the first try: at least 1")
        self.attempts = attempts
        self.max_time = max_time
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.jitter = jitter
        self.codes = frozenset(codes)
        self.statuses = tuple(statuses)

    def delay(self, err, attempt, elapsed):
        """Seconds to wait before try attempt+1 after err, or None to give up and raise err."""
        if attempt >= self.attempts or err.status not in self.statuses:
            return None
        if err.code is not None and err.code not in self.codes:
            return None
        wait = err.retry_after if err.retry_after is not None else \
            min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
        wait *= 1.0 + random.uniform(0.0, self.jitter)
        if elapsed + wait > self.max_time:
            return None
        return wait

    def __repr__(self):
        return (f"Retry(attempts={self.attempts}, max_time={self.max_time}, "
                f"codes={sorted(self.codes)})")


class Result:
    """A finished job's answer, the same whichever transport carried it.

    result: the numpy array (gemm: numpy.matmul's shape, m×n for two matrices, a stack's
    [..., m, n]; ata: n×n or [..., n, n]; in the job's dtype; histogram: the counts,
    uint64); id: the job id; op; kernel: the kernel that ran (compare mode: the reference's);
    backend, device, dtype; timings: {phase: ms} (receive, queue, h2d, kernel, d2h, total: the
    JSON answer's timings_ms, or Server-Timing for .npy answers); batch: jobs in the launch it
    ran in; gflops (gemm, ata) or gbps (histogram); kernels: compare mode's table (kernel="all"),
    a list of {kernel, ms, gflops|gbps, max_rel_error, status}, else None; transport: "json" or
    "npy", how the answer came; sent: how the request went ("json", "multipart", "npy",
    "raw"; None for a job attached by id); headers: the response headers; raw: the JSON
    answer (None for .npy); tensor: the resident Tensor the result was kept in (keep=, out=),
    and then result is None. np.asarray(result) is the array.
    """

    def __init__(self, op, result, meta, transport, headers, raw=None):
        self.op = op
        self.result = result
        self.id = meta.get("id")
        self.kernel = meta.get("kernel")
        self.backend = meta.get("backend")
        self.device = meta.get("device")
        self.dtype = meta.get("dtype")
        self.timings = meta.get("timings") or {}
        self.batch = meta.get("batch")
        self.gflops = meta.get("gflops")
        self.gbps = meta.get("gbps")
        self.kernels = meta.get("kernels")
        self.transport = transport
        self.sent = None
        self.headers = headers
        self.raw = raw
        self.tensor = None

    def __array__(self, dtype=None, copy=None):
        a = self.result if self.tensor is None else self.tensor.download()
        if dtype is not None:
            a = a.astype(dtype)
        return a.copy() if copy else a

    @property
    def shape(self):
        return self.result.shape if self.tensor is None else self.tensor.shape

    def __repr__(self):
        t = self.timings.get("total")
        extra = f", total {t:.3f} ms" if t is not None else ""
        what = self.result if self.tensor is None else self.tensor
        return (f"<{type(self).__name__} {self.op} {what.dtype}{list(what.shape)} "
                f"kernel={self.kernel} id={self.id} via {self.transport}{extra}>")


class HistogramResult(Result):
    """A histogram's answer: counts (uint64, = result), edges (bins+1, numpy.histogram's: float32
    for float32 data, else float64; None when unknown, i.e. a uint8 job fetched by id with a
    range of its own), bins, range (lo, hi). Unpacks as numpy.histogram's answer:
    ``counts, edges = c.histogram(x, bins=10)``."""

    def __init__(self, op, counts, edges, meta, transport, headers, raw=None):
        super().__init__(op, counts, meta, transport, headers, raw)
        self.edges = edges
        self.bins = int(counts.shape[0])
        self.range = (float(edges[0]), float(edges[-1])) if edges is not None else None

    @property
    def counts(self):
        return self.result

    def __iter__(self):
        yield self.counts
        yield self.edges

    def __len__(self):
        return 2


class _Call:
    """One operation, prepared: its arrays, its fields, and what it will cost on the wire."""

    def __init__(self, op, given, fields, json_dtype, out_bytes, json_ok, hist=None):
        self.op = op
        # JSON bodies carry the values as given (the daemon converts them to "dtype" and refuses
        # what does not fit, e.g. 1e300 as float32, as for any JSON client); binary bodies carry
        # the arrays converted to the job's dtype, made only when one is sent.
        # resident tensors among the operands travel as references: {"tensor": id} in JSON,
        # ?tensor_a=id beside a binary body
        self.refs = {k: v for k, v in given.items() if isinstance(v, Tensor)}
        given = {k: v for k, v in given.items() if not isinstance(v, Tensor)}
        self.json_arrays = given
        self.output = None            # the JSON body's "output" (keep=, out=)
        self._dtype = np.dtype(json_dtype) if op != "histogram" else None
        self._arrays = None
        # bfloat16 travels as its bits (numpy has no bfloat16): '<u2' parts and ?dtype=bfloat16
        self._bits = self._dtype is not None and self._dtype.name == "bfloat16"
        self.fields = fields          # request fields other than the arrays (None: not sent)
        self.json_dtype = json_dtype  # the JSON body's "dtype"
        self.out_bytes = out_bytes
        self.in_bytes = sum(a.size * (self._dtype or a.dtype).itemsize for a in given.values())
        self.json_ok = json_ok        # False: JSON cannot carry these arrays as they are
        self.hist = hist              # histograms: {"range"} for uint8 edges
        self.compare = fields.get("kernel") == "all"

    @property
    def arrays(self):
        """{part name: ndarray in the job's dtype}, for binary bodies."""
        if self._arrays is None:
            self._arrays = {k: a if self._dtype is None else a.astype(self._dtype, copy=False)
                            for k, a in self.json_arrays.items()}
            if self._bits:
                self._arrays = {k: a.view(np.uint16) for k, a in self._arrays.items()}
        return self._arrays

    def json_body(self):
        body = {}
        for name, a in self.json_arrays.items():
            if self.op == "histogram":
                body[name] = a.ravel().tolist()
            else:  # any rank: {"shape", "data"} in C order (a 2-D matrix, a stack, a vector)
                body[name] = {"shape": [int(d) for d in a.shape], "data": a.ravel().tolist()}
        for name, t in self.refs.items():
            body[name] = {"tensor": t.id}
        if self.output is not None:
            body["output"] = self.output
        body["dtype"] = self.json_dtype
        for k, v in self.fields.items():
            if v is not None:
                body[k] = list(v) if isinstance(v, tuple) else v
        return body

    def query(self):
        q = {("tensor_data" if k == "data" else f"tensor_{k}"): t.id for k, t in self.refs.items()}
        out = (self.output or {}).get("tensor")
        if isinstance(out, dict):
            q["output"] = "tensor"
            if out.get("name"):
                q["output_name"] = out["name"]
        elif out is not None:
            q["output_into"] = out
        for k, v in self.fields.items():
            if v is None:
                continue
            if isinstance(v, bool):
                q[k] = "true" if v else "false"
            elif isinstance(v, float):
                q[k] = repr(v)
            elif isinstance(v, tuple):
                q[k] = f"{v[0]!r},{v[1]!r}"
            else:
                q[k] = str(v)
        return q


def _finite(a):
    return a.dtype.kind not in "fc" or bool(np.isfinite(a).all())


def _matrix_dtype(dtype, *arrays, half=False):
    """The job's dtype: the one asked for, else float64 when any operand is float64, float16
    when every operand is float16 and the op takes it (half: GEMM), else float32."""
    bf16 = _bfloat16() if half else None
    allowed = _MATRIX_DTYPES + ((np.dtype(np.float16),) if half else ()) + ((bf16,) if bf16 else ())
    if dtype is not None:
        dt = np.dtype(dtype)
        if dt not in allowed:
            raise ValueError(f"dtype must be one of {', '.join(d.name for d in allowed)}, not {dt}")
        return dt
    given = [a for a in arrays if a is not None]
    if any(a.dtype == np.float64 for a in given):
        return np.dtype(np.float64)
    if half and all(a.dtype == np.float16 for a in given):
        return np.dtype(np.float16)
    if bf16 and all(a.dtype == bf16 for a in given):
        return bf16
    return np.dtype(np.float32)


_MAX_RANK = 8


def _matrix(x, name, min_rank=1):
    """An operand as numpy.matmul takes it: a matrix, a stack of matrices (3 to 8 dimensions: the
    leading ones broadcast), or (GEMM) a vector; or a resident Tensor, as it is."""
    if isinstance(x, Tensor):
        return x
    a = np.asarray(x)
    if not min_rank <= a.ndim <= _MAX_RANK:
        raise ValueError(f"{name} must have {min_rank} to {_MAX_RANK} dimensions, got shape {a.shape}")
    if a.dtype.kind not in "uif" and a.dtype != _bfloat16():
        raise TypeError(f"{name} must hold real numbers, not {a.dtype}")
    return a


def _matmul_shape(sa, sb, trans_a, trans_b):
    """The result's shape as numpy.matmul gives it (for the answer's size; the daemon decides)."""
    a = (1,) + tuple(sa) if len(sa) == 1 else tuple(sa)
    b = tuple(sb) + (1,) if len(sb) == 1 else tuple(sb)
    m = a[-1] if trans_a else a[-2]
    n = b[-2] if trans_b else b[-1]
    try:
        batch = np.broadcast_shapes(a[:-2], b[:-2])
    except ValueError:
        batch = a[:-2]  # the daemon says why (422)
    return tuple(batch) + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())


def _edges_dtype(dtype):
    return np.float32 if dtype == "float32" else np.float64


def _check_transport(transport):
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS}, not {transport!r}")
    return transport


class Job:
    """An asynchronous job (POST /v1/jobs). Client.submit() makes one; Client.job(id) attaches
    to one by id (e.g. from another process). Ids live on the replica that accepted the job."""

    def __init__(self, client, id, op=None, location=None, accept_npy=None, transport="auto",
                 hist=None):
        self.client = client
        self.id = id
        self.op = op
        self.location = location or f"/v1/jobs/{id}"
        self.info = None            # the last status answer: {id, op, status, timings_ms?, error?}
        self._accept_npy = accept_npy
        self._transport = transport
        self._hist = hist
        self._result = None
        self.sent = None            # how the job was sent: json, multipart, npy or raw

    def status(self):
        """The job's state now: queued, running, done, failed or cancelled (GET /v1/jobs/{id});
        the whole answer is kept in .info."""
        self.info = self.client._request("GET", f"/v1/jobs/{self.id}").json()
        self.op = self.op or self.info.get("op")
        return self.info["status"]

    def done(self):
        return self.status() in FINAL_STATES

    def wait(self, timeout=None, poll=0.01, max_poll=0.25):
        """Polls until the job is done, failed or cancelled and returns that state; raises
        JobTimeout after timeout seconds (None: no limit). The poll interval starts at poll and
        grows to max_poll."""
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = poll
        while True:
            state = self.status()
            if state in FINAL_STATES:
                return state
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise JobTimeout(f"job {self.id} still {state} after {timeout} s",
                                     code="timeout")
                time.sleep(min(interval, left))
            else:
                time.sleep(interval)
            interval = min(max_poll, interval * 1.5)

    def result(self, timeout=None):
        """Waits (up to timeout seconds) and returns the job's Result. A failed job raises its
        error (DeadlineExceeded, DeviceError, ...), a cancelled one JobCancelled."""
        if self._result is None:
            self.wait(timeout)
            accept = self._accept_npy
            if accept is None:  # attached by id: the size is unknown, take the compact form
                accept = self._transport != "json"
            self._result = self.client._fetch_result(
                "GET", f"/v1/jobs/{self.id}/result", accept, self._transport, hist=self._hist)
            self._result.sent = self.sent
        return self._result

    def cancel(self):
        """Cancels a queued or running job, or forgets a finished one (DELETE); returns the
        state after the call. The id answers 404 from then on."""
        self.info = self.client._request("DELETE", f"/v1/jobs/{self.id}").json()
        return self.info["status"]

    def __repr__(self):
        state = self.info["status"] if self.info else "?"
        return f"<Job {self.op or '?'} {self.id} {state}>"


class Client:
    """A crunchd client over one requests.Session.

    url: where crunchd listens; token: the bearer token (--auth-token-file); timeout: requests'
    timeout in seconds (a number, or (connect, read)); verify, cert: TLS, passed to requests
    with every request (verify: True, False or a CA bundle path, e.g. a self-signed daemon's
    certificate; None: requests' default); retry: a Retry, or None for no retries;
    transport: "auto" (JSON up to json_threshold bytes of array data, .npy above, each way),
    "json", "npy", or "raw" (raw bytes for uint8 histograms); headers: sent with every request;
    session: a requests.Session of your own.
    """

    def __init__(self, url="http://localhost:8080", token=None, timeout=120.0, verify=None,
                 cert=None, retry=_UNSET, transport="auto",
                 json_threshold=DEFAULT_JSON_THRESHOLD, headers=None, session=None):
        from . import __version__
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.retry = Retry() if retry is _UNSET else retry
        self.transport = _check_transport(transport)
        self.json_threshold = int(json_threshold)
        self.session = session or requests.Session()
        self._own_session = session is None
        # Passed with each request, not set on the session: requests lets REQUESTS_CA_BUNDLE
        # and CURL_CA_BUNDLE override a session's verify, never a request's.
        self._tls = {k: v for k, v in (("verify", verify), ("cert", cert)) if v is not None}
        self.session.headers["User-Agent"] = f"crunchd-python/{__version__}"
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        self.session.headers.update(headers or {})

    def close(self):
        if self._own_session:
            self.session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<crunchd.Client {self.url} transport={self.transport}>"

    # -- operations -------------------------------------------------------------------------
    def gemm(self, a, b, c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,
             kernel="auto", precision=None, dtype=None, timeout_ms=None, transport=None,
             keep=None, out=None):
        """C = alpha·op(A)·op(B) + beta·C with numpy.matmul's rules; returns a Result (result: the
        m×n matrix, or [..., m, n] for stacks). a and b may be matrices, stacks of matrices (up
        to 8 dimensions: the leading ones broadcast, one request and one launch for the whole
        stack) or vectors (promoted as numpy does, the added dimension removed); c broadcasts to
        the result; trans_a/trans_b act on the last two dimensions.

        dtype: float32, float64, float16 or bfloat16 (ml_dtypes' arrays, when it is installed);
        by default float64 when any operand is float64, float16 or bfloat16 when all operands
        are, else float32 (as the daemon's JSON default). The half types multiply with float32
        sums and answer in their own type. precision: None (the daemon's fp32) or "tf32".
        kernel: a name of kernels("gemm"), "auto", or "all" (compare every kernel: the table is
        Result.kernels). timeout_ms: the job's deadline on the daemon.

        Any operand may be a resident Tensor (upload()): it is named, not sent. keep=True (or a
        name) keeps the result on the daemon as a new Tensor (Result.tensor; nothing comes
        back but its metadata); out=t writes it into the existing tensor t, which must have the
        result's shape and dtype: ``c.gemm(x, w, c=acc, beta=1, out=acc)`` is acc += x·w in
        place."""
        return self._sync(self._prepare_gemm(a, b, c, alpha, beta, trans_a, trans_b, kernel,
                                             precision, dtype, timeout_ms, keep, out), transport)

    def ata(self, a, kernel="auto", dtype=None, timeout_ms=None, transport=None, keep=None,
            out=None):
        """AᵀA of an m×n matrix, or of each matrix of a stack [..., m, n]; returns a Result
        (result: n×n, symmetric; [..., n, n] for a stack). a may be a Tensor; keep=, out= as
        for gemm."""
        return self._sync(self._prepare_ata(a, kernel, dtype, timeout_ms, keep, out), transport)

    def histogram(self, data, bins=None, range=None, kernel="auto", timeout_ms=None,
                  transport=None, keep=None, out=None):
        """Counts per bin with numpy.histogram's rules, as the daemon applies them: bins equal
        bins over range (lo, hi), the last bin closed, values outside ignored; data of any shape
        is flattened. Float and integer data: bins defaults to 10 and range to (min, max).
        uint8 data: 256 bins over (0, 256) by default, one per byte value (numpy would take 10
        over (min, max)). Returns a HistogramResult: ``counts, edges = c.histogram(x)``. data
        may be a Tensor; keep=, out= as for gemm (the counts kept, uint64)."""
        return self._sync(self._prepare_histogram(data, bins, range, kernel, timeout_ms, keep,
                                                  out), transport)

    def submit(self, op, *args, transport=None, **kwargs):
        """Queues op ("gemm", "ata", "histogram") with the arguments of the method of that name
        (POST /v1/jobs) and returns its Job at once."""
        call = self._prepare(op, *args, **kwargs)
        transport = _check_transport(transport or self.transport)
        binary, accept, raw = self._plan(call, transport)
        r = self._post_call(call, "/v1/jobs", binary, False, raw)
        body = r.json()
        job = Job(self, body["id"], call.op, location=r.headers.get("Location"),
                  accept_npy=accept, transport=transport, hist=call.hist)
        job.sent = self._sent(call, binary, raw)
        return job

    def job(self, job_id):
        """A Job for an id the daemon gave earlier (nothing is sent yet)."""
        return Job(self, job_id, transport=self.transport)

    # -- resident tensors -------------------------------------------------------------------
    def upload(self, array, name=None):
        """Keeps array on the daemon (device memory on a GPU) and returns its Tensor, to name
        in later requests instead of sending it again. name: a name of this client's own (a
        second upload of a name is refused while the first lives: delete it first). Any dtype
        numpy has a .npy for; sent as .npy, without a copy of a contiguous array."""
        a = np.asarray(array)
        params = {"name": name} if name else None
        r = self._request("POST", "/v1/tensors", params=params, data=_wire.npy_body(a),
                          content_type="application/x-npy")
        return Tensor(self, r.json())

    def tensor(self, ref):
        """The Tensor of an id or name (raises NotFound)."""
        return Tensor(self, self._request("GET", f"/v1/tensors/{ref}").json())

    def tensors(self):
        """This client's resident tensors."""
        return [Tensor(self, t) for t in self._request("GET", "/v1/tensors").json()["tensors"]]

    def _download_tensor(self, ref):
        r = self._request("GET", f"/v1/tensors/{ref}", accept_npy=True)
        return _wire.read_npy(r)

    # -- service ----------------------------------------------------------------------------
    def info(self):
        """GET /v1/info: name, version, backend, devices and limits."""
        return self._request("GET", "/v1/info").json()

    def kernels(self, op=None):
        """GET /v1/kernels: the kernels of this backend (of op only, if given), each a dict
        with op, name, dtypes, precision, reference, batchable, summary."""
        ks = self._request("GET", "/v1/kernels").json()["kernels"]
        return [k for k in ks if op is None or k["op"] == op]

    def metrics(self):
        """GET /metrics: the Prometheus text."""
        return self._request("GET", "/metrics").text

    def health(self):
        """GET /healthz: True while the daemon answers 200 (False when it cannot be reached)."""
        return self._probe("/healthz")[0]

    def ready(self):
        """GET /readyz: True when ready for work, False while draining, after a device fault,
        with the queue saturated, or when the daemon cannot be reached."""
        return self._probe("/readyz")[0]

    def readiness(self):
        """GET /readyz's answer: {"ready": bool, "reason"?: why not}."""
        ok, body = self._probe("/readyz")
        return body if isinstance(body, dict) else {"ready": ok, "reason": str(body)}

    def wait_ready(self, timeout=30.0, poll=0.05):
        """Polls /readyz until ready; raises TimeoutError after timeout seconds."""
        deadline = time.monotonic() + timeout
        while not self.ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.url} not ready after {timeout} s")
            time.sleep(poll)

    # -- preparing ----------------------------------------------------------------------------
    def _prepare(self, op, *args, **kwargs):
        prep = {"gemm": self._prepare_gemm, "ata": self._prepare_ata,
                "histogram": self._prepare_histogram}.get(op)
        if prep is None:
            raise ValueError(f"op must be gemm, ata or histogram, not {op!r}")
        return prep(*args, **kwargs)

    @staticmethod
    def _prepare_gemm(a, b, c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,
                      kernel="auto", precision=None, dtype=None, timeout_ms=None, keep=None,
                      out=None):
        a, b = _matrix(a, "a"), _matrix(b, "b")
        c = None if c is None else _matrix(c, "c", min_rank=0)
        dt = _matrix_dtype(dtype, a, b, c, half=True)
        given = {"a": a, "b": b} if c is None else {"a": a, "b": b, "c": c}
        fields = {"kernel": kernel, "alpha": float(alpha), "beta": float(beta),
                  "trans_a": bool(trans_a), "trans_b": bool(trans_b), "precision": precision,
                  "timeout_ms": None if timeout_ms is None else int(timeout_ms)}
        if dt.name == "bfloat16":
            fields["dtype"] = "bfloat16"
        shape = _matmul_shape(a.shape, b.shape, trans_a, trans_b)
        return _kept(_Call("gemm", given, fields, dt.name, int(np.prod(shape)) * dt.itemsize, True),
                     keep, out)

    @staticmethod
    def _prepare_ata(a, kernel="auto", dtype=None, timeout_ms=None, keep=None, out=None):
        a = _matrix(a, "a", min_rank=2)
        dt = _matrix_dtype(dtype, a)
        fields = {"kernel": kernel, "timeout_ms": None if timeout_ms is None else int(timeout_ms)}
        n = a.shape[-1]
        call = _Call("ata", {"a": a}, fields, dt.name, int(np.prod(a.shape[:-2])) * n * n * dt.itemsize, True)
        return _kept(call, keep, out)

    @staticmethod
    def _prepare_histogram(data, bins=None, range=None, kernel="auto", timeout_ms=None, keep=None,
                           out=None):
        d = data if isinstance(data, Tensor) else np.asarray(data)
        if d.dtype == np.float16 and not isinstance(d, Tensor):
            d = d.astype(np.float32)
        if not isinstance(d.dtype, np.dtype) or d.dtype.kind not in "uif" or d.dtype.itemsize > 8:
            raise TypeError(f"histogram data must be integers or float32/float64, not {d.dtype}")
        if not d.dtype.isnative:
            d = d.astype(d.dtype.newbyteorder("="))
        if bins is not None:
            if isinstance(bins, (bool, np.bool_)) or not isinstance(bins, (int, np.integer)):
                raise TypeError("bins must be an integer (equal bins; edges lists are not "
                                "supported)")
            bins = int(bins)
        if range is not None:
            lo, hi = range
            range = (float(lo), float(hi))
        is_u8 = d.dtype == np.uint8
        nbins = bins if bins is not None else (256 if is_u8 else 10)
        fields = {"kernel": kernel, "bins": bins, "range": range,
                  "timeout_ms": None if timeout_ms is None else int(timeout_ms)}
        json_dtype = _JSON_HIST_DTYPES.get(d.dtype, "float64")
        hist = {"range": range}  # what a uint8 answer's edges need (the daemon sends none)
        return _kept(_Call("histogram", {"data": d}, fields, json_dtype, nbins * 8,
                           d.dtype in _JSON_HIST_DTYPES, hist=hist), keep, out)

    # -- sending -----------------------------------------------------------------------------
    def _plan(self, call, transport):
        """(send binary?, ask for .npy?, raw bytes?) for call under transport."""
        u8 = call.op == "histogram" and "data" in call.json_arrays and \
            call.json_arrays["data"].dtype == np.uint8
        if transport == "raw" and not u8:
            raise ValueError("transport='raw' is for uint8 histograms only")
        if transport == "auto":
            binary = call.in_bytes > self.json_threshold or not call.json_ok or \
                not all(_finite(a) for a in call.json_arrays.values())
            accept = call.out_bytes > self.json_threshold
            raw = binary and u8
        elif transport == "json":
            binary = accept = raw = False
            if not all(_finite(a) for a in call.json_arrays.values()):
                raise ValueError("JSON cannot carry NaN or infinity: use transport='npy'")
        else:
            binary = accept = True
            raw = transport == "raw"
        if call.compare or call.output is not None:  # the answer is JSON: a table, a tensor's metadata
            accept = False
        if not call.json_arrays:  # every operand a resident tensor: a few bytes of JSON
            binary = raw = False
        return binary, accept, raw

    @staticmethod
    def _sent(call, binary, raw):
        if not binary:
            return "json"
        return "raw" if raw else "multipart" if call.op == "gemm" else "npy"

    def _post_call(self, call, path, binary, accept, raw):
        if not binary:
            body = call.json_body()
            if path == "/v1/jobs":
                body["op"] = call.op
            return self._request("POST", path, json_body=body, accept_npy=accept)
        params = call.query()
        if path == "/v1/jobs":
            params = dict(op=call.op, **params)
        if raw:
            d = np.ascontiguousarray(call.arrays["data"]).reshape(-1)
            body, ctype = _wire.Body([d]), "application/octet-stream"
        elif call.op == "gemm":
            body, ctype = _wire.multipart_body(call.arrays)
        else:
            (arr,) = call.arrays.values()
            body, ctype = _wire.npy_body(arr), "application/x-npy"
        return self._request("POST", path, params=params, data=body, content_type=ctype,
                             accept_npy=accept)

    def _sync(self, call, transport):
        transport = _check_transport(transport or self.transport)
        binary, accept, raw = self._plan(call, transport)
        try:
            r = self._post_call(call, f"/v1/{call.op}", binary, accept, raw)
        except NonFiniteResult:
            if transport != "auto" or call.compare:
                raise
            # the result overflowed: JSON cannot say inf, a .npy answer can
            r = self._post_call(call, f"/v1/{call.op}", binary, True, raw)
        res = self._parse(r, call.hist)
        res.sent = self._sent(call, binary, raw)
        return res

    def _fetch_result(self, method, path, accept, transport, hist=None):
        try:
            r = self._request(method, path, accept_npy=accept)
        except NonFiniteResult:
            if accept or transport != "auto":
                raise
            r = self._request(method, path, accept_npy=True)
        return self._parse(r, hist)

    def _request(self, method, path, params=None, json_body=None, data=None,
                 content_type=None, accept_npy=False):
        """One request, retried per self.retry; returns the response (status < 400) or raises
        the error's CrunchdError. .npy answers come back unread (stream=True)."""
        headers = {}
        if json_body is not None:
            data = json.dumps(json_body, allow_nan=False, separators=(",", ":")).encode()
            content_type = "application/json"
        if content_type:
            headers["Content-Type"] = content_type
        if accept_npy:
            headers["Accept"] = "application/x-npy"
            # read_npy reads the body as sent, straight into the array; numbers barely compress
            headers["Accept-Encoding"] = "identity"
        start = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            r = self.session.request(method, self.url + path, params=params, data=data,
                                     headers=headers, timeout=self.timeout, stream=accept_npy,
                                     **self._tls)
            if r.status_code < 400:
                return r
            err = error_from_response(r)
            r.close()
            wait = self.retry.delay(err, attempt, time.monotonic() - start) if self.retry \
                else None
            if wait is None:
                raise err
            time.sleep(wait)

    def _probe(self, path):
        try:
            r = self.session.get(self.url + path, timeout=self.timeout, **self._tls)
        except requests.RequestException as e:
            return False, repr(e)
        try:
            body = r.json()
        except ValueError:
            body = r.text
        return r.status_code == 200, body

    # -- answers -----------------------------------------------------------------------------
    def _parse(self, r, hist=None):
        ctype = r.headers.get("Content-Type", "")
        if ctype.startswith("application/x-npy"):
            return self._parse_npy(r, hist)
        res = self._parse_json(r, hist)
        if res.result is None:
            res.tensor = Tensor(self, res.raw["result"]["tensor"])
        return res

    @staticmethod
    def _parse_json(r, hist):
        body = r.json()
        op, res = body["op"], body["result"]
        meta = {"id": body.get("id"), "kernel": body.get("kernel"),
                "backend": body.get("backend"), "device": body.get("device"),
                "dtype": body.get("dtype"), "timings": dict(body.get("timings_ms") or {}),
                "batch": body.get("batch"), "gflops": body.get("gflops"),
                "gbps": body.get("gbps"), "kernels": body.get("kernels")}
        if "tensor" in res:  # kept on the daemon (keep=, out=): Client._parse makes the Tensor
            return Result(op, None, meta, "json", r.headers, body)
        if op == "histogram":
            counts = np.asarray(res["counts"], dtype=np.uint64)
            if "edges" in res:
                edges = np.asarray(res["edges"], dtype=_edges_dtype(body.get("dtype")))
            else:
                edges = _uint8_edges(hist, counts.shape[0])
            return HistogramResult(op, counts, edges, meta, "json", r.headers, body)
        if body["dtype"] == "bfloat16":
            _bfloat16()  # registers the name with numpy
        shape = res["shape"] if "shape" in res else (res["rows"], res["cols"])
        out = np.asarray(res["data"], dtype=body["dtype"]).reshape(shape)
        return Result(op, out, meta, "json", r.headers, body)

    @staticmethod
    def _parse_npy(r, hist):
        h = r.headers
        arr = _wire.read_npy(r)
        op, dtype = h.get("X-Crunchd-Op"), h.get("X-Crunchd-Dtype")

        def num(name, conv=float):
            v = h.get(name)
            try:
                return None if v is None else conv(v)
            except ValueError:
                return None

        meta = {"id": h.get("X-Crunchd-Job-Id"), "kernel": h.get("X-Crunchd-Kernel"),
                "backend": h.get("X-Crunchd-Backend"), "device": h.get("X-Crunchd-Device"),
                "dtype": dtype, "timings": _wire.parse_server_timing(h.get("Server-Timing")),
                "batch": num("X-Crunchd-Batch", int), "gflops": num("X-Crunchd-Gflops"),
                "gbps": num("X-Crunchd-Gbps"), "kernels": None}
        if op == "histogram":
            ed = _edges_dtype(dtype)
            bins = arr.shape[0]
            if h.get("X-Crunchd-Edges"):
                edges = np.array([float(e) for e in h["X-Crunchd-Edges"].split(",")], dtype=ed)
            elif h.get("X-Crunchd-Range"):
                lo, hi = (float(v) for v in h["X-Crunchd-Range"].split(","))
                edges = np.linspace(lo, hi, bins + 1, dtype=ed)  # numpy's edges, the daemon's
            else:
                edges = _uint8_edges(hist, bins)
            return HistogramResult(op, arr, edges, meta, "npy", h)
        if dtype == "bfloat16" and arr.dtype == np.uint16 and _bfloat16() is not None:
            arr = arr.view(_bfloat16())
        return Result(op, arr, meta, "npy", h)


def _kept(call, keep, out):
    call.output = output_field(keep, out)
    return call


def _uint8_edges(hist, bins):
    """Edges of a uint8 histogram (the daemon sends none): over the request's range, else the
    byte domain (0, 256); None for a job attached by id, whose range is unknown."""
    if hist is None:
        return None
    lo, hi = hist["range"] if hist.get("range") else (0.0, 256.0)
    if lo == hi:  # numpy widens an empty range, so does the daemon
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, bins + 1)


Crunchd = Client
