"""The listening socket (issue 14): SO_REUSEPORT only with --reuse-port, so a second daemon on a
busy port fails its start (exit 2, the port named) instead of silently sharing the port and taking
half of its connections."""

import socket
import subprocess

from conftest import BACKEND, BIN, START_TIMEOUT_S


def start_on(port, *flags):
    """Runs a daemon on a fixed port until it exits by itself or START_TIMEOUT_S passes."""
    return subprocess.run([BIN, "--port", str(port), "--bind", "127.0.0.1", "--backend", BACKEND] + list(flags),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=START_TIMEOUT_S)


def test_second_daemon_on_a_busy_port_exits_2_naming_the_port(start_daemon):
    first = start_daemon(name="first")
    p = start_on(first.port)
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert f"port {first.port}" in p.stderr and "in use" in p.stderr, p.stderr[-2000:]
    assert "sized for" not in p.stderr, p.stderr[-2000:]  # named before the engine starts (seconds on cuda)
    # the first daemon keeps serving, and gets every connection
    for _ in range(20):
        assert first.get("/healthz").status_code == 200


def test_a_port_held_by_another_program_is_refused_too(tmp_path):
    """Not only another crunchd: any listener on the port, even one that set SO_REUSEPORT
    itself (a socket without the option may not join it; ours must not set it by default)."""
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        port = s.getsockname()[1]
        p = start_on(port)
        assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
        assert f"port {port}" in p.stderr, p.stderr[-2000:]
    finally:
        s.close()


def test_reuse_port_shares_the_port_when_asked(start_daemon):
    first = start_daemon("--reuse-port", name="first")
    second = start_daemon("--reuse-port", "--port", str(first.port), name="second")
    assert second.port == first.port
    for d in (first, second):
        assert d.get("/healthz").status_code == 200


def test_start_logs_no_libmicrohttpd_warning(start_daemon, tmp_path):
    """libmicrohttpd warns once per daemon, on every start, when its logger option is not the
    first: a warning at each start teaches operators to ignore warnings."""
    d = start_daemon("--unix-socket", str(tmp_path / "c.sock"))
    assert d.get("/healthz").status_code == 200
    log = d.log_text()
    assert "listening on" in log, log[-2000:]
    assert "libmicrohttpd" not in log, log[-2000:]
