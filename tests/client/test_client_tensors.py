"""The Python client's resident tensors: upload (any rank and dtype, named or not), handles as
operands of every op over both transports, results kept (keep=) and written in place (out=),
listing, download, deletion (and the context manager), typed errors."""

import numpy as np
import pytest

from client_harness import assert_close  # first: puts clients/python on sys.path
import crunchd  # noqa: E402
from crunchd import errors  # noqa: E402


def rnd(seed, *shape, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def test_upload_download_list_delete(client):
    a = rnd(1, 3, 5, 7)
    with client.upload(a, name="cube") as t:
        assert isinstance(t, crunchd.Tensor)
        assert t.shape == (3, 5, 7) and t.dtype == np.float32 and t.nbytes == a.nbytes and t.name == "cube"
        np.testing.assert_array_equal(t.download(), a)
        np.testing.assert_array_equal(np.asarray(t), a)
        assert client.tensor("cube") == t and t in client.tensors()
        assert t.refresh().expires_at > 0
        with pytest.raises(errors.Conflict):
            client.upload(a, name="cube")  # a name is one tensor's while it lives
    with pytest.raises(errors.NotFound):
        client.tensor("cube")
    assert t not in client.tensors()
    b = np.arange(1000, dtype=np.uint8)
    with client.upload(b) as u:
        assert u.name is None and u.dtype == np.uint8
        np.testing.assert_array_equal(u.download(), b)


@pytest.mark.parametrize("transport", ["json", "npy"])
def test_tensors_as_operands(client, transport):
    x, w = rnd(2, 20, 64), rnd(3, 64, 48)
    with client.upload(w) as tw:
        r = client.gemm(x, tw, transport=transport)
        assert r.sent == ("json" if transport == "json" else "multipart")
        assert_close(r.result, x.astype(np.float64) @ w, 64, "float32")
        r = client.gemm(tw, tw, trans_a=True, transport=transport)  # both named: JSON, a few bytes
        assert r.sent == "json"
        assert_close(r.result, w.T.astype(np.float64) @ w, 64, "float32")
        assert_close(client.ata(tw, transport=transport).result, w.T.astype(np.float64) @ w, 64, "float32")
    data = np.random.default_rng(4).integers(0, 256, 5000, dtype=np.uint8)
    with client.upload(data) as td:
        counts, edges = client.histogram(td, transport=transport)
        np.testing.assert_array_equal(counts, np.bincount(data, minlength=256))


def test_keep_and_accumulate_in_place(client):
    a, b = rnd(5, 32, 16), rnd(6, 16, 24)
    want = a.astype(np.float64) @ b
    r = client.gemm(a, b, keep="prod")
    assert r.result is None and r.tensor.name == "prod" and r.tensor.shape == (32, 24)
    assert r.shape == (32, 24) and r.timings["total"] > 0
    assert_close(np.asarray(r), want, 16, "float32")
    g = client.ata(r.tensor, keep=True)  # chained: the product never left the daemon
    assert_close(g.tensor.download(), want.T @ want, 32, "float32")
    acc = client.upload(np.zeros((32, 24), np.float32), name="acc")
    for _ in range(3):
        res = client.gemm(a, b, c=acc, beta=1.0, out=acc, transport="npy")
        assert res.tensor == acc
    assert_close(acc.download(), 3 * want, 16, "float32")
    with pytest.raises(errors.ShapeMismatch):
        client.gemm(a, a.T, out=acc)
    with pytest.raises(ValueError):
        client.gemm(a, b, keep=True, out=acc)
    job = client.submit("gemm", a, b, keep=True)
    kept = job.result(timeout=60).tensor
    assert_close(kept.download(), want, 16, "float32")
    for t in (r.tensor, g.tensor, acc, kept):
        t.delete()
    with pytest.raises(errors.NotFound):
        acc.delete()
