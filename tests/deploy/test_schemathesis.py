"""OpenAPI conformance: schemathesis generates requests from api/openapi.yaml for the stateless
JSON endpoints and checks a CPU daemon's answers: no 5xx, documented status codes, content types,
headers, and bodies that match the response schemas. Bounded: 25 examples per operation per phase.

Not asserted: positive_data_acceptance (a schema cannot say that data has rows*cols numbers or that
shapes conform, so schema-valid bodies are rightly refused) and negative_data_rejection (it sends
undeclared headers, which HTTP servers rightly ignore)."""

import json
import re

import pytest
import yaml

from conftest import PY, ROOT, Daemon, run

SPEC = ROOT / "api" / "openapi.yaml"
CHECKS = ["not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_headers_conformance", "response_schema_conformance"]
# Async jobs are stateful (ids, TTLs) and /metrics is text: covered by tests/http.
EXCLUDE = r"^/v1/jobs|^/metrics$"

pytest.importorskip("schemathesis", reason="pip install schemathesis (scripts/deps.sh)")


@pytest.fixture(scope="module")
def st_daemon():
    d = Daemon(args=["--queue-depth", "64"]).start()
    yield d
    d.stop()


def operations():
    spec = yaml.safe_load(SPEC.read_text())
    methods = {"get", "put", "post", "delete", "patch", "head", "options"}
    return [(m.upper(), p) for p, item in spec["paths"].items() if not re.search(EXCLUDE, p)
            for m in item if m in methods]


def test_openapi_conformance(st_daemon, tmp_path):
    ops = operations()
    assert {("POST", "/v1/gemm"), ("POST", "/v1/ata"), ("POST", "/v1/histogram"),
            ("GET", "/readyz")} <= set(ops), ops
    report = tmp_path / "events.ndjson"
    cmd = [PY, "-m", "schemathesis.cli", "run", str(SPEC), "--url", st_daemon.url,
           "--checks", ",".join(CHECKS), "--exclude-path-regex", EXCLUDE,
           "--phases", "examples,coverage,fuzzing", "--max-examples", "25", "--seed", "1",
           "--workers", "1", "--no-color", "--generation-database", "none",
           "--request-timeout", "30", "--report", "ndjson", "--report-ndjson-path", str(report)]
    r = run(cmd, cwd=tmp_path, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-8000:] + "\n--- daemon log ---\n" + st_daemon.log()[-3000:]
    m = re.search(r"Tested:\s+(\d+)", out)
    assert m and int(m.group(1)) == len(ops), out[-3000:]
    m = re.search(r"(\d+) generated, (\d+) passed", out)
    assert m, out[-3000:]
    generated, passed = int(m.group(1)), int(m.group(2))
    assert generated == passed and generated >= 100, (generated, passed)
    assert report.stat().st_size > 0
    for line in report.read_text().splitlines():
        json.loads(line)  # the report is well-formed: a record of what ran
    assert st_daemon.proc.poll() is None, "the daemon died under generated input"
