#!/usr/bin/env python3
"""A tour of crunchd's API through its Python client package (clients/python, `import crunchd`).

    pip install ./clients/python                        # or run it from the checkout as it is
    python3 api/examples/client.py                      # against http://localhost:8080
    python3 api/examples/client.py --url http://host:port

Each step checks its answer against numpy and prints one line; the exit status is 0 when every
step agreed. The client itself lives in clients/python/crunchd; this file only uses it.
"""

import argparse
import pathlib
import sys

import numpy as np

try:
    import crunchd
except ImportError:  # not installed: the package beside this checkout
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "clients" / "python"))
    import crunchd

from crunchd import Client, CrunchdError  # noqa: F401  (importable from here, as before)

Crunchd = Client


def tour(c):
    """Every kind of request once, each checked against numpy. Returns the number of failures."""
    failures = 0
    rng = np.random.default_rng(0)

    def step(name, ok, detail=""):
        nonlocal failures
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")

    info = c.info()
    step("info", info["name"] == "crunchd",
         f"crunchd {info['version']}, backend {info['backend']}, "
         f"{len(info['devices'])} device(s), queue depth {info['limits']['queue_depth']}")
    kernels = c.kernels()
    step("kernels", bool(kernels), ", ".join(f"{k['op']}:{k['name']}" for k in kernels))

    # Small arrays go as JSON, big ones as .npy: Result.sent and Result.transport say how.
    a = rng.standard_normal((65, 33)).astype(np.float32)
    b = rng.standard_normal((33, 17)).astype(np.float32)
    r = c.gemm(a, b)
    ref = a.astype(np.float64) @ b
    err = float(np.max(np.abs(r.result - ref)) / np.max(np.abs(ref)))
    step("gemm float32", err < 1e-5 and r.result.dtype == np.float32,
         f"kernel {r.kernel}, {r.timings['total']:.3f} ms, rel err {err:.1e}, via {r.sent}")

    a64, b64, c64 = (rng.standard_normal(s) for s in ((9, 7), (5, 9), (7, 5)))
    r = c.gemm(a64, b64, c=c64, alpha=2.0, beta=-1.0, trans_a=True, trans_b=True)
    step("gemm float64 alpha/beta/trans",
         np.allclose(r.result, 2.0 * a64.T @ b64.T - c64, rtol=1e-12, atol=1e-12))

    r = c.gemm(a, b, kernel="all")
    rows = ", ".join(f"{k['kernel']} {k['ms']:.3f} ms err {k['max_rel_error']:.0e}"
                     for k in r.kernels)
    step("gemm compare mode", all(k["status"] == "ok" for k in r.kernels), rows)

    x = rng.standard_normal((40, 12))
    step("ata", np.allclose(c.ata(x).result, x.T @ x, rtol=1e-12, atol=1e-12))

    img = rng.integers(0, 256, size=10000).astype(np.uint8)
    counts, _ = c.histogram(img)
    step("histogram uint8", np.array_equal(counts, np.bincount(img, minlength=256)))

    v = rng.uniform(-1, 1, size=5000)
    counts, edges = c.histogram(v, bins=20, range=(-0.5, 0.5))
    want, want_edges = np.histogram(v, bins=20, range=(-0.5, 0.5))
    step("histogram float64", np.array_equal(counts, want) and np.allclose(edges, want_edges))

    big_a = rng.standard_normal((300, 200)).astype(np.float32)
    big_b = np.asfortranarray(rng.standard_normal((200, 100)).astype(np.float32))
    r = c.gemm(big_a, big_b, alpha=0.5)
    ref = 0.5 * big_a.astype(np.float64) @ big_b
    err = float(np.max(np.abs(r.result - ref)) / np.max(np.abs(ref)))
    step("gemm .npy multipart (Fortran b)", r.result.shape == (300, 100) and err < 1e-5,
         f"sent {r.sent}, answer {r.transport}, kernel {r.kernel}, "
         f"Server-Timing: {r.headers['Server-Timing']}")

    r = c.ata(x, transport="npy")
    step("ata application/x-npy", np.allclose(r.result, x.T @ x, rtol=1e-12, atol=1e-12),
         f"Server-Timing: {r.headers['Server-Timing']}")

    raw = rng.integers(0, 256, size=1 << 20, dtype=np.uint8)
    r = c.histogram(raw)
    step("histogram application/octet-stream",
         r.sent == "raw" and r.counts.dtype == np.uint64 and
         np.array_equal(r.counts, np.bincount(raw, minlength=256)),
         f"{r.gbps:.2f} GB/s, Server-Timing: {r.headers['Server-Timing']}")

    r = c.histogram(v, bins=20, range=(-0.5, 0.5), transport="npy")
    step("histogram .npy float64", np.array_equal(r.counts, want) and
         np.allclose(r.edges, want_edges))

    job = c.submit("gemm", a=a64, b=a64.T)
    state = job.wait(timeout=60)
    r = job.result()
    step("async job", state == "done" and np.allclose(r.result, a64 @ a64.T),
         f"{job.location}: {state}")
    job.cancel()  # forget it

    try:
        c.gemm([[1.0, 2.0]], [[1.0, 2.0]])
        step("error answer", False, "a 1×2 by 1×2 product was accepted")
    except crunchd.ShapeMismatch as e:
        step("error answer", e.status == 422 and e.code == "shape_mismatch", str(e))
    return failures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://localhost:8080", help="where crunchd listens")
    args = p.parse_args()
    with Client(args.url) as c:
        failures = tour(c)
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
