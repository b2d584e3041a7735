#!/usr/bin/env python3
"""Data movement rows of issues 36 and 37 (make bench-streams, on a GPU machine): what a request
costs when the data does not travel whole each time.

1. hist_stream_tcp / _unix: CRUNCHD_STREAM_GIB GiB (default 4) of random bytes through
   `curl -T -` (a streamed PUT) to /v1/histogram: exact counts checked against a count made here,
   the daemon's peak RSS growth (target <= 256 MiB), and the rate against the same curl into a
   bare sink (target >= 0.9x).
2. ata_stream_conns1 / conns4: AᵀA of rows x 1024 float32 (CRUNCHD_STREAM_GIB GiB in 64 MiB
   parts) sent as stream parts over 1 and 4 connections against one bare loopback socket moving
   the same bytes (target >= 0.9x; 4 connections >= 1.6x one), the result within 1e-6 of numpy
   float64 on a sample.
3. ata_shm_nN: AᵀA of a stream whose parts are rows in a registered shared-memory region (read in
   place, no body), n = 64 ... 4096: GB/s absorbed (target >= 50 GB/s; at 4096 the kernel's own
   rate on one big block, measured in the same run, bounds it).
4. gemm4096_tensor: a 4096² GEMM whose b is a resident tensor (uploaded once) against the same
   GEMM sending both operands, and with the result kept as a tensor (nothing comes back).

  scripts/bench_streams.py BUILD_DIR OUT_CSV     (CRUNCHD_STREAM_ONLY=hist,ata,shm,tensor)
"""
import concurrent.futures
import io
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import requests

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "http"))
sys.path.insert(0, str(ROOT / "scripts"))
from conftest import Daemon  # noqa: E402
import bench_e2e  # noqa: E402  (the sink, curl, bare sockets, regions, VmHWM)

GIB = float(os.environ.get("CRUNCHD_STREAM_GIB", "4"))
ONLY = {r for r in os.environ.get("CRUNCHD_STREAM_ONLY", "").split(",") if r}
PART = 64 << 20


def wanted(row):
    return not ONLY or row in ONLY


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


class RssWatch:
    """The daemon's peak resident set over a run, sampled every 10 ms (VmHWM is for the whole
    life: the daemon's start-up already set it)."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, rss_kib(pid), threading.Event()
        self.base = self.peak
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.wait(0.01):
            self.peak = max(self.peak, rss_kib(self.pid))

    def growth_mib(self):
        self.stop.set()
        self.t.join()
        return (self.peak - self.base) / 1024


def random_file(tmp, size):
    path = tmp / "stream.bin"
    rng = np.random.default_rng(9)
    counts = np.zeros(256, np.uint64)
    with open(path, "wb") as f:
        block = 256 << 20
        for at in range(0, size, block):
            b = rng.integers(0, 256, min(block, size - at), dtype=np.uint8)
            counts += np.bincount(b, minlength=256).astype(np.uint64)
            f.write(b.tobytes())
    return path, counts


def curl_put(args):
    t0 = time.perf_counter()
    out = subprocess.run(["curl", "-sS", "-f", "-H", "Expect:"] + args, check=True, capture_output=True).stdout
    return time.perf_counter() - t0, out


def bench_hist_stream(d, path, counts, sink, unix=None):
    """curl -T FILE sends a PUT of the file's length (curl -T - a chunked one: the same path)."""
    size = path.stat().st_size
    sink_where = ["--unix-socket", sink, "http://localhost/"] if unix else [f"http://127.0.0.1:{sink}/"]
    sink_s, _ = curl_put(["-T", str(path), "-X", "POST", "-H", "Content-Type: application/octet-stream"] + sink_where)
    where = ["--unix-socket", unix, "http://localhost/v1/histogram"] if unix else [f"{d.base}/v1/histogram"]
    watch = RssWatch(d.proc.pid)
    secs, out = curl_put(["-T", str(path), "-H", "Content-Type: application/octet-stream"] + where)
    grew = watch.growth_mib()
    got = np.array(json.loads(out)["result"]["counts"], np.uint64)
    assert (got == counts).all(), "stream histogram counts differ"
    gbps, sink_gbps = size / secs / 1e9, size / sink_s / 1e9
    return {"case": "hist_stream_" + ("unix" if unix else "tcp"), "bytes": size, "e2e_ms": secs * 1e3,
            "gbps": gbps, "sink_gbps": sink_gbps, "ratio_vs_sink": gbps / sink_gbps, "rss_growth_mib": grew,
            "exact": 1}


def ata_blocks(n, total):
    rng = np.random.default_rng(11)
    rows = PART // (4 * n)
    block = rng.standard_normal((rows, n)).astype(np.float32)
    return block, max(1, int(total // block.nbytes))


def bench_ata_stream(d, n=1024):
    block, count = ata_blocks(n, GIB * (1 << 30))
    raw = bench_e2e.raw_tcp_gbps(min(block.nbytes * count, 4 << 30))
    out = []
    for conns in (1, 4):
        jid = requests.post(d.url("/v1/jobs"), json={"op": "ata", "stream": True, "cols": n}).json()["id"]
        local = threading.local()

        def send(seq):
            s = getattr(local, "s", None) or requests.Session()
            local.s = s
            r = s.put(d.url(f"/v1/jobs/{jid}/parts/{seq}"), data=memoryview(block).cast("B"),
                      headers={"Content-Type": "application/octet-stream"}, timeout=600)
            assert r.status_code == 200, r.text

        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(conns) as pool:
            list(pool.map(send, range(count)))
        requests.post(d.url(f"/v1/jobs/{jid}/finish"), timeout=600)
        while requests.get(d.url(f"/v1/jobs/{jid}")).json()["status"] == "running":
            time.sleep(0.002)
        secs = time.perf_counter() - t0
        got = np.load(io.BytesIO(requests.get(d.url(f"/v1/jobs/{jid}/result"), headers={"Accept": "application/x-npy"}).content))
        b64 = block.astype(np.float64)
        want = count * (b64.T @ b64)
        err = float(np.abs(got - want).max() / np.abs(want).max())
        size = block.nbytes * count
        out.append({"case": f"ata_stream_conns{conns}", "bytes": size, "e2e_ms": secs * 1e3, "gbps": size / secs / 1e9,
                    "socket_gbps": raw, "ratio_vs_socket": size / secs / 1e9 / raw, "max_rel_error": err, "cols": n})
    out[1]["ratio_vs_one"] = out[1]["gbps"] / out[0]["gbps"]
    return out


def bench_ata_shm(d):
    """Parts named in a registered region: the request carries no rows at all."""
    rows = []
    size = 1 << 30
    region = bench_e2e.Region(d, "stream-shm", size)
    try:
        region.array(np.float32, (size // 4,))[...] = np.random.default_rng(12).standard_normal(size // 4, dtype=np.float32)
        for n in (64, 256, 1024, 2048, 4096):
            m = size // 4 // n
            part_rows = min(m, max(1, PART // (4 * n)))
            parts = m // part_rows
            jid = requests.post(d.url("/v1/jobs"), json={"op": "ata", "stream": True, "cols": n}).json()["id"]
            with requests.Session() as s:
                s.put(d.url(f"/v1/jobs/{jid}/parts/0"), json={"shm": {"region": region.name}, "shape": [part_rows, n]})  # warm
                t0 = time.perf_counter()
                with concurrent.futures.ThreadPoolExecutor(4) as pool:
                    def send(i):
                        r = requests.put(d.url(f"/v1/jobs/{jid}/parts/{i}"), json={"shm": {"region": region.name,
                                         "offset": (i % parts) * part_rows * n * 4}, "shape": [part_rows, n]}, timeout=600)
                        assert r.status_code == 200, r.text
                    list(pool.map(send, range(1, 1 + 4 * parts)))
                secs = time.perf_counter() - t0
            requests.delete(d.url(f"/v1/jobs/{jid}"))
            gbytes = 4 * parts * part_rows * n * 4 / 1e9
            rows.append({"case": f"ata_shm_n{n}", "bytes": int(gbytes * 1e9), "e2e_ms": secs * 1e3, "gbps": gbytes / secs,
                         "cols": n})
        # the kernel's own rate on one big block at n = 4096 (the bound there)
        n = 4096
        body = {"a": {"shm": {"region": region.name}, "shape": [size // 4 // n, n], "dtype": "float32"}}
        requests.post(d.url("/v1/ata"), json=body)
        r = requests.post(d.url("/v1/ata"), json=body).json()
        kms = r["timings_ms"]["kernel"]
        rows[-1]["kernel_gbps_one_block"] = size / (kms / 1e3) / 1e9
        rows[-1]["ratio_vs_kernel"] = rows[-1]["gbps"] / rows[-1]["kernel_gbps_one_block"]
        rows += accuracy_rows(d, region, size)
    finally:
        region.close()
    return rows


def accuracy_rows(d, region, size, n=8, passes=3):
    """The error of a stream of ~10^8 rows (the region's rows of n columns, `passes` times over)
    against numpy's float64 AᵀA of the same rows, for float64 and float32 accumulation."""
    m = size // 4 // n
    part_rows = PART // (4 * n)
    a = region.array(np.float32, (m, n)).astype(np.float64)
    want = passes * (a.T @ a)
    out = []
    for acc in ("float64", "float32"):
        jid = requests.post(d.url("/v1/jobs"), json={"op": "ata", "stream": True, "cols": n, "accumulate": acc}).json()["id"]
        seq = 0
        with requests.Session() as s:
            for _ in range(passes):
                for start in range(0, m, part_rows):
                    rows_here = min(part_rows, m - start)
                    r = s.put(d.url(f"/v1/jobs/{jid}/parts/{seq}"), json={"shm": {"region": region.name, "offset": start * n * 4},
                                                                         "shape": [rows_here, n]}, timeout=600)
                    assert r.status_code == 200, r.text
                    seq += 1
            s.post(d.url(f"/v1/jobs/{jid}/finish"))
            got = np.load(io.BytesIO(s.get(d.url(f"/v1/jobs/{jid}/result"), headers={"Accept": "application/x-npy"}).content))
        out.append({"case": f"ata_accuracy_{passes * m}rows_acc_{acc}", "rows": passes * m, "cols": n,
                    "max_rel_error": float(np.abs(got - want).max() / np.abs(want).max())})
    return out


def bench_tensor_gemm(d, n=4096, kernel="cublas"):
    rng = np.random.default_rng(13)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)

    def npy(x):
        buf = io.BytesIO()
        np.save(buf, x)
        return buf.getvalue()

    an, bn = npy(a), npy(b)
    files = lambda: {"a": ("a.npy", an, "application/octet-stream"), "b": ("b.npy", bn, "application/octet-stream")}
    s = requests.Session()

    def timed(fn, reps=5):
        fn()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            r = fn()
            ts.append(time.perf_counter() - t0)
            assert r.status_code == 200, r.text
        return sorted(ts)[len(ts) // 2] * 1e3

    full = timed(lambda: s.post(d.url(f"/v1/gemm?kernel={kernel}"), files=files(), headers={"Accept": "application/x-npy"}))
    tid = s.post(d.url("/v1/tensors?name=bench-b"), data=bn, headers={"Content-Type": "application/x-npy"}).json()["id"]
    one = timed(lambda: s.post(d.url(f"/v1/gemm?kernel={kernel}&tensor_b=" + tid), files={"a": files()["a"]},
                               headers={"Accept": "application/x-npy"}))
    aid = s.post(d.url("/v1/tensors?name=bench-a"), data=an, headers={"Content-Type": "application/x-npy"}).json()["id"]
    kept = timed(lambda: s.post(d.url("/v1/gemm"), json={"a": {"tensor": aid}, "b": {"tensor": tid}, "kernel": kernel,
                                                          "output": {"tensor": {}}}))
    r = s.post(d.url("/v1/gemm"), json={"a": {"tensor": aid}, "b": {"tensor": tid}, "kernel": kernel,
                                       "output": {"tensor": {}}}).json()
    for t in s.get(d.url("/v1/tensors")).json()["tensors"]:
        s.delete(d.url(f"/v1/tensors/{t['id']}"))
    return [{"case": "gemm4096_upload_both", "e2e_ms": full}, {"case": "gemm4096_tensor_b", "e2e_ms": one,
             "ratio_vs_upload": one / full},
            {"case": "gemm4096_tensors_kept", "e2e_ms": kept, "ratio_vs_upload": kept / full,
             "kernel_ms": r["timings_ms"]["kernel"]}]


def main():
    build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build").resolve()
    out_csv = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else ROOT / "bench" / "results" / "streams.csv")
    import conftest
    conftest.BIN = os.environ.get("CRUNCHD_BIN", str(build / "crunchd"))
    conftest.BACKEND = os.environ.get("CRUNCHD_BACKEND", "cuda")
    sock_dir = tempfile.mkdtemp(prefix="crunchd-st-", dir="/tmp")
    unix = os.path.join(sock_dir, "crunchd.sock")
    d = Daemon(["--shm-max-mb", "2048", "--shm-client-max-mb", "2048", "--unix-socket", unix], name="bench-streams")
    d.start()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as t:
            tmp = pathlib.Path(t)
            sink = bench_e2e.sink_server()
            if wanted("hist"):
                path, counts = random_file(tmp, int(GIB * (1 << 30)))
                rows.append(bench_hist_stream(d, path, counts, sink))
                unix_sink = bench_e2e.sink_server(os.path.join(sock_dir, "sink.sock"))
                rows.append(bench_hist_stream(d, path, counts, unix_sink, unix))
        if wanted("ata"):
            rows += bench_ata_stream(d)
        if wanted("shm"):
            rows += bench_ata_shm(d)
        if wanted("tensor"):
            small = conftest.BACKEND == "cpu"  # the script's own check, anywhere: figures mean nothing
            rows += bench_tensor_gemm(d, 512 if small else 4096, "auto" if small else "cublas")
    finally:
        d.stop()
    keys = bench_e2e.write_csv(rows, out_csv)
    for r in rows:
        print(r["case"] + ": " + ", ".join(f"{k}={r[k]:.3g}" if isinstance(r[k], float) else f"{k}={r[k]}"
                                           for k in keys if k in r))


if __name__ == "__main__":
    main()
