"""Triton's Performance Analyzer (perf_analyzer 2.40, fetched by make deps into .tools/) against a
real daemon: every mode a Triton user would run, for each model, as a short conformance pass.
Each run must finish with exit status 0, measure a non-zero throughput and, since the daemon
advertises the statistics extension, print the server's side of the latency (queue and compute
from /v2/models/{model}/stats).

PERF_ANALYZER overrides the binary. CUDA shared memory needs a GPU: it runs with
CRUNCHD_BACKEND=cuda only."""

import contextlib
import fcntl
import os
import re
import subprocess
import tempfile

import pytest

from conftest import BACKEND, ROOT

PA = os.environ.get("PERF_ANALYZER") or str(ROOT / ".tools" / "perf_analyzer" / "perf_analyzer")
# Short windows, any spread between them: this proves the modes work (on a loaded 2-core machine
# too); make bench-load measures them.
WINDOW = ["--measurement-interval", "300", "--max-trials", "4", "--stability-percentage", "1000"]
SHAPES = {
    "gemm": ["--shape", "a:16,12", "--shape", "b:12,8", "--shape", "c:16,8"],
    "ata": ["--shape", "a:40,6"],
    "histogram": ["--shape", "data:1000"],
}
# Output byte sizes for the shared-memory modes: the largest output of each model.
OUT_BYTES = {"gemm": 16 * 8 * 4, "ata": 6 * 6 * 4, "histogram": 257 * 8}


@pytest.fixture(scope="module")
def pa_daemon(start_daemon_module):
    return start_daemon_module(grpc=True)


@pytest.fixture(scope="module")
def start_daemon_module(tmp_path_factory):
    from conftest import daemon_factory
    yield from daemon_factory(tmp_path_factory.mktemp("perf-analyzer"), prefix="pa")


@contextlib.contextmanager
def shm_names_lock(extra):
    """perf_analyzer names its shared-memory objects and regions the same in every run (/a_0_0):
    two at once on one machine (pytest-xdist workers) would unlink each other's."""
    if "--shared-memory" not in extra:
        yield
        return
    with open(os.path.join(tempfile.gettempdir(), "crunchd-perf-analyzer-shm.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def run_pa(daemon, model, *extra, shapes=None, timeout=120, grpc=False):
    """perf_analyzer over HTTP, or over gRPC (-i grpc, the daemon's --grpc-port)."""
    if not os.access(PA, os.X_OK):
        pytest.fail(f"{PA} is missing: make deps fetches it (scripts/fetch_perf_analyzer.sh)")
    url = ["-i", "grpc", "-u", f"127.0.0.1:{daemon.grpc_port}"] if grpc else ["-u", f"127.0.0.1:{daemon.port}"]
    cmd = [PA, *url, "-m", model, *(shapes or SHAPES[model]), *WINDOW, *extra]
    with shm_names_lock(extra):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}:\n{out[-3000:]}"
    assert "error" not in out.lower(), out[-3000:]
    rates = [float(x) for x in re.findall(r"Throughput: ([0-9.]+) infer/sec", out)]
    assert rates and all(r > 0 for r in rates), out[-3000:]
    return out


def server_side(out):
    """The server's latency split of each measurement: (total, queue, compute infer) in us."""
    return [tuple(int(v) for v in m) for m in re.findall(
        r"Avg request latency: (\d+) usec \(overhead \d+ usec \+ queue (\d+) usec \+ compute input \d+ usec "
        r"\+ compute infer (\d+) usec", out)]


@pytest.mark.parametrize("model", sorted(SHAPES))
def test_binary_tensors_sync(pa_daemon, model):
    out = run_pa(pa_daemon, model)
    split = server_side(out)
    assert split, "no server-side statistics in the report:\n" + out[-2000:]


@pytest.mark.parametrize("model", sorted(SHAPES))
def test_async_concurrency_sweep(pa_daemon, model):
    out = run_pa(pa_daemon, model, "-a", "--concurrency-range", "1:4:3")
    assert "Concurrency: 1," in out and "Concurrency: 4," in out, out[-2000:]


def swept(out, *rates):
    """Whether perf_analyzer's summary has a line for each rate: it prints them as integers
    (`Request Rate: 50,`) or, when it fell behind a rate, with decimals (`Request Rate: 400.00,`)."""
    return all(re.search(rf"^Request Rate: {r}(\.0+)?, throughput", out, re.M) for r in rates)


def test_request_rate_sweep(pa_daemon):
    # rates a loaded 2-core CI machine keeps up with next to the other test workers
    out = run_pa(pa_daemon, "gemm", "--request-rate-range", "50:100:50")
    assert swept(out, 50, 100), out[-2000:]


@pytest.mark.parametrize("model", sorted(SHAPES))
def test_system_shared_memory(pa_daemon, model):
    """Inputs and outputs in regions perf_analyzer registers (with libcurl's default content type)
    and unregisters at the end (with an empty body): nothing is left registered."""
    run_pa(pa_daemon, model, "--shared-memory", "system", "--output-shared-memory-size", str(OUT_BYTES[model]))
    assert pa_daemon.get("/v2/systemsharedmemory/status").json() == []


@pytest.mark.skipif(BACKEND != "cuda", reason="CUDA shared memory needs a GPU")
@pytest.mark.parametrize("model", ["gemm", "ata"])
def test_cuda_shared_memory(pa_daemon, model):
    run_pa(pa_daemon, model, "--shared-memory", "cuda", "--output-shared-memory-size", str(OUT_BYTES[model]))
    assert pa_daemon.get("/v2/cudasharedmemory/status").json() == []


def test_server_statistics_split_queue_and_compute(pa_daemon):
    """A job big enough to take measurable time: the report's server side is not all zeros and
    its parts do not exceed the whole."""
    out = run_pa(pa_daemon, "gemm", shapes=["--shape", "a:192,192", "--shape", "b:192,192", "--shape", "c:192,192"])
    split = server_side(out)
    assert split and all(total > 0 and queue + infer <= total + 1 for total, queue, infer in split), out[-2000:]
    stats = pa_daemon.get("/v2/models/gemm/stats").json()["model_stats"][0]
    assert stats["inference_count"] >= stats["execution_count"] > 0
    assert set(stats["inference_stats"]) >= {"success", "fail", "queue", "compute_input", "compute_infer",
                                              "compute_output", "cache_hit", "cache_miss"}


# -- the same modes over gRPC (-i grpc): tritonclient's C++ gRPC client on the KServe v2 gRPC port --

@pytest.mark.parametrize("model", sorted(SHAPES))
def test_grpc_binary_tensors_sync(pa_daemon, model):
    out = run_pa(pa_daemon, model, grpc=True)
    assert server_side(out), "no server-side statistics in the report:\n" + out[-2000:]


@pytest.mark.parametrize("model", sorted(SHAPES))
def test_grpc_async_concurrency_sweep(pa_daemon, model):
    out = run_pa(pa_daemon, model, "-a", "--concurrency-range", "1:4:3", grpc=True)
    assert "Concurrency: 1," in out and "Concurrency: 4," in out, out[-2000:]


@pytest.mark.parametrize("model", sorted(SHAPES))
def test_grpc_streaming(pa_daemon, model):
    """ModelStreamInfer: perf_analyzer's requests on one bidirectional stream per context."""
    out = run_pa(pa_daemon, model, "--streaming", "--concurrency-range", "1:8:7", grpc=True)
    assert "Concurrency: 8," in out, out[-2000:]


@pytest.mark.parametrize("model", sorted(SHAPES))
def test_grpc_system_shared_memory(pa_daemon, model):
    """Regions registered, used and unregistered over gRPC: the table HTTP reads is empty after."""
    run_pa(pa_daemon, model, "--shared-memory", "system", "--output-shared-memory-size", str(OUT_BYTES[model]),
           grpc=True)
    assert pa_daemon.get("/v2/systemsharedmemory/status").json() == []


def test_grpc_request_rate(pa_daemon):
    out = run_pa(pa_daemon, "gemm", "--request-rate-range", "200:400:200", grpc=True)
    assert swept(out, 200, 400), out[-2000:]


@pytest.mark.skipif(BACKEND != "cuda", reason="CUDA shared memory needs a GPU")
@pytest.mark.parametrize("model", ["gemm", "ata"])
def test_grpc_cuda_shared_memory(pa_daemon, model):
    run_pa(pa_daemon, model, "--shared-memory", "cuda", "--output-shared-memory-size", str(OUT_BYTES[model]),
           grpc=True)
    assert pa_daemon.get("/v2/cudasharedmemory/status").json() == []
