"""crunchd --check URL: the health probe the container image uses instead of curl."""

import socket
import time

from conftest import BIN, run


def check(url, timeout=10):
    t = time.monotonic()
    r = run([BIN, "--check", url] if url is not None else [BIN, "--check"], timeout=timeout)
    return r, time.monotonic() - t


def test_2xx_exits_0(daemon):
    for path in ("/healthz", "/readyz", "/v1/info"):
        r, _ = check(daemon.url + path)
        assert r.returncode == 0, (path, r.stderr)
    r, _ = check(f"http://localhost:{daemon.port}/healthz")
    assert r.returncode == 0, r.stderr


def test_non_2xx_exits_1(daemon):
    r, _ = check(daemon.url + "/no/such/path")
    assert r.returncode == 1
    assert "HTTP 404" in r.stderr


def test_refused_and_bad_urls_exit_1():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    for url in (f"http://127.0.0.1:{port}/healthz", "https://127.0.0.1/healthz", "127.0.0.1:8080",
                "http://:8080/", "http://127.0.0.1:80x/", "http://[::1/", None):
        r, _ = check(url)
        assert r.returncode == 1, (url, r.stdout, r.stderr)
        assert "crunchd --check" in r.stderr, (url, r.stderr)


def test_silent_server_times_out_in_about_2_s():
    """A peer that accepts the connection and never answers must not hold the probe."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)  # the kernel completes the handshake; nobody ever reads or writes
    try:
        r, took = check(f"http://127.0.0.1:{s.getsockname()[1]}/healthz")
    finally:
        s.close()
    assert r.returncode == 1
    assert "no answer within 2 s" in r.stderr
    assert 1.8 <= took < 5.0, took


def test_help_lists_check():
    r = run([BIN, "--help"])
    assert r.returncode == 0
    assert "--check URL" in r.stdout
