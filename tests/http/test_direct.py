"""The direct path (server/http/direct.h), on the Unix socket and over TCP (every test runs on
both): binary uploads of at least --direct-min-kb are read by crunchd itself, straight into their
arrays, and answered without libmicrohttpd. Every test runs a daemon with a 1 KiB threshold so
that small bodies take the path, and checks crunchd_direct_requests_total{transport} to know which
path served. Answers are checked
against NumPy and, byte for byte, against the same requests served by libmicrohttpd (threshold
0): the transport must change nothing a client can see but the speed. Also: multipart framing
(preamble, padding, quoted boundary, epilogue, broken bodies), Expect: 100-continue, early
refusals, keep-alive, clients that hang up or trickle, auth, async jobs and a drain."""

import io
import json
import os
import re
import shutil
import signal
import socket
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from conftest import BACKEND, DELAY_HEADER, SLOW, assert_close, gemm_ref, rng

DIRECT = ["--direct-min-kb", "1"]
BOUNDARY = "dIrEcT-7c1e"


class Where:
    def __init__(self, transport, dir):
        self.transport, self.dir = transport, dir


@pytest.fixture(params=["unix", "tcp"])
def sock_dir(request):
    d = tempfile.mkdtemp(prefix="crunchd-dir-", dir="/tmp")  # sun_path holds 107 bytes
    yield Where(request.param, d)
    shutil.rmtree(d, ignore_errors=True)


def start(start_daemon, where, *flags, name="direct"):
    if where.transport == "unix":
        d = start_daemon("--unix-socket", os.path.join(where.dir, f"{name}.sock"), *flags, name=name)
    else:
        d = start_daemon(*flags, name=name)
    d.transport = where.transport
    return d


def connect(d, timeout=60):
    """A socket to d over the test's transport."""
    if d.transport == "tcp":
        return socket.create_connection(("127.0.0.1", d.port), timeout=timeout * SLOW)
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout * SLOW)
    s.connect(d.unix_path)
    return s


def direct_count(d, text=None):
    pattern = r'^crunchd_direct_requests_total\{transport="%s"\} (\d+)' % d.transport
    m = re.search(pattern, d.metrics_text() if text is None else text, re.M)
    assert m, "crunchd_direct_requests_total missing from /metrics"
    return int(m.group(1))


def npy(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def multipart(parts, boundary=BOUNDARY, preamble=b"", padding=b"", epilogue=b""):
    out = preamble
    for name, data in parts.items():
        out += (f"--{boundary}".encode() + padding + b"\r\n" +
                f'Content-Disposition: form-data; name="{name}"; filename="{name}.npy"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    return out + f"--{boundary}--".encode() + padding + b"\r\n" + epilogue


class Answer:
    def __init__(self, status, headers, body, closed):
        self.status, self.headers, self.body, self.closed = status, headers, body, closed

    def json(self):
        return json.loads(self.body)

    def npy(self):
        return np.load(io.BytesIO(self.body))


def read_answer(s, buf=b""):
    """One HTTP/1.1 answer with a Content-Length from s (1xx answers skipped); (Answer, bytes
    read past it)."""
    while True:
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            assert chunk, f"connection closed before an answer: {buf[:200]!r}"
            buf += chunk
        head, _, buf = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        if status >= 200:
            break
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers["content-length"])
    while len(buf) < n:
        chunk = s.recv(1 << 20)
        assert chunk, "connection closed inside an answer"
        buf += chunk
    return Answer(status, headers, buf[:n], headers.get("connection", "").lower() == "close"), buf[n:]


def request_bytes(target, body, ctype, headers=None):
    h = {"Host": "localhost", "Content-Type": ctype, "Content-Length": str(len(body))}
    h.update(headers or {})
    head = f"POST {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    return head.encode() + body


def post(d, target, body, ctype, headers=None):
    with connect(d) as s:
        try:
            s.sendall(request_bytes(target, body, ctype, headers))
        except (BrokenPipeError, ConnectionResetError):
            pass  # libmicrohttpd may answer an early refusal and close before the body is sent
        return read_answer(s)[0]


def gemm_parts(m=33, k=47, n=29, seed=1):
    g = rng(seed)
    return g.uniform(-1, 1, (m, k)).astype(np.float32), g.uniform(-1, 1, (k, n)).astype(np.float32)


def test_gemm_multipart_npy_and_json_answers(start_daemon, sock_dir):
    d = start(start_daemon, sock_dir, *DIRECT)
    a, b = gemm_parts()
    before = direct_count(d)
    r = post(d, "/v1/gemm", multipart({"a": npy(a), "b": npy(b)}), f"multipart/form-data; boundary={BOUNDARY}",
             {"Accept": "application/x-npy", "X-Request-Id": "direct-1"})
    assert r.status == 200, r.body
    assert_close(r.npy(), gemm_ref(a, b), 47, "float32")
    assert r.headers["x-request-id"] == "direct-1"
    assert r.headers["x-crunchd-op"] == "gemm" and r.headers["x-crunchd-dtype"] == "float32"
    assert "kernel;dur=" in r.headers["server-timing"] and r.headers["content-type"] == "application/x-npy"
    r = post(d, "/v1/gemm?alpha=2&beta=0", multipart({"a": npy(a), "b": npy(b)}),
             f"multipart/form-data; boundary={BOUNDARY}")
    assert r.status == 200, r.body
    body = r.json()
    assert body["op"] == "gemm" and body["backend"] == BACKEND, body
    got = np.asarray(body["result"]["data"], np.float32).reshape(33, 29)
    assert_close(got, gemm_ref(a, b, alpha=2.0), 47, "float32")
    assert direct_count(d) == before + 2


def test_transposes_and_a_fortran_ordered_c(start_daemon, sock_dir):
    """c in Fortran order is scattered into C order as it arrives: the path that is not read in
    place."""
    d = start(start_daemon, sock_dir, *DIRECT)
    g = rng(5)
    a = g.uniform(-1, 1, (40, 31)).astype(np.float64)
    b = g.uniform(-1, 1, (23, 40)).astype(np.float64)
    c = np.asfortranarray(g.uniform(-1, 1, (31, 23)))
    before = direct_count(d)
    r = post(d, "/v1/gemm?trans_a=true&trans_b=true&alpha=0.5&beta=-1.5",
             multipart({"a": npy(a), "b": npy(b), "c": npy(c)}), f"multipart/form-data; boundary={BOUNDARY}",
             {"Accept": "application/x-npy"})
    assert r.status == 200, r.body
    assert_close(r.npy(), gemm_ref(a, b, c, 0.5, -1.5, True, True), 40, "float64")
    assert direct_count(d) == before + 1


def test_ata_and_histograms(start_daemon, sock_dir):
    d = start(start_daemon, sock_dir, *DIRECT)
    g = rng(7)
    a = g.uniform(-1, 1, (300, 17)).astype(np.float32)
    before = direct_count(d)
    r = post(d, "/v1/ata", npy(a), "application/x-npy", {"Accept": "application/x-npy"})
    assert r.status == 200, r.body
    assert_close(r.npy(), a.astype(np.float64).T @ a, 300, "float32")
    raw = g.integers(0, 256, 5000, dtype=np.uint8)
    r = post(d, "/v1/histogram?bins=32", raw.tobytes(), "application/octet-stream", {"Accept": "application/x-npy"})
    assert r.status == 200, r.body
    assert (r.npy() == np.bincount(raw // 8, minlength=32)).all()
    x = g.normal(0, 1, 4000).astype(np.float32)
    r = post(d, "/v1/histogram?bins=10&range=-2,2", npy(x), "application/x-npy")
    assert r.status == 200, r.body
    want, _ = np.histogram(x, bins=10, range=(-2, 2))
    assert r.json()["result"]["counts"] == want.tolist()
    assert direct_count(d) == before + 3


def test_answers_equal_libmicrohttpds_byte_for_byte(start_daemon, sock_dir):
    """The same requests, good and bad, through both transports: same status, same body."""
    direct = start(start_daemon, sock_dir, *DIRECT, name="direct")
    mhd = start(start_daemon, sock_dir, "--direct-min-kb", "0", name="mhd")
    a, b = gemm_parts(m=21, k=64, n=18, seed=3)
    good = multipart({"a": npy(a), "b": npy(b)})
    ct = f"multipart/form-data; boundary={BOUNDARY}"
    bad_npy = b"\x93NUMPY\x01\x00" + b"x" * 2000
    cases = [
        ("/v1/gemm", good, ct),
        ("/v1/gemm?alpha=zz", good, ct),                              # a bad parameter, refused at once
        ("/v1/gemm?kernel=no_such_kernel", good, ct),
        ("/v1/gemm", good[:-40] + b"x" * 40, ct),                     # b has more data than declared
        ("/v1/gemm", multipart({"a": npy(a), "q": npy(b)}), ct),      # an unknown part
        ("/v1/gemm", multipart({"a": npy(a)}), ct),                   # b missing
        ("/v1/gemm", multipart({"a": npy(a), "b": npy(b[:10])}), ct),  # shapes disagree
        ("/v1/gemm", multipart({"a": bad_npy, "b": npy(b)}), ct),     # not a .npy header
        ("/v1/gemm", npy(a), "application/x-npy"),                    # gemm takes two arrays
        ("/v1/ata", good, "text/plain"),                              # 415
        ("/v1/histogram?bins=0", np.zeros(3000, np.uint8).tobytes(), "application/octet-stream"),
        ("/v1/histogram?bins=4", npy(np.full(600, np.nan, np.float32)), "application/x-npy"),
    ]
    before = direct_count(direct)
    for target, body, ctype in cases:
        want = post(mhd, target, body, ctype, {"Accept": "application/x-npy", "X-Request-Id": "same"})
        got = post(direct, target, body, ctype, {"Accept": "application/x-npy", "X-Request-Id": "same"})
        assert got.status == want.status, (target, got.body, want.body)
        if want.status == 200:
            assert got.body == want.body, target
        else:
            assert json.loads(got.body)["error"] == json.loads(want.body)["error"], target
    # text/plain is not a binary type: libmicrohttpd answers that one
    assert direct_count(direct) == before + len(cases) - 1
    assert direct_count(mhd) == 0


def test_concurrent_uploads_each_get_their_own_answer(start_daemon, sock_dir):
    """Many direct requests at once, of different routes, shapes and headers: each answer is its
    own (the acceptor parses the next head while workers serve the ones before)."""
    d = start(start_daemon, sock_dir, *DIRECT)
    cases = []
    for i in range(24):
        g = rng(100 + i)
        if i % 3 == 0:
            a = g.uniform(-1, 1, (10 + i, 30)).astype(np.float32)
            b = g.uniform(-1, 1, (30, 5 + i)).astype(np.float32)
            cases.append((f"/v1/gemm?alpha={i + 1}", multipart({"a": npy(a), "b": npy(b)}),
                          f"multipart/form-data; boundary={BOUNDARY}", gemm_ref(a, b, alpha=float(i + 1)), 30))
        elif i % 3 == 1:
            a = g.uniform(-1, 1, (200, 3 + i % 7)).astype(np.float64)
            cases.append(("/v1/ata", npy(a), "application/x-npy", a.T @ a, 200))
        else:
            raw = g.integers(0, 256, 3000 + 100 * i, dtype=np.uint8)
            cases.append((f"/v1/histogram?bins={4 + i}", raw.tobytes(), "application/octet-stream",
                          np.histogram(raw, bins=4 + i, range=(0, 256))[0], None))
    before = direct_count(d)
    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(lambda c: post(d, c[0], c[1], c[2], {"Accept": "application/x-npy",
                                                                      "X-Request-Id": f"r{hash(c[0]) & 0xffff}"}),
                                cases))
    for (target, _, _, want, k), r in zip(cases, answers):
        assert r.status == 200, (target, r.body)
        assert r.headers["x-request-id"] == f"r{hash(target) & 0xffff}", target
        if k is None:
            assert (r.npy() == want).all(), target
        else:
            assert_close(r.npy(), want, k, str(r.npy().dtype))
    assert direct_count(d) == before + len(cases)


def test_multipart_framing_variants(start_daemon, sock_dir):
    """A preamble, transport padding after delimiters, a quoted boundary and an epilogue are
    multipart as RFC 2046 has it."""
    d = start(start_daemon, sock_dir, *DIRECT)
    a, b = gemm_parts(m=9, k=50, n=7, seed=9)
    body = multipart({"a": npy(a), "b": npy(b)}, boundary="q b", preamble=b"ignore me\r\n", padding=b" \t",
                     epilogue=b"trailing words")
    before = direct_count(d)
    r = post(d, "/v1/gemm", body, 'multipart/form-data; boundary="q b"', {"Accept": "application/x-npy"})
    assert r.status == 200, r.body
    assert_close(r.npy(), gemm_ref(a, b), 50, "float32")
    assert direct_count(d) == before + 1


@pytest.mark.parametrize("body,message", [
    (lambda p: p[:p.rindex(b"\r\n--" + BOUNDARY.encode())], "no closing boundary"),
    (lambda p: p.replace(b"Content-Disposition", b"X-Disposition" + b"y" * 9000, 1), "8 KiB"),
    (lambda p: p.replace(b"\r\nContent-Disposition", b"junk\r\nContent-Disposition", 1), "malformed"),
    (lambda p: p.replace(b'name="a"', b'name="averyveryverylongname"', 1), "no name"),
])
def test_broken_multipart_is_a_400_naming_the_fault(start_daemon, sock_dir, body, message):
    d = start(start_daemon, sock_dir, *DIRECT)
    a, b = gemm_parts(seed=11)
    r = post(d, "/v1/gemm", body(multipart({"a": npy(a), "b": npy(b)})), f"multipart/form-data; boundary={BOUNDARY}")
    assert r.status == 400, r.body
    assert message in r.json()["error"]["message"], r.body
    assert post(d, "/v1/gemm", multipart({"a": npy(a), "b": npy(b)}),
                f"multipart/form-data; boundary={BOUNDARY}").status == 200  # the daemon goes on


def test_expect_continue_and_an_early_refusal(start_daemon, sock_dir):
    d = start(start_daemon, sock_dir, *DIRECT)
    a, b = gemm_parts(seed=13)
    body = multipart({"a": npy(a), "b": npy(b)})
    with connect(d, 30) as s:
        req = request_bytes("/v1/gemm", body, f"multipart/form-data; boundary={BOUNDARY}",
                            {"Expect": "100-continue", "Accept": "application/x-npy"})
        head = req[:len(req) - len(body)]
        s.sendall(head)
        assert s.recv(64).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        r, _ = read_answer(s)
        assert r.status == 200 and not r.closed
        assert_close(r.npy(), gemm_ref(a, b), 47, "float32")
    with connect(d, 30) as s:  # refused before the body: no 100, no body read
        req = request_bytes("/v1/gemm?alpha=x", body, f"multipart/form-data; boundary={BOUNDARY}",
                            {"Expect": "100-continue"})
        s.sendall(req[:len(req) - len(body)])
        r, _ = read_answer(s)
        assert r.status == 400 and r.closed and r.json()["error"]["field"] == "alpha", r.body


def test_keep_alive_then_libmicrohttpd_on_the_same_connection(start_daemon, sock_dir):
    """A direct request's connection comes back for its next request, which may be anything."""
    d = start(start_daemon, sock_dir, *DIRECT)
    a, b = gemm_parts(seed=17)
    body = multipart({"a": npy(a), "b": npy(b)})
    before = direct_count(d)
    with connect(d, 30) as s:
        rest = b""
        for _ in range(3):
            s.sendall(request_bytes("/v1/gemm", body, f"multipart/form-data; boundary={BOUNDARY}",
                                    {"Accept": "application/x-npy"}))
            r, rest = read_answer(s, rest)
            assert r.status == 200 and not r.closed
            assert_close(r.npy(), gemm_ref(a, b), 47, "float32")
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        r, rest = read_answer(s, rest)
        assert r.status == 200 and r.json() == {"status": "ok"}
    assert direct_count(d) == before + 3


def test_pipelined_requests_each_answered_in_order(start_daemon, sock_dir):
    """Requests written back to back before any answer (pipelining): the worker that answers one
    finds the next already there, serves it itself (or hands the connection back when it is not
    a direct request), and every answer comes in order on the one connection."""
    d = start(start_daemon, sock_dir, *DIRECT)
    pairs = [gemm_parts(m=20 + i, k=31, n=9 + i, seed=40 + i) for i in range(4)]
    ctype = f"multipart/form-data; boundary={BOUNDARY}"
    wire = b"".join(request_bytes(f"/v1/gemm?alpha={i + 1}", multipart({"a": npy(a), "b": npy(b)}), ctype,
                                  {"Accept": "application/x-npy"}) for i, (a, b) in enumerate(pairs[:2]))
    wire += b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    wire += b"".join(request_bytes(f"/v1/gemm?alpha={i + 3}", multipart({"a": npy(a), "b": npy(b)}), ctype,
                                   {"Accept": "application/x-npy"}) for i, (a, b) in enumerate(pairs[2:]))
    before = direct_count(d)
    with connect(d, 30) as s:
        s.sendall(wire)
        rest = b""
        for i, (a, b) in enumerate(pairs):
            if i == 2:
                r, rest = read_answer(s, rest)
                assert r.status == 200 and r.json() == {"status": "ok"}
            r, rest = read_answer(s, rest)
            assert r.status == 200 and not r.closed, r.body[:200]
            assert_close(r.npy(), gemm_ref(a, b, alpha=float(i + 1)), 31, "float32")
    # the healthz went to libmicrohttpd, and the connection with it: the last two are its
    assert direct_count(d) == before + 2


def test_client_that_hangs_up_mid_body_leaves_nothing_behind(start_daemon, sock_dir):
    d = start(start_daemon, sock_dir, *DIRECT)
    a, b = gemm_parts(m=200, k=200, n=200, seed=19)
    body = multipart({"a": npy(a), "b": npy(b)})
    req = request_bytes("/v1/gemm", body, f"multipart/form-data; boundary={BOUNDARY}")
    for cut in (len(req) - len(body) + 100, len(req) // 2, len(req) - 3):
        with connect(d) as s:
            s.sendall(req[:cut])
    assert d.log_lines_with('POST /v1/gemm 499', timeout=10 * SLOW)
    deadline = time.monotonic() + 10 * SLOW
    while time.monotonic() < deadline and request_bytes_charged(d) > 0:  # each ends on its own
        time.sleep(0.05)
    assert request_bytes_charged(d) == 0
    assert post(d, "/v1/gemm", body, f"multipart/form-data; boundary={BOUNDARY}").status == 200


def request_bytes_charged(d):
    kinds = re.findall(r'^crunchd_memory_charged_bytes\{kind="(\w+)"\} (\S+)$', d.metrics_text(), re.M)
    assert kinds
    return sum(float(v) for k, v in kinds if k in ("body", "decode", "arrays", "scratch"))


def test_a_trickling_body_is_cut_off(start_daemon, sock_dir):
    """--read-timeout-s and --min-body-rate-kbs hold on the direct path as on libmicrohttpd's."""
    d = start(start_daemon, sock_dir, *DIRECT, "--read-timeout-s", "1", "--min-body-rate-kbs", "64")
    raw = np.zeros(200000, np.uint8).tobytes()
    with connect(d, 20) as s:
        req = request_bytes("/v1/histogram?bins=4", raw, "application/octet-stream")
        s.sendall(req[:len(req) - len(raw) + 5000])
        t0 = time.monotonic()
        closed = False
        try:
            while time.monotonic() - t0 < 15 * SLOW:
                s.sendall(b"\0" * 100)
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        assert closed, "a body at 2 KB/s against a 64 KiB/s floor was not cut off"
    assert d.log_lines_with("POST /v1/histogram 408", timeout=10 * SLOW)
    assert re.search(r"^crunchd_slow_connections_closed_total [1-9]", d.metrics_text(), re.M)


def test_below_the_threshold_or_without_the_token_libmicrohttpd_answers(start_daemon, sock_dir, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret-token-for-direct\n")
    d = start(start_daemon, sock_dir, "--direct-min-kb", "64", "--auth-token-file", str(token))
    a, b = gemm_parts(seed=23)  # ~12 KB: below 64 KiB
    body = multipart({"a": npy(a), "b": npy(b)})
    auth = {"Authorization": "Bearer s3cret-token-for-direct"}
    ct = f"multipart/form-data; boundary={BOUNDARY}"
    before = direct_count_auth(d, auth)
    assert post(d, "/v1/gemm", body, ct, auth).status == 200
    big_a, big_b = gemm_parts(m=150, k=150, n=150, seed=29)  # ~180 KB
    big = multipart({"a": npy(big_a), "b": npy(big_b)})
    r = post(d, "/v1/gemm", big, ct)
    assert r.status == 401 and r.headers.get("www-authenticate") == "Bearer", r.body
    assert direct_count_auth(d, auth) == before
    r = post(d, "/v1/gemm", big, ct, {**auth, "Accept": "application/x-npy"})
    assert r.status == 200
    assert_close(r.npy(), gemm_ref(big_a, big_b), 150, "float32")
    assert direct_count_auth(d, auth) == before + 1


def direct_count_auth(d, auth):
    return direct_count(d, d.get("/metrics", headers=auth).text)


def test_async_jobs_take_the_path_too(start_daemon, sock_dir):
    d = start(start_daemon, sock_dir, *DIRECT)
    a, b = gemm_parts(seed=31)
    r = post(d, "/v1/jobs?op=gemm", multipart({"a": npy(a), "b": npy(b)}), f"multipart/form-data; boundary={BOUNDARY}")
    assert r.status == 202, r.body
    job = d.wait_job(r.json()["id"])[0]
    assert job["status"] == "done", job
    res = d.get(f"/v1/jobs/{job['id']}/result").json()
    assert_close(np.asarray(res["result"]["data"], np.float32).reshape(33, 29), gemm_ref(a, b), 47, "float32")


def test_a_drain_finishes_a_direct_request_in_flight(start_daemon, sock_dir):
    d = start(start_daemon, sock_dir, *DIRECT, "--test-hooks", "--drain-timeout-s", "20")
    a, b = gemm_parts(seed=37)
    body = multipart({"a": npy(a), "b": npy(b)})
    with connect(d, 30) as s:
        s.sendall(request_bytes("/v1/gemm", body, f"multipart/form-data; boundary={BOUNDARY}",
                                {DELAY_HEADER: "800", "Accept": "application/x-npy"}))
        deadline = time.monotonic() + 10 * SLOW
        while time.monotonic() < deadline and not re.search(r"^crunchd_jobs_running 1", d.metrics_text(), re.M):
            time.sleep(0.02)
        d.signal(signal.SIGTERM)
        r, _ = read_answer(s)
    assert r.status == 200 and r.closed  # a draining daemon closes each connection after its answer
    assert_close(r.npy(), gemm_ref(a, b), 47, "float32")
    assert d.proc.wait(timeout=30 * SLOW) == 0
