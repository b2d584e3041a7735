"""The Python client package (clients/python, `import crunchd`) against a real daemon: every
call checked against numpy over both transports, async jobs, compare mode, typed errors,
retries after 503, auth and TLS, and a pip install of the package."""

import importlib.util
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
import warnings

import numpy as np
import pytest
import requests

from client_harness import (BACKEND, CLIENT_DIR, DELAY_HEADER, ROOT, SLOW, UUID_RE,  # first
                            assert_close, gemm_ref)
import crunchd  # noqa: E402  (clients/python, by client_harness)
from crunchd import errors  # noqa: E402

PHASES = {"receive", "queue", "h2d", "kernel", "d2h", "total"}


def rng(seed):
    return np.random.default_rng(seed)


def check_meta(r, op, dtype, transport):
    """What every Result carries, whichever transport brought it."""
    assert r.op == op
    assert UUID_RE.match(r.id), r.id
    assert isinstance(r.kernel, str) and r.kernel
    assert r.backend == BACKEND and isinstance(r.device, str) and r.device
    assert r.dtype == dtype
    assert PHASES <= set(r.timings), r.timings
    assert all(v >= 0 for v in r.timings.values()), r.timings
    assert isinstance(r.batch, int) and r.batch >= 1
    rate = r.gbps if op == "histogram" else r.gflops
    assert isinstance(rate, float) and rate >= 0
    assert r.transport == transport
    assert r.headers["X-Crunchd-Job-Id"] == r.id
    assert "total" in r.headers["Server-Timing"]


def assert_edges(got, want):
    """numpy's edges: exactly for float64; float32 within an ulp or two (NumPy 2 computes a
    float32 array's linspace in float32, the daemon in double and rounds once)."""
    if want.dtype == np.float64:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * float(np.max(np.abs(want))))


# -- the package ---------------------------------------------------------------------------------

def test_imported_from_the_checkout_and_versions_agree():
    assert pathlib.Path(crunchd.__file__).resolve().is_relative_to(CLIENT_DIR)
    version = (ROOT / "VERSION").read_text().strip()
    assert crunchd.__version__ == version
    pyproject = (CLIENT_DIR / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == version
    deps = re.search(r"^dependencies = \[(.*)\]", pyproject, re.M).group(1)
    assert sorted(re.findall(r'"([a-z]+)', deps)) == ["numpy", "requests"]


def test_pip_install_target(tmp_path):
    """`pip install --no-deps --target DIR ./clients/python` builds and installs the package,
    and it imports from there. Offline when setuptools and wheel are here (make deps), else
    pip fetches setuptools into its isolated build environment. Built from a copy of
    clients/python: setuptools writes build/ and *.egg-info/ beside the sources, and a build/
    left by an earlier run could put stale modules in the wheel."""
    src = tmp_path / "src" / "clients" / "python"
    shutil.copytree(CLIENT_DIR, src, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-input",
           "--disable-pip-version-check", "--target", str(target), "./clients/python"]
    if importlib.util.find_spec("setuptools") and importlib.util.find_spec("wheel"):
        cmd.insert(4, "--no-build-isolation")
    p = subprocess.run(cmd, cwd=src.parents[1], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    p = subprocess.run([sys.executable, "-c", "import crunchd, sys; "
                        "print(crunchd.__file__); print(crunchd.__version__); "
                        "print(crunchd.Client, crunchd.ShapeMismatch)"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    path, version = p.stdout.splitlines()[:2]
    assert pathlib.Path(path).resolve().is_relative_to(target.resolve()), path
    assert version == crunchd.__version__
    assert list(target.glob("crunchd-*.dist-info")), list(target.iterdir())


def test_readme_python_example(daemon):
    """The README's client example runs as written (against the test daemon)."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    code = [b for b in blocks if "crunchd.Client(" in b]
    assert len(code) == 1, "one ```python block of the README uses the client"
    code = code[0].replace("http://localhost:8080", daemon.base)
    env = dict(os.environ, PYTHONPATH=str(CLIENT_DIR))
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=120 * SLOW)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[-2:] == ["done (512, 512)", "422 shape_mismatch b"], p.stdout
    assert lines[0].split()[-2:] == ["multipart", "npy"], lines[0]


# -- GEMM ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["json", "npy"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemm_matches_numpy(client, transport, dtype):
    g = rng(1)
    a = g.uniform(-1, 1, (7, 5)).astype(dtype)
    b = g.uniform(-1, 1, (5, 9)).astype(dtype)
    r = client.gemm(a, b, transport=transport)
    assert r.result.shape == (7, 9) and r.result.dtype == np.dtype(dtype)
    assert_close(r.result, gemm_ref(a, b), 5, dtype)
    check_meta(r, "gemm", dtype, transport)
    assert r.sent == ("json" if transport == "json" else "multipart")
    assert r.kernels is None
    np.testing.assert_array_equal(np.asarray(r), r.result)


@pytest.mark.parametrize("transport", ["json", "npy"])
@pytest.mark.parametrize("trans_a,trans_b", [(False, True), (True, False), (True, True)])
def test_gemm_alpha_beta_c_transposes(client, transport, trans_a, trans_b):
    g = rng(2)
    m, k, n = 6, 4, 3
    a = g.standard_normal((k, m) if trans_a else (m, k))
    b = g.standard_normal((n, k) if trans_b else (k, n))
    c = g.standard_normal((m, n))
    r = client.gemm(a, b, c=c, alpha=-1.5, beta=0.25, trans_a=trans_a, trans_b=trans_b,
                    transport=transport)
    assert r.dtype == "float64" and r.result.shape == (m, n)
    assert_close(r.result, gemm_ref(a, b, c, -1.5, 0.25, trans_a, trans_b), k, "float64")


def test_gemm_dtype_rules_and_layouts(client):
    g = rng(3)
    # lists of floats are float64 (numpy's default); ints and float32 make float32
    r = client.gemm([[1.0, 2.0], [3.0, 4.0]], [[5.0], [6.0]])
    assert r.result.dtype == np.float64 and r.result.tolist() == [[17.0], [39.0]]
    r = client.gemm([[1, 2], [3, 4]], [[5], [6]])
    assert r.result.dtype == np.float32 and r.result.tolist() == [[17.0], [39.0]]
    r = client.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), dtype="float64")
    assert r.dtype == "float64" and r.result.dtype == np.float64
    # Fortran order, a strided view and a big-endian array, over .npy
    base = g.standard_normal((40, 30))
    a = base[::2, ::3]
    b = np.asfortranarray(g.standard_normal((10, 8)))
    c = g.standard_normal((20, 8)).astype(">f8")
    for transport in ("json", "npy"):
        r = client.gemm(a, b, c=c, beta=1.0, transport=transport)
        assert_close(r.result, gemm_ref(a, b, c, 1.0, 1.0), 10, "float64", what=transport)
    with pytest.raises(ValueError, match="1 to 8 dimensions"):
        client.gemm(np.ones((1,) * 9), np.ones((1, 1)))
    with pytest.raises(TypeError, match="real numbers"):
        client.gemm(np.ones((1, 1), complex), np.ones((1, 1)))
    with pytest.raises(ValueError, match="float32, float64"):
        client.gemm(np.ones((1, 1)), np.ones((1, 1)), dtype="int32")
    with pytest.raises(ValueError, match="float32, float64"):
        client.ata(np.ones((1, 1), np.float16), dtype="float16")


@pytest.mark.parametrize("transport", ["json", "npy"])
def test_gemm_float16(client, transport):
    """float16 operands make a float16 job (float32 sums): the answer is within one float16 ulp
    of numpy's float64 product of the same values, rounded to float16; one float32 operand makes
    the job float32."""
    g = rng(21)
    a = g.uniform(-1, 1, (13, 40)).astype(np.float16)
    b = g.uniform(-1, 1, (40, 9)).astype(np.float16)
    r = client.gemm(a, b, transport=transport)
    check_meta(r, "gemm", "float16", transport)
    assert r.result.dtype == np.float16 and r.result.shape == (13, 9)
    want = gemm_ref(a, b).astype(np.float16).astype(np.float64)
    got = r.result.astype(np.float64)
    assert np.all(np.abs(got - want) <= 2.0 ** -10 * np.abs(want) + 2.0 ** -23 * 40), (got, want)
    r = client.gemm(a, b.astype(np.float32), transport=transport)
    assert r.dtype == "float32" and r.result.dtype == np.float32


def test_auto_transport_goes_by_size(client):
    g = rng(4)
    small = g.standard_normal((16, 16)).astype(np.float32)        # 1 KiB each way: JSON
    r = client.gemm(small, small)
    assert (r.sent, r.transport) == ("json", "json")
    assert r.raw is not None and r.raw["id"] == r.id
    big = g.standard_normal((160, 120)).astype(np.float32)         # 75 KiB in: .npy
    r = client.gemm(big, big[:30].T.copy())
    assert (r.sent, r.transport) == ("multipart", "json")         # 19 KiB out: JSON
    assert_close(r.result, gemm_ref(big, big[:30].T), 120, "float32")
    col = g.standard_normal((200, 1)).astype(np.float32)          # 160 KiB out: .npy answer
    r = client.gemm(col, col.T)
    assert (r.sent, r.transport) == ("json", "npy") and r.raw is None
    assert_close(r.result, gemm_ref(col, col.T), 1, "float32")
    with crunchd.Client(client.url, json_threshold=512) as tiny:  # 1 KiB is big to this one
        r = tiny.gemm(small, small)
        assert (r.sent, r.transport) == ("multipart", "npy")
    with crunchd.Client(client.url, transport="json") as js:      # the override, client-wide
        r = js.gemm(big, big.T)
        assert (r.sent, r.transport) == ("json", "json") and r.result.shape == (160, 160)
    # NaN cannot travel in JSON: auto sends .npy, json refuses before sending
    a = np.array([[np.nan, 1.0]])
    r = client.gemm(a, np.ones((2, 1)))
    assert r.sent == "multipart" and np.isnan(r.result[0, 0])
    with pytest.raises(ValueError, match="NaN"):
        client.gemm(a, np.ones((2, 1)), transport="json")
    with pytest.raises(ValueError, match="transport"):
        client.gemm(small, small, transport="xml")


def test_both_transports_give_the_same_answer(client):
    g = rng(5)
    a = g.standard_normal((33, 17)).astype(np.float32)
    b = g.standard_normal((17, 21)).astype(np.float32)
    rj = client.gemm(a, b, kernel="reference", transport="json")
    rn = client.gemm(a, b, kernel="reference", transport="npy")
    np.testing.assert_array_equal(rj.result, rn.result)  # float32 text round-trips exactly
    assert rj.result.dtype == rn.result.dtype == np.float32
    for attr in ("op", "kernel", "backend", "device", "dtype", "batch"):
        assert getattr(rj, attr) == getattr(rn, attr), attr
    assert set(rj.timings) == set(rn.timings) == PHASES
    assert rj.id != rn.id


def test_non_finite_result_comes_back_as_npy_in_auto(client):
    a = np.array([[1e30]], np.float32)
    r = client.gemm(a, a)
    assert r.transport == "npy" and np.isinf(r.result[0, 0]) and r.result.dtype == np.float32
    with pytest.raises(crunchd.NonFiniteResult) as ei:
        client.gemm(a, a, transport="json")
    assert ei.value.status == 422 and ei.value.code == "non_finite_result"


# -- AᵀA -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["json", "npy"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ata_matches_numpy(client, transport, dtype):
    a = rng(6).uniform(-1, 1, (23, 11)).astype(dtype)
    r = client.ata(a, transport=transport)
    assert r.result.shape == (11, 11) and r.result.dtype == np.dtype(dtype)
    ref = a.astype(np.float64).T @ a
    assert_close(r.result, ref, 23, dtype)
    np.testing.assert_array_equal(r.result, r.result.T)
    check_meta(r, "ata", dtype, transport)
    assert r.sent == transport


def test_ata_fortran_big(client):
    a = np.asfortranarray(rng(7).standard_normal((300, 40)))  # 94 KiB: .npy, read as its transpose
    r = client.ata(a)
    assert r.sent == "npy"
    assert_close(r.result, a.T @ a, 300, "float64")


# -- histograms ----------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["json", "npy"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_histogram_matches_numpy(client, transport, dtype):
    x = rng(8).standard_normal(5000).astype(dtype)
    for bins, rng_ in ((7, (-1.5, 2.0)), (10, None), (1, (0.0, 0.0))):
        r = client.histogram(x, bins=bins, range=rng_, transport=transport)
        counts, edges = np.histogram(x, bins=bins, range=rng_)
        assert r.counts.dtype == np.uint64 and r.counts.shape == (bins,)
        np.testing.assert_array_equal(r.counts, counts)
        assert r.edges.dtype == edges.dtype == np.dtype(dtype)
        assert_edges(r.edges, edges)
        assert r.bins == bins and r.range == (float(edges[0]), float(edges[-1]))
        check_meta(r, "histogram", dtype, transport)
    got_counts, got_edges = client.histogram(x, bins=3, transport=transport)  # unpacks as numpy's
    np.testing.assert_array_equal(got_counts, np.histogram(x, bins=3)[0])


@pytest.mark.parametrize("transport", ["json", "npy", "raw", "auto"])
def test_histogram_uint8(client, transport):
    u = rng(9).integers(0, 256, size=70000, dtype=np.uint8)  # 68 KiB: auto sends raw bytes
    r = client.histogram(u, transport=transport)
    np.testing.assert_array_equal(r.counts, np.bincount(u, minlength=256))
    np.testing.assert_array_equal(r.edges, np.arange(257, dtype=np.float64))
    assert r.dtype == "uint8" and r.range == (0.0, 256.0)
    assert r.sent == {"auto": "raw"}.get(transport, transport)
    r = client.histogram(u, bins=16, range=(10, 200), transport=transport)
    counts, edges = np.histogram(u, bins=16, range=(10, 200))
    np.testing.assert_array_equal(r.counts, counts)
    np.testing.assert_array_equal(r.edges, edges)


def test_histogram_other_dtypes_and_shapes(client):
    g = rng(10)
    x = g.integers(-300, 300, size=(40, 25)).astype(np.int16)  # any rank, flattened
    r = client.histogram(x)
    assert r.sent == "npy" and r.dtype == "int16"               # JSON has no int16: .npy
    counts, edges = np.histogram(x, bins=10)
    np.testing.assert_array_equal(r.counts, counts)
    np.testing.assert_array_equal(r.edges, edges)
    r = client.histogram(x, transport="json")                   # sent as float64 numbers
    assert r.dtype == "float64"
    np.testing.assert_array_equal(r.counts, counts)
    h = g.standard_normal(100).astype(np.float16)               # float16 goes as float32
    r = client.histogram(h, bins=5)
    np.testing.assert_array_equal(r.counts, np.histogram(h.astype(np.float32), bins=5)[0])
    with pytest.raises(TypeError):
        client.histogram(np.array([1 + 2j]))
    with pytest.raises(TypeError):
        client.histogram(np.ones(3), bins=[0, 1, 2])
    with pytest.raises(ValueError, match="raw"):
        client.histogram(np.ones(3), transport="raw")


def test_histogram_many_bins_edges_without_the_header(client):
    """Over 4 KiB of edges the .npy answer has X-Crunchd-Range only: the client computes
    numpy's edges from it."""
    x = rng(11).uniform(0, 1, 20000)
    r = client.histogram(x, bins=9000, range=(0.0, 1.0))  # 72 KB of counts: a .npy answer
    assert r.transport == "npy" and "X-Crunchd-Edges" not in r.headers
    counts, edges = np.histogram(x, bins=9000, range=(0.0, 1.0))
    np.testing.assert_array_equal(r.counts, counts)
    np.testing.assert_array_equal(r.edges, edges)


# -- compare mode, kernels, service endpoints ----------------------------------------------------

@pytest.mark.parametrize("transport", ["json", "npy"])
def test_compare_mode(client, transport):
    g = rng(12)
    a = g.standard_normal((20, 12)).astype(np.float32)
    b = g.standard_normal((12, 9)).astype(np.float32)
    cases = [("gemm", lambda: client.gemm(a, b, kernel="all", transport=transport),
              gemm_ref(a, b)),
             ("ata", lambda: client.ata(a, kernel="all", transport=transport), gemm_ref(a.T, a)),
             ("histogram", lambda: client.histogram(a, bins=5, kernel="all", transport=transport),
              np.histogram(a, bins=5)[0])]
    for op, call, ref in cases:
        r = call()
        names = {k["name"] for k in client.kernels(op) if "float32" in k["dtypes"]
                 and k["precision"] != "tf32"}
        assert r.transport == "json"  # the table only comes in JSON, whatever was asked
        assert {row["kernel"] for row in r.kernels} == names, (op, r.kernels)
        for row in r.kernels:
            assert row["status"] == "ok" and row["ms"] >= 0 and row["max_rel_error"] >= 0, row
        reference = [k["name"] for k in client.kernels(op) if k["reference"]]
        assert r.kernel in reference
        if op == "histogram":
            np.testing.assert_array_equal(r.counts, ref)
        else:
            assert_close(r.result, ref, 20, "float32", what=op)


def test_every_kernel_by_name(client):
    a = rng(13).standard_normal((9, 6))
    for k in client.kernels("gemm"):
        if "float64" not in k["dtypes"]:
            continue
        r = client.gemm(a, a.T, kernel=k["name"])
        assert r.kernel == k["name"]
        assert_close(r.result, a @ a.T, 6, "float64", what=k["name"])


def test_kernels_info_health(client, daemon):
    ks = client.kernels()
    assert {k["op"] for k in ks} == {"gemm", "ata", "histogram"}
    assert all(k["op"] == "ata" for k in client.kernels("ata"))
    info = client.info()
    assert info["name"] == "crunchd" and info["backend"] == BACKEND
    assert info["version"] == crunchd.__version__
    assert client.health() is True and client.ready() is True
    assert client.readiness()["ready"] is True
    client.wait_ready(timeout=5)
    assert "crunchd_requests_total" in client.metrics()
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    nobody = crunchd.Client(f"http://127.0.0.1:{port}", timeout=2)
    assert nobody.health() is False and nobody.ready() is False
    assert nobody.readiness()["ready"] is False
    with pytest.raises(requests.ConnectionError):
        nobody.info()


def test_one_session_is_reused(daemon):
    """Every request of a client goes through its requests.Session: one connection kept."""
    s = requests.Session()
    seen = []
    s.hooks["response"].append(lambda r, *a, **k: seen.append(r.status_code))
    c = crunchd.Client(daemon.base, session=s)
    c.gemm(np.ones((2, 2)), np.ones((2, 2)))
    c.gemm(np.ones((300, 300), np.float32), np.ones((300, 2), np.float32))  # multipart + .npy
    c.histogram(np.ones(100000, np.uint8))                                   # raw bytes
    c.ata(np.ones((4, 300)))                                                 # .npy answer
    c.info()
    assert seen == [200] * 5
    pm = s.get_adapter(daemon.base).poolmanager
    opened = sum(pm.pools[key].num_connections for key in pm.pools.keys())
    assert opened == 1, opened
    c.close()  # a session of the caller's stays open
    assert s.get(daemon.base + "/healthz").status_code == 200


# -- async jobs ----------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["json", "npy"])
def test_async_jobs_match_numpy(client, transport):
    g = rng(14)
    a = g.standard_normal((12, 8)).astype(np.float32)
    b = g.standard_normal((8, 5)).astype(np.float32)
    x = g.uniform(-1, 1, 3000)
    jobs = [client.submit("gemm", a=a, b=b, alpha=2.0, transport=transport),
            client.submit("ata", a, transport=transport),
            client.submit("histogram", data=x, bins=6, range=(-1, 1), transport=transport)]
    for job in jobs:
        assert UUID_RE.match(job.id) and job.location == f"/v1/jobs/{job.id}"
        assert job.sent == ("json" if transport == "json" else
                            "multipart" if job.op == "gemm" else "npy")
    gj, aj, hj = jobs
    assert gj.wait(timeout=30 * SLOW) == "done" and gj.status() == "done" and gj.done()
    assert PHASES <= set(gj.info["timings_ms"])
    r = gj.result()
    assert r.id == gj.id and r.transport == transport
    check_meta(r, "gemm", "float32", transport)
    assert_close(r.result, 2.0 * gemm_ref(a, b), 8, "float32")
    assert gj.result() is r  # fetched once
    r = aj.result(timeout=30 * SLOW)
    assert_close(r.result, gemm_ref(a.T, a), 12, "float32")
    r = hj.result(timeout=30 * SLOW)
    counts, edges = np.histogram(x, bins=6, range=(-1, 1))
    np.testing.assert_array_equal(r.counts, counts)
    np.testing.assert_array_equal(r.edges, edges)
    assert gj.cancel() == "done"  # forgets the finished job
    with pytest.raises(crunchd.NotFound) as ei:
        gj.status()
    assert ei.value.status == 404 and ei.value.code == "not_found"


def test_async_big_job_and_attach_by_id(client):
    a = rng(15).standard_normal((200, 150))  # 234 KiB: .npy both ways
    job = client.submit("ata", a=a)
    assert job.sent == "npy"
    again = client.job(job.id)               # e.g. another process, knowing only the id
    r = again.result(timeout=30 * SLOW)
    assert again.op == "ata" and r.transport == "npy" and r.result.shape == (150, 150)
    assert_close(r.result, a.T @ a, 200, "float64")
    assert job.result().id == job.id
    u = np.arange(256, dtype=np.uint8).repeat(3)
    hj = client.job(client.submit("histogram", u, transport="json").id)
    r = hj.result(timeout=30 * SLOW)
    np.testing.assert_array_equal(r.counts, np.full(256, 3))
    assert r.edges is None  # a uint8 job attached by id: its range is not known here


def test_async_wait_timeout_and_cancel(slow_client):
    c = slow_client(5000)
    job = c.submit("gemm", np.ones((2, 2)), np.ones((2, 2)))
    t0 = time.monotonic()
    with pytest.raises(crunchd.JobTimeout) as ei:
        job.wait(timeout=0.3)
    assert isinstance(ei.value, TimeoutError)
    assert 0.25 <= time.monotonic() - t0 < 3
    assert job.status() in ("queued", "running")
    assert job.cancel() == "cancelled"
    with pytest.raises(crunchd.NotFound):
        job.result(timeout=5)


def test_async_failed_job_raises_its_error(slow_client):
    c = slow_client(600)
    job = c.submit("ata", np.ones((3, 3)), timeout_ms=100)
    assert job.wait(timeout=30 * SLOW) == "failed"
    assert job.info["error"]["code"] == "deadline_exceeded"
    with pytest.raises(crunchd.DeadlineExceeded) as ei:
        job.result()
    assert ei.value.status == 504 and ei.value.code == "deadline_exceeded"


# -- errors --------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["json", "npy"])
def test_errors_are_typed(client, slow_client, transport):
    with pytest.raises(crunchd.ShapeMismatch) as ei:
        client.gemm(np.ones((2, 3)), np.ones((4, 2)), transport=transport)
    e = ei.value
    assert (e.status, e.code, e.field) == (422, "shape_mismatch", "b")
    assert isinstance(e, crunchd.InvalidRequest) and isinstance(e, crunchd.CrunchdError)
    assert "inner dimensions" in e.message and "shape_mismatch" in str(e)
    with pytest.raises(crunchd.ShapeMismatch) as ei:
        client.gemm(np.ones((2, 3)), np.ones((3, 2)), c=np.ones((3, 3)), transport=transport)
    assert ei.value.field == "c"
    with pytest.raises(crunchd.UnknownKernel) as ei:
        client.gemm(np.ones((2, 2)), np.ones((2, 2)), kernel="no-such-kernel",
                    transport=transport)
    assert (ei.value.status, ei.value.code, ei.value.field) == (400, "unknown_kernel", "kernel")
    with pytest.raises(crunchd.InvalidRequest) as ei:
        client.histogram(np.ones(4), bins=4, range=(1.0, 0.0), transport=transport)
    assert ei.value.status == 400 and ei.value.field == "range"
    with pytest.raises(crunchd.InvalidRequest) as ei:
        client.gemm(np.ones((2, 2), np.float64), np.ones((2, 2)), precision="tf32",
                    transport=transport)
    assert ei.value.code == "unsupported" and ei.value.field == "precision"
    with pytest.raises(crunchd.DeadlineExceeded) as ei:
        slow_client(500).ata(np.ones((2, 2)), timeout_ms=50, transport=transport)
    assert (ei.value.status, ei.value.code) == (504, "deadline_exceeded")
    with pytest.raises(crunchd.ShapeMismatch) as ei:  # async: refused before a job exists
        client.submit("gemm", np.ones((2, 3)), np.ones((4, 2)), transport=transport)
    assert ei.value.field == "b"


def test_json_refusals_keep_the_field(client):
    with pytest.raises(crunchd.InvalidRequest) as ei:  # 1e300 does not fit float32
        client.ata([[1.0, 1e300]], dtype="float32", transport="json")
    assert ei.value.code == "non_finite" and ei.value.field.startswith("a.data")
    with pytest.raises(crunchd.NotFound):
        client.job(str(uuid.uuid4())).status()


def test_every_contract_code_has_a_class():
    """Each error code of api/openapi.yaml maps to its class, by code and by status alone."""
    yaml = pytest.importorskip("yaml")
    spec = yaml.safe_load((ROOT / "api" / "openapi.yaml").read_text())
    codes = spec["components"]["schemas"]["ErrorCode"]["enum"]
    assert set(codes) == set(errors._BY_CODE), set(codes) ^ set(errors._BY_CODE)
    want = {"shape_mismatch": crunchd.ShapeMismatch, "unknown_kernel": crunchd.UnknownKernel,
            "too_large": crunchd.TooLarge, "queue_full": crunchd.Overloaded,
            "memory_budget": crunchd.Overloaded, "draining": crunchd.Overloaded,
            "device_fault": crunchd.DeviceError, "device_memory": crunchd.DeviceError,
            "deadline_exceeded": crunchd.DeadlineExceeded, "unauthorized": crunchd.Unauthorized,
            "not_found": crunchd.NotFound, "not_done": crunchd.NotDone,
            "cancelled": crunchd.JobCancelled, "internal": crunchd.ServerError,
            "non_finite_result": crunchd.NonFiniteResult, "invalid_field": crunchd.InvalidRequest}
    for code, cls in want.items():
        assert errors._BY_CODE[code] is cls, code

    def answer(status, body, headers=None):
        r = requests.Response()
        r.status_code = status
        r._content = body.encode()
        r.headers.update(headers or {})
        return r

    e = errors.error_from_response(answer(503, json.dumps(
        {"error": {"code": "queue_full", "message": "full"}}), {"Retry-After": "2"}))
    assert type(e) is crunchd.Overloaded and e.retry_after == 2.0 and e.field is None
    e = errors.error_from_response(answer(502, "<html>bad gateway</html>"))
    assert type(e) is crunchd.ServerError and e.code is None and "bad gateway" in e.message
    e = errors.error_from_response(answer(431, "<html>too big</html>"))
    assert type(e) is crunchd.InvalidRequest
    e = errors.error_from_response(answer(507, "{}"))
    assert type(e) is crunchd.DeviceError


def test_too_large(start_daemon):
    d = start_daemon("--max-elements", "1000", "--max-bins", "64")
    c = crunchd.Client(d.base)
    for transport in ("json", "npy"):
        with pytest.raises(crunchd.TooLarge) as ei:
            c.ata(np.ones((40, 30)), transport=transport)
        assert (ei.value.status, ei.value.code, ei.value.field) == (413, "too_large", "a")
        with pytest.raises(crunchd.TooLarge) as ei:
            c.histogram(np.ones(10), bins=65, transport=transport)
        assert ei.value.field == "bins"
    assert c.ata(np.ones((10, 10))).result[0, 0] == 10.0


# -- retries -------------------------------------------------------------------------------------

def test_retry_after_503_queue_full(start_daemon):
    """--workers 1 --queue-depth 1: a held job in the worker and one queued fill it; the next
    gets 503 queue_full + Retry-After: 1. Without retries that is an Overloaded error; with a
    time budget shorter than Retry-After it is raised at once; with the default policy the
    request waits, is sent again and succeeds."""
    d = start_daemon("--workers", "1", "--queue-depth", "1", "--test-hooks",
                     "--drain-timeout-s", "10")
    hold = 1500
    body = {"op": "ata", "a": [[1.0]]}
    r1 = requests.post(d.url("/v1/jobs"), json=body, headers={DELAY_HEADER: str(hold)}, timeout=10)
    assert r1.status_code == 202, r1.text
    t_fill = time.monotonic()
    held = d.url(f"/v1/jobs/{r1.json()['id']}")
    while requests.get(held, timeout=10).json()["status"] != "running":
        assert time.monotonic() - t_fill < 10, "the held job never started"
        time.sleep(0.01)
    r2 = requests.post(d.url("/v1/jobs"), json=body, timeout=10)
    assert r2.status_code == 202, r2.text  # waits in the queue behind the held job
    t_full = time.monotonic()

    a = np.ones((3, 3))
    with pytest.raises(crunchd.Overloaded) as ei:
        crunchd.Client(d.base, retry=None).ata(a)
    e = ei.value
    assert (e.status, e.code, e.retry_after) == (503, "queue_full", 1.0), e
    t0 = time.monotonic()
    with pytest.raises(crunchd.Overloaded):  # a 1 s Retry-After does not fit a 0.5 s budget
        crunchd.Client(d.base, retry=crunchd.Retry(max_time=0.5)).ata(a)
    assert time.monotonic() - t0 < 0.5
    with pytest.raises(crunchd.Overloaded):  # one attempt in all: no retry either
        crunchd.Client(d.base, retry=crunchd.Retry(attempts=1)).submit("ata", a)

    s = requests.Session()
    statuses = []
    s.hooks["response"].append(lambda r, *args, **kw: statuses.append(r.status_code))
    c = crunchd.Client(d.base, session=s)  # the default Retry: 5 attempts, 30 s
    assert time.monotonic() - t_full < hold / 1000.0 - 0.3, "too slow to test while full"
    big = np.linspace(-1, 1, 110 * 100).reshape(110, 100)  # .npy both ways: the body is sent again
    t0 = time.monotonic()
    r = c.ata(big)
    waited = time.monotonic() - t0
    assert r.sent == "npy" and r.transport == "npy"
    assert_close(r.result, big.T @ big, 110, "float64")
    assert statuses[0] == 503 and statuses[-1] == 200 and set(statuses) == {503, 200}, statuses
    assert waited >= 0.95 * (len(statuses) - 1), (waited, statuses)  # Retry-After honoured
    assert len(statuses) <= 3, statuses
    for held in (r1, r2):  # unfetched async results would hold the drain at teardown
        requests.delete(d.url(f"/v1/jobs/{held.json()['id']}"), timeout=10)


# -- auth and TLS --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def self_signed(tmp_path_factory):
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed (make deps)")
    d = tmp_path_factory.mktemp("client-tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return str(cert), str(key)


def test_auth_and_tls(start_daemon, self_signed, tmp_path):
    cert, key = self_signed
    token = "client-test-" + uuid.uuid4().hex
    tok = tmp_path / "token"
    tok.write_text(token + "\n")
    tok.chmod(0o600)
    d = start_daemon("--tls-cert", cert, "--tls-key", key, "--auth-token-file", str(tok),
                     start=False)
    d.verify = cert
    d.start()
    base = f"https://127.0.0.1:{d.port}"

    anon = crunchd.Client(base, verify=cert)
    assert anon.health() and anon.ready()  # probes need no token
    for call in (lambda: anon.gemm(np.ones((2, 2)), np.ones((2, 2))), anon.info,
                 lambda: anon.submit("ata", np.ones((2, 2)))):
        with pytest.raises(crunchd.Unauthorized) as ei:
            call()
        assert (ei.value.status, ei.value.code, ei.value.field) == \
            (401, "unauthorized", "Authorization")
    with pytest.raises(crunchd.Unauthorized):
        crunchd.Client(base, verify=cert, token="wrong").kernels()

    c = crunchd.Client(base, verify=cert, token=token)
    g = rng(16)
    a = g.standard_normal((150, 100))  # .npy both ways (117 KiB in, 78 KiB out), over TLS
    for transport in ("json", "npy"):
        r = c.gemm(a[:20, :10], a[:10, :20], transport=transport)
        assert_close(r.result, a[:20, :10] @ a[:10, :20], 10, "float64")
    r = c.ata(a)
    assert r.sent == "npy" and r.transport == "npy"
    assert_close(r.result, a.T @ a, 150, "float64")
    assert c.submit("ata", a).result(timeout=30 * SLOW).result.shape == (100, 100)

    with pytest.raises(requests.exceptions.SSLError):  # verify=True: the self-signed cert fails
        crunchd.Client(base, token=token).info()
    with warnings.catch_warnings():  # urllib3's InsecureRequestWarning: the point here
        warnings.simplefilter("ignore")
        assert crunchd.Client(base, token=token, verify=False).info()["name"] == "crunchd"


@pytest.mark.parametrize("transport", ["json", "npy"])
def test_gemm_bfloat16_with_ml_dtypes(client, transport):
    """ml_dtypes' bfloat16 arrays make bfloat16 jobs: over .npy as their bits with
    ?dtype=bfloat16, and the answer comes back as a bfloat16 array either way."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    g = rng(22)
    a = g.uniform(-1, 1, (11, 33)).astype(ml_dtypes.bfloat16)
    b = g.uniform(-1, 1, (33, 5)).astype(ml_dtypes.bfloat16)
    r = client.gemm(a, b, transport=transport)
    check_meta(r, "gemm", "bfloat16", transport)
    assert r.result.dtype == np.dtype(ml_dtypes.bfloat16) and r.result.shape == (11, 5)
    exact = gemm_ref(a.astype(np.float64), b.astype(np.float64))
    want = exact.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    got = r.result.astype(np.float64)
    assert np.all(np.abs(got - want) <= 2.0 ** -7 * np.abs(want) + 2.0 ** -23 * 33), (got, want)
