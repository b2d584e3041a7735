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
    assert set(svc) == {"crunchd", "prometheus", "grafana", "client"}
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
    assert "8001:8001" in cr["ports"] and cr["environment"]["CRUNCHD_GRPC_PORT"] == "8001"  # gRPC
    # the image's --auto-cache file outlives the container: later starts skip the kernel timing
    cache = [v.split(":")[0] for v in cr["volumes"] if v.endswith(":/var/cache/crunchd")]
    assert cache and cache[0] in c["volumes"], cr["volumes"]
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


def test_sidecar_shares_the_unix_socket():
    """The socket lives in a named volume both services mount; the sidecar is opt-in (a
    profile), runs as the daemon's uid, and shares crunchd's IPC and pid namespaces so system
    shared memory works and its regions die with it."""
    c = load_yaml(COMPOSE / "docker-compose.yml")
    cr, client = c["services"]["crunchd"], c["services"]["client"]
    sock = cr["environment"]["CRUNCHD_UNIX_SOCKET"]
    sock_dir = sock.rsplit("/", 1)[0]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in cr["volumes"]}
    volume = mounts[sock_dir]
    assert volume in c["volumes"], "the socket's volume must be a named volume"
    assert f"{volume}:{sock_dir}" in client["volumes"]
    assert client["profiles"] == ["sidecar"]
    assert client["user"].split(":")[0] == "10001"
    assert cr["ipc"] == "shareable" and client["ipc"] == "service:crunchd"
    assert client["pid"] == "service:crunchd"
    assert f"--unix-socket {sock}" in " ".join(client["command"])
    assert int(cr["environment"]["CRUNCHD_UNIX_SOCKET_MODE"], 8) & 0o007 == 0, "not for everyone"
    assert sock_dir == "/run/crunchd" and "/run/crunchd" in (ROOT / "Dockerfile").read_text()
