"""Limits before memory, and overload (issue 7): connection and header limits enforced from our
flags (by crunchd's acceptor, or by libmicrohttpd where it accepts itself), slow clients that tie up no worker and are cut by
--conn-timeout-s, and a flood against a small queue where the excess gets a clear 503 while the
admitted jobs all finish in bounded time."""

import concurrent.futures
import json
import os
import socket
import statistics
import threading
import time

import numpy as np
import pytest
import requests

from conftest import SLOW, assert_error, gemm_ref, raw_exchange, result_matrix

SMALL = {"a": [[1, 2], [3, 4]], "b": [[5, 6], [7, 8]]}
SMALL_BODY = json.dumps(SMALL).encode()


def status_of(raw):
    line = raw.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split()
    return int(parts[1]) if len(parts) >= 2 and parts[0].startswith("HTTP/") else None


def get_close(port, path="/healthz", headers=b"", timeout=5.0):
    req = (f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n").encode() + headers + b"\r\n"
    return raw_exchange(port, req, timeout)


def served(port, timeout=5.0):
    """Whether a fresh connection gets its /healthz answered."""
    try:
        return status_of(get_close(port, timeout=timeout)) == 200
    except OSError:
        return False


def wait_served(port, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if served(port, timeout=2.0):
            return True
        time.sleep(0.05)
    return False


def refused(sock, wait_s):
    """True when the daemon closes or resets sock, or leaves it unanswered for wait_s."""
    sock.settimeout(wait_s)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        data = sock.recv(4096)
    except socket.timeout:
        return True  # parked in the listen backlog: not served
    except OSError:
        return True  # reset
    return data == b""


# -- connection limits ---------------------------------------------------------------------------

def assert_one_more_refused(d, n, why):
    """With n idle connections open to d, one more is not served; once they close, d serves."""
    d.session.close()
    time.sleep(0.2)  # the readiness probe's connection is closed by the client; let MHD see it
    idle = [socket.create_connection(("127.0.0.1", d.port), timeout=5) for _ in range(n)]
    try:
        time.sleep(0.3 * SLOW)  # the daemon accepts them
        extra = socket.create_connection(("127.0.0.1", d.port), timeout=5)
        try:
            assert refused(extra, 1.5 * SLOW), why
        finally:
            extra.close()
    finally:
        for s in idle:
            s.close()
    assert wait_served(d.port, 10 * SLOW), "the daemon does not serve once the idle ones closed"


# Who counts: crunchd's acceptor (server/http/conn_limits.c, the default), or libmicrohttpd when
# crunchd does not accept TCP itself (--direct-min-kb 0, or TLS).
COUNTERS = pytest.mark.parametrize("counter", [[], ["--direct-min-kb", "0"]], ids=["acceptor", "libmicrohttpd"])


@COUNTERS
def test_max_connections_refuses_one_more_then_recovers(start_daemon, counter):
    # the per-address default (half) would refuse the third first: this is the total's test
    d = start_daemon("--max-connections", "4", "--max-connections-per-ip", "0", "--http-threads", "1",
                     "--conn-timeout-s", "30", *counter)
    assert_one_more_refused(d, 4, "connection N+1 was served while N were open")
    r = d.post("/v1/gemm", SMALL)
    assert r.status_code == 200, r.text


@COUNTERS
def test_max_connections_per_ip(start_daemon, counter):
    d = start_daemon("--max-connections-per-ip", "2", "--conn-timeout-s", "30", *counter)
    assert_one_more_refused(d, 2, "a third connection from one IP was served")


def test_header_over_conn_memory_is_refused(daemon):
    """A 400 KB header does not fit the default 64 KiB connection memory: MHD answers 431 (or
    413) itself, spends no more, and the daemon serves the next request."""
    raw = get_close(daemon.port, "/v1/info", b"X-Big: " + b"a" * 400_000 + b"\r\n", timeout=10)
    assert status_of(raw) in (413, 431), raw[:300]
    assert served(daemon.port)


def test_conn_memory_kb_raises_the_header_limit(start_daemon):
    d = start_daemon("--conn-memory-kb", "1024")
    raw = get_close(d.port, "/healthz", b"X-Big: " + b"a" * 400_000 + b"\r\n", timeout=10)
    assert status_of(raw) == 200, raw[:300]


def test_idle_connection_is_closed_by_conn_timeout(start_daemon):
    d = start_daemon("--conn-timeout-s", "1")
    s = socket.create_connection(("127.0.0.1", d.port), timeout=10 * SLOW)
    try:
        t0 = time.monotonic()
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")  # never finished
        assert s.recv(4096) == b""
        took = time.monotonic() - t0
        assert 0.5 < took < 1 + 3 * SLOW, took
    finally:
        s.close()


# -- slow clients ----------------------------------------------------------------------------------

def test_trickled_body_ties_up_no_worker_and_is_cut_when_it_stalls(start_daemon):
    """One worker. A client trickles a JSON body a byte at a time: its job is not queued until
    the body is complete, so other clients' jobs run promptly meanwhile. When it stalls longer
    than --conn-timeout-s the daemon closes it (the timeout is an idle timeout: a byte per
    interval keeps a connection, which --max-connections(-per-ip) bound)."""
    timeout_s = 2
    d = start_daemon("--workers", "1", "--conn-timeout-s", str(timeout_s))
    body = json.dumps({"a": [[1.0] * 8] * 8, "b": [[2.0] * 8] * 8}).encode()
    s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b"POST /v1/gemm HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode())
    stop = threading.Event()
    sent = [0]

    def trickle():
        for i in range(len(body) - 1):  # never the last byte
            if stop.is_set():
                return
            s.sendall(body[i:i + 1])
            sent[0] += 1
            time.sleep(0.02)

    t = threading.Thread(target=trickle)
    t.start()
    try:
        latencies = []
        for _ in range(10):
            t0 = time.monotonic()
            r = d.post("/v1/gemm", SMALL)
            latencies.append(time.monotonic() - t0)
            assert r.status_code == 200, r.text
            np.testing.assert_allclose(result_matrix(r.json(), 2, 2),
                                       gemm_ref(SMALL["a"], SMALL["b"]))
        assert max(latencies) < 1.0 * SLOW, latencies
        assert t.is_alive() and sent[0] > 0, "the trickle should still be going"
    finally:
        stop.set()
        t.join()
    # Stalled now: cut within the idle timeout (plus MHD's poll granularity).
    t0 = time.monotonic()
    s.settimeout(timeout_s + 5 * SLOW)
    try:
        data = s.recv(4096)
    except ConnectionResetError:
        data = b""
    finally:
        s.close()
    assert data == b"", data[:200]
    assert time.monotonic() - t0 < timeout_s + 4 * SLOW
    assert d.get("/readyz").status_code == 200


# -- overload --------------------------------------------------------------------------------------

def test_flood_gets_queue_full_and_admitted_jobs_stay_bounded(start_daemon):
    """--workers 1 --queue-depth 8, each job held 40 ms in the worker, 48 clients at once: the
    excess gets 503 queue_full with Retry-After (JSON), every admitted job finishes with the right
    answer, and no admitted job waits longer than the queue ahead of it can take."""
    depth, job_ms, clients, per_client = 8, 40, 48, 4
    d = start_daemon("--workers", "1", "--queue-depth", str(depth), "--test-hooks",
                     "--http-threads", "4")
    def one(i):
        rs = np.random.default_rng(i)
        a = rs.integers(-3, 4, size=(3, 3)).tolist()
        b = rs.integers(-3, 4, size=(3, 3)).tolist()
        t0 = time.monotonic()
        with requests.Session() as s:
            r = d.post("/v1/gemm", {"a": a, "b": b}, delay_ms=job_ms, session=s)
        return r, time.monotonic() - t0, a, b

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(one, range(clients * per_client)))
    ok = [(r, dt, a, b) for r, dt, a, b in results if r.status_code == 200]
    full = [r for r, _, _, _ in results if r.status_code == 503]
    other = [(r.status_code, r.text[:200]) for r, _, _, _ in results if r.status_code not in (200, 503)]
    assert not other, other
    assert full, "48 clients against a queue of 8 and one worker: some must get 503"
    assert len(ok) >= depth + 1, len(ok)
    for r in full:
        assert_error(r, 503, "queue_full")
    for r, _, a, b in ok:  # no admitted job lost or mixed up
        np.testing.assert_allclose(result_matrix(r.json(), 3, 3), gemm_ref(a, b))
    lat = sorted(dt for _, dt, _, _ in ok)
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    # Worst case an admitted job waits for a full queue and the running job, then runs itself.
    bound = ((depth + 2) * job_ms / 1000.0) * 3 * SLOW + 1.0 * SLOW
    assert p99 < bound, f"p99 {p99:.3f}s over {bound:.3f}s (median {statistics.median(lat):.3f}s)"
    assert d.get("/readyz").status_code == 200


def test_abandoned_uploads_free_their_connection_at_once(start_daemon):
    """Clients that hang up half way through a body: the daemon closes their sockets at once,
    not after --conn-timeout-s (libmicrohttpd's epoll mode missed the FIN; found by the soak)."""
    d = start_daemon("--conn-timeout-s", "60", "--http-threads", "1")
    fd_dir = f"/proc/{d.proc.pid}/fd"
    d.session.close()
    time.sleep(0.3)
    before = len(os.listdir(fd_dir))
    body = json.dumps({"a": [[1.0] * 30] * 30, "b": [[1.0] * 30] * 30}).encode()
    for cut in (10, len(body) // 2, len(body) - 1) * 5:
        with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s:
            s.sendall(b"POST /v1/gemm HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                      + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:cut])
    deadline = time.monotonic() + 3 * SLOW
    while len(os.listdir(fd_dir)) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(os.listdir(fd_dir)) <= before, os.listdir(fd_dir)
    assert d.get("/readyz").status_code == 200
