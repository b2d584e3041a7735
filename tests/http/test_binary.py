"""Binary bodies (design.md, "Binary"): multipart .npy parts, application/x-npy, raw
application/octet-stream, query-string parameters, Accept: application/x-npy answers, and every
refusal as a precise 4xx JSON error naming the part or parameter."""

import io
import re
import struct
import time

import numpy as np
import pytest
import requests

from conftest import (BACKEND, assert_close, assert_error, gemm_ref, kernels_for,
                      parse_server_timing, rng)

NPY = {"Content-Type": "application/x-npy"}
RAW = {"Content-Type": "application/octet-stream"}
ACCEPT_NPY = {"Accept": "application/x-npy"}


def npy(a):
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=True)
    return buf.getvalue()


def npy_v(a, major, descr=None, fortran=False, shape=None, pad_to=64):
    """A .npy of format version major.0 written by hand (numpy picks 1.0 whenever it can)."""
    a = np.asarray(a)
    descr = descr or a.dtype.str
    shape = a.shape if shape is None else shape
    dict_ = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", repr(tuple(shape)))
    pre = 10 if major == 1 else 12
    total = -(-(pre + len(dict_) + 1) // pad_to) * pad_to
    header = dict_ + " " * (total - pre - len(dict_) - 1) + "\n"
    length = struct.pack("<H", len(header)) if major == 1 else struct.pack("<I", len(header))
    data = a.tobytes(order="F" if fortran else "C")
    return b"\x93NUMPY" + bytes([major, 0]) + length + header.encode() + data


def parts(**arrays):
    return {name: (f"{name}.npy", body if isinstance(body, bytes) else npy(body),
                   "application/octet-stream") for name, body in arrays.items()}


def load(r):
    assert r.status_code == 200, r.text[:500]
    assert r.headers["Content-Type"] == "application/x-npy"
    return np.load(io.BytesIO(r.content), allow_pickle=False)


def healthy(daemon):
    assert daemon.get("/healthz").status_code == 200


# ---- multipart GEMM ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("order_a,order_b", [("C", "C"), ("F", "C"), ("C", "F"), ("F", "F")])
def test_gemm_multipart_orders(daemon, dtype, order_a, order_b):
    r_ = rng(1)
    a = np.asarray(r_.uniform(-1, 1, (5, 7)), dtype=dtype, order=order_a)
    b = np.asarray(r_.uniform(-1, 1, (7, 3)), dtype=dtype, order=order_b)
    r = daemon.post("/v1/gemm", files=parts(a=a, b=b))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["dtype"] == dtype and body["result"]["rows"] == 5 and body["result"]["cols"] == 3
    got = np.asarray(body["result"]["data"]).reshape(5, 3)
    assert_close(got, gemm_ref(a, b), 7, dtype)


@pytest.mark.parametrize("trans_a,trans_b", [(False, True), (True, False), (True, True)])
@pytest.mark.parametrize("fortran", [False, True])
def test_gemm_multipart_trans_alpha_beta_c(daemon, trans_a, trans_b, fortran):
    r_ = rng(2)
    a = r_.uniform(-1, 1, (4, 6) if trans_a else (6, 4))
    b = r_.uniform(-1, 1, (5, 4) if trans_b else (4, 5))
    c = r_.uniform(-1, 1, (6, 5))
    if fortran:
        a, b, c = np.asfortranarray(a), np.asfortranarray(b), np.asfortranarray(c)
    q = f"alpha=2.5&beta=-0.5&trans_a={str(trans_a).lower()}&trans_b={int(trans_b)}"
    r = daemon.post("/v1/gemm?" + q, files=parts(a=a, b=b, c=c), headers=ACCEPT_NPY)
    got = load(r)
    assert got.shape == (6, 5) and got.dtype == np.float64 and got.flags.c_contiguous
    assert_close(got, gemm_ref(a, b, c, 2.5, -0.5, trans_a, trans_b), 4, "float64")


def test_gemm_accept_npy_headers(daemon):
    a = rng(3).uniform(-1, 1, (8, 8)).astype(np.float32)
    r = daemon.post("/v1/gemm?kernel=auto", files=parts(a=a, b=a), headers=ACCEPT_NPY)
    got = load(r)
    assert got.dtype == np.float32
    assert_close(got, gemm_ref(a, a), 8, "float32")
    h = r.headers
    assert h["X-Crunchd-Op"] == "gemm" and h["X-Crunchd-Dtype"] == "float32"
    for name in ("X-Crunchd-Job-Id", "X-Crunchd-Kernel", "X-Crunchd-Backend", "X-Crunchd-Device"):
        assert h.get(name), (name, h)
    assert float(h["X-Crunchd-Gflops"]) >= 0
    assert set(parse_server_timing(h["Server-Timing"])) >= {"queue", "h2d", "kernel", "d2h", "total"}
    assert int(h["Content-Length"]) == len(r.content)


def test_gemm_tf32_needs_float32(daemon):
    a = np.ones((2, 2))
    r = daemon.post("/v1/gemm?precision=tf32", files=parts(a=a, b=a))
    assert_error(r, 400, "unsupported", field="precision")


# ---- x-npy bodies: ata and histogram ---------------------------------------------------------

@pytest.mark.parametrize("major", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fortran", [False, True])
def test_ata_npy_versions(daemon, major, dtype, fortran):
    a = rng(4).uniform(-1, 1, (9, 5)).astype(dtype)
    r = daemon.post("/v1/ata", data=npy_v(a, major, fortran=fortran), headers={**NPY, **ACCEPT_NPY})
    got = load(r)
    assert got.shape == (5, 5) and got.dtype == np.dtype(dtype)
    assert_close(got, a.astype(np.float64).T @ a.astype(np.float64), 9, dtype)


def test_ata_multipart_and_json_answer(daemon):
    a = np.asfortranarray(rng(5).uniform(-1, 1, (6, 4)))
    r = daemon.post("/v1/ata", files=parts(a=a))
    assert r.status_code == 200, r.text
    got = np.asarray(r.json()["result"]["data"]).reshape(4, 4)
    assert_close(got, a.T @ a, 6, "float64")


INT_DTYPES = ["int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"]


@pytest.mark.parametrize("dtype", INT_DTYPES + ["float32", "float64"])
def test_histogram_npy_dtypes_numpy_defaults(daemon, kernels, dtype):
    info = np.iinfo(dtype) if dtype.startswith(("int", "uint")) else None
    lo, hi = (max(info.min, -1000), min(info.max, 1000)) if info else (-3, 3)
    x = rng(6).uniform(lo, hi, 5000).astype(dtype)
    r = daemon.post("/v1/histogram", data=npy(x), headers=NPY)
    if not kernels_for(kernels, "histogram", dtype):  # cuda offers uint8/float32/float64 for now
        assert_error(r, 400, "unsupported", field="dtype")
        return
    assert r.status_code == 200, r.text
    counts, edges = np.histogram(x)
    res = r.json()["result"]
    assert res["counts"] == counts.tolist()
    np.testing.assert_allclose(res["edges"], edges, rtol=1e-6, atol=1e-6 * float(np.ptp(edges)))


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_histogram_int_dtypes_every_kernel(daemon, kernels, dtype):
    """Every histogram kernel takes every integer dtype (binned as float64, as numpy bins them):
    an odd length and bin count, edges between integers, values on either side of each edge,
    and the type's extremes (which round on their way to float64 for 64-bit types)."""
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -997), min(int(info.max), 1003)
    edges = np.linspace(lo, hi, 14)
    near = np.concatenate([np.floor(edges) - 1, np.floor(edges), np.ceil(edges)])
    vals = [int(v) for v in near] + [int(info.min), int(info.max), lo - 1, hi + 1] + \
        rng(13).integers(lo - 60, hi + 60, 10007 - len(near) - 4).tolist()
    x = np.array([min(max(v, int(info.min)), int(info.max)) for v in vals], dtype=dtype)
    want, _ = np.histogram(x, bins=13, range=(lo, hi))
    names = kernels_for(kernels, "histogram", dtype)
    if not names:  # cuda offers uint8/float32/float64 for now (kernels/registry.c)
        assert_error(daemon.post("/v1/histogram", data=npy(x), headers=NPY), 400, "unsupported", field="dtype")
        return
    for name in names:
        r = daemon.post(f"/v1/histogram?kernel={name}&bins=13&range={lo},{hi}", data=npy(x), headers=NPY)
        assert r.status_code == 200, f"{name}: {r.text}"
        assert r.json()["result"]["counts"] == want.tolist(), name


def test_histogram_any_rank_flattened_and_range(daemon):
    x = rng(7).normal(size=(10, 20, 30)).astype(np.float32)
    r = daemon.post("/v1/histogram?bins=7&range=-1,2", data=npy(np.asfortranarray(x)),
                    headers={**NPY, **ACCEPT_NPY})
    counts = load(r)
    assert counts.dtype == np.uint64 and counts.shape == (7,)
    want, edges = np.histogram(x, bins=7, range=(-1, 2))
    assert counts.tolist() == want.tolist()
    assert r.headers["X-Crunchd-Range"] == "-1,2"
    np.testing.assert_allclose([float(e) for e in r.headers["X-Crunchd-Edges"].split(",")], edges,
                               rtol=1e-6)
    r2 = daemon.post("/v1/histogram?bins=7&range_lo=-1&range_hi=2", data=npy(x), headers=NPY)
    assert r2.json()["result"]["counts"] == want.tolist()


def test_histogram_edges_header_only_when_small(daemon):
    x = rng(8).uniform(0, 1, 1000)
    r = daemon.post("/v1/histogram?bins=5000", data=npy(x), headers={**NPY, **ACCEPT_NPY})
    assert load(r).shape == (5000,)
    assert "X-Crunchd-Edges" not in r.headers and r.headers["X-Crunchd-Range"]


def test_histogram_uint8_npy_and_raw(daemon):
    x = rng(9).integers(0, 256, 100_000, dtype=np.uint8)
    want = np.bincount(x, minlength=256).tolist()
    r = daemon.post("/v1/histogram", data=npy(x), headers=NPY)
    assert r.json()["result"]["counts"] == want and "edges" not in r.json()["result"]
    r = daemon.post("/v1/histogram", data=x.tobytes(), headers={**RAW, **ACCEPT_NPY})
    assert load(r).tolist() == want
    r = daemon.post("/v1/histogram?bins=4", data=x.tobytes(), headers=RAW)
    assert r.json()["result"]["counts"] == np.histogram(x, bins=4, range=(0, 256))[0].tolist()


def test_histogram_multipart_and_empty(daemon):
    r = daemon.post("/v1/histogram", files=parts(data=np.zeros(0, np.float64)))
    assert r.status_code == 200, r.text
    assert r.json()["result"]["counts"] == [0] * 10
    r = daemon.post("/v1/histogram", data=b"", headers=RAW)
    assert r.status_code == 200 and r.json()["result"]["counts"] == [0] * 256


def test_async_jobs_binary(daemon):
    a = rng(10).uniform(-1, 1, (16, 8))
    r = daemon.post("/v1/jobs?op=ata", data=npy(a), headers=NPY)
    assert r.status_code == 202, r.text
    job = r.json()["id"]
    daemon.wait_job(job)
    r = daemon.get(f"/v1/jobs/{job}/result", headers=ACCEPT_NPY)
    assert_close(load(r), a.T @ a, 16, "float64")
    r = daemon.post("/v1/jobs", data=npy(a), headers=NPY)
    assert_error(r, 400, "invalid_parameter", field="op")


# ---- refusals ---------------------------------------------------------------------------------

GOOD = np.ones((3, 3), np.float32)


@pytest.mark.parametrize("body,field_ok", [
    (npy(np.ones(3, ">f4")), "big-endian"),
    (npy(np.array([1, "x"], dtype=object)), "object"),
    (npy(np.zeros(3, [("x", "<f4"), ("y", "<i4")])), "structured"),
    (npy(np.zeros(3, np.complex64)), "unsupported"),
    (npy(np.zeros(3, np.float16)), "unsupported"),
    (npy(np.zeros(3, np.bool_)), "unsupported"),
    (b"\x93NUMPX" + npy(GOOD)[6:], "magic"),
    (b"not a npy at all, nothing like it", "magic"),
    (npy(GOOD)[:40], "header"),
    (npy(GOOD)[:-1], "truncated"),
    (npy(GOOD) + b"\0", "more data"),
    (npy_v(GOOD, 1, shape=(3, 4)), "truncated"),
    (npy_v(GOOD, 1, shape=(2, 2)), "more data"),
    (npy_v(GOOD, 4), "version"),
    (npy_v(GOOD, 1, descr="<f4', 'x': ('1"), "dict"),
])
def test_npy_refusals(daemon, body, field_ok):
    r = daemon.post("/v1/histogram", data=body, headers=NPY)
    e = assert_error(r, 400, "invalid_field", field="data")
    assert field_ok.split()[0].lower() in e["message"].lower() or e["message"], e
    healthy(daemon)


def test_header_too_long(daemon):
    body = b"\x93NUMPY\x02\x00" + struct.pack("<I", 70000) + b" " * 100
    assert_error(daemon.post("/v1/ata", data=body, headers=NPY), 413, "too_large", field="a")
    healthy(daemon)


def test_wrong_rank_and_dtype_for_matrices(daemon):
    assert_error(daemon.post("/v1/ata", data=npy(np.ones(4)), headers=NPY), 400, "invalid_field",
                 field="a")
    assert_error(daemon.post("/v1/ata", data=npy(np.ones((1,) * 9)), headers=NPY), 400,  # rank 9: past 8
                 "invalid_field", field="a")
    assert_error(daemon.post("/v1/ata", data=npy(np.ones((2, 2), np.int32)), headers=NPY), 400,
                 "invalid_field", field="a")
    assert_error(daemon.post("/v1/gemm", files=parts(a=GOOD, b=GOOD.astype(np.float64))), 400,
                 "invalid_field", field="b")
    assert_error(daemon.post("/v1/gemm", files=parts(a=np.ones((0, 3), np.float32), b=GOOD)), 400,
                 "invalid_field", field="a")


def test_multipart_refusals(daemon):
    assert_error(daemon.post("/v1/gemm", files=parts(a=GOOD)), 400, "missing_field", field="b")
    assert_error(daemon.post("/v1/gemm", files=parts(b=GOOD)), 400, "missing_field", field="a")
    assert_error(daemon.post("/v1/gemm", files=parts(a=GOOD, b=GOOD, x=GOOD)), 400,
                 "invalid_field", field="x")
    assert_error(daemon.post("/v1/gemm", files=parts(a=GOOD, b=npy(GOOD)[:-4])), 400,
                 "invalid_field", field="b")
    assert_error(daemon.post("/v1/gemm", files=parts(a=GOOD, b=np.ones((4, 2), np.float32))), 422,
                 "shape_mismatch", field="b")
    assert_error(daemon.post("/v1/gemm", files=parts(a=GOOD, b=GOOD, c=np.ones((2, 3), np.float32))),
                 422, "shape_mismatch", field="c")
    dup = [("a", ("a.npy", npy(GOOD))), ("a", ("a.npy", npy(GOOD))), ("b", ("b.npy", npy(GOOD)))]
    assert_error(daemon.post("/v1/gemm", files=dup), 400, "invalid_field", field="a")
    no_end = (b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"; filename=\"a.npy\"\r\n\r\n"
              + npy(GOOD))
    r = daemon.post("/v1/ata", data=no_end, headers={"Content-Type": "multipart/form-data; boundary=XyZ"})
    assert_error(r, 400, "invalid_field")
    r = daemon.post("/v1/ata", data=b"x", headers={"Content-Type": "multipart/form-data"})
    assert_error(r, 400, "invalid_field", field="Content-Type")
    healthy(daemon)


@pytest.mark.parametrize("query,field", [
    ("bogus=1", "bogus"),
    ("dtype=float32", "dtype"),
    ("alpha=abc", "alpha"),
    ("alpha=nan", "alpha"),
    ("beta=1e999", "beta"),
    ("trans_a=maybe", "trans_a"),
    ("precision=fp16", "precision"),
    ("kernel=BAD!", "kernel"),
    ("timeout_ms=0", "timeout_ms"),
    ("timeout_ms=-5", "timeout_ms"),
    ("alpha=1&alpha=2", "alpha"),
    ("bins=10", "bins"),
    ("op=ata", "op"),
])
def test_bad_query_gemm(daemon, query, field):
    r = daemon.post("/v1/gemm?" + query, files=parts(a=GOOD, b=GOOD))
    assert_error(r, 400, "invalid_parameter", field=field)


@pytest.mark.parametrize("query,status,code,field", [
    ("bins=0", 400, "invalid_parameter", "bins"),
    ("bins=x", 400, "invalid_parameter", "bins"),
    ("bins=99999999999", 413, "too_large", "bins"),
    ("range=1", 400, "invalid_parameter", "range"),
    ("range=2,1", 400, "invalid_parameter", "range"),
    ("range=0,inf", 400, "invalid_parameter", "range"),
    ("range_lo=0", 400, "invalid_parameter", "range_hi"),
    ("range=0,1&range_lo=0&range_hi=1", 400, "invalid_parameter", "range"),
    ("alpha=2", 400, "invalid_parameter", "alpha"),
])
def test_bad_query_histogram(daemon, query, status, code, field):
    r = daemon.post("/v1/histogram?" + query, data=b"\x01\x02", headers=RAW)
    assert_error(r, status, code, field=field)


def test_content_type_refusals(daemon):
    assert_error(daemon.post("/v1/gemm", data=b"x", headers={"Content-Type": "text/plain"}), 415,
                 "unsupported_media_type", field="Content-Type")
    assert_error(daemon.post("/v1/gemm", data=npy(GOOD), headers=NPY), 415,
                 "unsupported_media_type", field="Content-Type")
    assert_error(daemon.post("/v1/ata", data=b"xx", headers=RAW), 415, "unsupported_media_type",
                 field="Content-Type")
    healthy(daemon)


def test_octet_stream_needs_length(daemon):
    def chunks():
        yield b"\x01\x02\x03"
    r = daemon.post("/v1/histogram", data=chunks(), headers=RAW)
    assert_error(r, 411, "length_required", field="Content-Length")


def test_chunked_npy_streams(daemon):
    x = rng(11).uniform(0, 1, 20000)
    body = npy(x)

    def chunks():  # awkward chunk sizes: inside the magic, the header and elements
        for i in range(0, len(body), 777):
            yield body[i:i + 777]
    r = daemon.post("/v1/histogram?range=0,1", data=chunks(), headers=NPY)
    assert r.status_code == 200, r.text
    assert r.json()["result"]["counts"] == np.histogram(x, range=(0, 1))[0].tolist()


def test_limits(start_daemon):
    d = start_daemon("--max-body-mb", "1", "--max-json-mb", "1", "--max-elements", "1000")
    big = np.ones((40, 40), np.float32)   # 1600 elements: over --max-elements
    assert_error(d.post("/v1/ata", data=npy(big), headers=NPY), 413, "too_large", field="a")
    assert_error(d.post("/v1/gemm", files=parts(a=np.ones((10, 10), np.float32), b=big)), 413,
                 "too_large", field="b")
    assert_error(d.post("/v1/histogram", data=b"\0" * (2 << 20), headers=RAW), 413, "too_large",
                 field="body")
    lie = npy_v(np.ones(4, np.float32), 1, shape=(100000, 100000))  # claims 40 GB: refused unallocated
    assert_error(d.post("/v1/histogram", data=lie, headers=NPY), 413, "too_large", field="data")
    assert d.get("/healthz").status_code == 200


def vm_hwm_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_big_upload_rss(start_daemon):
    """A 256 MiB raw histogram upload raises the daemon's peak RSS by at most 1.2x the body:
    the bytes go straight into the one array, never through a whole-body buffer."""
    d = start_daemon("--workers", "1")
    size = 256 << 20
    body = np.random.default_rng(12).integers(0, 256, size, dtype=np.uint8).tobytes()
    before = vm_hwm_bytes(d.proc.pid)
    r = d.post("/v1/histogram", data=body, headers=RAW)
    assert r.status_code == 200, r.text[:300]
    assert sum(r.json()["result"]["counts"]) == size
    grew = vm_hwm_bytes(d.proc.pid) - before
    assert grew <= 1.2 * size, f"peak RSS grew by {grew / 2**20:.0f} MiB for a {size >> 20} MiB body"


def test_client_gone_mid_upload(daemon):
    """A client that hangs up inside a body leaves nothing behind (the ASan run checks leaks)."""
    import socket
    for ctype, body in (("application/x-npy", npy(np.ones(1 << 16))),
                        ("application/octet-stream", b"\1" * 100000),
                        ("multipart/form-data; boundary=XyZ",
                         b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"; filename=\"a\"\r\n\r\n"
                         + npy(np.ones((256, 256))))):
        path = "/v1/ata" if ctype.startswith("multipart") else "/v1/histogram"
        s = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
        head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body) * 2}\r\n\r\n").encode()
        s.sendall(head + body[: len(body) // 2])
        s.close()
    healthy(daemon)
    r = daemon.post("/v1/histogram", data=b"\0\1", headers=RAW)
    assert r.status_code == 200 and sum(r.json()["result"]["counts"]) == 2


# ---- big inputs: on cuda, copied to the device while they arrive (kernels/cuda/prefetch.cu) ----

def test_big_gemm_every_part_over_the_prefetch_size(daemon):
    """a, b and c over 8 MiB each, Fortran-ordered c (scattered on arrival, never prefetched)
    and c in C order (prefetched but overwritten in place, so the worker copies it itself);
    twice each, so the second run reuses cached pinned blocks."""
    g = rng(31)
    a = g.standard_normal((1600, 1500)).astype(np.float32)
    b = g.standard_normal((1500, 1700)).astype(np.float32)
    c = g.standard_normal((1600, 1700)).astype(np.float32)
    ref = gemm_ref(a, b, c, alpha=0.5, beta=2.0)
    kernels = ["auto", "cublas", "dbuf"] if BACKEND == "cuda" else ["auto"]
    for kernel in kernels:
        for c_sent in (c, np.asfortranarray(c), c):
            r = daemon.post(f"/v1/gemm?alpha=0.5&beta=2&kernel={kernel}",
                            files=parts(a=a, b=b, c=c_sent), headers=ACCEPT_NPY)
            assert_close(load(r), ref, 1500, "float32", what=f"kernel={kernel}")


def device_bytes(daemon, direction="in"):
    m = re.search(rf'^crunchd_device_stream_bytes_total{{direction="{direction}"}} (\d+)$', daemon.metrics_text(), re.M)
    assert m, "crunchd_device_stream_bytes_total not in /metrics"
    return int(m.group(1))


SUNK = BACKEND == "cuda"  # only cuda has a sink (backend.h, sink_*)


def held_bytes(daemon):
    return sum(int(v) for v in re.findall(r"^crunchd_device_stream_held_bytes\{[^}]*\} (\d+)$",
                                          daemon.metrics_text(), re.M))


def wait_released(daemon, timeout=10):
    """Polls until no upload or result holds device memory: a request's buffers go when the
    request ends, which may be a moment after its client has read the answer."""
    deadline = time.monotonic() + timeout
    while held_bytes(daemon) and time.monotonic() < deadline:
        time.sleep(0.01)
    return held_bytes(daemon)


def post_new(daemon, path, **kw):
    """On a connection of its own: the acceptor decides between the direct path and
    libmicrohttpd by a connection's first request, and the session's may have gone to the latter."""
    return requests.post(daemon.url(path), timeout=120, **kw)


def test_big_matrices_received_straight_to_the_device(daemon):
    """On cuda, every matrix part of 8 MiB or more is received through a ring of staging slots
    into device memory (kernels/cuda/device_sink.cu): the metric counts exactly those bytes, and
    the answers are numpy's. What must stay on the host does: a Fortran-ordered c (scattered on
    arrival), histogram data (its checks read it), compare mode's inputs, parts under 8 MiB."""
    g = rng(35)
    a = g.standard_normal((1536, 1600)).astype(np.float32)  # 9.8 MB
    b = g.standard_normal((1600, 1408)).astype(np.float32)  # 9.0 MB
    c = g.standard_normal((1536, 1408)).astype(np.float32)  # 8.6 MB
    small = g.standard_normal((1600, 64)).astype(np.float32)
    cases = [  # (query, parts, reference, bytes expected on the device)
        ("", dict(a=a, b=b), gemm_ref(a, b), a.nbytes + b.nbytes),
        ("?alpha=0.5&beta=2", dict(a=a, b=b, c=c), gemm_ref(a, b, c, 0.5, 2.0), a.nbytes + b.nbytes + c.nbytes),
        ("?alpha=0.5&beta=2", dict(a=a, b=b, c=np.asfortranarray(c)), gemm_ref(a, b, c, 0.5, 2.0), a.nbytes + b.nbytes),
        ("?trans_a=1", dict(a=np.asfortranarray(a.T), b=b), gemm_ref(a, b), a.nbytes + b.nbytes),
        ("?kernel=" + ("dbuf" if SUNK else "auto"), dict(a=a, b=small), gemm_ref(a, small), a.nbytes),
    ]
    for query, arrays, ref, sunk in cases:
        before, out = device_bytes(daemon), device_bytes(daemon, "out")
        r = post_new(daemon, f"/v1/gemm{query}", files=parts(**arrays), headers=ACCEPT_NPY)
        assert_close(load(r), ref, 1600, "float32", what=query)
        assert device_bytes(daemon) - before == (sunk if SUNK else 0), query
        # a result of 8 MiB or more, of a job on the device its inputs went to, is sent from there
        streamed = ref.size * 4 if SUNK and ref.size * 4 >= 8 << 20 else 0
        assert device_bytes(daemon, "out") - out == streamed, query
    before, out = device_bytes(daemon), device_bytes(daemon, "out")
    r = post_new(daemon, "/v1/ata", data=npy(a), headers={**NPY, **ACCEPT_NPY})
    assert_close(load(r), a.astype(np.float64).T @ a.astype(np.float64), 1536, "float32", what="ata")
    data = g.standard_normal(3 << 20).astype(np.float32)
    r = daemon.post("/v1/histogram?bins=7", data=npy(data), headers=NPY)
    assert r.status_code == 200 and sum(r.json()["result"]["counts"]) == data.size
    assert device_bytes(daemon) - before == (a.nbytes if SUNK else 0)
    assert device_bytes(daemon, "out") - out == (1600 * 1600 * 4 if SUNK else 0)
    assert wait_released(daemon) == 0  # every buffer went with its request
    caps = [int(v) for v in re.findall(r"^crunchd_device_stream_cap_bytes\{[^}]*\} (\d+)$",
                                       daemon.metrics_text(), re.M)]
    assert caps and (min(caps) > 0 if SUNK else max(caps) == 0), caps  # cuda: sized by the first upload


def test_big_results_left_on_the_device_only_for_npy_answers(daemon):
    """A JSON answer, and an async job's result (fetched later, in either form), come from host
    memory: only a sync .npy answer is sent from the device."""
    g = rng(39)
    a = g.standard_normal((1536, 1600)).astype(np.float32)
    b = g.standard_normal((1600, 1408)).astype(np.float32)
    ref = gemm_ref(a, b)
    out = device_bytes(daemon, "out")
    r = post_new(daemon, "/v1/gemm", files=parts(a=a, b=b))
    assert r.status_code == 200, r.text[:300]
    got = np.asarray(r.json()["result"]["data"], np.float32).reshape(ref.shape)
    assert_close(got, ref, 1600, "float32", what="json")
    r = post_new(daemon, "/v1/jobs?op=gemm", files=parts(a=a, b=b), headers=ACCEPT_NPY)
    assert r.status_code == 202, r.text[:300]
    job = r.json()["id"]
    daemon.wait_job(job)
    r = daemon.get(f"/v1/jobs/{job}/result", headers=ACCEPT_NPY)
    assert_close(load(r), ref, 1600, "float32", what="async")
    assert device_bytes(daemon, "out") == out


def test_big_half_gemm_received_straight_to_the_device(daemon):
    g = rng(36)
    a = g.standard_normal((2304, 2048)).astype(np.float16)  # 9.4 MB
    b = g.standard_normal((2048, 2560)).astype(np.float16)  # 10.5 MB
    before, out = device_bytes(daemon), device_bytes(daemon, "out")
    r = post_new(daemon, "/v1/gemm", files=parts(a=a, b=b), headers=ACCEPT_NPY)
    got = load(r)
    assert device_bytes(daemon, "out") - out == (got.nbytes if SUNK else 0)
    assert got.dtype == np.float16
    ref = a.astype(np.float32) @ b.astype(np.float32)
    assert np.max(np.abs(got.astype(np.float32) - ref)) <= 0.02 * np.max(np.abs(ref))
    assert device_bytes(daemon) - before == ((a.nbytes + b.nbytes) if SUNK else 0)


def test_big_upload_abandoned_mid_part_then_whole(daemon):
    """A client that hangs up inside a part being received to the device: its sink (device
    buffer, staging slots) goes, and the same upload whole is right afterwards."""
    import socket
    g = rng(37)
    a = g.standard_normal((2048, 1536)).astype(np.float32)
    body = npy(a)
    for cut in (len(body) // 3, len(body) - 5):
        s = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
        s.sendall((f"POST /v1/ata HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body[:cut])
        s.close()
    healthy(daemon)
    r = daemon.post("/v1/ata", data=body, headers={**NPY, **ACCEPT_NPY})
    assert_close(load(r), a.astype(np.float64).T @ a.astype(np.float64), 2048, "float32")


def test_client_gone_while_a_big_result_is_sent(daemon):
    """A client that reads the head of a 16 MiB .npy answer and hangs up: the rest of the send
    fails, the connection closes, and the result (on cuda, left on the device and sent from a
    staging ring) is freed with its job; the next request is answered whole."""
    import socket
    g = rng(40)
    a = g.standard_normal((2048, 1536)).astype(np.float32)
    body = npy(a)
    head = (f"POST /v1/ata HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
            f"Accept: application/x-npy\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    for _ in range(2):
        s = socket.create_connection(("127.0.0.1", daemon.port), timeout=60)
        s.sendall(head + body)
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        s.close()
    healthy(daemon)
    r = daemon.post("/v1/ata", data=body, headers={**NPY, **ACCEPT_NPY})
    assert_close(load(r), a.astype(np.float64).T @ a.astype(np.float64), 2048, "float32")


@pytest.mark.skipif(BACKEND != "cuda", reason="only cuda receives to a device")
def test_uploads_take_at_most_their_share_of_the_device(start_daemon):
    """CRUNCHD_SINK_MAX_MB caps the device memory that uploads being received or waiting hold:
    with 12 MiB, a (9.8 MB) is received to the device, b (9 MB) no longer fits and lands in host
    memory; both are given back with the request, so the next one gets the same share again."""
    g = rng(41)
    a = g.standard_normal((1536, 1600)).astype(np.float32)
    b = g.standard_normal((1600, 1408)).astype(np.float32)
    d = start_daemon(env={"CRUNCHD_SINK_MAX_MB": "12"})
    for i in range(1, 3):
        r = post_new(d, "/v1/gemm", files=parts(a=a, b=b), headers=ACCEPT_NPY)
        assert_close(load(r), gemm_ref(a, b), 1600, "float32", what=str(i))
        assert device_bytes(d) == i * a.nbytes
        assert wait_released(d) == 0
    d.stop()


@pytest.mark.skipif(BACKEND != "cuda", reason="only cuda receives to a device")
def test_big_matrices_through_libmicrohttpd_reach_the_device_too(start_daemon):
    """With --direct-min-kb 0 libmicrohttpd reads every body and hands it over in pieces of its
    buffer: those go through the sink as well, and the result is read back from the device into
    libmicrohttpd's buffer piece by piece; with CRUNCHD_SINK_MIN_MB=0 nothing is."""
    g = rng(38)
    a = g.standard_normal((1536, 1600)).astype(np.float32)
    b = g.standard_normal((1600, 1408)).astype(np.float32)
    out = a.shape[0] * b.shape[1] * 4
    for env, sunk, sent in (({}, a.nbytes + b.nbytes, out), ({"CRUNCHD_SINK_MIN_MB": "0"}, 0, 0)):
        d = start_daemon("--direct-min-kb", "0", env=env)
        for _ in range(2):  # the second on the same kept-alive connection
            r = d.post("/v1/gemm", files=parts(a=a, b=b), headers=ACCEPT_NPY)
            assert_close(load(r), gemm_ref(a, b), 1600, "float32", what=str(env))
            assert int(r.headers["Content-Length"]) == out + 128
        assert device_bytes(d) == 2 * sunk, env
        assert device_bytes(d, "out") == 2 * sent, env
        d.stop()


@pytest.mark.skipif(BACKEND != "cuda", reason="compare mode on 1500-cubed is minutes on the CPU reference")
def test_big_gemm_compare_mode_reads_the_prefetched_inputs_every_run(daemon):
    g = rng(32)
    a = g.standard_normal((1500, 1500)).astype(np.float32)
    b = g.standard_normal((1500, 1500)).astype(np.float32)
    r = daemon.post("/v1/gemm?kernel=all", files=parts(a=a, b=b))
    assert r.status_code == 200, r.text[:300]
    runs = r.json()["kernels"]
    assert len(runs) >= 6 and all(k["status"] == "ok" for k in runs), runs
    tf32 = {k["name"] for k in daemon.get("/v1/kernels").json()["kernels"] if k["precision"] == "tf32"}
    assert "tc-3xtf32" in {k["kernel"] for k in runs}, runs  # FP32's error class: held to 1e-4 below
    assert max(k["max_rel_error"] for k in runs if k["kernel"] not in tf32) < 1e-4, runs


def test_big_upload_abandoned_then_the_same_size_again(daemon):
    """A client that hangs up half-way through a 24 MiB body: its buffer (and, on cuda, its early
    device copy) is dropped; the next body of the same size likely gets the same pinned block and
    must be counted from its own bytes."""
    import socket
    size = 24 << 20
    first = b"\x07" * size
    s = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
    s.sendall((f"POST /v1/histogram HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream"
               f"\r\nContent-Length: {size}\r\n\r\n").encode() + first[: size // 2])
    s.close()
    healthy(daemon)
    second = rng(33).integers(0, 256, size, dtype=np.uint8)
    r = daemon.post("/v1/histogram", data=second.tobytes(), headers=RAW)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["result"]["counts"] == np.bincount(second, minlength=256).tolist()


def test_server_timing_has_receive_for_uploads(daemon):
    """receive: headers to job queued (the body's transfer and decoding), in Server-Timing and in
    timings_ms alike; for a 20 MiB upload it is the biggest share of the wait."""
    body = rng(34).integers(0, 256, 20 << 20, dtype=np.uint8).tobytes()
    r = daemon.post("/v1/histogram", data=body, headers=RAW)
    assert r.status_code == 200, r.text[:300]
    st = parse_server_timing(r.headers["Server-Timing"])
    t = r.json()["timings_ms"]
    assert list(st)[0] == "receive" and set(st) == set(t), (st, t)
    assert t["receive"] > 0 and abs(st["receive"] - t["receive"]) <= 0.01 + 1e-3 * t["receive"]
    r = daemon.post("/v1/histogram", data=body, headers={**RAW, **ACCEPT_NPY})
    assert parse_server_timing(r.headers["Server-Timing"])["receive"] > 0


@pytest.mark.skipif(BACKEND != "cuda", reason="the upload-time device copies are cuda's")
def test_big_upload_is_on_the_device_when_it_ends(daemon):
    """128 MiB would take ~2.4 ms to copy at 55 GB/s after the upload; copied while it arrives,
    only the last chunk (<= 4 MiB, ~0.08 ms) is left for the h2d phase."""
    body = rng(35).integers(0, 256, 128 << 20, dtype=np.uint8)
    r = daemon.post("/v1/histogram?kernel=smem-vec", data=body.tobytes(), headers=RAW)
    assert r.status_code == 200, r.text[:300]
    assert r.json()["result"]["counts"] == np.bincount(body, minlength=256).tolist()
    st = parse_server_timing(r.headers["Server-Timing"])
    assert st["h2d"] < 1.0, st


def test_npy_float_histogram_with_a_range_refuses_nan(daemon):
    """numpy drops NaN from a histogram with a range; the API refuses it, as JSON and KServe do."""
    x = np.array([0.5, np.nan, 0.25], dtype=np.float32)
    r = daemon.post("/v1/histogram?bins=4&range=0,1", data=npy(x), headers={"Content-Type": "application/x-npy"})
    assert_error(r, 400, "non_finite", field="data")
    assert "element 1" in r.json()["error"]["message"]
