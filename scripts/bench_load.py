#!/usr/bin/env python3
"""Jobs/s and latency under concurrent load, crunchd against the obvious alternative (make bench-load).

Starts crunchd (its defaults, --backend CRUNCHD_BACKEND) and bench/alt_server.py (aiohttp +
NumPy, one process per core), checks one answer of each server per row against NumPy, then loads
both with wrk (bench/load/post.lua: one fixed body per row, POSTed on every request) for each row
and number of connections. Prints a table and the targets, writes the CSV and a PNG beside it.

  scripts/bench_load.py BUILD_DIR OUT_CSV

Rows: gemm{16,64,256}_json and _npy (multipart .npy in, Accept: application/x-npy out),
hist1k_json (1024 uint8 values), ata64_json, and stack64x512_npy (a stack of 512 64x64 products
in one multipart .npy request: its jobs/s times 512 is products/s, against gemm64_npy's one
product a request). JSON numbers are uniform in [-1, 1) with four
decimals (a 64x64 GEMM body is ~65 KB), each in its shortest form.

KServe rows, on crunchd alone (the alternatives have no /v2): gemm{64,256}_kserve are measured by
Triton's perf_analyzer (.tools/perf_analyzer, make deps) at each concurrency with the same
matrices as the _npy rows (--input-data, binary tensors); gemm256_kjson is the KServe JSON-tensor
body under wrk, beside gemm256_json. Each crunchd figure carries the daemon's CPU per job (its
utime + stime over the requests it answered) and the load generator's, so where the client is the
bound the daemon's cost still compares: the table prints KServe against /v1 .npy for both.

The alternative is aiohttp + NumPy (bench/alt_server.py, one process per core) and, where PyTorch
sees a CUDA device, aiohttp + PyTorch on the GPU as well: each row's ratio is against the stronger
of the two (the CSV names which).

Every GPU against one (where the daemon sees several GPUs, or BENCH_LOAD_MULTI_GPU=1), a second
daemon with CUDA_VISIBLE_DEVICES=0 beside the first, two 1024x1024 float32 GEMM rows at 16
connections and more: gemm1024_npy (8 MB of .npy in, 4 MB out over loopback TCP: it measures the
host's loopback transport more than the GPUs) and gemm1024_shm (A and B in one /dev/shm object, C
written to another, both registered as regions with each daemon: a 264-byte JSON body names them,
so it measures the GPUs and the engine's spread over them).

Environment:
  CRUNCHD_BIN             the daemon (default BUILD_DIR/crunchd)
  CRUNCHD_BACKEND         cpu (default) or cuda
  CRUNCHD_LOAD_ARGS       extra daemon flags, e.g. "--batch-max 32" (none: the defaults)
  BENCH_LOAD_SECONDS      seconds per run (10); BENCH_LOAD_WARMUP seconds before each (1)
  BENCH_LOAD_ROWS         comma-separated row names (all);  BENCH_LOAD_CONNS  e.g. 64 (1,16,64,256)
  BENCH_LOAD_ALT_WORKERS  alternative's processes (CPU count); 0 leaves the alternative out
  BENCH_LOAD_ALTS         numpy,torch (default: torch too where it sees a GPU)
  PERF_ANALYZER           the perf_analyzer binary (default .tools/perf_analyzer/perf_analyzer)
  BENCH_LOAD_WRK_THREADS  wrk's threads (half the CPUs, at least 4; at most the connections)
  BENCH_LOAD_CODES=1      count every status code in wrk's Lua (slows wrk on big answers)
  BENCH_LOAD_MULTI_GPU=1  the every-GPU vs one-GPU rows even with one device (they run by themselves
                          where the daemon sees more than one): -multi-gpu.csv beside the CSV
  WRK                     the wrk binary (default: wrk on PATH)
"""
import base64
import csv
import importlib.util
import io
import json
import os
import pathlib
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np
import requests

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "http"))
LUA = ROOT / "bench" / "load" / "post.lua"
ALT = ROOT / "bench" / "alt_server.py"
NPY = "application/x-npy"
BOUNDARY = "crunchd-bench-load-7f3a9c"

ALL_ROWS = ["gemm16_json", "gemm64_json", "gemm256_json", "gemm256_kjson", "gemm16_npy", "gemm64_npy",
            "gemm64_kserve", "gemm256_npy", "gemm256_kserve", "hist1k_json", "ata64_json", "stack64x512_npy"]
PERF_ANALYZER = os.environ.get("PERF_ANALYZER") or str(ROOT / ".tools" / "perf_analyzer" / "perf_analyzer")
# the KServe rows against the /v1 rows they are compared with (issue 34: within 1.25x)
KSERVE_VS = {"gemm64_kserve": "gemm64_npy", "gemm256_kserve": "gemm256_npy", "gemm256_kjson": "gemm256_json"}
KSERVE_TARGET = 1.25
ALL_CONNS = [1, 16, 64, 256]
# (row, jobs/s at least, p99 ms at most) at 64 connections, and the ratio to the alternative
TARGETS = [("gemm64_json", 25_000, 10.0), ("gemm16_json", 100_000, None),
           ("gemm64_npy", 60_000, None), ("hist1k_json", 100_000, None)]
TARGET_CONNS, TARGET_RATIO = 64, 5.0
# on a machine with more than one GPU (or BENCH_LOAD_MULTI_GPU=1): these rows, every GPU vs one
MULTI_GPU_ROWS, MULTI_GPU_TARGET = ("gemm1024_npy", "gemm1024_shm"), 1.8


def env_list(name, default, kind=str):
    v = os.environ.get(name, "").strip()
    return [kind(x) for x in v.split(",") if x.strip()] if v else default


# -- bodies ------------------------------------------------------------------------------------
def json_matrix(m):
    # str() of a float32 scalar is its shortest repr; tolist() would give 17-digit doubles
    return "[" + ",".join("[" + ",".join(map(str, row)) + "]" for row in m) + "]"


def npy_bytes(m):
    buf = io.BytesIO()
    np.save(buf, m)
    return buf.getvalue()


def multipart(parts):
    out = b""
    for name, m in parts.items():
        out += (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"; '
                f'filename="{name}.npy"\r\nContent-Type: application/octet-stream\r\n\r\n'
                ).encode() + npy_bytes(m) + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


class ShmGemm:
    """A GEMM's operands and output in POSIX shared memory, as a client on the daemon's machine keeps
    them: A and B in one /dev/shm object, C in another, each registered whole as a region with
    every daemon given, so a request names them and carries no matrix bytes. np.memmap of the
    /dev/shm file is shm_open's object on Linux, and closes with no exported-buffer errors.

    The C object has two places: c[0], which every loaded request writes (the same values; a
    region's holds are counts, so writers do not exclude each other), and c[1], which only check()
    writes: the cpu backend's BLAS accumulates in its output, so a request still running in c[0]
    (one wrk cut off, or the other daemon's: both map the object) would show check() partial sums."""

    def __init__(self, a, b):
        # named by size too: rows of several sizes may be registered with one daemon at once
        self.regions = {k: f"bench-load-{a.shape[0]}-{k}" for k in ("ab", "c")}
        self.keys = {k: f"/crunchd-bench-load-{os.getpid()}-{a.shape[0]}-{k}" for k in self.regions}
        self.registered = []  # (daemon's base URL, region)
        self.ab = np.memmap("/dev/shm" + self.keys["ab"], np.float32, "w+", shape=(2, *a.shape))
        self.ab[0], self.ab[1] = a, b
        self.c = np.memmap("/dev/shm" + self.keys["c"], np.float32, "w+", shape=(2, a.shape[0], b.shape[1]))

    def body(self, out):
        """The request's JSON, its result going to c[out]."""
        def place(region, mem, i):  # mem[i]'s bytes
            return {"shm": {"region": self.regions[region], "offset": i * mem[0].nbytes}}

        a, b = ({**place("ab", self.ab, i), "shape": list(self.ab.shape[1:]), "dtype": "float32"}
                for i in (0, 1))
        return json.dumps({"a": a, "b": b, "output": place("c", self.c, out)}).encode()

    def register(self, base):
        for k, region in self.regions.items():
            r = requests.post(f"{base}/v2/systemsharedmemory/region/{region}/register",
                              json={"key": self.keys[k], "offset": 0, "byte_size": getattr(self, k).nbytes},
                              timeout=30)
            if r.status_code != 200:
                raise RuntimeError(f"registering {region} with {base}: HTTP {r.status_code}: {r.text[:200]}")
            self.registered.append((base, region))

    def unregister(self, base):
        """Unregisters from one daemon. The requests wrk cut off at the end of a run still hold the
        regions until they finish (409): polled for, up to 30 s."""
        for region in [r for b, r in self.registered if b == base]:
            deadline = time.monotonic() + 30
            try:
                while (r := requests.post(f"{base}/v2/systemsharedmemory/region/{region}/unregister",
                                          timeout=30)).status_code == 409 and time.monotonic() < deadline:
                    time.sleep(0.05)
                if r.status_code != 200:
                    print(f"unregistering {region} from {base}: HTTP {r.status_code}: {r.text[:200]}")
            except requests.RequestException as e:  # close() runs on failures too: carry on
                print(f"unregistering {region} from {base}: {e!r}")
        self.registered = [(b, r) for b, r in self.registered if b != base]

    def close(self):
        """Unregisters from every daemon, then unlinks."""
        for base in {b for b, _ in self.registered}:
            self.unregister(base)
        for key in self.keys.values():
            pathlib.Path("/dev/shm" + key).unlink(missing_ok=True)


def make_row(name, tmp):
    """The row's request (path, body file, Content-Type, Accept) and the answer NumPy expects."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # fixed: every run sends the same
    op, fmt = name.split("_")

    def mat(n):
        # four decimals, as measured data usually has: a 64x64 GEMM body is ~65 KB, the size
        # issue 13's targets were set with
        return np.round(rng.uniform(-1, 1, (n, n)), 4).astype(np.float32)

    accept = shm = None
    if op.startswith("stack"):  # stackNxCOUNT: COUNT NxN products, numpy.matmul's stack
        n, count = (int(x) for x in op[5:].split("x"))
        a, b = (np.round(rng.uniform(-1, 1, (count, n, n)), 4).astype(np.float32) for _ in range(2))
        expect, path, k = np.matmul(a.astype(np.float64), b), "/v1/gemm", n
        body, ctype, accept = multipart({"a": a, "b": b}), f"multipart/form-data; boundary={BOUNDARY}", NPY
    elif op.startswith("gemm"):
        n = int(op[4:])
        a, b = mat(n), mat(n)
        expect = a.astype(np.float64) @ b
        path, k = "/v1/gemm", n
        if fmt == "npy":
            body, ctype, accept = multipart({"a": a, "b": b}), f"multipart/form-data; boundary={BOUNDARY}", NPY
        elif fmt == "kserve":  # perf_analyzer's input data; check() posts the same as binary tensors
            path = "/v2/models/gemm/infer"
            pa_data = tmp / f"{name}.json"
            pa_data.write_text(json.dumps({"data": [{k: {"b64": base64.b64encode(m.tobytes()).decode(),
                                                         "shape": list(m.shape)} for k, m in (("a", a), ("b", b))}]}))
            body, ctype = kserve_binary(a, b), "application/octet-stream"
        elif fmt == "kjson":
            path = "/v2/models/gemm/infer"
            body = (f'{{"inputs": [{{"name": "a", "datatype": "FP32", "shape": [{n}, {n}], "data": {json_matrix(a)}}}, '
                    f'{{"name": "b", "datatype": "FP32", "shape": [{n}, {n}], "data": {json_matrix(b)}}}]}}').encode()
            ctype = "application/json"
        elif fmt == "shm":  # the caller registers the regions (shm.register) and closes them
            shm = ShmGemm(a, b)
            body, ctype = shm.body(0), "application/json"
        else:
            body, ctype = f'{{"a": {json_matrix(a)}, "b": {json_matrix(b)}}}'.encode(), "application/json"
    elif op.startswith("ata"):
        n = int(op[3:])
        a = mat(n)
        expect = a.T.astype(np.float64) @ a
        path, k = "/v1/ata", n
        body, ctype = f'{{"a": {json_matrix(a)}}}'.encode(), "application/json"
    else:  # hist1k: 1024 bytes
        data = rng.integers(0, 256, 1024)
        expect = np.bincount(data, minlength=256)
        path, k = "/v1/histogram", None
        body, ctype = json.dumps({"data": data.tolist()}).encode(), "application/json"
    f = tmp / f"{name}.body"
    f.write_bytes(body)
    return {"name": name, "path": path, "file": f, "size": len(body), "ctype": ctype,
            "accept": accept, "expect": expect, "k": k, "shm": shm,
            "pa_data": tmp / f"{name}.json" if fmt == "kserve" else None,
            "header_len": body.index(b"}]}") + 3 if fmt == "kserve" else None, "kserve": path.startswith("/v2")}


def kserve_binary(a, b):
    """The body perf_analyzer sends: a JSON header naming both tensors' sizes, then their bytes."""
    head = json.dumps({"inputs": [{"name": k, "datatype": "FP32", "shape": list(m.shape),
                                   "parameters": {"binary_data_size": m.nbytes}} for k, m in (("a", a), ("b", b))],
                       "outputs": [{"name": "c", "parameters": {"binary_data": True}}]}).encode()
    return head + a.tobytes() + b.tobytes()


def check(base, row):
    """One request, answer compared with NumPy: a fast wrong server must not win. None if right."""
    headers = {"Content-Type": row["ctype"]} | ({"Accept": row["accept"]} if row["accept"] else {})
    if row.get("header_len"):
        headers["Inference-Header-Content-Length"] = str(row["header_len"])
    body = row["file"].read_bytes()
    if row["shm"]:  # both daemons write the one C object: another's answer must not pass for this one's
        row["shm"].c[1] = np.nan
        body = row["shm"].body(1)
    try:
        r = requests.post(base + row["path"], data=body, headers=headers, timeout=60)
    except requests.RequestException as e:
        return repr(e)
    if r.status_code != 200:
        return f"HTTP {r.status_code}: {r.text[:200]}"
    if r.headers.get("Content-Type", "").startswith(NPY):
        got = np.load(io.BytesIO(r.content), allow_pickle=False)
    elif row.get("kserve"):
        hl = int(r.headers.get("Inference-Header-Content-Length", len(r.content)))
        out = json.loads(r.content[:hl])["outputs"][0]
        data = np.frombuffer(r.content[hl:], np.float32) if hl < len(r.content) else np.asarray(out["data"])
        got = data.astype(np.float64).reshape(out["shape"])
    else:
        res = r.json()["result"]
        if row["shm"]:  # the answer only says where C went
            if res.get("shm", {}).get("region") != row["shm"].regions["c"]:
                return f"result not written to region {row['shm'].regions['c']}: {r.text[:200]}"
            got = row["shm"].c[1].astype(np.float64)
        else:
            got = np.asarray(res["counts"]) if "counts" in res else \
                np.asarray(res["data"], np.float64).reshape(res["rows"], res["cols"])
    want = row["expect"]
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    # float32 accumulation over k terms of magnitude <= 1; a wrong answer is off by O(1)
    tol = 0 if row["k"] is None else 1e-5 * row["k"]
    err = float(np.abs(got - want).max())
    return None if err <= tol else f"max error {err:.3g} > {tol:.3g}"


# -- load ----------------------------------------------------------------------------------------
def wrk_threads(conns):
    """wrk's threads: with 4 on the 16-core machine, wrk itself was the limit of the 1024² .npy
    row (4.1 cores busy; 1139 jobs/s, p99 229 ms, against 1573 and 88 ms with 8 and 1700 and 80
    ms with 12, H200 machine), which had made 2 GPUs look no faster than one."""
    threads = int(os.environ.get("BENCH_LOAD_WRK_THREADS") or max(4, (os.cpu_count() or 8) // 2))
    return max(1, min(threads, conns))


def wrk(base, row, conns, secs):
    cmd = [WRK, "-t", str(wrk_threads(conns)), "-c", str(conns), "-d", f"{secs}s", "--timeout", "10s",
           "-s", str(LUA), base + row["path"], "--", str(row["file"]), row["ctype"],
           row["accept"] or "-"] + (["codes"] if os.environ.get("BENCH_LOAD_CODES") == "1" else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 120)
    line = next((x for x in out.stdout.splitlines() if x.startswith("LOAD ")), None)
    if line is None:
        raise RuntimeError(f"{shlex.join(cmd)}: no result (rc {out.returncode}):\n"
                           + out.stdout[-2000:] + out.stderr[-2000:])
    r = json.loads(line[5:])
    s = r["duration_us"] / 1e6
    sock = r["connect"] + r["read"] + r["write"] + r["timeout"]
    return {"jobs_s": (r["requests"] - r["status_errors"]) / s, "mean_ms": r["mean_us"] / 1e3,
            "p50_ms": r["p50_us"] / 1e3,
            "p90_ms": r["p90_us"] / 1e3, "p99_ms": r["p99_us"] / 1e3, "max_ms": r["max_us"] / 1e3,
            "non2xx": r["status_errors"], "socket_errors": sock, "requests": r["requests"],
            "codes": " ".join(f"{k}:{v}" for k, v in sorted(r["codes"].items()))}


def print_machine_costs(build):
    """The same machine kind can differ 2x from one start to the next (the GPU machine is a VM):
    what its system calls, wake-ups and memory cost this time goes beside the figures."""
    for exe in (build / "bench" / "sys_costs", build / "sys_costs"):
        if exe.exists():
            out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120).stdout
            print("machine costs this run (make sys-costs):")
            print("".join(f"  {line}\n" for line in out.splitlines()), end="")
            return


def perf_analyzer(base, row, conns, secs):
    """perf_analyzer at one concurrency, its last (stable) window: jobs/s and latencies."""
    window_ms = max(1000, secs * 1000 // 3)
    cmd = [PERF_ANALYZER, "-u", base.split("://", 1)[1], "-m", "gemm", "--input-data", str(row["pa_data"]),
           "--concurrency-range", str(conns), "--measurement-interval", str(window_ms),
           "--stability-percentage", "100", "--max-trials", "6"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=secs * 6 + 120)
    text = out.stdout + out.stderr
    rate = re.findall(r"Throughput: ([0-9.]+) infer/sec", text)
    if out.returncode != 0 or not rate:
        raise RuntimeError(f"{shlex.join(cmd)}: rc {out.returncode}:\n{text[-2000:]}")

    def usec(label):
        m = re.findall(rf"{label}: (\d+) usec", text)
        return float(m[-1]) / 1e3 if m else float("nan")
    return {"jobs_s": float(rate[-1]), "mean_ms": usec("Avg latency"), "p50_ms": usec("p50 latency"),
            "p90_ms": usec("p90 latency"), "p99_ms": usec("p99 latency"), "max_ms": float("nan"),
            "non2xx": 0, "socket_errors": 0, "requests": int(re.findall(r"Request count: (\d+)", text)[-1]),
            "codes": ""}


def answered(base):
    """Requests the daemon has answered, any route and status (crunchd_requests_total)."""
    text = requests.get(f"{base}/metrics", timeout=10).text
    return sum(float(v) for v in re.findall(r"^crunchd_requests_total\{[^}]*\} (\S+)$", text, re.M))


def cpu_s(pid):
    """A process's user + system CPU seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(base, row, conns, pid=None):
    """One run after a warm-up; with the daemon's pid, its CPU and the load generator's per job."""
    load = perf_analyzer if row.get("pa_data") else wrk
    warm = float(os.environ.get("BENCH_LOAD_WARMUP", "1"))
    if warm > 0 and load is wrk:
        wrk(base, row, conns, max(1, round(warm)))  # fills pools and caches; thrown away (perf_analyzer warms itself)
    if pid:
        n0, c0, k0 = answered(base), cpu_s(pid), resource.getrusage(resource.RUSAGE_CHILDREN)
    r = load(base, row, conns, int(os.environ.get("BENCH_LOAD_SECONDS", "10")))
    if pid:
        n = answered(base) - n0 - 1  # the metrics request itself
        k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if n > 0:
            r["cpu_us"] = (cpu_s(pid) - c0) / n * 1e6
            r["client_cpu_us"] = (k1.ru_utime + k1.ru_stime - k0.ru_utime - k0.ru_stime) / n * 1e6
    return r


def device_busy(base):
    """Each device's crunchd_device_busy_seconds_total, by device label."""
    out = {}
    for line in requests.get(f"{base}/metrics", timeout=10).text.splitlines():
        m = re.match(r'^crunchd_device_busy_seconds_total\{device="([^"]*)"[^}]*\} (\S+)$', line)
        if m:  # the label is the device's index and name
            out[m.group(1)] = float(m.group(2))
    return out


def multi_gpu(daemon, daemon_cls, daemon_args, tmp, conns):
    """Issue 13's 2-GPU rows: 1024x1024 GEMM on every GPU against one (a second daemon that sees
    only the first, CUDA_VISIBLE_DEVICES=0), and each device's busy fraction over the run: does the
    load spread, and does it scale. The .npy row's bytes cross loopback TCP; the shm row's stay in
    shared memory registered with both daemons."""
    specs = [make_row(name, tmp) for name in MULTI_GPU_ROWS]
    shm = next(s["shm"] for s in specs if s["shm"])
    one, lines, rows = None, [], []
    try:
        one = daemon_cls(daemon_args, env={"CUDA_VISIBLE_DEVICES": "0"}, name="bench-load-1gpu", host_path=True,
                         workdir=tmp / "daemon-1gpu").start()
        daemons = {"one GPU": one, "every GPU": daemon}
        for d in daemons.values():
            shm.register(d.base)
        for spec in specs:
            for c in conns:
                got = {}
                for label, d in daemons.items():
                    if (why := check(d.base, spec)) is not None:
                        raise RuntimeError(f"{spec['name']} on {label}: wrong answer: {why}")
                    before, t0 = device_busy(d.base), time.monotonic()
                    r = measure(d.base, spec, c)
                    # over the warm-up too: measure()'s whole span, not BENCH_LOAD_SECONDS alone
                    after, span = device_busy(d.base), time.monotonic() - t0
                    busy = "/".join(f"{(after[k] - before.get(k, 0.0)) / span:.2f}" for k in sorted(after))
                    got[label] = r["jobs_s"]
                    rows.append({"row": spec["name"], "conns": c, "gpus": label, "jobs_s": r["jobs_s"],
                                 "p99_ms": r["p99_ms"], "busy": busy, "body_bytes": spec["size"]})
                    print(f"{spec['name']} @{c} on {label:<9}: {r['jobs_s']:>8.0f} jobs/s, p99 "
                          f"{r['p99_ms']:.1f} ms, device busy {busy}", flush=True)
                ratio = got["every GPU"] / got["one GPU"] if got["one GPU"] else 0.0
                ok = ratio >= MULTI_GPU_TARGET
                lines.append(f"  {'PASS' if ok else 'FAIL'} {spec['name']} @{c}: every GPU {ratio:.2f}x one "
                             f"(>= {MULTI_GPU_TARGET}x)")
    finally:
        shm.close()  # before the daemons stop: unregistered from both, unlinked
        if one:
            one.stop()
    return rows, lines


# -- servers -------------------------------------------------------------------------------------
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_sees_a_gpu():
    """Whether PyTorch is installed here with a CUDA device (checked in a child: the parent never
    touches CUDA)."""
    if importlib.util.find_spec("torch") is None:
        return False
    probe = subprocess.run([sys.executable, "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"],
                           capture_output=True, timeout=120)
    return probe.returncode == 0


ALT_LABELS = {"alt": "aiohttp + NumPy", "torch": "aiohttp + PyTorch (cuda)"}


def start_alt(workers, tmp, compute="numpy"):
    env = dict(os.environ)
    if workers > 1:
        # N processes each with a BLAS pool as wide as the machine would oversubscribe it: one
        # BLAS thread per process, as a deployment of one worker per core sets
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    log = tmp / f"alt_server-{compute}.log"
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ALT), "--port", str(port), "--workers",
                             str(workers), "--compute", compute], stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)
    deadline = time.monotonic() + 180  # 16 CUDA contexts take a while
    while "listening on" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_alt(proc)
            raise RuntimeError("alt_server did not start:\n" + log.read_text()[-3000:])
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port}"


def stop_alt(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the workers go with it
            proc.wait()


# -- report --------------------------------------------------------------------------------------
def fmt_row(r):
    def side(prefix):
        if f"{prefix}_jobs_s" not in r:
            return f"{r.get(prefix + '_note', '-'):>32}"
        flag = " ERR" if r[f"{prefix}_non2xx"] or r[f"{prefix}_socket_errors"] else ""
        return (f"{r[prefix + '_jobs_s']:>10.0f} {r[prefix + '_p50_ms']:>7.2f} "
                f"{r[prefix + '_p99_ms']:>7.2f} {r[prefix + '_non2xx'] + r[prefix + '_socket_errors']:>5}{flag}")
    ratio = f"{r['ratio']:>6.1f}x" if r.get("ratio") else "      -"
    cpu = f"{r['crunchd_cpu_us']:>7.0f} {r.get('crunchd_client_cpu_us', 0):>7.0f}" if r.get("crunchd_cpu_us") else " " * 15
    torch = f"  |  {side('torch')}" if any(k.startswith("torch_") for k in r) else ""
    return f"{r['row']:<14} {r['conns']:>5}  {side('crunchd')} {cpu}  |  {side('alt')}{torch}  {ratio}"


def targets(results):
    at = {r["row"]: r for r in results if r["conns"] == TARGET_CONNS}
    lines = []
    for name, rate, p99 in TARGETS:
        r = at.get(name)
        if r is None or "crunchd_jobs_s" not in r:
            lines.append(f"  {name} @{TARGET_CONNS}: not run")
            continue
        ok = r["crunchd_jobs_s"] >= rate and (p99 is None or r["crunchd_p99_ms"] <= p99) \
            and not (r["crunchd_non2xx"] or r["crunchd_socket_errors"])
        want = f">= {rate:,} jobs/s" + (f", p99 <= {p99} ms" if p99 else "")
        lines.append(f"  {'PASS' if ok else 'FAIL'} {name} @{TARGET_CONNS}: "
                     f"{r['crunchd_jobs_s']:,.0f} jobs/s, p99 {r['crunchd_p99_ms']:.2f} ms ({want})")
    for r in results:  # KServe against /v1, same machine, same load: rate, and the daemon's CPU per job
        v1 = next((x for x in results if x["row"] == KSERVE_VS.get(r["row"]) and x["conns"] == r["conns"]), None)
        if not v1 or not r.get("crunchd_jobs_s") or not v1.get("crunchd_jobs_s"):
            continue
        rate = v1["crunchd_jobs_s"] / r["crunchd_jobs_s"]
        cpu = r.get("crunchd_cpu_us", 0) / v1["crunchd_cpu_us"] if v1.get("crunchd_cpu_us") else float("nan")
        ok = rate <= KSERVE_TARGET or cpu <= KSERVE_TARGET
        lines.append(f"  {'PASS' if ok else 'FAIL'} {r['row']} @{r['conns']}: /v1 {v1['row']} is {rate:.2f}x its "
                     f"rate; daemon CPU per job {cpu:.2f}x /v1's ({r.get('crunchd_cpu_us', 0):.0f} vs "
                     f"{v1['crunchd_cpu_us']:.0f} us; load generator {r.get('crunchd_client_cpu_us', 0):.0f} vs "
                     f"{v1.get('crunchd_client_cpu_us', 0):.0f} us) (either <= {KSERVE_TARGET}x)")
    for name, r in at.items():
        if r.get("ratio"):
            errs = r["crunchd_non2xx"] + r["crunchd_socket_errors"]
            ok = r["ratio"] >= TARGET_RATIO and not errs
            lines.append(f"  {'PASS' if ok else 'FAIL'} {name} @{TARGET_CONNS}: {r['ratio']:.1f}x "
                         f"the stronger alternative, {ALT_LABELS[r['ratio_vs']]} (>= {TARGET_RATIO:.0f}x)"
                         + (f", crunchd had {errs} errors" if errs else ""))
    return lines


def plot(results, png):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (make deps)")
        return
    rows = list(dict.fromkeys(r["row"] for r in results))
    cols = min(4, len(rows))
    fig, axes = plt.subplots((len(rows) + cols - 1) // cols, cols, squeeze=False,
                             figsize=(4 * cols, 3.2 * ((len(rows) + cols - 1) // cols)))
    for ax, name in zip(axes.flat, rows):
        rs = [r for r in results if r["row"] == name]
        for prefix, label in (("crunchd", "crunchd"), *ALT_LABELS.items()):
            pts = [(r["conns"], r[f"{prefix}_jobs_s"]) for r in rs if f"{prefix}_jobs_s" in r]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=label)
        ax.set(title=name, xscale="log", yscale="log", xlabel="connections", ylabel="jobs/s")
        ax.set_xticks(sorted({r["conns"] for r in rs}), [str(c) for c in sorted({r["conns"] for r in rs})])
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"wrote {png}")


def main():
    global WRK
    t0 = time.monotonic()
    build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build").resolve()
    out_csv = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else ROOT / "bench/results/load.csv")
    os.environ.setdefault("CRUNCHD_BIN", str(build / "crunchd"))
    import conftest
    conftest.BIN = os.environ["CRUNCHD_BIN"]

    WRK = os.environ.get("WRK") or shutil.which("wrk")
    if not WRK:
        sys.exit("bench-load: no wrk (make deps installs it; or set WRK=/path/to/wrk)")
    rows = env_list("BENCH_LOAD_ROWS", ALL_ROWS)
    conns = env_list("BENCH_LOAD_CONNS", ALL_CONNS, int)
    if unknown := set(rows) - set(ALL_ROWS):
        sys.exit(f"bench-load: unknown rows {sorted(unknown)} (known: {', '.join(ALL_ROWS)})")
    alt_workers = int(os.environ.get("BENCH_LOAD_ALT_WORKERS", os.cpu_count()))
    if alt_workers and importlib.util.find_spec("aiohttp") is None:
        print("aiohttp is not installed: no alternative server (make deps)")
        alt_workers = 0
    alts = env_list("BENCH_LOAD_ALTS", ["numpy"] + (["torch"] if alt_workers and torch_sees_a_gpu() else []))
    if any(s.endswith("_kserve") for s in rows) and not os.access(PERF_ANALYZER, os.X_OK):
        sys.exit(f"bench-load: {PERF_ANALYZER} is missing (make deps fetches it)")
    daemon_args = shlex.split(os.environ.get("CRUNCHD_LOAD_ARGS", ""))

    class Daemon(conftest.Daemon):
        def check_log(self):
            # the log has a line per request (GBs after a run); a sanitizer report would end it
            with open(self.log_path, "rb") as f:
                f.seek(max(0, f.seek(0, 2) - (1 << 20)))
                tail = f.read().decode(errors="replace")
            for marker in conftest.SANITIZER_MARKERS:
                if marker in tail:
                    raise conftest.DaemonError(f"sanitizer report in {self.log_path}")

    results, wrong, multi_rows, multi_lines = [], False, [], []
    with tempfile.TemporaryDirectory(prefix="bench-load-") as t:
        tmp = pathlib.Path(t)
        specs = [make_row(name, tmp) for name in rows]
        daemon = Daemon(daemon_args, name="bench-load", host_path=True, workdir=tmp / "daemon").start()
        alt_procs = []
        try:
            info = daemon.get("/v1/info").json()
            device = (info.get("devices") or [{}])[0].get("name", "?")
            servers = {"crunchd": daemon.base}
            for compute in alts if alt_workers else ():
                proc, url = start_alt(alt_workers, tmp, compute)
                alt_procs.append(proc)
                servers["alt" if compute == "numpy" else "torch"] = url
            machine = {"backend": info.get("backend"), "device": device, "cpus": os.cpu_count(),
                       "daemon_args": shlex.join(daemon_args), "alt_workers": alt_workers,
                       "alts": ",".join(alts) if alt_workers else "",
                       "seconds": os.environ.get("BENCH_LOAD_SECONDS", "10")}
            print(f"crunchd {info.get('version')} backend={machine['backend']} device={device} "
                  f"cpus={machine['cpus']} args='{machine['daemon_args']}'; alternatives: "
                  + (", ".join(ALT_LABELS[k] for k in servers if k != "crunchd") + f", {alt_workers} process(es) each"
                     if alt_workers else "none"))
            print_machine_costs(build)
            print(f"{'row':<14} {'conns':>5}  {'crunchd/s':>10} {'p50 ms':>7} {'p99 ms':>7} {'err':>5} "
                  f"{'cpu us':>7} {'client':>7}  |  {'numpy/s':>10} {'p50 ms':>7} {'p99 ms':>7} {'err':>5}"
                  + (f"  |  {'torch/s':>10} {'p50 ms':>7} {'p99 ms':>7} {'err':>5}" if "torch" in servers else "")
                  + "   ratio")
            for spec in specs:
                bad = {}
                for name, base in servers.items():
                    if spec["kserve"] and name != "crunchd":
                        bad[name] = "no KServe route"
                        continue
                    if (why := check(base, spec)) is not None:
                        print(f"{spec['name']}: {name} answered wrong: {why}")
                        bad[name], wrong = why, True
                for c in conns:
                    r = {"row": spec["name"], "conns": c, "threads": wrk_threads(c),
                         "body_bytes": spec["size"], **machine}
                    for name, base in servers.items():
                        if name in bad:
                            r[f"{name}_note"] = "no KServe route" if spec["kserve"] else "wrong answer: not loaded"
                            continue
                        try:
                            pid = daemon.proc.pid if name == "crunchd" else None
                            r |= {f"{name}_{k}": v for k, v in measure(base, spec, c, pid).items()}
                        except (RuntimeError, subprocess.TimeoutExpired) as e:
                            print(f"{spec['name']} @{c}: {name}: {e}")
                            r[f"{name}_note"] = "wrk failed"
                    best = max(("alt", "torch"), key=lambda k: r.get(f"{k}_jobs_s", 0))
                    if r.get("crunchd_jobs_s") and r.get(f"{best}_jobs_s"):
                        r["ratio"], r["ratio_vs"] = r["crunchd_jobs_s"] / r[f"{best}_jobs_s"], best
                    results.append(r)
                    print(fmt_row(r), flush=True)
            n_devices = len(info.get("devices") or [])
            if n_devices > 1 or os.environ.get("BENCH_LOAD_MULTI_GPU") == "1":
                multi_rows, multi_lines = multi_gpu(daemon, Daemon, daemon_args, tmp,
                                                    [c for c in conns if c >= 16] or conns)
        finally:
            for proc in alt_procs:
                stop_alt(proc)
            daemon.stop()

    keys = ["row", "conns", "threads", "body_bytes"]
    for prefix in ("crunchd", "alt", "torch"):
        keys += [f"{prefix}_{k}" for k in ("jobs_s", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms",
                                           "non2xx", "socket_errors", "requests", "codes", "note", "cpu_us",
                                           "client_cpu_us")]
    keys += ["ratio", "ratio_vs", *machine]
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    with open(out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        for r in results:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    print(f"wrote {out_csv}")
    plot(results, out_csv.with_suffix(".png"))
    if multi_rows:
        multi_csv = out_csv.with_name(out_csv.stem + "-multi-gpu.csv")
        with open(multi_csv, "w", newline="") as f:
            w = csv.DictWriter(f, list(multi_rows[0]))
            w.writeheader()
            w.writerows(multi_rows)
        print(f"wrote {multi_csv}")
    print(f"targets ({TARGET_CONNS} connections):")
    print("\n".join(targets(results) + multi_lines))
    print(f"bench-load: {time.monotonic() - t0:.0f} s in all")
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
