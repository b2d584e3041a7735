#!/usr/bin/env python3
"""Plots and a summary of the kernel benchmarks.

    scripts/bench_plot.py bench/results

Also batched.csv (bench/batched.cu: sweep,kernel,dtype,m,n,k,count,ms,gflops,gbs,floor_ms,
ratio_vs_cublas), stacks of products, the own batched kernel against cuBLAS strided-batched:
batched.png (GFLOP/s of the square sweep, and cuBLAS's time over ours per shape) and a section of
summary.md. Reads gemm.csv and gemm_tc.csv (sweep,kernel,dtype,m,n,k,ms,gflops,ratio_vs_cublas; gemm_tc.csv
holds the tensor-core sweeps tf32, f16 and bf16 of `bench/gemm OUT tc`) and ata_hist.csv
(sweep,kernel,dtype,m,n,k_or_bytes,ms,rate,unit,ratio_vs_ref) where present, and beside each
the device it ran on with its peaks (gemm.device.json, ata_hist.device.json: written by
tools/gpu/harness.cuh's gpu_run_begin). Writes one PNG per sweep (rate against size, one line
per kernel, the cuBLAS/CUB/copy references drawn dashed and black, the device's peaks dotted
red) and summary.md: the device, our numbers as fractions of its peaks and beside those the
seed write-ups published. Without matplotlib (the GPU machine may lack it) it says so and
writes only the summary."""
import csv
import json
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

SOURCES = ("gemm", "gemm_tc", "ata_hist")  # NAME.csv and its NAME.device.json
# Runs of single sweeps after those (bench/gemm quick and splitk, bench/ata_hist ata_f32,ata_f64),
# tabulated as they are in "Later runs" (no plots): NAME.csv beside NAME.device.json.
LATER = ("gemm_quick", "gemm_splitk", "ata_kernels")
FAMILY = {"float32": "f32", "f32": "f32", "float64": "f64", "f64": "f64", "float16": "f16", "bfloat16": "bf16"}
# The tensor-core sweeps (bench/gemm.cu's tc mode) are held against their own tensor peak, whatever
# the dtype says: the TF32 sweep's data is float32 but its kernels run on the TF32 tensor cores.
TENSOR_SWEEPS = {"gemm_tf32": ("tf32_tensor_gflops", "TF32 tensor"), "gemm_f16": ("fp16_tensor_gflops", "FP16 tensor"),
                 "gemm_bf16": ("bf16_tensor_gflops", "BF16 tensor")}
# The peaks a GFLOP/s chart is drawn against, by the dtypes it shows: (sidecar key, name,
# drawn however far above the data). cuBLAS DGEMM runs on the FP64 tensor cores, above the FP64
# lanes' peak, hence both. The lower-precision tensor peaks are drawn on FP32 charts only within
# OFF_SCALE of the data's top (the axis is log: further up they squash the kernels into the
# bottom), else named in the legend.
FLOP_PEAKS = {"f32": [("fp32_gflops", "FP32", True), ("tf32_tensor_gflops", "TF32 tensor", False),
                      ("fp16_tensor_gflops", "FP16 tensor", False), ("bf16_tensor_gflops", "BF16 tensor", False)],
              "f64": [("fp64_gflops", "FP64", True), ("fp64_tensor_gflops", "FP64 tensor", True)]}
OFF_SCALE = 20
# What our own kernels are held against, by dtype family or unit: they use the FMA lanes (no
# tensor cores) or stream from DRAM.
OWN_PEAK = {"f32": ("fp32_gflops", "FP32"), "f64": ("fp64_gflops", "FP64"), "GB/s": ("hbm_gbs", "HBM")}
PEAK_COLUMNS = [("fp32_gflops", "FP32"), ("fp64_gflops", "FP64"), ("fp64_tensor_gflops", "FP64 tensor"),
                ("tf32_tensor_gflops", "TF32 tensor"), ("fp16_tensor_gflops", "FP16 tensor"),
                ("bf16_tensor_gflops", "BF16 tensor")]


def read(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_device(outdir, name):
    """NAME.device.json, or None (saying so) where it is missing or unreadable."""
    path = os.path.join(outdir, name + ".device.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"no peak lines on the charts of {name}.csv: {path}: {e.strerror if isinstance(e, OSError) else e}")
        return None


def normalized(gemm_rows, ata_rows, tc_rows=()):
    """One shape for all files: (sweep, kernel, dtype, x, rate, unit, ms, source file's name)."""
    out = []
    for rows, source in ((gemm_rows, "gemm"), (tc_rows, "gemm_tc")):
        for r in rows:
            out.append(("gemm_" + r["sweep"], r["kernel"], r["dtype"], int(r["m"]), float(r["gflops"]),
                        "GFLOP/s", float(r["ms"]), source))
    for r in ata_rows:
        # hist_bins is drawn against the bins (its n), the other histogram sweeps against bytes
        x = int(r["k_or_bytes"]) if r["sweep"].startswith("hist") and r["sweep"] != "hist_bins" else int(r["n"])
        out.append((r["sweep"], r["kernel"], r["dtype"], x, float(r["rate"]), r["unit"], float(r["ms"]),
                    "ata_hist"))
    return out


def fmt_rate(v, unit):
    return f"{v / 1e3:,.1f} TFLOP/s" if unit == "GFLOP/s" else f"{v:,.0f} {unit}"


def chart_peaks(sel, dev):
    """The device's peaks for one chart's rows: ([(value, label)] to draw, [labels] off its scale).
    Equal peaks (FP32 and FP64 tensor on an H100) share one line. Rates other than GFLOP/s and
    GB/s (a chart of times) have no peak."""
    unit = sel[0][5]
    if sel[0][0] in TENSOR_SWEEPS:
        wanted = [TENSOR_SWEEPS[sel[0][0]] + (True,)]
    elif unit == "GB/s":
        wanted = [("hbm_gbs", "HBM bandwidth", True)]
    elif unit == "GFLOP/s":
        families = {FAMILY.get(r[2]) for r in sel}
        wanted = [p for fam in ("f32", "f64") if fam in families for p in FLOP_PEAKS[fam]]
    else:
        return [], []
    top = max(r[4] for r in sel)
    names, drawn = {}, {}
    for key, name, always in wanted:
        v = dev.get(key)
        if v:  # null: unknown for this device
            names.setdefault(v, []).append(name)
            drawn[v] = drawn.get(v, False) or always or v <= OFF_SCALE * top
    label = {v: f"{' / '.join(n)} peak {fmt_rate(v, unit)}" for v, n in names.items()}
    return ([(v, f"{label[v]}, {dev['device']}") for v in sorted(names) if drawn[v]],
            [f"{label[v]}: off this chart" for v in sorted(names) if not drawn[v]])


def draw_peaks(ax, lines, notes):
    """Dotted lines labelled at their left end, where the rates of small sizes leave room (on a
    white ground where a kernel's line crosses); off-scale peaks as legend entries of their
    own. The top is raised so the highest line's label shows."""
    for v, label in lines:
        ax.axhline(v, color="tab:red", linestyle=":", linewidth=1.5)
        ax.annotate(label, (0.01, v), xycoords=("axes fraction", "data"), va="bottom", fontsize=7, color="tab:red",
                    bbox={"facecolor": "white", "alpha": 0.7, "edgecolor": "none", "pad": 1})
    for label in notes:
        ax.plot([], [], " ", label=label)
    if lines:
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, max(hi, 1.6 * max(v for v, _ in lines)))


def plot(rows, devices, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plots (run scripts/bench_plot.py on the CSVs elsewhere)")
        return
    for sweep in sorted({r[0] for r in rows}):
        sel = [r for r in rows if r[0] == sweep]
        if len({r[3] for r in sel}) == 1:
            continue  # one size (hist_dtypes): a table in summary.md, not a chart of points
        fig, ax = plt.subplots(figsize=(10, 5))
        for kernel, dtype in sorted({(r[1], r[2]) for r in sel}):
            pts = sorted((r[3], r[4]) for r in sel if r[1] == kernel and r[2] == dtype)
            ref = kernel.startswith(REFERENCES)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{kernel} ({dtype})",
                    linestyle="--" if ref else "-", color="black" if ref else None, linewidth=2.5 if ref else 1.5)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")  # tf32 and naive differ 100x: a linear axis hides the own kernels
        if devices.get(sel[0][7]):
            draw_peaks(ax, *chart_peaks(sel, devices[sel[0][7]]))
        ax.set_xlabel("bins" if sweep == "hist_bins" else "bytes" if sweep.startswith("hist") else "size (m = n)")
        # symtile and SYRK compute one triangle: they can pass the peak line by up to 2x
        ax.set_ylabel(sel[0][5] + (" (counting the full 2·m·n²)" if sweep.startswith("ata") else ""))
        ax.set_title(sweep)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # outside: peak labels take the top left
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


def fmt_mhz(v):
    return "–" if v is None else f"{v:.0f}"


def device_lines(devices):
    """The "Device and peaks" section: what each CSV ran on, at which clocks, and its peaks."""
    lines = ["## Device and peaks", ""]
    if not any(devices.values()):
        return lines + ["No NAME.device.json beside the CSV files (benchmarks from before they wrote one): "
                        "no peaks.", ""]
    lines += ["Peaks at the rated SM clock, TFLOP/s, dense tensor-core rates (tools/gpu/harness.cuh derives "
              "them); the SM clock measured at the start and the end of the run is beside (–: not "
              "measured).", "",
              "| results | device | SMs | SM clock rated, measured start → end (MHz) | memory | "
              + " | ".join(name for _, name in PEAK_COLUMNS) + " |",
              "| --- " * (5 + len(PEAK_COLUMNS)) + "|"]
    for name, d in devices.items():
        if not d:
            lines.append(f"| {name}.csv | no {name}.device.json |" + " |" * (3 + len(PEAK_COLUMNS)))
            continue
        peaks = " | ".join("unknown" if d.get(k) is None else f"{d[k] / 1e3:,.1f}" for k, _ in PEAK_COLUMNS)
        lines.append(f"| {name}.csv | {d['device']} ({d['compute_capability']}) | {d['sms']} | "
                     f"{d['sm_mhz_rated']}, {fmt_mhz(d.get('sm_mhz_measured_start'))} → "
                     f"{fmt_mhz(d.get('sm_mhz_measured_end'))} | {d['mem_mhz']} MHz × 2 × {d['mem_bus_bits']} bits "
                     f"= {d['hbm_gbs']:,.0f} GB/s | {peaks} |")
    return lines + [""]


def own_best(rows):
    """Per sweep and dtype, at the largest size our own kernels ran: the fastest of them."""
    own = [r for r in rows if not r[1].startswith(REFERENCES)]
    out = []
    for sweep, dtype in sorted({(r[0], r[2]) for r in own}):
        sel = [r for r in own if r[0] == sweep and r[2] == dtype]
        top = max(r[3] for r in sel)
        out.append(max((r for r in sel if r[3] == top), key=lambda r: r[4]))
    return out


def fraction_lines(rows, devices):
    lines = ["### Our best kernel at each sweep's largest size, as a fraction of the device's peak", "",
             "Our kernels use the FMA lanes or stream from DRAM, so the peak is FP32, FP64 or HBM, except in "
             "the tensor-core sweeps (gemm_tf32, gemm_f16, gemm_bf16): their tensor peak. AᵀA rates count the full 2·m·n² product while symtile computes one triangle (about "
             "half of it): its fraction can reach 200%.", "",
             "| sweep | dtype | size | kernel | rate | peak | fraction |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in own_best(rows):
        key, name = TENSOR_SWEEPS.get(r[0]) or OWN_PEAK.get("GB/s" if r[5] == "GB/s" else FAMILY.get(r[2]),
                                                             (None, None))
        peak = (devices.get(r[7]) or {}).get(key)
        size = f"{r[3]:,} bins" if r[0] == "hist_bins" else f"{r[3] >> 20} MiB" if r[5] == "GB/s" else str(r[3])
        held = f"{name} {fmt_rate(peak, r[5])} | {100 * r[4] / peak:.1f}%" if peak else "unknown | –"
        lines.append(f"| {r[0]} | {r[2]} | {size} | {r[1]} | {fmt_rate(r[4], r[5])} | {held} |")
    return lines + [""]


def dtype_lines(rows):
    """The histogram kernels on each input dtype (hist_dtypes: 256 MiB, 256 bins)."""
    sel = [r for r in rows if r[0] == "hist_dtypes"]
    if not sel:
        return []
    kernels = sorted({r[1] for r in sel}, key=lambda k: (k != "cub", k))
    lines = ["", "## Histograms by input dtype, 256 MiB, 256 bins (GB/s of input; × CUB HistogramEven)", "",
             "| dtype | " + " | ".join(kernels) + " |", "| --- |" + " --- |" * len(kernels)]
    for dtype in dict.fromkeys(r[2] for r in sel):  # the benchmark's order
        cub = next((r for r in sel if r[2] == dtype and r[1] == "cub"), None)
        cells = []
        for k in kernels:
            r = next((r for r in sel if r[2] == dtype and r[1] == k), None)
            ratio = f" ({cub[6] / r[6]:.2f}×)" if r and cub and k != "cub" else ""
            cells.append(f"{fmt(r and r[4], 0)}{ratio}")
        lines.append(f"| {dtype} | " + " | ".join(cells) + " |")
    return lines


def bins_lines(rows):
    """Float histograms by bins (hist_bins: 256 MiB, uniform over [-1, 1]), each kernel's GB/s and × CUB."""
    sel = [r for r in rows if r[0] == "hist_bins"]
    if not sel:
        return []
    kernels = sorted({r[1] for r in sel}, key=lambda k: (k != "cub", k != "smem-vec", k))
    lines = ["", "## Float histograms by bins, 256 MiB uniform over [-1, 1] (GB/s of input; × CUB HistogramEven)", "",
             "| dtype | bins | " + " | ".join(kernels) + " |", "| --- | --- |" + " --- |" * len(kernels)]
    for dtype in dict.fromkeys(r[2] for r in sel):
        for bins in sorted({r[3] for r in sel if r[2] == dtype}):
            cub = next((r for r in sel if r[2] == dtype and r[3] == bins and r[1] == "cub"), None)
            cells = []
            for k in kernels:
                r = next((r for r in sel if r[2] == dtype and r[3] == bins and r[1] == k), None)
                ratio = f" ({cub[6] / r[6]:.2f}×)" if r and cub and k != "cub" else ""
                cells.append(f"{fmt(r and r[4], 0)}{ratio}")
            lines.append(f"| {dtype} | {bins:,} | " + " | ".join(cells) + " |")
    return lines


def tensor_lines(rows):
    """Own tensor-core GEMM (tc-tf32, tc) against cuBLAS of the same precision, squares."""
    pairs = [("gemm_tf32", "cublas-tf32", "tc-tf32", "TF32"), ("gemm_f16", "cublas", "tc", "FP16"),
             ("gemm_bf16", "cublas", "tc", "BF16")]
    sizes = sorted({r[3] for r in rows if r[0] in TENSOR_SWEEPS})
    if not sizes:
        return []
    lines = ["", "## Tensor-core GEMM, m = n = k (TFLOP/s; × = cuBLAS time / ours, same run)", "",
             "| size | " + " | ".join(f"cuBLAS {p} | tc {p} | ×" for *_, p in pairs) + " |",
             "| --- |" + " --- | --- | --- |" * len(pairs)]
    for n in sizes:
        cells = []
        for sweep, ref, own, _ in pairs:
            a, b = find(rows, sweep, ref, n), find(rows, sweep, own, n)
            ratio = a[6] / b[6] if a and b else None
            cells.append(f"{fmt(a and a[4] / 1e3, 1)} | {fmt(b and b[4] / 1e3, 1)} | {fmt(ratio)}")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines


def ran_on(outdir, name):
    d = read_device(outdir, name)
    if not d:
        return f"`{name}.csv`"
    return (f"`{name}.csv`: {d['device']}, SM clock {fmt_mhz(d.get('sm_mhz_measured_start'))} → "
            f"{fmt_mhz(d.get('sm_mhz_measured_end'))} MHz (rated {d['sm_mhz_rated']})")


def later_lines(outdir):
    """The later single-sweep runs, each file's rows against the reference of its own run."""
    quick, splitk, ata = (read(os.path.join(outdir, n + ".csv")) for n in LATER)
    if not (quick or splitk or ata):
        return []
    lines = ["", "## Later runs (issue 17's kernels; × = the reference's time / ours, same run)", ""]
    if quick:
        lines += [ran_on(outdir, "gemm_quick") + ", `bench/gemm OUT quick`:", "",
                  "| m = n = k | kernel | ms | TFLOP/s | × cuBLAS SGEMM |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {r['m']} | {r['kernel']} | {float(r['ms']):.3f} | {float(r['gflops']) / 1e3:.1f} | "
                  f"{float(r['ratio_vs_cublas']):.3f} |" for r in quick]
        lines.append("")
    if splitk:
        lines += [ran_on(outdir, "gemm_splitk") + ", `bench/gemm OUT splitk` (dbuf as the daemon runs it, "
                  "with its split-K scratch; dbuf-nosplit as before split-K):", "",
                  "| m = n | k | cuBLAS ms | dbuf ms | × | dbuf-nosplit × |", "| --- | --- | --- | --- | --- | --- |"]
        shapes = sorted({(int(r["m"]), int(r["k"])) for r in splitk if r["kernel"] == "dbuf"}, key=lambda x: (x[1] != 1024, x))
        for m, k in shapes:
            got = {r["kernel"]: r for r in splitk if int(r["m"]) == m and int(r["k"]) == k}
            cu, db, ns = (got.get(n) for n in ("cublas", "dbuf", "dbuf-nosplit"))
            lines.append(f"| {m} | {k} | {fmt(cu and float(cu['ms']), 4)} | {fmt(db and float(db['ms']), 4)} | "
                         f"{fmt(db and float(db['ratio_vs_cublas']), 3)} | {fmt(ns and float(ns['ratio_vs_cublas']), 3)} |")
        lines.append("")
    if ata:
        lines += [ran_on(outdir, "ata_kernels") + ", `bench/ata_hist OUT S ata_f32,ata_f64` (m = n):", "",
                  "| dtype | n | SYRK ms | ours | ours ms | × SYRK |", "| --- | --- | --- | --- | --- | --- |"]
        for sweep, own in (("ata_f32", "symtile"), ("ata_f64", "dmma")):
            for r in (r for r in ata if r["sweep"] == sweep and r["kernel"] == own):
                ref = next((x for x in ata if x["sweep"] == sweep and x["kernel"] == "cublas-syrk" and x["n"] == r["n"]), None)
                lines.append(f"| {r['dtype']} | {r['n']} | {fmt(ref and float(ref['ms']), 3)} | {own} | "
                             f"{float(r['ms']):.3f} | {float(r['ratio_vs_ref']):.2f} |")
    return lines


def batched_rows(outdir):
    return read(os.path.join(outdir, "batched.csv"))


def plot_batched(outdir):
    """batched.png: the square sweep's GFLOP/s (cuBLAS dashed), and cuBLAS time / ours per shape."""
    rows = [r for r in batched_rows(outdir) if r["kernel"] in ("batched", "cublas")]
    if not rows:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no batched.png")
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 5.5))
    for dtype in sorted({r["dtype"] for r in rows}):
        for kernel in ("batched", "cublas"):
            pts = sorted((int(r["m"]), float(r["gflops"])) for r in rows
                         if r["sweep"] == "square" and r["dtype"] == dtype and r["kernel"] == kernel)
            if pts:
                left.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{kernel} ({dtype})",
                          linestyle="--" if kernel == "cublas" else "-", color="black" if kernel == "cublas" else None)
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("m = n = k (stacks of ~400 MB of float32)")
    left.set_ylabel("GFLOP/s")
    left.set_title("stacks of square products: own batched vs cuBLAS strided-batched")
    left.grid(True, alpha=0.3)
    left.legend(fontsize=8)
    own = [r for r in rows if r["kernel"] == "batched" and r["sweep"] != "floor"]
    labels = [f"{r['sweep']} {r['m']}x{r['n']}x{r['k']} x{int(r['count']):,} {r['dtype']}" for r in own]
    ratios = [float(r["ratio_vs_cublas"]) for r in own]
    right.barh(range(len(own)), ratios, color=["tab:green" if x >= 1 else "tab:red" for x in ratios])
    right.axvline(1.0, color="black", linewidth=1)
    right.set_yticks(range(len(own)))
    right.set_yticklabels(labels, fontsize=6)
    right.invert_yaxis()
    right.set_xscale("log", base=2)
    right.set_xlabel("cuBLAS time / batched time (> 1: batched faster)")
    right.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(outdir, "batched.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print("wrote", path)


def batched_lines(outdir):
    """Summary rows of batched.csv: both kernels per shape, the floor, and the ratio."""
    rows = batched_rows(outdir)
    if not rows:
        return []
    lines = ["", "## Stacks: own batched GEMM vs cuBLAS strided-batched (bench/batched.cu; ms, kernel only)", "",
             ran_on(outdir, "batched"), "",
             "| sweep | dtype | m x n x k | count | cuBLAS | batched | floor | cuBLAS / batched |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in (r for r in rows if r["kernel"] == "batched"):
        ref = next((x for x in rows if x["kernel"] == "cublas" and all(x[k] == r[k] for k in
                    ("sweep", "dtype", "m", "n", "k", "count"))), None)
        lines.append(f"| {r['sweep']} | {r['dtype']} | {r['m']}x{r['n']}x{r['k']} | {int(r['count']):,} | "
                     f"{fmt(ref and float(ref['ms']), 4)} | {float(r['ms']):.4f} | {float(r['floor_ms']):.4f} | "
                     f"{float(r['ratio_vs_cublas']):.2f} |")
    return lines


def summary(rows, devices, outdir):
    lines = ["# Kernel benchmark summary", "",
             "Our numbers are medians from this run's CSV files; the published ones come from the seed "
             "write-ups listed in docs/sources.md (older GPUs: V100, Tesla C2075).", ""]
    lines += device_lines(devices) + fraction_lines(rows, devices)
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
    lines += tensor_lines(rows)
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
    lines += dtype_lines(rows)
    lines += bins_lines(rows)
    lines += later_lines(outdir)
    lines += batched_lines(outdir)
    path = os.path.join(outdir, "summary.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", path)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "bench/results"
    rows = normalized(read(os.path.join(outdir, "gemm.csv")), read(os.path.join(outdir, "ata_hist.csv")),
                      read(os.path.join(outdir, "gemm_tc.csv")))
    plot_batched(outdir)
    if not rows:
        later = later_lines(outdir) + batched_lines(outdir)
        if not later:
            print(f"no gemm.csv, gemm_tc.csv, ata_hist.csv, batched.csv or later runs under {outdir}")
            return 1
        path = os.path.join(outdir, "summary.md")
        with open(path, "w") as f:
            f.write("\n".join(["# Kernel benchmark summary"] + later) + "\n")
        print("wrote", path)
        return 0
    devices = {name: read_device(outdir, name) for name in SOURCES if any(r[7] == name for r in rows)}
    plot(rows, devices, outdir)
    summary(rows, devices, outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
