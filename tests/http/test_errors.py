"""Malformed and invalid requests: each gets the status and error code of server/error.h, with the
offending field named, and none of them hurts the daemon (checked at the end of the module)."""

import json
import socket
import time

import numpy as np
import pytest

from conftest import assert_error, mat_json, new_uuid

A23 = {"rows": 2, "cols": 3, "data": [1, 2, 3, 4, 5, 6]}
B32 = [[1, 0], [0, 1], [1, 1]]
GEMM = {"a": A23, "b": B32}


def gemm(**kw):
    body = {"a": A23, "b": B32}
    for k, v in kw.items():
        if v is DROP:
            body.pop(k, None)
        else:
            body[k] = v
    return body


DROP = object()

# (id, path, raw body or JSON object, status, code, field, field_prefix)
CASES = [
    # -- not JSON / not an object
    ("bad-json", "/v1/gemm", b"{not json", 400, "invalid_json", None, None),
    ("truncated-json", "/v1/gemm", b'{"a": [[1, 2]], "b": [[1', 400, "invalid_json", None, None),
    ("empty-body", "/v1/gemm", b"", 400, "invalid_json", None, None),
    ("json-array", "/v1/gemm", b"[1, 2, 3]", 400, "invalid_json", None, None),
    ("json-string", "/v1/ata", b'"hello"', 400, "invalid_json", None, None),
    ("json-null", "/v1/histogram", b"null", 400, "invalid_json", None, None),
    ("nan-literal", "/v1/gemm", b'{"a": [[NaN]], "b": [[1]]}', 400, "invalid_json", None, None),
    ("trailing-garbage", "/v1/gemm", json.dumps(GEMM).encode() + b" }", 400, "invalid_json",
     None, None),
    # -- missing fields
    ("gemm-missing-a", "/v1/gemm", gemm(a=DROP), 400, "missing_field", "a", None),
    ("gemm-missing-b", "/v1/gemm", gemm(b=DROP), 400, "missing_field", "b", None),
    ("gemm-missing-rows", "/v1/gemm", gemm(a={"cols": 3, "data": [1, 2, 3]}), 400,
     "missing_field", "a.rows", None),
    ("gemm-missing-data", "/v1/gemm", gemm(a={"rows": 1, "cols": 3}), 400, "missing_field",
     "a.data", None),
    ("ata-missing-a", "/v1/ata", {"dtype": "float32"}, 400, "missing_field", "a", None),
    ("hist-missing-data", "/v1/histogram", {"bins": 4}, 400, "missing_field", "data", None),
    ("jobs-missing-op", "/v1/jobs", gemm(), 400, "missing_field", "op", None),
    ("jobs-missing-b", "/v1/jobs", dict(gemm(b=DROP), op="gemm"), 400, "missing_field", "b",
     None),
    # -- wrong types
    ("a-string", "/v1/gemm", gemm(a="matrix"), 400, "invalid_field", "a", None),
    ("a-number", "/v1/gemm", gemm(a=3), 400, "invalid_field", "a", None),
    ("a-1d-list-of-the-wrong-length", "/v1/gemm", gemm(a=[1, 2]), 422, "shape_mismatch", "b", None),  # a vector
    ("a-ragged-stack", "/v1/gemm", gemm(a=[[[1, 2, 3]], [[1, 2]]]), 400, "invalid_field", "a", None),
    ("a-rank-9", "/v1/gemm", gemm(a={"shape": [1] * 9, "data": [1]}), 400, "invalid_field", "a.shape", None),
    ("a-stacks-that-do-not-broadcast", "/v1/gemm", gemm(a={"shape": [2, 2, 3], "data": [1] * 12},
                                                      b={"shape": [3, 3, 2], "data": [1] * 18}),
     422, "shape_mismatch", "b", None),
    ("c-that-does-not-broadcast", "/v1/gemm", gemm(c=[1, 2, 3]), 422, "shape_mismatch", "c", None),
    ("ata-a-vector", "/v1/ata", {"a": [1, 2, 3]}, 400, "invalid_field", "a", None),
    ("rows-string", "/v1/gemm", gemm(a={"rows": "2", "cols": 3, "data": [1] * 6}), 400,
     "invalid_field", "a.rows", None),
    ("data-string-elem", "/v1/gemm", gemm(a={"rows": 2, "cols": 3, "data": [1, "x", 3, 4, 5, 6]}),
     400, "invalid_field", None, "a.data"),
    ("data-null-elem", "/v1/gemm", gemm(b=[[1, 0], [0, None], [1, 1]]), 400, "invalid_field",
     None, "b"),
    ("data-bool-elem", "/v1/gemm", gemm(b=[[1, 0], [0, True], [1, 1]]), 400, "invalid_field",
     None, "b"),
    ("nested-list-elem", "/v1/gemm", gemm(b=[[1, 0], [0, [1]], [1, 1]]), 400, "invalid_field",
     None, "b"),
    ("matrix-unknown-key", "/v1/gemm", gemm(a=dict(A23, order="C")), 400, "invalid_field", None,
     "a"),
    ("alpha-string", "/v1/gemm", gemm(alpha="2"), 400, "invalid_field", "alpha", None),
    ("beta-list", "/v1/gemm", gemm(beta=[1]), 400, "invalid_field", "beta", None),
    ("trans-a-string", "/v1/gemm", gemm(trans_a="yes"), 400, "invalid_field", "trans_a", None),
    ("trans-b-int", "/v1/gemm", gemm(trans_b=1), 400, "invalid_field", "trans_b", None),
    ("kernel-number", "/v1/gemm", gemm(kernel=5), 400, "invalid_field", "kernel", None),
    ("dtype-number", "/v1/gemm", gemm(dtype=32), 400, "invalid_field", "dtype", None),
    ("timeout-string", "/v1/gemm", gemm(timeout_ms="soon"), 400, "invalid_field", "timeout_ms",
     None),
    ("timeout-negative", "/v1/gemm", gemm(timeout_ms=-5), 400, "invalid_field", "timeout_ms",
     None),
    ("op-number", "/v1/jobs", dict(gemm(), op=1), 400, "invalid_field", "op", None),
    ("op-unknown", "/v1/jobs", dict(gemm(), op="fft"), 400, "invalid_field", "op", None),
    ("hist-data-string", "/v1/histogram", {"data": "0123"}, 400, "invalid_field", "data", None),
    ("hist-data-object", "/v1/histogram", {"data": {"x": 1}}, 400, "invalid_field", "data", None),
    # -- ragged / empty
    ("ragged-rows", "/v1/gemm", gemm(a=[[1, 2, 3], [4, 5]]), 400, "invalid_field", None, "a"),
    ("ragged-ata", "/v1/ata", {"a": [[1], [2, 3]]}, 400, "invalid_field", None, "a"),
    ("empty-matrix", "/v1/gemm", gemm(a=[]), 400, "invalid_field", None, "a"),
    ("empty-row", "/v1/ata", {"a": [[]]}, 400, "invalid_field", None, "a"),
    ("data-length-mismatch", "/v1/gemm", gemm(a={"rows": 2, "cols": 3, "data": [1, 2, 3, 4, 5]}),
     400, "invalid_field", "a.data", None),
    ("data-length-too-long", "/v1/ata", {"a": {"rows": 1, "cols": 1, "data": [1, 2]}}, 400,
     "invalid_field", "a.data", None),
    # -- declared sizes
    ("rows-zero", "/v1/gemm", gemm(a={"rows": 0, "cols": 3, "data": []}), 400, "invalid_field",
     "a.rows", None),
    ("rows-negative", "/v1/gemm", gemm(a={"rows": -2, "cols": 3, "data": [1] * 6}), 400,
     "invalid_field", "a.rows", None),
    ("cols-fractional", "/v1/gemm", gemm(a={"rows": 2, "cols": 2.5, "data": [1] * 5}), 400,
     "invalid_field", "a.cols", None),
    ("rows-huge", "/v1/gemm", gemm(a={"rows": 100000000, "cols": 100000000, "data": [1]}), 413,
     "too_large", None, "a"),
    ("rows-overflow-2^32", "/v1/ata", {"a": {"rows": 2 ** 32, "cols": 2 ** 32, "data": [1]}}, 413,
     "too_large", None, "a"),
    ("rows-1e300", "/v1/ata", {"a": {"rows": 1e300, "cols": 1, "data": [1]}}, 413, "too_large",
     None, "a"),
    ("bins-zero", "/v1/histogram", {"data": [1.0], "dtype": "float64", "bins": 0}, 400,
     "invalid_field", "bins", None),
    ("bins-negative", "/v1/histogram", {"data": [1.0], "dtype": "float64", "bins": -3}, 400,
     "invalid_field", "bins", None),
    ("bins-fractional", "/v1/histogram", {"data": [1.0], "dtype": "float64", "bins": 2.5}, 400,
     "invalid_field", "bins", None),
    ("bins-huge", "/v1/histogram", {"data": [1.0], "dtype": "float64", "bins": 2 ** 40}, 413,
     "too_large", "bins", None),
    # -- non-finite numbers (JSON has no NaN; 1e999 parses as infinity)
    ("inf-in-data", "/v1/gemm", b'{"a": {"rows": 1, "cols": 1, "data": [1e999]}, "b": [[1]]}', 400,
     "non_finite", None, "a.data"),
    ("neg-inf-nested", "/v1/gemm", b'{"a": [[1]], "b": [[-1e999]]}', 400, "non_finite", None, "b"),
    ("inf-alpha", "/v1/gemm", b'{"a": [[1]], "b": [[1]], "alpha": 1e999}', 400, "non_finite",
     "alpha", None),
    ("inf-beta", "/v1/gemm", b'{"a": [[1]], "b": [[1]], "beta": -1e999}', 400, "non_finite",
     "beta", None),
    ("inf-ata", "/v1/ata", b'{"a": [[1, 1e999]], "dtype": "float64"}', 400, "non_finite", None,
     "a"),
    ("inf-hist-data", "/v1/histogram", b'{"data": [0.5, 1e999], "dtype": "float32"}', 400,
     "non_finite", None, "data"),
    ("inf-hist-range", "/v1/histogram", b'{"data": [0.5], "dtype": "float64", "range": [0, 1e999]}',
     400, "non_finite", None, "range"),
    ("float32-overflow", "/v1/gemm", b'{"a": [[1e39]], "b": [[1]], "dtype": "float32"}', 400,
     "non_finite", None, "a"),
    # -- shapes that do not conform
    ("shape-mismatch", "/v1/gemm", gemm(b=[[1, 2], [3, 4]]), 422, "shape_mismatch", "b", None),
    ("shape-mismatch-trans", "/v1/gemm", gemm(trans_b=True), 422, "shape_mismatch", "b", None),
    ("shape-mismatch-c", "/v1/gemm", gemm(c=[[1, 2, 3], [4, 5, 6]]), 422, "shape_mismatch", "c",
     None),
    ("shape-mismatch-jobs", "/v1/jobs", dict(gemm(b=[[1]]), op="gemm"), 422, "shape_mismatch",
     "b", None),
    # -- kernels, dtypes, precision
    ("unknown-kernel", "/v1/gemm", gemm(kernel="nope"), 400, "unknown_kernel", "kernel", None),
    ("unknown-kernel-ata", "/v1/ata", {"a": [[1]], "kernel": "fastest"}, 400, "unknown_kernel",
     "kernel", None),
    ("unknown-kernel-hist", "/v1/histogram", {"data": [1], "kernel": "magic"}, 400,
     "unknown_kernel", "kernel", None),
    ("bad-dtype", "/v1/gemm", gemm(dtype="float16x"), 400, "invalid_field", "dtype", None),
    ("bad-dtype-case", "/v1/ata", {"a": [[1]], "dtype": "FLOAT32"}, 400, "invalid_field",
     "dtype", None),
    ("bad-hist-dtype", "/v1/histogram", {"data": [1], "dtype": "complex64"}, 400, "invalid_field",
     "dtype", None),
    ("bad-precision", "/v1/gemm", gemm(precision="fp16"), 400, "invalid_field", "precision",
     None),
    ("tf32-float64", "/v1/gemm", gemm(dtype="float64", precision="tf32"), 400, "unsupported",
     "precision", None),
    # -- histogram values and parameters
    ("uint8-256", "/v1/histogram", {"data": [0, 256]}, 400, "invalid_field", None, "data"),
    ("uint8-negative", "/v1/histogram", {"data": [-1, 3]}, 400, "invalid_field", None, "data"),
    ("uint8-fractional", "/v1/histogram", {"data": [1.5]}, 400, "invalid_field", None, "data"),
    ("range-reversed", "/v1/histogram", {"data": [0.5], "dtype": "float64", "range": [1, 0]}, 400,
     "invalid_field", "range", None),
    ("range-one-item", "/v1/histogram", {"data": [0.5], "dtype": "float64", "range": [0]}, 400,
     "invalid_field", "range", None),
    ("range-string", "/v1/histogram", {"data": [0.5], "dtype": "float64", "range": ["a", 1]},
     400, "invalid_field", None, "range"),
    # -- unknown fields are refused, named
    ("unknown-field", "/v1/gemm", gemm(foo=1), 400, "invalid_field", "foo", None),
    ("unknown-field-ata-b", "/v1/ata", {"a": [[1]], "b": [[1]]}, 400, "invalid_field", "b", None),
    ("unknown-field-hist", "/v1/histogram", {"data": [1], "normed": True}, 400, "invalid_field",
     "normed", None),
    ("gemm-field-on-ata-job", "/v1/jobs", {"op": "ata", "a": [[1]], "alpha": 2}, 400,
     "invalid_field", "alpha", None),
]


@pytest.mark.parametrize("path,body,status,code,field,prefix",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_request(daemon, path, body, status, code, field, prefix):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    t0 = time.monotonic()
    r = daemon.post(path, data=data, headers={"Content-Type": "application/json"})
    assert_error(r, status, code, field=field, field_prefix=prefix)
    if status == 413:
        assert time.monotonic() - t0 < 5, "declared sizes must be refused before allocating"


def test_error_case_count():
    assert len(CASES) >= 40


# -- routing, methods, media types --------------------------------------------------------------

@pytest.mark.parametrize("method,path,allowed", [
    ("GET", "/v1/gemm", {"POST"}),
    ("PATCH", "/v1/ata", {"POST", "PUT"}),
    ("DELETE", "/v1/histogram", {"POST", "PUT"}),
    ("GET", "/v1/jobs", {"POST"}),
    ("POST", "/healthz", {"GET"}),
    ("DELETE", "/readyz", {"GET"}),
    ("POST", "/metrics", {"GET"}),
    ("PUT", "/v1/info", {"GET"}),
    ("POST", "/v1/kernels", {"GET"}),
])
def test_wrong_method_405(daemon, method, path, allowed):
    r = daemon.request(method, path, data=b"{}", headers={"Content-Type": "application/json"})
    assert_error(r, 405, "method_not_allowed")
    allow = {m.strip().upper() for m in r.headers["Allow"].split(",")}
    assert allowed <= allow <= allowed | {"HEAD", "OPTIONS"}, r.headers["Allow"]


def test_wrong_method_on_job_405(daemon):
    r = daemon.post("/v1/jobs", {"op": "histogram", "data": [1]})
    assert r.status_code == 202, r.text
    jid = r.json()["id"]
    r = daemon.request("PUT", f"/v1/jobs/{jid}", data=b"{}")
    assert_error(r, 405, "method_not_allowed")
    allow = {m.strip().upper() for m in r.headers["Allow"].split(",")}
    assert {"GET", "DELETE"} <= allow, allow
    r = daemon.request("POST", f"/v1/jobs/{jid}/result", data=b"{}")
    assert_error(r, 405, "method_not_allowed")
    assert "GET" in r.headers["Allow"]


@pytest.mark.parametrize("ctype", ["text/plain", "application/xml", "image/png"])
def test_wrong_content_type_415(daemon, ctype):
    r = daemon.post("/v1/gemm", data=json.dumps(GEMM).encode(), headers={"Content-Type": ctype})
    assert_error(r, 415, "unsupported_media_type")


def test_json_with_charset_is_json(daemon):
    r = daemon.post("/v1/gemm", data=json.dumps(GEMM).encode(),
                    headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("path", ["/v1", "/v1/", "/v1/gemm/extra", "/v1/GEMM", "/ui", "/ui/x.js",
                                  "/v1/jobs/x/y/z", "/admin", "/metrics/x", "/healthz/"])
def test_unknown_route_404(daemon, path):
    assert_error(daemon.get(path), 404, "not_found")


def test_root_for_a_json_client_is_still_404(daemon):
    """/ is the page for a browser (test_ui.py); a client asking for JSON gets what it always got."""
    assert_error(daemon.get("/", headers={"Accept": "application/json"}), 404, "not_found")


def test_unknown_v2_route_404_in_the_v2_shape(daemon):
    r = daemon.get("/v2/gemm")  # under /v2 tritonclient reads {"error": "message"}
    assert r.status_code == 404 and isinstance(r.json()["error"], str)


@pytest.mark.parametrize("path", ["/v1/nope", "/v1/fft"])
def test_unknown_route_post_404(daemon, path):
    assert_error(daemon.post(path, GEMM), 404, "not_found")


# -- size limits (a daemon of its own with small limits) -----------------------------------------

@pytest.fixture(scope="module")
def small_limits(tmp_path_factory):
    from conftest import Daemon
    d = Daemon(["--max-json-mb", "1", "--max-body-mb", "2", "--workers", "1"], name="limits",
               workdir=tmp_path_factory.mktemp("limits"))
    d.start()
    yield d
    d.stop()


def big_json(nbytes):
    n = nbytes // 4 + 1
    return json.dumps({"data": [1] * n}).encode()  # "1, " per element


def test_json_over_max_json_413(small_limits):
    data = big_json(3 * 1024 * 1024 // 2)  # 1.5 MB: under the body limit, over the JSON one
    assert 1024 * 1024 < len(data) < 2 * 1024 * 1024
    r = small_limits.post("/v1/histogram", data=data, headers={"Content-Type": "application/json"})
    assert_error(r, 413, "too_large")


def test_json_under_max_json_ok(small_limits):
    data = big_json(900 * 1024)
    assert len(data) < 1024 * 1024
    r = small_limits.post("/v1/histogram", data=data, headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text[:300]
    assert r.json()["result"]["counts"][1] == len(json.loads(data)["data"])


def raw_request(port, head, body=b"", read_timeout=10.0):
    """Sends head (and body, tolerating a server that answers and closes early); returns
    (status, headers dict, body bytes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
    try:
        s.sendall(head)
        try:
            if body:
                s.sendall(body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        chunks = []
        while True:
            try:
                c = s.recv(65536)
            except ConnectionResetError:
                break
            if not c:
                break
            chunks.append(c)
            raw = b"".join(chunks)
            if b"\r\n\r\n" in raw:
                hdr, _, rest = raw.partition(b"\r\n\r\n")
                lines = hdr.decode("latin-1").split("\r\n")
                headers = {}
                for ln in lines[1:]:
                    k, _, v = ln.partition(":")
                    headers[k.strip().lower()] = v.strip()
                status = int(lines[0].split()[1])
                if status == 100:
                    chunks = [rest]
                    continue
                cl = int(headers.get("content-length", "-1"))
                if cl >= 0 and len(rest) >= cl:
                    return status, headers, rest[:cl]
        raw = b"".join(chunks)
        assert raw, "no response at all"
        hdr, _, rest = raw.partition(b"\r\n\r\n")
        lines = hdr.decode("latin-1").split("\r\n")
        headers = {ln.partition(":")[0].strip().lower(): ln.partition(":")[2].strip()
                   for ln in lines[1:]}
        return int(lines[0].split()[1]), headers, rest
    finally:
        s.close()


def test_declared_body_over_max_body_413_without_sending_it(small_limits):
    """Content-Length of 10 GB with Expect: 100-continue: refused before any byte is sent."""
    head = (b"POST /v1/histogram HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 10000000000\r\nExpect: 100-continue\r\n\r\n")
    t0 = time.monotonic()
    status, headers, body = raw_request(small_limits.port, head)
    assert status == 413, (status, body[:300])
    assert json.loads(body)["error"]["code"] == "too_large"
    assert time.monotonic() - t0 < 5


def test_body_over_max_body_413(small_limits):
    data = big_json(3 * 1024 * 1024)
    head = (b"POST /v1/histogram HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(data))
    status, headers, body = raw_request(small_limits.port, head, data)
    assert status == 413, (status, body[:300])
    assert json.loads(body)["error"]["code"] == "too_large"


def test_limits_daemon_still_healthy(small_limits):
    assert small_limits.get("/healthz").status_code == 200
    r = small_limits.post("/v1/gemm", GEMM)
    assert r.status_code == 200, r.text


# -- after all of that ---------------------------------------------------------------------------

def test_daemon_survived_all_errors(daemon):
    r = daemon.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    assert daemon.get("/readyz").status_code == 200
    a = np.arange(6.0).reshape(2, 3)
    b = np.arange(12.0).reshape(3, 4)
    r = daemon.post("/v1/gemm", {"a": mat_json(a), "b": mat_json(b, "nested"),
                                 "dtype": "float64"})
    assert r.status_code == 200, r.text
    assert np.asarray(r.json()["result"]["data"]).reshape(2, 4).tolist() == (a @ b).tolist()
    assert daemon.proc.poll() is None
    daemon.check_log()
