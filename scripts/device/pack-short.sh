#!/usr/bin/env bash
# The bundle of a short GPU call (scripts/device/final.sh) when device-pack.sh's whole one (every
# GPU test and benchmark, ~100 MB) is over the device tool's 64 MiB carry: the daemon, the GPU
# tests of the wave's paths (generated operands, stacks, the backend), the copy benchmark
# bench-e2e reads and wrk, compressed across the binaries (their kernels are the same code).
#   scripts/device/pack-short.sh && scripts/device/pack-extra.sh   -> .devpack/ (~45 MB together)
#   device: tar -xJf .devpack/device.tar.xz && tar -xJf .devpack/extra.tar.xz &&
#           FINAL_QUICK=1 scripts/device/final.sh $OUT          (carry: [".devpack"])
set -euo pipefail
cd "$(dirname "$0")/../.."
make -j2 build
rm -rf .device
scripts/bundle-libs.sh build/crunchd build/tests/gpu_random build/tests/gpu_stack build/tests/gpu_backend \
  build/bench/copy "$(command -v wrk)" >/dev/null
strip .device/bin/*
mkdir -p .devpack
tar -cf - .device | xz -9e -T2 --lzma2=dict=192MiB >.devpack/device.tar.xz
ls -la .devpack/device.tar.xz
