"""A JSON body's cost in daemon memory (issue 14): whatever its shape, decoding it must not
raise the daemon's peak RSS by more than ~3x the body (the body itself, the decoded arrays, a
little working memory). Before, a 32 MB body of one-number rows ({"a": [[1], [1], ...]}) built
a cJSON tree of ~40x its size before it was even refused.

Each test starts a fresh daemon, resets its peak RSS to its current RSS (/proc/PID/clear_refs,
"5") once it is idle and ready, sends one big body, and reads VmHWM back. The CPU backend only
(cuda adds pinned staging buffers of its own), and not under ASan (its shadow memory and
quarantine are not the daemon's). Also here: the other decoder refusals of the same change
(a matrix member given twice, NaN in a KServe float histogram)."""

import json

import numpy as np
import pytest

from conftest import BACKEND, BIN, assert_error

BODY_MB = 32
PEAK_LIMIT = 3.0  # peak RSS growth / body

memory_test = pytest.mark.skipif(
    BACKEND != "cpu" or "asan" in BIN,
    reason="peak RSS is the JSON decoder's only on the plain CPU build")


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {key} in /proc/{pid}/status")


class PeakRss:
    """Peak RSS growth of a daemon from now on, in bytes."""

    def __init__(self, daemon):
        self.pid = daemon.proc.pid
        with open(f"/proc/{self.pid}/clear_refs", "w") as f:
            f.write("5")  # VmHWM := VmRSS
        self.base_kb = status_kb(self.pid, "VmRSS")

    def growth(self):
        return (status_kb(self.pid, "VmHWM") - self.base_kb) * 1024


@pytest.fixture
def fresh(start_daemon):
    return start_daemon("--workers", "1", "--http-threads", "2")


def rows_body(prefix, row, suffix, nbytes=BODY_MB * 10**6):
    """prefix + row repeated (comma-separated) to about nbytes + suffix."""
    n = nbytes // (len(row) + 1)
    return prefix + b",".join([row] * n) + suffix, n


def post_measured(daemon, path, body, headers=None):
    peak = PeakRss(daemon)
    r = daemon.post(path, data=body,
                    headers=headers or {"Content-Type": "application/json"})
    ratio = peak.growth() / len(body)
    print(f"{path} {len(body)}-byte body: {r.status_code}, peak RSS +{ratio:.2f}x the body")
    return r, ratio


@memory_test
@pytest.mark.parametrize("row", [b"[1]", b"[0.5,1]", b"[" + b",".join([b"0.25"] * 15) + b"]"],
                         ids=["rows-of-1", "rows-of-2", "rows-of-15"])
def test_nested_rows_peak_rss(fresh, row):
    body, rows = rows_body(b'{"kernel":"reference","a":[', row, b"]}")
    r, ratio = post_measured(fresh, "/v1/ata", body)
    assert r.status_code == 200, r.text[:500]
    cols = row.count(b",") + 1
    values = np.array(json.loads(row), np.float64)
    res = r.json()["result"]
    assert (res["rows"], res["cols"]) == (cols, cols)
    want = rows * np.outer(values, values)
    np.testing.assert_allclose(np.array(res["data"]).reshape(cols, cols), want, rtol=1e-6)
    assert ratio <= PEAK_LIMIT, f"peak RSS grew {ratio:.2f}x the {len(body)}-byte body"


@memory_test
def test_issue_body_refused_without_a_tree(fresh):
    """The issue's body: histogram data as one-number rows, refused as before (data[0] is a
    list), but without building a parse tree of it first."""
    body, _ = rows_body(b'{"data":[', b"[1]", b"]}")
    r, ratio = post_measured(fresh, "/v1/histogram", body)
    e = assert_error(r, 400, "invalid_field", field="data[0]")
    assert e["message"] == "data[0] must be a number, got a list"
    assert ratio <= PEAK_LIMIT, f"peak RSS grew {ratio:.2f}x the {len(body)}-byte body"


@memory_test
def test_ragged_rows_error_and_peak_rss(fresh):
    body, rows = rows_body(b'{"a":[', b"[1,2]", b",[3]]}")
    r, ratio = post_measured(fresh, "/v1/ata", body)
    e = assert_error(r, 400, "invalid_field", field=f"a[{rows}]")
    assert e["message"] == f"a[{rows}] has 1 numbers but a[0] has 2: rows must be equally long"
    assert ratio <= PEAK_LIMIT, f"peak RSS grew {ratio:.2f}x the {len(body)}-byte body"


@memory_test
def test_values_outside_numeric_arrays_are_bounded(fresh):
    """Rows of numbers with one string among them are no numeric array: cJSON would get them
    all. Its allocations are bounded, so this is a 413 naming the field, not 40x the body."""
    body, _ = rows_body(b'{"a":[', b"[1]", b',["x"]]}')
    r, ratio = post_measured(fresh, "/v1/ata", body)
    e = assert_error(r, 413, "too_large", field="a")
    assert "parse tree" in e["message"], e
    assert ratio <= PEAK_LIMIT, f"peak RSS grew {ratio:.2f}x the {len(body)}-byte body"


@memory_test
@pytest.mark.parametrize("nested", [True, False], ids=["nested", "flat"])
def test_kserve_tensor_peak_rss(fresh, nested):
    n = BODY_MB * 10**6 // 4  # "[1]," or "0.5,": 4 bytes a number, as many as float32 takes
    data = b"[" + b",".join([b"[1]" if nested else b"0.5"] * n) + b"]"
    shape = [n, 1]
    body = (b'{"parameters":{"kernel":"reference"},"inputs":[{"name":"a","datatype":"FP32","shape":'
            + json.dumps(shape).encode() + b',"data":' + data + b"}]}")
    r, ratio = post_measured(fresh, "/v2/models/ata/infer", body)
    assert r.status_code == 200, r.text[:500]
    assert r.json()["outputs"][0]["data"] == [float(n) if nested else n * 0.25]
    assert ratio <= PEAK_LIMIT, f"peak RSS grew {ratio:.2f}x the {len(body)}-byte body"


# -- the decoder's other refusals of this change ---------------------------------------------------

@pytest.mark.parametrize("a,field", [
    ({"rows": 2, "cols": 1, "data": [1, 2]}, None),
    ('{"rows": 2, "rows": 3, "cols": 1, "data": [1, 2]}', "a.rows"),
    ('{"rows": 2, "cols": 1, "cols": 1, "data": [1, 2]}', "a.cols"),
    ('{"rows": 2, "cols": 1, "data": [1, 2], "data": [3, 4]}', "a.data"),
])
def test_matrix_member_twice(daemon, a, field):
    """{"rows": 2, "rows": 3} was read as its first rows; now it is refused, naming it."""
    text = a if isinstance(a, str) else json.dumps(a)
    r = daemon.post("/v1/ata", data='{"a": ' + text + "}",
                    headers={"Content-Type": "application/json"})
    if field is None:
        assert r.status_code == 200, r.text
        return
    e = assert_error(r, 400, "invalid_field", field=field)
    assert "appears twice" in e["message"], e


def test_top_level_member_twice(daemon):
    r = daemon.post("/v1/ata", data='{"a": [[1]], "a": [[2]]}',
                    headers={"Content-Type": "application/json"})
    assert_error(r, 400, "invalid_field", field="a")


@pytest.mark.parametrize("dtype", ["FP32", "FP64"])
@pytest.mark.parametrize("with_range", [True, False], ids=["range", "no-range"])
def test_kserve_float_histogram_refuses_nan(daemon, dtype, with_range):
    """A NaN has no bin: with a range numpy would drop it and the client would never know."""
    x = np.array([0.5, 0.25, np.nan, 0.75], np.float32 if dtype == "FP32" else np.float64)
    head = {"inputs": [{"name": "data", "datatype": dtype, "shape": [4],
                        "parameters": {"binary_data_size": x.nbytes}}]}
    if with_range:
        head["parameters"] = {"range_lo": 0, "range_hi": 1, "bins": 4}
    h = json.dumps(head).encode()
    r = daemon.post("/v2/models/histogram/infer", data=h + x.tobytes(),
                    headers={"Inference-Header-Content-Length": str(len(h)),
                             "Content-Type": "application/octet-stream"})
    assert r.status_code == 400, r.text
    assert "NaN" in r.json()["error"], r.text
    x[2] = 0.5  # the same request without the NaN is fine
    r = daemon.post("/v2/models/histogram/infer", data=h + x.tobytes(),
                    headers={"Inference-Header-Content-Length": str(len(h)),
                             "Content-Type": "application/octet-stream"})
    assert r.status_code == 200, r.text
