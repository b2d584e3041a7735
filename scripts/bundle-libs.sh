#!/usr/bin/env bash
# bundle-libs.sh FILE... — prepare binaries built on a Debian 12 machine to run on a GPU machine
# that has the same CUDA toolkit but no compiler or package registry (ours: Ubuntu 24.04, CUDA
# 13.0, driver 580). scripts/device-pack.sh calls it for the daemon, the GPU tests and benches.
#
# Copies each FILE into .device/ in the project checkout (ignored by git), collects every shared
# library they load that the GPU machine lacks (libmicrohttpd, libcjson, GnuTLS and friends,
# OpenBLAS, ...) into .device/lib, and writes .device/env.sh, which puts those libraries and the GPU
# machine's own CUDA 13 libraries on LD_LIBRARY_PATH. CUDA libraries themselves are not copied:
# the GPU machine has the same toolkit version.
#
# Then, on the GPU machine, from a copy of the checkout with .device/ beside it:
#   source .device/env.sh && .device/bin/<your-binary> ...
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 FILE..." >&2; exit 2; }
top=$(git rev-parse --show-toplevel)
out=$top/${BUNDLE_DIR:-.device}  # BUNDLE_DIR=.device-x: a second bundle beside the first
exclude=$(git rev-parse --path-format=absolute --git-path info/exclude) # a worktree's .git is a file
grep -qx "/${BUNDLE_DIR:-.device}/" "$exclude" 2>/dev/null || { mkdir -p "$(dirname "$exclude")"; echo "/${BUNDLE_DIR:-.device}/" >> "$exclude"; }
mkdir -p "$out/bin" "$out/lib"
# glibc, the C++ runtime and the CUDA/driver libraries are on the GPU machine already
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnvidia|libnvrtc|libcufft|libcurand|libcusparse|libcusolver|libnvJitLink|libnvml)'
for f in "$@"; do
  cp -L "$f" "$out/bin/"
  ldd "$f" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    cp -Lu "$path" "$out/lib/$name"
  done
done
cat > "$out/env.sh" <<'ENV'
# sourced on the GPU machine
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cuda=$(ls -d /usr/local/cuda-13*/targets/x86_64-linux/lib 2>/dev/null | head -1)
export LD_LIBRARY_PATH="$here/lib:${cuda:+$cuda:}${LD_LIBRARY_PATH:-}"
export PATH="$here/bin:$PATH"
ENV
echo "bundled into ${BUNDLE_DIR:-.device}/ ($(du -sh "$out" | cut -f1)): $(ls "$out/bin" | tr '\n' ' ')"
echo "device run: carry [\"${BUNDLE_DIR:-.device}\"], command: source ${BUNDLE_DIR:-.device}/env.sh && <binary> ..."
