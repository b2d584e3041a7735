#!/usr/bin/env bash
# Where perf_analyzer's time goes against the cuda daemon (issue 34): daemon CPU per request,
# perf_analyzer's own CPU, per-thread CPU of the daemon under load, against wrk on /v1 .npy.
#   scripts/device/pa_probe.sh BUNDLE_DIR OUT_DIR
set -uo pipefail
bundle=$1 out=$2
source "$bundle/env.sh"
PA=.tools/perf_analyzer/perf_analyzer
mkdir -p "$out"
python3 - "$out" <<'PY'
import io, sys, numpy as np
B = "crunchd-bench-load-7f3a9c"
def npy(m):
    b = io.BytesIO(); np.save(b, m); return b.getvalue()
for n in (64, 256):
    body = b""
    for name in "abc":
        m = np.random.rand(n, n).astype(np.float32)
        body += (f'--{B}\r\nContent-Disposition: form-data; name="{name}"; filename="{name}.npy"\r\n'
                 f'Content-Type: application/octet-stream\r\n\r\n').encode() + npy(m) + b"\r\n"
    open(f"{sys.argv[1]}/body{n}.bin", "wb").write(body + f"--{B}--\r\n".encode())
PY
start() { # port backend extra...
  local port=$1 be=$2; shift 2
  "$bundle/bin/crunchd" --backend "$be" --port "$port" --access-log off "$@" >"$out/daemon-$port.log" 2>&1 &
  echo $! >"$out/pid-$port"
  for i in $(seq 600); do curl -sf "localhost:$port/readyz" >/dev/null && return 0; sleep 0.1; done
  echo "daemon $port not ready"; tail "$out/daemon-$port.log"; return 1
}
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
threads() { for t in /proc/$1/task/*; do echo "$(basename "$t") $(tr -d ' ' <"$t/comm") $(awk '{print $14+$15}' "$t/stat")"; done; }
# CPU ticks per thread name between two snapshots
by_name() { join <(sort "$1") <(sort "$2") | awk '{d[$2]+=$5-$3} END {for (k in d) if (d[k]) printf "%s=%d ", k, d[k]}'; }
run() { # label pid cmd...
  local label=$1 pid=$2; shift 2
  local t0; t0=$(ticks "$pid")
  local s0; s0=$(date +%s.%N)
  threads "$pid" >"$out/threads0-$label.txt"
  bash -c '"$@"; rc=$?; times; exit $rc' _ "$@" >"$out/$label.txt" 2>&1
  local rc=$? t1; t1=$(ticks "$pid")
  local s1; s1=$(date +%s.%N)
  threads "$pid" >"$out/threads1-$label.txt"
  local rate; rate=$(grep -Eo 'throughput: [0-9.]+' "$out/$label.txt" | tail -1; grep -Eo '"requests": [0-9]+' "$out/$label.txt")
  echo "$label rc=$rc daemon_cpu_s=$(( t1 - t0 ))e-2 wall_s=$(python3 -c "print(round($s1 - $s0, 2))") client_cpu=[$(tail -1 "$out/$label.txt")] threads=[$(by_name "$out/threads0-$label.txt" "$out/threads1-$label.txt")] $rate $(grep -E 'Request count' "$out/$label.txt" | tail -1 | tr -s ' ')"
}
trap 'kill $(cat "$out"/pid-* 2>/dev/null) 2>/dev/null' EXIT
S64="--shape a:64,64 --shape b:64,64 --shape c:64,64"
S256="--shape a:256,256 --shape b:256,256 --shape c:256,256"
if [ "${PROBE_CUDA:-1}" = 1 ]; then
start 18080 cuda || exit 1
port=18080 pid=$(cat "$out/pid-18080")
pa="$PA -u localhost:$port -m gemm --measurement-interval 1500"
run pa64_c1 $pid $pa $S64 --concurrency-range 1
run pa64_c64 $pid $pa $S64 --concurrency-range 64
run pa64_c64_async $pid $pa $S64 --concurrency-range 64 -a
run pa64_c64_t64 $pid $pa $S64 --concurrency-range 64 --max-threads 64
run wrk64_c64 $pid wrk -t8 -c64 -d6s -s bench/load/post.lua http://localhost:18080/v1/gemm -- "$out/body64.bin" "multipart/form-data; boundary=crunchd-bench-load-7f3a9c" application/x-npy
run pa256_c1 $pid $pa $S256 --concurrency-range 1
run pa256_c64 $pid $pa $S256 --concurrency-range 64
run wrk256_c64 $pid wrk -t8 -c64 -d6s -s bench/load/post.lua http://localhost:18080/v1/gemm -- "$out/body256.bin" "multipart/form-data; boundary=crunchd-bench-load-7f3a9c" application/x-npy
curl -s localhost:18080/metrics | grep -E '^crunchd_(host_jobs|direct_requests|requests_total|batch)' >"$out/metrics-cuda.txt"
kill "$pid"; wait "$pid" 2>/dev/null
fi
start 18081 cpu || exit 1
port=18081 pid=$(cat "$out/pid-18081")
pa="$PA -u localhost:$port -m gemm --measurement-interval 1500"
run cpu_pa64_c64 $pid $pa $S64 --concurrency-range 64
run cpu_wrk64_c64 $pid wrk -t8 -c64 -d6s -s bench/load/post.lua http://localhost:18081/v1/gemm -- "$out/body64.bin" "multipart/form-data; boundary=crunchd-bench-load-7f3a9c" application/x-npy
kill "$pid"
