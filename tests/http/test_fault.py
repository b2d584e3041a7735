"""A sticky CUDA error (injected): readiness fails, in-flight jobs get 503 device_fault, and the
process exits 3 for its supervisor to restart it.

Runs only against a fault-injection build on a GPU (make build-fault; CRUNCHD_FAULT_INJECTION=1
CRUNCHD_BACKEND=cuda CRUNCHD_BIN=build-fault/crunchd): the switch is compiled into test builds
only, so a production daemon has no kernel that can corrupt its context.
"""
import concurrent.futures
import os
import time

import pytest

from conftest import BACKEND, JOB_TIMEOUT_S

pytestmark = pytest.mark.skipif(
    os.environ.get("CRUNCHD_FAULT_INJECTION") != "1" or BACKEND != "cuda",
    reason="needs a fault-injection build on the cuda backend (CRUNCHD_FAULT_INJECTION=1)")

GEMM = {"a": [[1.0, 2.0], [3.0, 4.0]], "b": [[5.0, 6.0], [7.0, 8.0]]}
EXIT_DEVICE_FAULT = 3


def test_sticky_error_fails_readiness_answers_inflight_and_exits(start_daemon):
    d = start_daemon("--workers", "2", "--test-hooks")
    assert d.get("/readyz").status_code == 200
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        # in flight on the other worker while the fault happens
        inflight = pool.submit(d.post, "/v1/gemm", GEMM, delay_ms=1500)
        time.sleep(0.2)  # let it reach its worker; the fault must find it running
        fault = d.post("/v1/gemm", dict(GEMM, kernel="fault-illegal-address"))
        assert fault.status_code == 503, fault.text
        assert fault.json()["error"]["code"] == "device_fault"
        ready = d.get("/readyz")
        assert ready.status_code == 503 and ready.json()["ready"] is False
        r = inflight.result(timeout=JOB_TIMEOUT_S)
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "device_fault"
    assert d.proc.wait(timeout=JOB_TIMEOUT_S) == EXIT_DEVICE_FAULT
    d.returncode = EXIT_DEVICE_FAULT
