"""Triton's CUDA shared memory extension on /v2 (/v2/cudasharedmemory), driven by the real
tritonclient[http] package and tritonclient.utils.cuda_shared_memory.

On every backend: the routes answer in the v2 shape, bodies are validated field by field, and a
backend without device memory (cpu) refuses registration with a 400 naming why. On cuda (and with
cuda-python installed, which tritonclient's CUDA utilities need): regions registered from a
client process's device allocations, every model reading its inputs from and writing its result
to device memory with no copy (h2d and d2h ~0), against numpy; a byte_size past the allocation,
a bad device or handle, a name taken by a system region, float histogram data, compare mode and
a region a running request holds are refused; the metrics count the regions."""

import base64
import json
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import requests

from conftest import (BACKEND, DELAY_HEADER, HTTP_TIMEOUT_S, assert_close, gemm_ref, parse_server_timing,
                      rng, triton_client)

tc = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

ON_CUDA = BACKEND == "cuda"


def ks_post(d, path, body, **kw):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return requests.post(d.url(path), data=data, timeout=HTTP_TIMEOUT_S, **kw)


def v2_error(r, status, *words):
    assert r.status_code == status, (r.status_code, r.text)
    msg = r.json()["error"]
    assert isinstance(msg, str)
    for w in words:
        assert w in msg, (w, msg)
    return msg


def metric(d, name):
    for line in d.metrics_text().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


FAKE_HANDLE = base64.b64encode(bytes(range(64))).decode()


# -- every backend --------------------------------------------------------------------------------

def test_status_starts_empty(daemon):
    r = requests.get(daemon.url("/v2/cudasharedmemory/status"), timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 200 and isinstance(r.json(), list)
    v2_error(requests.get(daemon.url("/v2/cudasharedmemory/region/nothing-here/status"),
                          timeout=HTTP_TIMEOUT_S), 404, "nothing-here")


@pytest.mark.parametrize("body,words", [
    (b"", ["JSON object"]),
    ({"device_id": 0, "byte_size": 64}, ["raw_handle"]),
    ({"raw_handle": "abc", "device_id": 0, "byte_size": 64}, ["raw_handle"]),
    ({"raw_handle": {"b64": "not base64!"}, "device_id": 0, "byte_size": 64}, ["base64"]),
    ({"raw_handle": {"b64": FAKE_HANDLE}, "byte_size": 64}, ["device_id"]),
    ({"raw_handle": {"b64": FAKE_HANDLE}, "device_id": -1, "byte_size": 64}, ["device_id"]),
    ({"raw_handle": {"b64": FAKE_HANDLE}, "device_id": 0}, ["byte_size"]),
    ({"raw_handle": {"b64": FAKE_HANDLE}, "device_id": 0, "byte_size": 1.5}, ["byte_size"]),
    ({"raw_handle": {"b64": FAKE_HANDLE}, "device_id": 0, "byte_size": 64, "key": "/x"}, ["key"]),
])
def test_register_body_is_validated(daemon, body, words):
    v2_error(ks_post(daemon, "/v2/cudasharedmemory/region/r1/register", body), 400, *words)


def test_register_bad_name_and_device(daemon):
    body = {"raw_handle": {"b64": FAKE_HANDLE}, "device_id": 0, "byte_size": 64}
    v2_error(ks_post(daemon, "/v2/cudasharedmemory/region/bad%20name/register", body), 400)
    v2_error(ks_post(daemon, "/v2/cudasharedmemory/region/r2/register", dict(body, device_id=999)), 400,
             "device_id" if ON_CUDA else "cuda backend")


@pytest.mark.skipif(ON_CUDA, reason="the cpu backend's refusal")
def test_cpu_backend_refuses_cuda_regions(daemon):
    body = {"raw_handle": {"b64": FAKE_HANDLE}, "device_id": 0, "byte_size": 64}
    v2_error(ks_post(daemon, "/v2/cudasharedmemory/region/r3/register", body), 400, "cuda backend")
    meta = requests.get(daemon.url("/v2"), timeout=HTTP_TIMEOUT_S).json()
    assert "cuda_shared_memory" not in meta["extensions"]
    assert metric(daemon, "crunchd_cuda_shm_regions") == 0


def test_unregister_unknown_is_harmless(daemon):
    assert ks_post(daemon, "/v2/cudasharedmemory/region/never-registered/unregister", b"").status_code == 200
    assert ks_post(daemon, "/v2/cudasharedmemory/unregister", b"").status_code == 200


def test_auth_covers_the_routes(start_daemon, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-for-cuda-shm\n")
    d = start_daemon("--auth-token-file", str(token_file))
    assert requests.get(d.url("/v2/cudasharedmemory/status"), timeout=HTTP_TIMEOUT_S).status_code == 401
    body = {"raw_handle": {"b64": FAKE_HANDLE}, "device_id": 0, "byte_size": 64}
    assert ks_post(d, "/v2/cudasharedmemory/region/r/register", body).status_code == 401


# -- cuda: a client process owns the device memory ------------------------------------------------

# A client in its own process (a CUDA IPC handle cannot be opened by the process that made it):
# it reads commands as JSON lines on stdin and answers a JSON line each.
CLIENT = textwrap.dedent(r"""
    import base64, json, sys
    import numpy as np
    import tritonclient.utils.cuda_shared_memory as cshm
    regions = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "create":
            h = cshm.create_shared_memory_region(cmd["name"], cmd["size"], cmd.get("device", 0))
            regions[cmd["name"]] = h
            raw = cshm.get_raw_handle(h)
            out = {"b64": raw.decode() if isinstance(raw, bytes) else raw}
        elif op == "set":  # the utilities write from the region's start: splice at the offset
            h = regions[cmd["name"]]
            whole = cshm.get_contents_as_numpy(h, np.uint8, [h._byte_size]).copy()
            at = cmd.get("offset", 0)
            for a in cmd["arrays"]:
                b = np.frombuffer(base64.b64decode(a), np.uint8)
                whole[at:at + b.size] = b
                at += b.size
            cshm.set_shared_memory_region(h, [whole])
            out = {}
        elif op == "get":
            h = regions[cmd["name"]]
            whole = cshm.get_contents_as_numpy(h, np.uint8, [h._byte_size])
            n = int(np.prod(cmd["shape"])) * np.dtype(cmd["dtype"]).itemsize
            at = cmd.get("offset", 0)
            out = {"data": base64.b64encode(whole[at:at + n].tobytes()).decode()}
        elif op == "destroy":
            cshm.destroy_shared_memory_region(regions.pop(cmd["name"]))
            out = {}
        print(json.dumps(out), flush=True)
""")


class DeviceClient:
    def __init__(self):
        self.p = subprocess.Popen([sys.executable, "-c", CLIENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        self.names = []

    def call(self, **cmd):
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        assert line, "the CUDA client process died"
        return json.loads(line)

    def create(self, name, size, device=0):
        self.names.append(name)
        return self.call(op="create", name=name, size=size, device=device)["b64"]

    def set(self, name, arrays, offset=0):
        self.call(op="set", name=name, arrays=[base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()
                                               for a in arrays], offset=offset)

    def get(self, name, dtype, shape, offset=0):
        out = self.call(op="get", name=name, dtype=dtype, shape=list(shape), offset=offset)
        return np.frombuffer(base64.b64decode(out["data"]), dtype=dtype).reshape(shape)

    def close(self):
        for n in self.names:
            try:
                self.call(op="destroy", name=n)
            except Exception:
                pass
        self.p.stdin.close()
        self.p.wait(timeout=30)


needs_cuda = pytest.mark.skipif(not ON_CUDA, reason="CUDA shared memory needs the cuda backend")


@pytest.fixture
def dev():
    pytest.importorskip("cuda.bindings.runtime")
    c = DeviceClient()
    yield c
    c.close()


@pytest.fixture(scope="module")
def client(daemon):
    with triton_client(daemon) as c:
        yield c


def register(client, name, b64, size, device=0):
    """As a tritonclient user does: get_raw_handle's base64 text, as bytes."""
    client.register_cuda_shared_memory(name, b64.encode(), device, size)


def in_shm(name, shape, dtype, region, offset=0):
    t = tc.InferInput(name, list(shape), dtype)
    t.set_shared_memory(region, int(np.prod(shape)) * np.dtype(NP[dtype]).itemsize, offset=offset)
    return t


def out_shm(name, region, byte_size, offset=0):
    o = tc.InferRequestedOutput(name, binary_data=False)
    o.set_shared_memory(region, byte_size, offset=offset)
    return o


NP = {"FP32": np.float32, "FP64": np.float64, "UINT8": np.uint8}


@needs_cuda
@pytest.mark.parametrize("m,k,n,dtype", [(1, 1, 1, "FP32"), (33, 17, 65, "FP32"), (128, 64, 96, "FP64"),
                                         (513, 257, 129, "FP32")])
def test_gemm_reads_and_writes_device_memory(daemon, client, dev, m, k, n, dtype):
    r = rng(m * 7 + n)
    a = r.standard_normal((m, k)).astype(NP[dtype])
    b = r.standard_normal((k, n)).astype(NP[dtype])
    es = a.itemsize
    in_bytes, out_bytes = a.nbytes + b.nbytes, m * n * es
    name_in, name_out = f"cin-{m}-{dtype}", f"cout-{m}-{dtype}"
    register(client, name_in, dev.create(name_in, in_bytes), in_bytes)
    register(client, name_out, dev.create(name_out, out_bytes), out_bytes)
    try:
        dev.set(name_in, [a, b])
        res = client.infer("gemm", [in_shm("a", a.shape, dtype, name_in), in_shm("b", b.shape, dtype, name_in, a.nbytes)],
                           outputs=[out_shm("c", name_out, out_bytes)])
        out = res.get_response()["outputs"][0]
        assert "data" not in out and "parameters" not in out  # as Triton: the region holds it
        got = dev.get(name_out, str(np.dtype(NP[dtype])), (m, n))
        assert_close(got, gemm_ref(a, b), k, str(np.dtype(NP[dtype])))
    finally:
        client.unregister_cuda_shared_memory(name_in)
        client.unregister_cuda_shared_memory(name_out)


@needs_cuda
def test_gemm_with_c_in_device_memory_keeps_the_clients_c(daemon, client, dev):
    r = rng(5)
    a, b, c = (r.standard_normal(s).astype(np.float32) for s in ((40, 30), (30, 50), (40, 50)))
    size = a.nbytes + b.nbytes + c.nbytes
    register(client, "cabc", dev.create("cabc", size), size)
    register(client, "cout", dev.create("cout", c.nbytes), c.nbytes)
    try:
        dev.set("cabc", [a, b, c])
        inputs = [in_shm("a", a.shape, "FP32", "cabc"), in_shm("b", b.shape, "FP32", "cabc", a.nbytes),
                  in_shm("c", c.shape, "FP32", "cabc", a.nbytes + b.nbytes)]
        body = client.infer("gemm", inputs, outputs=[out_shm("c", "cout", c.nbytes)],
                            parameters={"alpha": 2.0, "beta": 0.5})
        assert "parameters" not in body.get_response()["outputs"][0]  # Triton names no region either
        assert_close(dev.get("cout", "float32", c.shape), 2.0 * (a @ b) + 0.5 * c, 30, "float32")
        assert np.array_equal(dev.get("cabc", "float32", c.shape, a.nbytes + b.nbytes), c)  # c untouched
    finally:
        client.unregister_cuda_shared_memory("cabc")
        client.unregister_cuda_shared_memory("cout")


@needs_cuda
def test_ata_and_uint8_histogram_and_inline_answer(daemon, client, dev):
    r = rng(9)
    a = r.standard_normal((301, 77)).astype(np.float32)
    data = r.integers(0, 256, 100_003, dtype=np.uint8)
    at = (a.nbytes + 255) // 256 * 256  # the counts: 8-byte elements start at a multiple of 8
    size = at + 256 * 8 + data.nbytes
    register(client, "cmix", dev.create("cmix", size), size)
    try:
        dev.set("cmix", [a])
        res = client.infer("ata", [in_shm("a", a.shape, "FP32", "cmix")],
                           outputs=[tc.InferRequestedOutput("c", binary_data=True)])
        assert_close(res.as_numpy("c"), a.T @ a, 301, "float32")  # device input, answer in the body
        dev.set("cmix", [data], offset=at + 256 * 8)
        res = client.infer("histogram", [in_shm("data", data.shape, "UINT8", "cmix", at + 256 * 8)],
                           outputs=[out_shm("counts", "cmix", 256 * 8, at)])
        assert "parameters" not in res.get_response()["outputs"][0]
        counts = dev.get("cmix", "uint64", (256,), at)
        assert np.array_equal(counts, np.bincount(data, minlength=256))
    finally:
        client.unregister_cuda_shared_memory("cmix")


@needs_cuda
def test_no_copies_in_the_timings(daemon, dev, client):
    a = np.ones((2048, 2048), np.float32)
    size = 3 * a.nbytes
    register(client, "cbig", dev.create("cbig", size), size)

    def shm(offset, nbytes):
        return {"shared_memory_region": "cbig", "shared_memory_offset": offset, "shared_memory_byte_size": nbytes}

    try:
        dev.set("cbig", [a, a])
        body = {"inputs": [{"name": "a", "shape": [2048, 2048], "datatype": "FP32", "parameters": shm(0, a.nbytes)},
                           {"name": "b", "shape": [2048, 2048], "datatype": "FP32",
                            "parameters": shm(a.nbytes, a.nbytes)}],
                "outputs": [{"name": "c", "parameters": shm(2 * a.nbytes, a.nbytes)}]}
        r = ks_post(daemon, "/v2/models/gemm/infer", body)
        assert r.status_code == 200, r.text
        t = parse_server_timing(r.headers["Server-Timing"])
        assert t["h2d"] < 0.2 and t["d2h"] < 0.2, t  # 16 MiB each way would take ~0.3 ms at 55 GB/s
        assert dev.get("cbig", "float32", (4,), 2 * a.nbytes).tolist() == [2048.0] * 4
    finally:
        client.unregister_cuda_shared_memory("cbig")


@needs_cuda
def test_refusals(daemon, client, dev):
    b64 = dev.create("cref", 4096)
    r = ks_post(daemon, "/v2/cudasharedmemory/region/cref/register",
                {"raw_handle": {"b64": b64}, "device_id": 0, "byte_size": 1 << 30})
    v2_error(r, 400, "past the end")
    v2_error(ks_post(daemon, "/v2/cudasharedmemory/region/cref/register",
                     {"raw_handle": {"b64": FAKE_HANDLE}, "device_id": 0, "byte_size": 64}), 400, "IPC handle")
    register(client, "cref", b64, 4096)
    try:
        with pytest.raises(InferenceServerException) as e:
            register(client, "cref", b64, 4096)
        assert e.value.status() == "409"
        a = np.ones((16, 16), np.float32)
        dev.set("cref", [a])
        # float histogram data: its checks read it on the host
        with pytest.raises(InferenceServerException) as e:
            client.infer("histogram", [in_shm("data", (64,), "FP32", "cref")],
                         parameters={"bins": 4, "range_lo": 0.0, "range_hi": 1.0})
        assert e.value.status() == "400" and "CUDA shared memory" in e.value.message()
        # past the region
        with pytest.raises(InferenceServerException) as e:
            client.infer("ata", [in_shm("a", (64, 64), "FP32", "cref")])
        assert e.value.status() == "400" and "past the end" in e.value.message()
        # compare mode is /v1's, and /v1 takes no CUDA regions: refused either way
        with pytest.raises(InferenceServerException) as e:
            client.infer("ata", [in_shm("a", (16, 16), "FP32", "cref")], parameters={"kernel": "all"})
        assert e.value.status() == "400" and "all" in e.value.message()
        assert metric(daemon, "crunchd_cuda_shm_regions") >= 1
        listed = client.get_cuda_shared_memory_status()
        assert {"name": "cref", "device_id": 0, "byte_size": 4096} in listed
    finally:
        client.unregister_cuda_shared_memory("cref")
    assert all(x["name"] != "cref" for x in client.get_cuda_shared_memory_status())


@needs_cuda
def test_a_held_region_cannot_vanish(daemon, client, dev):
    a = np.ones((8, 8), np.float32)
    register(client, "chold", dev.create("chold", a.nbytes), a.nbytes)
    dev.set("chold", [a])
    done = {}

    def run():
        try:
            with triton_client(daemon) as c:
                done["res"] = c.infer("ata", [in_shm("a", a.shape, "FP32", "chold")],
                                      headers={DELAY_HEADER: "1500"})
        except Exception as e:  # reported by the main thread
            done["err"] = e

    busy = lambda: metric(daemon, "crunchd_jobs_running") + metric(daemon, "crunchd_jobs_in_queue")  # noqa: E731
    before = busy()
    t = threading.Thread(target=run)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while busy() <= before:
            assert time.monotonic() < deadline, "the delayed job never started"
            time.sleep(0.02)
        v2_error(ks_post(daemon, "/v2/cudasharedmemory/region/chold/unregister", b""), 409, "chold", "in use")
    finally:
        t.join(timeout=60)
    assert "err" not in done, done.get("err")
    assert_close(done["res"].as_numpy("c"), a.T @ a, 8, "float32")
    client.unregister_cuda_shared_memory("chold")  # released before the answer: no retry needed


@needs_cuda
def test_idle_regions_are_unregistered(start_daemon, dev):
    d = start_daemon("--shm-idle-s", "1")
    with triton_client(d) as c:
        register(c, "cidle", dev.create("cidle", 4096), 4096)
        assert [x["name"] for x in c.get_cuda_shared_memory_status()] == ["cidle"]
        deadline = time.monotonic() + 15
        while c.get_cuda_shared_memory_status():  # the daemon's own timer, nobody else asks
            assert time.monotonic() < deadline, "the idle region stayed registered"
            time.sleep(0.1)
    assert "CUDA shared memory region 'cidle' unregistered: unused" in d.log_text()
