"""Slow and greedy clients (issue 14). libmicrohttpd's idle timeout restarts with every byte, so
a client that trickles a header byte now and then holds its connection forever; a thousand of
them used every slot and the daemon stopped answering anyone. Two defences, tested here:

  - a per-address connection limit by default (half of --max-connections): one address
    (127.0.0.1 here) cannot take the slots every other address needs;
  - read deadlines: a request's headers must arrive within --read-timeout-s of its connection
    opening (or its previous answer), and its body must then average --min-body-rate-kbs, so
    trickling connections are shut down however many addresses they come from.

Loopback accepts every 127.x.y.z, so the innocent client probes from 127.0.0.2."""

import http.client
import json
import resource
import socket
import threading
import time

import pytest

from conftest import DELAY_HEADER, SLOW

GEMM = {"a": [[1, 2], [3, 4]], "b": [[5, 6], [7, 8]]}
TRICKLERS = 1000


@pytest.fixture(autouse=True)
def many_fds():
    """A thousand sockets here and in the daemon (which inherits the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 8192)
    if want < 2 * TRICKLERS + 200:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is too low for {TRICKLERS} sockets")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class Tricklers:
    """n connections from 127.0.0.1, each sending a request line and then one header byte every
    `every` seconds, never finishing: a slowloris. .held() says how many the daemon still keeps."""

    def __init__(self, port, n, every=0.5):
        self.port, self.n, self.every = port, n, every
        self.socks, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def __enter__(self):
        for _ in range(self.n):
            s = socket.socket()
            s.settimeout(5)
            s.connect(("127.0.0.1", self.port))
            s.setblocking(False)
            try:
                s.send(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ")
            except OSError:
                s.close()
                continue
            self.socks.append(s)
        self.thread.start()
        return self

    def run(self):
        while not self.stop.wait(self.every):
            alive = []
            for s in self.socks:
                try:
                    if s.recv(1) == b"":  # the daemon closed it
                        s.close()
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    continue
                try:
                    s.send(b"a")
                    alive.append(s)
                except OSError:
                    s.close()
            self.socks = alive

    def held(self):
        return len(self.socks)

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=10)
        for s in self.socks:
            s.close()


def probe(port, path="/healthz", body=None, timeout=5.0):
    """One request from 127.0.0.2 on a new connection: (status, seconds)."""
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=("127.0.0.2", 0))
    try:
        if body is None:
            c.request("GET", path)
        else:
            c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        return r.status, time.monotonic() - t0
    finally:
        c.close()


def test_a_thousand_tricklers_from_one_address_do_not_starve_others(start_daemon):
    """--max-connections 512 so that 1000 tricklers are more than the daemon has slots for (the
    default 1024 would leave a few free even without a defence): the per-address default holds
    them to 256 and every probe from another address is answered within 1 s. Before, they
    filled every slot and the probes waited in the listen backlog."""
    d = start_daemon("--max-connections", "512")
    latencies = []
    with Tricklers(d.port, TRICKLERS) as t:
        deadline = time.monotonic() + 5
        while t.held() > 256 and time.monotonic() < deadline:  # the refused ones see their close
            time.sleep(0.1)
        assert t.held() <= 256, f"{t.held()} connections from one address held"
        assert t.held() >= 200, f"only {t.held()} tricklers held: the test is not loading the daemon"
        for i in range(20):
            status, took = probe(d.port, "/healthz" if i % 2 else "/v1/gemm", None if i % 2 else GEMM)
            assert status == 200, status
            latencies.append(took)
        assert t.held() >= 200, "the tricklers must still be there while the probes run"
    print(f"/healthz and /v1/gemm from 127.0.0.2 beside {TRICKLERS} tricklers: "
          f"max {max(latencies) * 1e3:.1f} ms, median {sorted(latencies)[10] * 1e3:.1f} ms")
    assert max(latencies) < 1.0 * SLOW, latencies


def test_read_deadline_frees_slots_trickled_from_many_addresses(start_daemon):
    """Without the per-address limit (as when the tricklers come from many addresses), they can
    take every slot; the read deadline shuts them down after --read-timeout-s although each
    keeps sending a byte twice a second, and the daemon serves again."""
    d = start_daemon("--max-connections", "512", "--max-connections-per-ip", "0", "--read-timeout-s", "2")
    with Tricklers(d.port, 600) as t:
        t0 = time.monotonic()
        status, took = probe(d.port, timeout=30)
        assert status == 200
        assert took < 2 + 2 * SLOW, f"served only after {took:.1f}s"
        deadline = time.monotonic() + 10 * SLOW
        while t.held() > 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert t.held() == 0, f"{t.held()} tricklers still held {time.monotonic() - t0:.1f}s later"
    metrics = d.get("/metrics").text
    closed = [float(l.split()[1]) for l in metrics.splitlines()
              if l.startswith("crunchd_slow_connections_closed_total ")]
    assert closed and closed[0] >= 500, closed
    assert "too slow to send their request" in d.log_text()


def raw_post(port, head, chunks, every, timeout=30.0):
    """Sends head, then each chunk after `every` seconds; the daemon's answer, or b"" when it
    closed the connection first."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(head)
        for c in chunks:
            time.sleep(every)
            try:
                s.sendall(c)
            except OSError:
                return b""
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                return out
            if not b:
                return out
            out += b
    finally:
        s.close()


def post_head(n):
    return (f"POST /v1/gemm HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            f"Content-Length: {n}\r\nConnection: close\r\n\r\n").encode()


def test_a_body_that_keeps_the_minimum_rate_may_take_longer_than_the_read_timeout(start_daemon):
    """1 s for the headers, then 8 KiB/s: a 48 KiB body sent at ~24 KiB/s over 2 s passes."""
    d = start_daemon("--read-timeout-s", "1", "--min-body-rate-kbs", "8")
    body = json.dumps({"a": [[1.0] * 64] * 64, "b": [[1.0] * 64] * 64, "pad": None})
    body = body.replace('"pad": null', '"kernel": "auto"' + " " * (48 * 1024 - len(body)))
    data = body.encode()
    chunks = [data[i:i + 4096] for i in range(0, len(data), 4096)]
    out = raw_post(d.port, post_head(len(data)), chunks, every=2.0 / len(chunks))
    assert out.startswith(b"HTTP/1.1 200 "), out[:300]


def test_a_body_below_the_minimum_rate_is_cut(start_daemon):
    """1 s for the headers, then 8 KiB/s: 100 bytes/s falls behind and is shut down (log: 408)."""
    d = start_daemon("--read-timeout-s", "1", "--min-body-rate-kbs", "8", "--conn-timeout-s", "60")
    body = json.dumps(GEMM).encode() + b" " * 2000
    t0 = time.monotonic()
    out = raw_post(d.port, post_head(len(body)), [body[i:i + 10] for i in range(0, len(body), 10)], every=0.1)
    took = time.monotonic() - t0
    assert out == b"", out[:300]
    assert took < 1 + 3 * SLOW, f"cut only after {took:.1f}s"
    deadline = time.monotonic() + 5
    while " 408 " not in d.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "POST /v1/gemm 408 " in d.log_text(), d.log_tail()


def test_a_request_being_served_is_not_on_the_read_clock(start_daemon):
    """A sync job that runs longer than --read-timeout-s keeps its connection and gets its answer;
    the clock only times the request's arrival."""
    d = start_daemon("--read-timeout-s", "1", "--test-hooks")
    r = d.post("/v1/gemm", GEMM, headers={DELAY_HEADER: str(int(2500 * SLOW))})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["data"] == [19, 22, 43, 50]


# 30 HTTP threads: what a 32-core machine gets by default. libmicrohttpd split --max-connections
# over its threads (8 / 30: most had none) and closed connections the acceptor had admitted.
@pytest.mark.parametrize("threads", [[], ["--http-threads", "30"]], ids=["default-threads", "30-threads"])
def test_per_ip_limit_default_and_override(start_daemon, threads):
    """The default is half of --max-connections (here 4 of 8): a fifth connection from one
    address is closed at once while another address still gets in; 0 lifts the limit."""
    d = start_daemon("--max-connections", "8", *threads)
    held = [socket.create_connection(("127.0.0.1", d.port), timeout=5) for _ in range(5)]
    try:
        for s in held:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        answered = 0
        for s in held:
            try:
                answered += s.recv(4096).startswith(b"HTTP/1.1 200")
            except (ConnectionResetError, socket.timeout):
                pass
        # 4 at most (one may still be the start-up's /readyz connection, closing)
        assert 3 <= answered <= 4, answered
        assert probe(d.port)[0] == 200
    finally:
        for s in held:
            s.close()
    open_ = start_daemon("--max-connections", "8", "--max-connections-per-ip", "0", *threads, name="no-per-ip")
    held = [socket.create_connection(("127.0.0.1", open_.port), timeout=5) for _ in range(6)]
    try:
        for s in held:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        assert all(s.recv(4096).startswith(b"HTTP/1.1 200") for s in held)
    finally:
        for s in held:
            s.close()
