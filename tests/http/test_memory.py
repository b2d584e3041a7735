"""The memory budget (--max-memory-mb): what requests and jobs hold is charged before it is
allocated; over the budget a new request gets 503 + Retry-After, or 413 when it could never
fit; kept async results are counted once their output exists and evicted oldest first.

Regression: eight /v1/jobs?op=ata uploads of a 1x12000 float32 .npy (48 KB each, 576 MB of
result each) took RSS from 166 MB to 2.85 GB with --result-cap-mb 64: the cap counted inputs
only and nothing bounded the outputs."""

import io
import re
import time

import numpy as np
import pytest

from conftest import BACKEND, assert_error

NPY = {"Content-Type": "application/x-npy"}
MIB = 1 << 20


def npy(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def metric(d, name, labels=""):
    m = re.search(rf"^{re.escape(name + labels)} (\S+)$", d.metrics_text(), re.M)
    return float(m.group(1)) if m else None


def rss_bytes(d):
    for line in open(f"/proc/{d.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_result_that_could_never_fit_is_413_at_submission(start_daemon):
    d = start_daemon("--max-memory-mb", "64")
    row = np.ones((1, 12000), dtype=np.float32)  # 576 MB of result from 48 KB of input
    r = d.post("/v1/jobs?op=ata", data=npy(row), headers=NPY)
    assert_error(r, 413, "too_large")
    assert "--max-memory-mb" in r.json()["error"]["message"]
    assert metric(d, "crunchd_memory_refusals_total") >= 1


def test_async_results_stay_within_the_budget_and_the_cap(start_daemon):
    # 144 MB of result each: two fit the 400 MiB budget at once, the cap keeps one finished
    d = start_daemon("--max-memory-mb", "400", "--result-cap-mb", "200", "--result-ttl-s", "600")
    row = np.arange(6000, dtype=np.float32).reshape(1, 6000) / 6000
    base = rss_bytes(d)
    accepted, busy = [], 0
    for _ in range(8):
        r = d.post("/v1/jobs?op=ata", data=npy(row), headers=NPY)
        if r.status_code == 503:
            assert_error(r, 503, "memory_budget")
            assert r.headers.get("Retry-After")
            busy += 1
            continue
        assert r.status_code == 202, r.text
        accepted.append(r.json()["id"])
        d.wait_job(accepted[-1])
        assert rss_bytes(d) - base < 400 * MIB + 100 * MIB
    assert len(accepted) >= 2
    # the sweep evicts the oldest finished results beyond the cap; the newest stays whole
    deadline = time.monotonic() + 10
    while metric(d, "crunchd_results_kept_bytes") > 200 * MIB and time.monotonic() < deadline:
        time.sleep(0.05)
    assert metric(d, "crunchd_results_kept_bytes") <= 200 * MIB
    r = d.get(f"/v1/jobs/{accepted[-1]}/result", headers={"Accept": "application/x-npy"})
    assert r.status_code == 200
    got = np.load(io.BytesIO(r.content))
    assert got.shape == (6000, 6000) and got[5999, 5999] == pytest.approx(row[0, -1] ** 2, rel=1e-5)
    assert d.get(f"/v1/jobs/{accepted[0]}").status_code == 404  # evicted, oldest first
    assert metric(d, "crunchd_memory_charged_bytes", '{kind="arrays"}') <= 400 * MIB
    assert rss_bytes(d) - base < 400 * MIB + 100 * MIB


def test_json_body_over_the_budget(start_daemon):
    d = start_daemon("--max-memory-mb", "4")
    body = b'{"data":[' + b",".join([b"1"] * (3 * MIB)) + b"]}"  # 6 MiB of text
    r = d.post("/v1/histogram", data=body, headers={"Content-Type": "application/json"})
    assert_error(r, 413, "too_large")
    assert d.get("/healthz").status_code == 200
    assert metric(d, "crunchd_memory_charged_bytes", '{kind="body"}') == 0


def test_budget_is_released_after_every_request(start_daemon):
    d = start_daemon("--max-memory-mb", "256")
    a = np.ones((64, 64), dtype=np.float32)
    for _ in range(5):
        r = d.post("/v1/gemm", json={"a": a.tolist(), "b": a.tolist()})
        assert r.status_code == 200, r.text
        r = d.post("/v1/ata", data=npy(a), headers=NPY)
        assert r.status_code == 200, r.text
    for kind in ("body", "decode", "arrays", "scratch"):
        assert metric(d, "crunchd_memory_charged_bytes", f'{{kind="{kind}"}}') == 0, kind
    assert metric(d, "crunchd_memory_budget_bytes") == 256 * MIB


def test_query_parameters_on_a_json_request_are_refused(daemon):
    a = [[1.0, 2.0], [3.0, 4.0]]
    r = daemon.post("/v1/gemm?alpha=5&kernel=doesnotexist", json={"a": a, "b": a})
    assert_error(r, 400, "invalid_parameter", field="alpha")
    r = daemon.post("/v1/jobs?op=gemm", json={"op": "gemm", "a": a, "b": a})
    assert_error(r, 400, "invalid_parameter", field="op")


def test_an_overflowing_result_is_422_in_json_and_kept_in_npy(daemon):
    a = [[3e38, 3e38]]
    b = [[3e38], [3e38]]
    r = daemon.post("/v1/gemm", json={"a": a, "b": b})
    assert_error(r, 422, "non_finite_result", field="result")
    r = daemon.post("/v1/gemm", json={"a": a, "b": b}, headers={"Accept": "application/x-npy"})
    assert r.status_code == 200
    assert np.isinf(np.load(io.BytesIO(r.content))[0, 0])


@pytest.mark.skipif(BACKEND != "cpu", reason="the CPU backend widens half-precision operands")
def test_half_precision_working_copy_is_charged(start_daemon):
    """float16 GEMM on the CPU widens A, B and C (to float64 at most): that copy counts against
    the budget before the job is queued, like the arrays, so a job whose arrays fit but whose
    working copy could never fit is a 413, not an allocation past the limit."""
    d = start_daemon("--max-memory-mb", "32")
    a = np.ones((1400, 1400), np.float16)  # 3.9 MB each as float16, 47 MB widened
    r = d.post("/v1/gemm", files={"a": npy(a), "b": npy(a)})
    e = assert_error(r, 413, "too_large")
    assert "working copy" in e["message"]
    r = d.post("/v1/gemm", files={"a": npy(a.astype(np.float32)), "b": npy(a.astype(np.float32))},
               headers={"Accept": "application/x-npy"})
    assert r.status_code == 200, r.text[:300]
    small = np.ones((40, 40), np.float16)
    r = d.post("/v1/gemm", files={"a": npy(small), "b": npy(small)})
    assert r.status_code == 200 and r.json()["result"]["data"][0] == 40, r.text[:300]
    assert metric(d, "crunchd_memory_charged_bytes", '{kind="scratch"}') == 0
