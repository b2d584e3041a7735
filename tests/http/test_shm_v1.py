"""System shared memory from the /v1 routes, as a client with no KServe library uses it: numpy and
multiprocessing.shared_memory, regions registered with a plain POST. Operands
{"shm": {...}, "shape", "dtype"} for gemm (a, b, c), ata and histograms, results written to a
region ("output") and the answer saying where; every result against numpy. The refusals are
KServe's rules (bounds, alignment, exact sizes, outputs apart from inputs) with /v1's errors
naming the field; sync and async jobs hold their regions while they run and not after."""

import json
import threading
import time
import uuid
from multiprocessing import shared_memory

import numpy as np
import pytest
import requests

from conftest import DELAY_HEADER, HTTP_TIMEOUT_S, SLOW, assert_close, assert_error, check_job_body, gemm_ref, rng

ALIGN = 64


class Shm:
    """One POSIX shared-memory object, registered whole as one region with a daemon; arrays are
    laid out in it at 64-byte boundaries. Unregistered and unlinked by close()."""

    def __init__(self, daemon, size, name=None, register=True):
        self.d = daemon
        self.mem = shared_memory.SharedMemory(create=True, size=size)
        self.key = "/" + self.mem.name
        self.name = name or f"v1-{uuid.uuid4().hex[:12]}"
        self.size = size
        self.used = 0
        if register:
            r = self.d.post(f"/v2/systemsharedmemory/region/{self.name}/register",
                            data=json.dumps({"key": self.key, "byte_size": size}))
            assert r.status_code == 200, r.text

    def put(self, arr):
        """Copies arr in at the next free aligned offset; its operand object."""
        arr = np.ascontiguousarray(arr)
        off = self.reserve(arr.nbytes)
        self.view(arr.dtype, arr.shape, off)[...] = arr
        return {"shm": {"region": self.name, "offset": off}, "shape": list(arr.shape), "dtype": arr.dtype.name}

    def reserve(self, nbytes):
        off = (self.used + ALIGN - 1) // ALIGN * ALIGN
        assert off + nbytes <= self.size, "object too small for the test's arrays"
        self.used = off + nbytes
        return off

    def view(self, dtype, shape, offset):
        return np.ndarray(shape, dtype, self.mem.buf, offset=offset)

    def out(self, nbytes, fill=0xAB):
        """An output place of nbytes, filled with garbage the daemon must overwrite."""
        off = self.reserve(nbytes)
        self.mem.buf[off:off + nbytes] = bytes([fill]) * nbytes
        return {"shm": {"region": self.name, "offset": off}}, off

    def unregister(self):
        return self.d.post(f"/v2/systemsharedmemory/region/{self.name}/unregister", data=b"")

    def close(self):
        self.unregister()
        self.mem.close()
        try:
            self.mem.unlink()
        except FileNotFoundError:
            pass


@pytest.fixture
def shm(daemon):
    made = []

    def factory(size=1 << 16, **kw):
        s = Shm(daemon, size, **kw)
        made.append(s)
        return s

    yield factory
    for s in made:
        s.close()


def written(shm_obj, body_result, dtype, shape):
    """The result the answer says was written: checks its place, reads it from the object."""
    assert set(body_result) == {"shm", "shape", "dtype"}, body_result
    assert body_result["shape"] == list(shape) and body_result["dtype"] == np.dtype(dtype).name
    place = body_result["shm"]
    assert place["region"] == shm_obj.name
    assert place["byte_size"] == int(np.prod(shape)) * np.dtype(dtype).itemsize
    return shm_obj.view(dtype, shape, place["offset"]).copy()


# -- results against numpy -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_all_in_shm(daemon, shm, dtype):
    g = rng(31)
    a, b, c = (g.uniform(-1, 1, s).astype(dtype) for s in [(23, 13), (17, 13), (23, 17)])
    s = shm()
    out, _ = s.out(23 * 17 * np.dtype(dtype).itemsize)
    body = {"a": s.put(a), "b": s.put(b), "c": s.put(c), "trans_b": True, "alpha": 1.5, "beta": -0.5,
            "dtype": np.dtype(dtype).name, "output": out}
    r = daemon.post("/v1/gemm", body)
    assert r.status_code == 200, r.text
    check_job_body(r.json(), "gemm", np.dtype(dtype).name)
    got = written(s, r.json()["result"], dtype, (23, 17))
    assert_close(got, gemm_ref(a, b, c, alpha=1.5, beta=-0.5, trans_b=True), 13, np.dtype(dtype).name)
    np.testing.assert_array_equal(s.view(dtype, c.shape, body["c"]["shm"]["offset"]), c)  # inputs untouched


def test_operand_dtype_sets_the_requests(daemon, shm):
    """Without a top-level dtype, bytes in a region say what they are."""
    a = rng(32).uniform(-1, 1, (6, 4))  # float64
    s = shm()
    op = dict(s.put(a), dtype="float64")
    r = daemon.post("/v1/ata", {"a": op})
    assert r.status_code == 200, r.text
    assert r.json()["dtype"] == "float64"
    got = np.asarray(r.json()["result"]["data"]).reshape(4, 4)
    assert_close(got, a.T @ a, 6, "float64")


def test_shm_and_json_operands_mix(daemon, shm):
    g = rng(33)
    a, b = g.uniform(-1, 1, (9, 5)).astype(np.float32), g.uniform(-1, 1, (5, 3)).astype(np.float32)
    s = shm()
    r = daemon.post("/v1/gemm", {"a": s.put(a), "b": b.tolist()})
    assert r.status_code == 200, r.text
    got = np.asarray(r.json()["result"]["data"]).reshape(9, 3)
    assert_close(got, gemm_ref(a, b), 5, "float32")
    # JSON in, the result out to a region
    out, _ = s.out(9 * 3 * 4)
    r = daemon.post("/v1/gemm", {"a": a.tolist(), "b": b.tolist(), "output": out})
    assert r.status_code == 200, r.text
    assert_close(written(s, r.json()["result"], np.float32, (9, 3)), gemm_ref(a, b), 5, "float32")


def test_result_fed_back_as_an_operand(daemon, shm):
    a = rng(34).uniform(-1, 1, (8, 8)).astype(np.float32)
    s = shm()
    out, _ = s.out(8 * 8 * 4)
    r = daemon.post("/v1/ata", {"a": s.put(a), "output": out})
    assert r.status_code == 200, r.text
    ata = r.json()["result"]  # {"shm", "shape", "dtype"}: a valid operand as it is
    out2, _ = s.out(8 * 8 * 4)
    r = daemon.post("/v1/gemm", {"a": ata, "b": s.put(a), "output": out2})
    assert r.status_code == 200, r.text
    assert_close(written(s, r.json()["result"], np.float32, (8, 8)), (a.T @ a) @ a, 64, "float32")


@pytest.mark.parametrize("out_mode", ["shm", "json"])
def test_histogram_u8_in_shm(daemon, shm, out_mode):
    data = rng(35).integers(0, 256, (300, 101)).astype(np.uint8)  # any shape: read flat
    s = shm(1 << 17)
    body = {"data": dict(s.put(data), dtype="uint8")}
    if out_mode == "shm":
        body["output"] = s.out(256 * 8)[0]
    r = daemon.post("/v1/histogram", body)
    assert r.status_code == 200, r.text
    res = r.json()["result"]
    assert res["bins"] == 256
    got = written(s, res["counts"], np.uint64, (256,)) if out_mode == "shm" else np.asarray(res["counts"])
    np.testing.assert_array_equal(got, np.bincount(data.ravel(), minlength=256))


@pytest.mark.parametrize("with_range", [True, False])
def test_histogram_float_in_shm(daemon, shm, with_range):
    x = rng(36).normal(0, 1, 20001).astype(np.float32)
    s = shm(1 << 17)
    out, _ = s.out(30 * 8)
    body = {"data": s.put(x), "dtype": "float32", "bins": 30, "output": out}
    if with_range:
        body["range"] = [-2, 2.5]
    r = daemon.post("/v1/histogram", body)
    assert r.status_code == 200, r.text
    res = r.json()["result"]
    counts, edges = np.histogram(x, bins=30, range=(-2, 2.5) if with_range else None)
    np.testing.assert_array_equal(written(s, res["counts"], np.uint64, (30,)), counts)
    np.testing.assert_allclose(res["edges"], edges.astype(np.float32), rtol=1e-6, atol=1e-6)  # in the answer


def test_histogram_nan_in_shm_is_refused(daemon, shm):
    x = np.array([0.1, np.nan, 0.5], np.float64)
    s = shm()
    r = daemon.post("/v1/histogram", {"data": s.put(x), "dtype": "float64", "range": [0, 1]})
    assert_error(r, 400, "non_finite", "data")
    r = daemon.post("/v1/histogram", {"data": s.put(x), "dtype": "float64"})  # no range: none to find
    assert_error(r, 400, "invalid_field", "data")


def test_npy_accept_still_answers_json(daemon, shm):
    a = np.eye(4, dtype=np.float32)
    s = shm()
    out, _ = s.out(64)
    r = daemon.post("/v1/ata", {"a": s.put(a), "output": out}, headers={"Accept": "application/x-npy"})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json"), r.headers
    np.testing.assert_array_equal(written(s, r.json()["result"], np.float32, (4, 4)), a)


def test_answers_match_the_spec(daemon, shm):
    import yaml
    from test_openapi import SPEC_PATH, check
    spec = yaml.safe_load(open(SPEC_PATH))
    s = shm()
    a = np.ones((3, 2), np.float32)
    body = {"a": s.put(a), "b": s.put(a.T.copy()), "output": s.out(36)[0]}
    check(spec, "GemmRequest", body)
    r = daemon.post("/v1/gemm", body)
    assert r.status_code == 200, r.text
    check(spec, "JobResult", r.json())
    body = {"data": dict(s.put(np.arange(10, dtype=np.uint8)), dtype="uint8"), "output": s.out(256 * 8)[0]}
    check(spec, "HistogramRequest", body)
    r = daemon.post("/v1/histogram", body)
    assert r.status_code == 200, r.text
    check(spec, "JobResult", r.json())


# -- refusals: KServe's rules, /v1's errors --------------------------------------------------------

def test_refusals_name_the_field(daemon, shm):
    s = shm(4096)
    a = np.ones((4, 4), np.float32)
    ok_a = s.put(a)           # offset 0
    ok_b = s.put(a)           # offset 64
    region = s.name

    def gemm(**kw):
        body = {"a": ok_a, "b": ok_b}
        body.update(kw)
        return daemon.post("/v1/gemm", body)

    cases = [
        ({"a": {"shm": {"region": "nosuchregion"}, "shape": [4, 4]}}, 400, "invalid_field", "a",
         "no system shared memory region 'nosuchregion'"),
        ({"a": {"shm": {"region": region, "offset": 4090}, "shape": [4, 4]}}, 400, "invalid_field", "a",
         "past the end of region"),
        ({"a": {"shm": {"region": region, "offset": 2}, "shape": [4, 4]}}, 400, "invalid_field", "a",
         "multiple of 4"),
        ({"a": {"shm": {"region": region, "byte_size": 60}, "shape": [4, 4]}}, 400, "invalid_field", "a",
         "make 64"),
        ({"a": {"shm": {"region": region}, "shape": [4, 4], "dtype": "float64"}, "dtype": "float32"}, 400,
         "invalid_field", "a.dtype", "float32"),
        ({"a": {"shm": {"region": region}, "shape": [4, 4], "dtype": "float64"}}, 400, "invalid_field",
         "b.dtype", "float64"),
        ({"a": {"shm": {"region": region}, "shape": [4, 4, 1]}}, 422, "shape_mismatch", "b", "inner"),  # a stack
        ({"a": {"shm": {"region": region}, "shape": [1] * 9}}, 400, "invalid_field", "a.shape", "1 to 8"),
        ({"a": {"shm": {"region": region}, "shape": [0, 4]}}, 400, "invalid_field", "a.shape", ">= 1"),
        ({"a": {"shm": {"region": region}, "shape": [4, -4]}}, 400, "invalid_field", "a.shape", "integer"),
        ({"a": {"shm": {"region": region}}}, 400, "missing_field", "a.shape", "required"),
        ({"a": {"shm": {}, "shape": [4, 4]}}, 400, "missing_field", "a.shm.region", "required"),
        ({"a": {"shm": {"region": region, "bogus": 1}, "shape": [4, 4]}}, 400, "invalid_field", "a.shm", "bogus"),
        ({"a": {"shm": {"region": region}, "shape": [4, 4], "rows": 4}}, 400, "invalid_field", "a", "rows"),
        ({"a": {"shm": {"region": region, "offset": -1}, "shape": [4, 4]}}, 400, "invalid_field",
         "a.shm.offset", "integer"),
        ({"a": {"shm": "r", "shape": [4, 4]}}, 400, "invalid_field", "a.shm", "object"),
        ({"a": {"shm": {"region": region}, "shape": [100000, 100000]}}, 413, "too_large", "a", "limit"),
        ({"b": {"shm": {"region": region}, "shape": [5, 4]}}, 422, "shape_mismatch", "b", "inner"),
        ({"output": {"shm": {"region": region, "offset": 32}}}, 400, "invalid_field", "output",
         "overlaps input a"),
        ({"output": {"shm": {"region": region, "offset": 64}}}, 400, "invalid_field", "output",
         "overlaps input b"),
        ({"output": {"shm": {"region": region, "offset": 4064}}}, 400, "invalid_field", "output",
         "past the end of region"),
        ({"output": {"shm": {"region": region, "offset": 128, "byte_size": 60}}}, 400, "invalid_field",
         "output", "smaller than the result's 64 bytes"),
        ({"output": {"shm": {"region": region, "offset": 130}}}, 400, "invalid_field", "output",
         "multiple of 4"),
        ({"output": {"region": region}}, 400, "invalid_field", "output", "shm"),
        ({"output": {"shm": {"region": region, "offset": 128}, "x": 1}}, 400, "invalid_field", "output", "x"),
        ({"output": [1]}, 400, "invalid_field", "output", "shm"),
    ]
    for kw, status, code, field, word in cases:
        r = gemm(**kw)
        e = assert_error(r, status, code, field)
        assert word in e["message"], (kw, e)
    # every refusal dropped its holds: the region unregisters at once
    assert s.unregister().status_code == 200


def test_c_in_shm_may_not_be_the_output(daemon, shm):
    """C = alpha AB + beta C in place would read what it writes: refused as on /v2."""
    s = shm()
    a = np.ones((4, 4), np.float32)
    c = s.put(a)
    r = daemon.post("/v1/gemm", {"a": s.put(a), "b": s.put(a), "c": c, "beta": 1.0,
                                 "output": {"shm": c["shm"]}})
    e = assert_error(r, 400, "invalid_field", "output")
    assert "overlaps input c" in e["message"]


def test_histogram_output_too_small(daemon, shm):
    s = shm()
    data = s.put(np.arange(100, dtype=np.uint8))
    r = daemon.post("/v1/histogram", {"data": data, "output": {"shm": {"region": s.name, "offset": 128,
                                                                         "byte_size": 255 * 8}}})
    e = assert_error(r, 400, "invalid_field", "output")
    assert "smaller than the result's 2048 bytes" in e["message"]


# -- holds: a region is held exactly while its job runs ----------------------------------------------

def jobs_in_flight(d):
    text = d.metrics_text()
    return sum(float(line.split()[1]) for line in text.splitlines()
               if line.startswith(("crunchd_jobs_running ", "crunchd_jobs_in_queue ")))


def test_sync_job_holds_its_regions(daemon, shm):
    a = rng(37).uniform(-1, 1, (16, 8)).astype(np.float32)
    s_in, s_out = shm(), shm()
    body = {"a": s_in.put(a), "output": s_out.out(8 * 8 * 4)[0]}
    res = {}
    before = jobs_in_flight(daemon)

    def run():
        res["r"] = daemon.post("/v1/ata", body, delay_ms=int(1500 * SLOW), session=requests.Session())

    t = threading.Thread(target=run)
    t.start()
    try:
        for _ in range(int(500 * SLOW)):
            if jobs_in_flight(daemon) > before:
                break
            time.sleep(0.02)
        for s in (s_in, s_out):
            r = s.unregister()
            assert r.status_code == 409 and "in use" in r.json()["error"], r.text
    finally:
        t.join(60 * SLOW)
    assert res["r"].status_code == 200, res["r"].text
    assert_close(written(s_out, res["r"].json()["result"], np.float32, (8, 8)), a.T @ a, 16, "float32")
    assert s_in.unregister().status_code == 200  # released before the answer went out
    assert s_out.unregister().status_code == 200


def test_async_job_holds_its_regions_until_it_finishes(daemon, shm):
    a = rng(38).uniform(-1, 1, (12, 6)).astype(np.float64)
    s = shm()
    out, _ = s.out(6 * 6 * 8)
    jid = daemon.submit({"op": "ata", "a": s.put(a), "output": out}, delay_ms=int(1000 * SLOW))
    r = s.unregister()
    assert r.status_code == 409 and "in use" in r.json()["error"], r.text
    j, _ = daemon.wait_job(jid)
    assert j["status"] == "done", j
    # finished, its result not fetched yet: the region is free already
    assert s.unregister().status_code == 200
    r = daemon.get(f"/v1/jobs/{jid}/result")
    assert r.status_code == 200, r.text
    assert_close(written(s, r.json()["result"], np.float64, (6, 6)), a.T @ a, 12, "float64")


def test_cancelled_job_releases_its_regions(daemon, shm):
    s = shm()
    a = np.ones((4, 4), np.float32)
    jid = daemon.submit({"op": "ata", "a": s.put(a), "output": s.out(64)[0]}, delay_ms=int(5000 * SLOW))
    assert s.unregister().status_code == 409
    assert daemon.delete(f"/v1/jobs/{jid}").status_code == 200
    deadline = time.monotonic() + 10 * SLOW
    while s.unregister().status_code != 200:
        assert time.monotonic() < deadline, "the cancelled job kept its region"
        time.sleep(0.05)


def test_v1_shm_needs_the_token(start_daemon, tmp_path):
    token = tmp_path / "token"
    token.write_text("v1-shm-s3cret\n")
    d = start_daemon("--auth-token-file", str(token))
    h = {"Authorization": "Bearer v1-shm-s3cret"}
    mem = shared_memory.SharedMemory(create=True, size=4096)
    try:
        np.ndarray((4, 4), np.float32, mem.buf)[...] = np.eye(4)
        r = d.post("/v2/systemsharedmemory/region/tok/register",
                   data=json.dumps({"key": "/" + mem.name, "byte_size": 4096}), headers=h)
        assert r.status_code == 200, r.text
        body = {"a": {"shm": {"region": "tok"}, "shape": [4, 4]}}
        assert d.post("/v1/ata", body).status_code == 401
        r = d.post("/v1/ata", body, headers=h)
        assert r.status_code == 200 and r.json()["result"]["data"][0] == 1, r.text
        assert d.post("/v2/systemsharedmemory/unregister", data=b"", headers=h).status_code == 200
    finally:
        mem.close()
        mem.unlink()
