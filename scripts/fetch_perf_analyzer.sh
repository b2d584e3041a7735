#!/usr/bin/env bash
# Fetches Triton's Performance Analyzer into .tools/perf_analyzer/ (git-ignored), run by make deps:
# the binary tritonclient 2.40.0's wheel ships (PyPI), and the two libraries it loads that neither
# Debian nor the GPU machine has under that name: libb64.so.0d (Debian's libb64-0d, unpacked, not
# installed) and libcudart.so.12 (PyPI's nvidia-cuda-runtime-cu12; the GPU machine has CUDA 13's).
#   .tools/perf_analyzer/perf_analyzer ARGS...   a wrapper that puts lib/ on LD_LIBRARY_PATH
# The folder is self-contained, so it travels to the GPU machine as it is (carry .tools).
# Nothing is fetched when the wrapper and its pieces are there already.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.tools/perf_analyzer
version=2.40.0
[ -x "$dir/perf_analyzer" ] && [ -x "$dir/bin/perf_analyzer" ] && [ -e "$dir/lib/libb64.so.0d" ] &&
  [ -e "$dir/lib/libcudart.so.12" ] && exit 0
PYTHON=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "deps: fetching perf_analyzer $version (tritonclient wheel) into $dir"
mkdir -p "$dir/bin" "$dir/lib"
$PYTHON -m pip download -q --no-deps --only-binary=:all: --platform manylinux1_x86_64 \
  "tritonclient==$version" -d "$tmp" >/dev/null
$PYTHON -m zipfile -e "$tmp"/tritonclient-$version-*.whl "$tmp/tc" >/dev/null
install -m 0755 "$tmp/tc/tritonclient-$version.data/data/bin/perf_analyzer" "$dir/bin/perf_analyzer"
$PYTHON -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
  "nvidia-cuda-runtime-cu12==12.4.127" -d "$tmp" >/dev/null
$PYTHON -m zipfile -e "$tmp"/nvidia_cuda_runtime_cu12-*.whl "$tmp/rt" >/dev/null
install -m 0644 "$tmp/rt/nvidia/cuda_runtime/lib/libcudart.so.12" "$dir/lib/"
(cd "$tmp" && apt-get download libb64-0d >/dev/null 2>&1) ||
  { echo "deps: apt-get download libb64-0d failed" >&2; exit 1; }
dpkg-deb -x "$tmp"/libb64-0d_*.deb "$tmp/b64"
cp -L "$(find "$tmp/b64" -name 'libb64.so.0d*' | head -1)" "$dir/lib/libb64.so.0d"
cat > "$dir/perf_analyzer" <<'WRAP'
#!/bin/sh
here=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/bin/perf_analyzer" "$@"
WRAP
chmod 0755 "$dir/perf_analyzer"
"$dir/perf_analyzer" --version >/dev/null 2>&1 || { echo "deps: $dir/perf_analyzer does not start" >&2; exit 1; }
echo "deps: perf_analyzer $version in $dir"
