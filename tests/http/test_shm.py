"""Triton's system shared memory extension on /v2, driven by the real tritonclient[http] package
and tritonclient.utils.shared_memory: registration, status and unregistration; every model with
inputs read from regions and outputs written to regions or answered inline, against numpy; the
refusals (keys outside /dev/shm, missing objects, sizes past the object or not the tensor's,
unknown regions, a name registered twice, a region a running job holds, --shm-max-mb); auth;
and the mappings gone from the daemon's address space once unregistered."""

import json
import os
import threading
import time
import uuid

import numpy as np
import pytest
import requests

from conftest import DELAY_HEADER, HTTP_TIMEOUT_S, SLOW, assert_close, gemm_ref, rng

tc = pytest.importorskip("tritonclient.http")
shm = pytest.importorskip("tritonclient.utils.shared_memory")
from tritonclient.utils import InferenceServerException  # noqa: E402

KS = {np.dtype(np.float32): "FP32", np.dtype(np.float64): "FP64", np.dtype(np.uint8): "UINT8",
      np.dtype(np.uint64): "UINT64"}


# -- helpers -------------------------------------------------------------------------------------

def client_for(d):
    return tc.InferenceServerClient(f"127.0.0.1:{d.port}", network_timeout=HTTP_TIMEOUT_S,
                                    connection_timeout=HTTP_TIMEOUT_S)


def auth(token):
    return {"Authorization": f"Bearer {token}"} if token else None


class Regions:
    """Shared-memory objects made for one test, and the daemons they were registered with:
    unregistered and unlinked at its end whatever happened."""

    def __init__(self):
        self.handles, self.registered = [], []

    def create(self, size, tag="r"):
        """A fresh object of size bytes; (handle, key, default region name)."""
        uid = uuid.uuid4().hex[:12]
        key = f"/crunchd-test-{tag}-{uid}"
        h = shm.create_shared_memory_region(f"{tag}-{uid}", key, size)
        self.handles.append(h)
        return h, key, f"{tag}-{uid}"

    def register(self, client, name, key, size, offset=0, token=None):
        client.register_system_shared_memory(name, key, size, offset=offset, headers=auth(token))
        self.registered.append((client, name, token))

    def close(self):
        for client, name, token in self.registered:
            try:
                client.unregister_system_shared_memory(name, headers=auth(token))
            except Exception:
                pass
        for h in self.handles:
            shm.destroy_shared_memory_region(h)


@pytest.fixture
def regions():
    r = Regions()
    yield r
    r.close()


@pytest.fixture(scope="module")
def client(daemon):
    c = client_for(daemon)
    yield c
    c.close()


def in_shm(name, arr, region, offset=0):
    t = tc.InferInput(name, list(arr.shape), KS[arr.dtype])
    t.set_shared_memory(region, arr.nbytes, offset=offset)
    return t


def out_shm(name, region, byte_size, offset=0):
    o = tc.InferRequestedOutput(name, binary_data=False)
    o.set_shared_memory(region, byte_size, offset=offset)
    return o


def refused(fn, status, *words):
    """fn() raises the server's refusal with this status, its message naming every word."""
    with pytest.raises(InferenceServerException) as e:
        fn()
    assert e.value.status() == str(status), (e.value.status(), e.value.message())
    msg = e.value.message()
    for w in words:
        assert w in msg, (w, msg)
    return msg


def ks_post(d, path, body=None, **kw):
    data = b"" if body is None else json.dumps(body).encode()
    return requests.post(d.url(path), data=data, timeout=HTTP_TIMEOUT_S, **kw)


def metric(d, name):
    for line in d.metrics_text().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def mapped(d, key):
    """Whether the daemon maps the object of key (from its /proc/<pid>/maps)."""
    path = "/dev/shm/" + key.lstrip("/")
    with open(f"/proc/{d.proc.pid}/maps") as f:
        return any(line.split(None, 5)[-1].strip().startswith(path) for line in f
                   if len(line.split(None, 5)) == 6)


# -- registration --------------------------------------------------------------------------------

def test_metadata_lists_the_extension(client):
    assert "system_shared_memory" in client.get_server_metadata()["extensions"]


def test_register_status_unregister(daemon, client, regions):
    _, key1, name1 = regions.create(8192, "a")
    _, key2, name2 = regions.create(4096, "b")
    regions.register(client, name1, key1, 4096, offset=4096)
    regions.register(client, name2, key2, 1000, offset=24)  # not page-aligned: mapped from 0
    listed = {r["name"]: r for r in client.get_system_shared_memory_status()}
    assert listed[name1] == {"name": name1, "key": key1, "offset": 4096, "byte_size": 4096}
    assert listed[name2] == {"name": name2, "key": key2, "offset": 24, "byte_size": 1000}
    assert client.get_system_shared_memory_status(name2) == [listed[name2]]
    assert metric(daemon, "crunchd_shm_regions") >= 2
    assert metric(daemon, "crunchd_shm_registered_bytes") >= 5096
    assert mapped(daemon, key1) and mapped(daemon, key2)

    client.unregister_system_shared_memory(name1)
    assert not mapped(daemon, key1), "unregistering unmaps the region"
    names = [r["name"] for r in client.get_system_shared_memory_status()]
    assert name1 not in names and name2 in names
    refused(lambda: client.get_system_shared_memory_status(name1), 404, name1)
    client.unregister_system_shared_memory(name1)  # as Triton: unknown names are no error

    client.unregister_system_shared_memory()  # every region
    assert client.get_system_shared_memory_status() == []
    assert not mapped(daemon, key2)
    assert metric(daemon, "crunchd_shm_regions") == 0
    assert metric(daemon, "crunchd_shm_registered_bytes") == 0


def test_double_register_is_refused(client, regions):
    _, key, name = regions.create(4096)
    regions.register(client, name, key, 4096)
    refused(lambda: client.register_system_shared_memory(name, key, 1024), 409, name, "already")
    assert client.get_system_shared_memory_status(name)[0]["byte_size"] == 4096


@pytest.mark.parametrize("key,why", [
    ("/../etc/passwd", "POSIX shared-memory name"),
    ("/a/b", "POSIX shared-memory name"),
    ("/..", "POSIX shared-memory name"),
    ("/", "POSIX shared-memory name"),
    ("no-slash", "POSIX shared-memory name"),
    ("/x" + "y" * 200, "POSIX shared-memory name"),
    ("/bad name", "POSIX shared-memory name"),
])
def test_bad_keys_are_refused(client, key, why):
    refused(lambda: client.register_system_shared_memory("badkey", key, 16), 400, why)
    refused(lambda: client.get_system_shared_memory_status("badkey"), 404)


def test_symlinks_in_dev_shm_are_not_followed(client, tmp_path):
    target = tmp_path / "outside"
    target.write_bytes(b"secret" * 100)
    link = f"crunchd-test-link-{uuid.uuid4().hex[:12]}"
    os.symlink(target, "/dev/shm/" + link)
    try:
        refused(lambda: client.register_system_shared_memory("link", "/" + link, 16), 400,
                "cannot open")
    finally:
        os.unlink("/dev/shm/" + link)


def test_missing_object_and_bad_sizes(client, regions):
    refused(lambda: client.register_system_shared_memory(
        "missing", f"/crunchd-test-missing-{uuid.uuid4().hex}", 16), 400, "cannot open")
    _, key, name = regions.create(4096)
    refused(lambda: client.register_system_shared_memory(name, key, 4097), 400, "past the end")
    refused(lambda: client.register_system_shared_memory(name, key, 2048, offset=2049), 400,
            "past the end")
    refused(lambda: client.register_system_shared_memory(name, key, 0), 400, "byte_size")
    refused(lambda: client.register_system_shared_memory(name, key, 16, offset=2 ** 63), 400,
            "offset")
    assert all(r["name"] != name for r in client.get_system_shared_memory_status())


def test_malformed_register_bodies(daemon):
    path = "/v2/systemsharedmemory/region/raw/register"
    for body, status, word in [
        (None, 400, "JSON object"),
        ({"key": "/x", "byte_size": 1, "extra": 1}, 400, "extra"),
        ({"byte_size": 16}, 400, "key"),
        ({"key": "/x"}, 400, "byte_size"),
        ({"key": "/x", "byte_size": -1}, 400, "byte_size"),
        ({"key": "/x", "byte_size": 1.5}, 400, "byte_size"),
        ({"key": 7, "byte_size": 1}, 400, "key"),
    ]:
        r = ks_post(daemon, path, body)
        assert r.status_code == status, (body, r.status_code, r.text)
        assert set(r.json()) == {"error"} and word in r.json()["error"], (body, r.text)
    r = ks_post(daemon, "/v2/systemsharedmemory/region/" + "n" * 200 + "/register",
                {"key": "/x", "byte_size": 1})
    assert r.status_code == 400 and "at most" in r.json()["error"], r.text
    r = ks_post(daemon, "/v2/systemsharedmemory/region/bad%20name/register",
                {"key": "/x", "byte_size": 1})
    assert r.status_code == 400 and "region name" in r.json()["error"], r.text


# -- inference -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("out_mode", ["shm", "json", "binary"])
def test_gemm_inputs_in_shm(client, regions, dtype, out_mode):
    g = rng(11)
    a = g.uniform(-1, 1, (33, 17)).astype(dtype)
    b = g.uniform(-1, 1, (17, 9)).astype(dtype)
    c_bytes = 33 * 9 * np.dtype(dtype).itemsize
    h, key, name = regions.create(a.nbytes + b.nbytes + 64)
    shm.set_shared_memory_region(h, [a, b])  # a at 0, b right after it
    regions.register(client, name, key, a.nbytes + b.nbytes)
    inputs = [in_shm("a", a, name), in_shm("b", b, name, offset=a.nbytes)]
    if out_mode == "shm":
        ho, okey, oname = regions.create(c_bytes + 128, "out")
        regions.register(client, oname, okey, c_bytes + 128)
        outs = [out_shm("c", oname, c_bytes + 64, offset=64)]  # room to spare is fine
    else:
        outs = [tc.InferRequestedOutput("c", binary_data=out_mode == "binary")]
    res = client.infer("gemm", inputs, outputs=outs)
    out = res.get_output("c")
    assert out["shape"] == [33, 9] and out["datatype"] == KS[np.dtype(dtype)], out
    if out_mode == "shm":
        assert "data" not in out, out
        assert "parameters" not in out, out  # as Triton answers: the client knows where it put it
        got = shm.get_contents_as_numpy(ho, dtype, [33, 9], offset=64)
    else:
        got = res.as_numpy("c")
    assert_close(got, gemm_ref(a, b), 17, np.dtype(dtype).name)


def test_gemm_c_in_shm_with_alpha_beta(client, regions):
    g = rng(12)
    a, b, c = (g.uniform(-1, 1, s).astype(np.float32) for s in [(8, 5), (5, 6), (8, 6)])
    h, key, name = regions.create(a.nbytes + b.nbytes + c.nbytes + c.nbytes)
    shm.set_shared_memory_region(h, [a, b, c])
    regions.register(client, name, key, a.nbytes + b.nbytes + c.nbytes + c.nbytes)
    off_c, off_out = a.nbytes + b.nbytes, a.nbytes + b.nbytes + c.nbytes
    inputs = [in_shm("a", a, name), in_shm("b", b, name, a.nbytes), in_shm("c", c, name, off_c)]
    client.infer("gemm", inputs, outputs=[out_shm("c", name, c.nbytes, off_out)],
                 parameters={"alpha": 2.0, "beta": 0.5})
    got = shm.get_contents_as_numpy(h, np.float32, [8, 6], offset=off_out)
    assert_close(got, gemm_ref(a, b, c, alpha=2.0, beta=0.5), 5, "float32")
    # the inputs are the client's memory: read, never written
    np.testing.assert_array_equal(shm.get_contents_as_numpy(h, np.float32, [8, 6], offset=off_c), c)


@pytest.mark.parametrize("out_mode", ["shm", "json"])
def test_ata_in_shm(client, regions, out_mode):
    a = rng(13).uniform(-1, 1, (40, 12)).astype(np.float64)
    h, key, name = regions.create(a.nbytes + 12 * 12 * 8)
    shm.set_shared_memory_region(h, [a])
    regions.register(client, name, key, a.nbytes + 12 * 12 * 8)
    outs = [out_shm("c", name, 12 * 12 * 8, a.nbytes)] if out_mode == "shm" else \
        [tc.InferRequestedOutput("c", binary_data=False)]
    res = client.infer("ata", [in_shm("a", a, name)], outputs=outs)
    got = shm.get_contents_as_numpy(h, np.float64, [12, 12], offset=a.nbytes) \
        if out_mode == "shm" else res.as_numpy("c")
    assert_close(got, a.T @ a, 40, "float64")


@pytest.mark.parametrize("out_mode", ["shm", "json"])
def test_histogram_u8_in_shm(client, regions, out_mode):
    data = rng(14).integers(0, 256, 100_003).astype(np.uint8)
    counts_at = (data.size + 7) // 8 * 8  # counts are 8-byte integers: aligned to 8
    h, key, name = regions.create(counts_at + 256 * 8)
    shm.set_shared_memory_region(h, [data])
    regions.register(client, name, key, counts_at + 256 * 8)
    outs = [out_shm("counts", name, 256 * 8, counts_at)] if out_mode == "shm" else \
        [tc.InferRequestedOutput("counts", binary_data=False)]
    # the counts are written into memory that holds garbage: they must not be added to it
    shm.set_shared_memory_region(h, [np.full(256, 7, np.uint64)], offset=counts_at)
    res = client.infer("histogram", [in_shm("data", data, name)], outputs=outs)
    got = shm.get_contents_as_numpy(h, np.uint64, [256], offset=counts_at) \
        if out_mode == "shm" else res.as_numpy("counts")
    np.testing.assert_array_equal(got, np.bincount(data, minlength=256))


def test_histogram_float_edges_and_counts_in_shm(client, regions):
    x = rng(15).normal(0, 1, 5000).astype(np.float32)
    h, key, name = regions.create(x.nbytes + 20 * 8 + 21 * 4)
    shm.set_shared_memory_region(h, [x])
    regions.register(client, name, key, x.nbytes + 20 * 8 + 21 * 4)
    outs = [out_shm("counts", name, 20 * 8, x.nbytes),
            out_shm("edges", name, 21 * 4, x.nbytes + 20 * 8)]
    res = client.infer("histogram", [in_shm("data", x, name)], outputs=outs,
                       parameters={"bins": 20, "range_lo": -3.0, "range_hi": 3.0})
    assert all("data" not in o for o in res.get_response()["outputs"]), res.get_response()
    ref_counts, ref_edges = np.histogram(x, bins=20, range=(-3.0, 3.0))
    np.testing.assert_array_equal(shm.get_contents_as_numpy(h, np.uint64, [20], offset=x.nbytes),
                                  ref_counts)
    np.testing.assert_allclose(shm.get_contents_as_numpy(h, np.float32, [21], x.nbytes + 160),
                               ref_edges.astype(np.float32), rtol=1e-6)


def test_shm_and_body_inputs_mix(client, regions):
    g = rng(16)
    a, b = g.uniform(-1, 1, (6, 4)).astype(np.float32), g.uniform(-1, 1, (4, 3)).astype(np.float32)
    h, key, name = regions.create(a.nbytes)
    shm.set_shared_memory_region(h, [a])
    regions.register(client, name, key, a.nbytes)
    tb = tc.InferInput("b", [4, 3], "FP32")
    tb.set_data_from_numpy(b, binary_data=True)
    res = client.infer("gemm", [in_shm("a", a, name), tb])
    assert_close(res.as_numpy("c"), gemm_ref(a, b), 4, "float32")


# -- inference refusals ----------------------------------------------------------------------------

def test_input_refusals(client, regions):
    a = np.ones((4, 4), np.float32)
    h, key, name = regions.create(128)
    shm.set_shared_memory_region(h, [a])
    regions.register(client, name, key, 100)
    b = tc.InferInput("b", [4, 4], "FP32")
    b.set_data_from_numpy(a, binary_data=False)

    def infer_with(t, outs=None):
        return lambda: client.infer("gemm", [t, b], outputs=outs)

    t = tc.InferInput("a", [4, 4], "FP32").set_shared_memory(name, 60)  # 64 bytes make 4x4
    refused(infer_with(t), 400, "shared_memory_byte_size is 60", "make 64")
    t = tc.InferInput("a", [4, 4], "FP32").set_shared_memory("nosuchregion", 64)
    refused(infer_with(t), 400, "no system shared memory region 'nosuchregion'")
    t = tc.InferInput("a", [4, 4], "FP32").set_shared_memory(name, 64, offset=40)  # 40 + 64 > 100
    refused(infer_with(t), 400, "past the end of region")
    t = tc.InferInput("a", [4, 4], "FP32").set_shared_memory(name, 64, offset=2 ** 60)
    refused(infer_with(t), 400)
    ok = tc.InferInput("a", [4, 4], "FP32").set_shared_memory(name, 64)
    small = out_shm("c", name, 60, 0)
    refused(infer_with(ok, [small]), 400, "smaller than the result's 64 bytes")
    far = out_shm("c", name, 64, 64)  # 64 + 64 > 100
    refused(infer_with(ok, [far]), 400, "past the end of region")
    both = out_shm("c", name, 64, 0)
    both._parameters["binary_data"] = True
    refused(infer_with(ok, [both]), 400, "exclude each other")


def test_raw_parameter_refusals(daemon, regions, client):
    _, key, name = regions.create(64)
    regions.register(client, name, key, 64)
    base = {"name": "a", "datatype": "FP32", "shape": [4, 4]}
    b = {"name": "b", "datatype": "FP32", "shape": [1, 1], "data": [1]}
    cases = [
        ({"shared_memory_region": name}, "needs both"),
        ({"shared_memory_byte_size": 64}, "needs both"),
        ({"shared_memory_region": 5, "shared_memory_byte_size": 64}, "registered region"),
        ({"shared_memory_region": name, "shared_memory_byte_size": -64}, "integer"),
        ({"shared_memory_region": name, "shared_memory_byte_size": 64, "binary_data_size": 64},
         "exactly one of"),
    ]
    for params, word in cases:
        body = {"inputs": [dict(base, parameters=params), b]}
        r = ks_post(daemon, "/v2/models/gemm/infer", body)
        assert r.status_code == 400 and word in r.json()["error"], (params, r.status_code, r.text)
    body = {"inputs": [dict(base, data=[1] * 16, parameters={"shared_memory_region": name,
                                                               "shared_memory_byte_size": 64}), b]}
    r = ks_post(daemon, "/v2/models/gemm/infer", body)
    assert r.status_code == 400 and "exactly one of" in r.json()["error"], r.text


def test_misaligned_tensors_are_refused(client, regions):
    a = np.ones((2, 2), np.float32)
    h, key, name = regions.create(4096)
    regions.register(client, name, key, 4000, offset=2)  # the region starts 2 bytes in
    t = tc.InferInput("a", [2, 2], "FP32").set_shared_memory(name, 16, offset=0)
    b = tc.InferInput("b", [2, 2], "FP32")
    b.set_data_from_numpy(a, binary_data=False)
    refused(lambda: client.infer("gemm", [t, b]), 400, "multiple of 4")
    t = tc.InferInput("a", [2, 2], "FP32").set_shared_memory(name, 16, offset=2)  # 2 + 2: fine
    res = client.infer("gemm", [t, b])  # zeros in a: the object is fresh
    np.testing.assert_array_equal(res.as_numpy("c"), np.zeros((2, 2), np.float32))


def test_output_overlapping_an_input_is_refused(client, regions):
    a = np.eye(4, dtype=np.float32)
    h, key, name = regions.create(256)
    shm.set_shared_memory_region(h, [a, a])
    regions.register(client, name, key, 256)
    ins = [in_shm("a", a, name), in_shm("b", a, name, 64)]
    refused(lambda: client.infer("gemm", ins, outputs=[out_shm("c", name, 64, 32)]), 400,
            "overlaps input a")
    # the same bytes under a second name are the same memory
    regions.register(client, name + "-alias", key, 256)
    refused(lambda: client.infer("gemm", ins, outputs=[out_shm("c", name + "-alias", 64, 64)]),
            400, "overlaps input b")
    client.infer("gemm", ins, outputs=[out_shm("c", name + "-alias", 64, 128)])
    np.testing.assert_array_equal(shm.get_contents_as_numpy(h, np.float32, [4, 4], 128), a)


def test_shrunken_object_is_refused_not_a_crash(daemon, client, regions):
    a = np.ones((64, 64), np.float32)
    h, key, name = regions.create(a.nbytes)
    shm.set_shared_memory_region(h, [a])
    regions.register(client, name, key, a.nbytes)
    os.truncate("/dev/shm/" + key.lstrip("/"), 100)  # a client shrinks it under us
    refused(lambda: client.infer("ata", [in_shm("a", a, name)]), 400, "no longer covers")
    assert daemon.proc.poll() is None
    client.unregister_system_shared_memory(name)


# -- holds: a region a job uses stays ------------------------------------------------------------

def wait_for(pred, what, timeout=10.0 * SLOW):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_unregister_while_a_job_uses_it(daemon, client, regions):
    a = rng(17).uniform(-1, 1, (16, 8)).astype(np.float32)
    h, key, name = regions.create(a.nbytes)
    shm.set_shared_memory_region(h, [a])
    regions.register(client, name, key, a.nbytes)
    ho, okey, oname = regions.create(8 * 8 * 4, "out")
    regions.register(client, oname, okey, 8 * 8 * 4)
    result = {}

    def run():
        c = client_for(daemon)
        try:
            result["res"] = c.infer("ata", [in_shm("a", a, name)],
                                    outputs=[out_shm("c", oname, 256)],
                                    headers={DELAY_HEADER: str(int(1500 * SLOW))})
        except Exception as e:  # reported by the main thread
            result["err"] = e
        finally:
            c.close()

    running = metric(daemon, "crunchd_jobs_running") + metric(daemon, "crunchd_jobs_in_queue")
    t = threading.Thread(target=run)
    t.start()
    try:
        wait_for(lambda: metric(daemon, "crunchd_jobs_running") + metric(daemon, "crunchd_jobs_in_queue")
                 > running, "the delayed job never started")
        refused(lambda: client.unregister_system_shared_memory(name), 409, name, "in use")
        refused(lambda: client.unregister_system_shared_memory(oname), 409, oname, "in use")
        refused(lambda: client.unregister_system_shared_memory(), 409, name, oname)
        names = {r["name"] for r in client.get_system_shared_memory_status()}
        assert {name, oname} <= names, names
        assert mapped(daemon, key) and mapped(daemon, okey)
    finally:
        t.join(timeout=60 * SLOW)
    assert "err" not in result, result.get("err")
    assert_close(shm.get_contents_as_numpy(ho, np.float32, [8, 8]), a.T @ a, 16, "float32")
    # released before the answer went out: no retry needed
    client.unregister_system_shared_memory(name)
    client.unregister_system_shared_memory(oname)
    assert not mapped(daemon, key) and not mapped(daemon, okey)


def test_regions_survive_a_refused_inference(client, regions):
    a = np.ones((4, 4), np.float32)
    h, key, name = regions.create(64)
    shm.set_shared_memory_region(h, [a])
    regions.register(client, name, key, 64)
    bad_b = tc.InferInput("b", [5, 4], "FP32")  # inner dimensions differ: 422 after decoding a
    bad_b.set_data_from_numpy(np.ones((5, 4), np.float32), binary_data=False)
    refused(lambda: client.infer("gemm", [in_shm("a", a, name), bad_b]), 422)
    client.unregister_system_shared_memory(name)  # no hold leaked: not 409


# -- limits, auth, shutdown ------------------------------------------------------------------------

def test_shm_max_mb(start_daemon, regions):
    d = start_daemon("--shm-max-mb", "1", "--shm-client-max-mb", "1")
    c = client_for(d)
    try:
        _, key, name = regions.create(2 << 20)
        regions.register(c, name, key, 600 << 10)
        refused(lambda: c.register_system_shared_memory("second", key, 600 << 10), 507,
                "--shm-max-mb")
        refused(lambda: c.register_system_shared_memory("huge", key, 2 << 20), 413, "--shm-max-mb")
        regions.register(c, "fits", key, 400 << 10, offset=600 << 10)
        assert metric(d, "crunchd_shm_registered_bytes") == 1000 << 10
        assert metric(d, "crunchd_shm_regions") == 2
    finally:
        c.close()


def test_regions_need_the_token(start_daemon, regions, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-shm\n")
    d = start_daemon("--auth-token-file", str(token_file))
    c = client_for(d)
    try:
        a = np.arange(12, dtype=np.float32).reshape(4, 3)
        h, key, name = regions.create(a.nbytes)
        shm.set_shared_memory_region(h, [a])
        refused(lambda: c.register_system_shared_memory(name, key, a.nbytes), 401)
        refused(lambda: c.get_system_shared_memory_status(), 401)
        refused(lambda: c.unregister_system_shared_memory(), 401)
        refused(lambda: c.register_system_shared_memory(name, key, a.nbytes,
                                                        headers=auth("wrong")), 401)
        regions.register(c, name, key, a.nbytes, token="s3cret-shm")
        assert [r["name"] for r in c.get_system_shared_memory_status(headers=auth("s3cret-shm"))] \
            == [name]
        res = c.infer("ata", [in_shm("a", a, name)], headers=auth("s3cret-shm"))
        assert_close(res.as_numpy("c"), a.T.astype(np.float64) @ a, 4, "float32")
        refused(lambda: c.unregister_system_shared_memory(name), 401)
    finally:
        c.close()


def test_shutdown_with_regions_registered(start_daemon, regions):
    d = start_daemon()
    c = client_for(d)
    _, key, name = regions.create(4096)
    regions.register(c, name, key, 4096)
    c.close()
    assert mapped(d, key)
    assert d.stop() == 0  # SIGTERM with a region mapped: a clean exit, no sanitizer report
