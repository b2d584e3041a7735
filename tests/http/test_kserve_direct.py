"""KServe inference requests with binary tensors on the direct path (server/kserve/kserve_direct.c):
above --direct-min-kb crunchd reads them itself, the JSON header into memory and each binary
tensor straight into its buffer, on the Unix socket and over TCP (each test runs on both). The
answers must equal libmicrohttpd's (threshold 0) status for status and byte for byte but for the
job id, for good requests and bad; tritonclient and perf_analyzer-style bodies work unchanged."""

import json
import re

import numpy as np
import pytest

from conftest import SLOW, assert_close, gemm_ref, rng
from test_direct import DIRECT, connect, direct_count, post, read_answer, request_bytes, sock_dir, start  # noqa: F401

HL = "Inference-Header-Content-Length"


def ks_body(inputs, outputs=None, parameters=None, binary_out=True):
    """A binary-tensor body: (bytes, header length). inputs: (name, array) or (name, array, "json")."""
    header = {"inputs": []}
    tail = b""
    for item in inputs:
        name, arr = item[0], np.ascontiguousarray(item[1])
        dt = {np.float32: "FP32", np.float64: "FP64", np.uint8: "UINT8"}[arr.dtype.type]
        t = {"name": name, "datatype": dt, "shape": list(arr.shape)}
        if len(item) > 2 and item[2] == "json":
            t["data"] = arr.ravel().tolist()
        else:
            t["parameters"] = {"binary_data_size": arr.nbytes}
            tail += arr.tobytes()
        header["inputs"].append(t)
    if outputs is not None:
        header["outputs"] = [{"name": o, "parameters": {"binary_data": binary_out}} for o in outputs]
    if parameters:
        header["parameters"] = parameters
    h = json.dumps(header).encode()
    return h + tail, len(h)


def infer(d, model, body, hl, headers=None):
    hdr = {HL: str(hl)} if hl is not None else {}
    hdr.update(headers or {})
    return post(d, f"/v2/models/{model}/infer", body, "application/octet-stream", hdr)


def split_answer(ans):
    """(JSON header, binary tail) of a KServe answer."""
    if HL.lower() in ans.headers:
        n = int(ans.headers[HL.lower()])
        return json.loads(ans.body[:n]), ans.body[n:]
    return json.loads(ans.body), b""


def without_job(doc):
    doc = dict(doc)
    doc.get("parameters", {}).pop("job_id", None)
    return doc


def test_gemm_and_ata_are_read_by_us_and_answered_from_the_result(start_daemon, sock_dir):
    d = start(start_daemon, sock_dir, *DIRECT)
    g = rng(31)
    a, b = g.uniform(-1, 1, (67, 45)).astype(np.float32), g.uniform(-1, 1, (45, 39)).astype(np.float32)
    before = direct_count(d)
    body, hl = ks_body([("a", a), ("b", b)], outputs=["c"])
    head, tail = split_answer(infer(d, "gemm", body, hl))
    out = head["outputs"][0]
    assert out["shape"] == [67, 39] and out["parameters"] == {"binary_data_size": 67 * 39 * 4}
    assert_close(np.frombuffer(tail, np.float32).reshape(67, 39), gemm_ref(a, b), 45, "float32")
    x = g.uniform(-1, 1, (301, 17))
    body, hl = ks_body([("a", x)], outputs=["c"])
    head, tail = split_answer(infer(d, "ata", body, hl))
    np.testing.assert_allclose(np.frombuffer(tail, np.float64).reshape(17, 17), x.T @ x, rtol=1e-10, atol=1e-10)
    assert direct_count(d) == before + 2


def test_inputs_in_any_order_mixed_with_json_tensors(start_daemon, sock_dir):
    """Binary tensors come in the order of the header's inputs, whatever the model's order; a small
    input may be JSON beside them; outputs asked as JSON are written as JSON."""
    d = start(start_daemon, sock_dir, *DIRECT)
    g = rng(32)
    a, b = g.uniform(-1, 1, (40, 50)).astype(np.float32), g.uniform(-1, 1, (50, 30)).astype(np.float32)
    c = g.uniform(-1, 1, (40, 30)).astype(np.float32)
    body, hl = ks_body([("c", c, "json"), ("b", b), ("a", a)], outputs=["c"], binary_out=False,
                       parameters={"alpha": 2.0, "beta": 0.5})
    head, tail = split_answer(infer(d, "gemm", body, hl))
    assert tail == b""
    got = np.array(head["outputs"][0]["data"], np.float32).reshape(40, 30)
    assert_close(got, 2 * gemm_ref(a, b) + 0.5 * c, 50, "float32")


def test_histogram_counts_and_edges(start_daemon, sock_dir):
    d = start(start_daemon, sock_dir, *DIRECT)
    data = rng(33).integers(0, 256, 5000, dtype=np.uint8)
    body, hl = ks_body([("data", data)], outputs=["counts", "edges"])
    head, tail = split_answer(infer(d, "histogram", body, hl))
    sizes = [o["parameters"]["binary_data_size"] for o in head["outputs"]]
    assert sizes == [256 * 8, 257 * 8]
    np.testing.assert_array_equal(np.frombuffer(tail[:2048], np.uint64), np.bincount(data, minlength=256))
    np.testing.assert_array_equal(np.frombuffer(tail[2048:], np.float64), np.arange(257.0))


BAD = [
    ("a header that is not JSON", lambda a, b: (b"{not json" + a.tobytes() + b.tobytes(), 9)),
    ("a header longer than the body", lambda a, b: (b'{"inputs": []}', 10 ** 6)),
    ("sizes that disagree with the shape", lambda a, b: (lambda body, hl: (body[:-4], hl))(*ks_body([("a", a), ("b", b)]))),
    ("more bytes than announced", lambda a, b: (lambda body, hl: (body + b"\0" * 8, hl))(*ks_body([("a", a), ("b", b)]))),
    ("inner dimensions that differ", lambda a, b: ks_body([("a", a), ("b", a)])),
    ("an unknown input", lambda a, b: ks_body([("a", a), ("zz", b)])),
    ("an unknown parameter", lambda a, b: ks_body([("a", a), ("b", b)], parameters={"gamma": 1})),
]


@pytest.mark.parametrize("case", [c[0] for c in BAD])
def test_refusals_equal_libmicrohttpds(start_daemon, sock_dir, case):
    direct = start(start_daemon, sock_dir, *DIRECT, name="direct")
    mhd = start(start_daemon, sock_dir, "--direct-min-kb", "0", name="mhd")
    g = rng(34)
    a, b = g.uniform(-1, 1, (30, 20)).astype(np.float32), g.uniform(-1, 1, (20, 25)).astype(np.float32)
    body, hl = dict(BAD)[case](a, b)
    want = infer(mhd, "gemm", body, hl, {"X-Request-Id": "same"})
    got = infer(direct, "gemm", body, hl, {"X-Request-Id": "same"})
    assert got.status == want.status and 400 <= got.status < 500, (got.status, got.body, want.body)
    assert json.loads(got.body) == json.loads(want.body)
    assert set(json.loads(got.body)) == {"error"}  # the protocol's error shape
    # the connection survives a refusal: the next request on the daemon is served
    body, hl = ks_body([("a", a), ("b", b)], outputs=["c"])
    assert infer(direct, "gemm", body, hl).status == 200


def test_answers_equal_libmicrohttpds_for_good_requests(start_daemon, sock_dir):
    direct = start(start_daemon, sock_dir, *DIRECT, name="direct")
    mhd = start(start_daemon, sock_dir, "--direct-min-kb", "0", name="mhd")
    g = rng(35)
    a, b = g.uniform(-1, 1, (50, 33)).astype(np.float64), g.uniform(-1, 1, (33, 41)).astype(np.float64)
    for outputs in (["c"], None):
        body, hl = ks_body([("a", a), ("b", b)], outputs=outputs)
        want, got = infer(mhd, "gemm", body, hl), infer(direct, "gemm", body, hl)
        (wh, wt), (gh, gt) = split_answer(want), split_answer(got)
        assert got.status == want.status == 200 and gt == wt
        assert without_job(gh) == without_job(wh)


def test_unknown_model_and_versions(start_daemon, sock_dir):
    d = start(start_daemon, sock_dir, *DIRECT)
    a = np.ones((40, 40), np.float32)
    body, hl = ks_body([("a", a), ("b", a)])
    assert post(d, "/v2/models/nope/infer", body, "application/octet-stream", {HL: str(hl)}).status == 404
    assert post(d, "/v2/models/gemm/versions/2/infer", body, "application/octet-stream", {HL: str(hl)}).status == 404
    ans = post(d, "/v2/models/gemm/versions/1/infer", body, "application/octet-stream", {HL: str(hl)})
    assert ans.status == 200


def test_keep_alive_and_a_client_gone_mid_tensor(start_daemon, sock_dir):
    d = start(start_daemon, sock_dir, *DIRECT)
    g = rng(36)
    a, b = g.uniform(-1, 1, (120, 90)).astype(np.float32), g.uniform(-1, 1, (90, 70)).astype(np.float32)
    body, hl = ks_body([("a", a), ("b", b)], outputs=["c"])
    req = request_bytes("/v2/models/gemm/infer", body, "application/octet-stream", {HL: str(hl)})
    with connect(d) as s:  # three requests, one connection
        buf = b""
        for _ in range(3):
            s.sendall(req)
            ans, buf = read_answer(s, buf)
            assert ans.status == 200 and not ans.closed
    for cut in (len(req) - len(body) + hl // 2, len(req) - 5):
        with connect(d) as s:
            s.sendall(req[:cut])
    assert d.log_lines_with("POST /v2/models/gemm/infer 499", timeout=10 * SLOW)
    assert infer(d, "gemm", body, hl).status == 200
