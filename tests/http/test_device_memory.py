"""A job that cannot fit device memory is answered 507 before any memory is spent, and the
daemon keeps serving. Needs the cuda backend: the CPU backend has no device memory to run out of."""
import pytest

from conftest import BACKEND

pytestmark = pytest.mark.skipif(BACKEND != "cuda", reason="device memory exists on the cuda backend only")


def test_job_larger_than_device_memory_is_507_and_next_job_runs(start_daemon):
    # AᵀA of a 1 x 400000 row: a 2 MB body, a 640 GB result, more than any one GPU holds (a
    # 90 GB result, over an 80 GB H100, fitted an H200's 139 GB: it ran, and its answer timed out)
    d = start_daemon("--max-elements", "1000000000000", "--max-body-mb", "1048576")
    n = 400000
    r = d.post("/v1/ata", {"a": {"rows": 1, "cols": n, "data": [1.0] * n}})
    assert r.status_code == 507, r.text
    assert r.json()["error"]["code"] == "device_memory"
    assert d.get("/readyz").status_code == 200
    ok = d.post("/v1/ata", {"a": [[1.0, 2.0], [3.0, 4.0]]})
    assert ok.status_code == 200, ok.text
    assert ok.json()["result"]["data"] == [10.0, 14.0, 14.0, 20.0]
