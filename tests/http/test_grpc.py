"""The KServe v2 gRPC protocol on --grpc-port (issue 38), driven by the real clients: NVIDIA's
tritonclient.grpc (sync, async and streaming calls, system shared memory), grpcio's own channel
for what tritonclient cannot send (typed contents, malformed messages, unknown methods),
grpcio-health-checking for grpc.health.v1, and curl's HTTP/2 for what no gRPC client sends (another
content type, an unknown grpc-encoding). numpy is the reference; every error is checked for its
gRPC status code and a message naming what was wrong."""

import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

from conftest import BACKEND, HTTP_TIMEOUT_S, ROOT, SLOW, assert_close, daemon_factory, gemm_ref, rng

grpc = pytest.importorskip("grpc")
tc = pytest.importorskip("tritonclient.grpc")
from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

SVC = "/inference.GRPCInferenceService/"
NP_TO_KS = {np.float32: "FP32", np.float64: "FP64", np.uint8: "UINT8", np.float16: "FP16"}
MiB = 1 << 20


@pytest.fixture(scope="module")
def start_module(tmp_path_factory):
    yield from daemon_factory(tmp_path_factory.mktemp("grpc"), prefix="grpc")


@pytest.fixture(scope="module")
def gd(start_module):
    """The module's daemon, gRPC on a free port, test hooks on (x-crunchd-debug-delay-ms)."""
    return start_module("--workers", "2", "--test-hooks", "--drain-timeout-s", "10", grpc=True)


def client_of(d, **kw):
    return tc.InferenceServerClient(f"127.0.0.1:{d.grpc_port}", **kw)


@pytest.fixture(scope="module")
def client(gd):
    c = client_of(gd)
    yield c
    c.close()


@pytest.fixture(scope="module")
def stub(gd):
    """grpcio's stub of the service, for requests tritonclient does not build."""
    ch = grpc.insecure_channel(f"127.0.0.1:{gd.grpc_port}",
                               options=[("grpc.max_send_message_length", -1),
                                        ("grpc.max_receive_message_length", -1)])
    yield service_pb2_grpc.GRPCInferenceServiceStub(ch), ch
    ch.close()


def tensor(name, arr):
    t = tc.InferInput(name, list(arr.shape), NP_TO_KS[arr.dtype.type])
    t.set_data_from_numpy(arr)
    return t


def grpc_error(fn, *args, **kw):
    with pytest.raises(InferenceServerException) as e:
        fn(*args, **kw)
    return e.value


def assert_status(e, code, *words):
    assert e.status() == f"StatusCode.{code}", (e.status(), e.message())
    for w in words:
        assert w in e.message(), (w, e.message())


# -- the wire: our .proto is Triton's ------------------------------------------------------------

def test_proto_is_a_subset_of_tritons():
    """Every message, field (number, type, label) and RPC of api/grpc/*.proto is the same as in
    the descriptors tritonclient was generated from."""
    protoc = shutil.which("protoc-c")
    if not protoc:
        pytest.skip("protoc-c is not installed (make deps)")
    from google.protobuf import descriptor_pb2
    from tritonclient.grpc import model_config_pb2
    out = subprocess.run([protoc, "--proto_path=.", "--descriptor_set_out=/dev/stdout", "--include_imports",
                          "api/grpc/grpc_service.proto"], cwd=ROOT, capture_output=True, timeout=60, check=True)
    ours = descriptor_pb2.FileDescriptorSet.FromString(out.stdout)
    theirs = {}

    def walk(prefix, msgs, into):
        for m in msgs:
            into[prefix + "." + m.name] = {f.name: (f.number, f.type, f.label, f.type_name) for f in m.field}
            walk(prefix + "." + m.name, m.nested_type, into)
    for mod in (service_pb2, model_config_pb2):
        fd = descriptor_pb2.FileDescriptorProto()
        mod.DESCRIPTOR.CopyToProto(fd)
        walk("." + fd.package, fd.message_type, theirs)
        rpcs = {r.name: (r.input_type, r.output_type, r.client_streaming, r.server_streaming)
                for s in fd.service for r in s.method}
        theirs.update({"rpc " + k: v for k, v in rpcs.items()})
    mine = {}
    for fd in ours.file:
        walk("." + fd.package, fd.message_type, mine)
        for s in fd.service:
            mine.update({"rpc " + r.name: (r.input_type, r.output_type, r.client_streaming, r.server_streaming)
                         for r in s.method})
    assert len(mine) > 60
    for name, fields in mine.items():
        assert name in theirs, name
        if name.startswith("rpc "):
            assert fields == theirs[name], name
        else:
            for f, v in fields.items():
                assert theirs[name].get(f) == v, (name, f, v, theirs[name].get(f))


# -- health, metadata, configuration -------------------------------------------------------------

def test_server_live_ready_metadata(client):
    assert client.is_server_live() and client.is_server_ready()
    meta = client.get_server_metadata(as_json=True)
    assert meta["name"] == "crunchd" and meta["version"]
    assert {"binary_tensor_data", "system_shared_memory", "statistics", "model_configuration"} <= \
        set(meta["extensions"])
    assert ("cuda_shared_memory" in meta["extensions"]) == (BACKEND == "cuda")


@pytest.mark.parametrize("model,inputs,outs", [
    ("gemm", {"a": 2, "b": 2, "c": 2}, {"c": 2}),
    ("ata", {"a": 2}, {"c": 2}),
    ("histogram", {"data": 1}, {"counts": 1, "edges": 1}),
])
def test_model_metadata_and_ready(client, gd, model, inputs, outs):
    for version in ("", "1"):
        assert client.is_model_ready(model, version)
        meta = client.get_model_metadata(model, version, as_json=True)
        assert meta["name"] == model and meta["versions"] == ["1"] and meta["platform"] == "crunchd"
        assert {t["name"]: len(t["shape"]) for t in meta["inputs"]} == inputs
        assert {t["name"]: len(t["shape"]) for t in meta["outputs"]} == outs
        assert all(int(d) == -1 for t in meta["inputs"] + meta["outputs"] for d in t["shape"])
    http = gd.get(f"/v2/models/{model}").json()  # what /v2 says, datatype for datatype
    assert [t["datatype"] for t in meta["inputs"]] == [t["datatype"] for t in http["inputs"]]


def test_unknown_model_and_version_are_not_found(client):
    assert_status(grpc_error(client.get_model_metadata, "syrk"), "NOT_FOUND", "syrk")
    assert_status(grpc_error(client.get_model_metadata, "gemm", "2"), "NOT_FOUND", "version")
    assert_status(grpc_error(client.is_model_ready, "syrk"), "NOT_FOUND", "syrk")
    assert_status(grpc_error(client.get_model_config, "nope"), "NOT_FOUND", "nope")
    a = np.ones((2, 2), np.float32)
    assert_status(grpc_error(client.infer, "nope", [tensor("a", a)]), "NOT_FOUND", "nope")


def test_model_config_is_a_real_model_config(client, gd):
    """What perf_analyzer reads: max_batch_size, inputs and outputs with data_type and dims; the
    same as GET /v2/models/{m}/config."""
    for model in ("gemm", "ata", "histogram"):
        cfg = client.get_model_config(model, as_json=True)["config"]
        http = gd.get(f"/v2/models/{model}/config").json()
        assert cfg["name"] == model and cfg["platform"] == "crunchd" and cfg["backend"] == http["backend"]
        assert cfg.get("max_batch_size", 0) == http["max_batch_size"] == 0
        for mine, theirs in ((cfg["input"], http["input"]), (cfg["output"], http["output"])):
            assert [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in mine] == \
                [(t["name"], t["data_type"], t["dims"]) for t in theirs]
        assert [bool(t.get("optional")) for t in cfg["input"]] == [t["optional"] for t in http["input"]]
        assert cfg["version_policy"] == {"latest": {"num_versions": 1}}


def test_model_config_shows_dynamic_batching(start_daemon):
    d = start_daemon("--batch-max", "8", "--batch-delay-us", "300", "--batch-preferred", "4,8", grpc=True)
    with client_of(d) as c:
        db = c.get_model_config("gemm", as_json=True)["config"]["dynamic_batching"]
    assert [int(x) for x in db["preferred_batch_size"]] == [4, 8]
    assert int(db["max_queue_delay_microseconds"]) == 300


def test_repository_index_and_load(client):
    index = client.get_model_repository_index(as_json=True)["models"]
    assert {(m["name"], m["version"], m["state"]) for m in index} == \
        {("gemm", "1", "READY"), ("ata", "1", "READY"), ("histogram", "1", "READY")}
    assert_status(grpc_error(client.load_model, "gemm"), "INVALID_ARGUMENT", "always loaded")
    assert_status(grpc_error(client.unload_model, "nope"), "NOT_FOUND", "nope")


def test_statistics_count_grpc_inferences_with_http_ones(client, gd):
    before = client.get_inference_statistics("ata", as_json=True)["model_stats"][0]
    a = rng(3).uniform(-1, 1, (9, 4)).astype(np.float32)
    client.infer("ata", [tensor("a", a)])
    after = client.get_inference_statistics("ata", "1", as_json=True)["model_stats"][0]
    assert int(after["inference_count"]) == int(before.get("inference_count", 0)) + 1
    assert int(after["inference_stats"]["success"]["count"]) >= 1
    http = gd.get("/v2/models/ata/stats").json()["model_stats"][0]
    assert http["inference_count"] == int(after["inference_count"])
    every = client.get_inference_statistics(as_json=True)["model_stats"]
    assert [m["name"] for m in every] == ["gemm", "ata", "histogram"]
    assert_status(grpc_error(client.get_inference_statistics, "nope"), "NOT_FOUND")


# -- inference against numpy ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm(client, dtype):
    r = rng(1)
    a, b = r.uniform(-1, 1, (7, 13)).astype(dtype), r.uniform(-1, 1, (13, 5)).astype(dtype)
    res = client.infer("gemm", [tensor("a", a), tensor("b", b)], request_id="req-7")
    got = res.as_numpy("c")
    assert got.shape == (7, 5) and got.dtype == dtype
    assert_close(got, gemm_ref(a, b), 13, np.dtype(dtype).name)
    resp = res.get_response(as_json=True)
    assert resp["id"] == "req-7" and resp["model_name"] == "gemm" and resp["model_version"] == "1"
    params = {k: list(v.values())[0] for k, v in resp["parameters"].items()}
    assert params["backend"] == BACKEND and params["kernel"] and params["device"] and re.match(
        r"^[0-9a-f-]{36}$", params["job_id"]) and int(params["batch"]) >= 1
    out = resp["outputs"]
    assert [(o["name"], o["datatype"], [int(x) for x in o["shape"]]) for o in out] == \
        [("c", NP_TO_KS[dtype], [7, 5])]


def test_gemm_with_c_and_parameters(client):
    """Parameters as on HTTP (alpha, beta, trans_a): the protobuf map goes to the same decoder."""
    r = rng(2)
    a, b, c = (r.uniform(-1, 1, s).astype(np.float32) for s in ((6, 4), (6, 3), (4, 3)))
    res = client.infer("gemm", [tensor("a", a), tensor("b", b), tensor("c", c)],
                       parameters={"alpha": 2.0, "beta": 0.5, "trans_a": True})
    assert_close(res.as_numpy("c"), gemm_ref(a, b, c, 2.0, 0.5, trans_a=True), 6, "float32")
    e = grpc_error(client.infer, "gemm", [tensor("a", a), tensor("b", b)], parameters={"bins": 3})
    assert_status(e, "INVALID_ARGUMENT", "bins")
    e = grpc_error(client.infer, "gemm", [tensor("a", a), tensor("b", b)], parameters={"alpha": "x"})
    assert_status(e, "INVALID_ARGUMENT", "alpha")


def test_stack_of_matrices_answers_its_whole_shape(client):
    r = rng(4)
    a, b = r.uniform(-1, 1, (3, 5, 4)).astype(np.float32), r.uniform(-1, 1, (4, 6)).astype(np.float32)
    got = client.infer("gemm", [tensor("a", a), tensor("b", b)]).as_numpy("c")
    assert got.shape == (3, 5, 6)
    np.testing.assert_allclose(got, np.matmul(a.astype(np.float64), b), rtol=1e-5, atol=1e-5)


def test_ata_and_half_precision(client):
    r = rng(5)
    a = r.uniform(-1, 1, (20, 6)).astype(np.float64)
    assert_close(client.infer("ata", [tensor("a", a)]).as_numpy("c"), a.T @ a, 20, "float64")
    h = r.uniform(-1, 1, (8, 8)).astype(np.float16)
    got = client.infer("gemm", [tensor("a", h), tensor("b", h)]).as_numpy("c")
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), h.astype(np.float64) @ h, rtol=2e-2, atol=2e-2)


def test_histogram_answers_one_raw_entry_per_output(client):
    """counts and edges: two outputs, two raw_output_contents, paired by position as tritonclient
    reads them; uint8 data answers counts alone unless edges are asked for."""
    r = rng(6)
    data = r.uniform(0, 1, 1000).astype(np.float32)
    res = client.infer("histogram", [tensor("data", data)], parameters={"bins": 8, "range_lo": 0.0,
                                                                         "range_hi": 1.0})
    counts, edges = np.histogram(data, bins=8, range=(0.0, 1.0))
    assert res.as_numpy("counts").tolist() == counts.tolist()
    np.testing.assert_allclose(res.as_numpy("edges"), edges.astype(np.float32))
    assert len(res.get_response().raw_output_contents) == 2
    u8 = r.integers(0, 256, 5000, dtype=np.uint8)
    res = client.infer("histogram", [tensor("data", u8)])
    assert res.as_numpy("counts").tolist() == np.bincount(u8, minlength=256).tolist()
    assert [o.name for o in res.get_response().outputs] == ["counts"]
    res = client.infer("histogram", [tensor("data", u8)], outputs=[tc.InferRequestedOutput("edges")])
    assert [o.name for o in res.get_response().outputs] == ["edges"]


def test_typed_contents_are_read_as_raw_bytes(stub):
    """Inputs in InferTensorContents (fp32_contents, uint_contents) instead of raw_input_contents."""
    s, _ = stub
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    rq = service_pb2.ModelInferRequest(model_name="gemm", id="typed")
    for name, arr in (("a", a), ("b", b)):
        t = rq.inputs.add(name=name, datatype="FP32", shape=list(arr.shape))
        t.contents.fp32_contents.extend(arr.reshape(-1).tolist())
    resp = s.ModelInfer(rq, timeout=HTTP_TIMEOUT_S)
    got = np.frombuffer(resp.raw_output_contents[0], np.float32).reshape(2, 4)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-6)
    assert resp.id == "typed"
    rq = service_pb2.ModelInferRequest(model_name="histogram")
    t = rq.inputs.add(name="data", datatype="UINT8", shape=[5])
    t.contents.uint_contents.extend([1, 1, 2, 255, 0])
    counts = np.frombuffer(s.ModelInfer(rq, timeout=HTTP_TIMEOUT_S).raw_output_contents[0], np.uint64)
    assert counts[1] == 2 and counts[255] == 1 and counts.sum() == 5
    t.contents.uint_contents[3] = 256
    with pytest.raises(grpc.RpcError) as e:
        s.ModelInfer(rq, timeout=HTTP_TIMEOUT_S)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "range" in e.value.details()
    rq = service_pb2.ModelInferRequest(model_name="ata")
    t = rq.inputs.add(name="a", datatype="FP32", shape=[2, 2])
    t.contents.int_contents.extend([1, 2, 3, 4])
    with pytest.raises(grpc.RpcError) as e:
        s.ModelInfer(rq, timeout=HTTP_TIMEOUT_S)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "fp32_contents" in e.value.details()


def test_raw_input_contents_anywhere_in_the_message(stub):
    """raw_input_contents before the other fields (any order is valid protobuf): read in place all
    the same."""
    s, _ = stub
    a = np.arange(4, dtype=np.float32).reshape(2, 2)
    rq = service_pb2.ModelInferRequest(model_name="ata")
    rq.inputs.add(name="a", datatype="FP32", shape=[2, 2])
    rq.raw_input_contents.append(a.tobytes())
    body = rq.SerializeToString()
    raw = service_pb2.ModelInferRequest(raw_input_contents=[a.tobytes()]).SerializeToString()
    rest = service_pb2.ModelInferRequest(model_name="ata", inputs=rq.inputs).SerializeToString()
    assert body == rest + raw
    call = stub[1].unary_unary(SVC + "ModelInfer", request_serializer=lambda x: x,
                               response_deserializer=service_pb2.ModelInferResponse.FromString)
    resp = call(raw + rest, timeout=HTTP_TIMEOUT_S)
    np.testing.assert_allclose(np.frombuffer(resp.raw_output_contents[0], np.float32).reshape(2, 2), a.T @ a)


def test_resident_tensor_input(client, gd):
    """An input naming a resident tensor (POST /v1/tensors; the client: the same address) has no
    data in the message: the decoder reads the tensor, as over /v2."""
    import io
    w = rng(14).uniform(-1, 1, (8, 5)).astype(np.float32)
    buf = io.BytesIO()
    np.save(buf, w)
    r = gd.post("/v1/tensors?name=grpc-w", data=buf.getvalue(), headers={"Content-Type": "application/x-npy"})
    assert r.status_code == 201, r.text
    try:
        x = rng(15).uniform(-1, 1, (3, 8)).astype(np.float32)
        ib = tc.InferInput("b", [8, 5], "FP32")
        ib._input.parameters["tensor"].string_param = "grpc-w"  # tritonclient has no setter for it
        assert_close(client.infer("gemm", [tensor("a", x), ib]).as_numpy("c"), x.astype(np.float64) @ w, 8, "float32")
        ib._input.parameters["tensor"].string_param = "nope"
        assert_status(grpc_error(client.infer, "gemm", [tensor("a", x), ib]), "NOT_FOUND", "nope")
    finally:
        gd.delete("/v1/tensors/grpc-w")


def test_async_infer_many_at_once(client):
    r = rng(8)
    mats = [r.uniform(-1, 1, (16, 16)).astype(np.float32) for _ in range(32)]
    done, results = threading.Event(), {}

    def cb(i):
        def f(result, error):
            results[i] = (result, error)
            if len(results) == len(mats):
                done.set()
        return f
    for i, m in enumerate(mats):
        client.async_infer("ata", [tensor("a", m)], cb(i), request_id=str(i))
    assert done.wait(HTTP_TIMEOUT_S)
    for i, m in enumerate(mats):
        res, err = results[i]
        assert err is None, err
        assert res.get_response().id == str(i)
        assert_close(res.as_numpy("c"), m.T.astype(np.float64) @ m, 16, "float32")


def test_compressed_requests(client):
    """grpc-encoding gzip and deflate: decoded before the decoder sees the message."""
    a = rng(9).uniform(-1, 1, (30, 8)).astype(np.float32)
    for algo in ("gzip", "deflate"):
        got = client.infer("ata", [tensor("a", a)], compression_algorithm=algo).as_numpy("c")
        assert_close(got, a.T.astype(np.float64) @ a, 30, "float32")


# -- streaming ------------------------------------------------------------------------------------

def test_stream_many_requests_in_flight(gd):
    """A thousand requests on one ModelStreamInfer stream, all sent before the first answer is
    read: each answered once, correctly, with its id (in the order they finish)."""
    n = 1000
    r = rng(10)
    a = r.uniform(-1, 1, (12, 8)).astype(np.float32)
    bs = [r.uniform(-1, 1, (8, 4)).astype(np.float32) for _ in range(n)]
    answers = queue.Queue()
    with client_of(gd) as c:
        c.start_stream(callback=lambda result, error: answers.put((result, error)))
        for i, b in enumerate(bs):
            c.async_stream_infer("gemm", [tensor("a", a), tensor("b", b)], request_id=f"r{i}")
        got = {}
        for _ in range(n):
            res, err = answers.get(timeout=HTTP_TIMEOUT_S)
            assert err is None, err
            rid = res.get_response().id
            assert rid not in got
            got[rid] = res.as_numpy("c")
        c.stop_stream()
    assert len(got) == n
    for i in (0, 1, 499, 998, 999):
        assert_close(got[f"r{i}"], gemm_ref(a, bs[i]), 8, "float32")


def test_stream_errors_in_band_then_goes_on(gd):
    """A bad request on a stream is answered in-band (error_message), the next ones still run."""
    a = np.ones((2, 3), np.float32)
    answers = queue.Queue()
    with client_of(gd) as c:
        c.start_stream(callback=lambda result, error: answers.put((result, error)))
        c.async_stream_infer("gemm", [tensor("a", a), tensor("b", np.ones((3, 2), np.float32))], request_id="ok1")
        c.async_stream_infer("gemm", [tensor("a", a), tensor("b", np.ones((4, 2), np.float32))], request_id="bad")
        c.async_stream_infer("nope", [tensor("a", a)], request_id="nomodel")
        c.async_stream_infer("ata", [tensor("a", a)], request_id="ok2")
        results = [answers.get(timeout=HTTP_TIMEOUT_S) for _ in range(4)]
        c.stop_stream()
    errors = [str(e) for res, e in results if e is not None]
    ok = sorted(res.get_response().id for res, e in results if e is None)
    assert ok == ["ok1", "ok2"], results
    assert len(errors) == 2 and any("nope" in e for e in errors) and any("shape" in e or "b" in e for e in errors)


def test_stream_triton_grpc_error_ends_it_with_a_status(gd):
    """With triton_grpc_error: true the first error ends the stream with its gRPC status."""
    answers = queue.Queue()
    with client_of(gd) as c:
        c.start_stream(callback=lambda result, error: answers.put((result, error)),
                       headers={"triton_grpc_error": "true"})
        c.async_stream_infer("nope", [tensor("a", np.ones((2, 2), np.float32))])
        res, err = answers.get(timeout=HTTP_TIMEOUT_S)
        assert res is None and err is not None
        assert "NOT_FOUND" in str(err.status()) and "nope" in err.message(), (err.status(), err.message())
        c.stop_stream()


# -- system shared memory ---------------------------------------------------------------------------

def test_system_shared_memory_inputs_and_outputs(client):
    shm = pytest.importorskip("tritonclient.utils.shared_memory")
    a = rng(11).uniform(-1, 1, (10, 4)).astype(np.float32)
    tag = f"{os.getpid()}_{threading.get_ident()}"
    hin = shm.create_shared_memory_region(f"gin{tag}", f"/crunchd_gin_{tag}", a.nbytes)
    hout = shm.create_shared_memory_region(f"gout{tag}", f"/crunchd_gout_{tag}", 16 * 4)
    try:
        shm.set_shared_memory_region(hin, [a])
        client.register_system_shared_memory(f"gin{tag}", f"/crunchd_gin_{tag}", a.nbytes)
        client.register_system_shared_memory(f"gout{tag}", f"/crunchd_gout_{tag}", 16 * 4)
        st = client.get_system_shared_memory_status(as_json=True)["regions"]
        assert st[f"gin{tag}"]["byte_size"] in (a.nbytes, str(a.nbytes))
        inp = tc.InferInput("a", [10, 4], "FP32")
        inp.set_shared_memory(f"gin{tag}", a.nbytes)
        out = tc.InferRequestedOutput("c")
        out.set_shared_memory(f"gout{tag}", 16 * 4)
        res = client.infer("ata", [inp], outputs=[out])
        assert res.get_output("c").name == "c" and res.get_response().raw_output_contents[0] == b""
        got = shm.get_contents_as_numpy(hout, np.float32, [4, 4])
        assert_close(got, a.T.astype(np.float64) @ a, 10, "float32")
        e = grpc_error(client.register_system_shared_memory, f"gin{tag}", f"/crunchd_gin_{tag}", a.nbytes)
        assert_status(e, "ALREADY_EXISTS", f"gin{tag}")
    finally:
        client.unregister_system_shared_memory(f"gin{tag}")
        client.unregister_system_shared_memory(f"gout{tag}")
        shm.destroy_shared_memory_region(hin)
        shm.destroy_shared_memory_region(hout)
    assert f"gin{tag}" not in client.get_system_shared_memory_status(as_json=True).get("regions", {})


def test_cuda_shared_memory_status_and_refusal(client):
    assert client.get_cuda_shared_memory_status(as_json=True).get("regions", {}) == {}
    if BACKEND == "cuda":
        pytest.skip("the refusal is the cpu backend's")
    e = grpc_error(client.register_cuda_shared_memory, "cuda0", b"\0" * 64, 0, 16)
    assert_status(e, "INVALID_ARGUMENT")


# -- errors and their status codes ------------------------------------------------------------------

def test_bad_requests_are_invalid_argument_naming_the_field(client):
    a = np.ones((4, 3), np.float32)
    e = grpc_error(client.infer, "gemm", [tensor("a", a), tensor("b", np.ones((5, 2), np.float32))])
    assert_status(e, "INVALID_ARGUMENT")
    assert "b" in e.message() and ("shape" in e.message() or "4" in e.message()), e.message()
    e = grpc_error(client.infer, "gemm", [tensor("a", a)])
    assert_status(e, "INVALID_ARGUMENT", "input b")
    e = grpc_error(client.infer, "gemm", [tensor("a", a), tensor("q", a)])
    assert_status(e, "INVALID_ARGUMENT", "q")
    e = grpc_error(client.infer, "histogram", [tensor("data", np.ones(4, np.float16))])
    assert_status(e, "INVALID_ARGUMENT", "FP16")



def test_raw_contents_of_the_wrong_size_are_named(stub):
    rq = service_pb2.ModelInferRequest(model_name="ata")
    rq.inputs.add(name="a", datatype="FP32", shape=[4, 4])
    rq.raw_input_contents.append(b"\0" * 12)
    with pytest.raises(grpc.RpcError) as e:
        stub[0].ModelInfer(rq, timeout=HTTP_TIMEOUT_S)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "raw_input_contents[0]" in e.value.details() and "12 bytes" in e.value.details()
    rq.raw_input_contents.append(b"\0" * 64)
    with pytest.raises(grpc.RpcError) as e:
        stub[0].ModelInfer(rq, timeout=HTTP_TIMEOUT_S)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_malformed_messages_are_invalid_argument(stub):
    call = stub[1].unary_unary(SVC + "ModelInfer", request_serializer=lambda x: x,
                               response_deserializer=lambda x: x)
    for junk in (b"\xff\xff\xff", b"\x3a\x10abc", b"\x0a\x05gem"):
        with pytest.raises(grpc.RpcError) as e:
            call(junk, timeout=HTTP_TIMEOUT_S)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (junk, e.value)
        assert "malformed" in e.value.details() or "not a valid" in e.value.details()
    meta = stub[1].unary_unary(SVC + "ServerLive", request_serializer=lambda x: x, response_deserializer=lambda x: x)
    with pytest.raises(grpc.RpcError) as e:
        meta(b"\x07", timeout=HTTP_TIMEOUT_S)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_unknown_rpcs_are_unimplemented(stub):
    for path in (SVC + "NoSuchMethod", "/foo.Bar/Baz", SVC + "TraceSetting", "/grpc.health.v1.Health/List"):
        call = stub[1].unary_unary(path, request_serializer=lambda x: x, response_deserializer=lambda x: x)
        with pytest.raises(grpc.RpcError) as e:
            call(b"", timeout=HTTP_TIMEOUT_S)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED, (path, e.value)
        assert "unknown method" in e.value.details()


def test_messages_over_the_limit_are_resource_exhausted(start_daemon):
    d = start_daemon("--max-body-mb", "1", grpc=True)
    big = np.ones((600, 600), np.float32)  # 1.4 MB
    with client_of(d) as c:
        assert_status(grpc_error(c.infer, "ata", [tensor("a", big)]), "RESOURCE_EXHAUSTED", "--max-body-mb")
        small = np.ones((100, 100), np.float32)
        assert c.infer("ata", [tensor("a", small)]).as_numpy("c")[0, 0] == 100
    text = d.metrics_text()
    assert re.search(r'crunchd_grpc_requests_total\{rpc="ModelInfer",code="RESOURCE_EXHAUSTED"\} 1', text)


def test_memory_budget_refusal_is_resource_exhausted(start_daemon):
    d = start_daemon("--max-memory-mb", "64", grpc=True)
    big = np.ones((3000, 3000), np.float32)  # 36 MB message + 36 MB tensor: past the budget
    with client_of(d) as c:
        e = grpc_error(c.infer, "ata", [tensor("a", big)])
    assert_status(e, "RESOURCE_EXHAUSTED")


def test_big_messages_both_ways(client):
    """A 64 MiB request, and a 64 MiB answer, past gRPC's default 4 MiB."""
    data = rng(12).uniform(0, 1, 16 * MiB).astype(np.float32)
    res = client.infer("histogram", [tensor("data", data)], parameters={"bins": 16, "range_lo": 0.0, "range_hi": 1.0})
    assert res.as_numpy("counts").tolist() == np.histogram(data, 16, (0.0, 1.0))[0].tolist()
    a = np.ones((16, 4096), np.float32)
    b = np.full((16, 4096), 0.5, np.float32)
    got = client.infer("gemm", [tensor("a", a), tensor("b", b)], parameters={"trans_a": True}).as_numpy("c")
    assert got.shape == (4096, 4096) and got.nbytes == 64 * MiB and np.all(got == 8.0)


def charged(d, kind):
    m = re.search(rf'crunchd_memory_charged_bytes{{kind="{kind}"}} (\d+)', d.metrics_text())
    return int(m.group(1))


def test_big_tensor_stays_where_it_arrived(client, gd):
    """A 64 MiB tensor is received straight into its message (no copy from a read buffer: the
    bytes counted in place) and its job reads it there (no copy into a buffer of its own): while
    the job runs, the budget holds the message (kind body), not a second 64 MiB array."""
    before = int(re.search(r"crunchd_grpc_received_in_place_bytes_total (\d+)", gd.metrics_text()).group(1))
    data = np.ones(16 * MiB, np.float32)
    out = {}
    t = threading.Thread(target=lambda: out.update(r=client.infer(
        "histogram", [tensor("data", data)], parameters={"bins": 4, "range_lo": 0.0, "range_hi": 2.0},
        headers={"x-crunchd-debug-delay-ms": str(int(1500 * SLOW))})))
    t.start()
    deadline = time.monotonic() + 20 * SLOW
    while not re.search(r"^crunchd_jobs_running [1-9]", gd.metrics_text(), re.M):  # in its delay: decoded
        assert time.monotonic() < deadline and t.is_alive(), gd.metrics_text()
        time.sleep(0.02)
    assert charged(gd, "body") >= 64 * MiB and charged(gd, "arrays") < 16 * MiB
    t.join(60)
    assert out["r"].as_numpy("counts").tolist() == [0, 0, 16 * MiB, 0]
    after = int(re.search(r"crunchd_grpc_received_in_place_bytes_total (\d+)", gd.metrics_text()).group(1))
    assert after - before > 48 * MiB  # all but the first frames, which grpc-core ramps up from 192 KiB


def test_deadlines(client, gd):
    """grpc-timeout is the job's deadline; the parameter timeout (microseconds) as on HTTP."""
    a = np.ones((8, 8), np.float32)
    delay = {"x-crunchd-debug-delay-ms": str(int(1500 * SLOW))}
    t = time.monotonic()
    e = grpc_error(client.infer, "ata", [tensor("a", a)], client_timeout=0.3, headers=delay)
    assert_status(e, "DEADLINE_EXCEEDED")
    assert time.monotonic() - t < 1.2 * SLOW
    e = grpc_error(client.infer, "ata", [tensor("a", a)], timeout=200000, headers=delay)
    assert_status(e, "DEADLINE_EXCEEDED")
    assert client.infer("ata", [tensor("a", a)], client_timeout=30).as_numpy("c")[0, 0] == 8
    gd.log_lines_with("grpc=DEADLINE_EXCEEDED")


def test_request_id_metadata_reaches_the_log(client, gd):
    client.infer("ata", [tensor("a", np.ones((2, 2), np.float32))], headers={"x-request-id": "grpc-trace-42"})
    line = gd.log_lines_with("rid=grpc-trace-42")[0]
    assert "/inference.GRPCInferenceService/ModelInfer 200" in line and "grpc=OK" in line and "op=ata" in line
    e = grpc_error(client.infer, "ata", [tensor("a", np.ones((2, 2), np.float32))],
                   headers={"x-request-id": "bad id!"})
    assert_status(e, "INVALID_ARGUMENT", "x-request-id")


def test_metrics_count_calls_by_method_and_code(client, gd):
    client.is_server_live()
    grpc_error(client.get_model_metadata, "nope")
    text = gd.metrics_text()
    assert re.search(r'crunchd_grpc_requests_total\{rpc="ServerLive",code="OK"\} \d+', text)
    assert re.search(r'crunchd_grpc_requests_total\{rpc="ModelMetadata",code="NOT_FOUND"\} \d+', text)
    assert re.search(r'crunchd_grpc_request_duration_seconds_bucket\{rpc="ServerLive",code="OK",le="\+Inf"\} \d+',
                     text)


# -- HTTP/2 that is not gRPC --------------------------------------------------------------------------

def curl_h2(port, path, *args):
    """One POST without a body over HTTP/2 with prior knowledge (curl's nghttp2): the answer's head
    and body. No body: these calls are refused on their headers, and curl 7.88 handles an answer
    that comes before its request body is sent badly (it waits, or takes the reset for a failure)."""
    if not shutil.which("curl"):
        pytest.skip("curl is not installed (make deps)")
    p = subprocess.run(["curl", "-sS", "-i", "--http2-prior-knowledge", "--max-time", str(int(20 * SLOW)),
                        "-X", "POST", *args, f"http://127.0.0.1:{port}{path}"],
                       capture_output=True, timeout=60 * SLOW)
    assert p.returncode == 0, p.stderr
    return p.stdout.decode(errors="replace")


def test_non_grpc_content_type_is_415(gd):
    out = curl_h2(gd.grpc_port, SVC + "ServerLive", "-H", "content-type: application/json")
    assert out.startswith("HTTP/2 415"), out
    assert re.search(r"grpc-status: 3\b", out) and "content-type" in out.lower()


def test_unknown_grpc_encoding_is_unimplemented_with_accept_encoding(gd):
    out = curl_h2(gd.grpc_port, SVC + "ServerLive", "-H", "content-type: application/grpc", "-H", "te: trailers",
                  "-H", "grpc-encoding: snappy")
    assert re.search(r"grpc-status: 12\b", out), out
    assert re.search(r"grpc-accept-encoding: identity,deflate,gzip", out), out
    assert "snappy" in out


def test_grpc_message_is_percent_encoded(stub):
    call = stub[1].unary_unary(SVC + "ModelMetadata", request_serializer=lambda x: x,
                               response_deserializer=lambda x: x)
    name = "caf\u00e9%"
    with pytest.raises(grpc.RpcError) as e:
        call(service_pb2.ModelMetadataRequest(name=name).SerializeToString(), timeout=HTTP_TIMEOUT_S)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert name in e.value.details()  # grpcio decodes the percent-encoding back


# -- health ----------------------------------------------------------------------------------------------

def test_health_check(gd):
    hc = pytest.importorskip("grpc_health.v1.health_pb2")
    hs = pytest.importorskip("grpc_health.v1.health_pb2_grpc")
    with grpc.insecure_channel(f"127.0.0.1:{gd.grpc_port}") as ch:
        s = hs.HealthStub(ch)
        for service in ("", "inference.GRPCInferenceService", "liveness"):
            r = s.Check(hc.HealthCheckRequest(service=service), timeout=HTTP_TIMEOUT_S)
            assert r.status == hc.HealthCheckResponse.SERVING, service
        with pytest.raises(grpc.RpcError) as e:
            s.Check(hc.HealthCheckRequest(service="nope"), timeout=HTTP_TIMEOUT_S)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_health_watch_follows_the_drain(start_daemon):
    """Watch: the status at once, SERVICE_UNKNOWN for another name (the stream kept), and at
    SIGTERM NOT_SERVING, then the stream ends UNAVAILABLE: a watcher learns of the drain and does
    not hold it (the daemon exits long before --drain-timeout-s)."""
    hc = pytest.importorskip("grpc_health.v1.health_pb2")
    hs = pytest.importorskip("grpc_health.v1.health_pb2_grpc")
    d = start_daemon("--drain-timeout-s", "60", grpc=True)
    with grpc.insecure_channel(f"127.0.0.1:{d.grpc_port}") as ch:
        s = hs.HealthStub(ch)
        unknown = s.Watch(hc.HealthCheckRequest(service="nope"))
        assert next(unknown).status == hc.HealthCheckResponse.SERVICE_UNKNOWN
        unknown.cancel()
        watch = s.Watch(hc.HealthCheckRequest(service=""))
        assert next(watch).status == hc.HealthCheckResponse.SERVING
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        assert next(watch).status == hc.HealthCheckResponse.NOT_SERVING
        with pytest.raises(grpc.RpcError) as e:
            next(watch)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "draining" in e.value.details()
    assert d.wait_exit() == 0 and time.monotonic() - t0 < 20
    d.check_log()


# -- auth and TLS -------------------------------------------------------------------------------------------

def test_auth_token(start_daemon, tmp_path):
    tok = tmp_path / "token"
    tok.write_text("s3cret-grpc\n")
    d = start_daemon("--auth-token-file", str(tok), grpc=True)
    with client_of(d) as c:
        assert_status(grpc_error(c.is_server_live), "UNAUTHENTICATED", "Bearer")
        assert_status(grpc_error(c.is_server_live, headers={"authorization": "Bearer nope"}), "UNAUTHENTICATED")
        assert_status(grpc_error(c.get_model_metadata, "nope"), "UNAUTHENTICATED")  # unknown or not: alike
        ok = {"authorization": "Bearer s3cret-grpc"}
        assert c.is_server_live(headers=ok)
        a = np.ones((3, 3), np.float32)
        assert c.infer("ata", [tensor("a", a)], headers=ok).as_numpy("c")[0, 0] == 3
    hc = pytest.importorskip("grpc_health.v1.health_pb2")
    hs = pytest.importorskip("grpc_health.v1.health_pb2_grpc")
    with grpc.insecure_channel(f"127.0.0.1:{d.grpc_port}") as ch:  # probes carry no token
        assert hs.HealthStub(ch).Check(hc.HealthCheckRequest(), timeout=HTTP_TIMEOUT_S).status == \
            hc.HealthCheckResponse.SERVING


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory):
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed (make deps)")
    d = tmp_path_factory.mktemp("grpc-tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return str(cert), str(key)


def test_tls_with_alpn_h2(start_daemon, self_signed):
    cert, key = self_signed
    d = start_daemon("--tls-cert", cert, "--tls-key", key, grpc=True, start=False)
    d.verify = cert
    d.start()
    with client_of(d, ssl=True, root_certificates=cert) as c:
        assert c.is_server_live()
        a = rng(13).uniform(-1, 1, (300, 40)).astype(np.float32)  # several TLS records each way
        assert_close(c.infer("ata", [tensor("a", a)]).as_numpy("c"), a.T.astype(np.float64) @ a, 300, "float32")
    with client_of(d) as c:  # cleartext to a TLS port: no gRPC
        assert_status(grpc_error(c.is_server_live, client_timeout=5 * SLOW), "UNAVAILABLE")


# -- drain ------------------------------------------------------------------------------------------------

def test_drain_finishes_accepted_calls_then_refuses(start_daemon):
    d = start_daemon("--test-hooks", "--drain-timeout-s", "20", grpc=True)
    c = client_of(d)
    a = np.ones((4, 4), np.float32)
    out = {}
    t = threading.Thread(target=lambda: out.update(r=c.infer(
        "ata", [tensor("a", a)], headers={"x-crunchd-debug-delay-ms": str(int(1000 * SLOW))}, client_timeout=60)))
    t.start()
    time.sleep(0.4 * SLOW)
    d.signal(signal.SIGTERM)
    t.join(60)
    assert out["r"].as_numpy("c")[0, 0] == 4
    c.close()
    assert d.wait_exit() == 0
    d.check_log()


def test_drain_cut_off_answers_unavailable(start_daemon):
    d = start_daemon("--test-hooks", "--drain-timeout-s", "1", grpc=True)
    c = client_of(d)
    errs = {}

    def slow():
        try:
            c.infer("ata", [tensor("a", np.ones((4, 4), np.float32))],
                    headers={"x-crunchd-debug-delay-ms": "8000"}, client_timeout=60)
        except InferenceServerException as e:
            errs["e"] = e
    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.4 * SLOW)
    d.signal(signal.SIGTERM)
    t.join(60)
    assert_status(errs["e"], "UNAVAILABLE", "drain")
    c.close()
    assert d.wait_exit() == 0


def test_idle_connections_get_goaway_and_clients_come_back(start_daemon):
    """--conn-timeout-s: a connection with no call that long is sent GOAWAY and closed; a channel
    then opens a new one by itself. --max-connections bounds them."""
    import socket
    d = start_daemon("--conn-timeout-s", "1", "--max-connections", "4", grpc=True)
    with client_of(d) as c:
        assert c.is_server_live()
        time.sleep(2.5)
        assert c.is_server_live()
    held = [socket.create_connection(("127.0.0.1", d.grpc_port), timeout=5) for _ in range(4)]
    try:
        time.sleep(0.3)
        extra = socket.create_connection(("127.0.0.1", d.grpc_port), timeout=5)
        extra.settimeout(5)
        assert extra.recv(64) == b"", "the fifth connection is closed at once"
        extra.close()
    finally:
        for s in held:
            s.close()


def test_busy_grpc_port_is_a_startup_error(start_daemon, tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        d = start_daemon("--grpc-port", str(port), start=False)
        from conftest import DaemonError
        with pytest.raises(DaemonError):
            d.start()
        assert d.wait_exit() == 2
        assert f"port {port} for gRPC" in d.log_text() and "in use" in d.log_text()
    finally:
        s.close()


# -- the Unix socket --------------------------------------------------------------------------------------

@pytest.fixture
def sock_dir():
    import tempfile
    d = tempfile.mkdtemp(prefix="crunchd-g-", dir="/tmp")  # sun_path: 107 bytes at most
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_unix_socket(start_daemon, sock_dir):
    """--grpc-unix-socket: the same service for local clients (grpc's unix: targets), the file's
    mode as --unix-socket's, no TLS there, the caller known by its uid as on HTTP's socket: a tensor
    made over one Unix socket is the caller's on the other, and not the TCP peer's."""
    import io
    http_sock, grpc_sock = os.path.join(sock_dir, "h.sock"), os.path.join(sock_dir, "g.sock")
    d = start_daemon("--unix-socket", http_sock, "--grpc-unix-socket", grpc_sock, grpc=True)
    assert oct(os.stat(grpc_sock).st_mode & 0o777) == "0o660"
    assert f"unix:{grpc_sock}" in d.log_text()
    x = rng(16).uniform(-1, 1, (4, 8)).astype(np.float32)
    w = rng(17).uniform(-1, 1, (8, 3)).astype(np.float32)
    buf = io.BytesIO()
    np.save(buf, w)
    status, _, body = d.unix_request("POST", "/v1/tensors?name=uds-w", body=buf.getvalue(),
                                     headers={"Content-Type": "application/x-npy"})
    assert status == 201, body
    ib = tc.InferInput("b", [8, 3], "FP32")
    ib._input.parameters["tensor"].string_param = "uds-w"
    with tc.InferenceServerClient(f"unix:{grpc_sock}") as c:
        assert c.is_server_live() and c.is_model_ready("gemm")
        assert_close(c.infer("gemm", [tensor("a", x), tensor("b", w)]).as_numpy("c"), x.astype(np.float64) @ w, 8,
                     "float32")
        assert_close(c.infer("gemm", [tensor("a", x), ib]).as_numpy("c"), x.astype(np.float64) @ w, 8, "float32")
    with client_of(d) as c:  # over TCP the caller is its address: another client
        assert_status(grpc_error(c.infer, "gemm", [tensor("a", x), ib]), "NOT_FOUND", "uds-w")
    d.stop()
    assert not os.path.exists(grpc_sock)


def test_unix_socket_only_and_flag_errors(start_daemon, sock_dir):
    grpc_sock = os.path.join(sock_dir, "g.sock")
    d = start_daemon("--grpc-port", "0", "--grpc-unix-socket", grpc_sock)
    with tc.InferenceServerClient(f"unix:{grpc_sock}") as c:
        assert c.is_server_live()
    assert f"gRPC unix:{grpc_sock}," in d.log_text()
    import conftest
    same = subprocess.run([conftest.BIN, "--unix-socket", grpc_sock,
                           "--grpc-unix-socket", grpc_sock], capture_output=True, text=True, timeout=30)
    assert same.returncode == 2 and "paths of their own" in same.stderr, same.stderr
