"""deploy/k8s against the Kubernetes OpenAPI schemas, offline and strict (kubernetes-validate
ships them), plus what the schemas cannot say: the GPU, the probes, a grace period that covers
preStop plus the drain, non-root with a read-only root, and a Service that finds the pods."""

import copy

import pytest

from conftest import ROOT, load_yaml

K8S = ROOT / "deploy" / "k8s"
MANIFESTS = ["deployment.yaml", "service.yaml", "hpa.yaml", "prometheus-adapter-rules.yaml"]
K8S_VERSION = "1.33.0"

kv = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate (scripts/deps.sh)")


def validate(doc):
    return kv.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize("name", MANIFESTS)
def test_schema(name):
    doc = load_yaml(K8S / name)
    validate(doc)  # raises on any error


def test_schema_validation_can_fail():
    dep = load_yaml(K8S / "deployment.yaml")
    bad = copy.deepcopy(dep)
    bad["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}  # misspelt
    with pytest.raises(kv.ValidationError):
        validate(bad)
    bad = copy.deepcopy(dep)
    bad["spec"]["replicas"] = "one"
    with pytest.raises(kv.ValidationError):
        validate(bad)


def test_kustomization_lists_existing_files():
    k = load_yaml(K8S / "kustomization.yaml")
    for r in k["resources"]:
        assert (K8S / r).exists(), r


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def test_deployment_semantics():
    dep = load_yaml(K8S / "deployment.yaml")
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz"
    env = env_of(c)
    # native grpc probes on grpc.health.v1: liveness as /healthz, readiness as /readyz
    grpc_port = int(env["CRUNCHD_GRPC_PORT"])
    assert c["livenessProbe"]["grpc"] == {"port": grpc_port, "service": "liveness"}
    assert c["readinessProbe"]["grpc"]["port"] == grpc_port and c["readinessProbe"]["grpc"].get("service", "") == ""
    assert env["CRUNCHD_BIND"] == "0.0.0.0"
    drain = int(env["CRUNCHD_DRAIN_TIMEOUT_S"])
    pre = c["lifecycle"]["preStop"]
    pre_s = int(pre["exec"]["command"][1]) if "exec" in pre else int(pre["sleep"]["seconds"])
    assert pod["terminationGracePeriodSeconds"] > pre_s + drain, "SIGKILL would cut the drain short"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports["http"] == int(env["CRUNCHD_PORT"]) and ports["grpc"] == grpc_port
    ann = dep["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and int(ann["prometheus.io/port"]) == ports["http"]
    sc, psc = c["securityContext"], pod["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] != 0
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    # the image's --auto-cache file is on a volume, so a restarted container (exit 3) reads it
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert "emptyDir" in {v["name"]: v for v in pod["volumes"]}[mounts["/var/cache/crunchd"]]
    sel = dep["spec"]["selector"]["matchLabels"]
    assert sel.items() <= dep["spec"]["template"]["metadata"]["labels"].items()


def test_service_and_hpa_point_at_the_deployment():
    dep = load_yaml(K8S / "deployment.yaml")
    svc = load_yaml(K8S / "service.yaml")
    hpa = load_yaml(K8S / "hpa.yaml")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["ports"][0]["targetPort"] in ("http", 8080)
    assert {p["name"]: p["targetPort"] for p in svc["spec"]["ports"]}["grpc"] == "grpc"
    assert svc["spec"]["sessionAffinity"] == "ClientIP"
    ttl = 300  # --result-ttl-s default: affinity must outlive a kept async result
    assert svc["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"] > ttl
    ref = hpa["spec"]["scaleTargetRef"]
    assert (ref["kind"], ref["name"]) == ("Deployment", dep["metadata"]["name"])
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
