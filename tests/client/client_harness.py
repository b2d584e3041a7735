"""What tests/client shares: the package from the checkout, the daemon harness.

The package is imported from the checkout (clients/python on sys.path: `make test-client` needs
no pip install); the daemons are started by tests/http/conftest.py's Daemon class (loaded under
another module name, so both suites' conftests can coexist), with the same environment:
CRUNCHD_BIN (default build/crunchd), CRUNCHD_BACKEND (cpu), CRUNCHD_TEST_ARGS.
"""

import importlib.util
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLIENT_DIR = ROOT / "clients" / "python"
sys.path.insert(0, str(CLIENT_DIR))

import crunchd  # noqa: E402,F401  (from the checkout, by the line above; before any other)

_spec = importlib.util.spec_from_file_location("crunchd_http_conftest",
                                               ROOT / "tests" / "http" / "conftest.py")
http = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(http)

Daemon = http.Daemon
DELAY_HEADER = http.DELAY_HEADER
BACKEND = http.BACKEND
SLOW = http.SLOW
assert_close = http.assert_close
gemm_ref = http.gemm_ref
UUID_RE = http.UUID_RE
