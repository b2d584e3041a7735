#!/usr/bin/env bash
# Runs every libFuzzer harness built under $1 (build-fuzz/fuzz/fuzz_NAME) for a bounded time:
#   scripts/fuzz.sh DIR SECONDS [RUNS]
# Each starts from its seed corpus tests/fuzz/corpus/NAME/ (read only) and grows a scratch
# corpus in tests/fuzz/corpus-run/NAME/ (git-ignored); crashes land in tests/fuzz/artifacts/NAME/.
# Before fuzzing, every kept crash in tests/fuzz/regressions/NAME/ is replayed: a fixed bug
# must stay fixed. tests/fuzz/fuzz_NAME.options may hold extra libFuzzer flags (one line).
# RUNS (optional) bounds the executions instead of the time, for the long one-off campaigns.
set -uo pipefail
dir=${1:?usage: fuzz.sh DIR SECONDS [RUNS]}
seconds=${2:-60}
runs=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OPENBLAS_NUM_THREADS=1
failed=()
ran=0
for bin in "$dir"/fuzz_*; do
  [ -x "$bin" ] || continue
  ran=$((ran + 1))
  name=$(basename "$bin"); name=${name#fuzz_}
  seed="$root/tests/fuzz/corpus/$name"; scratch="$root/tests/fuzz/corpus-run/$name"
  art="$root/tests/fuzz/artifacts/$name"; reg="$root/tests/fuzz/regressions/$name"
  mkdir -p "$scratch" "$art" "$seed"
  opts=()
  [ -f "$root/tests/fuzz/fuzz_$name.options" ] && read -r -a opts < "$root/tests/fuzz/fuzz_$name.options"
  if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
    echo "== $name: replaying $(ls "$reg" | wc -l) regression input(s)"
    "$bin" "${opts[@]}" "$reg"/* >"$art/regressions.log" 2>&1 || { echo "   FAILED: see $art/regressions.log"; failed+=("$name(regression)"); continue; }
  fi
  limit=(-max_total_time="$seconds"); [ -n "$runs" ] && limit=(-runs="$runs")
  echo "== $name: ${limit[*]} from $seed"
  log="$art/fuzz.log"
  if "$bin" "${opts[@]}" "${limit[@]}" -print_final_stats=1 -artifact_prefix="$art/" "$scratch" "$seed" >"$log" 2>&1; then
    grep -E '^stat::number_of_executed_units|^Done' "$log" | sed 's/^/   /'
  else
    echo "   CRASH: $(ls "$art" | grep -E '^(crash|leak|timeout|oom)-' | tr '\n' ' ') (log $log)"
    failed+=("$name")
  fi
done
if [ "$ran" -eq 0 ]; then
  echo "fuzz: no harness in $dir (make fuzz builds them)"
  exit 1
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]} (copy the artifact into tests/fuzz/regressions/NAME/ once fixed)"
  exit 1
fi
echo "fuzz: all $ran harness(es) ran clean"
