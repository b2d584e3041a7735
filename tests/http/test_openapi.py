"""api/openapi.yaml is a valid OpenAPI document, and it and the daemon agree: every route of the
spec is served, routes outside it are not, and real answers validate against its schemas."""

import os
import pathlib
import uuid

import pytest
import requests
yaml = pytest.importorskip("yaml")

# Installed by `make deps`; a bare GPU image may lack them: skip there, with the reason shown.
OAS30Validator = pytest.importorskip("openapi_schema_validator").OAS30Validator
validate = pytest.importorskip("openapi_spec_validator").validate

from conftest import ROOT, parse_server_timing

SPEC_PATH = ROOT / "api" / "openapi.yaml"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


@pytest.fixture(scope="module")
def spec():
    with open(SPEC_PATH) as f:
        return yaml.safe_load(f)


def schema_validator(spec, name):
    """A validator for components.schemas[name] that resolves the spec's $refs."""
    return OAS30Validator({"$ref": f"#/components/schemas/{name}",
                           "components": spec["components"]})


def check(spec, name, instance):
    errors = sorted(schema_validator(spec, name).iter_errors(instance), key=str)
    assert not errors, f"{name}: " + "; ".join(e.message for e in errors[:5])


def test_spec_is_valid_openapi(spec):
    validate(spec)
    assert spec["openapi"].startswith("3.")


def spec_operations(spec):
    for path, item in spec["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method.upper()


# KServe v2 (server/kserve/): {model_name} and {model_version} are filled in by request_for,
# {region_name} with a region registered on a real shared-memory object.
KSERVE_OPS = {
    ("/v2", "GET"), ("/v2/health/live", "GET"), ("/v2/health/ready", "GET"),
    ("/v2/models/{model_name}", "GET"), ("/v2/models/{model_name}/versions/{model_version}", "GET"),
    ("/v2/models/{model_name}/ready", "GET"),
    ("/v2/models/{model_name}/versions/{model_version}/ready", "GET"),
    ("/v2/models/{model_name}/infer", "POST"),
    ("/v2/models/{model_name}/versions/{model_version}/infer", "POST"),
    ("/v2/models/stats", "GET"), ("/v2/models/{model_name}/stats", "GET"),
    ("/v2/models/{model_name}/versions/{model_version}/stats", "GET"),
    ("/v2/models/{model_name}/config", "GET"),
    ("/v2/models/{model_name}/versions/{model_version}/config", "GET"),
    ("/v2/repository/index", "POST"), ("/v2/repository/models/{model_name}/load", "POST"),
    ("/v2/repository/models/{model_name}/unload", "POST"),
    ("/v2/systemsharedmemory/status", "GET"),
    ("/v2/systemsharedmemory/region/{region_name}/status", "GET"),
    ("/v2/systemsharedmemory/region/{region_name}/register", "POST"),
    ("/v2/systemsharedmemory/region/{region_name}/unregister", "POST"),
    ("/v2/systemsharedmemory/unregister", "POST"),
    ("/v2/cudasharedmemory/status", "GET"),
    ("/v2/cudasharedmemory/region/{region_name}/status", "GET"),
    ("/v2/cudasharedmemory/region/{region_name}/register", "POST"),
    ("/v2/cudasharedmemory/region/{region_name}/unregister", "POST"),
    ("/v2/cudasharedmemory/unregister", "POST"),
}
KSERVE_INFER = {"inputs": [{"name": "a", "datatype": "FP32", "shape": [2, 1], "data": [1, 2]},
                           {"name": "b", "datatype": "FP32", "shape": [1, 1], "data": [3]}]}


def test_spec_lists_the_contract_routes(spec):
    ops = set(spec_operations(spec))
    assert ops == {
        ("/v1/gemm", "POST"), ("/v1/ata", "POST"), ("/v1/histogram", "POST"),
        ("/v1/jobs", "POST"), ("/v1/jobs/{id}", "GET"), ("/v1/jobs/{id}", "DELETE"),
        ("/v1/jobs/{id}/result", "GET"), ("/healthz", "GET"), ("/readyz", "GET"), ("/openapi.yaml", "GET"),
        ("/metrics", "GET"), ("/v1/info", "GET"), ("/v1/kernels", "GET"),
        ("/v1/tensors", "GET"), ("/v1/tensors", "POST"), ("/v1/tensors/{ref}", "GET"),
        ("/v1/tensors/{ref}", "DELETE"),
    } | KSERVE_OPS, ops


def test_spec_error_codes_match_error_h(spec):
    """The spec's code vocabulary is the one of server/error.h (plus 409 'cancelled')."""
    text = (ROOT / "server" / "error.h").read_text()
    import re
    codes = set(re.findall(r"^ \*\s+[0-9/]+\s+([a-z_]+)\s", text, re.M))
    assert {"invalid_json", "shape_mismatch", "deadline_exceeded"} <= codes, codes
    enum = set(spec["components"]["schemas"]["ErrorCode"]["enum"])
    assert enum == codes | {"cancelled"}, (enum ^ (codes | {"cancelled"}))


BODIES = {
    "/v1/gemm": {"a": [[1, 2], [3, 4]], "b": {"rows": 2, "cols": 1, "data": [1, 1]}},
    "/v1/ata": {"a": [[1, 2], [3, 4], [5, 6]], "dtype": "float64"},
    "/v1/histogram": {"data": [0.5, 1.5, 2.5], "dtype": "float32", "bins": 3},
    "/v1/jobs": {"op": "histogram", "data": [1, 2, 255]},
}


@pytest.fixture
def shm_key():
    """A 4 KiB POSIX shared-memory object for the region routes."""
    key = f"/crunchd-openapi-{uuid.uuid4().hex[:12]}"
    fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    os.ftruncate(fd, 4096)
    os.close(fd)
    yield key
    os.unlink("/dev/shm" + key)


FAKE_IPC = {"raw_handle": {"b64": "A" * 88}, "device_id": 0, "byte_size": 4096}


def region_request(daemon, path, method, key):
    """The region routes on a region registered for the purpose (fresh for registering). CUDA
    regions need a client's device allocation: their routes get a name no region has (status
    404 naming it, which shows the route is served) or a handle no driver opens (400)."""
    name = f"openapi-{uuid.uuid4().hex[:12]}"
    if "/cudasharedmemory/" in path:
        return daemon.request(method, path.replace("{region_name}", name),
                              json=FAKE_IPC if path.endswith("/register") else None)
    if not path.endswith("/register"):
        r = daemon.request("POST", f"/v2/systemsharedmemory/region/{name}/register",
                           json={"key": key, "offset": 0, "byte_size": 4096})
        assert r.status_code == 200, r.text
    r = daemon.request(method, path.replace("{region_name}", name),
                       json={"key": key, "offset": 0, "byte_size": 4096}
                       if path.endswith("/register") else None)
    daemon.request("POST", f"/v2/systemsharedmemory/region/{name}/unregister")
    return r


def request_for(daemon, path, method, shm_key=None):
    if "{region_name}" in path:
        return region_request(daemon, path, method, shm_key)
    if "{id}" in path:
        jid = daemon.submit({"op": "gemm", "a": [[2]], "b": [[3]]})
        daemon.wait_job(jid)
        path = path.replace("{id}", jid)
    if "{ref}" in path:
        tid = daemon.post("/v1/tensors", {"data": [[1.0]]}).json()["id"]
        path = path.replace("{ref}", tid)
    path = path.replace("{model_name}", "gemm").replace("{model_version}", "1")
    body = BODIES.get(path, KSERVE_INFER if path.startswith("/v2/") else None) \
        if method == "POST" else None
    if (path, method) == ("/v1/tensors", "POST"):
        body = {"data": [[1, 2], [3, 4]]}
    return daemon.request(method, path, json=body) if body is not None else \
        daemon.request(method, path)


def test_every_spec_route_is_served(daemon, spec, shm_key):
    failures = []
    for path, method in spec_operations(spec):
        r = request_for(daemon, path, method, shm_key)
        unknown_region = r.status_code == 404 and "no CUDA shared memory region" in r.text
        if (r.status_code in (404, 405) and not unknown_region) or r.status_code >= 500:
            failures.append(f"{method} {path}: {r.status_code} {r.text[:200]}")
        documented = spec["paths"][path][method.lower()]["responses"]
        if str(r.status_code) not in documented:
            failures.append(f"{method} {path}: status {r.status_code} is not documented")
    assert not failures, "\n".join(failures)


def test_methods_outside_spec_are_405(daemon, spec):
    """For each spec path, the methods it does not list answer 405 with an Allow of the
    listed ones."""
    failures = []
    jid = daemon.submit({"op": "gemm", "a": [[2]], "b": [[3]]})
    daemon.wait_job(jid)
    for path, item in spec["paths"].items():
        listed = {m.upper() for m in METHODS if m in item}
        real = path.replace("{id}", jid)
        for method in ("GET", "POST", "PUT", "DELETE", "PATCH"):
            if method in listed:
                continue
            r = daemon.request(method, real, data=b"{}",
                               headers={"Content-Type": "application/json"})
            if r.status_code != 405:
                failures.append(f"{method} {path}: {r.status_code}, want 405")
                continue
            allow = {m.strip().upper() for m in r.headers.get("Allow", "").split(",") if m.strip()}
            if not (listed <= allow <= listed | {"HEAD", "OPTIONS"}):
                failures.append(f"{method} {path}: Allow {allow}, spec lists {listed}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("method,path", [
    ("GET", "/"), ("GET", "/v1"), ("GET", "/v1/"), ("POST", "/v1/syrk"), ("POST", "/v1/fft"),
    ("GET", "/v1/jobs/x/result/y"), ("GET", "/v1/job"), ("POST", "/v2/gemm"),
    ("GET", "/health"), ("GET", "/ready"), ("GET", "/v1/info/x"), ("GET", "/v1/kernels/gemm"),
    ("GET", "/metrics.json"), ("GET", "/openapi.yaml/x"),
])
def test_routes_outside_spec_not_served(daemon, spec, method, path):
    assert path not in spec["paths"]
    r = daemon.request(method, path, json={} if method == "POST" else None)
    assert r.status_code in (404, 405), (r.status_code, r.text[:200])
    if path.startswith("/v2"):  # KServe's shape: {"error": "message"}
        assert isinstance(r.json()["error"], str)
    else:
        assert r.json()["error"]["code"] in ("not_found", "method_not_allowed")


# -- real answers against the schemas ------------------------------------------------------------

def test_sync_answers_match_schema(daemon, spec):
    for path, body in BODIES.items():
        if path == "/v1/jobs":
            continue
        r = daemon.post(path, body)
        assert r.status_code == 200, r.text
        check(spec, "JobResult", r.json())
        parse_server_timing(r.headers["Server-Timing"])
    r = daemon.post("/v1/gemm", dict(BODIES["/v1/gemm"], kernel="all"))
    check(spec, "JobResult", r.json())
    assert r.json()["kernels"]


def test_request_examples_match_schema(spec):
    """The spec's own examples are valid requests for its schemas."""
    check(spec, "GemmRequest", spec["paths"]["/v1/gemm"]["post"]["requestBody"]["content"]
          ["application/json"]["example"])
    for ex in spec["paths"]["/v1/histogram"]["post"]["requestBody"]["content"][
            "application/json"]["examples"].values():
        check(spec, "HistogramRequest", ex["value"])
    for path, body in BODIES.items():
        name = {"/v1/gemm": "GemmRequest", "/v1/ata": "AtaRequest",
                "/v1/histogram": "HistogramRequest", "/v1/jobs": "JobRequest"}[path]
        check(spec, name, body)
    bad = list(schema_validator(spec, "GemmRequest").iter_errors({"a": [[1]], "b": [[1]],
                                                                   "bogus": 1}))
    assert bad, "unknown fields must be refused by the schema as by the daemon"


def test_async_answers_match_schema(daemon, spec):
    r = daemon.post("/v1/jobs", BODIES["/v1/jobs"])
    assert r.status_code == 202
    check(spec, "JobAccepted", r.json())
    jid = r.json()["id"]
    j, _ = daemon.wait_job(jid)
    check(spec, "JobStatus", j)
    r = daemon.get(f"/v1/jobs/{jid}/result")
    check(spec, "JobResult", r.json())
    r = daemon.delete(f"/v1/jobs/{jid}")
    check(spec, "JobStatus", r.json())
    r = daemon.get(f"/v1/jobs/{jid}")
    assert r.status_code == 404
    check(spec, "Error", r.json())


def test_ops_answers_match_schema(daemon, spec):
    check(spec, "Health", daemon.get("/healthz").json())
    check(spec, "Ready", daemon.get("/readyz").json())
    check(spec, "Info", daemon.get("/v1/info").json())
    check(spec, "Kernels", daemon.get("/v1/kernels").json())


def test_error_answers_match_schema(daemon, spec):
    for r in (daemon.post("/v1/gemm", data=b"nope", headers={"Content-Type": "application/json"}),
              daemon.post("/v1/gemm", {"a": [[1, 2]], "b": [[1, 2]]}),
              daemon.get("/v1/gemm"),
              daemon.get("/nope"),
              daemon.post("/v1/ata", {"a": [[1]], "zzz": 0})):
        assert r.status_code >= 400
        check(spec, "Error", r.json())


def test_the_daemon_serves_its_own_spec(daemon):
    """GET /openapi.yaml is api/openapi.yaml byte for byte: the binary and its contract cannot drift."""
    r = daemon.get("/openapi.yaml")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/yaml"
    assert r.content == (ROOT / "api" / "openapi.yaml").read_bytes()


def test_a_body_on_a_get_is_read_and_ignored(daemon):
    """HTTP gives a GET's body no meaning: the route answers as without one, on a connection
    that stays usable (it used to be dropped unanswered)."""
    s = requests.Session()
    for path in ("/v1/info", "/v1/tensors", "/healthz"):
        r = daemon.request("GET", path, session=s, data=b'{"a": 1}' * 1000,
                           headers={"Content-Type": "application/json"})
        assert r.status_code == 200, (path, r.text[:200])
    assert daemon.get("/v1/info", session=s).status_code == 200
