"""POST /v1/ata: C = AᵀA (A m×n -> C n×n, full symmetric) against numpy, every kernel."""

import numpy as np
import pytest

from conftest import (assert_close, check_job_body, kernels_for, mat_json, rand_matrix,
                      result_matrix, rng)
from test_gemm import check_compare_table

DTYPES = ["float32", "float64"]
# (m, n): A is m×n, C is n×n, the reduction runs over m
SHAPES = [(1, 1), (1, 23), (23, 1), (17, 31), (31, 17), (13, 13), (64, 64), (257, 129),
          (5, 257)]


def run_ata(daemon, a, dtype, kernel, form="dict"):
    return daemon.post("/v1/ata", {"a": mat_json(a, form), "dtype": dtype, "kernel": kernel})


def check_ata(daemon, kernels, m, n, dtype, form, seed):
    a = rand_matrix(rng(seed), m, n, dtype)
    a64 = a.astype(np.float64)
    ref = a64.T @ a64
    failures = []
    for kernel in kernels_for(kernels, "ata", dtype) + ["auto", "all"]:
        try:
            r = run_ata(daemon, a, dtype, kernel, form)
            assert r.status_code == 200, (r.status_code, r.text[:400])
            body = r.json()
            check_job_body(body, "ata", dtype)
            if kernel not in ("auto", "all"):
                assert body["kernel"] == kernel
            elif kernel == "auto":
                assert body["kernel"] in kernels_for(kernels, "ata", dtype), body["kernel"]
            got = result_matrix(body, n, n)
            assert_close(got, ref, m, dtype, what=f"kernel={kernel}")
            # the full matrix, not one triangle: symmetric up to rounding of the kernel
            assert_close(got, got.T, m, dtype, what=f"symmetry kernel={kernel}")
            if kernel == "all":
                check_compare_table(body, kernels_for(kernels, "ata", dtype), dtype, m)
        except AssertionError as e:
            failures.append(f"kernel {kernel}: {e}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", SHAPES, ids=[f"{m}x{n}" for m, n in SHAPES])
def test_ata_shapes_every_kernel(daemon, kernels, m, n, dtype):
    check_ata(daemon, kernels, m, n, dtype, "dict", seed=m * 7919 + n)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", [(1, 1), (3, 2), (17, 31)])
def test_ata_nested(daemon, kernels, m, n, dtype):
    check_ata(daemon, kernels, m, n, dtype, "nested", seed=m + n)


def test_ata_exact_small(daemon, kernels):
    a = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float64)
    want = (a.T @ a).tolist()  # [[35, 44], [44, 56]]
    for dtype in DTYPES:
        for kernel in kernels_for(kernels, "ata", dtype) + ["auto"]:
            r = run_ata(daemon, a, dtype, kernel, "nested")
            assert r.status_code == 200, (kernel, r.text)
            assert result_matrix(r.json(), 2, 2).tolist() == want, kernel


def test_ata_not_aat(daemon):
    """A wide A (2×3) gives a 3×3 result, not the 2×2 of AAᵀ."""
    a = np.array([[1, 0, 2], [0, 3, 0]], dtype=np.float64)
    r = daemon.post("/v1/ata", {"a": mat_json(a), "dtype": "float64"})
    assert r.status_code == 200, r.text
    assert result_matrix(r.json(), 3, 3).tolist() == (a.T @ a).tolist()


def test_ata_default_dtype_float32(daemon):
    r = daemon.post("/v1/ata", {"a": [[1.5, 2.0]]})
    assert r.status_code == 200, r.text
    body = r.json()
    check_job_body(body, "ata", "float32")
    assert result_matrix(body, 2, 2).tolist() == [[2.25, 3.0], [3.0, 4.0]]
