#!/usr/bin/env python3
"""A small Python client for crunchd (requests + numpy), and a tour of the API.

    python3 api/examples/client.py                      # against http://localhost:8080
    python3 api/examples/client.py --url http://host:port

Each step checks its answer against numpy and prints one line; the exit status is 0 when every
step agreed. Import it to reuse the Crunchd class:

    from client import Crunchd
    c = Crunchd("http://localhost:8080")
    C = c.gemm(A, B)                       # numpy in, numpy out
    counts, edges = c.histogram(x, bins=50, range=(0, 1))
"""

import argparse
import io
import sys
import time

import numpy as np
import requests


class CrunchdError(Exception):
    """An error answer of the daemon: {"error": {"code", "message", "field"?}}."""

    def __init__(self, status, code, message, field=None, retry_after=None):
        super().__init__(f"{status} {code}: {message}" + (f" (field {field})" if field else ""))
        self.status, self.code, self.message, self.field = status, code, message, field
        self.retry_after = retry_after


class Crunchd:
    def __init__(self, url="http://localhost:8080", timeout=60.0):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.http = requests.Session()

    # -- plumbing ---------------------------------------------------------------------------------
    def _answer(self, r):
        if r.status_code >= 400:
            try:
                e = r.json()["error"]
            except (ValueError, KeyError, TypeError):
                raise CrunchdError(r.status_code, "http", r.text[:200]) from None
            ra = r.headers.get("Retry-After")
            raise CrunchdError(r.status_code, e.get("code"), e.get("message"), e.get("field"),
                               int(ra) if ra and ra.isdigit() else None)
        return r.json()

    def post(self, path, body, retries=5):
        """POSTs JSON; on 429/503 with Retry-After (queue full) waits and tries again."""
        for attempt in range(retries + 1):
            r = self.http.post(self.url + path, json=body, timeout=self.timeout)
            if r.status_code in (429, 503) and attempt < retries and \
                    r.headers.get("Retry-After", "").isdigit():
                err = r.json().get("error", {})
                if err.get("code") == "queue_full":
                    time.sleep(max(0.1, int(r.headers["Retry-After"])))
                    continue
            return self._answer(r), r.headers
        raise AssertionError("unreachable")

    def get(self, path):
        return self._answer(self.http.get(self.url + path, timeout=self.timeout))

    def delete(self, path):
        return self._answer(self.http.delete(self.url + path, timeout=self.timeout))

    @staticmethod
    def matrix(m):
        m = np.asarray(m)
        if m.ndim != 2:
            raise ValueError("a matrix has two dimensions")
        return {"rows": m.shape[0], "cols": m.shape[1], "data": m.ravel().tolist()}

    @staticmethod
    def to_numpy(result, dtype):
        return np.asarray(result["data"], dtype=dtype).reshape(result["rows"], result["cols"])

    @staticmethod
    def dtype_of(*arrays):
        return "float64" if any(np.asarray(a).dtype == np.float64 for a in arrays) else "float32"

    # -- operations -------------------------------------------------------------------------------
    def gemm(self, a, b, c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,
             kernel="auto", precision="fp32", dtype=None, full=False):
        dtype = dtype or self.dtype_of(a, b)
        body = {"a": self.matrix(a), "b": self.matrix(b), "dtype": dtype, "kernel": kernel,
                "precision": precision, "alpha": alpha, "beta": beta, "trans_a": trans_a,
                "trans_b": trans_b}
        if c is not None:
            body["c"] = self.matrix(c)
        ans, _ = self.post("/v1/gemm", body)
        out = self.to_numpy(ans["result"], dtype)
        return (out, ans) if full else out

    def ata(self, a, kernel="auto", dtype=None, full=False):
        dtype = dtype or self.dtype_of(a)
        ans, _ = self.post("/v1/ata", {"a": self.matrix(a), "dtype": dtype, "kernel": kernel})
        out = self.to_numpy(ans["result"], dtype)
        return (out, ans) if full else out

    def histogram(self, data, bins=None, range=None, kernel="auto", full=False):
        data = np.asarray(data)
        body = {"data": data.ravel().tolist(), "kernel": kernel}
        if data.dtype == np.uint8:
            body["dtype"] = "uint8"
        else:
            body["dtype"] = "float64" if data.dtype == np.float64 else "float32"
            if bins is not None:
                body["bins"] = int(bins)
            if range is not None:
                body["range"] = [float(range[0]), float(range[1])]
        ans, _ = self.post("/v1/histogram", body)
        res = ans["result"]
        counts = np.asarray(res["counts"], dtype=np.int64)
        edges = np.asarray(res["edges"]) if "edges" in res else None
        return ((counts, edges), ans) if full else (counts, edges)

    # -- binary: .npy and raw bytes (the path for anything big) ------------------------------------
    @staticmethod
    def npy_bytes(array):
        buf = io.BytesIO()
        np.save(buf, np.asarray(array), allow_pickle=False)  # C or Fortran order, both accepted
        return buf.getvalue()

    def post_binary(self, path, params=None, files=None, data=None, content_type=None):
        """POSTs a binary body with Accept: application/x-npy; returns (numpy result, headers).
        The JSON answer's fields come back as X-Crunchd-* headers, the phases in Server-Timing."""
        headers = {"Accept": "application/x-npy"}
        if content_type:
            headers["Content-Type"] = content_type
        r = self.http.post(self.url + path, params=params, files=files, data=data,
                           headers=headers, timeout=self.timeout)
        if r.status_code >= 400:
            self._answer(r)  # raises CrunchdError: errors stay JSON
        return np.load(io.BytesIO(r.content), allow_pickle=False), r.headers

    def gemm_npy(self, a, b, c=None, **params):
        """multipart/form-data with .npy parts a, b (c); parameters (alpha, beta, trans_a,
        trans_b, kernel, precision, timeout_ms) in the query string; the dtype is the arrays'."""
        files = {"a": ("a.npy", self.npy_bytes(a)), "b": ("b.npy", self.npy_bytes(b))}
        if c is not None:
            files["c"] = ("c.npy", self.npy_bytes(c))
        q = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in params.items()}
        return self.post_binary("/v1/gemm", params=q, files=files)

    def ata_npy(self, a, **params):
        """One application/x-npy body."""
        return self.post_binary("/v1/ata", params=params, data=self.npy_bytes(a),
                                content_type="application/x-npy")

    def histogram_npy(self, data, bins=None, range=None, **params):
        """Any numeric dtype and rank (flattened); counts come back as uint64."""
        if bins is not None:
            params["bins"] = int(bins)
        if range is not None:
            params["range"] = f"{float(range[0])!r},{float(range[1])!r}"
        return self.post_binary("/v1/histogram", params=params, data=self.npy_bytes(data),
                                content_type="application/x-npy")

    def histogram_bytes(self, raw, **params):
        """Raw bytes (application/octet-stream), a uint8 histogram: 256 bins by default."""
        return self.post_binary("/v1/histogram", params=params, data=bytes(raw),
                                content_type="application/octet-stream")

    # -- asynchronous jobs ------------------------------------------------------------------------
    def submit(self, op, **body):
        ans, headers = self.post("/v1/jobs", dict(body, op=op))
        return ans["id"], headers["Location"]

    def wait(self, job_id, timeout=60.0, poll=0.02):
        deadline = time.monotonic() + timeout
        while True:
            st = self.get(f"/v1/jobs/{job_id}")
            if st["status"] in ("done", "failed", "cancelled"):
                return st
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {st['status']} after {timeout}s")
            time.sleep(poll)

    def result(self, job_id):
        return self.get(f"/v1/jobs/{job_id}/result")

    def cancel(self, job_id):
        return self.delete(f"/v1/jobs/{job_id}")


def tour(c):
    """Every kind of request once, each checked against numpy. Returns the number of failures."""
    failures = 0
    rng = np.random.default_rng(0)

    def step(name, ok, detail=""):
        nonlocal failures
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")

    info = c.get("/v1/info")
    step("info", info["name"] == "crunchd",
         f"crunchd {info['version']}, backend {info['backend']}, "
         f"{len(info['devices'])} device(s), queue depth {info['limits']['queue_depth']}")
    kernels = c.get("/v1/kernels")["kernels"]
    step("kernels", bool(kernels),
         ", ".join(f"{k['op']}:{k['name']}" for k in kernels))

    a = rng.standard_normal((65, 33)).astype(np.float32)
    b = rng.standard_normal((33, 17)).astype(np.float32)
    out, ans = c.gemm(a, b, full=True)
    ref = a.astype(np.float64) @ b
    err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
    step("gemm float32", err < 1e-5,
         f"kernel {ans['kernel']}, {ans['timings_ms']['total']:.3f} ms, rel err {err:.1e}")

    a64, b64, c64 = (rng.standard_normal(s) for s in ((9, 7), (5, 9), (7, 5)))
    out = c.gemm(a64, b64, c=c64, alpha=2.0, beta=-1.0, trans_a=True, trans_b=True)
    ref = 2.0 * a64.T @ b64.T - c64
    step("gemm float64 alpha/beta/trans", np.allclose(out, ref, rtol=1e-12, atol=1e-12))

    out, ans = c.gemm(a, b, kernel="all", full=True)
    rows = ", ".join(f"{k['kernel']} {k['ms']:.3f} ms err {k['max_rel_error']:.0e}"
                     for k in ans["kernels"])
    step("gemm compare mode", all(k["status"] == "ok" for k in ans["kernels"]), rows)

    x = rng.standard_normal((40, 12))
    step("ata", np.allclose(c.ata(x), x.T @ x, rtol=1e-12, atol=1e-12))

    img = rng.integers(0, 256, size=10000).astype(np.uint8)
    counts, _ = c.histogram(img)
    step("histogram uint8", np.array_equal(counts, np.bincount(img, minlength=256)))

    v = rng.uniform(-1, 1, size=5000)
    counts, edges = c.histogram(v, bins=20, range=(-0.5, 0.5))
    want, want_edges = np.histogram(v, bins=20, range=(-0.5, 0.5))
    step("histogram float64", np.array_equal(counts, want) and np.allclose(edges, want_edges))

    big_a = rng.standard_normal((300, 200)).astype(np.float32)
    big_b = np.asfortranarray(rng.standard_normal((200, 100)).astype(np.float32))
    out, h = c.gemm_npy(big_a, big_b, alpha=0.5)
    ref = 0.5 * big_a.astype(np.float64) @ big_b
    err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
    step("gemm .npy multipart (Fortran b)", out.shape == (300, 100) and err < 1e-5,
         f"kernel {h['X-Crunchd-Kernel']}, Server-Timing: {h['Server-Timing']}")

    out, h = c.ata_npy(x)
    step("ata application/x-npy", np.allclose(out, x.T @ x, rtol=1e-12, atol=1e-12),
         f"Server-Timing: {h['Server-Timing']}")

    raw = rng.integers(0, 256, size=1 << 20, dtype=np.uint8).tobytes()
    counts, h = c.histogram_bytes(raw)
    step("histogram application/octet-stream",
         counts.dtype == np.uint64 and np.array_equal(counts, np.bincount(
             np.frombuffer(raw, np.uint8), minlength=256)),
         f"{h['X-Crunchd-Gbps']} GB/s, Server-Timing: {h['Server-Timing']}")

    counts, h = c.histogram_npy(v, bins=20, range=(-0.5, 0.5))
    edges = np.array([float(e) for e in h["X-Crunchd-Edges"].split(",")])
    step("histogram .npy float64", np.array_equal(counts, want) and np.allclose(edges, want_edges))

    job, location = c.submit("gemm", a=Crunchd.matrix(a64), b=Crunchd.matrix(a64.T),
                             dtype="float64")
    st = c.wait(job)
    res = c.result(job)
    step("async job", st["status"] == "done" and
         np.allclose(Crunchd.to_numpy(res["result"], "float64"), a64 @ a64.T),
         f"{location}: {st['status']}")
    c.cancel(job)  # forget it

    try:
        c.post("/v1/gemm", {"a": [[1, 2]], "b": [[1, 2]]}, retries=0)
        step("error answer", False, "a 1×2 by 1×2 product was accepted")
    except CrunchdError as e:
        step("error answer", e.status == 422 and e.code == "shape_mismatch", str(e))
    return failures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://localhost:8080", help="where crunchd listens")
    args = p.parse_args()
    failures = tour(Crunchd(args.url))
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
