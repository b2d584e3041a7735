#!/usr/bin/env bash
# Runs the kernel benchmarks on a GPU machine and draws the results.
#   scripts/bench.sh [BUILD_DIR]     (default: build)
# Runs BUILD_DIR/bench/gemm, BUILD_DIR/bench/ata_hist and BUILD_DIR/bench/batched (stacks: the
# own batched GEMM against cuBLAS strided-batched) where they exist, writes their CSV to
# bench/results/, then scripts/bench_plot.py makes the PNG plots and bench/results/summary.md
# (it skips the plots, saying so, where matplotlib is missing; they can be drawn elsewhere later
# from the same CSV files).
set -euo pipefail

build="${1:-build}"
root="$(cd "$(dirname "$0")/.." && pwd)"
results="$root/bench/results"
mkdir -p "$results"

ran=0
for name in gemm ata_hist batched; do
    bin="$build/bench/$name"
    if [[ -x "$bin" ]]; then
        echo "== $bin -> $results/$name.csv"
        "$bin" "$results/$name.csv"
        ran=$((ran + 1))
    else
        echo "== $bin not built: skipped"
    fi
done
if [[ $ran -eq 0 ]]; then
    echo "no benchmark binary under $build/bench (make build on a machine with nvcc first)" >&2
    exit 1
fi
"${PYTHON:-python3}" "$root/scripts/bench_plot.py" "$results"
