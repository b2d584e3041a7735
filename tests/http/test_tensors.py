"""Resident tensors (issue 36): POST /v1/tensors in every body form, operands that name them (JSON,
query parameters beside .npy, KServe inputs), results kept as tensors and accumulated into in
place, ownership (another client sees 404), deletion while a job holds one, the caps (507
tensor_limit, never another tensor dropped), idle expiry, metrics and the memory budget. On cuda
the same tests run with the tensors in device memory."""

import gzip
import io
import json
import os
import re
import tempfile
import time
import uuid

import numpy as np
import pytest
import requests

from conftest import BACKEND, DELAY_HEADER, SLOW, assert_close, assert_error, triton_client

NPY = "application/x-npy"


def npy(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def rnd(seed, *shape, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def create(d, body=None, data=None, ctype=None, query="", status=201, fresh=False):
    if fresh:
        r = requests.post(d.url("/v1/tensors" + query), data=data, headers={"Content-Type": ctype}, timeout=60)
    elif data is not None:
        r = d.post("/v1/tensors" + query, data=data, headers={"Content-Type": ctype})
    else:
        r = d.post("/v1/tensors" + query, body)
    assert r.status_code == status, r.text
    return r


def download(d, ref, headers=None):
    r = d.get(f"/v1/tensors/{ref}", headers={"Accept": NPY, **(headers or {})})
    assert r.status_code == 200, r.text
    return np.load(io.BytesIO(r.content))


def metric(d, name, device):
    m = re.search(rf'^{name}\{{device="{device}"\}} (\S+)$', d.metrics_text(), re.M)
    assert m, name
    return float(m.group(1))


PLACE = "0" if BACKEND == "cuda" else "host"


@pytest.fixture
def tdaemon(start_daemon):
    sock = os.path.join(tempfile.mkdtemp(prefix="crt-", dir="/tmp"), "t.sock")
    return start_daemon("--test-hooks", "--unix-socket", sock, "--direct-min-kb", "64")


def test_create_in_every_form_and_read_back(tdaemon):
    d = tdaemon
    a = rnd(1, 3, 4, 5)
    forms = [
        ({"data": a.tolist()}, None, None, ""),                                   # nested lists
        ({"shape": [3, 4, 5], "data": a.ravel().tolist()}, None, None, ""),        # shape + flat data
        (None, npy(a), NPY, ""),                                                  # .npy
        (None, npy(np.asfortranarray(a)), NPY, ""),                               # .npy, Fortran order
        (None, a.tobytes(), "application/octet-stream", "?shape=3,4,5&dtype=float32"),  # raw bytes
    ]
    for body, data, ctype, q in forms:
        r = create(d, body, data, ctype, q)
        meta = r.json()
        assert r.headers["Location"] == f"/v1/tensors/{meta['id']}"
        assert meta["shape"] == [3, 4, 5] and meta["dtype"] == "float32" and meta["bytes"] == a.nbytes
        assert meta["device"] == (0 if BACKEND == "cuda" else "host") and meta["expires_at"] > time.time()
        assert meta["instance"]
        np.testing.assert_array_equal(download(d, meta["id"]), a)
        got = d.get(f"/v1/tensors/{meta['id']}?data=1").json()
        np.testing.assert_allclose(np.asarray(got["data"]).reshape(got["shape"]), a, rtol=1e-7)
    # Past --direct-min-kb crunchd reads the body itself, straight into the tensor's memory; it
    # decides when a connection opens, so this upload takes a fresh one.
    big = rnd(2, 400, 300)
    direct = r'crunchd_direct_requests_total\{transport="tcp"\} (\d+)'
    before = int(re.search(direct, d.metrics_text()).group(1))
    meta = create(d, data=npy(big), ctype=NPY, query="?name=big", fresh=True).json()
    assert meta["name"] == "big"
    np.testing.assert_array_equal(download(d, "big"), big)
    after = int(re.search(direct, d.metrics_text()).group(1))
    assert after == before + 1
    z = gzip.compress(npy(a))
    r = d.post("/v1/tensors", data=z, headers={"Content-Type": NPY, "Content-Encoding": "gzip"})
    assert r.status_code == 201, r.text
    u8 = np.arange(10, dtype=np.uint8)
    meta = create(d, data=u8.tobytes(), ctype="application/octet-stream").json()
    assert meta["dtype"] == "uint8" and meta["shape"] == [10]
    listed = {t["id"] for t in d.get("/v1/tensors").json()["tensors"]}
    assert meta["id"] in listed and len(listed) == 8


def test_names_ids_and_refusals(tdaemon):
    d = tdaemon
    create(d, {"data": [[1, 2]], "name": "w.1"})
    assert_error(d.post("/v1/tensors", {"data": [[1, 2]], "name": "w.1"}), 409, "already_exists", field="name")
    assert_error(d.post("/v1/tensors", {"data": [[1]], "name": "x" * 129}), 400, "invalid_field", field="name")
    assert_error(d.post("/v1/tensors", {"data": [[1]], "name": "a/b"}), 400, "invalid_field", field="name")
    assert_error(d.post("/v1/tensors", {"data": [[1]], "name": str(uuid.uuid4())}), 400, "invalid_field", field="name")
    assert_error(d.post("/v1/tensors", {"data": [[1]], "dtype": "int7"}), 400, "invalid_field", field="dtype")
    assert_error(d.post("/v1/tensors", {"data": [[1]], "color": 1}), 400, "invalid_field", field="color")
    assert_error(d.post("/v1/tensors", {"shape": [2, 2], "data": [1, 2, 3]}), 400, "invalid_field", field="data")
    assert_error(d.post("/v1/tensors?shape=3,3&dtype=float32", data=b"\0" * 20,
                        headers={"Content-Type": "application/octet-stream"}), 400, "invalid_field", field="shape")
    assert_error(d.get("/v1/tensors/nope"), 404, "not_found", field="id")
    assert_error(d.delete(f"/v1/tensors/{uuid.uuid4()}"), 404, "not_found")


def test_generated_tensors(start_daemon):
    """{"random": {...}} makes a tensor where it lives (device memory on cuda) with the generator
    of generated operands: the same seed, the same numbers as the operand and as the reference."""
    from random_ref import random_operand
    d = start_daemon("--max-elements", "100000")
    info = create(d, {"random": {"shape": [40, 30], "dist": "normal", "seed": 7}, "name": "gen-w"}).json()
    assert info["shape"] == [40, 30] and info["dtype"] == "float32" and info["device"] == (0 if BACKEND == "cuda" else "host")
    want = random_operand((40, 30), "float32", "normal", 7)
    assert np.array_equal(download(d, "gen-w"), want)
    create(d, {"random": {"shape": [1000], "seed": 3}, "dtype": "uint8", "name": "gen-u8"})
    assert np.array_equal(download(d, "gen-u8"), random_operand((1000,), "uint8", "uniform", 3))
    # the tensor and the operand of the same spec are one matrix: their product with I is equal
    r = d.post("/v1/gemm", {"a": {"tensor": "gen-w"}, "b": np.eye(30).tolist()})
    r2 = d.post("/v1/gemm", {"a": {"random": {"shape": [40, 30], "dist": "normal", "seed": 7}}, "b": np.eye(30).tolist()})
    assert r.status_code == r2.status_code == 200 and r.json()["result"]["data"] == r2.json()["result"]["data"]
    assert_error(d.post("/v1/tensors", {"random": {"shape": [4, -1]}}), 400, "invalid_field", field="random.shape")
    assert_error(d.post("/v1/tensors", {"random": {"shape": [4]}, "data": [1]}), 400, "invalid_field", field="data")
    assert_error(d.post("/v1/tensors", {"random": {"shape": [4], "dist": "normal"}, "dtype": "uint8"}), 400,
                 "invalid_field", field="random.dist")
    assert_error(d.post("/v1/tensors", {"random": {"shape": [1000, 1000]}}), 413, "too_large", field="random.shape")
    assert {t["name"] for t in d.get("/v1/tensors").json()["tensors"]} == {"gen-w", "gen-u8"}


def test_operands_by_reference_in_every_form(tdaemon):
    d = tdaemon
    w = rnd(3, 64, 48)
    wid = create(d, data=npy(w), ctype=NPY, query="?name=w").json()["id"]
    x = rnd(4, 20, 64)
    for ref in (wid, "w"):
        r = d.post("/v1/gemm", {"a": x.tolist(), "b": {"tensor": ref}})
        assert r.status_code == 200, r.text
        res = r.json()["result"]
        assert_close(np.asarray(res["data"]).reshape(res["shape"]), x.astype(np.float64) @ w, 64, "float32")
    files = {"a": ("a.npy", npy(x), "application/octet-stream")}
    r = d.post("/v1/gemm?tensor_b=w", files=files, headers={"Accept": NPY})
    assert r.status_code == 200, r.text
    assert_close(np.load(io.BytesIO(r.content)), x.astype(np.float64) @ w, 64, "float32")
    r = d.post("/v1/ata?tensor_a=w", data=b"", headers={"Content-Type": NPY, "Accept": NPY})
    assert r.status_code == 200, r.text  # an empty body: the query names the operand
    assert_close(np.load(io.BytesIO(r.content)), w.T.astype(np.float64) @ w, 64, "float32")
    r = d.post("/v1/ata", {"a": {"tensor": "w"}})
    assert r.status_code == 200, r.text
    assert_close(np.asarray(r.json()["result"]["data"]).reshape(48, 48), w.T.astype(np.float64) @ w, 64, "float32")
    stack = rnd(5, 6, 20, 64)  # a stack against one resident matrix
    r = d.post("/v1/gemm", {"a": {"shape": list(stack.shape), "data": stack.ravel().tolist()}, "b": {"tensor": "w"}})
    assert r.status_code == 200, r.text
    res = r.json()["result"]
    assert res["shape"] == [6, 20, 48]
    assert_close(np.asarray(res["data"]).reshape(6, 20, 48), stack.astype(np.float64) @ w, 64, "float32")
    data = np.random.default_rng(6).integers(0, 256, 4000, dtype=np.uint8)
    create(d, data=data.tobytes(), ctype="application/octet-stream", query="?name=bytes")
    r = d.post("/v1/histogram", {"data": {"tensor": "bytes"}})
    assert r.json()["result"]["counts"] == np.bincount(data, minlength=256).tolist()
    with triton_client(d) as client:
        import tritonclient.http as tc
        ia = tc.InferInput("a", [20, 64], "FP32")
        ia.set_data_from_numpy(x, binary_data=True)
        ib = tc.InferInput("b", [64, 48], "FP32")
        ib._parameters["tensor"] = "w"  # tritonclient 2.40 has no setter for an input's parameters
        assert_close(client.infer("gemm", [ia, ib]).as_numpy("c"), x.astype(np.float64) @ w, 64, "float32")
    assert_error(d.post("/v1/gemm", {"a": x.tolist(), "b": {"tensor": "w"}, "dtype": "float64"}), 400,
                 "invalid_field", field="b.tensor")
    assert_error(d.post("/v1/gemm", {"a": x.T.tolist(), "b": {"tensor": "w"}}), 422, "shape_mismatch", field="b")
    assert_error(d.post("/v1/gemm", {"a": x.tolist(), "b": {"tensor": "w", "x": 1}}), 400, "invalid_field")
    assert_error(d.post("/v1/gemm", {"a": x.tolist(), "b": {"tensor": "zz"}}), 404, "not_found", field="b.tensor")


def test_results_kept_and_chained_then_accumulated_in_place(tdaemon):
    d = tdaemon
    a, b = rnd(7, 32, 40), rnd(8, 40, 24)
    r = d.post("/v1/gemm", {"a": a.tolist(), "b": b.tolist(), "output": {"tensor": {"name": "c"}}})
    assert r.status_code == 200, r.text
    kept = r.json()["result"]["tensor"]
    assert kept["name"] == "c" and kept["shape"] == [32, 24] and "data" not in r.json()["result"]
    want = a.astype(np.float64) @ b
    assert_close(download(d, "c"), want, 40, "float32")
    # chain: AtA of the kept result, itself kept; nothing crosses to the host in between
    r = d.post("/v1/ata", {"a": {"tensor": "c"}, "output": {"tensor": {}}})
    ata = r.json()["result"]["tensor"]
    if BACKEND == "cuda":
        assert r.json()["timings_ms"]["h2d"] == 0 and r.json()["timings_ms"]["d2h"] == 0
    assert_close(download(d, ata["id"]), want.T @ want, 32, "float32")
    # ?output=tensor for a binary request
    files = {"a": ("a.npy", npy(a), "application/octet-stream"), "b": ("b.npy", npy(b), "application/octet-stream")}
    r = d.post("/v1/gemm?output=tensor&output_name=c2", files=files, headers={"Accept": NPY})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")  # metadata, not data
    assert_close(download(d, "c2"), want, 40, "float32")
    # C += A·B, three times, into the same tensor: the accumulator never leaves the daemon
    create(d, {"shape": [32, 24], "data": [0.0] * (32 * 24), "name": "acc"})
    for _ in range(3):
        r = d.post("/v1/gemm", {"a": a.tolist(), "b": b.tolist(), "c": {"tensor": "acc"}, "beta": 1.0,
                                "output": {"tensor": "acc"}})
        assert r.status_code == 200, r.text
        assert r.json()["result"]["tensor"]["name"] == "acc"
    assert_close(download(d, "acc"), 3 * want, 40, "float32")
    assert_error(d.post("/v1/gemm", {"a": a.tolist(), "b": b.tolist(), "output": {"tensor": "missing"}}),
                 404, "not_found")
    assert_error(d.post("/v1/gemm", {"a": a.tolist(), "b": a.T.tolist(), "output": {"tensor": "acc"}}), 422,
                 "shape_mismatch", field="output.tensor")


def test_another_client_sees_nothing(tdaemon):
    d = tdaemon
    tid = create(d, {"data": [[1, 2], [3, 4]], "name": "mine"}).json()["id"]
    for ref in (tid, "mine"):  # over the Unix socket the client is the uid, not this address
        status, _, body = d.unix_request("GET", f"/v1/tensors/{ref}")
        assert status == 404, body
        status, _, body = d.unix_request("POST", "/v1/ata", {"a": {"tensor": ref}})
        assert status == 404, body
    status, _, body = d.unix_request("GET", "/v1/tensors")
    assert status == 200 and json.loads(body)["tensors"] == []
    status, _, body = d.unix_request("DELETE", f"/v1/tensors/{tid}")
    assert status == 404
    assert d.get(f"/v1/tensors/{tid}").status_code == 200


def test_delete_while_a_job_holds_it(tdaemon):
    d = tdaemon
    w = rnd(9, 30, 30)
    tid = create(d, {"data": w.tolist()}).json()["id"]
    job = d.submit({"op": "ata", "a": {"tensor": tid}}, delay_ms=600)
    r = d.delete(f"/v1/tensors/{tid}")
    assert r.status_code == 200 and r.json()["id"] == tid
    assert d.get(f"/v1/tensors/{tid}").status_code == 404
    assert_error(d.post("/v1/ata", {"a": {"tensor": tid}}), 404, "not_found")
    d.wait_job(job)
    res = d.get(f"/v1/jobs/{job}/result").json()["result"]  # the job kept it to its end
    assert_close(np.asarray(res["data"]).reshape(30, 30), w.T.astype(np.float64) @ w, 30, "float32")
    deadline = time.monotonic() + 10 * SLOW
    while metric(d, "crunchd_tensor_bytes", PLACE) > 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert metric(d, "crunchd_tensor_bytes", PLACE) == 0 and metric(d, "crunchd_tensors", PLACE) == 0


def test_caps_refuse_never_evict(start_daemon):
    d = start_daemon("--tensor-max-mb", "1", "--tensor-client-max-mb", "1")
    half = np.zeros(96 * 1024, np.float32)  # 384 KiB
    ids = [create(d, data=npy(half), ctype=NPY).json()["id"] for _ in range(2)]
    r = d.post("/v1/tensors", data=npy(half), headers={"Content-Type": NPY})
    assert_error(r, 507, "tensor_limit")
    assert all(d.get(f"/v1/tensors/{i}").status_code == 200 for i in ids)  # nobody else's dropped
    assert_error(d.post("/v1/tensors", data=npy(np.zeros(300 * 1024, np.float32)), headers={"Content-Type": NPY}),
                 413, "too_large")
    # a kept result counts too
    assert_error(d.post("/v1/gemm", {"a": np.ones((300, 300)).tolist(), "b": np.ones((300, 300)).tolist(),
                                     "output": {"tensor": {}}}), 507, "tensor_limit")
    d.delete(f"/v1/tensors/{ids[0]}")
    create(d, data=npy(half), ctype=NPY)


def test_idle_tensors_expire(start_daemon):
    d = start_daemon("--tensor-idle-s", "1")
    tid = create(d, {"data": [[1.0]]}).json()["id"]
    deadline = time.monotonic() + 15 * SLOW
    while d.get(f"/v1/tensors/{tid}").status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert d.get(f"/v1/tensors/{tid}").status_code == 404
    assert metric(d, "crunchd_tensors_expired_total", PLACE) == 1 and metric(d, "crunchd_tensors_created_total", PLACE) == 1


def test_budget_and_metrics_return_to_zero(tdaemon):
    d = tdaemon
    ids = [create(d, {"data": rnd(10 + i, 50, 50).tolist()}).json()["id"] for i in range(3)]
    assert metric(d, "crunchd_tensors", PLACE) == 3 and metric(d, "crunchd_tensor_bytes", PLACE) == 3 * 50 * 50 * 4
    for i in ids:
        assert d.delete(f"/v1/tensors/{i}").status_code == 200
    assert metric(d, "crunchd_tensors", PLACE) == 0 and metric(d, "crunchd_tensor_bytes", PLACE) == 0
    m = re.search(r'^crunchd_memory_charged_bytes\{kind="tensor"\} (\S+)$', d.metrics_text(), re.M)
    assert m and float(m.group(1)) == 0
