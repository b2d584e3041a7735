"""Fixtures of tests/client: daemons started by tests/http's Daemon class (see
client_harness.py), clients of them."""

import pytest

from client_harness import DELAY_HEADER, Daemon, http  # first: puts clients/python on sys.path
import crunchd  # noqa: E402


@pytest.fixture(scope="session")
def daemon(tmp_path_factory):
    """The shared daemon: 2 workers, test hooks (X-Crunchd-Debug-Delay-Ms) on."""
    d = Daemon(["--workers", "2", "--test-hooks", "--result-ttl-s", "60",
                "--drain-timeout-s", "10"],
               name="client-session", workdir=tmp_path_factory.mktemp("client-daemon"))
    d.start()
    yield d
    d.stop()


@pytest.fixture
def client(daemon):
    with crunchd.Client(daemon.base, timeout=http.HTTP_TIMEOUT_S) as c:
        yield c


@pytest.fixture
def slow_client(daemon):
    """Every job it sends waits in its worker: factory slow_client(ms, **Client kwargs)."""
    made = []

    def factory(delay_ms, **kw):
        c = crunchd.Client(daemon.base, headers={DELAY_HEADER: str(int(delay_ms))}, **kw)
        made.append(c)
        return c

    yield factory
    for c in made:
        c.close()


@pytest.fixture
def start_daemon(tmp_path):
    """start_daemon(*flags, env=None, start=True) -> a Daemon, stopped and checked at teardown."""
    yield from http.daemon_factory(tmp_path, "client-extra")
