"""bench-e2e's rows for stacks and resident tensors (issues 35 and 36), each against its floor.

Stacks (CRUNCHD_E2E_ONLY=stack):
  stack{S}x64_shm   S 64x64 float32 products, a, b and the result in one registered region; the
                    request is a few hundred bytes of JSON. floor = the pinned copies of the
                    stack's bytes + the kernel (target <= 1.3).
  stack{S}x64_npy   the same stack as two .npy files with curl over loopback TCP; floor = the same
                    bytes over one bare socket + the kernel (target <= 1.15). bare_client_ms: the
                    same request written as the floor writes (8 MiB sends), no curl.
  stack{S}x16_npy   100,000 16x16 products the same way (target <= 1.3).
Resident tensors (CRUNCHD_E2E_ONLY=tensor):
  tensor_batch      a 256x4096 batch (.npy, curl) times a resident 4096x4096 matrix (?tensor_b=):
                    floor = the batch's and the answer's bytes over a bare socket + the kernel
                    (target <= 1.2); send_ms: the same with the 64 MiB matrix sent every time
                    (target: >= 10x slower).
  tensor_load64     64 connections (wrk) of that product with the batch and the result in
                    shared memory, the matrix resident, against the matrix in shared memory too
                    (target: jobs/s within 1.2x).
  tensor_chain      GEMM 4096^2 kept resident, then AtA of that result (two requests): h2d and d2h
                    of the intermediate are 0; floor = the two kernels + two small requests'
                    round trips (target <= 1.2).
CRUNCHD_E2E_SMALL shrinks every size (a CPU machine: the code path, not the figures)."""

import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import time

import numpy as np
import requests

import bench_e2e as e2e  # noqa: E402  (its curl, floors, regions and sizes)
import bench_load  # noqa: E402  (wrk and its row format)

SMALL = e2e.SMALL
STACK_64 = 512 if SMALL else 8192
STACK_16 = 5000 if SMALL else 100_000
BATCH, DIM = (64, 512) if SMALL else (256, 4096)
LOAD_S = float(os.environ.get("CRUNCHD_E2E_LOAD_S", "1" if SMALL else "5"))


def rng_f32(seed, shape):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def assert_close(got, want, what):
    err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    assert err < 1e-4, f"{what}: max rel error {err:.3g}"


def curl_npy(tmp, url, parts):
    """curl -F of each (name, array) as .npy, answered as .npy: (median seconds, kernel ms, answer)."""
    args = []
    for name, m in parts:
        np.save(tmp / f"{name}.npy", m)
        args += ["-F", f"{name}=@{tmp}/{name}.npy"]
    args += ["-H", "Accept: application/x-npy", "-H", "Expect:", url]
    e2e.curl(args)  # warm-up: pools, staging, heuristics
    runs = [e2e.curl(args) for _ in range(e2e.REPS)]
    subprocess.run(["curl", "-sS", "-f", "-o", str(tmp / "out.npy")] + args, check=True)
    kernel_ms = statistics.median(e2e.timing(h).get("kernel", 0.0) for _, h in runs)
    return statistics.median(s for s, _ in runs), kernel_ms, np.load(tmp / "out.npy")


def bare_npy(d, target, parts):
    """The same multipart request written as the socket floor writes (no curl): median seconds."""
    body = bench_load.multipart(dict(parts))
    ctype = f"multipart/form-data; boundary={bench_load.BOUNDARY}"
    e2e.post_bare(socket.AF_INET, ("127.0.0.1", d.port), target, body, ctype)
    return statistics.median(e2e.post_bare(socket.AF_INET, ("127.0.0.1", d.port), target, body, ctype)[0]
                             for _ in range(e2e.REPS))


def stack_npy(d, tmp, count, n, tcp_gbps):
    a, b = rng_f32(11, (count, n, n)), rng_f32(12, (count, n, n))
    secs, kernel_ms, c = curl_npy(tmp, f"{d.base}/v1/gemm", [("a", a), ("b", b)])
    assert_close(c, np.matmul(a.astype(np.float64), b), f"stack of {count} {n}x{n}")
    moved = 3 * a.nbytes
    floor_s = moved / (tcp_gbps * 1e9) + kernel_ms / 1e3
    bare_s = bare_npy(d, "/v1/gemm", [("a", a), ("b", b)])
    return {"case": f"stack{count}x{n}_npy", "bytes": moved, "e2e_ms": secs * 1e3, "floor_ms": floor_s * 1e3,
            "ratio": secs / floor_s, "kernel_ms": kernel_ms, "raw_tcp_gbps": tcp_gbps,
            "bare_client_ms": bare_s * 1e3, "ratio_bare_client": bare_s / floor_s,
            "target": 1.15 if n == 64 else 1.3}


def stack_shm(d, count, n, h2d_gbps, d2h_gbps):
    a, b = rng_f32(13, (count, n, n)), rng_f32(14, (count, n, n))
    region = e2e.Region(d, "e2e-stack", 3 * a.nbytes)
    try:
        region.array(np.float32, a.shape)[...] = a
        region.array(np.float32, b.shape, a.nbytes)[...] = b
        op = lambda off: {"shm": {"region": region.name, "offset": off}, "shape": list(a.shape), "dtype": "float32"}
        body = {"a": op(0), "b": op(a.nbytes), "output": {"shm": {"region": region.name, "offset": 2 * a.nbytes}}}
        with requests.Session() as s:
            secs, answers = e2e.timed_posts(s, d.url("/v1/gemm"), body)
        assert_close(region.array(np.float32, a.shape, 2 * a.nbytes), np.matmul(a.astype(np.float64), b),
                     f"stack of {count} {n}x{n} in shared memory")
    finally:
        region.close()
    kernel_ms = e2e.median_timing(answers, "kernel")
    floor_s = 2 * a.nbytes / (h2d_gbps * 1e9) + a.nbytes / (d2h_gbps * 1e9) + kernel_ms / 1e3
    return {"case": f"stack{count}x{n}_shm", "bytes": 3 * a.nbytes, "e2e_ms": secs * 1e3,
            "floor_ms": floor_s * 1e3, "ratio": secs / floor_s, "kernel_ms": kernel_ms,
            "jobs_per_s": count / secs, "target": 1.3,
            **{f"{k}_ms": e2e.median_timing(answers, k) for k in ("receive", "queue", "h2d", "d2h", "total")}}


def stack_rows(d, tmp, h2d_gbps, d2h_gbps, tcp_gbps):
    return [stack_shm(d, STACK_64, 64, h2d_gbps, d2h_gbps), stack_npy(d, tmp, STACK_64, 64, tcp_gbps),
            stack_npy(d, tmp, STACK_16, 16, tcp_gbps)]


class Tensors:
    """Resident tensors made for these rows, freed at the end."""

    def __init__(self, d):
        self.d, self.ids = d, []

    def upload(self, m):
        r = requests.post(self.d.url("/v1/tensors"), data=bench_load.npy_bytes(m),
                          headers={"Content-Type": "application/x-npy"}, timeout=600)
        assert r.status_code == 201, r.text
        return self.kept(r.json())

    def kept(self, info):
        self.ids.append(info["id"])
        return info["id"]

    def download(self, ref):
        r = requests.get(self.d.url(f"/v1/tensors/{ref}"), headers={"Accept": "application/x-npy"}, timeout=600)
        assert r.status_code == 200, r.text
        return np.load(io.BytesIO(r.content))

    def free(self, *refs):
        for ref in refs:
            requests.delete(self.d.url(f"/v1/tensors/{ref}"), timeout=60)
            self.ids.remove(ref)

    def close(self):
        self.free(*self.ids)


def tensor_batch(d, tmp, tensors, tcp_gbps):
    x, w = rng_f32(21, (BATCH, DIM)), rng_f32(22, (DIM, DIM))
    ref = tensors.upload(w)
    want = x.astype(np.float64) @ w
    secs, kernel_ms, y = curl_npy(tmp, f"{d.base}/v1/gemm?tensor_b={ref}", [("a", x)])
    assert_close(y, want, "batch times a resident matrix")
    send_s, _, y2 = curl_npy(tmp, f"{d.base}/v1/gemm", [("a", x), ("b", w)])
    assert_close(y2, want, "batch times a sent matrix")
    moved = x.nbytes + BATCH * DIM * 4
    floor_s = moved / (tcp_gbps * 1e9) + kernel_ms / 1e3
    return {"case": "tensor_batch", "bytes": moved, "e2e_ms": secs * 1e3, "floor_ms": floor_s * 1e3,
            "ratio": secs / floor_s, "kernel_ms": kernel_ms, "raw_tcp_gbps": tcp_gbps, "send_ms": send_s * 1e3,
            "speedup_vs_send": send_s / secs, "target": 1.2}


def wrk_rate(d, tmp, name, body):
    f = tmp / f"{name}.json"
    f.write_text(json.dumps(body))
    row = {"path": "/v1/gemm", "file": f, "ctype": "application/json", "accept": None}
    r = requests.post(d.url(row["path"]), json=body, timeout=600)
    assert r.status_code == 200, f"{name}: {r.text}"
    bench_load.wrk(d.base, row, 64, max(1, round(LOAD_S / 5)))  # warm-up, thrown away
    rate = bench_load.wrk(d.base, row, 64, max(1, round(LOAD_S)))
    # every request wrote the same place, and the CPU backend's BLAS sums into its output in place:
    # concurrent writers there race, so one more request, alone, is what gets checked
    r = requests.post(d.url(row["path"]), json=body, timeout=600)
    assert r.status_code == 200, f"{name}: {r.text}"
    return rate


def tensor_load64(d, tmp, tensors):
    """The batch and the result in shared memory for both; the matrix resident or in shared memory."""
    x, w = rng_f32(23, (BATCH, DIM)), rng_f32(24, (DIM, DIM))
    ref = tensors.upload(w)
    region = e2e.Region(d, "e2e-load", x.nbytes + w.nbytes + BATCH * DIM * 4)
    try:
        region.array(np.float32, x.shape)[...] = x
        region.array(np.float32, w.shape, x.nbytes)[...] = w
        op = lambda off, shape: {"shm": {"region": region.name, "offset": off}, "shape": list(shape), "dtype": "float32"}
        out = {"shm": {"region": region.name, "offset": x.nbytes + w.nbytes}}
        resident = wrk_rate(d, tmp, "resident", {"a": op(0, x.shape), "b": {"tensor": ref}, "output": out})
        result = lambda: region.array(np.float32, (BATCH, DIM), x.nbytes + w.nbytes)
        assert_close(result(), x.astype(np.float64) @ w, "a batch against a resident matrix")
        result()[...] = np.nan
        shm = wrk_rate(d, tmp, "shm", {"a": op(0, x.shape), "b": op(x.nbytes, w.shape), "output": out})
        assert_close(result(), x.astype(np.float64) @ w, "a batch against a matrix in shared memory")
    finally:
        region.close()
    return {"case": "tensor_load64", "jobs_s": resident["jobs_s"], "p99_ms": resident["p99_ms"],
            "shm_jobs_s": shm["jobs_s"], "shm_p99_ms": shm["p99_ms"], "ratio": shm["jobs_s"] / resident["jobs_s"],
            "errors": resident["non2xx"] + resident["socket_errors"] + shm["non2xx"] + shm["socket_errors"],
            "target": 1.2}


def post_json(s, d, path, body):
    t0 = time.perf_counter()
    r = s.post(d.url(path), json=body, timeout=600)
    secs = time.perf_counter() - t0
    assert r.status_code == 200, r.text
    return secs, r.json()


def tensor_chain(d, tensors):
    """C = A.B kept resident, then G = C^T C from it: the intermediate never crosses the bus."""
    a, b = rng_f32(25, (DIM, DIM)), rng_f32(26, (DIM, DIM))
    ra, rb = tensors.upload(a), tensors.upload(b)
    tiny = {"a": [[1.0, 2.0], [3.0, 4.0]], "b": [[1.0, 0.0], [0.0, 1.0]]}
    with requests.Session() as s:
        post_json(s, d, "/v1/gemm", tiny)
        request_s = statistics.median(post_json(s, d, "/v1/gemm", tiny)[0] for _ in range(e2e.REPS))
        runs = []
        for _ in range(e2e.REPS + 1):  # the first is a warm-up
            s1, g = post_json(s, d, "/v1/gemm", {"a": {"tensor": ra}, "b": {"tensor": rb}, "output": {"tensor": {}}})
            rc = tensors.kept(g["result"]["tensor"])
            s2, t = post_json(s, d, "/v1/ata", {"a": {"tensor": rc}, "output": {"tensor": {}}})
            rg = tensors.kept(t["result"]["tensor"])
            if runs:  # only the last run's answer is checked
                tensors.free(runs[-1][3], runs[-1][4])
            runs.append((s1 + s2, g["timings_ms"], t["timings_ms"], rc, rg))
    runs = runs[1:]
    c = a.astype(np.float64) @ b
    assert_close(tensors.download(runs[-1][4]), c.T @ c, "AtA of a resident GEMM result")
    copies = max(tm[k] for _, t1, t2, *_ in runs for tm in (t1, t2) for k in ("h2d", "d2h"))
    kernels_ms = statistics.median(t1["kernel"] + t2["kernel"] for _, t1, t2, *_ in runs)
    secs = statistics.median(r[0] for r in runs)
    floor_s = kernels_ms / 1e3 + 2 * request_s
    return {"case": "tensor_chain", "e2e_ms": secs * 1e3, "floor_ms": floor_s * 1e3, "ratio": secs / floor_s,
            "kernel_ms": kernels_ms, "request_ms": request_s * 1e3, "copies_ms": copies, "target": 1.2}


def tensor_rows(d, tmp, tcp_gbps):
    tensors = Tensors(d)
    try:
        rows = [tensor_batch(d, tmp, tensors, tcp_gbps)]
        bench_load.WRK = os.environ.get("WRK") or shutil.which("wrk")
        rows += [tensor_load64(d, tmp, tensors)] if bench_load.WRK else []
        return rows + [tensor_chain(d, tensors)]
    finally:
        tensors.close()


def describe(r):
    """One line for a row of this module, or None for another's."""
    case = r["case"]
    if case.startswith("stack") and case.endswith("_shm"):
        return (f"{case}: {r['e2e_ms']:.1f} ms ({r['jobs_per_s']:,.0f} products/s) vs pinned copies + kernel "
                f"{r['floor_ms']:.1f} ms -> {r['ratio']:.2f}x (target <= {r['target']})")
    if case.startswith("stack"):
        return (f"{case}: curl {r['e2e_ms']:.1f} ms, a bare client {r['bare_client_ms']:.1f} ms, vs bare socket "
                f"({r['raw_tcp_gbps']:.1f} GB/s) + kernel {r['floor_ms']:.1f} ms -> {r['ratio']:.2f}x, bare client "
                f"{r['ratio_bare_client']:.2f}x (target <= {r['target']})")
    if case == "tensor_batch":
        return (f"{case}: {r['e2e_ms']:.1f} ms vs floor {r['floor_ms']:.1f} ms -> {r['ratio']:.2f}x (target <= 1.2); "
                f"sending the matrix every time {r['send_ms']:.1f} ms -> resident is {r['speedup_vs_send']:.1f}x faster "
                f"(target >= 10)")
    if case == "tensor_load64":
        return (f"{case}: resident {r['jobs_s']:,.0f} jobs/s (p99 {r['p99_ms']:.2f} ms) vs shared memory "
                f"{r['shm_jobs_s']:,.0f} jobs/s -> {r['ratio']:.2f}x (target <= 1.2), {r['errors']} errors")
    if case == "tensor_chain":
        return (f"{case}: {r['e2e_ms']:.1f} ms vs kernels {r['kernel_ms']:.2f} ms + 2 requests of "
                f"{r['request_ms']:.2f} ms -> {r['ratio']:.2f}x (target <= 1.2); the intermediate's copies "
                f"{r['copies_ms']:.3f} ms (target 0)")
    return None
