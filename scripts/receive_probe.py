#!/usr/bin/env python3
"""Where a big upload's receive time goes over the Unix socket (issue 15's row): the daemon's
own `receive` phase (Server-Timing) for the same bytes sent as multipart (.npy parts a and b of
N x N float32: libmicrohttpd's post processor) and as one .npy body (no post processor), with
each --conn-memory-kb given (libmicrohttpd reads the socket in pieces of about half of it).
Compare the GB/s it prints with a bare Unix socket's (bench_e2e.raw_unix_gbps).

    scripts/receive_probe.py CRUNCHD N KB[,KB...]      e.g. build/crunchd 4096 64,256,1024

H200 machine (16 cores), N = 4096 (134 MB), cuda backend: 3.0-3.9 GB/s received whatever the
body type or buffer size, against 6.6-7.3 GB/s over a bare socket: each byte is copied twice in
sequence on one thread (socket -> libmicrohttpd's buffer -> our pinned array). Since then uploads
this big are read by crunchd itself (--direct-min-kb, server/http/direct.h), where
--conn-memory-kb plays no part: CRUNCHD_PROBE_ARGS="--direct-min-kb 0" measures
libmicrohttpd's path again."""
import io
import os
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_load  # noqa: E402


def post(path, target, body, ctype):
    """One POST over a new connection, the body in 8 MiB writes; (e2e ms, receive ms, status)."""
    with socket.socket(socket.AF_UNIX) as c:
        c.connect(path)
        head = (f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Accept: application/x-npy\r\nConnection: close\r\n\r\n").encode()
        t0 = time.perf_counter()
        c.sendall(head)
        view = memoryview(body)
        for i in range(0, len(body), 8 << 20):
            c.sendall(view[i:i + (8 << 20)])
        got = bytearray()
        while chunk := c.recv(8 << 20):
            got += chunk
        secs = time.perf_counter() - t0
    hdr = bytes(got[:4096]).split(b"\r\n\r\n")[0].decode(errors="replace")
    timing = [line for line in hdr.split("\r\n") if line.lower().startswith("server-timing")]
    receive = float(timing[0].split("receive;dur=")[1].split(",")[0]) if timing else -1.0
    return secs * 1e3, receive, hdr.split()[1]


def start(binary, path, kb):
    d = subprocess.Popen([binary, "--port", "0", "--bind", "none", "--unix-socket", path, "--conn-memory-kb", kb,
                          "--max-body-mb", "4096"] + os.environ.get("CRUNCHD_PROBE_ARGS", "").split(), stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    for _ in range(400):
        if os.path.exists(path):
            break
        time.sleep(0.05)
    time.sleep(0.5)  # the socket file appears just before the daemon answers
    return d


def main():
    binary, n, sizes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    multipart = bench_load.multipart({"a": a, "b": b})
    one = io.BytesIO()
    np.save(one, np.concatenate([a.ravel(), b.ravel()]))
    cases = (("multipart gemm", "/v1/gemm", multipart, f"multipart/form-data; boundary={bench_load.BOUNDARY}"),
             (".npy histogram", "/v1/histogram?bins=16&range=-4,4", one.getvalue(), "application/x-npy"))
    for kb in sizes:
        path = f"/tmp/receive-probe-{os.getpid()}-{kb}.sock"
        d = start(binary, path, kb)
        try:
            for name, target, body, ctype in cases:
                post(path, target, body, ctype)  # warm-up: pools, pinned staging
                runs = [post(path, target, body, ctype) for _ in range(5)]
                e2e, receive = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
                print(f"conn-memory-kb {kb:>5} {name:15} e2e {e2e:7.1f} ms  receive {receive:6.1f} ms "
                      f"({len(body) / receive / 1e6:.2f} GB/s)  status {sorted({r[2] for r in runs})}", flush=True)
        finally:
            d.terminate()
            d.wait()


if __name__ == "__main__":
    main()
