#!/usr/bin/env python3
"""Soak test: a daemon under mixed valid and invalid load for a bounded time, watched for leaks.

Starts crunchd (CRUNCHD_BIN, --backend CRUNCHD_BACKEND), runs a few client threads that mix
valid jobs (JSON, multipart .npy, x-npy, async submit/poll/fetch, async jobs never fetched) with
hostile ones (truncated and mistyped JSON, deep nesting, wrong content types and methods, bodies
abandoned half way, 404s) and faults (hang-ups mid-body and mid-answer, stalled readers,
interrupted 1 GiB uploads; resident tensors, streams, chunked bodies, stacks and gRPC calls
from scripts/soak_objects.py; with the fault build CRUNCHD_FAULT_DEVICE_OOM_PERMILLE makes device
allocations fail), checks valid answers against NumPy, and samples every second: resident memory (/proc/PID/status VmRSS,
less the pinned request memory cuda reports as crunchd_pinned_host_bytes: a cache, not a leak),
open descriptors (/proc/PID/fd) and device memory (crunchd_device_memory_used_bytes from
/metrics). A least-squares slope over the second half (of RSS and fds: of their 10-second minima, so
requests in flight at a sample do not count; after warm-up: pools, arenas and the
auto table have settled) must stay under the thresholds; the daemon must answer every request
with a status the API defines, no valid job may be answered wrongly, RSS must return to its
post-warm-up floor once the load stops, then drain and exit 0 on SIGTERM with a clean log.

  scripts/soak.py --seconds 120            (make soak; SOAK_SECONDS=600 on the GPU machine)
Exit status 0 when it passed, 1 when a threshold or a check failed, 2 when it could not run.
"""

import argparse
import io
import json
import os
import pathlib
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

try:
    import numpy as np
    import requests
    import soak_objects
except ImportError as e:  # pragma: no cover
    print(f"soak: needs numpy and requests ({e}); make deps", file=sys.stderr)
    sys.exit(2)

ROOT = pathlib.Path(__file__).resolve().parents[1]
OK_STATUSES = {200, 201, 202, 400, 404, 405, 408, 409, 411, 413, 415, 422, 503, 504, 507}
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "LeakSanitizer")


def npy(arr):
    f = io.BytesIO()
    np.save(f, arr)
    return f.getvalue()


def multipart(parts, boundary="soakb"):
    body = b""
    for name, data in parts:
        body += (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{name}.npy"\r\n'
                 f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + b"\r\n"
    return body + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


class Daemon:
    def __init__(self, binary, backend, workdir, extra, extra_env):
        self.workdir = pathlib.Path(workdir)
        self.port_file = self.workdir / "soak.port"
        self.log_path = self.workdir / "soak.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRUNCHD_")}
        env.update(kv.split("=", 1) for kv in extra_env)
        self.grpc_port_file = self.workdir / "soak.grpc-port"
        cmd = [binary, "--port", "0", "--grpc-port", "-1", "--grpc-port-file", str(self.grpc_port_file),
               "--port-file", str(self.port_file), "--bind", "127.0.0.1",
               "--backend", backend, "--workers", "2", "--queue-depth", "64",
               "--result-ttl-s", "2", "--drain-timeout-s", "30"] + soak_objects.DAEMON_FLAGS + extra
        if self.port_file.exists():
            self.port_file.unlink()
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 120
        while not (self.port_file.exists() and self.port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("daemon did not start:\n" + self.log_path.read_text()[-3000:])
            time.sleep(0.05)
        self.port = int(self.port_file.read_text())
        self.grpc_port = int(self.grpc_port_file.read_text()) if self.grpc_port_file.exists() else None
        self.base = f"http://127.0.0.1:{self.port}"
        while requests.get(self.base + "/readyz", timeout=10).status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("daemon never became ready")
            time.sleep(0.05)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        return rc


class Load(soak_objects.ObjectLoad):
    """One client thread's mix. Each action returns the status it got (0: connection dropped
    by us on purpose)."""

    def __init__(self, base, port, seed, grpc_port=None):
        self.base, self.port, self.grpc_port = base, port, grpc_port
        self.r = random.Random(seed)
        self.rng = np.random.default_rng(seed)
        self.s = requests.Session()
        self.actions = [
            (6, self.gemm_json), (3, self.ata_json), (3, self.hist_json), (2, self.async_job),
            (1, self.async_abandoned), (2, self.gemm_multipart), (1, self.ata_npy),
            (2, self.hist_raw), (3, self.bad_json), (2, self.bad_type), (1, self.deep),
            (1, self.wrong_media), (1, self.wrong_method), (1, self.not_found),
            (1, self.half_body), (1, self.metrics), (1, self.big_raw), (1, self.big_half),
            (3, self.gemm_checked), (1, self.async_checked), (1, self.mid_answer),
            (1, self.stalled_reader), (0.2, self.giant_half),
        ] + self.object_actions()  # tensors, streams, chunked bodies, stacks, gRPC
        self.wrong = []  # valid jobs answered with a wrong result: must stay empty
        self.weights = [w for w, _ in self.actions]

    def step(self):
        _, fn = self.r.choices(self.actions, weights=self.weights)[0]
        return fn.__name__, fn()

    def post_json(self, path, obj):
        return self.s.post(self.base + path, data=json.dumps(obj),
                           headers={"Content-Type": "application/json"}, timeout=60).status_code

    def mat(self, rows, cols):
        return self.rng.uniform(-1, 1, (rows, cols)).round(4).tolist()

    def gemm_json(self):
        m, k, n = (int(x) for x in self.rng.integers(1, 48, 3))
        return self.post_json("/v1/gemm", {"a": self.mat(m, k), "b": self.mat(k, n)})

    def ata_json(self):
        return self.post_json("/v1/ata", {"a": self.mat(int(self.rng.integers(1, 40)), 16),
                                          "dtype": "float64"})

    def hist_json(self):
        return self.post_json("/v1/histogram", {"data": self.rng.integers(0, 256, 500).tolist()})

    def async_job(self):
        r = self.s.post(self.base + "/v1/jobs", data=json.dumps({"op": "ata", "a": self.mat(8, 8)}),
                        headers={"Content-Type": "application/json"}, timeout=60)
        if r.status_code != 202:
            return r.status_code
        loc = r.headers["Location"]
        for _ in range(200):
            st = self.s.get(self.base + loc, timeout=60).json()["status"]
            if st in ("done", "failed", "cancelled"):
                break
            time.sleep(0.01)
        return self.s.get(self.base + loc + "/result", timeout=60).status_code

    def async_abandoned(self):
        """Never fetched: the result must expire after --result-ttl-s, not pile up."""
        r = self.s.post(self.base + "/v1/jobs", data=json.dumps({"op": "gemm", "a": self.mat(16, 16),
                                                                   "b": self.mat(16, 16)}),
                        headers={"Content-Type": "application/json"}, timeout=60)
        return r.status_code

    def gemm_multipart(self):
        a = self.rng.random((20, 30), dtype=np.float32)
        b = self.rng.random((30, 10), dtype=np.float32)
        body, ct = multipart([("a", npy(a)), ("b", npy(b))])
        return self.s.post(self.base + "/v1/gemm", data=body, headers={"Content-Type": ct},
                           timeout=60).status_code

    def ata_npy(self):
        return self.s.post(self.base + "/v1/ata", data=npy(self.rng.random((40, 12))),
                           headers={"Content-Type": "application/x-npy"}, timeout=60).status_code

    def hist_raw(self):
        return self.s.post(self.base + "/v1/histogram", data=self.rng.bytes(4096),
                           headers={"Content-Type": "application/octet-stream"}, timeout=60).status_code

    def bad_json(self):
        text = json.dumps({"a": self.mat(4, 4), "b": self.mat(4, 4)})
        cut = self.r.randrange(0, len(text))
        return self.s.post(self.base + "/v1/gemm", data=text[:cut],
                           headers={"Content-Type": "application/json"}, timeout=60).status_code

    def bad_type(self):
        field = self.r.choice(["a", "b", "alpha", "dtype", "kernel", "trans_a"])
        body = {"a": [[1, 2]], "b": [[1], [2]]}
        body[field] = self.r.choice([None, "x", [], {}, 1.5, True])
        return self.post_json("/v1/gemm", body)

    def deep(self):
        return self.s.post(self.base + "/v1/gemm", data=b"[" * self.r.choice([1000, 5000, 50000]),
                           headers={"Content-Type": "application/json"}, timeout=60).status_code

    def wrong_media(self):
        return self.s.post(self.base + "/v1/gemm", data=b"x", headers={"Content-Type": "text/plain"},
                           timeout=60).status_code

    def wrong_method(self):
        return self.s.put(self.base + "/v1/ata", data=b"{}", timeout=60).status_code

    def not_found(self):
        return self.s.get(self.base + self.r.choice(["/v1/jobs/nope", "/nope", "/v1/jobs/x/result"]),
                          timeout=60).status_code

    def half_body(self):
        """Declares a body and hangs up half way: the daemon must free what it had."""
        body = json.dumps({"a": self.mat(30, 30), "b": self.mat(30, 30)}).encode()
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(b"POST /v1/gemm HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n"
                      + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:len(body) // 2])
        return 0

    def big_raw(self):
        """Over the 8 MiB from which cuda copies an upload to the device while it arrives."""
        size = int(self.rng.integers(9 << 20, 12 << 20))
        return self.s.post(self.base + "/v1/histogram", data=self.rng.bytes(size),
                           headers={"Content-Type": "application/octet-stream"}, timeout=60).status_code

    def big_half(self):
        """Hangs up in the middle of a big upload: its pinned block and early device copy must go."""
        size = 12 << 20
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(b"POST /v1/histogram HTTP/1.1\r\nHost: soak\r\n"
                      b"Content-Type: application/octet-stream\r\n"
                      + f"Content-Length: {size}\r\n\r\n".encode() + self.rng.bytes(size // 2))
        return 0

    def check(self, name, got, ref):
        if got.shape != ref.shape or not np.allclose(got, ref, rtol=1e-4, atol=1e-4):
            self.wrong.append(name)

    def gemm_checked(self):
        """A valid job whose answer is checked against NumPy: faults around it must not leak into it."""
        m, k, n = (int(x) for x in self.rng.integers(1, 64, 3))
        a, b = np.array(self.mat(m, k), np.float32), np.array(self.mat(k, n), np.float32)
        r = self.s.post(self.base + "/v1/gemm", json={"a": a.tolist(), "b": b.tolist()}, timeout=60)
        if r.status_code == 200:
            res = r.json()["result"]
            self.check("gemm_checked", np.array(res["data"], np.float32).reshape(res["rows"], res["cols"]),
                       a @ b)
        return r.status_code

    def async_checked(self):
        a = np.array(self.mat(int(self.rng.integers(2, 40)), 12), np.float32)
        r = self.s.post(self.base + "/v1/jobs?op=ata", data=npy(a),
                        headers={"Content-Type": "application/x-npy"}, timeout=60)
        if r.status_code != 202:
            return r.status_code
        loc = r.headers["Location"]
        for _ in range(500):
            if self.s.get(self.base + loc, timeout=60).json()["status"] in ("done", "failed", "cancelled"):
                break
            time.sleep(0.01)
        r = self.s.get(self.base + loc + "/result", headers={"Accept": "application/x-npy"}, timeout=60)
        if r.status_code == 200:
            self.check("async_checked", np.load(io.BytesIO(r.content)), a.T @ a)
        return r.status_code

    def big_answer_request(self):
        a = self.mat(384, 384)  # a ~1.5 MB JSON answer: more than the socket buffers hold
        body = json.dumps({"a": a, "b": a}).encode()
        return (b"POST /v1/gemm HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)

    def mid_answer(self):
        """Hangs up after the first KiB of a big answer."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.sendall(self.big_answer_request())
            s.recv(1024)
        return 0

    def stalled_reader(self):
        """Asks for a big answer, reads nothing for two seconds, then hangs up."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(self.big_answer_request())
            time.sleep(2)
        return 0

    def giant_half(self):
        """Declares a 1 GiB upload, sends 32 MiB of it and hangs up."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.sendall(b"POST /v1/histogram HTTP/1.1\r\nHost: soak\r\n"
                      b"Content-Type: application/octet-stream\r\n"
                      + f"Content-Length: {1 << 30}\r\n\r\n".encode())
            chunk = self.rng.bytes(1 << 20)
            for _ in range(32):
                s.sendall(chunk)
        return 0

    def metrics(self):
        return self.s.get(self.base + "/metrics", timeout=60).status_code


def proc_sample(pid):
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def scrape_memory(base):
    """(device memory used, pinned host bytes held or cached) from /metrics; NaN if unanswered."""
    try:
        text = requests.get(base + "/metrics", timeout=10).text
    except requests.RequestException:
        return float("nan"), float("nan")
    device = pinned = 0.0
    for line in text.splitlines():
        if line.startswith("crunchd_device_memory_used_bytes"):
            device += float(line.rsplit(" ", 1)[1])
        elif line.startswith("crunchd_pinned_host_bytes"):
            pinned += float(line.rsplit(" ", 1)[1])
    return device, pinned


def slope(xs, ys):
    """Least-squares slope of ys over xs."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0


def window_floors(samples, col, width=10.0):
    """(t, min) of column col over each width-second window: a leak raises the floor, while a
    request's arrays in flight at one sample (12 MiB uploads) only add noise above it."""
    out, start = [], samples[0][0] if samples else 0.0
    while True:
        w = [x for x in samples if start <= x[0] < start + width]
        if not w:
            return out
        out.append((start + width / 2, min(x[col] for x in w)))
        start += width


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 120)))
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--bin", default=os.environ.get("CRUNCHD_BIN") or str(ROOT / "build" / "crunchd"))
    ap.add_argument("--backend", default=os.environ.get("CRUNCHD_BACKEND", "cpu"))
    ap.add_argument("--max-rss-mib-per-min", type=float, default=1.0)
    ap.add_argument("--max-fds-per-min", type=float, default=0.5)
    ap.add_argument("--max-device-mib-per-min", type=float, default=1.0)
    ap.add_argument("--max-rss-return-mib", type=float, default=64.0,
                    help="RSS once idle after the load, over its post-warm-up floor")
    ap.add_argument("--daemon-arg", action="append", default=[], help="one more flag for crunchd")
    ap.add_argument("--daemon-env", action="append", default=[], metavar="KEY=VALUE",
                    help="one more environment variable for crunchd (e.g. CRUNCHD_PINNED_CACHE_MB=0: "
                         "no cached pinned blocks, so RSS growth cannot be the cache filling up)")
    args = ap.parse_args()

    workdir = tempfile.mkdtemp(prefix="crunchd-soak-")
    try:
        d = Daemon(args.bin, args.backend, workdir, args.daemon_arg, args.daemon_env)
    except (OSError, RuntimeError) as e:
        print(f"soak: {e}", file=sys.stderr)
        return 2
    print(f"soak: crunchd pid {d.proc.pid} on :{d.port} ({args.backend}), {args.threads} threads, "
          f"{args.seconds:.0f} s; log {d.log_path}", flush=True)
    stop = threading.Event()
    counts, bad, lock = {}, [], threading.Lock()

    loads = []

    def client(seed):
        load = Load(d.base, d.port, seed, d.grpc_port)
        loads.append(load)
        while not stop.is_set():
            try:
                name, status = load.step()
            except requests.RequestException as e:
                name, status = "error", repr(e)[:200]
            with lock:
                counts[status] = counts.get(status, 0) + 1
                if status != 0 and status not in OK_STATUSES:
                    bad.append((name, status))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.threads)]
    for t in threads:
        t.start()
    samples = []  # (t, rss - pinned, fds, device, rss, pinned)
    t0 = time.monotonic()
    while time.monotonic() - t0 < args.seconds:
        if d.proc.poll() is not None:
            print(f"soak: the daemon died (exit {d.proc.returncode})", file=sys.stderr)
            break
        rss, fds = proc_sample(d.proc.pid)
        device, pinned = scrape_memory(d.base)
        pinned = pinned if pinned == pinned else 0.0
        # RSS less the pinned blocks the daemon reports: the cache filling up is not a leak
        samples.append((time.monotonic() - t0, rss - pinned, fds, device, rss, pinned))
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0) % 1.0))
    stop.set()
    for t in threads:
        t.join(timeout=90)
    alive = d.proc.poll() is None
    # RSS must come back: the floor of the first 10 s after warm-up against RSS once idle again
    baseline = min((x[1] for x in samples if min(10.0, args.seconds / 4) <= x[0] < min(20.0, args.seconds / 2)),
                   default=None)
    idle_rss = None
    settle = time.monotonic() + 15
    while alive and time.monotonic() < settle:
        rss, _ = proc_sample(d.proc.pid)
        _, pinned = scrape_memory(d.base)
        idle_rss = rss - (pinned if pinned == pinned else 0.0)
        if baseline is not None and idle_rss - baseline <= args.max_rss_return_mib * 2**20:
            break
        time.sleep(0.5)
    rc = d.stop() if alive else d.proc.returncode
    log = d.log_path.read_text(errors="replace")

    half = [s for s in samples if s[0] >= args.seconds / 2]
    xs = [s[0] for s in half]
    rss_floor, fd_floor = window_floors(half, 1), window_floors(half, 2)
    rss_slope = slope([t for t, _ in rss_floor], [v for _, v in rss_floor])
    fd_slope = slope([t for t, _ in fd_floor], [v for _, v in fd_floor])
    dev = [s[3] for s in half]
    # The cpu backend reports the host's memory as its "device": other processes move it.
    dev_slope = slope(xs, dev) if args.backend != "cpu" and dev and all(v == v for v in dev) else 0.0
    total = sum(counts.values())
    print(f"soak: {total} requests ({total / max(args.seconds, 1):.0f}/s); statuses "
          + ", ".join(f"{k}:{v}" for k, v in sorted(counts.items(), key=lambda kv: str(kv[0]))))
    if samples:
        print(f"soak: RSS {samples[0][4] / 2**20:.1f} -> {samples[-1][4] / 2**20:.1f} MiB (pinned "
              f"request memory {samples[0][5] / 2**20:.1f} -> {samples[-1][5] / 2**20:.1f} MiB), fds "
              f"{samples[0][2]} -> {samples[-1][2]}, device memory {samples[-1][3] / 2**20:.1f} MiB")
    print(f"soak: slopes over the second half ({len(half)} samples; RSS and fds by their 10 s "
          f"minima; RSS less pinned request memory): RSS {rss_slope:.1f} B/s "
          f"({rss_slope * 60 / 2**20:.3f} MiB/min), fds {fd_slope:.4f}/s, device {dev_slope:.1f} B/s")

    wrong = [w for load in loads for w in load.wrong]
    if baseline is not None and idle_rss is not None:
        print(f"soak: RSS less pinned: {baseline / 2**20:.1f} MiB after warm-up, {idle_rss / 2**20:.1f} MiB "
              f"idle after the load")
    failures = []
    if wrong:
        failures.append(f"{len(wrong)} valid jobs answered wrongly: {wrong[:5]}")
    if baseline is not None and idle_rss is not None and idle_rss - baseline > args.max_rss_return_mib * 2**20:
        failures.append(f"RSS did not return: {(idle_rss - baseline) / 2**20:.1f} MiB over its baseline "
                        f"> {args.max_rss_return_mib}")
    if not alive:
        failures.append("the daemon died during the soak")
    if rc != 0:
        failures.append(f"exit status {rc} after SIGTERM (want 0)")
    if len(half) < 5:
        failures.append("too few samples for a slope")
    if rss_slope * 60 / 2**20 > args.max_rss_mib_per_min:
        failures.append(f"RSS grows {rss_slope * 60 / 2**20:.3f} MiB/min > {args.max_rss_mib_per_min}")
    if fd_slope * 60 > args.max_fds_per_min:
        failures.append(f"open fds grow {fd_slope * 60:.2f}/min > {args.max_fds_per_min}")
    if dev_slope * 60 / 2**20 > args.max_device_mib_per_min:
        failures.append(f"device memory grows {dev_slope * 60 / 2**20:.3f} MiB/min")
    if bad:
        failures.append(f"{len(bad)} answers outside the API's statuses, e.g. {bad[:5]}")
    for m in SANITIZER_MARKERS:
        if m in log:
            failures.append(f"sanitizer report in {d.log_path}: {m}")
    for f in failures:
        print(f"soak: FAIL: {f}", file=sys.stderr)
    if not failures:
        print("soak: passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
