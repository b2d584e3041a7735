#!/usr/bin/env python3
"""The obvious alternative to crunchd: an aiohttp server for the same routes, computing with NumPy
on the CPU or, where a GPU and PyTorch are there, with PyTorch on the GPU.

    python3 bench/alt_server.py --port 8081              # one process: what a user writes first
    python3 bench/alt_server.py --port 8081 --workers 16 # one process per core (SO_REUSEPORT)
    python3 bench/alt_server.py --port 8081 --workers 16 --compute torch   # PyTorch on cuda:0

With --compute torch each request's arrays go to the GPU as torch tensors (torch.from_numpy(..)
.cuda()), are multiplied there (a @ b, a.T @ a; torch.bincount / torch.histc for histograms) and
come back with .cpu().numpy(): the program a PyTorch user writes. Each worker process makes its own
CUDA context after the fork.

What `make bench-load` compares crunchd with. It is written the way a NumPy user would write it,
not tuned: stdlib json in and out (`request.json()`, `json_response`), `ndarray.tolist()` for the
answers, np.load/np.save for .npy, the computation inline on the event loop.

Design choice: one process by default, because that is the obvious program. A single Python
process uses one core, though, and crunchd uses the whole machine, so `--workers N` forks N
identical processes that each bind the port with SO_REUSEPORT (the kernel spreads connections
over them), as gunicorn/uvicorn deployments run one worker per core. The benchmark runs it with
one worker per core (scripts/bench_load.py; BENCH_LOAD_ALT_WORKERS overrides) so that the ratio
is against the best this design does on the machine, not against a handicapped version.

Routes (minimal shapes of crunchd's answers):
  POST /v1/gemm       JSON {"a", "b"[, "dtype"]} (nested lists or {"rows","cols","data"}), or
                      multipart/form-data with .npy parts a and b; Accept: application/x-npy
                      answers .npy, else {"result": {"rows", "cols", "data"}}
  POST /v1/ata        JSON {"a"} or an application/x-npy body: AᵀA, answered as above
  POST /v1/histogram  JSON {"data"[, "dtype", "bins", "range"]}: numpy.histogram semantics,
                      uint8 by default (256 bins over the byte values) -> {"result": {"bins",
                      "counts"[, "edges"]}}
  GET  /readyz
"""
import argparse
import asyncio
import io
import multiprocessing
import signal

import numpy as np
from aiohttp import web

NPY = "application/x-npy"


class BadRequest(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code = status, code


def matrix(x, dtype):
    if isinstance(x, dict):
        return np.asarray(x["data"], dtype).reshape(x["rows"], x["cols"])
    m = np.asarray(x, dtype)
    if m.ndim != 2:
        raise BadRequest(400, "invalid_matrix", "a matrix is a list of rows")
    return m


def load_npy(data):
    return np.load(io.BytesIO(data), allow_pickle=False)


class Numpy:
    name = "numpy"

    @staticmethod
    def gemm(a, b):
        return a @ b

    @staticmethod
    def ata(a):
        return a.T @ a

    @staticmethod
    def histogram(data, bins, rng):
        return np.histogram(data, bins, rng)


class Torch:
    """PyTorch on the first GPU, imported in the worker (CUDA must not be touched before the fork)."""
    name = "torch"

    def __init__(self):
        import torch
        if not torch.cuda.is_available():
            raise SystemExit("alt_server: --compute torch needs a CUDA device")
        self.torch, self.dev = torch, torch.device("cuda:0")
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 products as float32, like crunchd's default

    def _t(self, x):
        return self.torch.from_numpy(np.ascontiguousarray(x)).to(self.dev, non_blocking=False)

    def gemm(self, a, b):
        return (self._t(a) @ self._t(b)).cpu().numpy()

    def ata(self, a):
        t = self._t(a)
        return (t.T @ t).cpu().numpy()

    def histogram(self, data, bins, rng):
        lo, hi = rng if rng is not None else (float(data.min()), float(data.max())) if data.size else (0.0, 1.0)
        t = self._t(data.astype(np.float64))
        counts = self.torch.histc(t, bins=bins, min=lo, max=hi).cpu().numpy().astype(np.int64)
        return counts, np.linspace(lo, hi, bins + 1)


COMPUTE = Numpy


def answer(request, m):
    if NPY in request.headers.get("Accept", ""):
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(m))
        return web.Response(body=buf.getvalue(), content_type=NPY)
    return web.json_response({"result": {"rows": m.shape[0], "cols": m.shape[1],
                                         "data": m.ravel().tolist()}})


async def gemm(request):
    if request.content_type == "multipart/form-data":
        parts = {}
        # the streaming reader, not request.post(): post() spools every file part to a temp file
        async for part in await request.multipart():
            parts[part.name] = load_npy(await part.read())
        a, b = parts["a"], parts["b"]
    else:
        body = await request.json()
        dtype = body.get("dtype", "float32")
        a, b = matrix(body["a"], dtype), matrix(body["b"], dtype)
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:  # numpy.matmul's stacks too
        raise BadRequest(422, "shape_mismatch", f"a is {a.shape} but b is {b.shape}")
    return answer(request, COMPUTE.gemm(a, b))


async def ata(request):
    if request.content_type == NPY:
        a = load_npy(await request.read())
    else:
        body = await request.json()
        a = matrix(body["a"], body.get("dtype", "float32"))
    return answer(request, COMPUTE.ata(a))


async def histogram(request):
    body = await request.json()
    dtype = body.get("dtype", "uint8")
    data = np.asarray(body["data"], np.float64 if dtype != "uint8" else np.int64)
    if dtype == "uint8":
        if data.size and (data.min() < 0 or data.max() > 255):
            raise BadRequest(400, "invalid_value", "uint8 data must be in 0..255")
        counts, edges = COMPUTE.histogram(data, body.get("bins", 256), body.get("range", (0, 256)))
        return web.json_response({"result": {"bins": len(counts), "counts": counts.tolist()}})
    counts, edges = COMPUTE.histogram(data, body.get("bins", 10), body.get("range"))
    return web.json_response({"result": {"bins": len(counts), "counts": counts.tolist(),
                                         "edges": edges.tolist()}})


async def readyz(request):
    return web.json_response({"status": "ready"})


@web.middleware
async def errors(request, handler):
    try:
        return await handler(request)
    except BadRequest as e:
        status, code, message = e.status, e.code, str(e)
    except (KeyError, ValueError, TypeError, OverflowError) as e:
        status, code, message = 400, "invalid_request", f"{type(e).__name__}: {e}"
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


def make_app():
    app = web.Application(middlewares=[errors], client_max_size=1 << 30)
    app.add_routes([web.post("/v1/gemm", gemm), web.post("/v1/ata", ata),
                    web.post("/v1/histogram", histogram), web.get("/readyz", readyz)])
    return app


async def serve(host, port, reuse_port, ready, compute="numpy"):
    global COMPUTE
    COMPUTE = Torch() if compute == "torch" else Numpy
    runner = web.AppRunner(make_app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, reuse_port=reuse_port, backlog=1024).start()
    ready(runner.addresses[0][1])
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8081, help="0: any free port (one worker only)")
    ap.add_argument("--workers", type=int, default=1, help="processes sharing the port")
    ap.add_argument("--compute", choices=("numpy", "torch"), default="numpy",
                    help="NumPy on the CPU, or PyTorch on the first CUDA device")
    args = ap.parse_args()

    def listening(port, n=args.workers):
        print(f"alt_server: listening on http://{args.host}:{port} with {n} process(es), compute {args.compute}",
              flush=True)

    if args.workers == 1:
        asyncio.run(serve(args.host, args.port, False, listening, args.compute))
        return
    if args.port == 0:
        ap.error("--workers > 1 needs a fixed --port (each process binds it)")
    ctx = multiprocessing.get_context("fork")
    up = ctx.SimpleQueue()
    procs = [ctx.Process(target=lambda: asyncio.run(serve(args.host, args.port, True, up.put, args.compute)))
             for _ in range(args.workers)]
    for p in procs:
        p.start()
    for _ in procs:
        up.get()
    listening(args.port)
    # the children handle SIGTERM/SIGINT themselves; the parent only passes SIGTERM on
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    for p in procs:
        p.terminate()
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
