"""Every GPU of the machine serves every kernel: own kernels with more than 48 KB of shared memory
(whose opt-in holds per device) and uploads received into one device's memory (whose jobs may run
there only), many at once so that both devices take work. Needs the cuda backend and two GPUs;
skipped elsewhere. Two bugs a single GPU cannot show were found on a 2x H200 host this way: the
opt-in made once per process (the second device refused the launch, 400 "invalid argument"), and
a job bound to one device left queued while its device's workers slept (the requests stalled)."""
import io
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests

from conftest import BACKEND, Daemon

pytestmark = pytest.mark.skipif(BACKEND != "cuda", reason="needs the cuda backend and two GPUs")

N = 1536  # float32 parts of 9 MiB: received into device memory (sinks start at 8 MiB)
JOBS, CLIENTS = 24, 12
CASES = [("gemm", "dbuf", np.float32, 1e-5), ("gemm", "tc-tf32", np.float32, 5e-3),
         ("gemm", "tc", np.float16, 2e-3), ("gemm", "tc-3xtf32", np.float32, 1e-5),
         ("ata", "symtile", np.float32, 1e-5), ("ata", "dmma", np.float64, 1e-12)]


def npy(m):
    buf = io.BytesIO()
    np.save(buf, m)
    return buf.getvalue()


def device_jobs(d):
    text = d.get("/metrics").text
    return [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith("crunchd_device_jobs_total{")]


@pytest.fixture(scope="module")
def two_gpus(tmp_path_factory):
    d = Daemon(["--log-format", "text"], name="multi-gpu", workdir=tmp_path_factory.mktemp("multi-gpu"),
               all_gpus=True).start()
    try:
        if len(d.get("/v1/info").json().get("devices", [])) < 2:
            pytest.skip("one GPU: nothing to spread")
        yield d
    finally:
        d.stop()


@pytest.mark.parametrize("op,kernel,dtype,tol", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_every_device_runs_the_kernel(two_gpus, op, kernel, dtype, tol):
    rng = np.random.default_rng(11)
    a = rng.uniform(-1, 1, (N, N)).astype(dtype)
    b = rng.uniform(-1, 1, (N, N)).astype(dtype)
    ref = a.astype(np.float64).T @ a if op == "ata" else a.astype(np.float64) @ b
    files = {"a": ("a.npy", npy(a))} | ({} if op == "ata" else {"b": ("b.npy", npy(b))})
    before = device_jobs(two_gpus)

    def one(_):
        # a stalled job fails here, in a minute, instead of hanging the suite
        tf32 = "&precision=tf32" if kernel == "tc-tf32" else ""  # a named TF32 kernel must be accepted
        r = requests.post(f"{two_gpus.base}/v1/{op}?kernel={kernel}{tf32}", files=files,
                          headers={"Accept": "application/x-npy"}, timeout=60)
        assert r.status_code == 200, r.text[:300]
        c = np.load(io.BytesIO(r.content)).astype(np.float64)
        return np.linalg.norm(c - ref) / np.linalg.norm(ref)

    with ThreadPoolExecutor(CLIENTS) as pool:
        errors = list(pool.map(one, range(JOBS)))
    assert max(errors) <= tol, errors
    ran = [x - y for x, y in zip(device_jobs(two_gpus), before)]
    assert len(ran) >= 2 and sum(ran) >= JOBS and all(n > 0 for n in ran), ran
