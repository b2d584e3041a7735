"""The page at GET / (issue 39) over plain HTTP: its three files with a strict Content-Security-
Policy and no inline script or style, JSON clients still get /'s 404, --no-ui turns it all off,
the page's files need no token while everything it calls does, /v1/info's clocks and peaks (on
cuda), and "output": {"discard": true}, which the page's comparisons use. The browser test is
test_ui_browser.py."""

import re

import pytest

from conftest import BACKEND, ROOT, assert_error

TOKEN = "ui-test-token-3d1f"
PAGE_FILES = {"/": "text/html", "/ui/app.js": "text/javascript", "/ui/app.css": "text/css"}


def token_file(tmp_path):
    p = tmp_path / "token"
    p.write_text(TOKEN + "\n")
    p.chmod(0o600)
    return str(p)


@pytest.mark.parametrize("path,ctype", PAGE_FILES.items())
def test_page_files_are_served_as_built(daemon, path, ctype):
    r = daemon.get(path, headers={"Accept": "text/html"} if path == "/" else {})
    assert r.status_code == 200, r.text[:300]
    assert r.headers["Content-Type"].startswith(ctype), r.headers
    csp = r.headers["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "'unsafe-inline'" not in csp, csp
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    source = {"/": "index.html", "/ui/app.js": "app.js", "/ui/app.css": "app.css"}[path]
    assert r.content == (ROOT / "server" / "ui" / source).read_bytes()


def test_the_html_has_no_inline_script_or_style_and_no_other_origin(daemon):
    html = daemon.get("/").text
    assert re.findall(r"<script[^>]*>", html) == ['<script src="/ui/app.js" defer>'], html
    tags = re.findall(r"<[^>]+>", html)
    assert "<style" not in html and not [t for t in tags if re.search(r"\s(style|on[a-z]+)=", t)], "inline style or handler"
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "the page loads nothing from elsewhere"
    js = daemon.get("/ui/app.js").text
    assert "http://" not in js.replace("http://www.w3.org/2000/svg", "") and "https://" not in js
    assert "eval(" not in js and "innerHTML" not in js  # the policy would refuse eval; text goes in as text


def test_json_clients_keep_the_old_answer(daemon):
    assert_error(daemon.get("/", headers={"Accept": "application/json"}), 404, "not_found")
    assert daemon.get("/", headers={"Accept": "text/html,application/json;q=0.9"}).status_code == 200
    assert daemon.get("/", headers={"Accept": "*/*"}).status_code == 200  # curl's
    assert_error(daemon.post("/", {}), 405, "method_not_allowed")


def test_no_ui_turns_the_page_off(start_daemon):
    d = start_daemon("--no-ui")
    for path in PAGE_FILES:
        assert_error(d.get(path, headers={"Accept": "text/html"}), 404, "not_found")
    assert d.get("/v1/info").status_code == 200


def test_page_files_need_no_token_but_the_api_does(start_daemon, tmp_path):
    d = start_daemon("--auth-token-file", token_file(tmp_path), "--metrics-auth")
    for path in PAGE_FILES:
        assert d.get(path, headers={"Accept": "text/html"}).status_code == 200, path
    # a JSON client without the token is refused as before the page; and so is what the page calls
    assert d.get("/", headers={"Accept": "application/json"}).status_code == 401
    for path in ("/v1/info", "/v1/kernels", "/metrics"):
        assert d.get(path).status_code == 401, path
        assert d.get(path, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200, path
    assert d.post("/ui/app.js", {}).status_code == 401  # only GET and HEAD of the files are open


def test_info_has_clocks_and_peaks_where_the_backend_knows(info):
    for dev in info["devices"]:
        if BACKEND == "cuda":
            assert dev["sm_clock_mhz"] > 0 and dev["memory_clock_mhz"] > 0 and dev["memory_bus_bits"] > 0, dev
            p = dev["peaks"]
            assert p["fp32_gflops"] == pytest.approx(2 * 128 * dev["multiprocessors"] * dev["sm_clock_mhz"] / 1e3) \
                if dev.get("compute_capability") == "9.0" else p["fp32_gflops"] > 0
            assert p["memory_gbs"] == pytest.approx(dev["memory_clock_mhz"] * 2 * dev["memory_bus_bits"] / 8 / 1e3)
        else:
            assert "peaks" not in dev and "sm_clock_mhz" not in dev, dev


def test_output_discard_drops_the_result_and_keeps_the_table(daemon):
    body = {"a": {"random": {"shape": [64, 32], "seed": 1}}, "b": {"random": {"shape": [32, 48], "seed": 2}},
            "kernel": "all", "output": {"discard": True}}
    r = daemon.post("/v1/gemm", body, headers={"Accept": "application/x-npy"})  # JSON whatever the Accept
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json"), r.text[:300]
    a = r.json()
    assert a["result"] is None and len(a["kernels"]) >= 2 and a["gflops"] >= 0, a
    plain = daemon.post("/v1/gemm", dict(body, kernel="auto"))
    assert plain.status_code == 200 and plain.json()["result"] is None
    for bad in ({"discard": False}, {"discard": True, "shm": {"region": "r"}}, {"discard": 1}):
        assert_error(daemon.post("/v1/gemm", dict(body, output=bad)), 400, "invalid_field", field="output.discard")
    job = daemon.submit({"op": "histogram", "data": [1, 2, 3], "output": {"discard": True}})
    daemon.wait_job(job, states=("done",))
    assert daemon.get(f"/v1/jobs/{job}/result").json()["result"] is None
