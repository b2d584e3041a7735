"""Streams (issue 37): AᵀA and histograms of data sent in parts (POST /v1/jobs {"stream": true},
PUT /v1/jobs/{id}/parts/{seq}, POST /v1/jobs/{id}/finish) and of streamed bodies (PUT, or POST
with Transfer-Encoding: chunked, to /v1/ata and /v1/histogram), against numpy in float64: parts
in any order and in parallel, repeats acknowledged and conflicting repeats refused, every body
form, progress, deletion, idle expiry, caps, bad input, a part that fails leaving the stream open,
a client gone mid-part, the drain, and memory that stays the size of the answer."""

import concurrent.futures
import io
import os
import signal
import socket
import time
import uuid

import numpy as np
import pytest
import requests

from conftest import SLOW, assert_error

NPY = "application/x-npy"
RAW = "application/octet-stream"


def npy(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def rows(seed, m, n, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal((m, n)).astype(dtype)


def open_stream(d, status=201, **spec):
    r = d.post("/v1/jobs", dict(spec, stream=True))
    assert r.status_code == status, r.text
    return r


def put(d, jid, seq, data, ctype=RAW, session=None):
    return d.request("PUT", f"/v1/jobs/{jid}/parts/{seq}", session=session, data=data,
                     headers={"Content-Type": ctype})


def finish(d, jid):
    r = d.post(f"/v1/jobs/{jid}/finish")
    assert r.status_code in (200, 202), r.text
    d.wait_job(jid)
    r = d.get(f"/v1/jobs/{jid}/result", headers={"Accept": NPY})
    assert r.status_code == 200, r.text
    return np.load(io.BytesIO(r.content))


def gram(*blocks):
    a = np.vstack(blocks).astype(np.float64)
    return a.T @ a


def rel_err(got, want):
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-300))


def test_ata_parts_in_any_form_and_order(daemon):
    r = open_stream(daemon, op="ata", cols=24)
    body = r.json()
    jid = body["id"]
    assert r.headers["Location"] == f"/v1/jobs/{jid}" and body["status"] == "running"
    assert body["stream"]["open"] and body["stream"]["cols"] == 24 and body["stream"]["accumulate"] == "float64"
    blocks = [rows(i, m, 24) for i, m in enumerate((100, 1, 37, 64, 5))]
    forms = [(npy(blocks[0]), NPY), (blocks[1].tobytes(), RAW), (npy(blocks[2].ravel()), NPY),
             (blocks[3].tobytes(), RAW), (npy(np.asfortranarray(blocks[4])), NPY)]
    for seq in (3, 0, 4, 2, 1):  # any order
        r = put(daemon, jid, seq, *forms[seq])
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "absorbed" and r.json()["rows"] == len(blocks[seq])
    st = daemon.status(jid)["stream"]
    assert st["parts"] == 5 and st["rows"] == sum(len(b) for b in blocks) and st["in_flight"] == 0
    assert st["bytes"] == sum(b.nbytes for b in blocks) and st["last_part_at"] >= st["opened_at"]
    got = finish(daemon, jid)
    assert got.dtype == np.float64 and got.shape == (24, 24)
    assert rel_err(got, gram(*blocks)) < 1e-6
    j = daemon.get(f"/v1/jobs/{jid}/result").json()
    assert j["op"] == "ata" and j["dtype"] == "float64" and j["kernel"]


def test_repeats_are_counted_once_and_conflicts_refused(daemon):
    jid = open_stream(daemon, op="ata", cols=8).json()["id"]
    a, b = rows(10, 50, 8), rows(11, 50, 8)
    assert put(daemon, jid, 7, a.tobytes()).json()["status"] == "absorbed"
    r = put(daemon, jid, 7, npy(a), NPY)  # the same rows, another form: the same part
    assert r.status_code == 200 and r.json()["status"] == "duplicate"
    assert_error(put(daemon, jid, 7, b.tobytes()), 409, "part_conflict", field="seq")
    st = daemon.status(jid)["stream"]
    assert st["parts"] == 1 and st["duplicates"] == 1
    assert rel_err(finish(daemon, jid), gram(a)) < 1e-6


def test_parallel_parts_over_several_connections(daemon):
    jid = open_stream(daemon, op="ata", cols=32, dtype="float64").json()["id"]
    blocks = [rows(100 + i, 300, 32, np.float64) for i in range(24)]

    def send(i):
        with requests.Session() as s:
            return put(daemon, jid, i, blocks[i].tobytes(), session=s).status_code

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        assert list(pool.map(send, range(len(blocks)))) == [200] * len(blocks)
    assert rel_err(finish(daemon, jid), gram(*blocks)) < 1e-12


def test_float32_accumulation_when_asked(daemon):
    jid = open_stream(daemon, op="ata", cols=4, accumulate="float32").json()["id"]
    a = rows(3, 20, 4)
    put(daemon, jid, 0, a.tobytes())
    got = finish(daemon, jid)
    assert got.dtype == np.float32 and rel_err(got, gram(a)) < 1e-5


def test_histogram_streams(daemon):
    data = np.random.default_rng(5).integers(0, 256, 200_000, dtype=np.uint8)
    jid = open_stream(daemon, op="histogram").json()["id"]
    for i, chunk in enumerate(np.array_split(data, 7)):
        assert put(daemon, jid, i, chunk.tobytes()).status_code == 200
    assert daemon.status(jid)["stream"]["values"] == data.size
    np.testing.assert_array_equal(finish(daemon, jid), np.bincount(data, minlength=256))
    x = np.random.default_rng(6).standard_normal(100_000).astype(np.float32)
    jid = open_stream(daemon, op="histogram", dtype="float32", bins=33, range=[-2.5, 3]).json()["id"]
    for i, chunk in enumerate(np.array_split(x, 5)):
        assert put(daemon, jid, i, npy(chunk) if i % 2 else chunk.tobytes(), NPY if i % 2 else RAW).status_code == 200
    got = daemon.get(f"/v1/jobs/{jid}/result")
    daemon.post(f"/v1/jobs/{jid}/finish")
    daemon.wait_job(jid)
    res = daemon.get(f"/v1/jobs/{jid}/result").json()["result"]
    counts, edges = np.histogram(x, bins=33, range=(-2.5, 3))
    assert res["counts"] == counts.tolist()
    np.testing.assert_allclose(res["edges"], edges, rtol=1e-6)
    assert got.status_code == 409  # not done before the finish


def test_parts_in_shared_memory_are_read_in_place(daemon):
    a = rows(20, 400, 16)
    key = f"/crunchd-stream-{uuid.uuid4().hex[:12]}"
    fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.write(fd, a.tobytes())
        name = "s" + uuid.uuid4().hex[:8]
        r = daemon.post(f"/v2/systemsharedmemory/region/{name}/register",
                        {"key": key, "offset": 0, "byte_size": a.nbytes})
        assert r.status_code == 200, r.text
        jid = open_stream(daemon, op="ata", cols=16).json()["id"]
        half = a.nbytes // 2
        for seq, off in enumerate((0, half)):
            r = daemon.request("PUT", f"/v1/jobs/{jid}/parts/{seq}",
                               json={"shm": {"region": name, "offset": off}, "shape": [200, 16]})
            assert r.status_code == 200, r.text
        assert rel_err(finish(daemon, jid), gram(a)) < 1e-6
        daemon.post(f"/v2/systemsharedmemory/region/{name}/unregister")
    finally:
        os.close(fd)
        os.unlink("/dev/shm" + key)


def test_a_bad_part_leaves_the_stream_open(daemon):
    jid = open_stream(daemon, op="ata", cols=6).json()["id"]
    good = rows(30, 10, 6)
    assert_error(put(daemon, jid, 0, good.tobytes()[:-4]), 422, "shape_mismatch")   # not whole rows
    assert_error(put(daemon, jid, 0, npy(good.astype(np.float64)), NPY), 400, "invalid_field")  # another dtype
    assert_error(put(daemon, jid, 0, npy(rows(1, 3, 5)), NPY), 422, "shape_mismatch")  # other columns
    assert_error(put(daemon, jid, 0, b"\x93NUMPY garbage", NPY), 400, "invalid_field")
    assert_error(put(daemon, jid, "x1", good.tobytes()), 400, "invalid_parameter", field="seq")
    assert put(daemon, jid, 0, good.tobytes()).status_code == 200  # the seq was never taken
    x = np.array([1.0, np.nan], np.float32)
    hid = open_stream(daemon, op="histogram", dtype="float32", range=[0, 1]).json()["id"]
    assert_error(put(daemon, hid, 0, x.tobytes()), 400, "non_finite")
    assert daemon.status(hid)["stream"]["open"]
    assert rel_err(finish(daemon, jid), gram(good)) < 1e-6


def test_bad_openings_name_the_field(daemon):
    cases = [({"op": "ata"}, 400, "missing_field", "cols"),
             ({"op": "ata", "cols": 0}, 400, "invalid_field", "cols"),
             ({"op": "ata", "cols": 2.5}, 400, "invalid_field", "cols"),
             ({"op": "ata", "cols": 10 ** 9}, 413, "too_large", "cols"),
             ({"op": "ata", "cols": 4, "dtype": "uint8"}, 400, "invalid_field", "dtype"),
             ({"op": "ata", "cols": 4, "accumulate": "float16"}, 400, "invalid_field", "accumulate"),
             ({"op": "ata", "cols": 4, "bins": 3}, 400, "invalid_field", "bins"),
             ({"op": "gemm"}, 400, "invalid_field", "op"),
             ({"op": "histogram", "dtype": "float32"}, 400, "missing_field", "range"),
             ({"op": "histogram", "range": [1, 1, 2]}, 400, "invalid_field", "range"),
             ({"op": "histogram", "bins": 0}, 400, "invalid_field", "bins"),
             ({"op": "histogram", "kernel": "all"}, 400, "invalid_field", "kernel")]
    for spec, status, code, field in cases:
        assert_error(daemon.post("/v1/jobs", dict(spec, stream=True)), status, code, field=field)


def test_delete_and_finish_end_a_stream(daemon):
    jid = open_stream(daemon, op="histogram").json()["id"]
    put(daemon, jid, 0, b"\x01\x02")
    assert daemon.delete(f"/v1/jobs/{jid}").status_code == 200
    assert daemon.get(f"/v1/jobs/{jid}").status_code == 404
    assert_error(put(daemon, jid, 1, b"\x03"), 404, "not_found")
    jid = open_stream(daemon, op="histogram").json()["id"]
    finish(daemon, jid)
    assert_error(put(daemon, jid, 0, b"\x03"), 404, "not_found")  # finished: no longer open
    assert_error(daemon.post(f"/v1/jobs/{jid}/finish"), 404, "not_found")
    assert_error(daemon.post(f"/v1/jobs/{uuid.uuid4()}/finish"), 404, "not_found")


def test_another_client_cannot_add_parts(daemon):
    jid = open_stream(daemon, op="histogram").json()["id"]
    status, _, body = daemon.unix_request("PUT", f"/v1/jobs/{jid}/parts/0", b"\x01",
                                          {"Content-Type": RAW})
    assert status == 404, body
    daemon.delete(f"/v1/jobs/{jid}")


def test_idle_streams_fail_and_free_their_memory(start_daemon):
    d = start_daemon("--stream-idle-s", "1")
    jid = open_stream(d, op="ata", cols=512).json()["id"]  # a 2 MiB accumulator
    assert "expires_at" in d.status(jid)["stream"]
    j, _ = d.wait_job(jid, timeout=15 * SLOW)
    assert j["status"] == "failed" and j["error"]["code"] == "stream_idle"
    assert "unused" in d.log_text() or "no part for" in d.log_text()
    m = d.metrics_text()
    assert "\ncrunchd_streams_open 0\n" in m and "\ncrunchd_streams_expired_total 1\n" in m


def test_caps_refuse_a_stream_that_would_not_fit(start_daemon):
    d = start_daemon("--stream-max-mb", "4", "--stream-max", "2")
    a = open_stream(d, op="ata", cols=512).json()["id"]  # 2 MiB, all one client may have
    assert_error(d.post("/v1/jobs", {"op": "ata", "stream": True, "cols": 512}), 507, "stream_limit")
    assert_error(d.post("/v1/jobs", {"op": "ata", "stream": True, "cols": 2048}), 413, "too_large")
    d.delete(f"/v1/jobs/{a}")
    b = open_stream(d, op="histogram").json()["id"]
    c = open_stream(d, op="histogram").json()["id"]
    assert_error(d.post("/v1/jobs", {"op": "histogram", "stream": True}), 507, "stream_limit")
    for jid in (b, c):
        d.delete(f"/v1/jobs/{jid}")


def test_a_client_gone_mid_part_loses_only_that_part(daemon):
    jid = open_stream(daemon, op="ata", cols=64).json()["id"]
    a = rows(40, 2000, 64)
    body = a.tobytes()
    head = (f"PUT /v1/jobs/{jid}/parts/0 HTTP/1.1\r\nHost: x\r\nContent-Type: {RAW}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", daemon.port)) as s:
        s.sendall(head + body[: len(body) // 2])
    deadline = time.monotonic() + 10 * SLOW
    while time.monotonic() < deadline:  # the half part never counts, and the seq is free again
        r = put(daemon, jid, 0, body)
        if r.status_code == 200:
            break
        assert r.status_code == 409 and r.json()["error"]["code"] == "in_use", r.text
        time.sleep(0.05)
    assert daemon.status(jid)["stream"]["parts"] == 1
    assert rel_err(finish(daemon, jid), gram(a)) < 1e-6


# -- streamed bodies ---------------------------------------------------------------------------------

def chunks(data, size):
    for i in range(0, len(data), size):
        yield data[i:i + size]


def test_chunked_and_put_bodies(daemon):
    a = rows(50, 30_000, 40)
    for query, data, ctype in (("", npy(a), NPY), ("?cols=40", a.tobytes(), RAW)):
        r = requests.post(daemon.url("/v1/ata" + query), data=chunks(data, 65_537),
                          headers={"Content-Type": ctype, "Accept": NPY}, timeout=60)
        assert r.status_code == 200, r.text
        got = np.load(io.BytesIO(r.content))
        assert got.dtype == np.float64 and rel_err(got, gram(a)) < 1e-6
    r = requests.put(daemon.url("/v1/ata?cols=40&accumulate=float32"), data=a.tobytes(), timeout=60)
    assert r.status_code == 200 and r.json()["dtype"] == "float32", r.text
    b = np.random.default_rng(51).integers(0, 256, 3_000_000, dtype=np.uint8)
    r = requests.put(daemon.url("/v1/histogram"), data=b.tobytes(), timeout=60)
    assert r.status_code == 200 and r.json()["result"]["counts"] == np.bincount(b, minlength=256).tolist()
    x = np.random.default_rng(52).uniform(-1, 1, 500_000)
    r = requests.post(daemon.url("/v1/histogram?range=-1,1&bins=64"), data=chunks(npy(x), 10_000),
                      headers={"Content-Type": NPY}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["result"]["counts"] == np.histogram(x, 64, (-1, 1))[0].tolist()


def test_streamed_bodies_refuse_what_cannot_stream(daemon):
    a = rows(60, 10, 4)
    cases = [("/v1/ata", a.tobytes(), RAW, 400, "missing_field", "cols"),
             ("/v1/ata", npy(np.asfortranarray(rows(1, 10, 4))), NPY, 400, "invalid_field", "body"),
             ("/v1/ata?cols=3", a.tobytes(), RAW, 400, "invalid_field", "body"),
             ("/v1/histogram?dtype=float32", a.tobytes(), RAW, 400, "missing_field", "range"),
             ("/v1/ata?cols=4&dtype=int8", a.tobytes(), RAW, 400, "invalid_parameter", "dtype")]
    for path, data, ctype, status, code, field in cases:
        r = requests.put(daemon.url(path), data=data, headers={"Content-Type": ctype}, timeout=60)
        assert_error(r, status, code, field=field)


def test_bad_chunk_framing_closes_the_connection(daemon):
    with socket.create_connection(("127.0.0.1", daemon.port)) as s:
        s.sendall(b"POST /v1/histogram HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                  b"Content-Type: application/octet-stream\r\n\r\nzz\r\nabc\r\n")
        s.settimeout(10 * SLOW)
        got = b""
        try:
            while piece := s.recv(65536):
                got += piece
        except ConnectionResetError:  # closed with the client's bytes unread: a reset, also fine
            pass
    assert not got or got.startswith(b"HTTP/1.1 400"), got[:200]
    assert daemon.get("/healthz").status_code == 200


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.mark.skipif("ASAN_OPTIONS" in os.environ, reason="ASan's quarantine keeps freed parts resident")
def test_a_long_stream_holds_memory_of_the_answer_size(start_daemon):
    """512 MiB through one chunked POST: the daemon's RSS grows by a few parts, not the body."""
    d = start_daemon()
    before = rss_kib(d.proc.pid)
    block = np.random.default_rng(70).integers(0, 256, 1 << 22, dtype=np.uint8).tobytes()
    peak = [before]

    def body():
        for _ in range(128):
            peak[0] = max(peak[0], rss_kib(d.proc.pid))
            yield block

    r = requests.post(d.url("/v1/histogram"), data=body(), headers={"Content-Type": RAW}, timeout=300)
    assert r.status_code == 200, r.text
    assert sum(r.json()["result"]["counts"]) == 128 << 22
    assert (peak[0] - before) < 256 * 1024, f"RSS grew {(peak[0] - before) >> 10} MiB for a 512 MiB stream"


def test_drain_refuses_new_parts_and_fails_open_streams(start_daemon):
    d = start_daemon("--drain-timeout-s", "2")
    done = open_stream(d, op="histogram").json()["id"]
    left = open_stream(d, op="histogram").json()["id"]
    put(d, done, 0, b"\x01\x01")
    d.signal(signal.SIGTERM)
    deadline = time.monotonic() + 5 * SLOW
    while time.monotonic() < deadline:
        r = put(d, left, 0, b"\x02")
        if r.status_code == 503:
            break
    assert_error(r, 503, "draining")
    r = d.post(f"/v1/jobs/{done}/finish")  # finishing is still possible while the drain runs
    assert r.status_code == 200, r.text
    assert d.get(f"/v1/jobs/{done}/result").json()["result"]["counts"][1] == 2
    assert d.wait_exit(30 * SLOW) == 0
    assert "open stream(s) failed" in d.log_text()
