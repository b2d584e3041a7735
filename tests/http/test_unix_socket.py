"""--unix-socket: every route served on a Unix socket beside TCP (or alone, --bind none), driven
with curl --unix-socket as a local client would: JSON and .npy GEMM checked against numpy,
/healthz, /metrics; the file's mode and group; a stale file replaced, a live daemon's refused, a
regular file left alone; the file gone after SIGTERM; peers logged by uid and pid; per-IP limits
not applied to unix peers; TLS on TCP only."""

import grp
import io
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile

import numpy as np
import pytest

from conftest import BACKEND, BIN, SLOW, assert_close, gemm_ref, rng, unix_http


@pytest.fixture
def sock_dir():
    """A short directory for socket files: sun_path holds 107 bytes, pytest's tmp_path may not."""
    d = tempfile.mkdtemp(prefix="crunchd-sock-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def curl_unix(sock, *args):
    if not shutil.which("curl"):
        pytest.skip("curl is not installed (make deps)")
    return subprocess.run(["curl", "-sS", "--max-time", str(int(60 * SLOW)), "--unix-socket", sock] + list(args),
                          capture_output=True, timeout=90 * SLOW)


def start_failing(*args, timeout=60):
    """Runs the daemon expecting it to refuse to start: (exit code, stderr text)."""
    p = subprocess.run([BIN, "--port", "0", "--backend", BACKEND] + list(args), capture_output=True, text=True,
                       timeout=timeout * SLOW, stdin=subprocess.DEVNULL)
    return p.returncode, p.stderr


def test_routes_over_the_socket_with_curl(start_daemon, sock_dir, tmp_path):
    sock = os.path.join(sock_dir, "crunchd.sock")
    d = start_daemon("--unix-socket", sock)
    p = curl_unix(sock, "http://localhost/healthz")
    assert p.returncode == 0 and json.loads(p.stdout) == {"status": "ok"}, p.stderr

    g = rng(21)
    a, b = g.uniform(-1, 1, (37, 19)).astype(np.float32), g.uniform(-1, 1, (19, 11)).astype(np.float32)
    body = json.dumps({"a": a.tolist(), "b": b.tolist()})
    p = curl_unix(sock, "-H", "Content-Type: application/json", "-d", body, "http://localhost/v1/gemm")
    assert p.returncode == 0, p.stderr
    got = np.asarray(json.loads(p.stdout)["result"]["data"]).reshape(37, 11)
    assert_close(got, gemm_ref(a, b), 19, "float32")

    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    p = curl_unix(sock, "-F", f"a=@{tmp_path}/a.npy", "-F", f"b=@{tmp_path}/b.npy", "-H",
                  "Accept: application/x-npy", "-D", str(tmp_path / "h"), "http://localhost/v1/gemm?kernel=auto")
    assert p.returncode == 0, p.stderr
    assert_close(np.load(io.BytesIO(p.stdout)), gemm_ref(a, b), 19, "float32")
    assert "x-crunchd-job-id" in (tmp_path / "h").read_text().lower()

    p = curl_unix(sock, "http://localhost/metrics")
    assert p.returncode == 0 and b"crunchd_requests_total" in p.stdout, p.stdout[:300]
    # the same daemon still serves TCP
    assert d.get("/healthz").status_code == 200
    assert d.log_lines_with("peer=unix:uid=%d," % os.getuid())


def test_socket_only(start_daemon, sock_dir):
    sock = os.path.join(sock_dir, "only.sock")
    d = start_daemon("--unix-socket", sock, "--bind", "none")
    status, _, body = d.unix_request("POST", "/v1/ata", {"a": [[1, 2], [3, 4]]})
    assert status == 200 and json.loads(body)["result"]["data"] == [10, 14, 14, 20], body
    assert "listening on unix:" + sock in d.log_text()
    assert not d.port_file.exists()
    rc, err = start_failing("--bind", "none")
    assert rc == 2 and "--unix-socket" in err, err


def test_mode_and_group(start_daemon, sock_dir):
    others = [g for g in grp.getgrall() if g.gr_gid != os.getgid()]
    if os.getuid() != 0:  # an unprivileged daemon can only give the file a group it belongs to
        others = [g for g in others if g.gr_gid in os.getgroups()]
    if not others:
        pytest.skip("no second group to give the socket")
    group = others[0]
    for i, (mode, grp_arg) in enumerate([("0640", group.gr_name), ("600", str(group.gr_gid))]):
        sock = os.path.join(sock_dir, f"m{i}.sock")
        d = start_daemon("--unix-socket", sock, "--unix-socket-mode", mode, "--unix-socket-group", grp_arg,
                         name=f"mode{i}")
        st = os.stat(sock)
        assert stat.S_ISSOCK(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == int(mode, 8), oct(st.st_mode)
        assert st.st_gid == group.gr_gid
        assert unix_http(sock, "GET", "/healthz")[0] == 200
        d.stop()
    sock = os.path.join(sock_dir, "default.sock")
    d = start_daemon("--unix-socket", sock, name="default")
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o660
    d.stop()


@pytest.mark.parametrize("args,word", [
    (["--unix-socket-mode", "0999"], "--unix-socket-mode"),
    (["--unix-socket-mode", "01777"], "--unix-socket-mode"),
    (["--unix-socket-group", "no-such-group-crunchd"], "no group"),
])
def test_bad_mode_or_group_exits_2(sock_dir, args, word):
    sock = os.path.join(sock_dir, "bad.sock")
    rc, err = start_failing("--unix-socket", sock, *args)
    assert rc == 2 and word in err, err
    assert not os.path.exists(sock), "a refused start leaves no socket behind"


def test_group_without_socket_is_refused():
    rc, err = start_failing("--unix-socket-group", "0")
    assert rc == 2 and "--unix-socket" in err, err


def test_stale_socket_is_replaced(start_daemon, sock_dir):
    sock = os.path.join(sock_dir, "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(sock)  # a socket file with nobody listening: what a killed daemon leaves
    s.close()
    assert os.path.exists(sock)
    d = start_daemon("--unix-socket", sock)
    assert unix_http(sock, "GET", "/healthz")[0] == 200  # the dead socket answered nothing
    d.stop()
    assert not os.path.exists(sock)


def test_live_socket_is_refused(start_daemon, sock_dir):
    sock = os.path.join(sock_dir, "live.sock")
    start_daemon("--unix-socket", sock)
    rc, err = start_failing("--unix-socket", sock)
    assert rc == 2 and "another daemon is listening" in err, err
    assert unix_http(sock, "GET", "/healthz")[0] == 200, "the live daemon keeps its socket"


def test_regular_file_is_not_replaced(sock_dir):
    path = os.path.join(sock_dir, "file")
    with open(path, "w") as f:
        f.write("keep me")
    rc, err = start_failing("--unix-socket", path)
    assert rc == 2 and "not a socket" in err, err
    assert open(path).read() == "keep me"


def test_socket_gone_after_sigterm(start_daemon, sock_dir):
    sock = os.path.join(sock_dir, "bye.sock")
    d = start_daemon("--unix-socket", sock)
    assert stat.S_ISSOCK(os.stat(sock).st_mode)
    assert d.stop() == 0
    assert not os.path.exists(sock)


def test_per_ip_limit_does_not_apply_to_unix_peers(start_daemon, sock_dir):
    sock = os.path.join(sock_dir, "perip.sock")
    start_daemon("--unix-socket", sock, "--max-connections-per-ip", "1")
    conns = []
    try:
        for _ in range(4):  # held open together: one IP's limit would close all but one
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10 * SLOW)
            s.connect(sock)
            conns.append(s)
        for s in conns:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        for s in conns:
            assert s.recv(4096).startswith(b"HTTP/1.1 200"), "a unix peer was refused"
    finally:
        for s in conns:
            s.close()


def test_tls_is_tcp_only(start_daemon, sock_dir, tmp_path):
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed (make deps)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    sock = os.path.join(sock_dir, "tls.sock")
    d = start_daemon("--tls-cert", str(cert), "--tls-key", str(key), "--unix-socket", sock, start=False)
    d.verify = str(cert)
    d.start()
    assert d.get("/healthz").status_code == 200  # HTTPS on TCP
    assert unix_http(sock, "GET", "/healthz")[0] == 200  # plain HTTP on the socket
    assert "(TCP only)" in d.log_text()


def test_token_is_needed_on_the_socket_too(start_daemon, sock_dir, tmp_path):
    token = tmp_path / "token"
    token.write_text("unix-s3cret\n")
    sock = os.path.join(sock_dir, "auth.sock")
    start_daemon("--unix-socket", sock, "--auth-token-file", str(token))
    assert unix_http(sock, "GET", "/v1/info")[0] == 401
    assert unix_http(sock, "GET", "/v1/info", headers={"Authorization": "Bearer unix-s3cret"})[0] == 200
    assert unix_http(sock, "GET", "/healthz")[0] == 200
