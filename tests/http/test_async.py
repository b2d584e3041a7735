"""POST /v1/jobs and /v1/jobs/{id}[/result]: lifecycle, 409 while not done, cancel, forget,
expiry after --result-ttl-s, unknown and malformed ids. The session daemon has 2 workers, so two
"blocker" jobs held by the delay hook keep everything behind them queued, deterministically."""

import time

import numpy as np
import pytest

from conftest import (JOB_TIMEOUT_S, POLL_S, SESSION_RESULT_TTL_S, SESSION_WORKERS, UUID_RE,
                      assert_error, check_job_body, gemm_ref, mat_json, new_uuid, rand_matrix,
                      result_matrix, rng)

SMALL = {"op": "gemm", "a": [[1, 2], [3, 4]], "b": [[5, 6], [7, 8]], "dtype": "float64"}
SMALL_RESULT = [[19, 22], [43, 50]]


def blockers(daemon, ms=1500):
    """Occupies every worker of the session daemon for about ms milliseconds."""
    ids = [daemon.submit(SMALL, delay_ms=ms) for _ in range(SESSION_WORKERS)]
    return ids


def wait_running(daemon, ids):
    for i in ids:
        daemon.wait_job(i, states=("running",) + ("done", "failed", "cancelled"))


def fetch_result(daemon, job_id):
    r = daemon.get(f"/v1/jobs/{job_id}/result")
    assert r.status_code == 200, (r.status_code, r.text)
    return r


def test_lifecycle_queued_running_done(daemon):
    held = blockers(daemon, 800)
    r_ = rng(1)
    a, b = rand_matrix(r_, 9, 5, "float64"), rand_matrix(r_, 5, 4, "float64")
    body = {"op": "gemm", "a": mat_json(a), "b": mat_json(b), "dtype": "float64"}
    jid = daemon.submit(body, delay_ms=300)

    # behind two 800 ms jobs on two workers: certainly still queued
    st = daemon.status(jid)
    assert st["status"] == "queued", st
    assert st["op"] == "gemm"
    assert_error(daemon.get(f"/v1/jobs/{jid}/result"), 409, "not_done")

    seen, not_done_while_running = [], 0
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while True:
        j = daemon.status(jid)
        if not seen or seen[-1] != j["status"]:
            seen.append(j["status"])
        if j["status"] in ("done", "failed", "cancelled"):
            break
        r = daemon.get(f"/v1/jobs/{jid}/result")
        if r.status_code == 409:
            assert_error(r, 409, "not_done")
            not_done_while_running += j["status"] == "running"
        else:  # it finished between the two requests
            assert r.status_code == 200, r.text
            assert daemon.status(jid)["status"] == "done"
        assert time.monotonic() < deadline, seen
        time.sleep(POLL_S)
    assert j["status"] == "done", j
    assert seen[:3] == ["queued", "running", "done"], \
        f"states seen polling every 20 ms (300 ms delay hook while running): {seen}"
    assert not_done_while_running >= 1
    for phase in ("queue", "kernel", "total"):
        assert j["timings_ms"][phase] >= 0
    # it waited for a blocker: queue time is real
    assert j["timings_ms"]["queue"] >= 100, j

    r = fetch_result(daemon, jid)
    res = r.json()
    check_job_body(res, "gemm", "float64")
    assert res["id"] == jid
    assert r.headers.get("X-Crunchd-Job-Id") == jid
    np.testing.assert_allclose(result_matrix(res, 9, 4), gemm_ref(a, b), rtol=1e-12)
    for h in held:
        daemon.wait_job(h)
        assert result_matrix(fetch_result(daemon, h).json(), 2, 2).tolist() == SMALL_RESULT


@pytest.mark.parametrize("op,body,check", [
    ("ata", {"a": [[1, 2], [3, 4], [5, 6]], "dtype": "float64"},
     lambda res: result_matrix(res, 2, 2).tolist() == [[35, 44], [44, 56]]),
    ("histogram", {"data": [0, 1, 1, 255]},
     lambda res: res["result"]["counts"][1] == 2 and res["result"]["counts"][255] == 1
     and sum(res["result"]["counts"]) == 4),
    ("histogram", {"data": [0.0, 0.5, 1.0], "dtype": "float32", "bins": 2, "range": [0, 1]},
     lambda res: res["result"]["counts"] == [1, 2] and res["result"]["edges"] == [0, 0.5, 1]),
    ("gemm", {"a": {"rows": 1, "cols": 2, "data": [1, 2]}, "b": [[3], [4]],
              "trans_a": False, "alpha": 2.0},
     lambda res: result_matrix(res, 1, 1).tolist() == [[22]]),
])
def test_every_op_async(daemon, op, body, check):
    jid = daemon.submit(dict(body, op=op))
    j, _ = daemon.wait_job(jid)
    assert j["status"] == "done", j
    assert j["op"] == op
    res = fetch_result(daemon, jid).json()
    assert res["op"] == op
    assert check(res), res


def test_status_fields(daemon):
    jid = daemon.submit(SMALL)
    j, _ = daemon.wait_job(jid)
    assert set(j) <= {"id", "op", "status", "request_id", "timings_ms", "error"}, j
    assert j["id"] == jid and j["op"] == "gemm"
    assert UUID_RE.match(j["request_id"]), j  # made for the submitting request (it sent none)
    assert "error" not in j or j["error"] is None
    assert set(j["timings_ms"]) >= {"queue", "h2d", "kernel", "d2h", "total"}


def test_cancel_queued(daemon):
    """DELETE of a queued job answers its status "cancelled"; the id is then gone (404), the
    workers skip it, and the queue gauge drops."""
    held = blockers(daemon, 1500)
    jid = daemon.submit(SMALL)
    assert daemon.status(jid)["status"] == "queued"
    r = daemon.delete(f"/v1/jobs/{jid}")
    assert r.status_code == 200, r.text
    assert r.json()["id"] == jid and r.json()["status"] == "cancelled", r.json()
    assert r.json()["op"] == "gemm"
    assert_error(daemon.get(f"/v1/jobs/{jid}"), 404, "not_found")
    assert_error(daemon.get(f"/v1/jobs/{jid}/result"), 404, "not_found")
    assert_error(daemon.delete(f"/v1/jobs/{jid}"), 404, "not_found")
    for h in held:
        j, _ = daemon.wait_job(h)
        assert j["status"] == "done"
    # the id stays gone after the workers passed it
    assert_error(daemon.get(f"/v1/jobs/{jid}"), 404, "not_found")


def test_cancel_running(daemon):
    """DELETE during the delay hook (a running job) cancels it well before the delay ends."""
    jid = daemon.submit(SMALL, delay_ms=20000)
    daemon.wait_job(jid, states=("running",))
    r = daemon.delete(f"/v1/jobs/{jid}")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled", r.json()
    assert_error(daemon.get(f"/v1/jobs/{jid}"), 404, "not_found")
    assert_error(daemon.get(f"/v1/jobs/{jid}/result"), 404, "not_found")
    # the worker is freed: with both workers busy otherwise, a new job still finishes promptly
    other = daemon.submit(SMALL, delay_ms=20000)
    daemon.wait_job(other, states=("running",))
    t0 = time.monotonic()
    jid2 = daemon.submit(SMALL)
    j2, _ = daemon.wait_job(jid2, timeout=10)
    assert j2["status"] == "done"
    assert time.monotonic() - t0 < 10
    fetch_result(daemon, jid2)
    assert daemon.delete(f"/v1/jobs/{other}").json()["status"] == "cancelled"


def test_delete_done_forgets(daemon):
    jid = daemon.submit(SMALL)
    j, _ = daemon.wait_job(jid)
    assert j["status"] == "done"
    r = daemon.delete(f"/v1/jobs/{jid}")
    assert r.status_code == 200, r.text
    assert r.json()["id"] == jid and r.json()["status"] == "done", r.json()
    assert_error(daemon.get(f"/v1/jobs/{jid}"), 404, "not_found")
    assert_error(daemon.get(f"/v1/jobs/{jid}/result"), 404, "not_found")
    assert_error(daemon.delete(f"/v1/jobs/{jid}"), 404, "not_found")


def test_failed_job_answers_its_error(daemon):
    """A job that fails at run time (deadline) is 'failed' and /result gives its own error."""
    body = dict(SMALL, timeout_ms=100)
    jid = daemon.submit(body, delay_ms=3000)
    j, _ = daemon.wait_job(jid, timeout=15)
    assert j["status"] == "failed", j
    assert j["error"]["code"] == "deadline_exceeded", j
    assert_error(daemon.get(f"/v1/jobs/{jid}/result"), 504, "deadline_exceeded")


def test_invalid_async_body_is_refused_at_submit(daemon):
    """Validation happens before queueing: no job is created for a bad body."""
    r = daemon.post("/v1/jobs", {"op": "gemm", "a": [[1, 2]], "b": [[1, 2]]})
    assert_error(r, 422, "shape_mismatch")
    assert "Location" not in r.headers


def test_result_expires_after_ttl(daemon):
    jid = daemon.submit(SMALL)
    j, _ = daemon.wait_job(jid)
    assert j["status"] == "done"
    done_at = time.monotonic()
    # fetchable right after finishing
    fetch_result(daemon, jid)
    deadline = done_at + SESSION_RESULT_TTL_S + 15
    while True:
        r = daemon.get(f"/v1/jobs/{jid}/result")
        if r.status_code == 404:
            break
        assert r.status_code == 200, r.text
        assert time.monotonic() < deadline, \
            f"result still there {time.monotonic() - done_at:.1f}s after done (ttl {SESSION_RESULT_TTL_S}s)"
        time.sleep(POLL_S * 5)
    elapsed = time.monotonic() - done_at
    assert elapsed >= SESSION_RESULT_TTL_S * 0.5, f"expired after only {elapsed:.2f}s"
    assert_error(r, 404, "not_found")
    assert_error(daemon.get(f"/v1/jobs/{jid}"), 404, "not_found")


def test_unknown_id_404(daemon):
    jid = new_uuid()
    assert_error(daemon.get(f"/v1/jobs/{jid}"), 404, "not_found")
    assert_error(daemon.get(f"/v1/jobs/{jid}/result"), 404, "not_found")
    assert_error(daemon.delete(f"/v1/jobs/{jid}"), 404, "not_found")


@pytest.mark.parametrize("bad", ["nope", "123", "00000000-0000-0000-0000-000000000000x",
                                 "zzzzzzzz-zzzz-4zzz-8zzz-zzzzzzzzzzzz", "x" * 600, "%00",
                                 "%2e%2e", "a%20b"])
def test_malformed_id_404(daemon, bad):
    assert_error(daemon.get(f"/v1/jobs/{bad}"), 404, "not_found")
    assert_error(daemon.get(f"/v1/jobs/{bad}/result"), 404, "not_found")
    assert_error(daemon.delete(f"/v1/jobs/{bad}"), 404, "not_found")


def test_many_async_jobs_all_done(daemon):
    r_ = rng(77)
    jobs = {}
    for i in range(20):
        m, n, k = (int(x) for x in r_.integers(1, 40, size=3))
        a, b = rand_matrix(r_, m, k, "float64"), rand_matrix(r_, k, n, "float64")
        jid = daemon.submit({"op": "gemm", "a": mat_json(a), "b": mat_json(b),
                             "dtype": "float64"})
        jobs[jid] = (a, b)
    assert len(jobs) == 20
    for jid, (a, b) in jobs.items():
        j, _ = daemon.wait_job(jid)
        assert j["status"] == "done", j
        res = fetch_result(daemon, jid).json()
        np.testing.assert_allclose(result_matrix(res, a.shape[0], b.shape[1]), a @ b,
                                   rtol=1e-12, atol=1e-12)
        assert UUID_RE.match(jid)
