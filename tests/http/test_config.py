"""Configuration as an operator meets it: `crunchd --version` and the same record in /v1/info,
--help with every flag's default, limits whose defaults follow other limits, and `make run`
honouring the daemon's own CRUNCHD_* variables."""

import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import time

import pytest
import requests

from conftest import BIN, POLL_S, ROOT, START_TIMEOUT_S

MiB = 1 << 20


def run_bin(*args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("CRUNCHD_")}
    e["CRUNCHD_GRPC_PORT"] = "0"  # a daemon started here leaves 8001 to whoever has it
    e.update(env or {})
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=30, env=e)


def version_fields():
    p = run_bin("--version")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    m = re.fullmatch(r"crunchd (\S+)", lines[0])
    assert m, lines
    fields = {"version": m.group(1)}
    for ln in lines[1:]:
        k, _, v = ln.partition(": ")
        fields[k] = v
    return fields


# -- --version and /v1/info ----------------------------------------------------------------------

def test_version_prints_revision_flags_and_cuda():
    f = version_fields()
    assert f["version"] == (ROOT / "VERSION").read_text().strip()
    rev = f["git revision"]
    assert rev == "unknown" or re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?|v?[\w.]+-\d+-g[0-9a-f]+(-dirty)?", rev), rev
    assert "-std=c11" in f["build flags"] and "-Werror" in f["build flags"], f
    if "cuda toolkit" in f:  # a CUDA build: toolkit, runtime and driver ("none" with no driver)
        assert re.fullmatch(r"\d+\.\d+", f["cuda toolkit"]), f
        assert re.fullmatch(r"\d+\.\d+|none", f["cuda runtime"]), f
        assert re.fullmatch(r"\d+\.\d+|none", f["cuda driver"]), f
    else:
        assert f["cuda"].startswith("none"), f


def test_version_matches_the_git_checkout():
    """The revision comes from the Makefile's git describe: it names the commit built (HEAD when
    the build is fresh; an older commit only if the binary was not rebuilt since)."""
    rev = version_fields()["git revision"]
    if rev == "unknown":
        pytest.skip("built outside a git checkout")
    built = pathlib.Path(BIN).resolve()
    if built.parent.parent != ROOT.resolve() or not built.parent.name.startswith("build"):
        pytest.skip("a binary from outside this checkout's build directories (a device bundle), "
                    "built in another checkout")
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse"], capture_output=True).returncode != 0:
        pytest.skip("the tests run outside a git checkout (a copy, as on the GPU machine)")
    sha = rev.removesuffix("-dirty").split("-g")[-1]
    p = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-t", sha], capture_output=True, text=True)
    assert p.stdout.strip() == "commit", (rev, p.stderr)


def test_info_has_the_version_record(daemon):
    f = version_fields()
    b = daemon.get("/v1/info").json()["build"]
    assert b["version"] == f["version"]
    assert b["git_revision"] == f["git revision"]
    assert b["flags"] == f["build flags"]
    if "cuda toolkit" in f:
        assert (b["cuda_toolkit"], b["cuda_runtime"], b["cuda_driver"]) == \
            (f["cuda toolkit"], f["cuda runtime"], f["cuda driver"])
    else:
        assert b["cuda_toolkit"] == "none"


def test_help_shows_every_default():
    p = run_bin("--help")
    assert p.returncode == 0, p.stderr
    flags = re.findall(r"^  --([a-z-]+)( \S+)?\n      (.*)$", p.stdout, re.M)
    assert len(flags) > 30, p.stdout
    for name, _, text in flags:
        if name in ("check", "help", "version"):
            continue
        assert re.search(r"\(default: [^)]+\) \[CRUNCHD_[A-Z_]+\]$", text), (name, text)
    assert "--version" in p.stdout
    assert re.search(r"--max-json-mb N\n .*\(default: 256, at most --max-body-mb\)", p.stdout)


# -- limits that follow other limits -------------------------------------------------------------

def test_max_body_alone_lowers_the_json_limit(start_daemon):
    d = start_daemon("--max-body-mb", "1")
    lim = d.get("/v1/info").json()["limits"]
    assert lim["max_body_bytes"] == MiB and lim["max_json_bytes"] == MiB, lim
    r = d.post("/v1/histogram", {"data": [1] * (600 * 1024)})  # ~1.2 MB of JSON
    assert r.status_code == 413, r.text


def test_max_body_from_the_environment_too(start_daemon):
    d = start_daemon(env={"CRUNCHD_MAX_BODY_MB": "2"})
    lim = d.get("/v1/info").json()["limits"]
    assert lim["max_body_bytes"] == 2 * MiB and lim["max_json_bytes"] == 2 * MiB, lim


def test_max_json_alone_raises_the_body_limit(start_daemon):
    d = start_daemon("--max-json-mb", "5000")
    lim = d.get("/v1/info").json()["limits"]
    assert lim["max_json_bytes"] == 5000 * MiB and lim["max_body_bytes"] == 5000 * MiB, lim


def test_default_limits_unchanged(info):
    lim = info["limits"]
    assert lim["max_body_bytes"] == 4096 * MiB and lim["max_json_bytes"] == 256 * MiB, lim
    assert 0 < lim["result_cap_bytes"] <= lim["max_memory_bytes"], lim
    assert 0 < lim["shm_max_bytes"] <= lim["max_memory_bytes"], lim


def test_result_cap_follows_a_small_budget(start_daemon):
    d = start_daemon("--max-memory-mb", "64")
    lim = d.get("/v1/info").json()["limits"]
    assert lim["max_memory_bytes"] == 64 * MiB and lim["result_cap_bytes"] == 64 * MiB, lim
    assert lim["shm_max_bytes"] == 32 * MiB, lim


def test_contradicting_explicit_limits_refuse_to_start():
    p = run_bin("--max-body-mb", "1", "--max-json-mb", "2", "--port", "0")
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "--max-json-mb (2) must not exceed --max-body-mb (1)" in p.stderr, p.stderr


@pytest.mark.parametrize("flag, value, choices", [
    ("--gpu-wait", "busy", "yield, spin or block"),
    ("--log-format", "xml", "text or json"),
    ("--access-log", "some", "all, errors or off"),
    ("--backend", "tpu", "cuda, cpu or auto"),
])
def test_a_choice_outside_its_list_refuses_to_start(flag, value, choices):
    p = run_bin(flag, value, "--port", "0")
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert f"{flag}: expected {choices}, got '{value}'" in p.stderr, p.stderr


@pytest.mark.parametrize("mode", ["yield", "spin", "block"])
def test_every_gpu_wait_mode_serves(start_daemon, mode):
    d = start_daemon("--gpu-wait", mode)
    assert f"(GPU wait: {mode})" in d.log_text()
    r = d.post("/v1/gemm", {"a": [[1, 2], [3, 4]], "b": [[5], [6]]})
    assert r.status_code == 200 and r.json()["result"]["data"] == [17, 39], r.text


# -- make run ------------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_env(**extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("CRUNCHD_") and k != "PORT"}
    e.update(extra)
    return e


def test_make_run_passes_no_flag_over_the_environment():
    p = subprocess.run(["make", "-s", "-n", "-C", str(ROOT), "serve", "PORT=9123"],
                       capture_output=True, text=True, timeout=60, env=make_env())
    assert p.returncode == 0, p.stderr
    cmd = p.stdout.strip().splitlines()[-1]
    assert "crunchd" in cmd and "--port" not in cmd and "--backend" not in cmd, cmd
    assert 'CRUNCHD_PORT="${CRUNCHD_PORT:-9123}"' in cmd, cmd
    p = subprocess.run(["make", "-s", "-n", "-C", str(ROOT), "run"],
                       capture_output=True, text=True, timeout=60, env=make_env())
    assert p.returncode == 0 and "--port" not in p.stdout, p.stdout


def test_make_serve_listens_on_crunchd_port(tmp_path):
    """The recipe `make run` ends with, started for real: CRUNCHD_PORT=N wins over PORT."""
    build = tmp_path / "build"
    build.mkdir()
    (build / "crunchd").symlink_to(BIN)
    port = free_port()
    env = make_env(CRUNCHD_PORT=str(port), CRUNCHD_BACKEND="cpu", CRUNCHD_BIND="127.0.0.1",
                   CRUNCHD_WORKERS="1", CRUNCHD_GRPC_PORT="0")
    log = open(tmp_path / "make.log", "wb")
    p = subprocess.Popen(["make", "-s", "-C", str(ROOT), "serve", f"BUILD={build}", "PORT=1"],
                         env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert p.poll() is None, (tmp_path / "make.log").read_text()
            try:
                if requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, (tmp_path / "make.log").read_text()
            time.sleep(POLL_S)
        info = requests.get(f"http://127.0.0.1:{port}/v1/info", timeout=5).json()
        assert info["backend"] == "cpu" and info["limits"]["workers"] == 1, info
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=60)
        log.close()


def test_auto_cache_is_written_then_read_and_refused_from_another_build(start_daemon, tmp_path):
    """--auto-cache: the first start measures the table behind "auto" and writes it; the next
    start of the same binary reads it (same choices, no probes); a file from another build or
    device (another key) or a malformed one is measured over and rewritten."""
    path = tmp_path / "auto.json"
    first = start_daemon("--auto-cache", str(path), name="auto-first")
    table = first.get("/v1/kernels").json()["auto"]
    assert "measured in" in first.log_text() and path.exists()
    doc = json.loads(path.read_text())
    assert "crunchd" in doc["key"]
    # the file reads as GET /v1/kernels writes the table (names, not enum numbers); rows whose
    # probe found no kernel are kept too, with kernel null
    fields = ("op", "dtype", "precision", "kernel", "ms", "probe")
    kept = [{k: r[k] for k in fields} | {"size": r["class"]}
            for r in doc["rows"] if r["kernel"] is not None]
    assert kept == table, (kept, table)
    first.stop()
    second = start_daemon("--auto-cache", str(path), name="auto-second")
    assert f"read from {path}" in second.log_text() and "measured in" not in second.log_text()
    assert second.get("/v1/kernels").json()["auto"] == table
    second.stop()
    for broken, why in ((doc | {"key": "crunchd 0.0 other device"}, "another build"),
                        (doc | {"rows": [{"op": "gemm", "kernel": "no-such-kernel"}]}, "row 1"),
                        (doc | {"rows": [r | {"dtype": 0} for r in doc["rows"]]}, "row 1"),  # the old numbers
                        ("{not json", "not an auto table")):
        path.write_text(broken if isinstance(broken, str) else json.dumps(broken))
        d = start_daemon("--auto-cache", str(path), name=f"auto-{why.split()[0]}")
        assert "measured in" in d.log_text() and why in d.log_text(), d.log_tail()
        assert json.loads(path.read_text())["key"] == doc["key"]  # rewritten for this build
        assert len(d.get("/v1/kernels").json()["auto"]) == len(table)  # measured again: times differ
        d.stop()
