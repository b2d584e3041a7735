"""POST /v1/histogram against numpy: uint8 (256 bins, one per byte), float32/float64 with bins and
range (numpy.histogram semantics: equal bins, last bin closed, values outside ignored, default
range [min, max]), values exactly on edges, every kernel."""

import numpy as np
import pytest

from conftest import check_job_body, kernels_for, rng
from test_gemm import check_compare_table

FLOATS = ["float32", "float64"]


def post_hist(daemon, data, dtype=None, kernel=None, bins=None, range_=None):
    body = {"data": data}
    if dtype is not None:
        body["dtype"] = dtype
    if kernel is not None:
        body["kernel"] = kernel
    if bins is not None:
        body["bins"] = bins
    if range_ is not None:
        body["range"] = list(range_)
    return daemon.post("/v1/histogram", body)


def check_counts(body, want_counts, want_edges=None, dtype="uint8"):
    check_job_body(body, "histogram", dtype)
    res = body["result"]
    assert res["bins"] == len(want_counts), res.get("bins")
    counts = res["counts"]
    assert all(isinstance(c, int) and not isinstance(c, bool) for c in counts), counts[:10]
    assert counts == [int(c) for c in want_counts], \
        f"counts differ at bins {[i for i, (x, y) in enumerate(zip(counts, want_counts)) if x != y][:20]}"
    if want_edges is None:
        assert "edges" not in res, "edges are for float data only"
    else:
        edges = res["edges"]
        assert len(edges) == len(want_counts) + 1
        np.testing.assert_allclose(edges, np.asarray(want_edges, np.float64), rtol=1e-6,
                                   atol=1e-6 * float(np.max(np.abs(want_edges)) or 1.0))


def check_all_kernels(daemon, kernels, data, dtype, bins=None, range_=None):
    """Every histogram kernel for dtype, plus auto and all, must match numpy exactly."""
    arr = np.asarray(data, dtype=dtype)
    if dtype == "uint8":
        want = np.bincount(arr, minlength=256)
        edges = None
        send_dtype = None  # the default
    else:
        want, edges = np.histogram(arr, bins=10 if bins is None else bins, range=range_)
        send_dtype = dtype
    failures = []
    names = kernels_for(kernels, "histogram", dtype) + ["auto", "all"]
    for kernel in names:
        try:
            r = post_hist(daemon, data, send_dtype, kernel, bins, range_)
            assert r.status_code == 200, (r.status_code, r.text[:400])
            body = r.json()
            if kernel not in ("auto", "all"):
                assert body["kernel"] == kernel, body["kernel"]
            check_counts(body, want, edges, dtype)
            if kernel == "all":
                check_compare_table(body, kernels_for(kernels, "histogram", dtype), dtype,
                                    1, rate="gbps")
        except AssertionError as e:
            failures.append(f"kernel {kernel}: {e}")
    assert not failures, "\n".join(failures)


# -- uint8 --------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 17, 255, 256, 257, 1000, 65537])
def test_uint8_sizes(daemon, kernels, n):
    data = rng(n).integers(0, 256, size=n).tolist()
    check_all_kernels(daemon, kernels, data, "uint8")


def test_uint8_extremes_and_one_bin(daemon, kernels):
    data = [0] * 5 + [255] * 7 + [128] * 3 + [1, 254]
    check_all_kernels(daemon, kernels, data, "uint8")


def test_uint8_every_value(daemon, kernels):
    data = list(range(256)) * 3 + [42] * 1000
    check_all_kernels(daemon, kernels, data, "uint8")


def test_uint8_explicit_dtype(daemon):
    r = post_hist(daemon, [3, 3, 200], dtype="uint8")
    assert r.status_code == 200, r.text
    want = np.bincount([3, 3, 200], minlength=256)
    check_counts(r.json(), want)


def test_uint8_single_value_counts_big(daemon):
    """Counts are exact integers well past what one privatized int16/uint16 would hold."""
    data = [7] * 70000
    r = post_hist(daemon, data)
    assert r.status_code == 200, r.text
    counts = r.json()["result"]["counts"]
    assert counts[7] == 70000 and sum(counts) == 70000


# -- floats -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_float_values_on_edges(daemon, kernels, dtype):
    """Exactly on every edge, on lo, on hi (the last bin is closed), just outside, far outside."""
    data = [0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 0.0, -0.0, -0.25, 1.25, 0.125, 0.875,
            -1e30, 1e30, 0.9999999, 1.0000001, -1e-7]
    check_all_kernels(daemon, kernels, data, dtype, bins=4, range_=(0.0, 1.0))


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_defaults_bins10_range_minmax(daemon, kernels, dtype):
    """No bins, no range: 10 bins over [min, max]; min and max land in the first/last bin."""
    r_ = rng(21)
    data = (r_.integers(0, 41, size=500) / 4.0).tolist() + [0.0, 10.0]  # edges at integers
    check_all_kernels(daemon, kernels, data, dtype)
    r = post_hist(daemon, data, dtype)
    body = r.json()
    assert body["result"]["bins"] == 10
    assert body["result"]["edges"][0] == 0.0 and body["result"]["edges"][-1] == 10.0


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_random_against_numpy(daemon, kernels, dtype):
    data = rng(5).normal(0.0, 3.0, size=5000).astype(dtype).tolist()
    check_all_kernels(daemon, kernels, data, dtype, bins=37, range_=(-4.5, 6.25))


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_all_equal_values(daemon, kernels, dtype):
    """numpy: min == max widens the range to [v-0.5, v+0.5]."""
    check_all_kernels(daemon, kernels, [3.0, 3.0, 3.0], dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_range_lo_equals_hi(daemon, kernels, dtype):
    """numpy accepts range (v, v) and widens it to [v-0.5, v+0.5] like an all-equal input."""
    check_all_kernels(daemon, kernels, [0.5, 1.0, 1.25, 1.5, 2.0], dtype, bins=4,
                      range_=(1.0, 1.0))


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_single_value(daemon, kernels, dtype):
    check_all_kernels(daemon, kernels, [-2.5], dtype, bins=3, range_=(-3.0, 0.0))


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_one_bin(daemon, kernels, dtype):
    check_all_kernels(daemon, kernels, [-1.0, 0.0, 0.5, 1.0, 2.0], dtype, bins=1,
                      range_=(0.0, 1.0))


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_all_outside(daemon, kernels, dtype):
    check_all_kernels(daemon, kernels, [-5.0, 5.0, 100.0], dtype, bins=8, range_=(0.0, 1.0))


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_negative_range_many_bins(daemon, kernels, dtype):
    data = (rng(8).integers(-1024, 1, size=3000) / 4.0).tolist()  # on edges of 1/4 bins
    check_all_kernels(daemon, kernels, data, dtype, bins=1024, range_=(-256.0, 0.0))


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_integer_range_on_int_data(daemon, kernels, dtype):
    data = list(range(-3, 14))
    check_all_kernels(daemon, kernels, data, dtype, bins=5, range_=(0, 10))


def test_float64_precision_matters(daemon):
    """A value 1e-12 below an edge belongs to the lower bin in float64."""
    data = [0.5 - 1e-12, 0.5, 0.5 + 1e-12]
    r = post_hist(daemon, data, "float64", bins=2, range_=(0.0, 1.0))
    assert r.status_code == 200, r.text
    want, edges = np.histogram(np.array(data), bins=2, range=(0.0, 1.0))
    check_counts(r.json(), want, edges, "float64")
    assert want.tolist() == [1, 2]


def test_histogram_sum_of_counts(daemon):
    data = rng(2).uniform(-1, 1, size=2000).tolist()
    r = post_hist(daemon, data, "float64", bins=50, range_=(-1.0, 1.0))
    assert r.status_code == 200, r.text
    assert sum(r.json()["result"]["counts"]) == 2000
