"""The Python client's streams: ata_stream over several connections (blocks of a tall matrix,
never one request), histogram_stream of a file, bytes and arrays, against numpy; a failing part
deletes the stream; a part whose answer is lost is sent again and counted once."""

import io

import numpy as np
import pytest

from client_harness import BACKEND  # noqa: F401  (first: puts clients/python on sys.path)
import crunchd  # noqa: E402
from crunchd import errors  # noqa: E402


def test_ata_stream_matches_numpy(client):
    rng = np.random.default_rng(1)
    blocks = [rng.standard_normal((m, 40)).astype(np.float32) for m in (3000, 1, 777, 2048)]
    r = client.ata_stream(iter(blocks), connections=3)
    a = np.vstack(blocks).astype(np.float64)
    want = a.T @ a
    assert r.result.dtype == np.float64 and r.result.shape == (40, 40)
    assert np.abs(r.result - want).max() / np.abs(want).max() < 1e-6
    r32 = client.ata_stream(blocks, accumulate="float32", connections=1)
    assert r32.result.dtype == np.float32


def test_histogram_stream_of_a_file_bytes_and_arrays(client):
    data = np.random.default_rng(2).integers(0, 256, 1_000_000, dtype=np.uint8)
    want = np.bincount(data, minlength=256)
    for src in (io.BytesIO(data.tobytes()), data.tobytes(), [data[:10], data[10:]]):
        h = client.histogram_stream(src, part_bytes=1 << 16, connections=4)
        np.testing.assert_array_equal(h.counts, want)
    x = np.random.default_rng(3).standard_normal(300_000)
    h = client.histogram_stream(x, bins=17, range=(-2, 2), dtype="float64", part_bytes=1 << 17)
    counts, edges = np.histogram(x, 17, (-2, 2))
    np.testing.assert_array_equal(h.counts, counts)
    np.testing.assert_allclose(h.edges, edges)
    with pytest.raises(ValueError):
        client.histogram_stream(x, dtype="float64")  # a float stream needs its range up front


def test_a_bad_part_fails_the_call_and_deletes_the_stream(client):
    def blocks():
        yield np.ones((10, 4), np.float32)
        yield np.ones((10, 5), np.float32)  # other columns: the client refuses it before sending

    with pytest.raises(ValueError):
        client.ata_stream(blocks())
    x = np.array([0.5, np.nan])
    with pytest.raises(errors.InvalidRequest):
        client.histogram_stream(x, range=(0, 1), dtype="float64")
    assert "crunchd_streams_open 0" in client.metrics()


def test_a_lost_answer_is_sent_again_and_counted_once(client, daemon):
    jid = client._request("POST", "/v1/jobs", json_body={"op": "histogram", "stream": True}).json()["id"]
    part = bytes(range(256))
    for _ in range(3):  # as a retry after a timeout would
        r = client.session.put(f"{daemon.base}/v1/jobs/{jid}/parts/0", data=part,
                               headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 200
    client._request("POST", f"/v1/jobs/{jid}/finish")
    res = client.job(jid).result(timeout=30)
    assert res.counts.tolist() == [1] * 256
