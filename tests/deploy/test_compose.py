"""docker-compose.yml (no compose engine here): the crunchd service reserves an NVIDIA GPU,
waits out the drain on stop, and Prometheus and Grafana mount files that exist and agree."""

import re

from conftest import ROOT, load_yaml

COMPOSE = ROOT / "deploy" / "compose"


def seconds(v):
    m = re.fullmatch(r"(\d+)(s|m)?", str(v))
    assert m, v
    return int(m.group(1)) * (60 if m.group(2) == "m" else 1)


def test_compose_stack():
    c = load_yaml(COMPOSE / "docker-compose.yml")
    svc = c["services"]
    assert set(svc) == {"crunchd", "prometheus", "grafana"}
    cr = svc["crunchd"]
    assert cr["build"]["dockerfile"] == "Dockerfile"
    assert (COMPOSE / cr["build"]["context"] / "Dockerfile").resolve() == (ROOT / "Dockerfile").resolve()
    dev = cr["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in dev)
    drain = int(cr["environment"]["CRUNCHD_DRAIN_TIMEOUT_S"])
    assert seconds(cr["stop_grace_period"]) > drain
    assert cr.get("stop_signal", "SIGTERM") == "SIGTERM"
    assert cr["restart"] == "on-failure"  # exit 3 (device fault) restarts, exit 0 stays down
    assert "8080:8080" in cr["ports"]
    for name in ("prometheus", "grafana"):
        for v in svc[name]["volumes"]:
            src = v.split(":")[0]
            if src.startswith("./"):
                assert (COMPOSE / src).exists(), f"{name} mounts {src}, which does not exist"
    prom = load_yaml(COMPOSE / "prometheus.yml")
    job = [j for j in prom["scrape_configs"] if j["job_name"] == "crunchd"][0]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    assert job["static_configs"][0]["targets"] == ["crunchd:8080"]


def test_cpu_overlay_drops_the_gpu():
    text = (COMPOSE / "docker-compose.cpu.yml").read_text()
    cpu = load_yaml(COMPOSE / "docker-compose.cpu.yml")
    assert cpu["services"]["crunchd"]["environment"]["CRUNCHD_BACKEND"] == "cpu"
    assert re.search(r"^\s+deploy: !reset", text, re.M)
