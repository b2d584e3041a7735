"""make bench-load end to end at its smallest: one row, one connection, one second, both servers
(the alternative when aiohttp is installed). The benchmark runs for many minutes on the GPU
machine, where a crash at the end (a CSV column the header lacked did that once) loses the
whole run; here it must finish, write its CSV and plot, and fill the columns the plots read."""
import csv
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import BACKEND, BIN, ROOT, SLOW


@pytest.mark.skipif(not shutil.which("wrk"), reason="wrk is not installed (make deps installs it)")
def test_bench_load_writes_its_csv(tmp_path):
    env = os.environ | {"CRUNCHD_BIN": BIN, "CRUNCHD_BACKEND": BACKEND, "BENCH_LOAD_ROWS": "gemm16_json",
                        "BENCH_LOAD_CONNS": "1", "BENCH_LOAD_SECONDS": "1", "BENCH_LOAD_WARMUP": "0",
                        "BENCH_LOAD_ALT_WORKERS": "1", "BENCH_LOAD_ALTS": "numpy"}
    out = tmp_path / "load.csv"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_load.py"), str(pathlib.Path(BIN).parent),
                        str(out)], env=env, capture_output=True, text=True, timeout=180 * SLOW)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "targets (64 connections)" in r.stdout
    rows = list(csv.DictReader(out.open()))
    assert [(x["row"], x["conns"]) for x in rows] == [("gemm16_json", "1")]
    row = rows[0]
    assert float(row["crunchd_jobs_s"]) > 0 and float(row["crunchd_mean_ms"]) > 0
    assert float(row["crunchd_p50_ms"]) <= float(row["crunchd_p99_ms"])
    assert row["backend"] == BACKEND
    if row["alt_jobs_s"]:  # aiohttp present: the ratio is the row's point
        assert float(row["ratio"]) == pytest.approx(float(row["crunchd_jobs_s"]) / float(row["alt_jobs_s"]), rel=1e-4)
        assert row["ratio_vs"] == "alt"
    assert float(row["crunchd_cpu_us"]) > 0 and float(row["crunchd_client_cpu_us"]) > 0


@pytest.mark.skipif(not shutil.which("wrk"), reason="wrk is not installed (make deps installs it)")
def test_bench_load_kserve_rows_by_perf_analyzer(tmp_path):
    """The KServe rows: perf_analyzer's figures beside wrk's /v1 .npy row, compared by rate and by
    the daemon's CPU per job."""
    env = os.environ | {"CRUNCHD_BIN": BIN, "CRUNCHD_BACKEND": BACKEND, "BENCH_LOAD_ROWS": "gemm64_npy,gemm64_kserve",
                        "BENCH_LOAD_CONNS": "2", "BENCH_LOAD_SECONDS": "1", "BENCH_LOAD_WARMUP": "0",
                        "BENCH_LOAD_ALT_WORKERS": "0"}
    out = tmp_path / "load.csv"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_load.py"), str(pathlib.Path(BIN).parent),
                        str(out)], env=env, capture_output=True, text=True, timeout=240 * SLOW)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = {x["row"]: x for x in csv.DictReader(out.open())}
    assert set(rows) == {"gemm64_npy", "gemm64_kserve"}
    assert float(rows["gemm64_kserve"]["crunchd_jobs_s"]) > 0 and float(rows["gemm64_kserve"]["crunchd_cpu_us"]) > 0
    assert "gemm64_kserve @2: /v1 gemm64_npy is" in r.stdout, r.stdout[-2000:]


def test_alt_server_torch_answers_as_numpy(tmp_path):
    """The PyTorch alternative, where it can run (a GPU machine): the same answers as NumPy's."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import bench_load
    if not bench_load.torch_sees_a_gpu():
        pytest.skip("PyTorch with a CUDA device is not here")
    proc, base = bench_load.start_alt(1, tmp_path, "torch")
    try:
        import requests
        g = np.random.default_rng(5)
        a, b = g.uniform(-1, 1, (33, 17)).astype(np.float32), g.uniform(-1, 1, (17, 9)).astype(np.float32)
        res = requests.post(base + "/v1/gemm", json={"a": a.tolist(), "b": b.tolist()}, timeout=60).json()["result"]
        np.testing.assert_allclose(np.asarray(res["data"]).reshape(33, 9), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-5)
        data = g.integers(0, 256, 1000)
        res = requests.post(base + "/v1/histogram", json={"data": data.tolist()}, timeout=60).json()["result"]
        np.testing.assert_array_equal(res["counts"], np.bincount(data, minlength=256))
    finally:
        bench_load.stop_alt(proc)


@pytest.mark.skipif(not shutil.which("wrk"), reason="wrk is not installed (make deps installs it)")
def test_bench_load_multi_gpu_rows(tmp_path):
    """The every-GPU rows forced on one device (on the cpu backend: the ratio means nothing, the code
    path is the point): the shm row's operands and output in regions registered with both daemons,
    its answer checked against NumPy (a wrong one ends the script non-zero), both rows in the CSV,
    and the /dev/shm objects gone afterwards."""
    env = os.environ | {"CRUNCHD_BIN": BIN, "CRUNCHD_BACKEND": BACKEND, "BENCH_LOAD_ROWS": "gemm16_json",
                        "BENCH_LOAD_CONNS": "1", "BENCH_LOAD_SECONDS": "1", "BENCH_LOAD_WARMUP": "0",
                        "BENCH_LOAD_ALT_WORKERS": "0", "BENCH_LOAD_MULTI_GPU": "1"}
    out = tmp_path / "load.csv"
    p = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "bench_load.py"), str(pathlib.Path(BIN).parent),
                          str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = p.communicate(timeout=180 * SLOW)
    assert p.returncode == 0, stdout[-3000:] + stderr[-3000:]
    for name in ("gemm1024_npy", "gemm1024_shm"):
        assert re.search(rf"^  (PASS|FAIL) {name} @1: every GPU [\d.]+x one \(>= 1.8x\)$", stdout, re.M), stdout
    rows = list(csv.DictReader(out.with_name("load-multi-gpu.csv").open()))
    assert [(x["row"], x["gpus"]) for x in rows] == [
        ("gemm1024_npy", "one GPU"), ("gemm1024_npy", "every GPU"),
        ("gemm1024_shm", "one GPU"), ("gemm1024_shm", "every GPU")]
    for x in rows:
        assert float(x["jobs_s"]) > 0 and float(x["p99_ms"]) > 0, x
    npy, shm = int(rows[0]["body_bytes"]), int(rows[2]["body_bytes"])
    assert npy > 8 << 20 and shm < 1024, (npy, shm)  # the shm body names the regions, carries no matrix
    assert "unregistering" not in stdout, stdout  # every region came off both daemons
    assert not list(pathlib.Path("/dev/shm").glob(f"crunchd-bench-load-{p.pid}-*"))
