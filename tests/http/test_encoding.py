"""Content codings (issue 16): request bodies sent with Content-Encoding gzip or deflate on every
route that takes a body (JSON, .npy, multipart, raw bytes, KServe JSON and binary, tritonclient's
own compression), limits and the memory budget counted on decoded bytes (bombs refused with 413
before their memory is spent), precise refusals of bad or unknown codings, and answers
compressed for clients that send Accept-Encoding."""

import gzip
import io
import json
import zlib

import numpy as np
import pytest
import requests

from conftest import assert_error, gemm_ref, rand_matrix, rng, triton_client

tc = pytest.importorskip("tritonclient.http")

MiB = 1 << 20
IDENTITY = {"Accept-Encoding": "identity"}


def coded(data, coding):
    if isinstance(data, str):
        data = data.encode()
    return gzip.compress(data) if coding == "gzip" else zlib.compress(data)


def npy(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def post_coded(daemon, path, body, coding, content_type="application/json", headers=None, **kw):
    h = {"Content-Type": content_type, "Content-Encoding": coding, **IDENTITY, **(headers or {})}
    return daemon.post(path, data=coded(body, coding), headers=h, **kw)


def raw_answer(daemon, method, path, accept, **kw):
    """The answer's bytes as they came (not decoded by requests), and its headers."""
    h = dict(kw.pop("headers", {}))
    h["Accept-Encoding"] = accept
    r = daemon.request(method, path, headers=h, stream=True, **kw)
    body = r.raw.read(decode_content=False)
    r.close()
    return r, body


def decode(body, coding):
    return gzip.decompress(body) if coding == "gzip" else zlib.decompress(body) if coding == "deflate" else body


# -- request bodies, every route -----------------------------------------------------------------

@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_json_body(daemon, coding):
    r = rng(1)
    a, b = rand_matrix(r, 20, 30), rand_matrix(r, 30, 10)
    body = json.dumps({"a": a.tolist(), "b": b.tolist()})
    resp = post_coded(daemon, "/v1/gemm", body, coding)
    assert resp.status_code == 200, resp.text
    got = np.asarray(resp.json()["result"]["data"]).reshape(20, 10)
    np.testing.assert_allclose(got, gemm_ref(a, b), rtol=1e-4, atol=1e-4)


def test_x_gzip_and_case(daemon):
    body = json.dumps({"data": [1, 2, 2, 3]})
    for name in ("x-gzip", "GZIP"):
        r = daemon.post("/v1/histogram", data=gzip.compress(body.encode()),
                        headers={"Content-Type": "application/json", "Content-Encoding": name})
        assert r.status_code == 200, (name, r.text)
        assert r.json()["result"]["counts"][2] == 2


def test_multi_member_gzip(daemon):
    body = json.dumps({"a": [[1, 2], [3, 4]], "b": [[1, 0], [0, 1]]}).encode()
    two = gzip.compress(body[:10]) + gzip.compress(body[10:])
    r = daemon.post("/v1/gemm", data=two, headers={"Content-Type": "application/json",
                                                   "Content-Encoding": "gzip"})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["data"] == [1, 2, 3, 4]


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_npy_body(daemon, coding):
    a = rand_matrix(rng(2), 64, 16, "float64")
    r = post_coded(daemon, "/v1/ata", npy(a), coding, "application/x-npy")
    assert r.status_code == 200, r.text
    got = np.asarray(r.json()["result"]["data"]).reshape(16, 16)
    np.testing.assert_allclose(got, a.T @ a, rtol=1e-10)


def test_multipart_body(daemon):
    r = rng(3)
    a, b = rand_matrix(r, 8, 5), rand_matrix(r, 5, 3)
    req = requests.Request("POST", daemon.url("/v1/gemm"),
                           files={"a": ("a.npy", npy(a)), "b": ("b.npy", npy(b))}).prepare()
    resp = daemon.post("/v1/gemm", data=gzip.compress(req.body),
                       headers={"Content-Type": req.headers["Content-Type"], "Content-Encoding": "gzip",
                                "Accept": "application/x-npy"})
    assert resp.status_code == 200, resp.text
    np.testing.assert_allclose(np.load(io.BytesIO(resp.content)), gemm_ref(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("chunked", [False, True])
def test_raw_bytes_body(daemon, chunked):
    """Raw bytes need their length up front; a coded body's is known at its end: it is held
    (charged to the budget) until then, with or without a Content-Length."""
    data = rng(4).integers(0, 256, 300_000, dtype=np.uint8)
    z = gzip.compress(data.tobytes())
    body = (z[i:i + 5000] for i in range(0, len(z), 5000)) if chunked else z
    r = daemon.post("/v1/histogram", data=body, headers={"Content-Type": "application/octet-stream",
                                                         "Content-Encoding": "gzip"})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["counts"] == np.bincount(data, minlength=256).tolist()


def test_async_job_body(daemon):
    body = json.dumps({"op": "histogram", "data": [5, 5, 6]})
    r = post_coded(daemon, "/v1/jobs", body, "gzip")
    assert r.status_code == 202, r.text
    j, _ = daemon.wait_job(r.json()["id"])
    assert j["status"] == "done", j


def test_kserve_json_body(daemon):
    header = {"inputs": [{"name": "data", "shape": [4], "datatype": "UINT8", "data": [1, 1, 2, 200]}]}
    r = post_coded(daemon, "/v2/models/histogram/infer", json.dumps(header), "gzip")
    assert r.status_code == 200, r.text
    counts = r.json()["outputs"][0]["data"]
    assert counts[1] == 2 and counts[200] == 1


@pytest.mark.parametrize("req_alg,resp_alg", [("gzip", "gzip"), ("deflate", "deflate"), ("gzip", None)])
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_tritonclient_compression(daemon, req_alg, resp_alg, binary):
    """tritonclient.http compresses the whole body (JSON header and binary tensors): the
    Inference-Header-Content-Length it sends counts the decoded header."""
    with triton_client(daemon) as c:
        r = rng(5)
        a, b = rand_matrix(r, 64, 32), rand_matrix(r, 32, 16)
        ins = []
        for name, arr in (("a", a), ("b", b)):
            t = tc.InferInput(name, list(arr.shape), "FP32")
            t.set_data_from_numpy(arr, binary_data=binary)
            ins.append(t)
        res = c.infer("gemm", ins, outputs=[tc.InferRequestedOutput("c", binary_data=binary)],
                      request_compression_algorithm=req_alg, response_compression_algorithm=resp_alg)
        np.testing.assert_allclose(res.as_numpy("c"), gemm_ref(a, b), rtol=1e-4, atol=1e-4)


def test_kserve_binary_answer_not_compressed(daemon):
    """Raw tensors are float arrays that do not compress: a binary answer goes as it is, even to
    a client that accepts gzip (HTTP lets the server choose identity)."""
    a = np.ones((64, 64), np.float32)
    header = json.dumps({"inputs": [{"name": "a", "shape": [64, 64], "datatype": "FP32",
                                     "parameters": {"binary_data_size": a.nbytes}}],
                         "outputs": [{"name": "c", "parameters": {"binary_data": True}}]}).encode()
    r, body = raw_answer(daemon, "POST", "/v2/models/ata/infer", "gzip", data=header + a.tobytes(),
                         headers={"Inference-Header-Content-Length": str(len(header))})
    assert r.status_code == 200 and "Content-Encoding" not in r.headers, r.headers
    n = int(r.headers["Inference-Header-Content-Length"])
    out = json.loads(body[:n])["outputs"][0]
    c = np.frombuffer(body[n:], np.float32).reshape(64, 64)
    assert out["parameters"]["binary_data_size"] == c.nbytes and np.all(c == 64)


# -- refusals --------------------------------------------------------------------------------------

@pytest.mark.parametrize("body,fragment", [
    (b"this is not gzip", "not valid gzip"),
    # mtime=0: the header's time is in the test's id, which pytest-xdist's workers must agree on
    (gzip.compress(b'{"data": [1, 2, 3]}', mtime=0)[:-6], "truncated"),
    (b"", "empty"),
    (gzip.compress(b'{"data": [1]}', mtime=0) + b"trailing", "not valid gzip"),
])
def test_malformed_gzip_is_400(daemon, body, fragment):
    r = daemon.post("/v1/histogram", data=body, headers={"Content-Type": "application/json",
                                                        "Content-Encoding": "gzip"})
    e = assert_error(r, 400, "invalid_encoding", "Content-Encoding")
    assert fragment in e["message"], e
    assert daemon.post("/v1/histogram", {"data": [1]}).status_code == 200  # nothing else affected


def test_corrupt_gzip_on_every_kind_of_body(daemon):
    bad = bytearray(gzip.compress(npy(np.ones((64, 64), np.float32))))
    bad[len(bad) // 2] ^= 0xFF
    for ct, path in (("application/x-npy", "/v1/ata"), ("application/octet-stream", "/v1/histogram"),
                     ("multipart/form-data; boundary=xyz", "/v1/gemm")):
        r = daemon.post(path, data=bytes(bad), headers={"Content-Type": ct, "Content-Encoding": "gzip"})
        assert_error(r, 400, "invalid_encoding", "Content-Encoding")


def test_deflate_means_zlib_format(daemon):
    raw = zlib.compressobj(wbits=-15)
    body = raw.compress(b'{"data": [1, 2]}') + raw.flush()
    r = daemon.post("/v1/histogram", data=body, headers={"Content-Type": "application/json",
                                                        "Content-Encoding": "deflate"})
    e = assert_error(r, 400, "invalid_encoding", "Content-Encoding")
    assert "deflate" in e["message"], e


def test_malformed_gzip_on_kserve_is_v2_error(daemon):
    r = daemon.post("/v2/models/gemm/infer", data=b"\x1f\x8b garbage",
                    headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert r.status_code == 400 and set(r.json()) == {"error"}, r.text
    assert "gzip" in r.json()["error"]


@pytest.mark.parametrize("coding", ["br", "zstd", "compress", "gzip, gzip", "snappy"])
def test_other_codings_are_415(daemon, coding):
    r = daemon.post("/v1/histogram", data=b"{}", headers={"Content-Type": "application/json",
                                                          "Content-Encoding": coding})
    e = assert_error(r, 415, "unsupported_media_type", "Content-Encoding")
    assert coding.split(",")[0] in e["message"], e


def test_identity_is_no_coding(daemon):
    r = daemon.post("/v1/histogram", {"data": [1]}, headers={"Content-Encoding": "identity"})
    assert r.status_code == 200, r.text


# -- limits on decoded bytes ------------------------------------------------------------------------

def vm_hwm_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def bomb(n_bytes, prefix=b"", fill=b" "):
    """prefix then n_bytes of fill, gzip at level 9, made a MiB at a time."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + 15)
    out = [z.compress(prefix)]
    block = fill * (MiB // len(fill))
    for _ in range(n_bytes // MiB):
        out.append(z.compress(block))
    out.append(z.flush())
    return b"".join(out)


@pytest.fixture(scope="module")
def small_limits(tmp_path_factory):
    from conftest import Daemon
    d = Daemon(["--max-body-mb", "4", "--workers", "1"], name="small-limits",
               workdir=tmp_path_factory.mktemp("small-limits")).start()
    yield d
    d.stop()


@pytest.mark.parametrize("route,ct,prefix", [
    ("/v1/histogram", "application/json", b'{"data": ['),
    ("/v2/models/histogram/infer", "application/json", b'{"inputs": ['),
    ("/v1/histogram", "application/octet-stream", b""),
    # a .npy header announces the decoded size: refused from it, before the data arrives
    ("/v1/ata", "application/x-npy", npy(np.zeros((1, 1), np.float32))[:-4].replace(b"(1, 1)", b"(131072, 1024)")),
])
def test_decompression_bomb_is_413_before_its_memory(small_limits, route, ct, prefix):
    """512 MiB that compress to ~0.5 MiB, against a 4 MiB limit: refused with 413 as soon as the
    decoded bytes pass the limit; the daemon's peak RSS grows by about the limit, not the bomb."""
    d = small_limits
    z = bomb(512 * MiB, prefix)
    assert len(z) < MiB
    before = vm_hwm_kib(d.proc.pid)
    r = d.post(route, data=z, headers={"Content-Type": ct, "Content-Encoding": "gzip"})
    if route.startswith("/v2"):
        assert r.status_code == 413 and "larger than" in r.json()["error"], r.text
    else:
        e = assert_error(r, 413, "too_large")
        assert any(w in e["message"] for w in ("decoded", "larger", "limit")), e
    grew = (vm_hwm_kib(d.proc.pid) - before) / 1024
    assert grew < 64, f"peak RSS grew {grew:.0f} MiB for a 4 MiB limit"
    assert d.post("/v1/histogram", {"data": [1, 2]}).status_code == 200


def test_coded_body_over_the_limit_as_sent_is_413(small_limits):
    z = np.random.default_rng(0).integers(0, 256, 5 * MiB, dtype=np.uint8).tobytes()
    r = small_limits.post("/v1/histogram", data=z, headers={"Content-Type": "application/octet-stream",
                                                            "Content-Encoding": "gzip"})
    assert_error(r, 413, "too_large")


def test_bomb_against_the_memory_budget(start_daemon):
    """A JSON body within --max-json-mb whose decoded size passes the budget: 413 (it could never
    fit), counted as it decodes."""
    d = start_daemon("--max-memory-mb", "8", "--max-json-mb", "64")
    r = d.post("/v1/histogram", data=bomb(32 * MiB, b'{"data": ['),
               headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert r.status_code in (413, 503), r.text
    assert r.json()["error"]["code"] in ("too_large", "memory_budget"), r.text
    assert d.post("/v1/histogram", {"data": [1]}).status_code == 200


# -- compressed answers -----------------------------------------------------------------------------

BIG = {"a": [[float(i % 7) for i in range(40)] for _ in range(40)],
       "b": [[float(i % 5) for i in range(40)] for _ in range(40)]}


@pytest.mark.parametrize("accept,coding", [
    ("gzip", "gzip"), ("deflate", "deflate"), ("gzip, deflate, br", "gzip"),
    ("deflate;q=1, gzip;q=0.5", "deflate"), ("*", "gzip"), ("gzip;q=0", None), ("br", None),
    ("identity", None),
])
def test_json_answer_compressed(daemon, accept, coding):
    r, body = raw_answer(daemon, "POST", "/v1/gemm", accept, data=json.dumps(BIG),
                         headers={"Content-Type": "application/json"})
    assert r.status_code == 200, body[:300]
    assert r.headers.get("Content-Encoding") == coding, r.headers
    assert "Accept-Encoding" in r.headers.get("Vary", ""), r.headers
    plain = decode(body, coding)
    assert json.loads(plain)["result"]["rows"] == 40
    if coding:
        assert len(body) < len(plain) / 2, (len(body), len(plain))


def test_small_answers_stay_plain(daemon):
    r, body = raw_answer(daemon, "GET", "/healthz", "gzip")
    assert "Content-Encoding" not in r.headers and json.loads(body) == {"status": "ok"}
    r, body = raw_answer(daemon, "GET", "/v1/jobs/00000000-0000-4000-8000-000000000000", "gzip")
    assert r.status_code == 404 and "Content-Encoding" not in r.headers, r.headers


def test_metrics_for_prometheus(daemon):
    r, body = raw_answer(daemon, "GET", "/metrics", "gzip")
    assert r.headers["Content-Encoding"] == "gzip" and r.headers["Content-Type"].startswith("text/plain")
    text = gzip.decompress(body).decode()
    assert "crunchd_requests_total" in text and len(body) < len(text) / 3


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_npy_answer_not_compressed(daemon, coding):
    """.npy answers are float arrays: sent as they are whatever Accept-Encoding says."""
    a = np.eye(128, dtype=np.float32)
    r, body = raw_answer(daemon, "POST", "/v1/ata", coding, data=npy(a),
                         headers={"Content-Type": "application/x-npy", "Accept": "application/x-npy"})
    assert r.status_code == 200 and "Content-Encoding" not in r.headers, r.headers
    assert r.headers["X-Crunchd-Op"] == "ata"
    np.testing.assert_array_equal(np.load(io.BytesIO(body)), a)


def test_openapi_compressed_is_the_file(daemon):
    from conftest import ROOT
    r, body = raw_answer(daemon, "GET", "/openapi.yaml", "gzip")
    assert r.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(body) == (ROOT / "api" / "openapi.yaml").read_bytes()


def test_head_of_a_compressed_answer(daemon):
    r = daemon.request("HEAD", "/metrics", headers={"Accept-Encoding": "gzip"})
    assert r.status_code == 200 and r.content == b"", r.headers


def test_gzip_level_0_never_compresses(start_daemon):
    d = start_daemon("--gzip-level", "0")
    r, body = raw_answer(d, "GET", "/metrics", "gzip")
    assert "Content-Encoding" not in r.headers and b"crunchd_requests_total" in body
    assert "Vary" not in r.headers
    assert d.get("/v1/info").json()["limits"]["gzip_level"] == 0


def test_compressed_answer_ratio(daemon):
    """What a JSON answer gains: a 256x256 GEMM result (float32 text) at level 1."""
    a = np.round(rng(7).uniform(-1, 1, (256, 256)).astype(np.float32), 3)
    body = json.dumps({"a": a.tolist(), "b": np.eye(256).tolist()})
    r, z = raw_answer(daemon, "POST", "/v1/gemm", "gzip", data=body,
                      headers={"Content-Type": "application/json"})
    plain = gzip.decompress(z)
    ratio = len(plain) / len(z)
    print(f"256x256 GEMM JSON answer: {len(plain)} bytes, gzip level 1 {len(z)} bytes ({ratio:.2f}x)")
    assert ratio > 2, ratio
