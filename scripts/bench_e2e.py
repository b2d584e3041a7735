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

Prints the ratios (target <= 1.5) and writes a CSV.
  scripts/bench_e2e.py BUILD_DIR OUT_CSV        (CRUNCHD_BIN overrides BUILD_DIR/crunchd;
                                                 CRUNCHD_E2E_ARGS adds daemon flags)
"""
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

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "http"))
from conftest import Daemon  # noqa: E402  (the tests' daemon runner: free port, readyz, drain)

REPS = 5


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


def sink_server():
    """A loopback HTTP sink: reads a body of Content-Length bytes, answers 204, or 200 with the
    number of zero bytes the path asks for (/reply/N). Measures the loopback transfer rates the
    floors use, with the same client and the same bytes as the real requests."""
    srv = socket.socket()
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
    return srv.getsockname()[1]


def raw_tcp_gbps(size=512 << 20):
    """Loopback TCP with no HTTP and no files: one socket, 8 MiB sends and receives. The best
    any client could hope to move bytes to a daemon on this machine."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    done = threading.Event()

    def receive():
        conn, _ = srv.accept()
        view, left = memoryview(bytearray(8 << 20)), size
        while left > 0:
            left -= conn.recv_into(view, min(len(view), left))
        conn.close()
        done.set()

    threading.Thread(target=receive, daemon=True).start()
    chunk = memoryview(bytes(8 << 20))
    with socket.create_connection(srv.getsockname()) as c:
        t0 = time.perf_counter()
        for _ in range(size // len(chunk)):
            c.sendall(chunk)
        done.wait()
        secs = time.perf_counter() - t0
    srv.close()
    return size / secs / 1e9


def copy_rates(build):
    out = subprocess.run([str(build / "bench" / "copy"), "256"], check=True, capture_output=True,
                         text=True).stdout
    vals = dict(kv.split("=") for kv in out.split())
    return float(vals["h2d_gbps"]), float(vals["d2h_gbps"])


def bench_gemm(d, tmp, h2d_gbps, d2h_gbps, sink_port):
    n = 4096
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    np.save(tmp / "a.npy", a)
    np.save(tmp / "b.npy", b)
    url = f"{d.base}/v1/gemm?kernel=cublas"
    args = ["-F", f"a=@{tmp}/a.npy", "-F", f"b=@{tmp}/b.npy", "-H", "Accept: application/x-npy", "-H", "Expect:", url]
    curl(args)  # warm-up: pools, pinned staging, cuBLAS heuristics
    runs = [curl(args) for _ in range(REPS)]
    sink = [curl(args[:-1] + [f"http://127.0.0.1:{sink_port}/reply/{n * n * 4 + 128}"])[0]
            for _ in range(REPS)]
    # correctness of what came back, once
    subprocess.run(["curl", "-sS", "-f", "-o", str(tmp / "c.npy")] + args[:-1] + [url], check=True)
    c = np.load(tmp / "c.npy")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.abs(c - ref).max() / np.abs(ref).max()
    assert err < 1e-4, f"GEMM result wrong: max rel error {err}"
    total_s = statistics.median(r[0] for r in runs)
    kernel_ms = statistics.median(timing(r[1]).get("kernel", 0.0) for r in runs)
    in_bytes, out_bytes = 2 * a.nbytes, n * n * 4
    floor_s = in_bytes / (h2d_gbps * 1e9) + out_bytes / (d2h_gbps * 1e9) + kernel_ms / 1e3
    phases = {k: statistics.median(timing(r[1]).get(k, 0.0) for r in runs) for k in ("receive", "queue", "h2d", "d2h", "total")}
    transport_s = statistics.median(sink) + kernel_ms / 1e3
    tcp_gbps = statistics.median(raw_tcp_gbps() for _ in range(3))
    socket_s = (in_bytes + out_bytes) / (tcp_gbps * 1e9) + kernel_ms / 1e3
    return {"case": "gemm4096_npy", "bytes": in_bytes + out_bytes, "e2e_ms": total_s * 1e3,
            "floor_ms": floor_s * 1e3, "ratio": total_s / floor_s, "kernel_ms": kernel_ms,
            "transport_floor_ms": transport_s * 1e3, "ratio_transport": total_s / transport_s,
            "raw_tcp_gbps": tcp_gbps, "socket_floor_ms": socket_s * 1e3,
            **{f"{k}_ms": v for k, v in phases.items()}}


def bench_hist(d, tmp, sink_port):
    size = 512 << 20
    path = tmp / "hist.bin"
    path.write_bytes(np.random.default_rng(2).integers(0, 256, size, dtype=np.uint8).tobytes())
    raw = ["--data-binary", f"@{path}", "-H", "Content-Type: application/octet-stream", "-H", "Expect:"]
    sink = [curl(raw + [f"http://127.0.0.1:{sink_port}/"])[0] for _ in range(REPS)]
    loop_gbps = size / statistics.median(sink) / 1e9
    url = f"{d.base}/v1/histogram?kernel=smem-vec"
    curl(raw + [url])
    runs = [curl(raw + [url]) for _ in range(REPS)]
    total_s = statistics.median(r[0] for r in runs)
    kernel_ms = statistics.median(timing(r[1]).get("kernel", 0.0) for r in runs)
    floor_s = size / (loop_gbps * 1e9) + kernel_ms / 1e3
    return {"case": "hist512MiB_raw", "bytes": size, "e2e_ms": total_s * 1e3, "floor_ms": floor_s * 1e3,
            "ratio": total_s / floor_s, "kernel_ms": kernel_ms, "loopback_gbps": loop_gbps}


def vm_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) << 10 for l in f if l.startswith("VmHWM:"))


def bench_rss(d, tmp):
    """Peak RSS growth of the daemon over one 1 GiB raw histogram upload (target ~1.2x); curl
    streams it (-T: --data-binary would hold the whole file in memory, and refuses 1 GiB)."""
    size = 1 << 30
    path = tmp / "big.bin"
    path.write_bytes(np.random.default_rng(3).integers(0, 256, size, dtype=np.uint8).tobytes())
    before = vm_hwm(d.proc.pid)
    secs, _ = curl(["-T", str(path), "-X", "POST", "-H", "Content-Type: application/octet-stream",
                    "-H", "Expect:", f"{d.base}/v1/histogram"])
    grew = vm_hwm(d.proc.pid) - before
    path.unlink()
    return {"case": "hist1GiB_rss", "bytes": size, "e2e_ms": secs * 1e3, "rss_growth_mib": grew / 2**20,
            "ratio": grew / size}


def main():
    build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build").resolve()
    out_csv = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else ROOT / "bench" / "results" / "e2e.csv")
    os.environ.setdefault("CRUNCHD_BIN", str(build / "crunchd"))
    import conftest
    conftest.BIN = os.environ["CRUNCHD_BIN"]
    conftest.BACKEND = os.environ.get("CRUNCHD_BACKEND", "cuda")
    h2d, d2h = copy_rates(build)
    print(f"pinned copy rates: H2D {h2d:.1f} GB/s, D2H {d2h:.1f} GB/s")
    flags = ["--workers", "2", "--max-body-mb", "2048"] + os.environ.get("CRUNCHD_E2E_ARGS", "").split()
    rows = []
    with tempfile.TemporaryDirectory() as t:
        tmp = pathlib.Path(t)
        sink = sink_server()
        # the daemon as shipped, then without copying to the device during the upload: the
        # difference is what that overlap saves
        for suffix, env in (("", {}), ("_noprefetch", {"CRUNCHD_PREFETCH_MIN_MB": "0"})):
            d = Daemon(flags, env=env, name="bench-e2e" + suffix)
            d.start()
            try:
                for r in (bench_gemm(d, tmp, h2d, d2h, sink), bench_hist(d, tmp, sink)):
                    rows.append({**r, "case": r["case"] + suffix})
                if not suffix:
                    rows.append(bench_rss(d, tmp))
            finally:
                d.stop()
    keys = sorted({k for r in rows for k in r} - {"case"})
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    with open(out_csv, "w") as f:
        f.write("case," + ",".join(keys) + "\n")
        for r in rows:
            f.write(r["case"] + "," + ",".join(f"{r.get(k, '')}" for k in keys) + "\n")
    for r in rows:
        if "rss_growth_mib" in r:
            print(f"{r['case']}: peak RSS grew {r['rss_growth_mib']:.0f} MiB for a "
                  f"{r['bytes'] >> 20} MiB upload -> {r['ratio']:.2f}x the body (target ~1.2)")
            continue
        extra = ", ".join(f"{k}={r[k]:.2f}" for k in keys if k.endswith("_ms") or k.endswith("gbps") if k in r)
        print(f"{r['case']}: e2e {r['e2e_ms']:.1f} ms vs floor {r['floor_ms']:.1f} ms -> "
              f"ratio {r['ratio']:.2f} (target <= 1.5)  [{extra}]")
        if "transport_floor_ms" in r:
            print(f"{r['case']}: vs the transport floor {r['transport_floor_ms']:.1f} ms (the same "
                  f"curl against a sink + kernel) -> ratio {r['ratio_transport']:.2f}; bare loopback "
                  f"TCP ({r['raw_tcp_gbps']:.1f} GB/s, no HTTP, no files) alone needs "
                  f"{r['socket_floor_ms']:.1f} ms for these bytes + kernel")


if __name__ == "__main__":
    main()
