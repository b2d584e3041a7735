"""Dynamic batching (--batch-max, --batch-delay-us, --batch-preferred) and machine-sized defaults.

Batching must change no result: every job keeps its own answer, status and timings, and says how
many jobs shared its launch (`batch`). These run on any backend: the CPU backend batches too when
asked (its default is off), so the engine's grouping, answers and errors are checked in CI; on the
GPU machine (CRUNCHD_BACKEND=cuda) the same tests drive cuBLAS strided batches and the batched
histogram kernel.
"""
import concurrent.futures as cf
import random
import re
import threading

import numpy as np
import pytest
import requests

from conftest import (BACKEND, assert_close, assert_error, gemm_ref, mat_json, rand_matrix,
                      result_matrix, rng)

# A delay long enough that concurrent jobs of one shape meet in the queue, short enough for a test.
BATCH_ARGS = ["--batch-max", "16", "--batch-delay-us", "20000", "--workers", "1", "--queue-depth", "4096"]


@pytest.fixture(scope="module")
def batched(tmp_path_factory):
    from conftest import Daemon
    d = Daemon(BATCH_ARGS + ["--test-hooks"], workdir=tmp_path_factory.mktemp("batched")).start()
    yield d
    d.stop()


def post_many(d, route, bodies, threads=32):
    """POSTs every body at once (one session per thread); answers in the bodies' order."""
    local = threading.local()

    def one(body):
        if not hasattr(local, "s"):
            local.s = requests.Session()
        return d.request("POST", route, session=local.s, json=body)

    with cf.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, bodies))


def batch_size_metrics(d):
    text = d.metrics_text()
    count = sum(float(v) for v in re.findall(r'^crunchd_batch_size_count\{[^}]*\} (\S+)$', text, re.M))
    total = sum(float(v) for v in re.findall(r'^crunchd_batch_size_sum\{[^}]*\} (\S+)$', text, re.M))
    return count, total


def test_same_shape_jobs_share_launches_and_keep_their_own_results(batched):
    r = rng(11)
    pairs = [(rand_matrix(r, 24, 20), rand_matrix(r, 20, 12)) for _ in range(64)]
    before = batch_size_metrics(batched)
    answers = post_many(batched, "/v1/gemm", [{"a": mat_json(a), "b": mat_json(b)} for a, b in pairs])
    sizes = []
    for (a, b), resp in zip(pairs, answers):
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert_close(result_matrix(body, 24, 12), gemm_ref(a, b), 20, "float32")
        assert body["batch"] >= 1
        sizes.append(body["batch"])
    assert max(sizes) > 1, f"64 concurrent jobs of one shape never shared a launch: {sizes}"
    count, total = batch_size_metrics(batched)
    assert total - before[1] == 64 and 0 < count - before[0] < 64


def test_batch_row_is_named_in_the_answer_and_in_v1_kernels(batched):
    kernels = batched.get("/v1/kernels").json()["kernels"]
    batchable = {(k["op"], k["name"]) for k in kernels if k["batchable"]}
    assert {op for op, _ in batchable} == {"gemm", "ata", "histogram"}
    body = batched.post("/v1/ata", {"a": [[1, 2], [3, 4]]}).json()
    assert ("ata", body["kernel"]) in batchable and body["batch"] >= 1


def _mixed_job(r, i):
    """One of many kinds, with its NumPy answer: GEMM of several shapes (trans, alpha, beta, C,
    float64), AᵀA, byte and float histograms, and some that must never be batched (a named
    reference kernel, compare mode)."""
    kind = i % 9
    if kind in (0, 1, 2, 3):
        m, k, n = [(8, 8, 8), (16, 9, 5), (3, 17, 11), (8, 8, 8)][kind]
        dt = "float64" if kind == 3 else "float32"
        a, b = rand_matrix(r, k, m, dt), rand_matrix(r, k, n, dt)
        c = rand_matrix(r, m, n, dt)
        body = {"a": mat_json(a), "b": mat_json(b), "c": mat_json(c), "alpha": 1.5, "beta": -0.5,
                "trans_a": True, "dtype": dt}
        return "/v1/gemm", body, ("matrix", gemm_ref(a, b, c, 1.5, -0.5, trans_a=True), m, n, dt, k)
    if kind == 4:
        a = rand_matrix(r, 13, 7)
        return "/v1/ata", {"a": mat_json(a)}, ("matrix", a.astype(np.float64).T @ a.astype(np.float64), 7, 7,
                                               "float32", 13)
    if kind == 5:
        data = r.integers(0, 256, size=int(r.integers(1, 1500)))
        return "/v1/histogram", {"data": data.tolist()}, ("counts", np.bincount(data, minlength=256))
    if kind == 6:
        data = r.normal(size=int(r.integers(1, 900))).astype(np.float32)
        counts, _ = np.histogram(data, bins=32, range=(-2.0, 2.0))
        return "/v1/histogram", {"data": data.tolist(), "dtype": "float32", "bins": 32, "range": [-2, 2]}, \
            ("counts", counts)
    a, b = rand_matrix(r, 6, 4), rand_matrix(r, 4, 5)
    body = {"a": mat_json(a), "b": mat_json(b)}
    body["kernel"] = "all" if kind == 7 else ("reference" if BACKEND == "cpu" else "naive")
    return "/v1/gemm", body, ("matrix", gemm_ref(a, b), 6, 5, "float32", 4)


def test_a_thousand_concurrent_mixed_jobs_all_answer_as_numpy(batched):
    r = rng(2024)
    jobs = [_mixed_job(r, i) for i in range(1000)]
    order = list(range(len(jobs)))
    random.Random(5).shuffle(order)
    local = threading.local()

    def one(i):
        if not hasattr(local, "s"):
            local.s = requests.Session()
        route, body, _ = jobs[i]
        return i, batched.request("POST", route, session=local.s, json=body)

    with cf.ThreadPoolExecutor(48) as pool:
        answers = dict(pool.map(one, order))
    shared = 0
    for i, (route, body, want) in enumerate(jobs):
        resp = answers[i]
        assert resp.status_code == 200, (i, route, resp.text[:300])
        got = resp.json()
        shared += got["batch"] > 1
        if body.get("kernel") in ("all", "reference", "naive"):
            assert got["batch"] == 1, "a compare-mode or named hand-written job shared a launch"
        if want[0] == "counts":
            assert got["result"]["counts"] == [int(x) for x in want[1]], i
        else:
            assert_close(result_matrix(got, want[2], want[3]), want[1], want[5], want[4], what=str(i))
    assert shared > 100, f"only {shared} of 1000 jobs shared a launch"


def test_a_job_past_its_deadline_in_a_forming_batch_gets_504_and_the_others_their_results(tmp_path):
    from conftest import Daemon
    d = Daemon(["--batch-max", "8", "--batch-delay-us", "300000", "--workers", "1"], workdir=tmp_path).start()
    try:
        r = rng(3)
        a, b = rand_matrix(r, 4, 4), rand_matrix(r, 4, 4)
        bodies = [{"a": mat_json(a), "b": mat_json(b)} for _ in range(3)]
        bodies[1]["timeout_ms"] = 50  # expires while the batch waits for partners
        answers = post_many(d, "/v1/gemm", bodies, threads=3)
        assert_error(answers[1], 504, "deadline_exceeded")
        for i in (0, 2):
            assert answers[i].status_code == 200, answers[i].text
            assert_close(result_matrix(answers[i].json(), 4, 4), gemm_ref(a, b), 4, "float32")
    finally:
        d.stop()


def test_cancelled_async_job_leaves_its_batch_partners_alone(tmp_path):
    from conftest import Daemon
    d = Daemon(["--batch-max", "8", "--batch-delay-us", "400000", "--workers", "1"], workdir=tmp_path).start()
    try:
        ids = [d.submit({"op": "histogram", "data": [1, 2, 2, i % 256]}) for i in range(3)]
        assert d.delete(f"/v1/jobs/{ids[1]}").json()["status"] == "cancelled"
        for i in (0, 2):
            st, _ = d.wait_job(ids[i])
            assert st["status"] == "done", st
            counts = d.get(f"/v1/jobs/{ids[i]}/result").json()["result"]["counts"]
            assert counts[2] == 2 + (i == 2) and sum(counts) == 4
        assert d.get(f"/v1/jobs/{ids[1]}").status_code == 404
    finally:
        d.stop()


def test_preferred_sizes_and_batch_max_shape_the_launches(tmp_path):
    from conftest import Daemon
    d = Daemon(["--batch-max", "4", "--batch-preferred", "2,4", "--batch-delay-us", "200000", "--workers", "1"],
               workdir=tmp_path).start()
    try:
        answers = post_many(d, "/v1/histogram", [{"data": [i % 7] * 5} for i in range(12)], threads=12)
        sizes = sorted(a.json()["batch"] for a in answers)
        assert all(a.status_code == 200 for a in answers)
        assert max(sizes) <= 4 and set(sizes) <= {1, 2, 3, 4}
    finally:
        d.stop()


def test_bad_batch_flags_refuse_to_start(tmp_path):
    from conftest import Daemon, DaemonError
    for args in (["--batch-preferred", "8,x"], ["--batch-preferred", "0"], ["--batch-max", "2000"]):
        d = Daemon(args, workdir=tmp_path / args[1].replace(",", "_"))
        with pytest.raises(DaemonError):
            d.start()


def test_defaults_are_sized_from_the_machine_and_overridable(tmp_path):
    from conftest import EXTRA_ARGS, Daemon
    if EXTRA_ARGS:
        pytest.skip("CRUNCHD_TEST_ARGS overrides the defaults this checks")
    plain = Daemon([], workdir=tmp_path / "plain").start()
    try:
        limits = plain.get("/v1/info").json()["limits"]
        gpus = len(plain.get("/v1/info").json()["devices"]) if BACKEND == "cuda" else 0
    finally:
        plain.stop()
    assert limits["cpus"] >= 1
    assert limits["queue_depth"] >= 256 and limits["workers"] >= 2
    # on cuda each worker of every GPU keeps a core; the HTTP threads take the rest
    room = limits["cpus"] - limits["workers"] * gpus
    assert limits["http_threads"] == max(2, min(64, room))
    assert limits["batch_max"] == (32 if BACKEND == "cuda" else 0)
    d = Daemon(["--http-threads", "3", "--workers", "2", "--queue-depth", "77", "--batch-max", "5",
                "--batch-preferred", "4,2"], workdir=tmp_path).start()
    try:
        lim = d.get("/v1/info").json()["limits"]
        assert (lim["http_threads"], lim["workers"], lim["queue_depth"], lim["batch_max"]) == (3, 2, 77, 5)
        assert lim["batch_preferred"] == [4, 2]
        assert "sized for" in d.log_text()
    finally:
        d.stop()
