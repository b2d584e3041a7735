"""X-Request-Id (issue 16): the client's id when valid, else one made for it (a UUIDv4); echoed
on every answer, errors and early refusals included; kept in async jobs; on the access log line
of its request in both log formats, whose level follows the outcome (info 2xx/3xx, warn 4xx,
error 5xx). An invalid id is a 400 naming the header, and nothing else is affected."""

import json

import pytest

from conftest import DELAY_HEADER, UUID_RE, assert_error, raw_exchange

RID = "X-Request-Id"



@pytest.mark.parametrize("method,path,body,status", [
    ("POST", "/v1/histogram", {"data": [1, 2]}, 200),
    ("GET", "/healthz", None, 200),
    ("GET", "/metrics", None, 200),
    ("GET", "/nowhere", None, 404),
    ("PUT", "/v1/gemm", None, 405),
    ("POST", "/v1/gemm", {"a": [[1]]}, 400),
    ("POST", "/v1/gemm", {"a": [[1, 2]], "b": [[1, 2]]}, 422),
    ("GET", "/v2/models/nope", None, 404),
    ("POST", "/v2/models/gemm/infer", {"inputs": []}, 400),
])
def test_client_id_is_echoed(daemon, method, path, body, status):
    rid = f"client-{status}-{method}.x:1"
    r = daemon.request(method, path, json=body, headers={RID: rid})
    assert r.status_code == status, r.text
    assert r.headers.get(RID) == rid, r.headers


def test_made_when_absent_and_distinct(daemon):
    ids = {daemon.get("/healthz").headers[RID] for _ in range(5)}
    assert len(ids) == 5 and all(UUID_RE.match(i) for i in ids), ids


def test_early_refusals_carry_it(daemon):
    r = daemon.post("/v1/gemm", data=b"{}", headers={"Content-Type": "text/csv", RID: "early-415"})
    assert r.status_code == 415 and r.headers[RID] == "early-415"
    r = daemon.post("/v1/gemm", data=b"x" * 10, headers={"Content-Type": "application/json",
                                                          "Content-Encoding": "br", RID: "early-enc"})
    assert r.status_code == 415 and r.headers[RID] == "early-enc"


def test_unauthorized_carries_it(start_daemon, tmp_path):
    tok = tmp_path / "token"
    tok.write_text("s3cret\n")
    tok.chmod(0o600)
    d = start_daemon("--auth-token-file", str(tok))
    r = d.get("/v1/info", headers={RID: "no-token"})
    assert r.status_code == 401 and r.headers[RID] == "no-token"


@pytest.mark.parametrize("bad", ["has space", "a" * 129, "semi;colon", "quote\"d", "slash/ed", "ünï"])
def test_invalid_id_is_400(daemon, bad):
    r = daemon.get("/healthz", headers={RID: bad.encode("utf-8")})
    e = assert_error(r, 400, "invalid_parameter", RID)
    assert "X-Request-Id" in e["message"]
    assert UUID_RE.match(r.headers[RID]), r.headers  # one made for the refusal, never the bad one
    assert daemon.get("/healthz").status_code == 200


def test_control_characters_are_400(daemon):
    """Sent raw: HTTP clients refuse to put these in a header themselves."""
    for ctl in (b"\x01", b"\x7f", b"\x1b[31m"):
        req = (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: abc" + ctl +
               b"def\r\nConnection: close\r\n\r\n")
        out = raw_exchange(daemon.port, req, timeout=10)
        head, _, body = out.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400"), out[:300]
        assert json.loads(body)["error"]["field"] == RID, body
        assert ctl not in head


def test_kept_in_async_jobs(daemon):
    r = daemon.post("/v1/jobs", {"op": "histogram", "data": [1, 1]}, headers={RID: "job-abc.1"})
    assert r.status_code == 202 and r.headers[RID] == "job-abc.1"
    jid = r.json()["id"]
    j, _ = daemon.wait_job(jid)
    assert j["request_id"] == "job-abc.1", j
    # the poll is a request of its own, with its own id
    r = daemon.get(f"/v1/jobs/{jid}", headers={RID: "poll-1"})
    assert r.headers[RID] == "poll-1" and r.json()["request_id"] == "job-abc.1"


def test_binary_job_keeps_it(daemon):
    import io
    import numpy as np
    buf = io.BytesIO()
    np.save(buf, np.ones((4, 3), np.float32))
    r = daemon.post("/v1/jobs?op=ata", data=buf.getvalue(),
                    headers={"Content-Type": "application/x-npy", RID: "npy-job"})
    assert r.status_code == 202, r.text
    j, _ = daemon.wait_job(r.json()["id"])
    assert j["request_id"] == "npy-job" and j["status"] == "done", j


def test_text_log_has_id_and_level(daemon):
    daemon.post("/v1/histogram", {"data": [1]}, headers={RID: "log-ok-1"})
    daemon.get("/nowhere", headers={RID: "log-404-1"})
    r = daemon.post("/v1/histogram", {"data": [1]}, delay_ms=2000,
                    headers={RID: "log-504-1", "X-Crunchd-Timeout-Ms": "50"})
    assert r.status_code == 504, r.text
    for rid, level, status in (("log-ok-1", "info", "200"), ("log-404-1", "warn", "404"),
                               ("log-504-1", "error", "504")):
        (line,) = daemon.log_lines_with(f"rid={rid}")
        parts = line.split()
        assert parts[1] == level and status in parts, line


def test_json_log_has_id_and_level(start_daemon):
    d = start_daemon("--log-format", "json", "--test-hooks")
    d.post("/v1/gemm", {"a": [[1]], "b": [[2]]}, headers={RID: "json-ok"})
    d.post("/v1/gemm", {"a": [[1]]}, headers={RID: "json-400"})
    d.post("/v1/gemm", {"a": [[1]], "b": [[2]]}, delay_ms=2000,
           headers={RID: "json-504", "X-Crunchd-Timeout-Ms": "50"})
    d.get("/healthz", headers={RID: "bad id"})
    for rid, level, status in (("json-ok", "info", 200), ("json-400", "warn", 400),
                               ("json-504", "error", 504)):
        (line,) = d.log_lines_with(f'"request_id":"{rid}"')
        rec = json.loads(line)
        assert rec["level"] == level and rec["status"] == status and rec["request_id"] == rid, rec
    (line,) = d.log_lines_with('"error":"invalid_parameter"')
    rec = json.loads(line)
    assert UUID_RE.match(rec["request_id"]) and rec["level"] == "warn", rec
    assert "bad id" not in d.log_text()


@pytest.mark.parametrize("mode", ["errors", "off"])
def test_access_log_modes(start_daemon, mode):
    """--access-log errors keeps 4xx/5xx lines only, off keeps none; lifecycle lines stay."""
    d = start_daemon("--access-log", mode)
    d.post("/v1/histogram", {"data": [1]}, headers={RID: f"acc-{mode}-ok"})
    d.get("/nowhere", headers={RID: f"acc-{mode}-404"})
    d.stop()  # every request's line, if any, is written by the time it has exited
    text = d.log_text()
    assert f"rid=acc-{mode}-ok" not in text
    assert (f"rid=acc-{mode}-404" in text) == (mode == "errors"), text[-2000:]
    assert "rid=" in text or mode == "off"
    assert "listening" in text, text[-2000:]
