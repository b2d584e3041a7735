/* The page at GET / (server/ui/index.html): the daemon's own JSON and metrics, drawn by hand into
 * SVG; no library, nothing from another origin (the Content-Security-Policy allows none). Every
 * request carries the token of the page's field as a bearer token, so the page works with
 * --auth-token-file. */
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const POLL_MS = 2000;
const SPARK_POINTS = 60;
const DTYPES = { gemm: ["float32", "float64", "float16", "bfloat16"], ata: ["float32", "float64"],
                 histogram: ["uint8", "float32", "float64"] };
const BYTES = { float64: 8, float32: 4, float16: 2, bfloat16: 2, uint8: 1 };

const state = { info: null, last: null, jobsHistory: [], compare: null };

const $ = (id) => document.getElementById(id);

/* ---- talking to the daemon ------------------------------------------------------------------ */

function token() { return $("token").value.trim(); }

async function api(path, options = {}) {
  const headers = Object.assign({ Accept: "application/json" }, options.headers || {});
  if (token()) headers.Authorization = "Bearer " + token();
  const r = await fetch(path, Object.assign({}, options, { headers }));
  const type = r.headers.get("Content-Type") || "";
  const body = type.startsWith("application/json") ? await r.json() : await r.text();
  if (!r.ok) {
    const e = body && body.error ? body.error : { code: String(r.status), message: String(body) };
    const err = new Error(`${r.status} ${e.code}${e.field ? " (" + e.field + ")" : ""}: ${e.message}`);
    err.status = r.status;
    throw err;
  }
  return body;
}

function say(id, text, isError) {
  const el = $(id);
  el.textContent = text;
  el.classList.toggle("error", !!isError);
}

/* ---- numbers -------------------------------------------------------------------------------- */

function fmt(x, digits = 3) {
  if (x === undefined || x === null || !isFinite(x)) return "–";
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 1e6 || a < 1e-3) return x.toExponential(digits - 1);
  return Number(x.toPrecision(digits)).toLocaleString("en-US");
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${fmt(n)} ${units[i]}`;
}

/* ---- the server ----------------------------------------------------------------------------- */

function fact(dl, name, value) {
  const dt = document.createElement("dt"), dd = document.createElement("dd");
  dt.textContent = name;
  dd.textContent = value;
  dl.append(dt, dd);
}

function row(cells, numeric = []) {
  const tr = document.createElement("tr");
  cells.forEach((c, i) => {
    const td = document.createElement("td");
    td.textContent = c;
    if (numeric.includes(i)) td.className = "num";
    tr.append(td);
  });
  return tr;
}

function showInfo(info) {
  state.info = info;
  $("version").textContent = `${info.version} · ${info.backend} backend`;
  const dl = $("server-facts");
  dl.replaceChildren();
  fact(dl, "version", `${info.version} (${info.build.git_revision})`);
  fact(dl, "backend", info.backend);
  fact(dl, "CUDA", `toolkit ${info.build.cuda_toolkit}, runtime ${info.build.cuda_runtime}, driver ${info.build.cuda_driver}`);
  fact(dl, "workers", `${info.limits.workers} per device, queue depth ${info.limits.queue_depth}`);
  fact(dl, "limits", `${fmt(info.limits.max_elements)} elements per array, ${bytes(info.limits.max_body_bytes)} per body`);
  const body = $("devices").tBodies[0];
  body.replaceChildren();
  for (const d of info.devices) {
    const p = d.peaks || {};
    body.append(row([d.index, d.name, `${bytes(d.memory_free_bytes)} / ${bytes(d.memory_total_bytes)}`,
                     d.multiprocessors, d.sm_clock_mhz ? `${d.sm_clock_mhz} / ${d.memory_clock_mhz} MHz` : "–",
                     p.fp32_gflops ? `${fmt(p.fp32_gflops / 1e3)} TFLOP/s` : "–",
                     p.memory_gbs ? `${fmt(p.memory_gbs)} GB/s` : "–"], [3]));
  }
  if (!state.sized) { // once: sizes that take a second or so (the CPU's reference kernels are slow)
    const sizes = info.backend === "cpu" ? [256, 1048576] : [4096, 268435456];
    for (const id of ["c-m", "c-n", "c-k"]) $(id).value = sizes[0];
    $("c-count").value = sizes[1];
    state.sized = true;
  }
}

function kernelNotes(k) {
  return [k.reference && "reference", k.batchable && "batchable", k.stacks && "stacks",
          k.named_only && "by name only"].filter(Boolean).join(", ");
}

function showKernels(doc) {
  const body = $("kernel-table").tBodies[0];
  body.replaceChildren();
  for (const k of doc.kernels)
    body.append(row([k.op, k.name, k.dtypes.join(", "), k.precision, kernelNotes(k), k.summary]));
}

async function loadStatic() {
  try {
    showInfo(await api("/v1/info"));
    showKernels(await api("/v1/kernels"));
    say("status", "");
  } catch (e) {
    say("status", e.status === 401 ? "this daemon needs its token: type it above" : e.message, true);
  }
}

/* ---- live numbers from /metrics -------------------------------------------------------------- */

function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    if (m[2]) for (const l of m[2].slice(1, -1).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

function sum(samples, name, test = () => true) {
  return samples.filter((s) => s.name === name && test(s.labels)).reduce((a, s) => a + s.value, 0);
}

/* Cumulative buckets of every op's total job time, by upper bound. */
function totalBuckets(samples) {
  const b = new Map();
  for (const s of samples)
    if (s.name === "crunchd_job_duration_seconds_bucket" && s.labels.phase === "total")
      b.set(s.labels.le, (b.get(s.labels.le) || 0) + s.value);
  return b;
}

/* The q-quantile of the jobs between two scrapes, interpolated inside its bucket (as Prometheus'
 * histogram_quantile does); null without jobs. */
function quantile(q, now, before) {
  const les = [...now.keys()].sort((a, b) => Number(a) - Number(b));
  const count = (now.get("+Inf") || 0) - ((before && before.get("+Inf")) || 0);
  if (count <= 0) return null;
  let prevLe = 0, prevCum = 0;
  for (const le of les) {
    const cum = now.get(le) - ((before && before.get(le)) || 0);
    if (cum >= q * count) {
      if (le === "+Inf") return prevLe;
      const inBucket = cum - prevCum;
      return prevLe + (Number(le) - prevLe) * (inBucket > 0 ? (q * count - prevCum) / inBucket : 1);
    }
    prevLe = Number(le);
    prevCum = cum;
  }
  return prevLe;
}

function drawSpark() {
  const svg = $("spark"), h = state.jobsHistory, max = Math.max(1, ...h);
  const pts = h.map((v, i) => `${(i / (SPARK_POINTS - 1)) * 600},${58 - (v / max) * 54}`).join(" ");
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", pts);
  svg.replaceChildren(line);
}

async function pollMetrics() {
  try {
    const samples = parseMetrics(await api("/metrics", { headers: { Accept: "text/plain" } }));
    const now = { t: performance.now(), jobs: sum(samples, "crunchd_job_duration_seconds_count", (l) => l.phase === "total"),
                  requests: sum(samples, "crunchd_request_duration_seconds_count"), buckets: totalBuckets(samples) };
    $("live-queue").textContent = fmt(sum(samples, "crunchd_jobs_in_queue"));
    $("live-running").textContent = fmt(sum(samples, "crunchd_jobs_running"));
    const last = state.last;
    if (last) {
      const dt = (now.t - last.t) / 1e3, jobs = (now.jobs - last.jobs) / dt;
      $("live-jobs").textContent = fmt(jobs);
      $("live-requests").textContent = fmt((now.requests - last.requests) / dt);
      const p50 = quantile(0.5, now.buckets, last.buckets), p99 = quantile(0.99, now.buckets, last.buckets);
      $("live-p50").textContent = p50 === null ? "–" : fmt(p50 * 1e3);
      $("live-p99").textContent = p99 === null ? "–" : fmt(p99 * 1e3);
      state.jobsHistory.push(jobs);
      if (state.jobsHistory.length > SPARK_POINTS) state.jobsHistory.shift();
      drawSpark();
    }
    state.last = now;
  } catch (e) {
    say("status", e.status === 401 ? "this daemon needs its token: type it above" : "metrics: " + e.message, true);
  }
}

/* ---- the comparison ------------------------------------------------------------------------- */

function num(id) { return Math.max(0, Math.floor(Number($(id).value) || 0)); }

function generated(shape, seed) { return { random: { shape, dist: $("c-dist").value, seed } }; }

/* The request: every kernel of the op ("kernel": "all") on operands the daemon makes, the result
 * dropped (only the table is drawn). */
function compareBody() {
  const op = $("c-op").value, dtype = $("c-dtype").value, seed = num("c-seed");
  const body = { kernel: "all", dtype, output: { discard: true } };
  if (op === "gemm") {
    body.a = generated([num("c-m"), num("c-k")], seed);
    body.b = generated([num("c-k"), num("c-n")], seed + 1);
    if (dtype === "float32") body.precision = $("c-precision").value; // tf32 is float32's only
  } else if (op === "ata") {
    body.a = generated([num("c-m"), num("c-n")], seed);
  } else {
    body.data = generated([num("c-count")], seed);
    body.bins = num("c-bins");
    if (dtype !== "uint8") body.range = $("c-dist").value === "normal" ? [-6, 6] : [-1, 1];
  }
  return { op, dtype, body };
}

/* Work and bytes of the problem, for the roofline's arithmetic intensity. */
function problemSize(op, dtype) {
  const es = BYTES[dtype], m = num("c-m"), n = num("c-n"), k = num("c-k");
  if (op === "gemm") return { flops: 2 * m * n * k, bytes: es * (m * k + k * n + m * n) };
  if (op === "ata") return { flops: 2 * m * n * n, bytes: es * (m * n + n * n) };
  return { flops: 0, bytes: es * num("c-count") };
}

/* The device's ceilings for the op and dtype: [{name, gflops}], and its memory GB/s. */
function ceilings(op, dtype) {
  const d = state.info && state.info.devices[0], p = (d && d.peaks) || {};
  // compare mode runs a float32 GEMM's TF32 kernels whatever its precision: both ceilings
  const named = { float32: [["FP32", p.fp32_gflops]].concat(op === "gemm" ? [["TF32 tensor", p.tf32_tensor_gflops]] : []),
                  float64: [["FP64", p.fp64_gflops], ["FP64 tensor", p.fp64_tensor_gflops]],
                  float16: [["FP16 tensor", p.fp16_tensor_gflops]], bfloat16: [["BF16 tensor", p.bf16_tensor_gflops]] };
  return { flops: (named[dtype] || []).filter(([, v]) => v > 0).map(([name, gflops]) => ({ name, gflops })),
           gbs: p.memory_gbs || 0 };
}

function el(name, attrs, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

const CHART = { width: 600, label: 120, row: 24, top: 8, right: 200 };

/* Horizontal bars, one per kernel, with the values as data attributes (the browser test reads
 * them) and a dashed line for each ceiling that fits the scale. */
function drawBars(svg, rows, value, kind, unit, lines = []) {
  const max = Math.max(1e-30, ...rows.map(value), ...lines.map((l) => l.value));
  const plotW = CHART.width - CHART.label - CHART.right, h = CHART.top * 2 + rows.length * CHART.row + 14;
  svg.setAttribute("viewBox", `0 0 ${CHART.width} ${h}`);
  svg.replaceChildren();
  rows.forEach((r, i) => {
    const y = CHART.top + i * CHART.row, v = value(r), w = Math.max(1, (v / max) * plotW);
    svg.append(el("text", { x: CHART.label - 6, y: y + 15, "text-anchor": "end" }, r.kernel));
    svg.append(el("rect", { x: CHART.label, y: y + 3, width: w, height: CHART.row - 7,
                            class: `bar-${kind}${r.status === "ok" ? "" : " failed"}`, "data-kernel": r.kernel,
                            "data-ms": String(r.ms), "data-rate": String(r.rate), "data-error": String(r.max_rel_error),
                            "data-status": r.status }));
    const note = kind === "rate" ? `  err ${fmt(r.max_rel_error, 2)}` : "";
    svg.append(el("text", { x: CHART.label + w + 4, y: y + 15 }, r.status === "ok" ? `${fmt(v)} ${unit}${note}` : r.status));
  });
  const bottom = CHART.top + rows.length * CHART.row;
  svg.append(el("line", { x1: CHART.label, y1: CHART.top, x2: CHART.label, y2: bottom, class: "axis" }));
  for (const l of lines) {
    const x = CHART.label + (l.value / max) * plotW;
    svg.append(el("line", { x1: x, y1: CHART.top, x2: x, y2: bottom, class: "peak", "data-peak": l.name }));
    svg.append(el("text", { x, y: bottom + 12, "text-anchor": "middle" }, `${l.name} ${fmt(l.value)}`));
  }
}

/* Log-log: GFLOP/s against flops per byte, the roof min(peak, bandwidth x intensity) and one point
 * per kernel at the problem's intensity (the bytes each operand and the result must move once). */
function drawRoofline(svg, rows, op, dtype) {
  const W = 560, H = 300, L = 60, B = 36, T = 10, R = 20;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.replaceChildren();
  const c = ceilings(op, dtype), size = problemSize(op, dtype);
  if (op === "histogram" || !c.gbs || !c.flops.length) {
    svg.append(el("text", { x: 10, y: 30 }, op === "histogram"
      ? "a histogram is bound by memory: its rate chart shows the bandwidth line"
      : "no peak rates for this device (GET /v1/info has none on the cpu backend)"));
    return;
  }
  const ai = size.flops / size.bytes, peak = Math.max(...c.flops.map((f) => f.gflops), ...rows.map((r) => r.rate));
  const x0 = Math.log10(0.1), x1 = Math.log10(Math.max(1e4, ai * 4));
  const y1 = Math.log10(peak * 2), y0 = Math.log10(Math.max(1e-3, Math.min(peak / 1e5, ...rows.filter((r) => r.rate > 0).map((r) => r.rate / 2))));
  const X = (v) => L + ((Math.log10(v) - x0) / (x1 - x0)) * (W - L - R);
  const Y = (v) => T + (1 - (Math.log10(v) - y0) / (y1 - y0)) * (H - T - B);
  svg.append(el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }));
  svg.append(el("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }));
  for (let e = Math.ceil(x0); e <= Math.floor(x1); e++)
    svg.append(el("text", { x: X(10 ** e), y: H - B + 14, "text-anchor": "middle" }, fmt(10 ** e)));
  for (let e = Math.ceil(y0); e <= Math.floor(y1); e++)
    svg.append(el("text", { x: L - 4, y: Y(10 ** e) + 4, "text-anchor": "end" }, fmt(10 ** e)));
  svg.append(el("text", { x: (L + W) / 2, y: H - 4, "text-anchor": "middle" }, "flops per byte"));
  svg.append(el("text", { x: L + 6, y: T + 10 }, "GFLOP/s"));
  for (const f of c.flops) {
    const knee = f.gflops / c.gbs, lo = 10 ** x0, hi = 10 ** x1;
    const pts = [[lo, Math.max(10 ** y0, c.gbs * lo)], [Math.max(lo, knee), f.gflops], [hi, f.gflops]];
    svg.append(el("polyline", { points: pts.map(([a, b]) => `${X(a)},${Y(b)}`).join(" "), class: "roof", "data-peak": f.name }));
    svg.append(el("text", { x: W - R - 4, y: Y(f.gflops) - 4, "text-anchor": "end" }, `${f.name} ${fmt(f.gflops)}`));
  }
  svg.append(el("text", { x: X(10 ** x0) + 4, y: Y(Math.max(10 ** y0, c.gbs * 10 ** x0)) - 6 }, `${fmt(c.gbs)} GB/s`));
  for (const r of rows.filter((r) => r.rate > 0)) {
    const dot = el("circle", { cx: X(ai), cy: Y(r.rate), r: 4, "data-kernel": r.kernel });
    dot.append(el("title", {}, `${r.kernel}: ${fmt(r.rate)} GFLOP/s`));
    svg.append(dot);
  }
}

function showComparison(op, dtype, precision, answer) {
  const rateKey = op === "histogram" ? "gbps" : "gflops", unit = op === "histogram" ? "GB/s" : "GFLOP/s";
  const rows = answer.kernels.map((k) => ({ kernel: k.kernel, ms: k.ms, rate: k[rateKey], max_rel_error: k.max_rel_error, status: k.status }));
  state.compare = { op, dtype, precision, rows };
  const c = ceilings(op, dtype);
  const lines = op === "histogram" ? (c.gbs ? [{ name: "memory", value: c.gbs }] : [])
                                   : c.flops.map((f) => ({ name: f.name, value: f.gflops }));
  $("rate-caption").textContent = `${unit} (higher is better; dashed: the device's peak)`;
  drawBars($("chart-time"), rows, (r) => r.ms, "time", "ms");
  drawBars($("chart-rate"), rows, (r) => r.rate, "rate", unit, lines);
  drawRoofline($("roofline"), rows, op, dtype);
  $("compare-json").textContent = JSON.stringify(answer, null, 1);
}

async function runComparison(event) {
  event.preventDefault();
  const { op, dtype, body } = compareBody();
  $("c-run").disabled = true;
  say("compare-status", `running every ${op} kernel on generated operands…`);
  const t0 = performance.now();
  try {
    const answer = await api(`/v1/${op}`, { method: "POST", body: JSON.stringify(body),
                                            headers: { "Content-Type": "application/json" } });
    showComparison(op, dtype, body.precision || "fp32", answer);
    say("compare-status", `${answer.kernels.length} kernels on ${answer.device}, answered in ${fmt(performance.now() - t0)} ms`);
    document.body.dataset.compared = String(Number(document.body.dataset.compared || 0) + 1);
  } catch (e) {
    say("compare-status", e.message, true);
  } finally {
    $("c-run").disabled = false;
  }
}

/* ---- the form ------------------------------------------------------------------------------- */

function fitForm() {
  const op = $("c-op").value, dt = $("c-dtype"), keep = dt.value;
  dt.replaceChildren(...DTYPES[op].map((d) => Object.assign(document.createElement("option"), { textContent: d })));
  if (DTYPES[op].includes(keep)) dt.value = keep;
  for (const label of document.querySelectorAll("#compare-form [data-ops]"))
    label.classList.toggle("hidden", !label.dataset.ops.split(" ").includes(op));
  $("c-precision").disabled = dt.value !== "float32";
}

function start() {
  $("token").value = sessionStorage.getItem("crunchd-token") || "";
  $("token").addEventListener("change", () => {
    sessionStorage.setItem("crunchd-token", token());
    loadStatic();
  });
  $("c-op").addEventListener("change", fitForm);
  $("c-dtype").addEventListener("change", fitForm);
  $("compare-form").addEventListener("submit", runComparison);
  fitForm();
  loadStatic();
  pollMetrics();
  setInterval(pollMetrics, POLL_MS);
}

document.addEventListener("DOMContentLoaded", start);
