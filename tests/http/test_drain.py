"""The end of a drain (issue 14): when --drain-timeout-s passes with synchronous requests still
running or queued, each is answered 503 draining with Retry-After and the daemon exits 0. Before,
libmicrohttpd aborted the process ("MHD_stop_daemon() called while we have suspended
connections", exit 134) and those clients got a closed connection."""

import signal
import threading
import time

import pytest
import requests

from conftest import DELAY_HEADER, HTTP_TIMEOUT_S, JOB_TIMEOUT_S, POLL_S, SLOW

GEMM = {"a": [[1, 2], [3, 4]], "b": [[5, 6], [7, 8]]}
KSERVE_GEMM = {"inputs": [{"name": "a", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4]},
                          {"name": "b", "shape": [2, 2], "datatype": "FP32", "data": [5, 6, 7, 8]}]}


def gauge(d, name):
    for line in d.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def wait_jobs(d, running, queued):
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while gauge(d, "crunchd_jobs_running") < running or gauge(d, "crunchd_jobs_in_queue") < queued:
        assert time.monotonic() < deadline, "the jobs never reached the worker and the queue"
        time.sleep(POLL_S)


class Client(threading.Thread):
    """One synchronous request in its own thread; .response or .error once it is over."""

    def __init__(self, url, body, headers):
        super().__init__(daemon=True)
        self.url, self.body, self.headers = url, body, headers
        self.response = self.error = None

    def run(self):
        try:
            self.response = requests.post(self.url, json=self.body, headers=self.headers,
                                          timeout=HTTP_TIMEOUT_S)
        except requests.RequestException as e:
            self.error = e


def assert_draining_503(c, kserve=False):
    assert c.error is None, f"no answer, the connection failed: {c.error!r}"
    r = c.response
    assert r.status_code == 503, (r.status_code, r.text[:300])
    assert r.headers.get("Retry-After", "").isdigit(), r.headers
    if kserve:
        assert "drain" in r.json()["error"], r.text
    else:
        e = r.json()["error"]
        assert e["code"] == "draining" and "--drain-timeout-s" in e["message"], e


def test_drain_timeout_answers_every_waiting_request_503_and_exits_0(start_daemon):
    grace_s = 2
    d = start_daemon("--workers", "1", "--test-hooks", "--queue-depth", "16",
                     "--drain-timeout-s", str(grace_s))
    long_job = {DELAY_HEADER: "600000"}  # holds the only worker far beyond the grace period
    running = Client(d.url("/v1/gemm"), GEMM, long_job)
    running.start()
    wait_jobs(d, running=1, queued=0)
    queued = [Client(d.url("/v1/gemm"), GEMM, long_job) for _ in range(3)]
    queued.append(Client(d.url("/v2/models/gemm/infer"), KSERVE_GEMM, long_job))
    for c in queued:
        c.start()
    async_ids = [d.submit(dict(GEMM, op="gemm"), delay_ms=600000) for _ in range(2)]
    wait_jobs(d, running=1, queued=len(queued) + len(async_ids))

    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    for c in [running] + queued:
        c.join(timeout=HTTP_TIMEOUT_S)
        assert not c.is_alive()
    answered = time.monotonic() - t0
    assert_draining_503(running)
    for c in queued[:-1]:
        assert_draining_503(c)
    assert_draining_503(queued[-1], kserve=True)
    assert grace_s - 0.5 < answered < grace_s + 3 * SLOW, f"answered after {answered:.1f}s"

    assert d.wait_exit(timeout=30) == 0, d.log_tail()
    took = time.monotonic() - t0
    assert took < grace_s + 5 * SLOW, f"exit {took:.1f}s after SIGTERM"
    log = d.log_text()
    assert "Fatal error" not in log and "suspended connections" not in log, log[-3000:]
    assert "drain period over: 5 waiting request(s) answered 503 draining" in log, log[-3000:]
    d.check_log()
    assert len(async_ids) == 2


def test_a_request_that_finishes_inside_the_grace_period_keeps_its_result(start_daemon):
    """The cut-off is for what is left at the deadline: a job that ends before it is answered
    normally, and the one still running at the deadline gets the 503."""
    d = start_daemon("--workers", "2", "--test-hooks", "--drain-timeout-s", "3")
    quick = Client(d.url("/v1/gemm"), GEMM, {DELAY_HEADER: "800"})
    slow = Client(d.url("/v1/gemm"), GEMM, {DELAY_HEADER: "600000"})
    quick.start()
    slow.start()
    wait_jobs(d, running=2, queued=0)
    d.signal(signal.SIGTERM)
    quick.join(HTTP_TIMEOUT_S)
    slow.join(HTTP_TIMEOUT_S)
    assert quick.error is None and quick.response.status_code == 200, quick.response.text
    assert quick.response.json()["result"]["data"] == [19, 22, 43, 50]
    assert_draining_503(slow)
    assert d.wait_exit(timeout=30) == 0, d.log_tail()
    d.check_log()


@pytest.mark.parametrize("host_path", [False, True], ids=["queue", "host-path"])
def test_new_connections_during_the_drain_are_answered_until_the_end(start_daemon, host_path):
    """Between SIGTERM and the cut-off, new requests are answered (503 draining for work,
    /healthz 200), not left hanging; a job small enough for the HTTP thread is refused too."""
    host = ["--host-max-flops", str(2 * 64 ** 3)] if host_path else []
    d = start_daemon("--workers", "1", "--test-hooks", "--drain-timeout-s", "2", *host)
    assert requests.post(d.url("/v1/gemm"), json=GEMM, timeout=HTTP_TIMEOUT_S).status_code == 200
    assert gauge(d, "crunchd_host_jobs_total") == (1 if host_path else 0)  # where GEMM goes before
    running = Client(d.url("/v1/gemm"), GEMM, {DELAY_HEADER: "600000"})
    running.start()
    wait_jobs(d, running=1, queued=0)
    d.signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while d.get("/readyz").status_code != 503:
        assert time.monotonic() < deadline
        time.sleep(POLL_S)
    r = requests.post(d.url("/v1/gemm"), json=GEMM, timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 503 and r.json()["error"]["code"] == "draining", r.text
    assert requests.get(d.url("/healthz"), timeout=HTTP_TIMEOUT_S).status_code == 200
    running.join(HTTP_TIMEOUT_S)
    assert_draining_503(running)
    assert d.wait_exit(timeout=30) == 0, d.log_tail()
    d.check_log()
