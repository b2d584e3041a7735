"""POST /v1/gemm: C = alpha*op(A)*op(B) + beta*C against numpy, every kernel, shapes that break
tiled code (1, primes, 257, K=1), both dtypes, both matrix forms, alpha/beta/transposes."""

import itertools

import numpy as np
import pytest

from conftest import (assert_close, check_job_body, gemm_ref, kernels_for, mat_json,
                      parse_server_timing, rand_matrix, result_matrix, rng, tolerance)

DTYPES = ["float32", "float64"]
# (m, n, k)
SHAPES = [
    (1, 1, 1),
    (1, 19, 7),      # 1 x n output
    (23, 1, 7),      # n x 1 output
    (9, 11, 1),      # K = 1
    (1, 1, 64),      # dot product
    (17, 31, 13),    # primes
    (64, 64, 64),
    (257, 257, 257),
]


def gemm_body(a, b, dtype, form="dict", **extra):
    body = {"a": mat_json(a, form), "b": mat_json(b, form), "dtype": dtype}
    body.update(extra)
    return body


def run_gemm(daemon, a, b, dtype, kernel, form="dict", c=None, alpha=1.0, beta=0.0,
             trans_a=False, trans_b=False, precision=None):
    extra = {"kernel": kernel}
    if c is not None:
        extra["c"] = mat_json(c, form)
    if alpha != 1.0:
        extra["alpha"] = alpha
    if beta != 0.0:
        extra["beta"] = beta
    if trans_a:
        extra["trans_a"] = True
    if trans_b:
        extra["trans_b"] = True
    if precision:
        extra["precision"] = precision
    r = daemon.post("/v1/gemm", gemm_body(a, b, dtype, form, **extra))
    return r


def check_gemm(daemon, kernels, m, n, k, dtype, form, seed, kernel_names=None, **kw):
    """Runs the case on every kernel (plus auto and all); returns the failures, not the first."""
    r_ = rng(seed)
    ta, tb = kw.get("trans_a", False), kw.get("trans_b", False)
    a = rand_matrix(r_, k if ta else m, m if ta else k, dtype)
    b = rand_matrix(r_, n if tb else k, k if tb else n, dtype)
    c = rand_matrix(r_, m, n, dtype) if kw.get("with_c") else None
    alpha, beta = kw.get("alpha", 1.0), kw.get("beta", 0.0)
    ref = gemm_ref(a, b, c, alpha, beta, ta, tb)
    names = kernel_names or (kernels_for(kernels, "gemm", dtype) + ["auto", "all"])
    failures = []
    for kernel in names:
        try:
            r = run_gemm(daemon, a, b, dtype, kernel, form, c=c, alpha=alpha, beta=beta,
                         trans_a=ta, trans_b=tb)
            assert r.status_code == 200, (r.status_code, r.text[:400])
            body = r.json()
            check_job_body(body, "gemm", dtype)
            if kernel not in ("auto", "all"):
                assert body["kernel"] == kernel, body["kernel"]
            elif kernel == "auto":
                assert body["kernel"] in kernels_for(kernels, "gemm", dtype), body["kernel"]
            got = result_matrix(body, m, n)
            assert_close(got, ref, k, dtype, what=f"kernel={kernel}")
            if kernel == "all":
                check_compare_table(body, kernels_for(kernels, "gemm", dtype), dtype, k)
        except AssertionError as e:
            failures.append(f"kernel {kernel}: {e}")
    assert not failures, "\n".join(failures)


def check_compare_table(body, expected, dtype, k, rate="gflops"):
    rows = body.get("kernels")
    assert isinstance(rows, list) and rows, body.keys()
    by_name = {row["kernel"]: row for row in rows}
    missing = set(expected) - set(by_name)
    assert not missing, f"compare table lacks {missing}: {rows}"
    limit = 1e-3 if dtype == "float32" else 1e-9
    for name in expected:
        row = by_name[name]
        assert row["status"] == "ok", row
        assert isinstance(row["ms"], (int, float)) and row["ms"] >= 0, row
        assert isinstance(row[rate], (int, float)) and row[rate] >= 0, row
        assert isinstance(row["max_rel_error"], (int, float)), row
        assert 0 <= row["max_rel_error"] <= limit, row


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
def test_gemm_shapes_every_kernel(daemon, kernels, m, n, k, dtype):
    check_gemm(daemon, kernels, m, n, k, dtype, "dict", seed=m * 1000003 + n * 1009 + k)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (3, 2, 5), (17, 31, 13)])
def test_gemm_nested_lists(daemon, kernels, m, n, k, dtype):
    check_gemm(daemon, kernels, m, n, k, dtype, "nested", seed=7 + m)


def test_gemm_mixed_forms(daemon):
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    b = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float64)
    body = {"a": mat_json(a, "dict"), "b": mat_json(b, "nested"), "dtype": "float64"}
    r = daemon.post("/v1/gemm", body)
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(result_matrix(r.json(), 2, 2), a @ b)


def test_gemm_design_example(daemon):
    """The example of the design document, with its defaults (float32, auto, fp32)."""
    body = {"a": {"rows": 2, "cols": 3, "data": [1, 2, 3, 4, 5, 6]},
            "b": [[1, 0], [0, 1], [1, 1]]}
    r = daemon.post("/v1/gemm", body)
    assert r.status_code == 200, r.text
    j = r.json()
    check_job_body(j, "gemm", "float32")
    assert j["result"] == {"rows": 2, "cols": 2, "data": [4, 5, 10, 11]} or \
        result_matrix(j, 2, 2).tolist() == [[4, 5], [10, 11]]
    assert r.headers.get("X-Crunchd-Job-Id") == j["id"]
    st = parse_server_timing(r.headers["Server-Timing"])
    assert set(st) >= {"queue", "h2d", "kernel", "d2h", "total"}


COMBOS = list(itertools.product([False, True], [False, True],
                                [(1.0, 0.0, False), (2.5, 0.0, False), (1.0, 1.0, True),
                                 (-0.5, 3.0, True), (0.0, 2.0, True), (1.5, 0.0, True)]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans_a,trans_b,abc", COMBOS,
                         ids=[f"ta{int(a)}-tb{int(b)}-al{x[0]}-be{x[1]}-c{int(x[2])}"
                              for a, b, x in COMBOS])
def test_gemm_alpha_beta_trans(daemon, kernels, trans_a, trans_b, abc, dtype):
    alpha, beta, with_c = abc
    check_gemm(daemon, kernels, 17, 13, 11, dtype, "dict", seed=99 + trans_a * 2 + trans_b,
               trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta, with_c=with_c)


@pytest.mark.parametrize("trans_a,trans_b", [(True, False), (False, True), (True, True)])
def test_gemm_trans_nested_1xn(daemon, kernels, trans_a, trans_b):
    check_gemm(daemon, kernels, 1, 29, 5, "float32", "nested", seed=5,
               trans_a=trans_a, trans_b=trans_b, alpha=-1.25)


def test_gemm_beta_without_c_treats_c_as_zero(daemon):
    a = np.eye(3)
    b = np.arange(9.0).reshape(3, 3)
    r = daemon.post("/v1/gemm", gemm_body(a, b, "float64", beta=5.0))
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(result_matrix(r.json(), 3, 3), b)


def test_gemm_exact_integers(daemon, kernels):
    """Small integers are exact in both dtypes: every kernel must agree bit for bit."""
    a = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float64)
    b = np.array([[7, 8], [9, 10], [11, 12]], dtype=np.float64)
    for dtype in DTYPES:
        for kernel in kernels_for(kernels, "gemm", dtype) + ["auto"]:
            r = daemon.post("/v1/gemm", gemm_body(a, b, dtype, kernel=kernel))
            assert r.status_code == 200, (kernel, r.text)
            assert result_matrix(r.json(), 2, 2).tolist() == (a @ b).tolist(), kernel


def test_gemm_float64_keeps_precision(daemon):
    """float64 must not be computed in float32: 1 + 1e-10 survives."""
    a = np.array([[1.0 + 1e-10]])
    b = np.array([[1.0]])
    r = daemon.post("/v1/gemm", gemm_body(a, b, "float64"))
    assert r.status_code == 200, r.text
    got = result_matrix(r.json(), 1, 1)[0, 0]
    assert abs(got - (1.0 + 1e-10)) < 1e-15, repr(got)


def test_gemm_large_magnitudes(daemon):
    a = np.array([[1e30, 1e-30], [3.0, -2.0]], dtype=np.float64)
    b = np.array([[1e-20, 2.0], [5e25, 1.0]], dtype=np.float64)
    r = daemon.post("/v1/gemm", gemm_body(a, b, "float64"))
    assert r.status_code == 200, r.text
    assert_close(result_matrix(r.json(), 2, 2), a @ b, 2, "float64")


def test_gemm_tf32(daemon, kernels):
    """precision tf32 on float32 is allowed: every kernel answers within tf32 error."""
    r_ = rng(3)
    m, n, k = 33, 17, 65
    a, b = rand_matrix(r_, m, k), rand_matrix(r_, k, n)
    ref = gemm_ref(a, b)
    names = kernels_for(kernels, "gemm", "float32", "tf32") + ["auto"]
    for kernel in names:
        r = run_gemm(daemon, a, b, "float32", kernel, precision="tf32")
        assert r.status_code == 200, (kernel, r.text)
        assert_close(result_matrix(r.json(), m, n), ref, k, "float32", "tf32", what=kernel)


def test_gemm_compare_mode_reference_result(daemon, kernels):
    """ "all" returns the reference kernel's result and one row per kernel."""
    r_ = rng(11)
    a, b = rand_matrix(r_, 40, 30), rand_matrix(r_, 30, 20)
    r = run_gemm(daemon, a, b, "float32", "all")
    assert r.status_code == 200, r.text
    body = r.json()
    check_compare_table(body, kernels_for(kernels, "gemm", "float32"), "float32", 30)
    names = [row["kernel"] for row in body["kernels"]]
    assert len(names) == len(set(names)), names
    refs = [k["name"] for k in kernels["gemm"] if k["reference"]]
    assert len(refs) == 1, refs
    assert_close(result_matrix(body, 40, 20), gemm_ref(a, b), 30, "float32")


def test_gemm_auto_is_default(daemon, kernels):
    a, b = np.ones((2, 2)), np.ones((2, 2))
    r = daemon.post("/v1/gemm", gemm_body(a, b, "float32"))
    assert r.status_code == 200, r.text
    assert r.json()["kernel"] in kernels_for(kernels, "gemm", "float32")
    assert "kernels" not in r.json()


def test_gemm_ids_unique(daemon):
    a = np.ones((1, 1))
    ids = set()
    for _ in range(5):
        r = daemon.post("/v1/gemm", gemm_body(a, a, "float32"))
        assert r.status_code == 200
        ids.add(r.json()["id"])
    assert len(ids) == 5
