#!/usr/bin/env python3
"""Where a load run's time goes: for each daemon configuration and row, jobs/s and p99 (wrk, as
make bench-load) beside what the daemon's own metrics say over the run: CPU cores it used (and per thread
name: HTTP, engine workers, the rest; and the load generator's, "wrk"), mean batch size, mean queue wait,
the device phases, the daemon's mean time per request (req_us: first byte in to last byte handed to
the socket) beside the client's mean round trip (rtt_us), the share of requests read by the direct
path rather than libmicrohttpd (direct), device busy fraction.

  scripts/load_probe.py BUILD_DIR 'ARGS ; ARGS ; ...' [ENV=V,...]

Each ';'-separated ARGS is one daemon configuration (empty: the defaults). Rows and connections
as bench-load (BENCH_LOAD_ROWS, BENCH_LOAD_CONNS, BENCH_LOAD_SECONDS); CRUNCHD_BACKEND picks the
backend. A configuration may start with 'env:K=V,K=V' to set daemon environment variables.
A row gemmN_shm keeps A, B and C in shared memory registered with the daemon (as bench-load's
gemm1024_shm): the engine's own rate for that size, without the matrices crossing the socket."""
import os
import pathlib
import re
import resource
import shlex
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_load as bl  # noqa: E402


def scrape(daemon):
    text = daemon.get("/metrics").text
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^(\w+)(\{[^}]*\})? (\S+)$", line)
        if not m:
            continue
        name, labels, v = m.group(1), m.group(2) or "", float(m.group(3))
        if "_bucket" in name:
            continue
        key = name + ("" if "device=" in labels else labels)
        out[key] = out.get(key, 0.0) + v
        if "device=" in labels and name == "crunchd_device_busy_seconds_total":
            out[name + labels] = v  # each device's own too: does the load spread?
    return out


def thread_cpu(pid):
    """CPU seconds per thread name: MHD-worker (HTTP), cr-worker-N (engine), the rest (the CUDA
    driver's threads and main carry the process name)."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        name = re.sub(r"-\d+$", "", name)
        fields = stat[stat.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def delta(a, b, key):
    return b.get(key, 0.0) - a.get(key, 0.0)


def main():
    build = pathlib.Path(sys.argv[1]).resolve()
    configs = [c.strip() for c in sys.argv[2].split(";")]
    os.environ.setdefault("CRUNCHD_BIN", str(build / "crunchd"))
    import conftest
    conftest.BIN = os.environ["CRUNCHD_BIN"]
    bl.WRK = os.environ.get("WRK") or "wrk"
    rows = bl.env_list("BENCH_LOAD_ROWS", ["gemm64_json", "hist1k_json", "gemm16_json"])
    conns = bl.env_list("BENCH_LOAD_CONNS", [64], int)
    secs = int(os.environ.get("BENCH_LOAD_SECONDS", "4"))
    print(f"{'config':<40} {'row':<12} {'conns':>5} {'jobs/s':>8} {'p99ms':>6} {'cores':>6} "
          f"{'batch':>6} {'queue_us':>8} {'h2d+k+d2h':>9} {'req_us':>6} {'rtt_us':>6} {'direct':>6} {'busy':>5} per device")
    with tempfile.TemporaryDirectory(prefix="probe-") as t:
        tmp = pathlib.Path(t)
        specs = [bl.make_row(name, tmp) for name in rows]
        try:
            run_configs(configs, specs, conns, secs, tmp)
        finally:
            for spec in specs:
                if spec["shm"]:
                    spec["shm"].close()


def run_configs(configs, specs, conns, secs, tmp):
    import conftest
    for ci, cfg in enumerate(configs):
        env = {}
        if cfg.startswith("env:"):
            head, _, cfg = cfg.partition(" ")
            env = dict(kv.split("=", 1) for kv in head[4:].split(","))
        args = shlex.split(cfg) + ["--log-format", "text"]
        d = conftest.Daemon(args, env=env, name=f"probe{ci}", host_path=True, workdir=tmp / f"d{ci}").start()
        try:
            for spec in specs:
                if spec["shm"]:  # gemmN_shm: operands in registered regions, no matrix bytes sent
                    spec["shm"].register(d.base)
                if (why := bl.check(d.base, spec)) is not None:
                    print(f"WRONG {spec['name']}: {why}")
                for c in conns:
                    bl.wrk(d.base, spec, c, 1)
                    a, ta = scrape(d), thread_cpu(d.proc.pid)
                    wa = resource.getrusage(resource.RUSAGE_CHILDREN)
                    r = bl.wrk(d.base, spec, c, secs)
                    wb = resource.getrusage(resource.RUSAGE_CHILDREN)
                    b, tb = scrape(d), thread_cpu(d.proc.pid)
                    tb["wrk"] = ta.get("wrk", 0.0) + (wb.ru_utime + wb.ru_stime - wa.ru_utime - wa.ru_stime)
                    op = spec["path"].rsplit("/", 1)[1]
                    jobs = delta(a, b, f'crunchd_job_duration_seconds_count{{op="{op}",phase="queue"}}') or 1
                    q = delta(a, b, f'crunchd_job_duration_seconds_sum{{op="{op}",phase="queue"}}') / jobs
                    dev = sum(delta(a, b, f'crunchd_job_duration_seconds_sum{{op="{op}",phase="{p}"}}')
                              for p in ("h2d", "kernel", "d2h")) / jobs
                    # the daemon's own time per request (first byte in to last byte handed to the
                    # socket) against the client's mean round trip: the difference is the
                    # wake-ups, the loopback and the load generator
                    route = f'route="{op}",code="200"'
                    reqs = delta(a, b, f"crunchd_request_duration_seconds_count{{{route}}}") or 1
                    req = delta(a, b, f"crunchd_request_duration_seconds_sum{{{route}}}") / reqs
                    direct = delta(a, b, 'crunchd_direct_requests_total{transport="tcp"}') / reqs
                    bs = delta(a, b, "crunchd_batch_size_count")
                    batch = delta(a, b, "crunchd_batch_size_sum") / bs if bs else 1.0
                    busy = delta(a, b, "crunchd_device_busy_seconds_total") / secs
                    per_dev = "/".join(f"{delta(a, b, k) / secs:.2f}" for k in sorted(b)
                                       if k.startswith("crunchd_device_busy_seconds_total{"))
                    cores = delta(a, b, "process_cpu_seconds_total") / secs
                    threads = " ".join(f"{k}={(tb[k] - ta.get(k, 0.0)) / secs:.2f}" for k in sorted(tb)
                                       if tb[k] - ta.get(k, 0.0) > 0.005 * secs)
                    label = (" ".join(f"{k}={v}" for k, v in env.items()) + " " + cfg).strip() or "defaults"
                    print(f"{label[:40]:<40} {spec['name']:<12} {c:>5} {r['jobs_s']:>8.0f} {r['p99_ms']:>6.2f} "
                          f"{cores:>6.2f} {batch:>6.1f} {q * 1e6:>8.0f} {dev * 1e6:>9.0f} {req * 1e6:>6.0f} {r['mean_ms'] * 1e3:>6.0f} {direct:>6.2f} {busy:>5.2f} {per_dev}  cores: {threads}",
                          flush=True)
        finally:
            for spec in specs:
                if spec["shm"]:
                    spec["shm"].unregister(d.base)
            d.stop()


if __name__ == "__main__":
    main()
