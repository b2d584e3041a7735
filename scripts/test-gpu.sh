#!/usr/bin/env bash
# The GPU test run (make test-gpu, or on the device machine with bundled binaries):
#   scripts/test-gpu.sh GPU_TEST_DIR CRUNCHD CRUNCHD_FAULT
# 1. every kernel's correctness binary (gpu_*) at the size grid; 2. the HTTP suite against
# --backend cuda; 3. the sticky-fault test against the fault-injection build.
set -uo pipefail
tests=$1 crunchd=$2 fault=$3
PYTHON=${PYTHON:-python3}
failed=0
for t in "$tests"/gpu_*; do
  echo "== $t"
  "$t" || failed=$((failed + 1))
done
echo "== HTTP suite, cuda backend"
CRUNCHD_BACKEND=cuda CRUNCHD_BIN=$crunchd $PYTHON -m pytest -q tests/http ${PYTEST_ARGS:-} || failed=$((failed + 1))
echo "== sticky device fault"
CRUNCHD_FAULT_INJECTION=1 CRUNCHD_BACKEND=cuda CRUNCHD_BIN=$fault $PYTHON -m pytest -q tests/http/test_fault.py || failed=$((failed + 1))
echo "test-gpu: $failed group(s) failed"
exit $((failed > 0))
