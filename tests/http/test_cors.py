"""CORS (issue 16): off by default (OPTIONS stays 405 with Allow, no Access-Control-* headers);
--cors-origin names the origins a browser may call from (repeatable, comma lists, "*"): their
answers echo the origin with Vary: Origin and expose our headers; preflights are answered 204
(before authentication: browsers send no token there) or 403 for an origin not allowed."""

import subprocess

import pytest

from conftest import BIN, Daemon, assert_error

APP = "https://app.example"
DEV = "http://localhost:3000"
EVIL = "https://evil.example"


def preflight(d, path, origin, method="POST", headers="content-type"):
    return d.request("OPTIONS", path, headers={"Origin": origin, "Access-Control-Request-Method": method,
                                               "Access-Control-Request-Headers": headers})


@pytest.fixture(scope="module")
def cors(tmp_path_factory):
    wd = tmp_path_factory.mktemp("cors")
    tok = wd / "token"
    tok.write_text("s3cret\n")
    tok.chmod(0o600)
    d = Daemon(["--cors-origin", APP, "--cors-origin", DEV + "/", "--auth-token-file", str(tok)],
               name="cors", workdir=wd).start()
    d.session.headers["Authorization"] = "Bearer s3cret"
    yield d
    d.stop()


def test_off_by_default(daemon):
    r = daemon.request("OPTIONS", "/v1/gemm", headers={"Origin": APP, "Access-Control-Request-Method": "POST"})
    assert_error(r, 405, "method_not_allowed")
    assert "POST" in r.headers["Allow"]
    r = daemon.get("/healthz", headers={"Origin": APP})
    assert not any(h.lower().startswith("access-control-") for h in r.headers), r.headers
    assert "Origin" not in r.headers.get("Vary", "")


@pytest.mark.parametrize("origin", [APP, DEV])
def test_preflight_allowed(cors, origin):
    r = preflight(cors, "/v1/gemm", origin)
    assert r.status_code == 204, r.text
    assert r.content == b""
    assert r.headers["Access-Control-Allow-Origin"] == origin
    assert r.headers["Access-Control-Allow-Methods"] == "POST"
    allowed = {h.strip().lower() for h in r.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"content-type", "authorization", "x-request-id", "content-encoding"} <= allowed
    assert int(r.headers["Access-Control-Max-Age"]) > 0
    assert "Origin" in r.headers["Vary"]


def test_preflight_needs_no_token(cors):
    r = cors.request("OPTIONS", "/v1/jobs/abc", headers={"Origin": APP, "Access-Control-Request-Method": "DELETE",
                                                         "Authorization": ""})
    assert r.status_code == 204, r.text
    assert set(m.strip() for m in r.headers["Access-Control-Allow-Methods"].split(",")) == {"GET", "HEAD", "DELETE"}


def test_preflight_from_a_disallowed_origin_is_403(cors):
    r = preflight(cors, "/v1/gemm", EVIL)
    e = assert_error(r, 403, "origin_not_allowed", "Origin")
    assert EVIL in e["message"]
    assert "Access-Control-Allow-Origin" not in r.headers
    assert cors.get("/healthz").status_code == 200  # nothing else affected


def test_preflight_of_an_unknown_path_is_404(cors):
    assert_error(preflight(cors, "/v1/nothing", APP), 404, "not_found")


def test_answers_to_an_allowed_origin(cors):
    r = cors.post("/v1/histogram", {"data": [1, 2]}, headers={"Origin": APP, "X-Request-Id": "cors-1"})
    assert r.status_code == 200, r.text
    assert r.headers["Access-Control-Allow-Origin"] == APP
    exposed = {h.strip() for h in r.headers["Access-Control-Expose-Headers"].split(",")}
    assert {"Server-Timing", "X-Request-Id", "X-Crunchd-Job-Id", "X-Crunchd-Kernel"} <= exposed
    assert "Origin" in r.headers["Vary"]


def test_errors_are_readable_cross_origin(cors):
    """A browser script sees why it failed: 401 and 404 carry the CORS headers too."""
    r = cors.get("/v1/info", headers={"Origin": APP, "Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.headers["Access-Control-Allow-Origin"] == APP
    r = cors.get("/v1/nope", headers={"Origin": DEV})
    assert r.status_code == 404 and r.headers["Access-Control-Allow-Origin"] == DEV


def test_disallowed_origin_gets_no_grant(cors):
    r = cors.post("/v1/histogram", {"data": [1]}, headers={"Origin": EVIL})
    assert r.status_code == 200  # served (curl is no browser); the browser withholds it
    assert "Access-Control-Allow-Origin" not in r.headers and "Origin" in r.headers["Vary"]


def test_options_without_preflight_headers_stays_405(cors):
    r = cors.request("OPTIONS", "/v1/gemm")
    assert_error(r, 405, "method_not_allowed")


def test_star_and_comma_list_from_the_environment(start_daemon):
    d = start_daemon(env={"CRUNCHD_CORS_ORIGIN": "*"})
    for o in (APP, EVIL, "null"):
        r = preflight(d, "/v2/models/gemm/infer", o)
        assert r.status_code == 204 and r.headers["Access-Control-Allow-Origin"] == o, r.headers
    d2 = start_daemon(env={"CRUNCHD_CORS_ORIGIN": f"{APP}, {DEV}"})
    assert preflight(d2, "/metrics", DEV, "GET").status_code == 204
    assert preflight(d2, "/metrics", EVIL, "GET").status_code == 403


def test_flag_replaces_the_environment(start_daemon):
    d = start_daemon("--cors-origin", DEV, env={"CRUNCHD_CORS_ORIGIN": APP})
    assert preflight(d, "/v1/ata", DEV).status_code == 204
    assert preflight(d, "/v1/ata", APP).status_code == 403


@pytest.mark.parametrize("bad", ["app.example", "https://app.example/path", "ftp://x"])
def test_bad_origin_refuses_to_start(bad):
    p = subprocess.run([BIN, "--cors-origin", bad, "--port", "0", "--backend", "cpu"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--cors-origin" in p.stderr, (p.returncode, p.stderr)
