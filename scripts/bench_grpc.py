#!/usr/bin/env python3
"""The gRPC listener against the HTTP KServe path on one daemon (issue 38's targets):

  1. perf_analyzer -i grpc against -i http, 64x64 and 256x256 FP32 GEMM (the same input data, from
     a file: no subnormal random bits), at concurrency 1 and 64: infer/s and p99 of each, the
     daemon's and perf_analyzer's CPU per request, and the ratio gRPC/HTTP (the target: at least 1).
  2. 1,000 requests in flight on one ModelStreamInfer stream (tritonclient.grpc's streaming API:
     all sent before the first answer is read): every answer checked against numpy, the time.
  3. One 256 MiB FP32 tensor (a histogram's data) end to end, gRPC against HTTP binary, two ways:
     with tritonclient (what a user runs; its Python serialisation is part of it), and with each
     request's bytes built once beforehand (grpcio with an identity serialiser, http.client with
     the binary body): the protocols and the daemon alone. The target: gRPC within 1.2x of HTTP.

  scripts/bench_grpc.py [--small] [--bin build/crunchd] [--backend cuda|cpu] [--csv out.csv] [--window-ms N]

--small (a CPU machine): 64x64 only, concurrency 1 and 8, 16 MiB instead of 256, short windows.
Starts its own daemon (tests/http/conftest.py's Daemon: free ports, its log beside it); prints a
table and writes the rows as CSV when asked. CRUNCHD_BENCH_ARGS adds daemon flags."""

import argparse
import base64
import csv
import http.client
import json
import os
import pathlib
import queue
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np
import requests

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "http"))
sys.path.insert(0, str(ROOT / "scripts"))
import bench_load  # noqa: E402  (cpu_s: a process's CPU seconds)
PERF_ANALYZER = os.environ.get("PERF_ANALYZER") or str(ROOT / ".tools" / "perf_analyzer" / "perf_analyzer")


def perf_analyzer(url, proto, data_file, n, conc, window_ms):
    """perf_analyzer's last (stable) window at one concurrency: infer/s and p99 (ms)."""
    cmd = [PERF_ANALYZER, "-i", proto, "-u", url, "-m", "gemm", "--input-data", str(data_file),
           "--shape", f"a:{n},{n}", "--shape", f"b:{n},{n}", "--concurrency-range", str(conc),
           "--measurement-interval", str(window_ms), "--stability-percentage", "100", "--max-trials", "6"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    text = out.stdout + out.stderr
    rate = re.findall(r"Throughput: ([0-9.]+) infer/sec", text)
    if out.returncode != 0 or not rate:
        raise RuntimeError(f"{shlex.join(cmd)}: rc {out.returncode}:\n{text[-2000:]}")
    p99 = re.findall(r"p99 latency: (\d+) usec", text)
    # the server's own time per request (its statistics extension): what the daemon spends
    # from a request's arrival to its answer, whichever client sent it
    server = re.findall(r"Avg request latency: (\d+) usec", text)  # the Server: section's
    return (float(rate[-1]), float(p99[-1]) / 1e3 if p99 else float("nan"),
            float(server[-1]) / 1e3 if server else float("nan"))


def gemm_data(tmp, n, rng):
    a, b = (np.round(rng.uniform(-1, 1, (n, n)), 4).astype(np.float32) for _ in range(2))
    f = tmp / f"gemm{n}.json"
    f.write_text(json.dumps({"data": [{k: {"b64": base64.b64encode(m.tobytes()).decode(), "shape": [n, n]}
                                       for k, m in (("a", a), ("b", b))}]}))
    return f


def answered(d):
    """Requests the daemon has answered on either transport (its request counters)."""
    text = requests.get(d.url("/metrics"), timeout=10).text
    return sum(float(v) for v in re.findall(r"^crunchd_(?:grpc_)?requests_total\{[^}]*\} (\S+)$", text, re.M))


def with_costs(d, run):
    """run() -> (rate, p99), plus the daemon's and perf_analyzer's CPU per request (us) meanwhile:
    where the client is the bound, the daemon's cost per request is what compares."""
    n0, c0, k0 = answered(d), bench_load.cpu_s(d.proc.pid), resource.getrusage(resource.RUSAGE_CHILDREN)
    rate, p99, server_ms = run()
    n = answered(d) - n0 - 1  # the metrics request itself
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    client = k1.ru_utime + k1.ru_stime - k0.ru_utime - k0.ru_stime
    return rate, p99, (bench_load.cpu_s(d.proc.pid) - c0) / max(n, 1) * 1e6, client / max(n, 1) * 1e6, server_ms


def rates(d, tmp, sizes, concs, window_ms, rows):
    rng = np.random.default_rng(38)
    for n in sizes:
        data = gemm_data(tmp, n, rng)
        for conc in concs:
            h = with_costs(d, lambda: perf_analyzer(f"127.0.0.1:{d.port}", "http", data, n, conc, window_ms))
            g = with_costs(d, lambda: perf_analyzer(f"127.0.0.1:{d.grpc_port}", "grpc", data, n, conc, window_ms))
            cost = lambda r: (f"{r[0]:.0f}/s p99 {r[1]:.2f} ms, in the daemon {r[4] * 1e3:.0f} us, "
                              f"cpu daemon {r[2]:.0f} + client {r[3]:.0f} us")
            rows.append({"test": f"gemm{n} c{conc}", "http": cost(h), "grpc": cost(g),
                         "grpc/http": f"{g[0] / h[0]:.2f}x rate, {g[2] / h[2]:.2f}x daemon cpu"})
            print(rows[-1], flush=True)


def stream_thousand(d, rows, n=1000):
    import tritonclient.grpc as tg
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (16, 16)).astype(np.float32)
    bs = [rng.uniform(-1, 1, (16, 16)).astype(np.float32) for _ in range(n)]
    answers = queue.Queue()
    c = tg.InferenceServerClient(f"127.0.0.1:{d.grpc_port}")
    c.start_stream(callback=lambda result, error: answers.put((result, error)))
    t = time.perf_counter()
    for i, b in enumerate(bs):
        ia, ib = tg.InferInput("a", [16, 16], "FP32"), tg.InferInput("b", [16, 16], "FP32")
        ia.set_data_from_numpy(a)
        ib.set_data_from_numpy(b)
        c.async_stream_infer("gemm", [ia, ib], request_id=str(i))
    got, bad = {}, 0
    for _ in range(n):
        res, err = answers.get(timeout=300)
        if err is not None:
            bad += 1
            continue
        i = int(res.get_response().id)
        ok = np.allclose(res.as_numpy("c"), a.astype(np.float64) @ bs[i], rtol=1e-4, atol=1e-4)
        bad += not ok or i in got
        got[i] = True
    secs = time.perf_counter() - t
    c.stop_stream()
    c.close()
    rows.append({"test": f"stream {n} in flight", "http": "", "grpc": f"{n / secs:.0f}/s in {secs * 1e3:.0f} ms",
                 "grpc/http": f"{len(got)} answered, {bad} wrong or failed"})
    print(rows[-1], flush=True)
    return bad == 0 and len(got) == n


def best(fn, repeats):
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts), sorted(ts)[len(ts) // 2]


def big_tensor(d, mib, repeats, rows):
    import grpc
    import tritonclient.grpc as tg
    import tritonclient.http as th
    from tritonclient.grpc import service_pb2
    n = mib << 20 >> 2
    data = np.random.default_rng(1).uniform(0, 1, n).astype(np.float32)
    params = {"bins": 16, "range_lo": 0.0, "range_hi": 1.0}
    expect = np.histogram(data, 16, (0.0, 1.0))[0]
    hc = th.InferenceServerClient(f"127.0.0.1:{d.port}", network_timeout=600, connection_timeout=600)
    gc = tg.InferenceServerClient(f"127.0.0.1:{d.grpc_port}")

    def http_client():
        i = th.InferInput("data", [n], "FP32")
        i.set_data_from_numpy(data, binary_data=True)
        out = [th.InferRequestedOutput("counts", binary_data=True)]
        assert (hc.infer("histogram", [i], parameters=params, outputs=out).as_numpy("counts") == expect).all()

    def grpc_client():
        i = tg.InferInput("data", [n], "FP32")
        i.set_data_from_numpy(data)
        assert (gc.infer("histogram", [i], parameters=params).as_numpy("counts") == expect).all()

    raw = data.tobytes()
    head = json.dumps({"inputs": [{"name": "data", "datatype": "FP32", "shape": [n],
                                   "parameters": {"binary_data_size": len(raw)}}], "parameters": params,
                       "outputs": [{"name": "counts", "parameters": {"binary_data": True}}]}).encode()
    body = head + raw

    def http_bytes():
        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=600)
        c.request("POST", "/v2/models/histogram/infer", body=body,
                  headers={"Inference-Header-Content-Length": str(len(head)), "Content-Type": "application/octet-stream"})
        r = c.getresponse()
        r.read()
        assert r.status == 200
        c.close()

    rq = service_pb2.ModelInferRequest(model_name="histogram")
    rq.inputs.add(name="data", datatype="FP32", shape=[n])
    rq.parameters["bins"].int64_param = 16
    rq.parameters["range_lo"].double_param = 0.0
    rq.parameters["range_hi"].double_param = 1.0
    rq.raw_input_contents.append(raw)
    msg = rq.SerializeToString()
    ch = grpc.insecure_channel(f"127.0.0.1:{d.grpc_port}", options=[("grpc.max_send_message_length", -1),
                                                                      ("grpc.max_receive_message_length", -1)])
    call = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer", request_serializer=lambda x: x,
                          response_deserializer=lambda x: x)

    def grpc_bytes():
        call(msg, timeout=600)

    for how, h_fn, g_fn in (("tritonclient", http_client, grpc_client), ("prebuilt bytes", http_bytes, grpc_bytes)):
        h_fn(), g_fn()  # warm: pools, the pinned cache, the channel
        h, g = best(h_fn, repeats), best(g_fn, repeats)
        rows.append({"test": f"{mib} MiB FP32, {how}", "http": f"{h[0] * 1e3:.1f} ms (median {h[1] * 1e3:.1f})",
                     "grpc": f"{g[0] * 1e3:.1f} ms (median {g[1] * 1e3:.1f})", "grpc/http": f"{g[0] / h[0]:.2f}x time"})
        print(rows[-1], flush=True)
    ch.close()
    gc.close()
    hc.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="a CPU machine: small sizes and windows")
    ap.add_argument("--bin", default=os.environ.get("CRUNCHD_BIN", str(ROOT / "build" / "crunchd")))
    ap.add_argument("--backend", default=os.environ.get("CRUNCHD_BACKEND", "auto"))
    ap.add_argument("--csv", help="also write the rows here")
    ap.add_argument("--window-ms", type=int, help="perf_analyzer's measurement window (3000; --small 1000)")
    args = ap.parse_args()
    os.environ["CRUNCHD_BIN"], os.environ["CRUNCHD_BACKEND"] = args.bin, args.backend
    import conftest
    conftest.BIN, conftest.BACKEND = args.bin, args.backend
    if not os.access(PERF_ANALYZER, os.X_OK):
        sys.exit(f"bench_grpc: {PERF_ANALYZER} is missing (make deps fetches it)")
    sizes, concs = ([64], [1, 8]) if args.small else ([64, 256], [1, 64])
    window_ms, mib, repeats = (1000, 16, 3) if args.small else (3000, 256, 5)
    window_ms = args.window_ms or window_ms
    rows, ok = [], True
    with tempfile.TemporaryDirectory(prefix="bench-grpc-") as t:
        tmp = pathlib.Path(t)
        d = conftest.Daemon(shlex.split(os.environ.get("CRUNCHD_BENCH_ARGS", "")) + ["--access-log", "errors"],
                            name="bench-grpc", workdir=tmp, host_path=True, grpc=True).start()
        try:
            info = d.get("/v1/info").json()
            print(f"crunchd {info.get('version')} backend {info.get('backend')} "
                  f"({(info.get('devices') or [{}])[0].get('name', '?')}), {os.cpu_count()} CPUs", flush=True)
            rates(d, tmp, sizes, concs, window_ms, rows)
            ok = stream_thousand(d, rows)
            big_tensor(d, mib, repeats, rows)
        finally:
            d.stop()
    w = max(len(r["test"]) for r in rows)
    print(f"\n{'test':<{w}}  {'HTTP (KServe v2)':<32}  {'gRPC':<32}  gRPC/HTTP")
    for r in rows:
        print(f"{r['test']:<{w}}  {r['http']:<32}  {r['grpc']:<32}  {r['grpc/http']}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(rows[0]))
            wr.writeheader()
            wr.writerows(rows)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
