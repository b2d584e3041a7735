"""Stacks of matrices in one request (issue 35): numpy.matmul's semantics for GEMM and AᵀA in every
input form (JSON nested lists and {"shape", "data"}, .npy of any rank in C and Fortran order,
multipart, KServe tensors in JSON, binary and system shared memory, /v1 shared-memory operands),
every broadcasting case, 1-D operands, c broadcast to the result, answers in the same forms with
the full shape; every result against numpy.matmul. On cuda a stack is one launch of a
stack-capable kernel (tests/gpu checks the kernels); here the answer says so ("batch" 1, "stack",
"matrices"), and kernels that take one matrix at a time say so in /v1/kernels."""

import io
import json
import uuid

import numpy as np
import pytest

from conftest import BACKEND, assert_close, assert_error, triton_client

tc = pytest.importorskip("tritonclient.http")
shm = pytest.importorskip("tritonclient.utils.shared_memory")

NPY = {"Content-Type": "application/x-npy"}


def rnd(seed, *shape, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def ref(a, b, c=None, alpha=1.0, beta=0.0, ta=False, tb=False):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    opa = np.swapaxes(a, -1, -2) if ta else a
    opb = np.swapaxes(b, -1, -2) if tb else b
    out = alpha * np.matmul(opa, opb)
    if c is not None and beta:
        out = out + beta * np.asarray(c, np.float64)
    return out


def k_of(a, ta=False):
    return a.shape[-2] if ta and a.ndim > 1 else a.shape[-1]


def as_result(body):
    res = body["result"]
    return np.asarray(res["data"], np.float64).reshape(res["shape"])


def npy(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def parts(**arrays):
    return {k: (f"{k}.npy", npy(v), "application/octet-stream") for k, v in arrays.items()}


def shaped(a):
    return {"shape": list(a.shape), "data": a.ravel().tolist()}


# (a shape, b shape, trans_a, trans_b): numpy's broadcasting cases, and vectors
CASES = [
    ((4, 5, 3), (4, 3, 6), False, False),          # (b,m,k) @ (b,k,n)
    ((1, 5, 3), (4, 3, 6), False, False),          # (1,m,k) @ (b,k,n): a broadcasts
    ((5, 3), (4, 3, 6), False, False),             # (m,k) @ (b,k,n)
    ((4, 5, 3), (3, 6), False, False),             # (b,m,k) @ (k,n)
    ((2, 1, 5, 3), (3, 3, 6), False, False),       # (p,1,m,k) @ (q,k,n): no common stride
    ((2, 3, 1, 4, 3), (1, 3, 5, 3, 2), False, False),  # rank 5, broadcasting on both sides
    ((3,), (4, 3, 6), False, False),               # a vector @ a stack
    ((4, 5, 3), (3,), False, False),               # a stack @ a vector
    ((7,), (7,), False, False),                    # a dot product: a scalar
    ((4, 3, 5), (4, 6, 3), True, True),            # trans flags on the last two dimensions
    ((33, 17, 9), (33, 9, 13), False, False),      # odd sizes
]


@pytest.mark.parametrize("sa,sb,ta,tb", CASES, ids=[f"{a}@{b}{'T' if ta else ''}" for a, b, ta, _ in CASES])
@pytest.mark.parametrize("form", ["nested", "shaped"])
def test_json_forms_against_numpy(daemon, form, sa, sb, ta, tb):
    a, b = rnd(1, *sa), rnd(2, *sb)
    enc = (lambda x: x.tolist()) if form == "nested" else shaped
    r = daemon.post("/v1/gemm", {"a": enc(a), "b": enc(b), "trans_a": ta, "trans_b": tb})
    assert r.status_code == 200, r.text
    body = r.json()
    want = ref(a, b, ta=ta, tb=tb)
    got = as_result(body)
    assert got.shape == want.shape
    assert_close(got, want, k_of(a, ta), "float32")
    batch = np.broadcast_shapes(sa[:-2] if len(sa) > 2 else (), sb[:-2] if len(sb) > 2 else ())
    if batch:  # one job, one launch, a product per matrix of the stack
        assert body["batch"] == 1 and body["matrices"] == int(np.prod(batch))


@pytest.mark.parametrize("sa,sb,ta,tb", CASES[:6] + CASES[9:], ids=[f"{a}@{b}" for a, b, _, _ in CASES[:6] + CASES[9:]])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_npy_multipart_and_npy_answer(daemon, sa, sb, ta, tb, dtype):
    a, b = rnd(3, *sa, dtype=dtype), rnd(4, *sb, dtype=dtype)
    q = f"?trans_a={'true' if ta else 'false'}&trans_b={'true' if tb else 'false'}"
    r = daemon.post("/v1/gemm" + q, files=parts(a=a, b=b), headers={"Accept": "application/x-npy"})
    assert r.status_code == 200, r.text
    got = np.load(io.BytesIO(r.content))
    want = ref(a, b, ta=ta, tb=tb)
    assert got.shape == want.shape and got.dtype == dtype
    assert_close(got, want, k_of(a, ta), np.dtype(dtype).name)


def test_fortran_ordered_stacks_are_read_in_c_order(daemon):
    a, b = rnd(5, 3, 4, 5), rnd(6, 3, 5, 2)
    fa, fb = np.asfortranarray(a), np.asfortranarray(b)
    r = daemon.post("/v1/gemm", files=parts(a=fa, b=fb), headers={"Accept": "application/x-npy"})
    assert r.status_code == 200, r.text
    assert_close(np.load(io.BytesIO(r.content)), ref(a, b), 5, "float32")
    r = daemon.post("/v1/ata", data=npy(fa), headers=NPY)
    assert r.status_code == 200, r.text
    assert_close(as_result(r.json()), np.einsum("bmi,bmj->bij", a.astype(np.float64), a), 4, "float32")


@pytest.mark.parametrize("c_shape", [(6,), (5, 1), (), (1, 5, 6), (4, 5, 6), (4, 1, 6)])
def test_c_broadcasts_to_the_result(daemon, c_shape):
    a, b = rnd(7, 4, 5, 3), rnd(8, 4, 3, 6)
    c = rnd(9, *c_shape) if c_shape else np.float32(0.75)
    body = {"a": a.tolist(), "b": shaped(b), "c": shaped(np.asarray(c)), "alpha": 1.5, "beta": -0.5}
    r = daemon.post("/v1/gemm", body)
    assert r.status_code == 200, r.text
    assert_close(as_result(r.json()), ref(a, b, c, 1.5, -0.5), 3, "float32")
    r = daemon.post("/v1/gemm?alpha=1.5&beta=-0.5", files=parts(a=a, b=b, c=np.asarray(c)),
                    headers={"Accept": "application/x-npy"})
    assert r.status_code == 200, r.text
    assert_close(np.load(io.BytesIO(r.content)), ref(a, b, c, 1.5, -0.5), 3, "float32")


@pytest.mark.parametrize("sa", [(6, 9, 4), (2, 3, 17, 5), (1, 8, 8)])
def test_ata_of_a_stack(daemon, sa):
    a = rnd(10, *sa, dtype=np.float64)
    want = np.swapaxes(a, -1, -2) @ a
    for body in ({"a": a.tolist(), "dtype": "float64"}, {"a": shaped(a), "dtype": "float64"}):
        r = daemon.post("/v1/ata", body)
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(as_result(r.json()), want, rtol=1e-10, atol=1e-12)
    r = daemon.post("/v1/ata", data=npy(a), headers={**NPY, "Accept": "application/x-npy"})
    assert r.status_code == 200 and r.headers["X-Crunchd-Matrices"] == str(int(np.prod(sa[:-2])))
    np.testing.assert_allclose(np.load(io.BytesIO(r.content)), want, rtol=1e-10, atol=1e-12)


def test_kserve_tensors_of_any_rank(daemon):
    a, b = rnd(11, 2, 3, 4, 5), rnd(12, 3, 5, 7)
    with triton_client(daemon) as client:
        for binary in (True, False):
            ia = tc.InferInput("a", list(a.shape), "FP32")
            ia.set_data_from_numpy(a, binary_data=binary)
            ib = tc.InferInput("b", list(b.shape), "FP32")
            ib.set_data_from_numpy(b, binary_data=binary)
            res = client.infer("gemm", [ia, ib], outputs=[tc.InferRequestedOutput("c", binary_data=binary)])
            got = res.as_numpy("c")
            assert got.shape == (2, 3, 4, 7)
            assert_close(got, ref(a, b), 5, "float32")
        ia = tc.InferInput("a", [4, 9, 3], "FP64")
        x = rnd(13, 4, 9, 3, dtype=np.float64)
        ia.set_data_from_numpy(x)
        got = client.infer("ata", [ia]).as_numpy("c")
        np.testing.assert_allclose(got, np.swapaxes(x, 1, 2) @ x, rtol=1e-10, atol=1e-12)


def test_kserve_json_tensors_nested_as_their_shape(daemon):
    a, b = rnd(14, 2, 2, 3), rnd(15, 2, 3, 2)
    body = {"inputs": [{"name": "a", "datatype": "FP32", "shape": [2, 2, 3], "data": a.tolist()},
                       {"name": "b", "datatype": "FP32", "shape": [2, 3, 2], "data": b.ravel().tolist()}]}
    r = daemon.post("/v2/models/gemm/infer", body)
    assert r.status_code == 200, r.text
    out = r.json()["outputs"][0]
    assert out["shape"] == [2, 2, 2]
    assert_close(np.asarray(out["data"]).reshape(2, 2, 2), ref(a, b), 3, "float32")
    body["inputs"][0]["shape"] = [2, 3, 2]  # the data's nesting disagrees
    r = daemon.post("/v2/models/gemm/infer", body)
    assert r.status_code == 400 and "a.data" in r.json()["error"]


def test_stacks_in_shared_memory(daemon):
    """/v1 operands in a registered region, the result written to one: a stack's bytes never cross
    the socket. KServe inputs in the same region too."""
    a, b = rnd(16, 8, 16, 16), rnd(17, 8, 16, 16)
    uid = uuid.uuid4().hex[:10]
    h = shm.create_shared_memory_region(f"st-{uid}", f"/crunchd-stk-{uid}", a.nbytes * 3)
    try:
        shm.set_shared_memory_region(h, [a, b])
        with triton_client(daemon) as client:
            client.register_system_shared_memory(f"st-{uid}", f"/crunchd-stk-{uid}", a.nbytes * 3)
            try:
                body = {"a": {"shm": {"region": f"st-{uid}"}, "shape": [8, 16, 16]},
                        "b": {"shm": {"region": f"st-{uid}", "offset": a.nbytes}, "shape": [8, 16, 16]},
                        "output": {"shm": {"region": f"st-{uid}", "offset": 2 * a.nbytes}}}
                r = daemon.post("/v1/gemm", body)
                assert r.status_code == 200, r.text
                assert r.json()["result"]["shape"] == [8, 16, 16]
                got = shm.get_contents_as_numpy(h, np.float32, [8, 16, 16], offset=2 * a.nbytes)
                assert_close(got, ref(a, b), 16, "float32")
                ia = tc.InferInput("a", [8, 16, 16], "FP32")
                ia.set_shared_memory(f"st-{uid}", a.nbytes)
                ib = tc.InferInput("b", [8, 16, 16], "FP32")
                ib.set_shared_memory(f"st-{uid}", a.nbytes, offset=a.nbytes)
                assert_close(client.infer("gemm", [ia, ib]).as_numpy("c"), ref(a, b), 16, "float32")
            finally:
                client.unregister_system_shared_memory(f"st-{uid}")
    finally:
        shm.destroy_shared_memory_region(h)


def test_refusals_name_the_field_and_both_shapes(daemon):
    r = daemon.post("/v1/gemm", {"a": shaped(rnd(1, 3, 4, 5)), "b": shaped(rnd(1, 2, 5, 6))})
    assert_error(r, 422, "shape_mismatch", field="b")
    assert "(3, 4, 5)" in r.json()["error"]["message"] and "(2, 5, 6)" in r.json()["error"]["message"]
    assert_error(daemon.post("/v1/gemm", {"a": {"shape": [1] * 9, "data": [1]}, "b": [[1]]}), 400, "invalid_field",
                 field="a.shape")
    assert_error(daemon.post("/v1/gemm", {"a": shaped(rnd(1, 2, 3)), "b": shaped(rnd(1, 3, 2)),
                                          "c": shaped(rnd(1, 3, 2, 2))}), 422, "shape_mismatch", field="c")
    assert_error(daemon.post("/v1/gemm", {"a": {"shape": [2, 2, 2], "data": [1] * 7}, "b": [[1, 2], [3, 4]]}), 400,
                 "invalid_field", field="a.data")
    assert_error(daemon.post("/v1/gemm", files=parts(a=rnd(1, 2, 3, 3), b=rnd(1, 2, 3, 3, dtype=np.float64))), 400,
                 "invalid_field", field="b")
    assert_error(daemon.post("/v1/gemm", {"a": [1, 2], "b": [[1, 2]], "trans_a": True}), 400, "invalid_field",
                 field="trans_a")


def test_stack_length_limit(start_daemon):
    d = start_daemon("--max-stack", "10")
    assert_error(d.post("/v1/gemm", files=parts(a=rnd(1, 11, 2, 2), b=rnd(1, 2, 2))), 413, "too_large", field="a")
    # the broadcast result counts too: (10, 1) @ (2,) stacks of 10 and 2 make 20
    r = d.post("/v1/gemm", {"a": shaped(rnd(1, 10, 1, 2, 2)), "b": shaped(rnd(1, 2, 2, 2))})
    assert r.status_code in (200, 413), r.text
    assert d.post("/v1/gemm", files=parts(a=rnd(1, 10, 2, 2), b=rnd(1, 2, 2))).status_code == 200


def test_kernels_say_whether_they_take_a_stack(daemon, kernels):
    rows = kernels["gemm"] + kernels["ata"]
    assert rows and all(isinstance(k.get("stacks"), bool) for k in rows)
    assert any(k["stacks"] for k in rows if k["op"] == "gemm") and any(k["stacks"] for k in rows if k["op"] == "ata")
    one = next((k["name"] for k in rows if k["op"] == "gemm" and not k["stacks"]), None)
    if one:  # a kernel that runs one matrix at a time refuses a stack by name
        r = daemon.post("/v1/gemm", {"a": shaped(rnd(1, 2, 3, 3)), "b": shaped(rnd(1, 3, 3)), "kernel": one})
        assert r.status_code == 400 and r.json()["error"]["field"] == "kernel", r.text


def test_compare_mode_runs_the_kernels_that_take_a_stack(daemon, kernels):
    a, b = rnd(18, 6, 16, 16), rnd(19, 6, 16, 16)
    r = daemon.post("/v1/gemm", {"a": shaped(a), "b": shaped(b), "kernel": "all"})
    assert r.status_code == 200, r.text
    body = r.json()
    takes = {k["name"] for k in kernels["gemm"] if k["stacks"] and not k.get("named_only")}
    ran = {row["kernel"] for row in body["kernels"]}
    assert ran and ran <= {k["name"] for k in kernels["gemm"] if k["stacks"]}, (ran, takes)
    for row in body["kernels"]:
        if row["status"] == "ok":
            assert row["max_rel_error"] < (1e-2 if "tf32" in row["kernel"] else 1e-5), row
    assert_close(as_result(body), ref(a, b), 16, "float32")


def test_metrics_count_matrices_as_well_as_jobs(start_daemon):
    d = start_daemon()
    r = d.post("/v1/gemm", {"a": shaped(rnd(1, 12, 4, 4)), "b": shaped(rnd(1, 4, 4))})
    assert r.status_code == 200 and r.json()["stack"] == [12] and r.json()["matrices"] == 12
    text = d.metrics_text()
    assert 'crunchd_matrices_total{op="gemm"} 12' in text and 'crunchd_jobs_done_total{op="gemm"} 1' in text


@pytest.mark.skipif(BACKEND != "cpu", reason="half-precision stacks run on both; checked once here")
def test_half_precision_stacks(daemon):
    a, b = rnd(20, 3, 8, 8, dtype=np.float16), rnd(21, 3, 8, 8, dtype=np.float16)
    r = daemon.post("/v1/gemm", files=parts(a=a, b=b), headers={"Accept": "application/x-npy"})
    assert r.status_code == 200, r.text
    got = np.load(io.BytesIO(r.content))
    assert got.dtype == np.float16 and got.shape == (3, 8, 8)
    np.testing.assert_allclose(got.astype(np.float64), ref(a, b), rtol=2e-2, atol=2e-2)


def test_async_job_of_a_stack(daemon):
    a, b = rnd(22, 5, 7, 3), rnd(23, 3, 4)
    r = daemon.post("/v1/jobs", {"op": "gemm", "a": shaped(a), "b": b.tolist()})
    assert r.status_code == 202, r.text
    daemon.wait_job(r.json()["id"])
    body = daemon.get(f"/v1/jobs/{r.json()['id']}/result").json()
    assert_close(as_result(body), ref(a, b), 3, "float32")
