"""The programs under api/examples/ run against a real daemon and report success."""

import subprocess
import sys

from conftest import ROOT


def test_python_client_tour(daemon):
    p = subprocess.run([sys.executable, str(ROOT / "api" / "examples" / "client.py"),
                        "--url", daemon.base], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[-1] == "0 failure(s)", p.stdout
    assert sum(ln.startswith("ok ") for ln in lines) >= 10, p.stdout
    assert not any(ln.startswith("FAIL") for ln in lines), p.stdout


def test_python_client_raises_contract_errors(daemon):
    sys.path.insert(0, str(ROOT / "api" / "examples"))
    try:
        from client import Crunchd, CrunchdError
    finally:
        sys.path.pop(0)
    c = Crunchd(daemon.base)
    try:
        c.ata([[1.0, float("1e300")]], dtype="float32")
    except CrunchdError as e:
        assert e.status == 400 and e.code == "non_finite" and e.field.startswith("a"), e
    else:
        raise AssertionError("1e300 as float32 was accepted")
