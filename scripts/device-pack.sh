#!/usr/bin/env bash
# Packs what the GPU machine needs to run make test-gpu / make bench without a compiler or
# libmicrohttpd there: the daemon, its fault-injection twin, the GPU tests and benchmarks, and
# every library they load that the machine lacks (scripts/bundle-libs.sh), compressed
# under the 64 MiB the device tool carries.
#   scripts/device-pack.sh            -> .devpack/device.tar.xz (git-ignored)
# On the device (carry .devpack and .whl):
#   tar -xJf .devpack/device.tar.xz && source .device/env.sh &&
#   scripts/test-gpu.sh .device/bin $PWD/.device/bin/crunchd $PWD/.device/bin/crunchd-fault &&
#   .device/bin/gemm $OUT/gemm.csv full && .device/bin/ata_hist $OUT/ata_hist.csv 30
set -euo pipefail
cd "$(dirname "$0")/.."
make -j2 build build-fault
cp build-fault/crunchd build-fault/crunchd-fault
rm -rf .device
scripts/bundle-libs.sh build/crunchd build-fault/crunchd-fault build/tests/gpu_* $(find build/bench -maxdepth 1 -type f -executable) \
    $(command -v wrk) # make bench-load's load generator
strip .device/bin/*
mkdir -p .devpack
tar -cf - .device | xz -6 -T2 > .devpack/device.tar.xz
ls -la .devpack/device.tar.xz
