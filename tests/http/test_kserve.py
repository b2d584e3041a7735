"""KServe v2 / Triton inference protocol on /v2, driven by the real tritonclient[http] package:
health and metadata, every model in JSON and binary tensor mode against numpy, the protocol's
error bodies ({"error": "message"}), and malformed binary framing sent raw with requests."""

import json

import numpy as np
import pytest
import requests

from conftest import DELAY_HEADER, HTTP_TIMEOUT_S, assert_close, gemm_ref, rng, triton_client

tc = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

HEADER = "Inference-Header-Content-Length"
MODES = [pytest.param(False, False, id="json"), pytest.param(True, True, id="binary"),
         pytest.param(True, False, id="binary-in-json-out"),
         pytest.param(False, True, id="json-in-binary-out")]
NP_TO_KS = {np.float32: "FP32", np.float64: "FP64", np.uint8: "UINT8"}


@pytest.fixture(scope="module")
def client(daemon):
    with triton_client(daemon) as c:
        yield c


def tensor(name, arr, binary):
    t = tc.InferInput(name, list(arr.shape), NP_TO_KS[arr.dtype.type])
    t.set_data_from_numpy(arr, binary_data=binary)
    return t


def outputs(names, binary):
    return [tc.InferRequestedOutput(n, binary_data=binary) for n in names]


def check_output(result, name, datatype, binary):
    out = result.get_output(name)
    assert out["datatype"] == datatype, out
    assert ("binary_data_size" in out.get("parameters", {})) == binary, out
    assert ("data" in out) == (not binary), out
    return result.as_numpy(name)


def ks_error(r, status):
    """The protocol's error body: {"error": "<message>"}, with the status."""
    assert r.status_code == status, (r.status_code, r.text[:500])
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    body = r.json()
    assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"], body
    return body["error"]


def infer_raw(daemon, model, header, blobs=(), header_len=None, **kw):
    """POSTs a hand-built request: JSON header, then raw bytes; header_len overrides the
    announced length (None: the true one when there are blobs, no header without)."""
    head = json.dumps(header).encode()
    hdrs = dict(kw.pop("headers", {}))
    if blobs or header_len is not None:
        hdrs[HEADER] = str(len(head) if header_len is None else header_len)
        hdrs.setdefault("Content-Type", "application/octet-stream")
    return daemon.post(f"/v2/models/{model}/infer", data=head + b"".join(blobs), headers=hdrs, **kw)


# -- health and metadata -------------------------------------------------------------------------

def test_server_live_ready_metadata(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    meta = client.get_server_metadata()
    assert meta["name"] == "crunchd"
    assert isinstance(meta["version"], str) and meta["version"]
    assert "binary_tensor_data" in meta["extensions"]


@pytest.mark.parametrize("model,inputs,outs", [
    ("gemm", {"a": 2, "b": 2, "c": 2}, {"c": 2}),
    ("ata", {"a": 2}, {"c": 2}),
    ("histogram", {"data": 1}, {"counts": 1, "edges": 1}),
])
def test_model_metadata_and_ready(client, model, inputs, outs):
    for version in ("", "1"):
        assert client.is_model_ready(model, version)
        meta = client.get_model_metadata(model, version)
        assert meta["name"] == model and meta["versions"] == ["1"]
        assert meta["platform"] == "crunchd"
        assert {t["name"]: len(t["shape"]) for t in meta["inputs"]} == inputs
        assert {t["name"]: len(t["shape"]) for t in meta["outputs"]} == outs
        for t in meta["inputs"] + meta["outputs"]:
            assert t["datatype"] in t["datatypes"] and all(d == -1 for d in t["shape"])
    counts = next(t for t in client.get_model_metadata("histogram")["outputs"] if t["name"] == "counts")
    assert counts["datatype"] == "UINT64"


def test_unknown_model_and_version(client, daemon):
    assert not client.is_model_ready("syrk")
    with pytest.raises(InferenceServerException) as e:
        client.get_model_metadata("syrk")
    assert e.value.status() == "404" and "syrk" in e.value.message()
    assert not client.is_model_ready("gemm", "2")
    ks_error(daemon.get("/v2/models/gemm/versions/2"), 404)
    ks_error(daemon.post("/v2/models/nope/infer", {"inputs": []}), 404)


# -- inference against numpy ---------------------------------------------------------------------

@pytest.mark.parametrize("bin_in,bin_out", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm(client, bin_in, bin_out, dtype):
    r = rng(1)
    a = r.uniform(-1, 1, (7, 13)).astype(dtype)
    b = r.uniform(-1, 1, (13, 5)).astype(dtype)
    res = client.infer("gemm", [tensor("a", a, bin_in), tensor("b", b, bin_in)],
                       outputs=outputs(["c"], bin_out))
    got = check_output(res, "c", NP_TO_KS[dtype], bin_out)
    assert got.shape == (7, 5) and got.dtype == dtype
    assert_close(got, gemm_ref(a, b), 13, np.dtype(dtype).name)
    params = res.get_response()["parameters"]
    assert params["kernel"] and params["backend"] and params["job_id"]
    assert res.get_response()["model_name"] == "gemm"


@pytest.mark.parametrize("bin_in,bin_out", MODES[:2])
def test_gemm_parameters_and_c(client, bin_in, bin_out):
    r = rng(2)
    a = r.uniform(-1, 1, (6, 4)).astype(np.float64)   # stored transposed: op(a) is 4 x 6
    b = r.uniform(-1, 1, (3, 6)).astype(np.float64)   # stored transposed: op(b) is 6 x 3
    c = r.uniform(-1, 1, (4, 3)).astype(np.float64)
    res = client.infer("gemm", [tensor("a", a, bin_in), tensor("b", b, bin_in), tensor("c", c, bin_in)],
                       outputs=outputs(["c"], bin_out), request_id="req-7",
                       parameters={"alpha": 2.5, "beta": -0.5, "trans_a": True, "trans_b": True,
                                   "kernel": "auto"})
    assert res.get_response()["id"] == "req-7"
    ref = gemm_ref(a, b, c, alpha=2.5, beta=-0.5, trans_a=True, trans_b=True)
    assert_close(check_output(res, "c", "FP64", bin_out), ref, 6, "float64")


def test_gemm_versioned_url_and_default_outputs(client):
    """No outputs named: every output, binary (tritonclient then asks binary_data_output)."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((3, 2), np.float32)
    res = client.infer("gemm", [tensor("a", a, True), tensor("b", b, False)], model_version="1")
    np.testing.assert_array_equal(check_output(res, "c", "FP32", True), a @ b)


@pytest.mark.parametrize("bin_in,bin_out", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ata(client, bin_in, bin_out, dtype):
    a = rng(3).uniform(-1, 1, (11, 6)).astype(dtype)
    res = client.infer("ata", [tensor("a", a, bin_in)], outputs=outputs(["c"], bin_out))
    got = check_output(res, "c", NP_TO_KS[dtype], bin_out)
    assert got.shape == (6, 6)
    a64 = a.astype(np.float64)
    assert_close(got, a64.T @ a64, 11, np.dtype(dtype).name)


@pytest.mark.parametrize("bin_in,bin_out", MODES)
def test_histogram_uint8(client, bin_in, bin_out):
    data = rng(4).integers(0, 256, 5000, dtype=np.uint8)
    res = client.infer("histogram", [tensor("data", data, bin_in)],
                       outputs=outputs(["counts"], bin_out))
    got = check_output(res, "counts", "UINT64", bin_out)
    np.testing.assert_array_equal(got, np.bincount(data, minlength=256))
    assert res.get_output("edges") is None


@pytest.mark.parametrize("bin_out", [True, False])
def test_histogram_uint8_edges_when_asked(client, bin_out):
    """perf_analyzer asks for every output the metadata lists: uint8 data has numpy's edges too,
    float64 as np.histogram gives them (0..256 for the byte domain, else the range's)."""
    data = rng(5).integers(0, 256, 999, dtype=np.uint8)
    res = client.infer("histogram", [tensor("data", data, True)], outputs=outputs(["counts", "edges"], bin_out))
    counts, edges = np.histogram(data, bins=256, range=(0, 256))
    np.testing.assert_array_equal(check_output(res, "counts", "UINT64", bin_out), counts)
    got = check_output(res, "edges", "FP64", bin_out)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, edges)
    res = client.infer("histogram", [tensor("data", data, True)], outputs=outputs(["edges"], bin_out),
                       parameters={"bins": 7, "range_lo": 10.0, "range_hi": 200.0})
    np.testing.assert_allclose(check_output(res, "edges", "FP64", bin_out), np.histogram(data, 7, (10, 200))[1],
                               rtol=1e-15)


@pytest.mark.parametrize("bin_in,bin_out", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_histogram_float(client, bin_in, bin_out, dtype):
    data = rng(5).normal(0, 1, 3001).astype(dtype)
    res = client.infer("histogram", [tensor("data", data, bin_in)],
                       outputs=outputs(["counts", "edges"], bin_out),
                       parameters={"bins": 17, "range_lo": -2.0, "range_hi": 2.5})
    counts, edges = np.histogram(data, bins=17, range=(-2.0, 2.5))
    np.testing.assert_array_equal(check_output(res, "counts", "UINT64", bin_out), counts)
    got_edges = check_output(res, "edges", NP_TO_KS[dtype], bin_out)
    np.testing.assert_allclose(got_edges, edges, rtol=1e-6 if dtype == np.float32 else 1e-15)


def test_histogram_float_default_range_and_bins(client):
    data = rng(6).uniform(3, 9, 999).astype(np.float32)
    res = client.infer("histogram", [tensor("data", data, True)])  # all outputs, binary
    counts, edges = np.histogram(data)
    np.testing.assert_array_equal(res.as_numpy("counts"), counts)
    np.testing.assert_allclose(res.as_numpy("edges"), edges, rtol=1e-6)


def test_json_nested_data_and_empty_histogram(daemon):
    r = daemon.post("/v2/models/gemm/infer", {"inputs": [
        {"name": "a", "datatype": "FP32", "shape": [2, 2], "data": [[1, 2], [3, 4]]},
        {"name": "b", "datatype": "FP32", "shape": [2, 1], "data": [1, 1]}]})
    assert r.status_code == 200, r.text
    out = r.json()["outputs"][0]
    assert out["shape"] == [2, 1] and out["data"] == [3, 7] and out["datatype"] == "FP32"
    r = daemon.post("/v2/models/histogram/infer", {"inputs": [
        {"name": "data", "datatype": "UINT8", "shape": [0], "data": []}]})
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == [0] * 256


def test_binary_response_framing(daemon):
    """Raw view of a binary answer: the header length, the content type, the bytes after."""
    a = np.arange(4, dtype=np.float32).reshape(2, 2)
    head = {"inputs": [{"name": "a", "datatype": "FP32", "shape": [2, 2],
                        "parameters": {"binary_data_size": 16}}],
            "outputs": [{"name": "c", "parameters": {"binary_data": True}}]}
    r = infer_raw(daemon, "ata", head, [a.tobytes()])
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/octet-stream"
    n = int(r.headers[HEADER])
    meta = json.loads(r.content[:n])
    assert meta["outputs"][0]["parameters"]["binary_data_size"] == 16
    np.testing.assert_array_equal(np.frombuffer(r.content[n:], np.float32).reshape(2, 2), a.T @ a)
    assert r.headers.get("Server-Timing") and r.headers.get("X-Crunchd-Job-Id")


# -- errors through the client -------------------------------------------------------------------

def infer_error(client, model, inputs, status, **kw):
    with pytest.raises(InferenceServerException) as e:
        client.infer(model, inputs, **kw)
    assert e.value.status() == str(status), (e.value.status(), e.value.message())
    assert isinstance(e.value.message(), str) and e.value.message()
    return e.value.message()


def test_errors_via_client(client):
    f32 = np.ones((2, 3), np.float32)
    msg = infer_error(client, "gemm", [tensor("a", f32, True), tensor("b", np.ones((4, 2), np.float32), True)], 422)
    assert "inner" in msg
    ints = tc.InferInput("a", [2, 2], "INT32")
    ints.set_data_from_numpy(np.ones((2, 2), np.int32))
    assert "INT32" in infer_error(client, "ata", [ints], 400)
    assert "needs input b" in infer_error(client, "gemm", [tensor("a", f32, False)], 400)
    assert "zzz" in infer_error(client, "gemm", [tensor("a", f32, False), tensor("zzz", f32, False)], 400)
    assert "FP64" in infer_error(client, "gemm", [tensor("a", f32, True),
                                                  tensor("b", np.ones((3, 2), np.float64), True)], 400)
    assert "gamma" in infer_error(client, "gemm", [tensor("a", f32, True), tensor("b", f32.T.copy(), True)],
                                  400, parameters={"gamma": 1})
    assert "kernel" in infer_error(client, "gemm", [tensor("a", f32, True), tensor("b", f32.T.copy(), True)],
                                   400, parameters={"kernel": "no-such-kernel"})
    infer_error(client, "nosuch", [tensor("a", f32, True)], 404)


def test_deadline_from_timeout_parameter(client):
    """Triton's "timeout" parameter (microseconds) becomes the job's deadline: 504."""
    a = np.ones((2, 2), np.float32)
    msg = infer_error(client, "ata", [tensor("a", a, True)], 504, timeout=20000,
                      headers={DELAY_HEADER: "400"})
    assert msg


# -- malformed requests, raw ---------------------------------------------------------------------

GEMM_BIN_HEAD = {"inputs": [
    {"name": "a", "datatype": "FP32", "shape": [1, 2], "parameters": {"binary_data_size": 8}},
    {"name": "b", "datatype": "FP32", "shape": [2, 1], "parameters": {"binary_data_size": 8}}]}
BLOBS = [np.ones(2, np.float32).tobytes(), np.ones(2, np.float32).tobytes()]


def test_binary_header_well_formed_baseline(daemon):
    r = infer_raw(daemon, "gemm", GEMM_BIN_HEAD, BLOBS)
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == [2.0]


@pytest.mark.parametrize("value,fragment", [
    ("100000", "larger than the body"), ("-5", "byte count"), ("abc", "byte count"),
    ("", "byte count"), ("12x", "byte count"), ("99999999999999999999", "byte count"),
])
def test_bad_header_length(daemon, value, fragment):
    head = json.dumps(GEMM_BIN_HEAD).encode()
    r = daemon.post("/v2/models/gemm/infer", data=head + b"".join(BLOBS),
                    headers={HEADER: value, "Content-Type": "application/octet-stream"})
    assert fragment in ks_error(r, 400)


def test_header_length_cuts_json(daemon):
    """A length that ends inside the JSON: the header does not parse."""
    assert "JSON" in ks_error(infer_raw(daemon, "gemm", GEMM_BIN_HEAD, BLOBS, header_len=10), 400)


@pytest.mark.parametrize("blobs,fragment", [
    ([BLOBS[0]], "only 0 left"),                          # b's bytes missing
    ([BLOBS[0], BLOBS[1], b"\0" * 4], "announce"),         # trailing bytes
    ([BLOBS[0], BLOBS[1][:7]], "left in the body"),        # b short by one byte
])
def test_binary_sizes_against_body(daemon, blobs, fragment):
    assert fragment in ks_error(infer_raw(daemon, "gemm", GEMM_BIN_HEAD, blobs), 400)


def test_binary_size_against_shape_and_without_header(daemon):
    head = json.loads(json.dumps(GEMM_BIN_HEAD))
    head["inputs"][0]["parameters"]["binary_data_size"] = 12
    assert "shape and datatype make 8" in ks_error(infer_raw(daemon, "gemm", head, [b"\0" * 12, BLOBS[1]]), 400)
    r = daemon.post("/v2/models/gemm/infer", data=json.dumps(GEMM_BIN_HEAD),
                    headers={"Content-Type": "application/json"})
    assert HEADER in ks_error(r, 400)


@pytest.mark.parametrize("body,status,fragment", [
    (b"", 400, "empty"),
    (b"[1]", 400, "object"),
    (b"{\"inputs\": 3}", 400, "list"),
    (b"{\"inputs\": [], \"extra\": 1}", 400, "extra"),
    (b"{\"inputs\": [{\"name\": \"a\", \"datatype\": \"FP32\", \"shape\": [2, 2], \"data\": [1, 2, 3]}]}",
     400, "3 numbers"),
    (b"{\"inputs\": [{\"name\": \"a\", \"datatype\": \"FP32\", \"shape\": [2], \"data\": [1, 2]}]}",
     400, "2 to 8 dimensions"),  # AtA of a vector
    (b"{\"inputs\": [{\"name\": \"a\", \"datatype\": \"FP32\", \"shape\": [1, 2], \"data\": [1, \"x\"]}]}",
     400, "a.data[1]"),
    (b"{\"inputs\": [{\"name\": \"a\", \"datatype\": \"FP32\", \"shape\": [1, 2], \"data\": [1, 2],"
     b" \"parameters\": {\"binary_data_size\": 8}}]}", 400, "exactly one"),
    (b"{\"inputs\": [{\"name\": \"a\", \"datatype\": \"FP32\", \"shape\": [100000, 100000],"
     b" \"data\": []}]}", 413, "limit"),
    (b"{\"inputs\": [{\"name\": \"a\", \"datatype\": \"FP32\", \"shape\": [1, 1], \"data\": [1]},"
     b" {\"name\": \"a\", \"datatype\": \"FP32\", \"shape\": [1, 1], \"data\": [1]}]}", 400, "twice"),
    (b"{\"inputs\": [{\"name\": \"a\", \"datatype\": \"FP32\", \"shape\": [1, 1], \"data\": [1]}],"
     b" \"outputs\": [{\"name\": \"d\"}]}", 400, "no output"),
    (b"{\"id\": 5, \"inputs\": [{\"name\": \"a\", \"datatype\": \"FP32\", \"shape\": [1, 1], \"data\": [1]}]}",
     400, "id"),
])
def test_malformed_json_requests(daemon, body, status, fragment):
    r = daemon.post("/v2/models/ata/infer", data=body, headers={"Content-Type": "application/json"})
    assert fragment in ks_error(r, status)


def test_content_type_and_method(daemon):
    r = daemon.post("/v2/models/ata/infer", data=b"{}", headers={"Content-Type": "text/plain"})
    ks_error(r, 415)
    r = daemon.get("/v2/models/ata/infer")
    assert r.status_code == 405 and "POST" in r.headers["Allow"]


def test_non_utf8_id_is_echoed_as_valid_json(daemon):
    body = (b"{\"id\": \"x\xff\xfey\", \"inputs\": [{\"name\": \"a\", \"datatype\": \"FP64\","
            b" \"shape\": [1, 1], \"data\": [3]}]}")
    r = daemon.post("/v2/models/ata/infer", data=body)
    assert r.status_code == 200, r.text
    assert r.json()["id"] == "x\ufffd\ufffdy" and r.json()["outputs"][0]["data"] == [9.0]


def test_binary_body_limit_is_max_body_mb(start_daemon):
    """With binary tensors the body may exceed --max-json-mb (up to --max-body-mb); the same
    tensors as JSON may not."""
    d = start_daemon("--max-json-mb", "1", "--max-body-mb", "16")
    a = np.ones((512, 1024), np.float32)            # 2 MiB
    b = np.ones((1024, 1), np.float32)
    with triton_client(d) as c:
        res = c.infer("gemm", [tensor("a", a, True), tensor("b", b, True)])
        np.testing.assert_array_equal(res.as_numpy("c"), a @ b)
        assert "max-json-mb" in infer_error(c, "gemm", [tensor("a", a, False), tensor("b", b, False)], 413)
    big = b"\0" * (17 << 20)
    r = requests.post(d.url("/v2/models/ata/infer"), data=big, headers={HEADER: "2"},
                      timeout=HTTP_TIMEOUT_S)
    assert "max-body-mb" in ks_error(r, 413)


# -- the answers against api/openapi.yaml's /v2 schemas --------------------------------------------

def test_answers_match_openapi(daemon):
    yaml = pytest.importorskip("yaml")
    validator = pytest.importorskip("openapi_schema_validator").OAS30Validator
    from conftest import ROOT
    spec = yaml.safe_load((ROOT / "api" / "openapi.yaml").read_text())
    paths = spec["paths"]

    def check(path, method, status, body):
        resp = paths[path][method]["responses"][str(status)]
        schema = resp["content"]["application/json"]["schema"]
        errors = list(validator(schema).iter_errors(body))
        assert not errors, f"{method} {path} {status}: {errors[0].message}"

    check("/v2", "get", 200, daemon.get("/v2").json())
    check("/v2/health/live", "get", 200, daemon.get("/v2/health/live").json())
    check("/v2/health/ready", "get", 200, daemon.get("/v2/health/ready").json())
    check("/v2/models/{model_name}", "get", 200, daemon.get("/v2/models/histogram").json())
    check("/v2/models/{model_name}", "get", 404, daemon.get("/v2/models/nope").json())
    check("/v2/models/{model_name}/ready", "get", 200, daemon.get("/v2/models/ata/ready").json())
    example = paths["/v2/models/{model_name}/infer"]["post"]["requestBody"]["content"][
        "application/json"]["example"]
    r = daemon.post("/v2/models/gemm/infer", example)
    assert r.status_code == 200, r.text
    check("/v2/models/{model_name}/infer", "post", 200, r.json())
    r = daemon.post("/v2/models/gemm/versions/1/infer", {"inputs": []})
    check("/v2/models/{model_name}/versions/{model_version}/infer", "post", 400, r.json())


def test_nul_in_a_string_is_refused_like_v1(daemon):
    """cJSON passes "\\u0000" through and C strings would cut the value short there: refused."""
    body = ('{"inputs":[{"name":"a","shape":[1,1],"datatype":"FP32","data":[1]}],'
            '"parameters":{"kernel":"reference\\u0000junk"}}')
    r = daemon.post("/v2/models/ata/infer", data=body, headers={"Content-Type": "application/json"})
    assert "u0000" in ks_error(r, 400)


# -- the rest of Triton's HTTP surface -----------------------------------------------------------

@pytest.mark.parametrize("model", ["gemm", "ata", "histogram"])
def test_model_config_via_client(client, model):
    for version in ("", "1"):
        cfg = client.get_model_config(model, version)
        assert cfg["name"] == model and cfg["platform"] == "crunchd"
        assert cfg["max_batch_size"] == 0
        meta = client.get_model_metadata(model)
        assert [t["name"] for t in cfg["input"]] == [t["name"] for t in meta["inputs"]]
        for t in cfg["input"] + cfg["output"]:
            assert t["data_type"].startswith("TYPE_") and all(d == -1 for d in t["dims"])


def test_repository_index_via_client(client):
    index = client.get_model_repository_index()
    assert sorted(m["name"] for m in index) == ["ata", "gemm", "histogram"]
    assert all(m["state"] == "READY" and m["version"] == "1" for m in index)
    with pytest.raises(InferenceServerException) as e:
        client.load_model("gemm")
    assert e.value.status() == "400" and "built in" in e.value.message()


def test_inference_statistics_count_inferences(client):
    before = client.get_inference_statistics("ata")["model_stats"][0]
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    inp = tc.InferInput("a", list(a.shape), "FP32")
    inp.set_data_from_numpy(a)
    client.infer("ata", [inp])
    after = client.get_inference_statistics("ata", "1")["model_stats"][0]
    assert after["name"] == "ata" and after["version"] == "1"
    assert after["inference_count"] == before["inference_count"] + 1
    assert after["inference_stats"]["success"]["count"] == before["inference_stats"]["success"]["count"] + 1
    assert after["last_inference"] >= before["last_inference"]
    every = client.get_inference_statistics()["model_stats"]
    assert sorted(m["name"] for m in every) == ["ata", "gemm", "histogram"]


def test_every_v2_error_has_the_v2_shape(client, daemon):
    for r in (daemon.get("/v2/nope"), daemon.get("/v2/models/gemm/nope"), daemon.request("PUT", "/v2/models/gemm/infer"),
              daemon.get("/v2/models/nope/config"), daemon.get("/v2/models/gemm/versions/2/stats")):
        body = r.json()
        assert r.status_code in (404, 405) and isinstance(body.get("error"), str), (r.status_code, body)
    with pytest.raises(InferenceServerException) as e:
        client.get_model_config("nope")
    assert e.value.status() == "404" and "nope" in e.value.message()
