#!/usr/bin/env python3
"""Plots and a summary of the kernel benchmarks.

    scripts/bench_plot.py bench/results

Reads gemm.csv (sweep,kernel,dtype,m,n,k,ms,gflops,ratio_vs_cublas) and ata_hist.csv
(sweep,kernel,dtype,m,n,k_or_bytes,ms,rate,unit,ratio_vs_ref) where present. Writes one PNG per
sweep (rate against size, one line per kernel, the cuBLAS/CUB/copy references drawn dashed and
black) and summary.md: our numbers beside those the seed write-ups published. Without
matplotlib (the GPU machine may lack it) it says so and writes only the summary."""
import csv
import os
import sys

REFERENCES = ("cublas", "cub", "d2d-copy")

# Published in the source write-ups (docs/sources.md lists them; times in ms).
C2075 = {  # A size n (A is n×n, FP64): cuBLAS DGEMM, basic kernel, optimized (triangle) kernel
    2000: (51.95, 429.29, 191.41), 4000: (408.34, 3482.16, 1536.83), 6000: (1481.28, 12008.3, 5226.62),
    8000: (3458.49, 29365.12, 12690.03), 10000: (6773.91, 58601.13, 24552.65),
    12000: (11702.40, 105631.83, 42585.66), 14000: (18660.41, 170900.72, 68320.30),
    16000: (27671.52, 268574.53, 103951.38), 18000: (39509.19, 378438.31, 145295.08)}
V100_PEAK_GFLOPS = 15700.0  # the write-up's FP32 peak; its stages in % of it, M=N=K sweep largest
V100 = [("naive", 11.5), ("blocktile", 51.7), ("vec", 74.3), ("dbuf", 80.6), ("cublas", 82.4)]
HIST_512MB = [("CPU, one thread", 350.0), ("GPU global atomics", 213.0), ("GPU global, 4 bytes/thread", 200.0),
              ("GPU shared-memory bins", 9.0), ("GPU shared bins, 32 words/thread interleaved", 1.0),
              ("GPU shared bins, contiguous", 2.0)]
HIST_OURS = {"global": "GPU global atomics", "smem": "GPU shared-memory bins",
             "smem-vec": "GPU shared bins, 16-byte loads (smem-vec)", "cub": "CUB HistogramEven"}


def read(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def normalized(gemm_rows, ata_rows):
    """One shape for both files: (sweep, kernel, dtype, x, rate, unit, ms)."""
    out = []
    for r in gemm_rows:
        out.append(("gemm_" + r["sweep"], r["kernel"], r["dtype"], int(r["m"]), float(r["gflops"]),
                    "GFLOP/s", float(r["ms"])))
    for r in ata_rows:
        x = int(r["k_or_bytes"]) if r["sweep"].startswith("hist") else int(r["n"])
        out.append((r["sweep"], r["kernel"], r["dtype"], x, float(r["rate"]), r["unit"], float(r["ms"])))
    return out


def plot(rows, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plots (run scripts/bench_plot.py on the CSVs elsewhere)")
        return
    for sweep in sorted({r[0] for r in rows}):
        fig, ax = plt.subplots(figsize=(8, 5))
        sel = [r for r in rows if r[0] == sweep]
        for kernel, dtype in sorted({(r[1], r[2]) for r in sel}):
            pts = sorted((r[3], r[4]) for r in sel if r[1] == kernel and r[2] == dtype)
            ref = kernel.startswith(REFERENCES)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{kernel} ({dtype})",
                    linestyle="--" if ref else "-", color="black" if ref else None, linewidth=2.5 if ref else 1.5)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")  # tf32 and naive differ 100x: a linear axis hides the own kernels
        ax.set_xlabel("bytes" if sweep.startswith("hist") else "size (m = n)")
        ax.set_ylabel(sel[0][5])
        ax.set_title(sweep)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(outdir, f"{sweep}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print("wrote", path)


def find(rows, sweep, kernel, x, dtype=None):
    for r in rows:
        if r[0] == sweep and r[1] == kernel and r[3] == x and (dtype is None or r[2] == dtype):
            return r
    return None


def fmt(v, nd=2):
    return "–" if v is None else f"{v:,.{nd}f}"


def summary(rows, outdir):
    lines = ["# Kernel benchmark summary", "",
             "Our numbers are medians from this run's CSV files; the published ones come from the seed "
             "write-ups listed in docs/sources.md (older GPUs: V100, Tesla C2075).", ""]
    lines += ["## AᵀA FP32, m = n (ms; rate counts the full 2·m·n² product)", "",
              "| n | gemm (dbuf) | symtile | cuBLAS SSYRK | cuBLAS SGEMM | symtile vs gemm | symtile vs SYRK |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for n in sorted({r[3] for r in rows if r[0] == "ata_f32"}):
        g, s, y, q = (find(rows, "ata_f32", k, n) for k in ("gemm", "symtile", "cublas-syrk", "cublas-sgemm"))
        ms = [r[6] if r else None for r in (g, s, y, q)]
        sg = ms[0] / ms[1] if ms[0] and ms[1] else None
        sy = ms[2] / ms[1] if ms[2] and ms[1] else None
        lines.append(f"| {n} | {fmt(ms[0], 3)} | {fmt(ms[1], 3)} | {fmt(ms[2], 3)} | {fmt(ms[3], 3)} | "
                     f"{fmt(sg)}× | {fmt(sy)}× |")
    lines += ["", "## AᵀA FP64, the C2075 write-up's table (ms)", "",
              "| A size | C2075 cuBLAS DGEMM | C2075 basic | C2075 optimized | ours DGEMM | ours DSYRK | ours symtile |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for n, (cu, basic, opt) in C2075.items():
        d, y, s = (find(rows, "ata_f64", k, n) for k in ("cublas-dgemm", "cublas-syrk", "symtile"))
        lines.append(f"| {n}² | {cu:,.2f} | {basic:,.2f} | {opt:,.2f} | {fmt(d and d[6])} | {fmt(y and y[6])} | "
                     f"{fmt(s and s[6])} |")
    lines += ["", "## SGEMM, the V100 write-up's stages (GFLOP/s; V100 = % of its 15.7 TFLOPS peak)", "",
              "| stage | V100 published | ours 4096³ | ours 8192³ |", "| --- | --- | --- | --- |"]
    for kernel, pct in V100:
        a = find(rows, "gemm_square", kernel, 4096, "float32")
        b = find(rows, "gemm_square", kernel, 8192, "float32")
        lines.append(f"| {kernel} | {V100_PEAK_GFLOPS * pct / 100:,.0f} ({pct}%) | {fmt(a and a[4], 0)} | "
                     f"{fmt(b and b[4], 0)} |")
    mib512 = 512 << 20
    lines += ["", "## Histogram of 512 MB of bytes, 256 bins (ms)", "", "| variant | published | ours |",
              "| --- | --- | --- |"]
    for name, ms in HIST_512MB:
        lines.append(f"| {name} | {ms:g} | |")
    for kernel, name in HIST_OURS.items():
        r = find(rows, "hist_u8", kernel, mib512)
        lines.append(f"| {name} | | {fmt(r and r[6], 4)} ({fmt(r and r[4], 0)} GB/s) |")
    c = find(rows, "hist_u8", "d2d-copy", mib512)
    lines.append(f"| device-to-device copy (read + write) | | {fmt(c and c[6], 4)} ({fmt(c and c[4], 0)} GB/s) |")
    path = os.path.join(outdir, "summary.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", path)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "bench/results"
    rows = normalized(read(os.path.join(outdir, "gemm.csv")), read(os.path.join(outdir, "ata_hist.csv")))
    if not rows:
        print(f"no gemm.csv or ata_hist.csv under {outdir}")
        return 1
    plot(rows, outdir)
    summary(rows, outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
