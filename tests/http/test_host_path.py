"""Tiny jobs on the HTTP thread (--host-max-flops, --host-max-values; server/engine/host_path.c).

A job of kernel "auto" small enough that a device round trip costs more than the job runs at
once, with the CPU backend's kernels, on the thread that decoded it; the answer says so (kernel,
backend "cpu", device, no queue time) and crunchd_host_jobs_total counts it. Bigger jobs, named
kernels, compare mode, async and test-delayed jobs take the queue as before. These daemons keep
the default (host_path=True); every other test's daemon turns the path off (conftest's
HOST_PATH_OFF) so that its small jobs still exercise the queue and the device.
"""
import io
import re

import numpy as np
import pytest

from conftest import (BACKEND, DELAY_HEADER, Daemon, assert_close, assert_error, gemm_ref, mat_json,
                      rand_matrix, result_matrix, rng)

DEFAULT_MAX_FLOPS = 2 * 64 * 64 * 64
DEFAULT_MAX_VALUES = 65536


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    d = Daemon(["--test-hooks", "--workers", "1"], name="host", host_path=True,
               workdir=tmp_path_factory.mktemp("host")).start()
    yield d
    d.stop()


def metric(d, name):
    m = re.search(rf"^{name} (\S+)$", d.metrics_text(), re.M)
    assert m, f"{name} not in /metrics"
    return float(m.group(1))


def device_jobs(d):
    return sum(float(v) for v in re.findall(r"^crunchd_device_jobs_total\{[^}]*\} (\S+)$", d.metrics_text(), re.M))


def assert_on_host(body):
    assert body["kernel"] in ("openblas", "reference"), body
    assert body["backend"] == "cpu", body
    assert body["device"].startswith("cpu: "), body
    assert body["timings_ms"]["queue"] == 0 and body["timings_ms"]["h2d"] == 0, body
    assert body["batch"] == 1, body


def assert_queued(d, before_host, before_device, r, jobs=1):
    """The job went through the queue: the host count did not move, the device count did."""
    assert r.status_code == 200, r.text
    assert metric(d, "crunchd_host_jobs_total") == before_host
    assert device_jobs(d) == before_device + jobs
    assert r.json()["backend"] == BACKEND


def gemm_case(seed, m, n, k, dtype, ta=False, tb=False, with_c=False, alpha=1.0, beta=0.0):
    r_ = rng(seed)
    a = rand_matrix(r_, k if ta else m, m if ta else k, dtype)
    b = rand_matrix(r_, n if tb else k, k if tb else n, dtype)
    c = rand_matrix(r_, m, n, dtype) if with_c else None
    body = {"a": mat_json(a), "b": mat_json(b), "dtype": dtype, "trans_a": ta, "trans_b": tb,
            "alpha": alpha, "beta": beta}
    if with_c:
        body["c"] = mat_json(c)
    return body, gemm_ref(a, b, c, alpha, beta, ta, tb)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,n,k,ta,tb,with_c,alpha,beta", [
    (16, 16, 16, False, False, False, 1.0, 0.0),
    (7, 5, 3, True, False, True, -1.5, 0.5),
    (1, 19, 64, False, True, True, 2.0, -1.0),
    (64, 64, 64, True, True, False, 1.0, 0.0),  # exactly the default limit: still here
])
def test_tiny_gemm_is_answered_on_the_http_thread(host, dtype, m, n, k, ta, tb, with_c, alpha, beta):
    body, ref = gemm_case(m * 1000 + n * 10 + k, m, n, k, dtype, ta, tb, with_c, alpha, beta)
    before = metric(host, "crunchd_host_jobs_total")
    r = host.post("/v1/gemm", body)
    assert r.status_code == 200, r.text
    got = r.json()
    assert_on_host(got)
    assert got["kernel"] == "openblas"
    assert_close(result_matrix(got, m, n), ref, k, dtype)
    assert metric(host, "crunchd_host_jobs_total") == before + 1


def test_tiny_ata_and_histograms_on_the_http_thread(host):
    r_ = rng(7)
    a = rand_matrix(r_, 33, 20, "float64")
    r = host.post("/v1/ata", {"a": mat_json(a), "dtype": "float64"})
    assert r.status_code == 200, r.text
    assert_on_host(r.json())
    assert_close(result_matrix(r.json(), 20, 20), a.T @ a, 33, "float64")

    data = np.random.default_rng(3).integers(0, 256, 1000, dtype=np.uint8)
    r = host.post("/v1/histogram", {"data": data.tolist(), "dtype": "uint8"})
    assert r.status_code == 200, r.text
    assert_on_host(r.json())
    assert r.json()["result"]["counts"] == np.bincount(data, minlength=256).tolist()

    x = np.random.default_rng(4).standard_normal(5000).astype(np.float32)
    r = host.post("/v1/histogram", {"data": x.tolist(), "dtype": "float32", "bins": 37, "range": [-2, 2]})
    assert r.status_code == 200, r.text
    assert_on_host(r.json())
    counts, _ = np.histogram(x, bins=37, range=(-2, 2))
    assert r.json()["result"]["counts"] == counts.tolist()


def test_kserve_and_binary_take_the_host_path_too(host):
    before = metric(host, "crunchd_host_jobs_total")
    r = host.post("/v2/models/gemm/infer", {"inputs": [
        {"name": "a", "datatype": "FP32", "shape": [2, 2], "data": [[1, 2], [3, 4]]},
        {"name": "b", "datatype": "FP32", "shape": [2, 1], "data": [1, 1]}]})
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == [3, 7]
    assert r.json()["parameters"]["backend"] == "cpu", r.json()
    assert metric(host, "crunchd_host_jobs_total") == before + 1
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    buf = io.BytesIO()
    np.save(buf, a)
    r = host.post("/v1/ata", data=buf.getvalue(), headers={"Content-Type": "application/x-npy",
                                                           "Accept": "application/x-npy"})
    assert r.status_code == 200, r.text
    assert r.headers["X-Crunchd-Backend"] == "cpu" and r.headers["X-Crunchd-Kernel"] == "openblas", r.headers
    np.testing.assert_allclose(np.load(io.BytesIO(r.content)), a.T @ a, rtol=1e-6)
    assert metric(host, "crunchd_host_jobs_total") == before + 2


def test_jobs_over_the_limit_and_chosen_ones_queue(host):
    """Above --host-max-flops, a named kernel, compare mode, async and test-delayed jobs: the queue."""
    cases = [
        ({**gemm_case(1, 64, 64, 65, "float32")[0]}, {}),  # 532,480 flops: one k over
        ({**gemm_case(2, 4, 4, 4, "float32")[0], "kernel": "cublas" if BACKEND == "cuda" else "openblas"}, {}),
        ({**gemm_case(3, 4, 4, 4, "float32")[0]}, {DELAY_HEADER: "1"}),
    ]
    for body, headers in cases:
        h, dev = metric(host, "crunchd_host_jobs_total"), device_jobs(host)
        assert_queued(host, h, dev, host.post("/v1/gemm", body, headers=headers))
    h, dev = metric(host, "crunchd_host_jobs_total"), device_jobs(host)
    r = host.post("/v1/gemm", {**gemm_case(4, 4, 4, 4, "float32")[0], "kernel": "all"})
    assert r.status_code == 200, r.text
    assert metric(host, "crunchd_host_jobs_total") == h and device_jobs(host) > dev
    jid = host.submit({**gemm_case(5, 4, 4, 4, "float32")[0], "op": "gemm"})
    j, _ = host.wait_job(jid)
    assert j["status"] == "done", j
    assert metric(host, "crunchd_host_jobs_total") == h


def test_histogram_limit_counts_values_and_bins(start_daemon):
    d = start_daemon("--host-max-values", "110", "--host-max-flops", "0")
    h = metric(d, "crunchd_host_jobs_total")
    r = d.post("/v1/histogram", {"data": list(range(100)), "dtype": "float32", "bins": 10})
    assert r.status_code == 200 and r.json()["backend"] == "cpu", r.text
    assert metric(d, "crunchd_host_jobs_total") == h + 1
    r = d.post("/v1/histogram", {"data": list(range(101)), "dtype": "float32", "bins": 10})
    assert r.status_code == 200 and r.json()["backend"] == BACKEND, r.text
    assert metric(d, "crunchd_host_jobs_total") == h + 1
    r = d.post("/v1/gemm", gemm_case(6, 2, 2, 2, "float32")[0])  # --host-max-flops 0: none here
    assert r.status_code == 200 and metric(d, "crunchd_host_jobs_total") == h + 1, r.text


def test_limits_are_reported_and_default(host, start_daemon):
    lim = host.get("/v1/info").json()["limits"]
    assert lim["host_max_flops"] == DEFAULT_MAX_FLOPS and lim["host_max_values"] == DEFAULT_MAX_VALUES, lim
    d = start_daemon("--host-max-flops", "1000")
    assert d.get("/v1/info").json()["limits"]["host_max_flops"] == 1000
    h = metric(d, "crunchd_host_jobs_total")
    assert d.post("/v1/gemm", gemm_case(8, 7, 7, 7, "float32")[0]).json()["backend"] == "cpu"  # 686
    assert d.post("/v1/gemm", gemm_case(9, 8, 8, 8, "float32")[0]).json()["backend"] == BACKEND  # 1024
    assert metric(d, "crunchd_host_jobs_total") == h + 1


def charged(d):
    """Bytes charged to the memory budget for requests (every kind but the daemon's own)."""
    kinds = re.findall(r'^crunchd_memory_charged_bytes\{kind="(\w+)"\} (\S+)$', d.metrics_text(), re.M)
    assert kinds
    return sum(float(v) for k, v in kinds if k in ("body", "decode", "arrays", "scratch"))


def test_bad_input_is_refused_as_before_and_memory_returns(host):
    before = charged(host)
    r = host.post("/v1/gemm", {"a": [[1, 2]], "b": [[1, 2]]})
    assert_error(r, 422, "shape_mismatch")
    for i in range(20):
        assert host.post("/v1/gemm", gemm_case(i, 16, 16, 16, "float32")[0]).status_code == 200
    assert charged(host) == before


@pytest.mark.parametrize("dtype,kind", [("float32", "bits"), ("float32", "subnormal"), ("float32", "tiny"),
                                        ("float64", "bits"), ("float64", "subnormal"), ("float32", "inf")])
def test_operands_a_cpu_runs_slowly_go_to_the_device(host, dtype, kind):
    """Subnormal inputs or products cost an x86 core a microcode assist each (perf_analyzer's random
    bit patterns made a 64x64 host-path GEMM ~8x dearer than ordinary numbers on the H200 machine):
    such operands, and infinities or NaN, take the queue; the answer is still numpy's."""
    g = rng(41)
    np_dt = np.dtype(dtype)
    a = g.uniform(-1, 1, (16, 12)).astype(np_dt)
    b = g.uniform(-1, 1, (12, 9)).astype(np_dt)
    if kind == "bits":
        a = g.integers(0, 2 ** 63, a.size).astype(np.uint64 if dtype == "float64" else np.uint32).view(np_dt).reshape(a.shape)
        a[~np.isfinite(a)] = 1.0  # JSON carries no NaN: the bit patterns' huge and tiny magnitudes stay
    elif kind == "subnormal":
        a[3, 4] = np.finfo(np_dt).tiny / 4
    elif kind == "tiny":  # every element normal, their products subnormal
        a[:] = np.finfo(np_dt).tiny * 1024
        b[:] = 2.0 ** -20
    if kind == "inf":
        body = {"a": {"rows": 16, "cols": 12, "data": a.ravel().tolist()}, "b": mat_json(b), "dtype": dtype}
        body["a"]["data"][5] = 1e39  # past float32: rounds to infinity, which numpy's float32 gives too
    else:
        body = {"a": mat_json(a), "b": mat_json(b), "dtype": dtype}
    h, dev = metric(host, "crunchd_host_jobs_total"), device_jobs(host)
    r = host.post("/v1/gemm", body)
    if kind == "inf":
        assert r.status_code in (200, 400), r.text  # a float32 overflow may be refused by the decoder
        if r.status_code == 400:
            return
    assert_queued(host, h, dev, r)
    ref = gemm_ref(a, b)
    if kind != "inf":
        with np.errstate(all="ignore"):
            got = result_matrix(r.json(), 16, 9)
        finite = np.isfinite(ref)
        assert np.array_equal(np.isfinite(got), finite)
        np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-4 if dtype == "float32" else 1e-10, atol=0)
