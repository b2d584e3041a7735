"""Generated operands (issue 39): {"random": {"shape", "dist", "seed"}} as a, b, c and histogram
data, sync and async, every dtype: the daemon's numbers are random_ref.py's to the bit (a @ I
gives a back exactly; alpha 0 with beta 1 gives c), on either backend (on cuda they are made in
device memory); compare mode on them; the limits and the budget refuse before any memory is
spent; bad input is a 400 naming the field."""

import numpy as np
import pytest

from conftest import BACKEND, assert_error
from random_ref import random_operand, to_bfloat16_bits


def rand(shape, dist="uniform", seed=0, **kw):
    spec = {"shape": list(shape), "dist": dist, "seed": seed}
    spec.update(kw)
    return {"random": spec}


def as_array(res, dtype):
    """The result matrix of a JSON answer as numpy (bfloat16: its bits, as random_ref gives them)."""
    shape = res.get("shape") or [res["rows"], res["cols"]]
    if dtype == "bfloat16":
        # shortest digits name one bfloat16 value: the nearest to them
        return to_bfloat16_bits(np.array(res["data"], np.float32)).reshape(shape)
    return np.array(res["data"], dtype).reshape(shape)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("dist", ["uniform", "normal"])
def test_a_matches_the_reference_to_the_bit(daemon, dtype, dist):
    a_shape = (37, 5)
    r = daemon.post("/v1/gemm", {"a": rand(a_shape, dist, seed=11), "b": np.eye(5).tolist(), "dtype": dtype})
    assert r.status_code == 200, r.text
    got, want = as_array(r.json()["result"], dtype), random_operand(a_shape, dtype, dist, 11)
    assert got.shape == want.shape and np.array_equal(got.view(np.uint8), want.view(np.uint8)), \
        (got.ravel()[:4], want.ravel()[:4])


def test_b_and_c_are_made_too_with_their_own_seeds(daemon):
    b = random_operand((6, 4), "float64", "normal", 3)
    r = daemon.post("/v1/gemm", {"a": np.eye(6).tolist(), "b": rand((6, 4), "normal", 3), "dtype": "float64"})
    assert r.status_code == 200, r.text
    assert np.array_equal(as_array(r.json()["result"], "float64"), b)
    c = random_operand((2, 3), "float32", "uniform", 4)
    r = daemon.post("/v1/gemm", {"a": [[1.0]] * 2, "b": [[1.0, 1.0, 1.0]], "c": rand((2, 3), seed=4),
                                 "alpha": 0.0, "beta": 1.0})
    assert r.status_code == 200, r.text
    assert np.array_equal(as_array(r.json()["result"], "float32"), c)
    # a c that broadcasts (a row) is made, then expanded
    r = daemon.post("/v1/gemm", {"a": [[1.0]] * 2, "b": [[1.0, 1.0, 1.0]], "c": rand((3,), seed=4),
                                 "alpha": 0.0, "beta": 1.0})
    assert r.status_code == 200, r.text
    assert np.array_equal(as_array(r.json()["result"], "float32"), np.tile(random_operand((3,), "float32", "uniform", 4), (2, 1)))


def test_default_dist_and_seed_and_seed_sensitivity(daemon):
    body = lambda spec: {"a": {"random": spec}, "b": np.eye(3).tolist()}
    plain = daemon.post("/v1/gemm", body({"shape": [4, 3]})).json()["result"]["data"]
    assert np.array_equal(np.array(plain, np.float32), random_operand((4, 3)).ravel())  # uniform, seed 0
    assert daemon.post("/v1/gemm", body({"shape": [4, 3], "seed": 0, "dist": "uniform"})).json()["result"]["data"] == plain
    other = daemon.post("/v1/gemm", body({"shape": [4, 3], "seed": 1})).json()["result"]["data"]
    assert other != plain and all(-1 <= x < 1 for x in plain + other)


def test_ata_stack_and_product_of_two_generated_operands(daemon):
    a = random_operand((3, 8, 5), "float64", "normal", 21)
    r = daemon.post("/v1/ata", {"a": rand((3, 8, 5), "normal", 21), "dtype": "float64"})
    assert r.status_code == 200, r.text
    got = np.array(r.json()["result"]["data"]).reshape(3, 5, 5)
    np.testing.assert_allclose(got, np.transpose(a, (0, 2, 1)) @ a, rtol=1e-12, atol=1e-12)
    x, y = random_operand((33, 17), seed=1), random_operand((17, 9), "float32", "normal", 2)
    r = daemon.post("/v1/gemm", {"a": rand((33, 17), seed=1), "b": rand((17, 9), "normal", 2)})
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(as_array(r.json()["result"], "float32"), x.astype(np.float64) @ y, rtol=1e-5, atol=1e-5)


def test_histograms_of_generated_data(daemon):
    data = random_operand((5000,), "uint8", "uniform", 8)
    r = daemon.post("/v1/histogram", {"data": rand((5000,), seed=8)})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["counts"] == np.bincount(data, minlength=256).tolist()
    x = random_operand((40, 50), "float32", "normal", 9)
    for rng in (None, [-2.0, 2.0]):  # without a range: the data's own, read on the host
        body = {"data": rand((40, 50), "normal", 9), "dtype": "float32", "bins": 7}
        if rng:
            body["range"] = rng
        r = daemon.post("/v1/histogram", body)
        assert r.status_code == 200, r.text
        counts, _ = np.histogram(x.ravel(), bins=7, range=rng)
        assert r.json()["result"]["counts"] == counts.tolist(), rng


def test_async_job_on_generated_operands(daemon):
    job = daemon.submit({"op": "gemm", "a": rand((8, 8), seed=5), "b": np.eye(8).tolist(), "dtype": "float64"})
    daemon.wait_job(job, states=("done",))
    res = daemon.get(f"/v1/jobs/{job}/result").json()["result"]
    assert np.array_equal(as_array(res, "float64"), random_operand((8, 8), "float64", "uniform", 5))


def test_compare_mode_on_generated_operands(daemon, kernels):
    """The page's comparison: every kernel on the same generated operands (in device memory on cuda)."""
    r = daemon.post("/v1/gemm", {"a": rand((96, 64), seed=1), "b": rand((64, 80), seed=2), "kernel": "all"})
    assert r.status_code == 200, r.text
    body = r.json()
    rows = body["kernels"]
    assert len(rows) >= 2 and all(k["status"] == "ok" for k in rows), rows
    tf32 = {k["name"] for k in kernels["gemm"] if k["precision"] == "tf32"}
    for k in rows:  # TF32 rounds the inputs to 10 bits; everything else is float32 arithmetic
        assert k["max_rel_error"] < (1e-2 if k["kernel"] in tf32 else 1e-4), k
    want = random_operand((96, 64), seed=1).astype(np.float64) @ random_operand((64, 80), seed=2)
    np.testing.assert_allclose(as_array(body["result"], "float32"), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("spec,field", [
    ({"shape": [4, -1]}, "a.random.shape"),
    ({"shape": [4, 2.5]}, "a.random.shape"),
    ({"shape": "4x4"}, "a.random.shape"),
    ({"shape": [1] * 9}, "a.random.shape"),
    ({}, "a.random.shape"),
    ({"shape": [4, 4], "dist": "gauss"}, "a.random.dist"),
    ({"shape": [4, 4], "dist": 1}, "a.random.dist"),
    ({"shape": [4, 4], "seed": 1.5}, "a.random.seed"),
    ({"shape": [4, 4], "seed": -1}, "a.random.seed"),
    ({"shape": [4, 4], "seed": "7"}, "a.random.seed"),
    ({"shape": [4, 4], "seed": 2.0 ** 60}, "a.random.seed"),
    ({"shape": [4, 4], "mean": 0}, "a.random.mean"),
])
def test_bad_specs_name_the_field(daemon, spec, field):
    r = daemon.post("/v1/gemm", {"a": {"random": spec}, "b": [[1.0]]})
    code = "missing_field" if spec == {} else "invalid_field"
    assert_error(r, 400, code, field=field)


def test_bad_forms(daemon):
    assert_error(daemon.post("/v1/gemm", {"a": {"random": {"shape": [2, 2]}, "shm": {"region": "r"}}, "b": [[1.0]]}),
                 400, "invalid_field", field="a.random")
    assert_error(daemon.post("/v1/gemm", {"a": {"random": [2, 2]}, "b": [[1.0]]}), 400, "invalid_field",
                 field="a.random")
    assert_error(daemon.post("/v1/histogram", {"data": rand((10,), "normal")}), 400, "invalid_field",
                 field="data.random.dist")  # uint8 data: uniform bytes only
    # shapes are a matrix's as ever: a 0 dimension, or shapes that do not conform
    assert_error(daemon.post("/v1/gemm", {"a": rand((0, 3)), "b": [[1.0]]}), 400, "invalid_field", field="a")
    assert_error(daemon.post("/v1/gemm", {"a": rand((2, 3)), "b": rand((4, 2))}), 422, "shape_mismatch")


def test_limits_and_budget_before_any_memory(start_daemon):
    d = start_daemon("--max-elements", "1000", "--max-body-mb", "1", "--max-memory-mb", "64")
    assert_error(d.post("/v1/gemm", {"a": rand((100, 11)), "b": rand((11, 2))}), 413, "too_large",
                 field="a.random.shape")
    assert_error(d.post("/v1/histogram", {"data": rand((1001,))}), 413, "too_large", field="data.random.shape")
    # over the request's bytes (inputs and output together: --max-body-mb), each array within limits
    d2 = start_daemon("--max-body-mb", "1")
    assert_error(d2.post("/v1/gemm", {"a": rand((400, 400)), "b": rand((400, 400))}), 413, "too_large")
    # an operand far past any memory: refused from its shape alone, nothing allocated
    assert_error(d2.post("/v1/gemm", {"a": rand((2 ** 40, 2 ** 20)), "b": [[1.0]]}), 413, "too_large",
                 field="a.random.shape")
    assert d.get("/readyz").status_code == 200 and d2.get("/readyz").status_code == 200


@pytest.mark.skipif(BACKEND != "cuda", reason="generated operands live in device memory on cuda only")
def test_on_cuda_they_are_made_on_the_device(daemon):
    """A 2048^2 GEMM of generated operands: nothing is uploaded (h2d of the operands is a wait,
    not a copy) and the answer is the reference's."""
    r = daemon.post("/v1/gemm", {"a": rand((2048, 2048), seed=1), "b": rand((2048, 2048), seed=2),
                                 "kernel": "cublas"}, headers={"Accept": "application/x-npy"})
    assert r.status_code == 200, r.text
    assert float(r.headers.get("X-Crunchd-Gflops", "0")) > 0
    small = daemon.post("/v1/gemm", {"a": rand((64, 64), "normal", seed=3), "b": np.eye(64).tolist(), "kernel": "naive"})
    assert np.array_equal(as_array(small.json()["result"], "float32"), random_operand((64, 64), "float32", "normal", 3))
