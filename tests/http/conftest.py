"""Black-box HTTP tests for crunchd: fixtures that start real daemons, and helpers.

Environment:
  CRUNCHD_BIN      path of the daemon binary (default build/crunchd)
  CRUNCHD_BACKEND  cpu (default) or cuda: the --backend every daemon here is started with
  CRUNCHD_TEST_ARGS  more flags for every daemon, e.g. "--batch-max 32 --batch-delay-us 2000" to
                   run the whole suite with batching forced on (results must not change)

Every daemon binds 127.0.0.1 on a free port (--port 0 --port-file), is awaited by polling the
port file and then GET /readyz (bounded, never a fixed sleep), writes its stderr to a log file of
its own, and on teardown gets SIGTERM and must exit 0 with no sanitizer report in its log.
"""

import atexit
import contextlib
import http.client
import json
import math
import os
import pathlib
import re
import shlex
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import numpy as np
import pytest
import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Tests that run the binary themselves inherit this: their daemons leave the gRPC port (8001 by
# default) alone, so two at once never collide on it.
os.environ["CRUNCHD_GRPC_PORT"] = "0"
BIN = os.environ.get("CRUNCHD_BIN") or str(ROOT / "build" / "crunchd")
BACKEND = os.environ.get("CRUNCHD_BACKEND", "cpu")
EXTRA_ARGS = shlex.split(os.environ.get("CRUNCHD_TEST_ARGS", ""))
# The table behind "auto", measured by the session's first daemon and read by the others
# (--auto-cache): measuring it is most of a daemon's start (~10 s on cuda), and the suite starts
# hundreds. test_config.py's own test measures, reads and refuses it.
AUTO_CACHE = os.path.join(tempfile.gettempdir(), f"crunchd-test-auto-{os.getpid()}.json")
atexit.register(lambda: os.path.exists(AUTO_CACHE) and os.unlink(AUTO_CACHE))

# Sanitizer builds are several times slower: scale every bounded wait, never the semantics.
SLOW = 4.0 if ("asan" in BIN or os.environ.get("CRUNCHD_SLOW")) else 1.0
START_TIMEOUT_S = 30.0 * (2.0 if SLOW > 1 else 1.0)
JOB_TIMEOUT_S = 30.0 * (2.0 if SLOW > 1 else 1.0)
HTTP_TIMEOUT_S = 60.0 * SLOW
POLL_S = 0.02

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "LeakSanitizer")
JOB_STATES = ("queued", "running", "done", "failed", "cancelled")
FINAL_STATES = ("done", "failed", "cancelled")
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
DELAY_HEADER = "X-Crunchd-Debug-Delay-Ms"

# The session daemon's flags (tests read some of them back from /v1/info).
SESSION_WORKERS = 2
SESSION_QUEUE_DEPTH = 64
SESSION_RESULT_TTL_S = 2


class DaemonError(AssertionError):
    pass


# Tiny "auto" jobs run on the HTTP thread (--host-max-flops, --host-max-values) unless these are
# given: off for every daemon but test_host_path.py's, so the suite's small jobs keep exercising
# the queue, the workers and (with CRUNCHD_BACKEND=cuda) the GPU kernels they are about.
HOST_PATH_OFF = ["--host-max-flops", "0", "--host-max-values", "0"]


class Daemon:
    """One crunchd process on a free port of 127.0.0.1 (host_path: the daemon's own default for
    tiny jobs rather than HOST_PATH_OFF; flags in args win either way)."""

    def __init__(self, args=(), env=None, name="crunchd", workdir=None, host_path=False, all_gpus=False,
                 grpc=False):
        self.args = list(args)
        self.grpc = grpc
        self.grpc_port = None
        self.all_gpus = all_gpus
        self.host_path = host_path
        self.env_extra = dict(env or {})
        self.workdir = pathlib.Path(workdir or tempfile.mkdtemp(prefix="crunchd-test-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.port_file = self.workdir / f"{name}.port"
        self.grpc_port_file = self.workdir / f"{name}.grpc-port"
        self.log_path = self.workdir / f"{name}.log"
        self.proc = None
        self.port = None
        self.returncode = None
        self.session = requests.Session()
        # --tls-cert: https, verified against this CA file (the test's self-signed cert)
        self.scheme = "https" if "--tls-cert" in self.args else "http"
        self.verify = True
        # --unix-socket PATH: the same routes there too (unix_request)
        self.unix_path = self.args[self.args.index("--unix-socket") + 1] \
            if "--unix-socket" in self.args else None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self):
        if not os.path.exists(BIN):
            pytest.fail(f"daemon binary {BIN} does not exist (build it: make build/crunchd)")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRUNCHD_")}
        if BACKEND == "cuda" and not self.all_gpus:
            # --workers counts per GPU: tests that fill the workers to see jobs queue, or count
            # batches, are written for one device; test_multi_gpu.py asks for all of them
            env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        env.update(self.env_extra)
        # gRPC off unless a test asks for it (grpc=True: any free port, learnt from --grpc-port-file):
        # hundreds of daemons must not all try 8001
        grpc = ["--grpc-port", "-1", "--grpc-port-file", str(self.grpc_port_file)] if self.grpc else \
            ["--grpc-port", "0"]
        cmd = [BIN, "--port", "0", "--port-file", str(self.port_file), "--bind", "127.0.0.1",
               "--backend", BACKEND, "--auto-cache", AUTO_CACHE] + grpc + \
            ([] if self.host_path else HOST_PATH_OFF) + EXTRA_ARGS + self.args
        for f in (self.port_file, self.grpc_port_file):
            if f.exists():
                f.unlink()
        self._log = open(self.log_path, "wb")
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + START_TIMEOUT_S
        if self.socket_only:
            self.wait_unix_ready(deadline)
            return self
        while True:
            if self.proc.poll() is not None:
                raise DaemonError(f"{cmd} exited with {self.proc.returncode} before listening:\n"
                                  + self.log_tail())
            try:
                text = self.port_file.read_text().strip()
                if text:
                    self.port = int(text)
                    break
            except (FileNotFoundError, ValueError):
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise DaemonError(f"no port file after {START_TIMEOUT_S}s:\n" + self.log_tail())
            time.sleep(POLL_S)
        assert 0 < self.port < 65536
        if self.grpc:  # written before the HTTP port file: there already
            self.grpc_port = int(self.grpc_port_file.read_text().strip())
        self.wait_ready(deadline)
        return self

    def wait_ready(self, deadline=None):
        deadline = deadline or time.monotonic() + START_TIMEOUT_S
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DaemonError(f"daemon exited with {self.proc.returncode}:\n" + self.log_tail())
            try:
                r = requests.get(self.url("/readyz"), timeout=5, verify=self.verify)
                last = (r.status_code, r.text)
                if r.status_code == 200:
                    return
            except requests.RequestException as e:
                last = repr(e)
            time.sleep(POLL_S)
        self.kill()
        raise DaemonError(f"/readyz not 200 within {START_TIMEOUT_S}s (last: {last}):\n"
                          + self.log_tail())

    @property
    def socket_only(self):
        """--bind none: no TCP, no port file; ready when /readyz answers on the socket."""
        return "--bind" in self.args and self.args[self.args.index("--bind") + 1] == "none"

    def wait_unix_ready(self, deadline):
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DaemonError(f"daemon exited with {self.proc.returncode}:\n" + self.log_tail())
            try:
                status, _, body = self.unix_request("GET", "/readyz", timeout=5)
                last = (status, body)
                if status == 200:
                    return
            except OSError as e:
                last = repr(e)
            time.sleep(POLL_S)
        self.kill()
        raise DaemonError(f"/readyz on {self.unix_path} not 200 within {START_TIMEOUT_S}s (last: "
                          f"{last}):\n" + self.log_tail())

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout=None):
        timeout = timeout or 60.0 * SLOW
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise DaemonError(f"daemon did not exit within {timeout}s:\n" + self.log_tail())
        finally:
            self._log.close()
        return self.returncode

    def stop(self, timeout=None):
        """SIGTERM, wait, and check the exit code and the log: the teardown of every daemon."""
        if self.proc is None or self.returncode is not None:
            return self.returncode
        self.session.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.wait_exit(timeout)
        self.check_log()
        if rc != 0:
            raise DaemonError(f"daemon exited with {rc} after SIGTERM:\n" + self.log_tail())
        return rc

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_text(self):
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_lines_with(self, text, timeout=10):
        """The log's lines holding text, polled for: access lines reach the log within ~0.1 s."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [ln for ln in self.log_text().splitlines() if text in ln]
            if lines:
                return lines
            assert time.monotonic() < deadline, f"{text!r} not logged:\n" + self.log_tail()
            time.sleep(POLL_S)

    def log_tail(self, n=60):
        return "\n".join(self.log_text().splitlines()[-n:])

    def check_log(self):
        text = self.log_text()
        for marker in SANITIZER_MARKERS:
            if marker in text:
                i = text.index(marker)
                raise DaemonError(f"sanitizer report ({marker!r}) in {self.log_path}:\n"
                                  + text[max(0, i - 2000):i + 6000])

    # -- HTTP ----------------------------------------------------------------------------------
    @property
    def base(self):
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def url(self, path):
        return self.base + path

    def request(self, method, path, session=None, **kw):
        kw.setdefault("timeout", HTTP_TIMEOUT_S)
        kw.setdefault("verify", self.verify)
        s = session or self.session
        return s.request(method, self.url(path), **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def post(self, path, body=None, delay_ms=None, headers=None, **kw):
        h = dict(headers or {})
        if delay_ms is not None:
            h[DELAY_HEADER] = str(int(delay_ms))
        if body is not None and "data" not in kw:
            kw["data"] = json.dumps(body, allow_nan=False)
            h.setdefault("Content-Type", "application/json")
        return self.request("POST", path, headers=h, **kw)

    def unix_request(self, method, path, body=None, headers=None, timeout=None):
        """One request over --unix-socket: (status, headers, body bytes)."""
        return unix_http(self.unix_path, method, path, body, headers, timeout)

    # -- async jobs ----------------------------------------------------------------------------
    def submit(self, body, delay_ms=None, **kw):
        r = self.post("/v1/jobs", body, delay_ms=delay_ms, **kw)
        assert r.status_code == 202, (r.status_code, r.text)
        j = r.json()
        assert j["status"] == "queued", j
        assert UUID_RE.match(j["id"]), j
        assert r.headers.get("Location") == f"/v1/jobs/{j['id']}", r.headers
        return j["id"]

    def status(self, job_id, headers=None):
        r = self.get(f"/v1/jobs/{job_id}", headers=headers)
        assert r.status_code == 200, (r.status_code, r.text)
        j = r.json()
        assert j["id"] == job_id and j["status"] in JOB_STATES, j
        return j

    def wait_job(self, job_id, states=FINAL_STATES, timeout=None, headers=None):
        """Polls the status every 20 ms until it is one of states (bounded). Returns the status
        JSON and the list of distinct states seen, in order. headers: e.g. the bearer token."""
        timeout = timeout or JOB_TIMEOUT_S
        deadline = time.monotonic() + timeout
        seen = []
        while True:
            j = self.status(job_id, headers)
            if not seen or seen[-1] != j["status"]:
                seen.append(j["status"])
            if j["status"] in states:
                return j, seen
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} not in {states} after {timeout}s: {seen}")
            time.sleep(POLL_S)

    def metrics_text(self):
        r = self.get("/metrics")
        assert r.status_code == 200, r.text
        return r.text


# ---------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def daemon(tmp_path_factory):
    """The shared daemon: --workers 2 --queue-depth 64 --test-hooks --result-ttl-s 2, on a Unix
    socket too (d.unix_path)."""
    sock_dir = tempfile.mkdtemp(prefix="crunchd-s-", dir="/tmp")  # sun_path: 107 bytes at most
    d = Daemon(["--workers", str(SESSION_WORKERS), "--queue-depth", str(SESSION_QUEUE_DEPTH),
                "--test-hooks", "--result-ttl-s", str(SESSION_RESULT_TTL_S),
                "--drain-timeout-s", "10", "--unix-socket", os.path.join(sock_dir, "crunchd.sock")],
               name="session", workdir=tmp_path_factory.mktemp("session-daemon"))
    d.start()
    yield d
    d.stop()
    os.rmdir(sock_dir)  # the daemon removed its socket: an error here says it did not


@pytest.fixture
def start_daemon(tmp_path):
    """Factory: start_daemon(*flags, env={...}) -> a started Daemon, stopped (and checked) at
    teardown unless the test already stopped it."""
    yield from daemon_factory(tmp_path)


def daemon_factory(tmp_path, prefix="extra"):
    """start_daemon's body (tests/client's fixture of the same name uses it too): yields the
    factory, then stops every daemon it started and raises the first failure."""
    started = []

    def factory(*args, env=None, name=None, start=True, grpc=False):
        d = Daemon(args, env=env, name=name or f"{prefix}{len(started)}", workdir=tmp_path, grpc=grpc)
        started.append(d)
        if start:
            d.start()
        return d

    yield factory
    errors = []
    for d in started:
        if d.proc is None:
            continue
        try:
            d.stop()
        except Exception as e:  # keep stopping the others, report all
            errors.append(e)
    if errors:
        raise errors[0]


@pytest.fixture(scope="session")
def kernels(daemon):
    """{op: [kernel info dicts]} from GET /v1/kernels of the session daemon."""
    r = daemon.get("/v1/kernels")
    assert r.status_code == 200, r.text
    out = {"gemm": [], "ata": [], "histogram": []}
    for k in r.json()["kernels"]:
        out.setdefault(k["op"], []).append(k)
    return out


@pytest.fixture(scope="session")
def info(daemon):
    r = daemon.get("/v1/info")
    assert r.status_code == 200, r.text
    return r.json()


def kernels_for(kernels, op, dtype, precision="fp32"):
    """Names of the kernels of op that take dtype at precision (tf32 kernels only under tf32)."""
    return [k["name"] for k in kernels[op]
            if dtype in k["dtypes"] and (precision == "tf32" or k["precision"] != "tf32")]


# ---------------------------------------------------------------------------------------------
# matrices and numerics
# ---------------------------------------------------------------------------------------------

def rng(seed):
    return np.random.default_rng(seed)


def rand_matrix(r, rows, cols, dtype="float32"):
    return r.uniform(-1.0, 1.0, size=(rows, cols)).astype(dtype)


def mat_json(m, form="dict"):
    """A matrix in one of the two JSON forms: {"rows","cols","data"} or nested lists."""
    m = np.asarray(m)
    if form == "dict":
        return {"rows": int(m.shape[0]), "cols": int(m.shape[1]),
                "data": [float(x) for x in m.reshape(-1)]}
    assert form == "nested"
    return [[float(x) for x in row] for row in m]


def result_matrix(body, rows, cols):
    res = body["result"]
    assert res["rows"] == rows and res["cols"] == cols, (res.get("rows"), res.get("cols"))
    data = res["data"]
    assert isinstance(data, list) and len(data) == rows * cols, len(data)
    assert all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in data)
    return np.asarray(data, dtype=np.float64).reshape(rows, cols)


def gemm_ref(a, b, c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    opa = a.T if trans_a else a
    opb = b.T if trans_b else b
    out = alpha * (opa @ opb)
    if c is not None and beta != 0.0:
        out = out + beta * np.asarray(c, np.float64)
    return out


def tolerance(dtype, k, precision="fp32"):
    if precision == "tf32":
        return 2e-3 * math.sqrt(k) + 1e-3
    if dtype == "float64":
        return 1e-12 * math.sqrt(k) + 1e-14
    return 1e-5 * math.sqrt(k) + 1e-6


@contextlib.contextmanager
def triton_client(daemon):
    """NVIDIA's tritonclient.http client on the daemon's port (the tests' timeouts), closed after;
    skips the test where the package is missing."""
    tc = pytest.importorskip("tritonclient.http")
    c = tc.InferenceServerClient(f"127.0.0.1:{daemon.port}", network_timeout=HTTP_TIMEOUT_S,
                                 connection_timeout=HTTP_TIMEOUT_S)
    try:
        yield c
    finally:
        c.close()


def assert_close(got, ref, k, dtype, precision="fp32", what=""):
    """rtol scaled by sqrt(K); atol relative to max|ref| (sums of mixed signs cancel)."""
    tol = tolerance(dtype, k, precision)
    scale = float(np.max(np.abs(ref))) if np.size(ref) else 0.0
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(scale, 1e-30),
                               err_msg=f"{what} dtype={dtype} k={k} precision={precision}")


def assert_error(r, status, code, field=None, field_prefix=None):
    """The error body of the contract: {"error": {"code", "message", "field"?}} with status."""
    assert r.status_code == status, f"want {status} {code}, got {r.status_code}: {r.text[:500]}"
    assert r.headers.get("Content-Type", "").startswith("application/json"), r.headers
    body = r.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), dict), body
    e = body["error"]
    assert e.get("code") == code, f"want code {code}, got {e}"
    assert isinstance(e.get("message"), str) and e["message"], e
    if field is not None:
        assert e.get("field") == field, f"want field {field!r}, got {e}"
    if field_prefix is not None:
        assert isinstance(e.get("field"), str) and e["field"].startswith(field_prefix), \
            f"want field starting {field_prefix!r}, got {e}"
    if status in (429, 503):
        ra = r.headers.get("Retry-After")
        assert ra is not None and ra.strip().isdigit(), f"Retry-After missing/bad: {r.headers}"
    if status == 405:
        assert r.headers.get("Allow"), f"405 without Allow: {r.headers}"
    return e


def check_job_body(body, op, dtype, backend=BACKEND):
    """The common fields of a synchronous job answer."""
    assert UUID_RE.match(body["id"]), body.get("id")
    assert body["op"] == op
    assert body["backend"] == backend
    assert body["dtype"] == dtype
    assert isinstance(body["kernel"], str) and body["kernel"]
    assert isinstance(body["device"], str) and body["device"]
    t = body["timings_ms"]
    for phase in ("queue", "h2d", "kernel", "d2h", "total"):
        assert isinstance(t[phase], (int, float)) and t[phase] >= 0, t
    rate = "gbps" if op == "histogram" else "gflops"
    assert isinstance(body[rate], (int, float)) and body[rate] >= 0, body.get(rate)


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over an AF_UNIX stream socket (what curl --unix-socket does)."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def unix_http(sock_path, method, path, body=None, headers=None, timeout=None):
    """One HTTP request over a Unix socket: (status, headers dict, body bytes). A dict or list
    body goes as JSON."""
    h = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body, allow_nan=False).encode()
        h.setdefault("Content-Type", "application/json")
    conn = UnixHTTPConnection(sock_path, timeout or HTTP_TIMEOUT_S)
    try:
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def raw_exchange(port, data, timeout):
    """Sends data on a fresh connection and reads until the daemon closes it, resets it or stays
    silent for timeout seconds: what a raw HTTP exchange returned, however it ended."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def parse_server_timing(value):
    """'queue;dur=0.01, h2d;dur=0.02, ...' -> {"queue": 0.01, ...}"""
    out = {}
    for part in value.split(","):
        items = [p.strip() for p in part.split(";")]
        name = items[0]
        assert re.match(r"^[A-Za-z0-9_\-]+$", name), value
        for p in items[1:]:
            if p.startswith("dur="):
                out[name] = float(p[4:])
    return out


def new_uuid():
    return str(uuid.uuid4())
