"""Operations: health, readiness, info, kernels, metrics, Server-Timing, concurrency, admission
control (queue full), deadlines, configuration by flag and environment, SIGTERM drain."""

import io
import re
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from conftest import (BACKEND, BIN, DELAY_HEADER, HTTP_TIMEOUT_S, JOB_TIMEOUT_S, POLL_S, SLOW,
                      SESSION_QUEUE_DEPTH, SESSION_RESULT_TTL_S, SESSION_WORKERS, UUID_RE,
                      assert_close, assert_error, gemm_ref, mat_json, parse_server_timing,
                      rand_matrix, result_matrix, rng)

GEMM = {"a": [[1, 2], [3, 4]], "b": [[5, 6], [7, 8]], "dtype": "float64"}
GEMM_RESULT = [[19, 22], [43, 50]]


# -- health, readiness, info, kernels -----------------------------------------------------------

def test_healthz(daemon):
    r = daemon.get("/healthz")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json() == {"status": "ok"}


def test_readyz(daemon):
    r = daemon.get("/readyz")
    assert r.status_code == 200
    assert r.json()["ready"] is True


def test_info(daemon, info):
    assert info["name"] == "crunchd"
    assert isinstance(info["version"], str) and re.match(r"^\d+\.\d+\.\d+", info["version"])
    assert info["backend"] == BACKEND
    assert isinstance(info["devices"], list) and len(info["devices"]) >= 1
    for i, dev in enumerate(info["devices"]):
        assert dev["index"] == i
        assert isinstance(dev["name"], str) and dev["name"]
        for key in ("memory_total_bytes", "memory_free_bytes", "multiprocessors"):
            assert isinstance(dev[key], int) and dev[key] >= 0, dev
        assert dev["memory_free_bytes"] <= dev["memory_total_bytes"]
        if BACKEND == "cuda":
            assert dev["multiprocessors"] > 0 and dev["memory_total_bytes"] > 0
    lim = info["limits"]
    for key in ("max_body_bytes", "max_json_bytes", "max_elements", "max_bins", "queue_depth",
                "workers", "job_timeout_ms", "result_ttl_s"):
        assert isinstance(lim[key], int) and lim[key] >= 0, (key, lim)
    assert lim["queue_depth"] == SESSION_QUEUE_DEPTH
    assert lim["result_ttl_s"] == SESSION_RESULT_TTL_S
    if BACKEND == "cpu":
        assert lim["workers"] == SESSION_WORKERS
    assert lim["max_elements"] > 0 and lim["max_bins"] >= 256


def test_kernels(daemon, kernels):
    r = daemon.get("/v1/kernels")
    body = r.json()
    assert body["backend"] == BACKEND
    names = set()
    for k in body["kernels"]:
        assert k["op"] in ("gemm", "ata", "histogram"), k
        assert isinstance(k["name"], str) and k["name"] not in ("auto", "all"), k
        assert (k["op"], k["name"]) not in names, f"duplicate {k}"
        names.add((k["op"], k["name"]))
        assert k["precision"] in ("fp32", "tf32"), k
        assert isinstance(k["reference"], bool), k
        assert isinstance(k["named_only"], bool) and not (k["named_only"] and k["reference"]), k
        assert isinstance(k["summary"], str) and k["summary"], k
        assert isinstance(k["dtypes"], list) and k["dtypes"], k
    for op in ("gemm", "ata"):
        assert kernels[op], f"no {op} kernel"
        matrix = {"float32", "float64"} | ({"float16", "bfloat16"} if op == "gemm" else set())
        for k in kernels[op]:
            assert set(k["dtypes"]) <= matrix, k
        assert any("float32" in k["dtypes"] for k in kernels[op])
        assert any("float64" in k["dtypes"] for k in kernels[op])
    for op in ("gemm", "ata", "histogram"):
        refs = [k for k in kernels[op] if k["reference"]]
        assert len(refs) == 1, f"{op}: exactly one reference kernel, got {refs}"
    assert any({"uint8", "float32", "float64"} <= set(k["dtypes"]) for k in kernels["histogram"])
    named_only = {(k["op"], k["name"]) for k in body["kernels"] if k["named_only"]}
    assert not any((row["op"], row["kernel"]) in named_only for row in body["auto"]), body["auto"]
    assert named_only == (set() if BACKEND == "cpu" else {("gemm", "tc-3xtf32")}), named_only
    if BACKEND == "cpu":
        for op, names in (("gemm", {"openblas", "reference"}), ("ata", {"openblas", "reference"}),
                          ("histogram", {"reference"})):
            assert {k["name"] for k in kernels[op]} == names, kernels[op]
            assert [k["name"] for k in kernels[op] if k["reference"]] == ["reference"]
    else:
        gemm_names = {k["name"] for k in kernels["gemm"]}
        assert {"naive", "cublas", "cublas-tf32"} <= gemm_names, gemm_names
        tf32 = [k for k in kernels["gemm"] if k["name"] == "cublas-tf32"][0]
        assert tf32["precision"] == "tf32"


def test_help():
    p = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    text = p.stdout + p.stderr
    for flag in ("--port", "--port-file", "--bind", "--backend", "--workers", "--queue-depth",
                 "--max-body-mb", "--max-json-mb", "--job-timeout-ms", "--result-ttl-s",
                 "--drain-timeout-s", "--log-format", "--test-hooks"):
        assert flag in text, f"--help does not document {flag}"
    assert "CRUNCHD_PORT" in text


def test_bad_flag_exits_nonzero():
    p = subprocess.run([BIN, "--no-such-flag"], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0


def test_config_from_environment(start_daemon):
    d = start_daemon(env={"CRUNCHD_QUEUE_DEPTH": "7", "CRUNCHD_RESULT_TTL_S": "9",
                          "CRUNCHD_JOB_TIMEOUT_MS": "12345"})
    lim = d.get("/v1/info").json()["limits"]
    assert lim["queue_depth"] == 7 and lim["result_ttl_s"] == 9
    assert lim["job_timeout_ms"] == 12345


def test_flag_overrides_environment(start_daemon):
    d = start_daemon("--queue-depth", "5", env={"CRUNCHD_QUEUE_DEPTH": "7"})
    assert d.get("/v1/info").json()["limits"]["queue_depth"] == 5


def test_json_log_format(start_daemon):
    import json
    d = start_daemon("--log-format", "json")
    r = d.post("/v1/gemm", GEMM)
    assert r.status_code == 200
    jid = r.json()["id"]
    deadline = time.monotonic() + 10
    while jid not in d.log_text():
        assert time.monotonic() < deadline, "request not logged:\n" + d.log_tail()
        time.sleep(POLL_S)
    lines = [ln for ln in d.log_text().splitlines() if jid in ln]
    rec = json.loads(lines[0])
    assert isinstance(rec, dict)


# -- metrics ------------------------------------------------------------------------------------

METRICS = ["crunchd_requests_total", "crunchd_jobs_in_queue", "crunchd_jobs_running",
           "crunchd_job_duration_seconds", "crunchd_flops_total", "crunchd_received_bytes_total",
           "crunchd_device_memory_used_bytes", "crunchd_device_ready", "crunchd_build_info"]


def scrape(daemon):
    r = daemon.get("/metrics")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain"), r.headers
    fams = list(text_string_to_metric_families(r.text))
    samples = {}
    types = {}
    for f in fams:
        types[f.name] = f.type
        for s in f.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return fams, samples, types


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_names_and_types(daemon):
    daemon.post("/v1/gemm", GEMM)
    fams, samples, types = scrape(daemon)
    sample_names = {name for name, _ in samples}
    for m in METRICS:
        base = m[:-len("_total")] if m.endswith("_total") else m
        assert base in types or m in types, f"{m} missing from /metrics: {sorted(types)}"
    assert types.get("crunchd_requests") == "counter" or types.get("crunchd_requests_total") == \
        "counter"
    assert types["crunchd_job_duration_seconds"] == "histogram"
    assert types["crunchd_jobs_in_queue"] == "gauge"
    assert types["crunchd_jobs_running"] == "gauge"
    assert "crunchd_job_duration_seconds_bucket" in sample_names
    phases = {dict(lbl).get("phase") for name, lbl in samples
              if name == "crunchd_job_duration_seconds_count"}
    assert {"queue", "h2d", "kernel", "d2h", "total"} <= phases, phases
    build = [dict(lbl) for name, lbl in samples if name.startswith("crunchd_build_info")]
    assert build and set(build[0]) >= {"version", "backend", "cuda"}, build
    assert build[0]["backend"] == BACKEND
    ready = [(dict(lbl), v) for (name, lbl), v in samples.items()
             if name == "crunchd_device_ready"]
    assert ready and all("device" in l for l, _ in ready) and all(v == 1 for _, v in ready)
    assert any(name == "crunchd_device_memory_used_bytes" and "device" in dict(lbl)
               for name, lbl in samples)


def test_metrics_counters_increase(daemon):
    _, before, _ = scrape(daemon)
    m, n, k = 8, 9, 10
    r_ = rng(4)
    a, b = rand_matrix(r_, m, k), rand_matrix(r_, k, n)
    body = {"a": mat_json(a), "b": mat_json(b)}
    sent = 0
    for _ in range(3):
        r = daemon.post("/v1/gemm", body)
        assert r.status_code == 200
        sent += len(r.request.body)
    assert daemon.post("/v1/gemm", {"a": [[1]]}).status_code == 400
    _, after, _ = scrape(daemon)

    def diff(name, **lbl):
        return value(after, name, **lbl) - value(before, name, **lbl)

    assert diff("crunchd_requests_total", op="gemm", code="200") >= 3
    assert diff("crunchd_requests_total", op="gemm", code="400") >= 1
    assert diff("crunchd_flops_total", op="gemm") >= 3 * 2 * m * n * k
    assert diff("crunchd_job_duration_seconds_count", op="gemm", phase="total") >= 3
    assert diff("crunchd_job_duration_seconds_sum", op="gemm", phase="total") > 0
    assert diff("crunchd_received_bytes_total") >= sent
    inf_bucket = value(after, "crunchd_job_duration_seconds_bucket", op="gemm", phase="total",
                       le="+Inf")
    assert inf_bucket == value(after, "crunchd_job_duration_seconds_count", op="gemm",
                               phase="total")


def test_metrics_queue_gauges_follow_jobs(daemon):
    ids = [daemon.submit(GEMM | {"op": "gemm"}, delay_ms=1000) for _ in range(SESSION_WORKERS + 2)]
    _, s, _ = scrape(daemon)
    assert value(s, "crunchd_jobs_running") + value(s, "crunchd_jobs_in_queue") >= len(ids) - 1
    assert value(s, "crunchd_jobs_in_queue") >= 1
    for i in ids:
        daemon.delete(f"/v1/jobs/{i}")
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while True:
        _, s, _ = scrape(daemon)
        if value(s, "crunchd_jobs_running") == 0 and value(s, "crunchd_jobs_in_queue") == 0:
            break
        assert time.monotonic() < deadline, "gauges never went back to 0 after cancelling"
        time.sleep(POLL_S)


# -- headers ------------------------------------------------------------------------------------

@pytest.mark.parametrize("path,body", [
    ("/v1/gemm", GEMM),
    ("/v1/ata", {"a": [[1, 2], [3, 4]]}),
    ("/v1/histogram", {"data": [1, 2, 3]}),
])
def test_server_timing_and_job_id(daemon, path, body):
    r = daemon.post(path, body)
    assert r.status_code == 200, r.text
    j = r.json()
    assert r.headers["X-Crunchd-Job-Id"] == j["id"] and UUID_RE.match(j["id"])
    st = parse_server_timing(r.headers["Server-Timing"])
    assert set(st) == {"receive", "queue", "h2d", "kernel", "d2h", "total"}, r.headers["Server-Timing"]
    for phase, v in st.items():
        assert v >= 0
        assert abs(v - j["timings_ms"][phase]) <= 0.01 + 1e-3 * v, (phase, v, j["timings_ms"])
    parts = st["queue"] + st["h2d"] + st["kernel"] + st["d2h"]
    # receive comes before the job is queued: it is not part of total
    assert st["total"] >= max(v for k, v in st.items() if k != "receive") - 0.01
    assert st["total"] + 0.05 >= parts * 0.99


def test_server_timing_on_async_result(daemon):
    jid = daemon.submit(GEMM | {"op": "gemm"})
    daemon.wait_job(jid)
    r = daemon.get(f"/v1/jobs/{jid}/result")
    assert r.status_code == 200
    assert set(parse_server_timing(r.headers["Server-Timing"])) >= {"queue", "kernel", "total"}
    assert r.headers["X-Crunchd-Job-Id"] == jid


# -- concurrency --------------------------------------------------------------------------------

def test_64_concurrent_clients(daemon):
    def one(i):
        r_ = rng(1000 + i)
        m, n, k = (int(x) for x in r_.integers(1, 65, size=3))
        dtype = "float32" if i % 2 else "float64"
        form = "dict" if i % 3 else "nested"
        a, b = rand_matrix(r_, m, k, dtype), rand_matrix(r_, k, n, dtype)
        with requests.Session() as s:
            r = daemon.post("/v1/gemm", {"a": mat_json(a, form), "b": mat_json(b, form),
                                         "dtype": dtype}, session=s)
        assert r.status_code == 200, (i, r.status_code, r.text[:300])
        assert_close(result_matrix(r.json(), m, n), gemm_ref(a, b), k, dtype, what=f"client {i}")
        return r.json()["id"]

    barrier = threading.Barrier(64, timeout=30)

    def start_together(i):
        barrier.wait()
        return one(i)

    with ThreadPoolExecutor(64) as ex:
        ids = list(ex.map(start_together, range(64)))
    assert len(set(ids)) == 64


# -- admission control, deadlines ----------------------------------------------------------------

def test_queue_full_503(start_daemon):
    d = start_daemon("--workers", "1", "--queue-depth", "2", "--test-hooks")
    # the first job must be running before the queue fills: otherwise the worker can pick it up
    # between the refusal and the synchronous request below, which then finds room (seen in CI)
    first = d.post("/v1/jobs", GEMM | {"op": "gemm"}, delay_ms=10000)
    assert first.status_code == 202, first.text
    accepted, refused = [first.json()["id"]], None
    d.wait_job(accepted[0], states=("running",))
    for _ in range(8):
        r = d.post("/v1/jobs", GEMM | {"op": "gemm"}, delay_ms=10000)
        if r.status_code == 202:
            accepted.append(r.json()["id"])
            continue
        refused = r
        break
    assert refused is not None, f"8 jobs accepted with 1 worker and queue depth 2: {accepted}"
    assert_error(refused, 503, "queue_full")
    assert int(refused.headers["Retry-After"]) >= 1
    assert len(accepted) == 3, accepted
    # a synchronous job is refused the same way, and readiness says saturated
    assert_error(d.post("/v1/gemm", GEMM), 503, "queue_full")
    ready = d.get("/readyz")
    assert ready.status_code == 503 and ready.json()["ready"] is False, ready.text
    assert isinstance(ready.json()["reason"], str) and ready.json()["reason"]
    # health is not readiness
    assert d.get("/healthz").status_code == 200
    # cancelling frees the queue: accepted again and ready again
    for jid in accepted:
        assert d.delete(f"/v1/jobs/{jid}").status_code == 200
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while d.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(POLL_S)
    r = d.post("/v1/gemm", GEMM)
    assert r.status_code == 200, r.text
    assert result_matrix(r.json(), 2, 2).tolist() == GEMM_RESULT


def test_deadline_sync_504(daemon):
    t0 = time.monotonic()
    r = daemon.post("/v1/gemm", GEMM | {"timeout_ms": 200}, delay_ms=10000)
    assert_error(r, 504, "deadline_exceeded")
    assert time.monotonic() - t0 < 8, "the deadline must cut the (cancellable) delay short"


def test_deadline_server_default(start_daemon):
    d = start_daemon("--job-timeout-ms", "300", "--test-hooks")
    t0 = time.monotonic()
    assert_error(d.post("/v1/ata", {"a": [[1]]}, delay_ms=10000), 504, "deadline_exceeded")
    assert time.monotonic() - t0 < 8
    r = d.post("/v1/ata", {"a": [[2]]})
    assert r.status_code == 200 and result_matrix(r.json(), 1, 1).tolist() == [[4]]


def test_deadline_header_504(daemon):
    t0 = time.monotonic()
    r = daemon.post("/v1/histogram", {"data": [1, 2]}, delay_ms=10000,
                    headers={"X-Crunchd-Timeout-Ms": "200"})
    assert_error(r, 504, "deadline_exceeded")
    assert time.monotonic() - t0 < 8


@pytest.mark.parametrize("bad", ["abc", "-5", "0", "12ms"])
def test_deadline_header_invalid(daemon, bad):
    r = daemon.post("/v1/gemm", GEMM, headers={"X-Crunchd-Timeout-Ms": bad})
    assert_error(r, 400, "invalid_parameter", field="X-Crunchd-Timeout-Ms")


def test_deadline_not_hit(daemon):
    r = daemon.post("/v1/gemm", GEMM | {"timeout_ms": 20000}, delay_ms=100)
    assert r.status_code == 200, r.text
    assert result_matrix(r.json(), 2, 2).tolist() == GEMM_RESULT


def test_deadline_while_queued(start_daemon):
    """A job whose deadline passes while it waits in the queue never runs: 504."""
    d = start_daemon("--workers", "1", "--test-hooks")
    blocker = d.submit(GEMM | {"op": "gemm"}, delay_ms=1500)
    r = d.post("/v1/gemm", GEMM | {"timeout_ms": 200})
    assert_error(r, 504, "deadline_exceeded")
    j, _ = d.wait_job(blocker)
    assert j["status"] == "done"
    # fetched, so nothing holds the drain at teardown
    r = d.get(f"/v1/jobs/{blocker}/result")
    assert r.status_code == 200 and result_matrix(r.json(), 2, 2).tolist() == GEMM_RESULT


def test_sync_client_disconnect_frees_worker(start_daemon):
    """A sync client that goes away cancels its job; the single worker serves the next one."""
    d = start_daemon("--workers", "1", "--test-hooks")
    delay_s, bound_s = 6.0 * SLOW, 3.0 * SLOW
    try:
        requests.post(d.url("/v1/gemm"), json=GEMM,
                      headers={DELAY_HEADER: str(int(delay_s * 1000))}, timeout=0.5)
    except requests.exceptions.ReadTimeout:
        pass
    t0 = time.monotonic()
    r = d.post("/v1/gemm", GEMM)
    assert r.status_code == 200, r.text
    waited = time.monotonic() - t0
    assert waited < bound_s, \
        f"the job of a client that went away kept the only worker for {waited:.1f}s"


# -- SIGTERM drain --------------------------------------------------------------------------------

def test_sigterm_drain_loses_no_accepted_job(start_daemon):
    d = start_daemon("--workers", "2", "--queue-depth", "16", "--test-hooks",
                     "--drain-timeout-s", "60")
    r_ = rng(123)
    jobs = {}
    for i in range(6):
        a, b = rand_matrix(r_, 7 + i, 5, "float64"), rand_matrix(r_, 5, 3 + i, "float64")
        jid = d.submit({"op": "gemm", "a": mat_json(a), "b": mat_json(b), "dtype": "float64"},
                       delay_ms=1500)
        jobs[jid] = (a, b)
    sync_results = {}

    def sync(i):
        a, b = rand_matrix(rng(i), 4, 6, "float64"), rand_matrix(rng(i + 50), 6, 2, "float64")
        r = requests.post(d.url("/v1/gemm"), json={"a": mat_json(a), "b": mat_json(b),
                                                     "dtype": "float64"},
                          headers={DELAY_HEADER: "300"}, timeout=HTTP_TIMEOUT_S)
        sync_results[i] = (r, a, b)

    threads = [threading.Thread(target=sync, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    # every sync job accepted (queued or running) before the signal
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while True:
        _, s, _ = scrape(d)
        if value(s, "crunchd_jobs_in_queue") + value(s, "crunchd_jobs_running") >= 9:
            break
        assert time.monotonic() < deadline, "sync jobs never reached the queue"
        time.sleep(POLL_S)

    d.signal(signal.SIGTERM)
    # new work is refused while draining, readiness is false, health and reads still answer
    deadline = time.monotonic() + 10
    while d.get("/readyz").status_code != 503:
        assert time.monotonic() < deadline, "/readyz still 200 after SIGTERM"
        time.sleep(POLL_S)
    rz = d.get("/readyz")
    assert rz.json()["ready"] is False and rz.json()["reason"]
    assert_error(d.post("/v1/gemm", GEMM), 503, "draining")
    assert_error(d.post("/v1/jobs", GEMM | {"op": "gemm"}), 503, "draining")

    for t in threads:
        t.join(timeout=HTTP_TIMEOUT_S)
        assert not t.is_alive()
    for i, (r, a, b) in sync_results.items():
        assert r.status_code == 200, (i, r.status_code, r.text)
        np.testing.assert_allclose(result_matrix(r.json(), 4, 2), a @ b, rtol=1e-12)
    assert len(sync_results) == 3

    for jid, (a, b) in jobs.items():
        j, _ = d.wait_job(jid)
        assert j["status"] == "done", j
        r = d.get(f"/v1/jobs/{jid}/result")
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(result_matrix(r.json(), a.shape[0], b.shape[1]), a @ b,
                                   rtol=1e-12)
    # all fetched: the daemon exits 0 on its own, well before the 60 s drain timeout
    rc = d.wait_exit(timeout=30)
    assert rc == 0, d.log_tail()
    d.check_log()


def test_sigterm_idle_exits_promptly(start_daemon):
    d = start_daemon()
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    assert d.wait_exit(timeout=30) == 0, d.log_tail()
    assert time.monotonic() - t0 < 10
    d.check_log()


def test_drain_timeout_bounds_unfetched_results(start_daemon):
    """An unfetched result keeps the daemon only until --drain-timeout-s."""
    d = start_daemon("--drain-timeout-s", "2")
    jid = d.submit(GEMM | {"op": "gemm"})
    d.wait_job(jid)
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    assert d.wait_exit(timeout=30) == 0, d.log_tail()
    assert time.monotonic() - t0 < 15
    d.check_log()


def test_sigint_drains_like_sigterm(start_daemon):
    d = start_daemon("--test-hooks")
    jid = d.submit(GEMM | {"op": "gemm"}, delay_ms=500)
    d.signal(signal.SIGINT)
    j, _ = d.wait_job(jid)
    assert j["status"] == "done"
    r = d.get(f"/v1/jobs/{jid}/result")
    assert r.status_code == 200 and result_matrix(r.json(), 2, 2).tolist() == GEMM_RESULT
    assert d.wait_exit(timeout=30) == 0, d.log_tail()
    d.check_log()


def test_second_sigterm_exits_at_once(start_daemon):
    """While a drain waits for a long job, a second SIGTERM ends the process now, with 1."""
    d = start_daemon("--test-hooks", "--drain-timeout-s", "120")
    d.submit(GEMM | {"op": "gemm"}, delay_ms=60000)
    d.signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while d.get("/readyz").status_code != 503:
        assert time.monotonic() < deadline
        time.sleep(POLL_S)
    assert d.proc.poll() is None, "exited before its job finished"
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    assert d.wait_exit(timeout=30) == 1, d.log_tail()
    assert time.monotonic() - t0 < 10
    d.check_log()


def test_pinned_host_memory_gauge(daemon):
    """cuda keeps request arrays in pinned blocks and caches them: /metrics says how much, so a
    growing RSS can be told apart from a leak. The CPU backend keeps none and shows no gauge."""
    body = np.random.default_rng(5).integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()
    r = daemon.post("/v1/histogram", data=body, headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 200, r.text[:300]
    _, samples, types = scrape(daemon)
    if BACKEND != "cuda":
        assert "crunchd_pinned_host_bytes" not in types
        return
    assert types["crunchd_pinned_host_bytes"] == "gauge"
    # the job's input block went back to the cache when it finished, before it was answered
    assert value(samples, "crunchd_pinned_host_bytes", state="cached") >= len(body)
    assert ("crunchd_pinned_host_bytes", (("state", "in_use"),)) in samples
    # a JSON job's operands (named kernel: not the host path) are pageable: they go through a
    # worker's staging, which stays pinned, is reported and, with the pool's cache, is counted
    # by the memory budget
    g = daemon.post("/v1/gemm", json={"a": [[1.0, 2.0]], "b": [[3.0], [4.0]], "kernel": "cublas"})
    assert g.status_code == 200, g.text[:300]
    _, samples, _ = scrape(daemon)
    staging = value(samples, "crunchd_pinned_host_bytes", state="staging")
    assert staging > 0
    assert value(samples, "crunchd_memory_charged_bytes", kind="backend") >= \
        staging + value(samples, "crunchd_pinned_host_bytes", state="cached")


def test_device_pool_is_shown_and_bounded(start_daemon):
    """cuda's allocator keeps freed device memory for the next job, up to CRUNCHD_DEVICE_CACHE_MB
    per device; past it the memory goes back to the driver, so an idle daemon does not hold its
    busiest moment's memory (six test daemons sharing one H100 ran it out of memory for a new
    context). The autotune's probes are not kept either. The CPU backend shows no pool."""
    d = start_daemon("--workers", "1", env={"CRUNCHD_DEVICE_CACHE_MB": "32"})
    _, samples, types = scrape(d)
    if BACKEND != "cuda":
        assert "crunchd_device_pool_bytes" not in types
        return
    dev = next(v for (n, labels), _ in samples.items() if n == "crunchd_device_pool_bytes"
               for k, v in labels if k == "device")
    assert value(samples, "crunchd_device_pool_bytes", device=dev, state="cached") <= 32 << 20
    # a 2048x4096 operand pair and its result: 96 MiB of device memory, past a stream's own
    # 64 MiB buffer, so the job allocates from the pool and frees it when done
    rng = np.random.default_rng(9)
    a = rng.standard_normal((2048, 4096), dtype=np.float32)
    b = rng.standard_normal((4096, 2048), dtype=np.float32)
    parts = {}
    for name, m in (("a", a), ("b", b)):
        buf = io.BytesIO()
        np.save(buf, m)
        parts[name] = (f"{name}.npy", buf.getvalue(), "application/octet-stream")
    r = d.post("/v1/gemm?kernel=cublas", files=parts, headers={"Accept": "application/x-npy"})
    assert r.status_code == 200, r.text[:300]
    _, samples, _ = scrape(d)
    assert value(samples, "crunchd_device_pool_bytes", device=dev, state="cached") <= 32 << 20
    assert ("crunchd_device_pool_bytes", (("device", dev), ("state", "in_use"))) in samples
