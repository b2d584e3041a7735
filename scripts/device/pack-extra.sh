#!/usr/bin/env bash
# What the GPU machine lacks beside our binaries (scripts/device-pack.sh): perf_analyzer (.tools/,
# fetched by make deps) and the Python packages the tests and benchmarks import there
# (tritonclient with its HTTP and gRPC clients, grpcio's health checking, aiohttp for the
# alternative server), unpacked from PyPI wheels for the device's Python 3.12.
#   scripts/device/pack-extra.sh    -> .devpack/extra.tar.xz (git-ignored)
set -euo pipefail
cd "$(dirname "$0")/../.."
whl=$(mktemp -d)
trap 'rm -rf "$whl"' EXIT
pip download -q --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$whl" 'tritonclient[http,grpc]' grpcio-health-checking aiohttp
rm -rf .pylib && mkdir .pylib
for w in "$whl"/*.whl; do
  case $(basename "$w") in numpy-*|urllib3-*|idna-*|certifi-*|packaging-*|typing_extensions-*) continue ;; esac # the device's own
  python3 -m zipfile -e "$w" .pylib
done
mkdir -p .devpack
tar -cf - .pylib .tools/perf_analyzer | xz -6 -T2 >.devpack/extra.tar.xz
ls -la .devpack/extra.tar.xz
