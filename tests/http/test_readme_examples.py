"""Every `curl ` line of the README's ```sh blocks works against a real daemon (localhost:8080
replaced by the test daemon's address), run with -sS -f so an HTTP error fails it."""

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

README = ROOT / "README.md"


def curl_lines():
    """(block number, command) for each curl command of the fenced sh blocks, joining lines
    continued with a trailing backslash."""
    if not README.exists():
        return []
    out = []
    in_sh, block, pending = False, 0, None
    for line in README.read_text().splitlines():
        stripped = line.strip()
        if not in_sh:
            if re.match(r"^```\s*(sh|bash|shell|console)\s*$", stripped):
                in_sh, block = True, block + 1
            continue
        if stripped.startswith("```"):
            in_sh, pending = False, None
            continue
        if pending is not None:
            pending += " " + stripped.rstrip("\\").strip()
            if not stripped.endswith("\\"):
                out.append((block, pending))
                pending = None
            continue
        cmd = stripped[2:] if stripped.startswith("$ ") else stripped
        if cmd.startswith("curl "):
            if cmd.endswith("\\"):
                pending = cmd.rstrip("\\").strip()
            else:
                out.append((block, cmd))
    return out


CURLS = curl_lines()


README_SOCKET = "/run/crunchd/crunchd.sock"


def localize(cmd, port, sock=None):
    cmd = re.sub(r"(https?://)?(localhost|127\.0\.0\.1|0\.0\.0\.0):8080",
                 lambda m: f"{m.group(1) or ''}127.0.0.1:{port}", cmd)
    if sock:
        cmd = cmd.replace(README_SOCKET, sock)
    return re.sub(r"^curl ", "curl -sS -f --max-time 60 ", cmd)


@pytest.mark.skipif(not CURLS, reason="README.md has no ```sh block with curl commands yet")
@pytest.mark.parametrize("block,cmd", CURLS, ids=[f"block{b}-{i}" for i, (b, _) in
                                                   enumerate(CURLS)])
def test_readme_curl(daemon, block, cmd):
    line = localize(cmd, daemon.port, daemon.unix_path)
    assert f"127.0.0.1:{daemon.port}" in line or "localhost" not in line or \
        f"--unix-socket {daemon.unix_path} " in line, line
    p = subprocess.run(["bash", "-c", line], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PORT=str(daemon.port)))
    assert p.returncode == 0, f"{line}\nexit {p.returncode}\nstdout: {p.stdout[:500]}\n" \
                              f"stderr: {p.stderr[:500]}"


def test_readme_parser_self_check(tmp_path, monkeypatch):
    """The extractor finds curl lines in sh blocks only, and joins continuations."""
    md = tmp_path / "README.md"
    md.write_text("text\n```sh\ncurl localhost:8080/healthz\necho hi\ncurl -X POST \\\n"
                  "  localhost:8080/v1/gemm -d '{}'\n```\n```json\ncurl nope\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "README", md)
    got = curl_lines()
    assert got == [(1, "curl localhost:8080/healthz"),
                   (1, "curl -X POST localhost:8080/v1/gemm -d '{}'")], got
    assert localize(got[0][1], 1234) == "curl -sS -f --max-time 60 127.0.0.1:1234/healthz"
