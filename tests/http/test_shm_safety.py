"""Shared memory safety (issue 15 item 5): registered bytes count against a per-client cap
(--shm-client-max-mb; the client is the token, else the IP address, or the uid on the Unix
socket) and are charged to the memory budget (kind "shm"); a client that dies leaves nothing
mapped: regions no job holds go when their object is unlinked, when unused for --shm-idle-s (the
periodic sweep, without any request), and, registered over the Unix socket, when the registering
process exits."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np
import pytest

from conftest import SLOW, unix_http


def make_object(size):
    key = f"/crunchd-safety-{uuid.uuid4().hex[:12]}"
    fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    os.ftruncate(fd, size)
    os.close(fd)
    return key


@pytest.fixture
def objects():
    keys = []

    def factory(size=1 << 20):
        keys.append(make_object(size))
        return keys[-1]

    yield factory
    for k in keys:
        try:
            os.unlink("/dev/shm" + k)
        except FileNotFoundError:
            pass


@pytest.fixture
def sock_dir():
    d = tempfile.mkdtemp(prefix="crunchd-sock-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def register(d, name, key, size, headers=None):
    return d.post(f"/v2/systemsharedmemory/region/{name}/register",
                  data=json.dumps({"key": key, "byte_size": size}), headers=headers)


def register_unix(sock, name, key, size, headers=None):
    status, _, body = unix_http(sock, "POST", f"/v2/systemsharedmemory/region/{name}/register",
                                {"key": key, "byte_size": size}, headers)
    return status, json.loads(body)


def names(d, headers=None):
    r = d.get("/v2/systemsharedmemory/status", headers=headers)
    assert r.status_code == 200, r.text
    return {x["name"] for x in r.json()}


def metric(d, line_start):
    for line in d.metrics_text().splitlines():
        if line.startswith(line_start + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{line_start} not in /metrics")


def mapped(d, key):
    path = "/dev/shm/" + key.lstrip("/")
    with open(f"/proc/{d.proc.pid}/maps") as f:
        return any(path in line for line in f)


def wait_for(pred, what, timeout=10.0):
    deadline = time.monotonic() + timeout * SLOW
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


# -- caps and the budget ---------------------------------------------------------------------------

def test_per_client_cap(start_daemon, objects, sock_dir):
    sock = os.path.join(sock_dir, "caps.sock")
    d = start_daemon("--unix-socket", sock, "--shm-max-mb", "8", "--shm-client-max-mb", "1")
    key = objects(4 << 20)
    assert register(d, "tcp1", key, 768 << 10).status_code == 200
    r = register(d, "tcp2", key, 512 << 10)
    assert r.status_code == 507 and "--shm-client-max-mb" in r.json()["error"], r.text
    assert "ip:127.0.0.1" in r.json()["error"]
    r = register(d, "huge", key, 2 << 20)
    assert r.status_code == 413 and "--shm-client-max-mb" in r.json()["error"], r.text
    # the unix socket's peer is another client: its uid
    status, body = register_unix(sock, "unix1", key, 768 << 10)
    assert status == 200, body
    status, body = register_unix(sock, "unix2", key, 512 << 10)
    assert status == 507 and f"uid:{os.getuid()}" in body["error"], body
    assert register(d, "tcp2", key, 256 << 10).status_code == 200  # up to the cap exactly
    assert names(d) == {"tcp1", "tcp2", "unix1"}


def test_the_token_is_one_client(start_daemon, objects, sock_dir, tmp_path):
    token = tmp_path / "token"
    token.write_text("caps-s3cret\n")
    h = {"Authorization": "Bearer caps-s3cret"}
    sock = os.path.join(sock_dir, "tok.sock")
    d = start_daemon("--unix-socket", sock, "--auth-token-file", str(token), "--shm-max-mb", "8",
                     "--shm-client-max-mb", "1")
    key = objects(4 << 20)
    assert register(d, "a", key, 768 << 10, headers=h).status_code == 200
    status, body = register_unix(sock, "b", key, 512 << 10, headers=h)  # another peer, the same token
    assert status == 507 and "token" in body["error"], body


def test_registered_bytes_are_charged_to_the_budget(start_daemon, objects):
    # the shm caps above the budget, so that the budget is what refuses
    d = start_daemon("--max-memory-mb", "64", "--shm-max-mb", "128", "--shm-client-max-mb", "128")
    key = objects(80 << 20)
    shm_kind = 'crunchd_memory_charged_bytes{kind="shm"}'
    assert metric(d, shm_kind) == 0
    assert register(d, "big", key, 40 << 20).status_code == 200
    assert metric(d, shm_kind) == 40 << 20
    r = register(d, "more", key, 40 << 20)
    assert r.status_code == 503 and "--max-memory-mb" in r.json()["error"], r.text
    assert r.headers.get("Retry-After"), r.headers
    r = register(d, "never", key, 80 << 20)
    assert r.status_code == 413 and "--max-memory-mb" in r.json()["error"], r.text
    assert names(d) == {"big"}
    # a request that needs memory now competes with the region
    x = np.zeros(6 << 20, np.uint8)  # 6 MiB raw upload: fits 64 - 40 MiB
    r = d.post("/v1/histogram", data=x.tobytes(), headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 200, r.text
    assert d.post("/v2/systemsharedmemory/region/big/unregister", data=b"").status_code == 200
    assert metric(d, shm_kind) == 0
    assert register(d, "more", key, 40 << 20).status_code == 200


# -- the sweep --------------------------------------------------------------------------------------

def test_unlinked_object_is_unregistered(daemon, objects):
    key = objects(1 << 16)
    name = f"unl-{uuid.uuid4().hex[:8]}"
    assert register(daemon, name, key, 1 << 16).status_code == 200
    assert mapped(daemon, key)
    os.unlink("/dev/shm" + key)  # the client cleaned up (or its resource tracker did as it died)
    assert name not in names(daemon)  # status sweeps first
    assert not mapped(daemon, key)
    assert f"shared memory region '{name}' of ip:127.0.0.1 unregistered: its object {key} was unlinked" \
        in daemon.log_text()


def test_unlinked_object_of_a_running_job_stays_until_it_ends(daemon, objects):
    key = objects(1 << 16)
    name = f"unlrun-{uuid.uuid4().hex[:8]}"
    assert register(daemon, name, key, 1 << 16).status_code == 200
    jid = daemon.submit({"op": "ata", "a": {"shm": {"region": name}, "shape": [8, 8]}},
                        delay_ms=int(1500 * SLOW))
    os.unlink("/dev/shm" + key)
    assert name in names(daemon), "a held region is not swept"
    j, _ = daemon.wait_job(jid)
    assert j["status"] == "done", j
    wait_for(lambda: name not in names(daemon), "the region outlived its job and its object")


def test_idle_regions_go_by_themselves(start_daemon, objects):
    d = start_daemon("--shm-idle-s", "2")
    key = objects(1 << 16)
    np.ndarray((4, 4), np.float32, np.memmap("/dev/shm" + key, mode="r+", shape=(1 << 16,)))[...] = 1
    t0 = time.monotonic()
    assert register(d, "used", key, 1 << 16).status_code == 200
    assert register(d, "unused", key, 1 << 16).status_code == 200
    time.sleep(1.2)
    r = d.post("/v1/ata", {"a": {"shm": {"region": "used"}, "shape": [4, 4]}})
    assert r.status_code == 200, r.text
    t_used = time.monotonic()
    # no status or register call from here: the daemon's own timer sweeps
    wait_for(lambda: metric(d, "crunchd_shm_regions") == 1, "the unused region stayed")
    assert time.monotonic() - t0 >= 2.0
    wait_for(lambda: metric(d, "crunchd_shm_regions") == 0, "the used region stayed")
    assert time.monotonic() - t_used >= 2.0, "using a region restarts its idle clock"
    assert not mapped(d, key)
    assert "unused for" in d.log_text()


def test_idle_zero_keeps_regions(start_daemon, objects):
    d = start_daemon("--shm-idle-s", "0")
    key = objects(4096)
    assert register(d, "kept", key, 4096).status_code == 200
    time.sleep(1.5)
    assert names(d) == {"kept"}


CHILD = r"""
import json, socket, sys, time
sock, name, key, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
body = json.dumps({"key": key, "byte_size": size}).encode()
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
s.sendall(b"POST /v2/systemsharedmemory/region/%s/register HTTP/1.1\r\nHost: x\r\n"
          b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (name.encode(), len(body)) + body)
print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
time.sleep(3600)
"""


def test_regions_of_an_exited_unix_peer_go(start_daemon, objects, sock_dir):
    sock = os.path.join(sock_dir, "pid.sock")
    d = start_daemon("--unix-socket", sock)
    key = objects(1 << 16)  # the object stays linked: only the process's exit is at stake
    child = subprocess.Popen([sys.executable, "-c", CHILD, sock, "bypid", key, str(1 << 16)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "HTTP/1.1 200 OK"
        time.sleep(1.5)  # a periodic sweep or more: the live process keeps its region
        assert names(d) == {"bypid"} and mapped(d, key)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert names(d) == set()
    assert not mapped(d, key)
    assert f"process {child.pid} that registered it exited" in d.log_text()


def test_tcp_registrations_outlive_their_process(daemon, objects):
    """Over TCP the peer's process is unknown: only unlinking or idleness reclaims its regions."""
    if not shutil.which("curl"):
        pytest.skip("curl is not installed")
    key = objects(4096)
    name = f"tcp-{uuid.uuid4().hex[:8]}"
    p = subprocess.run(["curl", "-sS", "-f", "-H", "Content-Type: application/json", "-d",
                        json.dumps({"key": key, "byte_size": 4096}),
                        daemon.url(f"/v2/systemsharedmemory/region/{name}/register")], capture_output=True)
    assert p.returncode == 0, p.stderr
    time.sleep(1.2)
    assert name in names(daemon)
    assert daemon.post(f"/v2/systemsharedmemory/region/{name}/unregister", data=b"").status_code == 200
