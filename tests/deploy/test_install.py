"""make install honours PREFIX and DESTDIR: binary, systemd unit, default env file."""

import filecmp
import os
import pathlib

import pytest

from conftest import BIN, ROOT, run, tool


def make_install(destdir, **vars):
    build = str(pathlib.Path(BIN).parent)
    # -o: install what was built and tested, never rebuild it here.
    cmd = ["make", "-s", "-C", str(ROOT), "-o", f"{build}/crunchd", "install", f"BUILD={build}",
           f"DESTDIR={destdir}"] + [f"{k}={v}" for k, v in vars.items()]
    r = run(cmd)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.mark.parametrize("prefix", ["/usr/local", "/opt/crunchd"])
def test_install_under_destdir(tmp_path, prefix):
    make_install(tmp_path, PREFIX=prefix)
    root = tmp_path / prefix.lstrip("/")
    exe = root / "bin" / "crunchd"
    assert exe.is_file() and os.access(exe, os.X_OK)
    assert filecmp.cmp(exe, BIN, shallow=False)
    unit = root / "lib" / "systemd" / "system" / "crunchd.service"
    text = unit.read_text()
    assert f"ExecStart={prefix}/bin/crunchd\n" in text
    assert "EnvironmentFile=-/etc/default/crunchd" in text
    env = tmp_path / "etc" / "default" / "crunchd"
    assert "CRUNCHD_DRAIN_TIMEOUT_S=" in env.read_text()
    installed = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()}
    assert installed == {f"{prefix.lstrip('/')}/bin/crunchd",
                         f"{prefix.lstrip('/')}/lib/systemd/system/crunchd.service",
                         "etc/default/crunchd"}, installed
    sa = tool("systemd-analyze")
    if sa:  # the installed unit verifies (ExecStart pointed into DESTDIR)
        check = tmp_path / "check.service"
        check.write_text(text.replace(f"ExecStart={prefix}/bin/crunchd", f"ExecStart={exe}"))
        r = run([sa, "verify", str(check)])
        assert r.returncode == 0, r.stderr


def test_install_keeps_an_edited_env_file(tmp_path):
    make_install(tmp_path)
    env = tmp_path / "etc" / "default" / "crunchd"
    env.write_text("CRUNCHD_PORT=9999\n")
    make_install(tmp_path)
    assert env.read_text() == "CRUNCHD_PORT=9999\n"
