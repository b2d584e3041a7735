#!/usr/bin/env bash
# The wave's GPU run in one call (the device time is short): every CUDA path's correctness first,
# then the benchmarks, each step bounded so that a slow one cannot starve the rest; every log and
# CSV lands in OUT_DIR as it is written, so a call cut short still brings back what ran.
#   here:   scripts/device-pack.sh && scripts/device/pack-extra.sh   (.devpack/: binaries, libs,
#           perf_analyzer, the Python packages the device lacks)
#   (a short call: scripts/device/pack-short.sh bundles only what it runs, under the 64 MiB carry)
#   device: tar -xJf .devpack/device.tar.xz && tar -xJf .devpack/extra.tar.xz &&
#           scripts/device/final.sh $OUT
# FINAL_QUICK=1 fits about 200 s: the kernels' tests run beside the wave's HTTP files, the client
# suite, the fault test and the rest of the suite are left out, the benchmarks' windows are short.
set -uo pipefail
quick=${FINAL_QUICK:-0}
# The device tool brings back at most 8 files from OUT: the logs and CSVs are written to a work
# folder and packed into OUT/final.tgz after every step (with OUT/steps.txt beside it).
dest=$1 out=${FINAL_WORK:-/tmp/final-work}
mkdir -p "$dest" "$out/results"
source .device/env.sh
export PYTHONPATH=$PWD/.pylib${PYTHONPATH:+:$PYTHONPATH}
export CRUNCHD_BIN=$PWD/.device/bin/crunchd CRUNCHD_BACKEND=cuda PERF_ANALYZER=$PWD/.tools/perf_analyzer/perf_analyzer
export WRK=$PWD/.device/bin/wrk
bin=.device/bin
step() { # seconds name cmd...: one bounded step, its output in OUT/name.log, its time in OUT/steps.txt
  local secs=$1 name=$2
  shift 2
  local t0=$SECONDS
  timeout -k 5 "$secs" "$@" >"$out/$name.log" 2>&1
  echo "$name rc=$? ${SECONDS}s-${t0}s=$((SECONDS - t0))s" >>"$out/steps.txt"
  tar -czf "$dest/final.tgz.$name" -C "$out" . && mv "$dest/final.tgz.$name" "$dest/final.tgz" # steps run two at a time
  cp "$out/steps.txt" "$dest/"
}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv >"$out/device.txt" 2>&1
# 1. the kernels' own tests: every kernel at odd sizes, stacks, the generator
gpu_tests() { for g in "$bin"/gpu_*; do step 90 "$(basename "$g")" "$g"; done; }
if [ "$quick" = 1 ]; then gpu_tests & else gpu_tests; fi
# 2. the HTTP and client suites on cuda, this wave's files first, then the fault test
wave="tests/http/test_stacks.py tests/http/test_tensors.py tests/http/test_streams.py tests/http/test_kserve_direct.py
      tests/http/test_perf_analyzer.py tests/http/test_host_path.py"
[ -f tests/http/test_grpc.py ] && wave="$wave tests/http/test_grpc.py"
[ -f tests/http/test_random.py ] && wave="$wave tests/http/test_random.py"
step $((quick ? 70 : 150)) http-wave python3 -m pytest -v --tb=short -n 12 --dist loadfile $wave # -v: each outcome as it happens, so a cut-short step still names its failures
wait # the kernels' tests, when they ran beside
if [ "$quick" = 0 ]; then
  step 60 client-cuda python3 -m pytest -q -n 4 tests/client
  CRUNCHD_FAULT_INJECTION=1 CRUNCHD_BIN=$PWD/$bin/crunchd-fault step 40 fault python3 -m pytest -q tests/http/test_fault.py
fi
# 3. the benchmarks: KServe (perf_analyzer) against /v1 (wrk) at 64 connections with aiohttp +
# PyTorch beside, JSON one request at a time, streams, gRPC
export BENCH_LOAD_SECONDS=$((quick ? 2 : 3)) BENCH_LOAD_WARMUP=0.5
BENCH_LOAD_CONNS=64 BENCH_LOAD_ALTS=torch BENCH_LOAD_ALT_WORKERS=8 \
  BENCH_LOAD_ROWS=gemm64_npy,gemm64_kserve,gemm256_npy,gemm256_kserve,stack64x512_npy \
  step $((quick ? 55 : 90)) bench-load python3 scripts/bench_load.py .device "$out/results/load-kserve.csv"
BENCH_LOAD_CONNS=1 BENCH_LOAD_ALT_WORKERS=$((quick ? 0 : 8)) BENCH_LOAD_ROWS=gemm64_npy,gemm64_kserve,gemm256_json,gemm256_kjson \
  step $((quick ? 25 : 40)) bench-load-c1 python3 scripts/bench_load.py .device "$out/results/load-kserve-c1.csv"
CRUNCHD_E2E_ONLY=stack,tensor CRUNCHD_E2E_LOAD_S=$((quick ? 2 : 5)) \
  step $((quick ? 40 : 90)) bench-e2e-objects python3 scripts/bench_e2e.py .device "$out/results/e2e-objects.csv"
CRUNCHD_STREAM_GIB=${CRUNCHD_STREAM_GIB:-$((quick ? 1 : 4))} \
  step $((quick ? 30 : 100)) bench-streams python3 scripts/bench_streams.py .device "$out/results/streams.csv"
step $((quick ? 35 : 120)) bench-grpc python3 scripts/bench_grpc.py --bin "$CRUNCHD_BIN" --backend cuda \
  --csv "$out/results/grpc.csv" --window-ms $((quick ? 1000 : 3000))
# 4. the rest of the HTTP suite while the call lasts (the caller's limit ends it)
[ "$quick" = 1 ] || step 600 http-rest python3 -m pytest -q -n 12 --dist loadfile tests/http --deselect tests/http/test_fault.py \
  $(for f in $wave; do echo --ignore="$f"; done)
cat "$out/steps.txt"
