"""deploy/systemd/crunchd.service: systemd-analyze verify and its offline security score, and the
hardening and stop settings the issue asks for."""

import re

import pytest

from conftest import BIN, ROOT, run, tool

UNIT = ROOT / "deploy" / "systemd" / "crunchd.service"


def directives(text):
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        k, _, v = line.partition("=")
        out.setdefault(k.strip(), []).append(v.strip())
    return out


@pytest.fixture
def runnable_unit(tmp_path):
    """The unit with ExecStart pointing at the built binary (verify checks it is executable)."""
    text = UNIT.read_text()
    assert "ExecStart=/usr/local/bin/crunchd" in text
    f = tmp_path / "crunchd.service"
    f.write_text(text.replace("ExecStart=/usr/local/bin/crunchd", f"ExecStart={BIN}"))
    return f


def analyze():
    exe = tool("systemd-analyze")
    if not exe:
        pytest.skip("systemd-analyze not installed (Debian: systemd)")
    return exe


def test_verify(runnable_unit):
    r = run([analyze(), "verify", str(runnable_unit)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Unknown" not in r.stderr and "ignoring" not in r.stderr, r.stderr


def test_verify_can_fail(tmp_path, runnable_unit):
    bad = tmp_path / "bad.service"
    bad.write_text(runnable_unit.read_text().replace(f"ExecStart={BIN}", "ExecStart=/nonexistent/crunchd"))
    r = run([analyze(), "verify", str(bad)])
    assert r.returncode != 0


def test_security_exposure_is_low(runnable_unit):
    r = run([analyze(), "security", "--offline=yes", str(runnable_unit)])
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout + r.stderr)
    if not m:
        pytest.skip(f"this systemd-analyze has no offline security score: {r.stderr.strip()[:200]}")
    assert float(m.group(1)) <= 2.5, r.stdout[-3000:]


def test_hardening_and_stop_settings():
    d = directives(UNIT.read_text())
    one = lambda k: d[k][-1]
    for k, v in {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
                 "PrivateTmp": "yes", "DevicePolicy": "closed", "CapabilityBoundingSet": "",
                 "SystemCallFilter": "@system-service", "Restart": "on-failure",
                 "KillSignal": "SIGTERM", "DynamicUser": "yes",
                 "EnvironmentFile": "-/etc/default/crunchd"}.items():
        assert one(k) == v, (k, d.get(k))
    allow = " ".join(d["DeviceAllow"])
    for dev in ("/dev/nvidiactl", "/dev/nvidia-uvm", "char-nvidia-frontend"):
        assert dev in allow, dev
    assert set(one("RestrictAddressFamilies").split()) >= {"AF_INET", "AF_INET6"}
    assert "2" in one("RestartPreventExitStatus").split()  # bad config: restarting cannot help
    stop = int(re.fullmatch(r"(\d+)s?", one("TimeoutStopSec")).group(1))
    env = (ROOT / "deploy" / "systemd" / "crunchd.env").read_text()
    drain = int(re.search(r"^CRUNCHD_DRAIN_TIMEOUT_S=(\d+)", env, re.M).group(1))
    assert stop > drain
