#!/usr/bin/env python3
"""End-to-end cost of big jobs over HTTP against their floors (make bench-e2e, on a GPU machine).

1. GEMM 4096² FP32 sent as two .npy files with curl (multipart), answered as .npy.
   floor = input bytes / pinned H2D rate + output bytes / pinned D2H rate + cuBLAS kernel time
   (rates from build/bench/copy in the same run; kernel time from the daemon's Server-Timing).
   transport floor = the same curl command against a loopback sink that reads the form and
   answers 64 MiB + kernel time: what any HTTP service on this machine pays before computing;
   socket floor = the same bytes over one bare loopback TCP socket (no HTTP, no files) + kernel.
2. Histogram of 512 MiB of bytes uploaded raw over loopback.
   floor = bytes / loopback transfer rate (curl to the sink) + kernel time.
3. Both again on a daemon that does not copy to the device during the upload (the overlap's gain),
   and the daemon's peak RSS growth over a 1 GiB raw upload.
4. Local clients (issue 15):
   a. the same GEMM through system shared memory (/v1's shm operands and output: a, b and the
      result in a registered region, the request a few hundred bytes) against the pinned floor
      of 1 (the region is page-locked at registration, so its copies run at the pinned rate);
   b. the 512 MiB histogram through system shared memory against pinned H2D + kernel;
   c. the .npy GEMM of 1 with curl --unix-socket against its own floor, the same bytes over one
      bare Unix socket + kernel, and against the TCP row;
   d. the same GEMM through CUDA shared memory (/v2: a, b and c in this process's device memory,
      opened by the daemon from IPC handles; no copy at all) against cuBLAS alone: target
      e2e <= 1.2 x kernel + 0.5 ms (cuda only; needs cuda-python for tritonclient's utilities).
5. Stacks of small GEMMs (shared memory, .npy) and resident tensors (a batch times a resident
   matrix, 64 connections of it, a GEMM -> AtA chain on the device): scripts/e2e_objects.py.

Prints the ratios (target <= 1.5) and writes a CSV.
  scripts/bench_e2e.py BUILD_DIR OUT_CSV        (CRUNCHD_BIN overrides BUILD_DIR/crunchd;
                                                 CRUNCHD_E2E_ARGS adds daemon flags,
                                                 CRUNCHD_E2E_ENV="K=V ..." daemon variables)
  CRUNCHD_E2E_ONLY=unix,shm scripts/bench_e2e.py BUILD_DIR OUT_CSV   only those rows
  CRUNCHD_E2E_SMALL=1 scripts/bench_e2e.py BUILD_DIR [OUT_CSV]
      the same code end to end at small sizes (GEMM 256², 8 MiB histogram, 64 MiB RSS upload) on
      the cpu backend, with the kernel picked by auto and host memcpy standing in for the pinned
      copy rates: to check the script anywhere; its figures mean nothing (default CSV
      BUILD_DIR/e2e-small.csv, never bench/results).
"""
import http.client
import importlib
import io
import json
import os
import pathlib
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import requests
from multiprocessing import shared_memory

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "http"))
from conftest import Daemon  # noqa: E402  (the tests' daemon runner: free port, readyz, drain)
sys.path.insert(0, str(ROOT / "scripts"))
import bench_load  # noqa: E402  (its multipart body, as curl -F builds it)

REPS = 5
SMALL = os.environ.get("CRUNCHD_E2E_SMALL", "") not in ("", "0")
# CRUNCHD_E2E_ONLY=unix,shm,...: only those rows (gemm, hist, rss, shm, unix, cuda_shm, stack, tensor), one pass
ONLY = {r for r in os.environ.get("CRUNCHD_E2E_ONLY", "").split(",") if r}


def wanted(row):
    return not ONLY or row in ONLY


class Sizes:
    """What the rows move and which kernels they name: the issue's sizes on a GPU, small ones
    on the cpu backend (CRUNCHD_E2E_SMALL)."""
    gemm_n = 256 if SMALL else 4096
    hist_bytes = (8 << 20) if SMALL else (512 << 20)
    rss_bytes = (64 << 20) if SMALL else (1 << 30)
    gemm_kernel = "auto" if SMALL else "cublas"
    hist_kernel = "auto" if SMALL else "smem-vec"


def timing(headers):
    out = {}
    for part in headers.get("Server-Timing", "").split(","):
        m = re.match(r"\s*(\w+);dur=([0-9.]+)", part)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def curl(args):
    """Runs curl, returns (seconds, headers dict) from its own timer and a header dump."""
    with tempfile.NamedTemporaryFile("r") as hdr:
        cmd = ["curl", "-sS", "-f", "-o", "/dev/null", "-D", hdr.name, "-w", "%{time_total}"] + args
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        headers = {}
        for line in open(hdr.name):
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip()] = v.strip()
        return float(out), headers


def sink_server(unix_path=None):
    """A loopback HTTP sink: reads a body of Content-Length bytes, answers 204, or 200 with the
    number of zero bytes the path asks for (/reply/N). Measures the loopback transfer rates the
    floors use, with the same client and the same bytes as the real requests. On TCP (returns
    the port) or, given unix_path, on a Unix socket there (returns the path)."""
    srv = socket.socket(socket.AF_UNIX if unix_path else socket.AF_INET)
    if unix_path:
        srv.bind(unix_path)
    else:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve():
        buf = bytearray(8 << 20)
        view = memoryview(buf)
        while True:
            conn, _ = srv.accept()
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(65536)
                hdr, rest = head.split(b"\r\n\r\n", 1)
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", hdr).group(1)) - len(rest)
                while length > 0:
                    length -= conn.recv_into(view, min(len(buf), length))
                m = re.match(rb"POST /reply/(\d+)", hdr)
                reply = int(m.group(1)) if m else 0
                conn.sendall(b"HTTP/1.1 %s\r\nContent-Length: %d\r\n\r\n"
                             % (b"200 OK" if reply else b"204 No Content", reply))
                for _ in range(reply // len(buf)):
                    conn.sendall(view)
                conn.sendall(view[: reply % len(buf)])

    threading.Thread(target=serve, daemon=True).start()
    return unix_path or srv.getsockname()[1]


def raw_socket_gbps(family=socket.AF_INET, size=512 << 20, kept=False):
    """One bare stream socket, no HTTP and no files: 8 MiB sends and receives. Loopback TCP, or a
    Unix socket bound in a temporary directory (as the daemon's): the best any client could hope
    to move bytes to a daemon on this machine that way. The receiver overwrites one 8 MiB buffer,
    which stays in the CPU's caches; kept: it keeps every byte, in a buffer of size (touched
    first), as a server must keep a request's operands: those writes reach memory."""
    tmp = tempfile.mkdtemp(prefix="crunchd-e2e-", dir="/tmp") if family == socket.AF_UNIX else None
    srv = socket.socket(family, socket.SOCK_STREAM)
    srv.bind(os.path.join(tmp, "floor.sock") if tmp else ("127.0.0.1", 0))
    srv.listen(1)
    done = threading.Event()

    def receive():
        conn, _ = srv.accept()
        view, left = memoryview(bytearray(8 << 20)), size
        while left > 0 and not kept:
            left -= conn.recv_into(view, min(len(view), left))
        while left > 0:
            left -= conn.recv_into(keep[size - left:], min(8 << 20, left))
        conn.close()
        done.set()

    keep = memoryview(np.ones(size, np.uint8)) if kept else None
    threading.Thread(target=receive, daemon=True).start()
    chunk = memoryview(bytes(8 << 20))
    c = socket.socket(family, socket.SOCK_STREAM)
    c.connect(srv.getsockname())
    with c:
        t0 = time.perf_counter()
        for at in range(0, size, len(chunk)):
            c.sendall(chunk[:min(len(chunk), size - at)])
        done.wait()
        secs = time.perf_counter() - t0
    srv.close()
    if tmp:
        os.unlink(os.path.join(tmp, "floor.sock"))
        os.rmdir(tmp)
    return size / secs / 1e9


def raw_tcp_gbps(size=512 << 20):
    return raw_socket_gbps(socket.AF_INET, size)


def raw_unix_gbps(size=512 << 20, kept=False):
    return raw_socket_gbps(socket.AF_UNIX, size, kept)


def copy_rates(build):
    if SMALL:  # no device: host memcpy stands in for both directions
        src = np.ones(64 << 20, np.uint8)
        dst = np.empty_like(src)
        t0 = time.perf_counter()
        for _ in range(4):
            np.copyto(dst, src)
        gbps = 4 * src.nbytes / (time.perf_counter() - t0) / 1e9
        return gbps, gbps
    exe = next((p for p in (build / "bench" / "copy", build / "bin" / "copy") if p.exists()), build / "bench" / "copy")
    out = subprocess.run([str(exe), "256"], check=True, capture_output=True,  # a build, or a device bundle
                         text=True).stdout
    vals = dict(kv.split("=") for kv in out.split())
    return float(vals["h2d_gbps"]), float(vals["d2h_gbps"])


def gemm_operands(n):
    rng = np.random.default_rng(1)
    return rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)


def check_gemm(c, a, b):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.abs(c - ref).max() / np.abs(ref).max()
    assert err < 1e-4, f"GEMM result wrong: max rel error {err}"


def bench_gemm(d, tmp, h2d_gbps, d2h_gbps, sink_port):
    n = Sizes.gemm_n
    a, b = gemm_operands(n)
    np.save(tmp / "a.npy", a)
    np.save(tmp / "b.npy", b)
    url = f"{d.base}/v1/gemm?kernel={Sizes.gemm_kernel}"
    args = ["-F", f"a=@{tmp}/a.npy", "-F", f"b=@{tmp}/b.npy", "-H", "Accept: application/x-npy", "-H", "Expect:", url]
    curl(args)  # warm-up: pools, pinned staging, cuBLAS heuristics
    runs = [curl(args) for _ in range(REPS)]
    sink = [curl(args[:-1] + [f"http://127.0.0.1:{sink_port}/reply/{n * n * 4 + 128}"])[0]
            for _ in range(REPS)]
    # correctness of what came back, once
    subprocess.run(["curl", "-sS", "-f", "-o", str(tmp / "c.npy")] + args[:-1] + [url], check=True)
    check_gemm(np.load(tmp / "c.npy"), a, b)
    total_s = statistics.median(r[0] for r in runs)
    kernel_ms = statistics.median(timing(r[1]).get("kernel", 0.0) for r in runs)
    in_bytes, out_bytes = 2 * a.nbytes, n * n * 4
    floor_s = in_bytes / (h2d_gbps * 1e9) + out_bytes / (d2h_gbps * 1e9) + kernel_ms / 1e3
    phases = {k: statistics.median(timing(r[1]).get(k, 0.0) for r in runs) for k in ("receive", "queue", "h2d", "d2h", "total")}
    transport_s = statistics.median(sink) + kernel_ms / 1e3
    tcp_gbps = statistics.median(raw_tcp_gbps() for _ in range(3))
    socket_s = (in_bytes + out_bytes) / (tcp_gbps * 1e9) + kernel_ms / 1e3
    return {"case": f"gemm{n}_npy", "bytes": in_bytes + out_bytes, "e2e_ms": total_s * 1e3,
            "floor_ms": floor_s * 1e3, "ratio": total_s / floor_s, "kernel_ms": kernel_ms,
            "transport_floor_ms": transport_s * 1e3, "ratio_transport": total_s / transport_s,
            "raw_tcp_gbps": tcp_gbps, "socket_floor_ms": socket_s * 1e3,
            **{f"{k}_ms": v for k, v in phases.items()}}


def bench_hist(d, tmp, sink_port):
    size = Sizes.hist_bytes
    path = tmp / "hist.bin"
    path.write_bytes(np.random.default_rng(2).integers(0, 256, size, dtype=np.uint8).tobytes())
    raw = ["--data-binary", f"@{path}", "-H", "Content-Type: application/octet-stream", "-H", "Expect:"]
    sink = [curl(raw + [f"http://127.0.0.1:{sink_port}/"])[0] for _ in range(REPS)]
    loop_gbps = size / statistics.median(sink) / 1e9
    url = f"{d.base}/v1/histogram?kernel={Sizes.hist_kernel}"
    curl(raw + [url])
    runs = [curl(raw + [url]) for _ in range(REPS)]
    total_s = statistics.median(r[0] for r in runs)
    kernel_ms = statistics.median(timing(r[1]).get("kernel", 0.0) for r in runs)
    floor_s = size / (loop_gbps * 1e9) + kernel_ms / 1e3
    return {"case": f"hist{size >> 20}MiB_raw", "bytes": size, "e2e_ms": total_s * 1e3, "floor_ms": floor_s * 1e3,
            "ratio": total_s / floor_s, "kernel_ms": kernel_ms, "loopback_gbps": loop_gbps}


def vm_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) << 10 for l in f if l.startswith("VmHWM:"))


def bench_rss(d, tmp):
    """Peak RSS growth of the daemon over one 1 GiB raw histogram upload (target ~1.2x); curl
    streams it (-T: --data-binary would hold the whole file in memory, and refuses 1 GiB)."""
    size = Sizes.rss_bytes
    path = tmp / "big.bin"
    path.write_bytes(np.random.default_rng(3).integers(0, 256, size, dtype=np.uint8).tobytes())
    before = vm_hwm(d.proc.pid)
    secs, _ = curl(["-T", str(path), "-X", "POST", "-H", "Content-Type: application/octet-stream",
                    "-H", "Expect:", f"{d.base}/v1/histogram"])
    grew = vm_hwm(d.proc.pid) - before
    path.unlink()
    return {"case": f"hist{size >> 20}MiB_rss", "bytes": size, "e2e_ms": secs * 1e3, "rss_growth_mib": grew / 2**20,
            "ratio": grew / size}


class Region:
    """A POSIX shared-memory object registered whole as one region: what a local client without
    a KServe library sets up once (system shared memory, /v1's shm operands)."""

    def __init__(self, d, name, size):
        self.d, self.name = d, name
        self.mem = shared_memory.SharedMemory(create=True, size=size)
        r = requests.post(d.url(f"/v2/systemsharedmemory/region/{name}/register"),
                          json={"key": "/" + self.mem.name, "byte_size": size}, timeout=600)
        assert r.status_code == 200, r.text  # on cuda: page-locked here, once

    def array(self, dtype, shape, offset=0):
        return np.ndarray(shape, dtype, self.mem.buf, offset=offset)

    def close(self):
        requests.post(self.d.url(f"/v2/systemsharedmemory/region/{self.name}/unregister"), timeout=600)
        self.mem.close()
        self.mem.unlink()


def timed_posts(session, url, body):
    """REPS timed POSTs after a warm-up: (median seconds, the last answer's JSON)."""
    r = session.post(url, json=body, timeout=600)
    assert r.status_code == 200, r.text
    runs = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        r = session.post(url, json=body, timeout=600)
        runs.append((time.perf_counter() - t0, r))
        assert r.status_code == 200, r.text
    return statistics.median(t for t, _ in runs), [r.json() for _, r in runs]


def median_timing(answers, phase):
    return statistics.median(a["timings_ms"][phase] for a in answers)


def bench_gemm_shm(d, h2d_gbps, d2h_gbps):
    """4a: the GEMM with a, b and the result in a registered region; the request is ~300 bytes
    of JSON, so what is left is the copies from and to the (page-locked) region and the kernel."""
    n = Sizes.gemm_n
    a, b = gemm_operands(n)
    region = Region(d, "e2e-gemm", 3 * a.nbytes)
    try:
        region.array(np.float32, (n, n))[...] = a
        region.array(np.float32, (n, n), a.nbytes)[...] = b
        op = lambda off: {"shm": {"region": region.name, "offset": off}, "shape": [n, n], "dtype": "float32"}
        body = {"a": op(0), "b": op(a.nbytes), "kernel": Sizes.gemm_kernel,
                "output": {"shm": {"region": region.name, "offset": 2 * a.nbytes}}}
        with requests.Session() as s:
            total_s, answers = timed_posts(s, d.url("/v1/gemm"), body)
        check_gemm(region.array(np.float32, (n, n), 2 * a.nbytes), a, b)
    finally:
        region.close()
    kernel_ms = median_timing(answers, "kernel")
    in_bytes, out_bytes = 2 * a.nbytes, a.nbytes
    floor_s = in_bytes / (h2d_gbps * 1e9) + out_bytes / (d2h_gbps * 1e9) + kernel_ms / 1e3
    return {"case": f"gemm{n}_shm", "bytes": in_bytes + out_bytes, "e2e_ms": total_s * 1e3,
            "floor_ms": floor_s * 1e3, "ratio": total_s / floor_s, "kernel_ms": kernel_ms,
            **{f"{k}_ms": median_timing(answers, k) for k in ("receive", "queue", "h2d", "d2h", "total")}}


def bench_hist_shm(d, h2d_gbps):
    """4b: the histogram's bytes in a registered region: pinned H2D + kernel is its floor."""
    size = Sizes.hist_bytes
    region = Region(d, "e2e-hist", size + 256 * 8)
    try:
        data = region.array(np.uint8, (size,))
        data[...] = np.random.default_rng(2).integers(0, 256, size, dtype=np.uint8)
        body = {"data": {"shm": {"region": region.name}, "shape": [size], "dtype": "uint8"},
                "kernel": Sizes.hist_kernel, "output": {"shm": {"region": region.name, "offset": size}}}
        with requests.Session() as s:
            total_s, answers = timed_posts(s, d.url("/v1/histogram"), body)
        counts = region.array(np.uint64, (256,), size)
        assert (counts == np.bincount(data, minlength=256)).all(), "histogram result wrong"
    finally:
        region.close()
    kernel_ms = median_timing(answers, "kernel")
    floor_s = size / (h2d_gbps * 1e9) + kernel_ms / 1e3
    return {"case": f"hist{size >> 20}MiB_shm", "bytes": size, "e2e_ms": total_s * 1e3,
            "floor_ms": floor_s * 1e3, "ratio": total_s / floor_s, "kernel_ms": kernel_ms,
            **{f"{k}_ms": median_timing(answers, k) for k in ("receive", "queue", "h2d", "total")}}


ANSWER_BUF = bytearray()


def post_unix_bare(path, target, body, ctype):
    return post_bare(socket.AF_UNIX, path, target, body, ctype)


def post_bare(family, address, target, body, ctype):
    """One HTTP/1.1 POST over a Unix socket written as the floor's bare transfer is: 8 MiB
    sends, the answer received straight into a buffer kept across calls, as the floor's
    receiver keeps its own (a fresh 64 MiB buffer costs the client ~40 ms of page faults on an
    H200 machine: answers measured 52 ms in a new one, 11 ms in a reused one). Returns
    (seconds, headers, answer bytes)."""
    head = (f"POST {target} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\nAccept: application/x-npy\r\n\r\n").encode()
    view = memoryview(body)
    with socket.socket(family, socket.SOCK_STREAM) as c:
        c.connect(address)
        t0 = time.perf_counter()
        c.sendall(head)
        for at in range(0, len(view), 8 << 20):
            c.sendall(view[at:at + (8 << 20)])
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = c.recv(65536)
            assert chunk, "bare Unix-socket POST: the daemon closed before answering"
            got += chunk
        hdr, _, first = got.partition(b"\r\n\r\n")
        lines = hdr.decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        size = int(headers.get("Content-Length", "0"))
        if len(ANSWER_BUF) < size:
            ANSWER_BUF[:] = b"\1" * size  # touched before the clock starts next time
        out = memoryview(ANSWER_BUF)[:size]
        out[:len(first)] = first
        at = len(first)
        while at < size:
            n = c.recv_into(out[at:], size - at)
            assert n, "bare Unix-socket POST: the answer ended early"
            at += n
        secs = time.perf_counter() - t0
    assert lines[0].split()[1] == "200", f"bare Unix-socket POST answered {lines[0]}"
    return secs, headers, bytes(out)


def direct_served(d, target, body, ctype):
    """Whether the daemon read this upload on the Unix socket itself (--direct-min-kb) or
    libmicrohttpd did."""
    count = lambda: int(re.search(r'^crunchd_direct_requests_total\{transport="unix"\} (\d+)', d.metrics_text(), re.M)[1])  # noqa: E731
    before = count()
    post_unix_bare(d.unix_path, target, body, ctype)
    return count() > before


def bench_gemm_unix(d, tmp, tcp_row):
    """4c: the .npy GEMM of row 1 with curl --unix-socket; its floor is the same bytes over one
    bare Unix socket + the kernel, and the TCP row is the comparison. Two more figures split the
    gap between client and daemon: the same curl into a bare Unix-socket sink (curl's own cost,
    as the TCP row's transport floor), and the same request written by a client that sends as
    the floor does (8 MiB writes of a body already in memory): the daemon's own cost."""
    n = Sizes.gemm_n
    a, b = gemm_operands(n)
    args = ["--unix-socket", d.unix_path, "-F", f"a=@{tmp}/a.npy", "-F", f"b=@{tmp}/b.npy", "-H",
            "Accept: application/x-npy", "-H", "Expect:", f"http://localhost/v1/gemm?kernel={Sizes.gemm_kernel}"]
    curl(args)
    runs = [curl(args) for _ in range(REPS)]
    subprocess.run(["curl", "-sS", "-f", "-o", str(tmp / "c_unix.npy")] + args, check=True)
    check_gemm(np.load(tmp / "c_unix.npy"), a, b)
    sink = sink_server(os.path.join(os.path.dirname(d.unix_path), "sink.sock"))
    sink_args = args[:-1] + ["--unix-socket", sink, f"http://localhost/reply/{n * n * 4 + 128}"]
    curl_sink_s = statistics.median(curl(sink_args)[0] for _ in range(REPS))
    body = bench_load.multipart({"a": a, "b": b})
    ctype = f"multipart/form-data; boundary={bench_load.BOUNDARY}"
    # the bare client's own floor: the same request and answer sizes against that sink, which
    # receives and answers from one reused 8 MiB buffer (as the raw floor's ends do)
    post_bare(socket.AF_UNIX, sink, f"/reply/{n * n * 4 + 128}", body, ctype)
    bare_sink_s = statistics.median(post_bare(socket.AF_UNIX, sink, f"/reply/{n * n * 4 + 128}", body, ctype)[0]
                                    for _ in range(REPS))
    os.unlink(sink)
    target = f"/v1/gemm?kernel={Sizes.gemm_kernel}"
    post_unix_bare(d.unix_path, target, body, ctype)
    bare = [post_unix_bare(d.unix_path, target, body, ctype) for _ in range(REPS)]
    post_bare(socket.AF_INET, ("127.0.0.1", d.port), target, body, ctype)
    bare_tcp = [post_bare(socket.AF_INET, ("127.0.0.1", d.port), target, body, ctype) for _ in range(REPS)]
    check_gemm(np.load(io.BytesIO(bare[0][2])), a, b)
    total_s = statistics.median(r[0] for r in runs)
    kernel_ms = statistics.median(timing(r[1]).get("kernel", 0.0) for r in runs)
    in_bytes, out_bytes = 2 * a.nbytes, a.nbytes
    unix_gbps = statistics.median(raw_unix_gbps() for _ in range(3))
    kept_gbps = statistics.median(raw_unix_gbps(in_bytes, kept=True) for _ in range(3))
    floor_s = (in_bytes + out_bytes) / (unix_gbps * 1e9) + kernel_ms / 1e3
    # the operands kept whole (as the daemon must), the answer as the floor's client reads it
    kept_floor_s = in_bytes / (kept_gbps * 1e9) + out_bytes / (unix_gbps * 1e9) + kernel_ms / 1e3
    bare_s = statistics.median(r[0] for r in bare)
    phases = {k: statistics.median(timing(r[1]).get(k, 0.0) for r in runs) for k in ("receive", "queue", "h2d", "d2h", "total")}
    return {"case": f"gemm{n}_npy_unix", "bytes": in_bytes + out_bytes, "e2e_ms": total_s * 1e3,
            "floor_ms": floor_s * 1e3, "ratio": total_s / floor_s, "kernel_ms": kernel_ms,
            "raw_unix_gbps": unix_gbps, "tcp_e2e_ms": tcp_row["e2e_ms"],
            "ratio_vs_tcp": total_s * 1e3 / tcp_row["e2e_ms"],
            "curl_sink_floor_ms": curl_sink_s * 1e3 + kernel_ms, "ratio_curl_floor": total_s / (curl_sink_s + kernel_ms / 1e3),
            "bare_client_ms": bare_s * 1e3, "ratio_bare_client": bare_s / floor_s,
            "bare_sink_floor_ms": (bare_sink_s + kernel_ms / 1e3) * 1e3,
            "ratio_bare_sink_floor": bare_s / (bare_sink_s + kernel_ms / 1e3),
            "bare_client_tcp_ms": statistics.median(r[0] for r in bare_tcp) * 1e3,
            "raw_unix_kept_gbps": kept_gbps, "direct": direct_served(d, target, body, ctype), "kept_floor_ms": kept_floor_s * 1e3,
            "ratio_bare_kept_floor": bare_s / kept_floor_s,
            "bare_receive_ms": statistics.median(timing(r[1]).get("receive", 0.0) for r in bare),
            **{f"{k}_ms": v for k, v in phases.items()}}


def bench_gemm_cuda_shm(d):
    """4d: a, b and the result in device memory this process allocated and exported; the
    request is ~600 bytes of JSON and nothing is copied: e2e - kernel is the service's cost."""
    import tritonclient.utils.cuda_shared_memory as cshm
    n = Sizes.gemm_n
    a, b = gemm_operands(n)
    h = cshm.create_shared_memory_region("e2e-cuda", 3 * a.nbytes, 0)
    cshm.set_shared_memory_region(h, [a, b])
    reg = {"raw_handle": {"b64": cshm.get_raw_handle(h).decode()}, "device_id": 0, "byte_size": 3 * a.nbytes}
    r = requests.post(d.url("/v2/cudasharedmemory/region/e2e-cuda/register"), json=reg, timeout=600)
    assert r.status_code == 200, r.text

    def tensor(name, off):
        return {"name": name, "shape": [n, n], "datatype": "FP32",
                "parameters": {"shared_memory_region": "e2e-cuda", "shared_memory_offset": off,
                               "shared_memory_byte_size": a.nbytes}}

    body = {"inputs": [tensor("a", 0), tensor("b", a.nbytes)], "parameters": {"kernel": "cublas"},
            "outputs": [{"name": "c", "parameters": {"shared_memory_region": "e2e-cuda",
                                                     "shared_memory_offset": 2 * a.nbytes,
                                                     "shared_memory_byte_size": a.nbytes}}]}
    # The service's whole allowance here is 0.5 ms, about what one requests.Session.post costs in
    # Python on the GPU machine: the request goes out through http.client on one kept-alive
    # connection instead (the body encoded once), as a C client would send it.
    payload = json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=600)

    def post():
        conn.request("POST", "/v2/models/gemm/infer", body=payload, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        text = r.read()
        assert r.status == 200, text
        return r.headers

    try:
        post()
        runs = []
        for _ in range(3 * REPS):
            t0 = time.perf_counter()
            headers = post()
            runs.append((time.perf_counter() - t0, timing(headers)))
        conn.close()
        whole = cshm.get_contents_as_numpy(h, np.uint8, [3 * a.nbytes])  # no offset in the utilities
        check_gemm(whole[2 * a.nbytes:].view(np.float32).reshape(n, n), a, b)
    finally:
        requests.post(d.url("/v2/cudasharedmemory/region/e2e-cuda/unregister"), timeout=600)
        cshm.destroy_shared_memory_region(h)
    total_s = statistics.median(t for t, _ in runs)
    phases = {k: statistics.median(t.get(k, 0.0) for _, t in runs) for k in ("receive", "queue", "h2d", "kernel", "d2h", "total")}
    kernel_ms = phases.pop("kernel")
    floor_ms = 1.2 * kernel_ms + 0.5
    return {"case": f"gemm{n}_cuda_shm", "bytes": 3 * a.nbytes, "e2e_ms": total_s * 1e3, "floor_ms": floor_ms,
            "ratio": total_s * 1e3 / floor_ms, "kernel_ms": kernel_ms, "overhead_ms": total_s * 1e3 - kernel_ms,
            **{f"{k}_ms": v for k, v in phases.items()}}


def cuda_shm_usable():
    try:
        importlib.import_module("tritonclient.utils.cuda_shared_memory")  # needs cuda-python
        return not SMALL
    except Exception as e:
        print(f"gemm_cuda_shm: skipped ({e})")
        return False


def objects_rows(d, tmp, h2d, d2h):
    """Stacks and resident tensors (scripts/e2e_objects.py), when wanted."""
    if not (wanted("stack") or wanted("tensor")):
        return []
    import e2e_objects
    tcp_gbps = statistics.median(raw_tcp_gbps() for _ in range(3))
    rows = e2e_objects.stack_rows(d, tmp, h2d, d2h, tcp_gbps) if wanted("stack") else []
    return rows + (e2e_objects.tensor_rows(d, tmp, tcp_gbps) if wanted("tensor") else [])


def write_csv(rows, out_csv):
    """rows ({case, figure: value}) as a CSV of every figure any row has; returns their names."""
    keys = sorted({k for r in rows for k in r} - {"case"})
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    with open(out_csv, "w") as f:
        f.write("case," + ",".join(keys) + "\n")
        for r in rows:
            f.write(r["case"] + "," + ",".join(f"{r.get(k, '')}" for k in keys) + "\n")
    return keys


def main():
    build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build").resolve()
    default_csv = build / "e2e-small.csv" if SMALL else ROOT / "bench" / "results" / "e2e.csv"
    out_csv = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else default_csv)
    if SMALL and (ROOT / "bench" / "results") in out_csv.resolve().parents:
        print(f"CRUNCHD_E2E_SMALL: not overwriting {out_csv} with small figures; writing {default_csv}")
        out_csv = default_csv
    os.environ.setdefault("CRUNCHD_BIN", str(build / "crunchd"))
    import conftest
    conftest.BIN = os.environ["CRUNCHD_BIN"]
    conftest.BACKEND = "cpu" if SMALL else os.environ.get("CRUNCHD_BACKEND", "cuda")
    h2d, d2h = copy_rates(build)
    print(f"{'host memcpy (cpu stand-in for the pinned rates)' if SMALL else 'pinned copy rates'}: "
          f"H2D {h2d:.1f} GB/s, D2H {d2h:.1f} GB/s")
    # room for the shared-memory rows' regions (a 4096² GEMM's three matrices, 512 MiB of bytes)
    flags = ["--workers", "2", "--max-body-mb", "2048", "--shm-max-mb", "2048", "--shm-client-max-mb", "2048"] + \
        os.environ.get("CRUNCHD_E2E_ARGS", "").split()
    rows = []
    sock_dir = tempfile.mkdtemp(prefix="crunchd-e2e-", dir="/tmp")  # sun_path: 107 bytes at most
    with tempfile.TemporaryDirectory() as t:
        tmp = pathlib.Path(t)
        sink = sink_server()
        # the daemon as shipped (TCP and a Unix socket), then without copying to the device
        # during the upload: the difference is what that overlap saves (cuda only)
        # CRUNCHD_E2E_ENV="K=V ...": the daemon's tuning variables for the first pass (the daemon
        # runner passes none of this process's CRUNCHD_* on), e.g. CRUNCHD_SINK_MIN_MB=0
        first = dict(kv.split("=", 1) for kv in os.environ.get("CRUNCHD_E2E_ENV", "").split())
        passes = (("", first),) if SMALL or ONLY else (("", first), ("_noprefetch", {"CRUNCHD_PREFETCH_MIN_MB": "0"}))
        for suffix, env in passes:
            unix = [] if suffix else ["--unix-socket", os.path.join(sock_dir, "crunchd.sock")]
            d = Daemon(flags + unix, env=env, name="bench-e2e" + suffix, host_path=True)
            d.start()
            try:
                gemm = bench_gemm(d, tmp, h2d, d2h, sink)  # the unix row compares with it
                picked = [gemm] if wanted("gemm") else []
                picked += [bench_hist(d, tmp, sink)] if wanted("hist") else []
                rows += [{**r, "case": r["case"] + suffix} for r in picked]
                if not suffix:
                    rows += [bench_rss(d, tmp)] if wanted("rss") else []
                    rows += [bench_gemm_shm(d, h2d, d2h), bench_hist_shm(d, h2d)] if wanted("shm") else []
                    rows += [bench_gemm_unix(d, tmp, gemm)] if wanted("unix") else []
                    if wanted("cuda_shm") and cuda_shm_usable():
                        rows.append(bench_gemm_cuda_shm(d))
                    rows += objects_rows(d, tmp, h2d, d2h)
            finally:
                d.stop()
    os.rmdir(sock_dir)
    keys = write_csv(rows, out_csv)
    import e2e_objects
    for r in rows:
        if line := e2e_objects.describe(r):
            print(line)
            continue
        if "rss_growth_mib" in r:
            print(f"{r['case']}: peak RSS grew {r['rss_growth_mib']:.0f} MiB for a "
                  f"{r['bytes'] >> 20} MiB upload -> {r['ratio']:.2f}x the body (target ~1.2)")
            continue
        extra = ", ".join(f"{k}={r[k]:.2f}" for k in keys if k.endswith("_ms") or k.endswith("gbps") if k in r)
        print(f"{r['case']}: e2e {r['e2e_ms']:.1f} ms vs floor {r['floor_ms']:.1f} ms -> "
              f"ratio {r['ratio']:.2f} (target <= {1.1 if r['case'].endswith('_unix') else 1.5})  [{extra}]")
        if "transport_floor_ms" in r:
            print(f"{r['case']}: vs the transport floor {r['transport_floor_ms']:.1f} ms (the same "
                  f"curl against a sink + kernel) -> ratio {r['ratio_transport']:.2f}; bare loopback "
                  f"TCP ({r['raw_tcp_gbps']:.1f} GB/s, no HTTP, no files) alone needs "
                  f"{r['socket_floor_ms']:.1f} ms for these bytes + kernel")
        if r["case"].endswith("_cuda_shm"):
            print(f"{r['case']}: target e2e <= 1.2 x cuBLAS alone ({r['kernel_ms']:.2f} ms) + 0.5 ms = "
                  f"{r['floor_ms']:.2f} ms; the service's own cost is {r['overhead_ms']:.2f} ms")
        elif r["case"].endswith("_shm"):
            print(f"{r['case']}: the floor is the pinned copies of these bytes + kernel (the region "
                  f"is page-locked once, at registration; the request carries ~300 bytes of JSON)")
        if "ratio_vs_tcp" in r:
            print(f"{r['case']}: its floor is these bytes over one bare Unix socket "
                  f"({r['raw_unix_gbps']:.1f} GB/s) + kernel; vs the same curl over TCP "
                  f"({r['tcp_e2e_ms']:.1f} ms) -> ratio {r['ratio_vs_tcp']:.2f}")
            print(f"{r['case']}: the same curl into a bare Unix-socket sink + kernel takes "
                  f"{r['curl_sink_floor_ms']:.1f} ms (curl's own cost) -> ratio {r['ratio_curl_floor']:.2f}; "
                  f"a client sending as the floor does (8 MiB writes): {r['bare_client_ms']:.1f} ms "
                  f"-> ratio {r['ratio_bare_client']:.2f} to the floor (target <= 1.1)")
            print(f"{r['case']}: a bare socket keeping every operand byte (as the daemon must) moves "
                  f"{r['raw_unix_kept_gbps']:.1f} GB/s: that floor is {r['kept_floor_ms']:.1f} ms -> "
                  f"ratio {r['ratio_bare_kept_floor']:.2f} for the same client; the unix daemon read "
                  f"{'directly' if r.get('direct') else 'through libmicrohttpd'} "
                  f"(receive {r['bare_receive_ms']:.1f} ms); the same client over loopback TCP: "
                  f"{r['bare_client_tcp_ms']:.1f} ms")
            print(f"{r['case']}: the same client against a bare Unix-socket sink (receiving into and "
                  f"answering from one reused 8 MiB buffer) + kernel: {r['bare_sink_floor_ms']:.1f} ms "
                  f"-> ratio {r['ratio_bare_sink_floor']:.2f}: the daemon's own cost")


if __name__ == "__main__":
    main()
