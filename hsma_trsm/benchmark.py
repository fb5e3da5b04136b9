"""Main benchmark: hsma_trsm.solve_triangular against torch.linalg.solve_triangular.

Run from the repository root::

    python -m hsma_trsm.benchmark                  # full set on CUDA (reduced set on CPU)
    python -m hsma_trsm.benchmark --quick          # reduced set
    python -m hsma_trsm.benchmark --cases small,square --dtypes float32,complex64
    python -m hsma_trsm.benchmark --out /tmp/results

Both solvers run in the same process on the same inputs (left side, lower, non-unit unless a
case says otherwise). On CUDA each number is the median over isolated calls timed with CUDA
events (device synchronized before each call, so launch overhead is included), plus a
"graph" number: N calls captured into one CUDA graph, replays timed, divided by N (GPU time
only). Without a GPU the CPU path is timed with time.perf_counter (median) on a smaller set.

Cases (per dtype float32, float64, complex64, complex128):
    small            m in {8, 16, 32, 48, 64}, n = 64;
    square           m = n in {128, ..., 8192};
    batched          10000 solves of 32 x 32, n = 32;
    linear-attention 4096 solves of 64 x 64 unit lower, n = 128;
    kernel-digits    (real dtypes only) lower Cholesky factor of an RBF kernel on the
                     scikit-learn digits data (1797 x 1797), right-hand sides the one-hot labels.

Results: a table on stdout, and benchmarks/results/bench_<gpu-slug>_<date>.csv / .md (the
slug is "cpu" on the CPU path). A failing case (e.g. out of memory) is reported in the status
column and the run goes on.
"""
from __future__ import annotations

import argparse
import csv
import functools
import gc
import math
import os
import re
import sys
import time
import types
from dataclasses import dataclass
from typing import Optional

import torch

from . import _bench_util as bu

# ----------------------------------------------------------------------------------------------
# Case sets

ALL_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
CASE_NAMES = ("small", "square", "batched", "linear-attention", "kernel-digits")
_CASE_ALIASES = {
    "small": "small",
    "square": "square",
    "batched": "batched",
    "batch": "batched",
    "linear-attention": "linear-attention",
    "linear_attention": "linear-attention",
    "linattn": "linear-attention",
    "la": "linear-attention",
    "kernel-digits": "kernel-digits",
    "kernel": "kernel-digits",
    "digits": "kernel-digits",
    "rbf": "kernel-digits",
}

# sizes: small m list (n fixed), square m list, batched (batch, m, n), linear attention (batch, m, n)
SIZES = {
    "cuda": dict(small=[8, 16, 32, 48, 64], small_n=64, square=[128, 256, 512, 1024, 2048, 4096, 8192],
                 batched=(10000, 32, 32), linattn=(4096, 64, 128)),
    "cuda-quick": dict(small=[16, 64], small_n=64, square=[256, 1024, 4096],
                       batched=(10000, 32, 32), linattn=(4096, 64, 128)),
    "cpu": dict(small=[8, 32, 64], small_n=64, square=[128, 256, 512, 1024],
                batched=(1000, 32, 32), linattn=(256, 64, 128)),
    "cpu-quick": dict(small=[16, 64], small_n=64, square=[128, 512],
                      batched=(1000, 32, 32), linattn=(128, 64, 128)),
}

# rel. error above this flags the case "inaccurate" (inputs have condition number ~5; the
# kernel-digits factor ~1e3): a loose bound meant to catch real bugs, not rounding.
_TOL = {torch.float32: 1e-3, torch.complex64: 1e-3, torch.float64: 1e-10, torch.complex128: 1e-10}

_STICKY = re.compile(
    r"illegal memory access|device-side assert|unspecified launch failure|misaligned address|"
    r"illegal instruction|an illegal|context is destroyed",
    re.I,
)


@dataclass
class Case:
    case: str  # group name (CASE_NAMES)
    m: int
    n: int
    batch: tuple = ()
    unit: bool = False
    upper: bool = False
    left: bool = True
    seed: int = 0
    real_only: bool = False

    @property
    def batch_count(self) -> int:
        return math.prod(self.batch) if self.batch else 1

    @property
    def shape(self) -> str:
        s = f"m={self.m} n={self.n}"
        if self.batch:
            s = f"b={'x'.join(map(str, self.batch))} " + s
        if self.case == "kernel-digits":
            s = "digits " + s
        if self.unit:
            s += " unit"
        return s


def build_cases(names, sizes: dict, seed: int = 0) -> list:
    cases = []
    for name in names:
        if name == "small":
            cases += [Case("small", m, sizes["small_n"], seed=seed + m) for m in sizes["small"]]
        elif name == "square":
            cases += [Case("square", m, m, seed=seed + 7 * m) for m in sizes["square"]]
        elif name == "batched":
            b, m, n = sizes["batched"]
            cases.append(Case("batched", m, n, batch=(b,), seed=seed + 11))
        elif name == "linear-attention":
            b, m, n = sizes["linattn"]
            cases.append(Case("linear-attention", m, n, batch=(b,), unit=True, seed=seed + 13))
        elif name == "kernel-digits":
            cases.append(Case("kernel-digits", 1797, 10, real_only=True, seed=seed))
    return cases


@functools.lru_cache(maxsize=1)
def digits_problem():
    """Lower Cholesky factor L of an RBF kernel on sklearn's digits (float64, CPU), the one-hot
    labels Y, the jitter that made the factorization succeed and the lengthscale."""
    from sklearn.datasets import load_digits  # ships the data, no download

    d = load_digits()
    X = torch.from_numpy(d.data).to(torch.float64)  # 1797 x 64
    y = torch.from_numpy(d.target).long()
    sq = (X * X).sum(1)
    d2 = (sq[:, None] + sq[None, :] - 2.0 * (X @ X.T)).clamp_min_(0.0)
    d2.fill_diagonal_(0.0)
    N = X.shape[0]
    iu = torch.triu_indices(N, N, 1)
    ell2 = d2[iu[0], iu[1]].median().item()  # median heuristic: lengthscale = median distance
    K = torch.exp(-d2 / (2.0 * ell2))
    eye = torch.eye(N, dtype=torch.float64)
    jitter = 1e-3
    while True:
        L, info = torch.linalg.cholesky_ex(K + jitter * eye)
        if int(info) == 0:
            break
        if jitter >= 1.0:
            raise RuntimeError("Cholesky of the digits RBF kernel failed even with jitter 1")
        jitter *= 10.0
    Y = torch.nn.functional.one_hot(y, 10).to(torch.float64)
    return L, Y, jitter, math.sqrt(ell2)


def make_inputs(case: Case, dtype, device):
    if case.case == "kernel-digits":
        L, Y, _, _ = digits_problem()
        return L.to(device=device, dtype=dtype), Y.to(device=device, dtype=dtype)
    A = bu.make_triangular(case.m, batch=case.batch, dtype=dtype, device=device, upper=case.upper,
                           unit=case.unit, seed=case.seed)
    B = bu.make_rhs(case.m, case.n, batch=case.batch, dtype=dtype, device=device, seed=case.seed + 1)
    return A, B


# ----------------------------------------------------------------------------------------------
# One case

COLUMNS = [
    "case", "shape", "dtype", "batch", "m", "n", "left", "upper", "unit", "flops",
    "hsma_us", "torch_us", "speedup", "hsma_gflops", "torch_gflops",
    "hsma_graph_us", "torch_graph_us", "graph_speedup", "hsma_graph_gflops", "torch_graph_gflops",
    "hsma_min_us", "torch_min_us", "hsma_reps", "torch_reps", "graph_calls_hsma", "graph_calls_torch",
    "rel_err", "status", "note",
]


def _short(e: BaseException, limit: int = 160, root: bool = False) -> str:
    """One-line 'Type: message' of e, or with ``root`` of the first exception in e's chain (for a
    failed graph capture: the call that broke the capture, not capture_end's follow-up error)."""
    seen = {id(e)}
    while root:
        nxt = e.__cause__ or e.__context__
        if nxt is None or id(nxt) in seen:
            break
        seen.add(id(nxt))
        e = nxt
    msg = " ".join(str(e).split())
    for cut in ("Search for `", "CUDA kernel errors might be asynchronously", "For debugging consider passing"):
        i = msg.find(cut)
        if i > 0:
            msg = msg[:i].rstrip()
    s = f"{type(e).__name__}: {msg}"
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _ratio(a, b):
    return a / b if (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)) else math.nan


def _base_row(case: Case, dtype) -> dict:
    nan = math.nan
    return dict(
        case=case.case, shape=case.shape, dtype=bu.dtype_name(dtype), batch=case.batch_count,
        m=case.m, n=case.n, left=case.left, upper=case.upper, unit=case.unit,
        flops=bu.trsm_flops(case.m, case.n, batch=case.batch_count, left=case.left, is_complex=dtype.is_complex),
        hsma_us=nan, torch_us=nan, hsma_graph_us=nan, torch_graph_us=nan, hsma_min_us=nan, torch_min_us=nan,
        hsma_reps=0, torch_reps=0, graph_calls_hsma=0, graph_calls_torch=0, rel_err=nan,
    )


def run_case(case: Case, dtype, device: torch.device, cfg) -> dict:
    """Times and checks one (case, dtype); never raises for failures of the solvers."""
    import hsma_trsm

    row = _base_row(case, dtype)
    notes, failed = [], set()
    is_cuda = device.type == "cuda"

    try:
        A, B = make_inputs(case, dtype, device)
    except Exception as e:  # noqa: BLE001
        row.update(status="error", note="inputs: " + _short(e))
        return _finish(row)

    kw = dict(upper=case.upper, left=case.left, unitriangular=case.unit)
    fns = {
        "hsma": lambda: hsma_trsm.solve_triangular(A, B, **kw),
        "torch": lambda: torch.linalg.solve_triangular(A, B, **kw),
    }

    # correctness (also the very first call of each)
    X = {}
    for name in ("torch", "hsma"):
        try:
            X[name] = fns[name]()
        except Exception as e:  # noqa: BLE001
            failed.add(name)
            notes.append(f"{name}: " + _short(e))
    checked = False
    if "hsma" in X and "torch" in X:
        try:
            row["rel_err"] = bu.rel_error(X["hsma"], X["torch"])
            checked = True
        except Exception as e:  # noqa: BLE001
            notes.append("rel_err: " + _short(e))
    X.clear()
    if failed:
        _cleanup(device)

    # timing: isolated calls
    for name in ("hsma", "torch"):
        if name in failed:
            continue
        try:
            if is_cuda:
                t = bu.time_cuda_events(fns[name], warmup=cfg.warmup, target_s=cfg.target_s,
                                        min_reps=cfg.min_reps, max_reps=cfg.max_reps)
            else:
                t = bu.time_cpu(fns[name], warmup=1, target_s=cfg.target_s,
                                min_reps=cfg.min_reps, max_reps=cfg.max_reps)
            row[f"{name}_us"], row[f"{name}_min_us"], row[f"{name}_reps"] = t.median_us, t.min_us, t.reps
        except Exception as e:  # noqa: BLE001
            failed.add(name)
            notes.append(f"{name} timing: " + _short(e))
    if failed:
        _cleanup(device)  # outside the except blocks, so the tracebacks no longer hold tensors

    # timing: CUDA graph replays (GPU-only time)
    if is_cuda and cfg.graph:
        for name in ("hsma", "torch"):
            if name in failed:
                continue
            try:
                t = bu.time_cuda_graph(fns[name], est_us=row[f"{name}_us"], warmup=cfg.warmup,
                                       target_s=cfg.target_s, min_reps=cfg.min_reps, max_reps=cfg.max_reps)
                row[f"{name}_graph_us"], row[f"graph_calls_{name}"] = t.median_us, t.calls_per_sample
            except Exception as e:  # noqa: BLE001
                failed.add(f"graph-{name}")
                notes.append(f"graph({name}): " + _short(e, root=True))

    del A, B, fns
    if failed:
        _cleanup(device)
    tol = _TOL.get(dtype, 1e-3)
    if "hsma" in failed:
        status = "error"
    elif checked and not (row["rel_err"] <= tol):  # NaN counts as inaccurate
        status = "inaccurate"
        notes.append(f"rel_err {row['rel_err']:.2e} > tol {tol:.0e}")
    elif failed:
        status = "partial"
    else:
        status = "ok"
    row.update(status=status, note="; ".join(notes))
    return _finish(row)


def _finish(row: dict) -> dict:
    row["speedup"] = _ratio(row["torch_us"], row["hsma_us"])
    row["graph_speedup"] = _ratio(row["torch_graph_us"], row["hsma_graph_us"])
    for name in ("hsma", "torch"):
        row[f"{name}_gflops"] = bu.gflops(row["flops"], row[f"{name}_us"])
        row[f"{name}_graph_gflops"] = bu.gflops(row["flops"], row[f"{name}_graph_us"])
    row.setdefault("note", "")
    return row


def _cleanup(device):
    gc.collect()
    if device.type == "cuda":
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001
            pass
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------------------------
# Output


def _us(x) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.2f}" if x < 10 else (f"{x:.1f}" if x < 1000 else f"{x:.0f}")


def _gf(x) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.2f}" if x < 10 else (f"{x:.1f}" if x < 1000 else f"{x:.0f}")


def _sp(x) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.2f}x"


def _err(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1e}"


_TABLE = [  # (title, width, formatter)
    ("case", 16, lambda r: r["case"]),
    ("shape", 24, lambda r: r["shape"]),
    ("dtype", 10, lambda r: r["dtype"]),
    ("hsma us", 9, lambda r: _us(r["hsma_us"])),
    ("torch us", 9, lambda r: _us(r["torch_us"])),
    ("speedup", 8, lambda r: _sp(r["speedup"])),
    ("hsma GF/s", 9, lambda r: _gf(r["hsma_gflops"])),
    ("torch GF/s", 10, lambda r: _gf(r["torch_gflops"])),
    ("hsma gr.us", 10, lambda r: _us(r["hsma_graph_us"])),
    ("torch gr.us", 11, lambda r: _us(r["torch_graph_us"])),
    ("gr.spd", 7, lambda r: _sp(r["graph_speedup"])),
    ("rel err", 8, lambda r: _err(r["rel_err"])),
    ("status", 0, lambda r: r["status"] + (f" ({r['note'][:100]})" if r.get("note") else "")),
]


def table_header() -> str:
    h = " ".join(t.ljust(w) if i < 3 else t.rjust(w) for i, (t, w, _) in enumerate(_TABLE[:-1]))
    h += "  " + _TABLE[-1][0]
    return h + "\n" + "-" * len(h)


def table_row(r: dict) -> str:
    cells = []
    for i, (_, w, f) in enumerate(_TABLE[:-1]):
        s = f(r)
        cells.append(s.ljust(w) if i < 3 else s.rjust(w))
    return " ".join(cells) + "  " + _TABLE[-1][2](r)


def _csv_value(v):
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return f"{v:.6g}"
    return v


def write_csv(path: str, rows: list, env: dict) -> None:
    with open(path, "w", newline="") as f:
        gpu = env["gpu"] if env["gpu"] != "none" else f"none (CPU path: {env['cpu']}, {env['threads']} threads)"
        cuda = env["cuda"] if env["hip"] == "none" else f"{env['cuda']} (hip {env['hip']})"
        f.write(f"# gpu: {gpu}\n# torch: {env['torch']}\n# cuda: {cuda}\n# date: {env['date']}\n")
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _csv_value(r.get(k, "")) for k in COLUMNS})


def write_markdown(path: str, rows: list, env: dict, method: str) -> None:
    dev = env["gpu"] if env["gpu"] != "none" else f"CPU ({env['cpu']}, {env['threads']} threads)"
    cuda = f"CUDA {env['cuda']}" if env["hip"] == "none" else f"HIP {env['hip']}"
    lines = [
        f"### hsma_trsm vs torch.linalg.solve_triangular: {dev}, torch {env['torch']}, {cuda}, {env['date']}",
        "",
        method,
        "",
        "| case | shape | dtype | hsma (µs) | torch (µs) | speedup | hsma GFLOP/s | torch GFLOP/s "
        "| hsma graph (µs) | torch graph (µs) | graph speedup | rel. err | status |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in rows:
        status = r["status"]
        if r.get("note") and status != "ok":
            status += ": " + r["note"].replace("|", "\\|")[:120]
        lines.append(
            f"| {r['case']} | {r['shape']} | {r['dtype']} | {_us(r['hsma_us'])} | {_us(r['torch_us'])} "
            f"| {_sp(r['speedup'])} | {_gf(r['hsma_gflops'])} | {_gf(r['torch_gflops'])} "
            f"| {_us(r['hsma_graph_us'])} | {_us(r['torch_graph_us'])} | {_sp(r['graph_speedup'])} "
            f"| {_err(r['rel_err'])} | {status} |"
        )
    lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def geomean(xs):
    xs = [x for x in xs if x is not None and math.isfinite(x) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


# ----------------------------------------------------------------------------------------------
# CLI


def _parse_list(s: Optional[str], parse, what: str) -> list:
    out = []
    for item in (s or "").split(","):
        item = item.strip()
        if not item:
            continue
        v = parse(item)
        if v is None:
            valid = f"; use {', '.join(CASE_NAMES)}" if what == "case" else ""
            raise SystemExit(f"unknown {what} {item!r}{valid}")
        if v not in out:
            out.append(v)
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m hsma_trsm.benchmark",
        description="Time hsma_trsm.solve_triangular against torch.linalg.solve_triangular.",
    )
    p.add_argument("--quick", action="store_true", help="reduced set of sizes")
    p.add_argument("--full", action="store_true", help="the full (GPU) set even on the CPU path (slow)")
    p.add_argument("--cases", default=",".join(CASE_NAMES),
                   help=f"comma-separated subset of {', '.join(CASE_NAMES)} (default: all)")
    p.add_argument("--dtypes", default="float32,float64,complex64,complex128",
                   help="comma-separated dtypes (float32, float64, complex64, complex128; f32/f64/c64/c128)")
    p.add_argument("--out", default=os.path.join("benchmarks", "results"),
                   help="directory for the CSV and Markdown files (default: benchmarks/results)")
    p.add_argument("--no-save", action="store_true", help="do not write the CSV / Markdown files")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N")
    p.add_argument("--no-graph", dest="graph", action="store_false", help="skip the CUDA graph timing")
    p.add_argument("--target-s", type=float, default=None,
                   help="seconds of timed calls per measurement (default 0.2 on CUDA, 0.05 on CPU)")
    p.add_argument("--min-reps", type=int, default=None, help="minimum timed calls (default 5 CUDA, 3 CPU)")
    p.add_argument("--max-reps", type=int, default=None, help="maximum timed calls (default 200 CUDA, 30 CPU)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up calls (CUDA; fewer for slow calls)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--strict", action="store_true", help="exit with status 1 if any case is not ok")
    p.add_argument("--time-budget", type=float, default=None,
                   help="seconds after which the remaining cases are skipped (default: 100 on the CPU path, "
                        "unlimited on CUDA; 0 = unlimited)")
    args = p.parse_args(argv)
    args.cases = _parse_list(args.cases, lambda s: _CASE_ALIASES.get(s.lower()), "case")
    try:
        args.dtypes = _parse_list(args.dtypes, bu.parse_dtype, "dtype")
    except ValueError as e:
        p.error(str(e))
    if not args.cases or not args.dtypes:
        p.error("nothing to run: empty --cases or --dtypes")
    return args


def _run_jobs(bar, rows, device, cfg, budget, t_start, is_cuda):
    """Runs the (case, dtype) jobs of ``bar``, appending one row per job to ``rows``."""
    lost_context = None
    for case, dtype in bar:
        if hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(f"{case.case} {case.shape} {bu.dtype_name(dtype)}")
        if lost_context:
            row = _finish(dict(_base_row(case, dtype), status="skipped",
                               note=f"CUDA context lost earlier ({lost_context})"))
        elif budget > 0 and time.perf_counter() - t_start > budget:
            row = _finish(dict(_base_row(case, dtype), status="skipped",
                               note=f"time budget of {budget:g} s used up (--time-budget 0 for no limit)"))
        else:
            try:
                row = run_case(case, dtype, device, cfg)
            except Exception as e:  # noqa: BLE001 - keep going whatever happens
                row = _finish(dict(_base_row(case, dtype), status="error", note=_short(e)))
            if row["status"] == "error":
                _cleanup(device)
            if is_cuda and row["status"] != "ok" and _STICKY.search(row.get("note", "")):
                lost_context = f"{case.case} {case.shape} {bu.dtype_name(dtype)}"
        rows.append(row)
        bu.log(table_row(row))


def main(argv=None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()

    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda asked for, but torch.cuda.is_available() is False")
        if device.index is not None:
            torch.cuda.set_device(device)
        device = torch.device("cuda", torch.cuda.current_device())
    is_cuda = device.type == "cuda"
    if not is_cuda:
        why = "no CUDA device" if not torch.cuda.is_available() else "--device cpu"
        print(f"{why}: running the CPU path (perf_counter timing, reduced sizes, no CUDA graph numbers)", flush=True)

    cfg = types.SimpleNamespace(  # timing settings
        graph=args.graph,
        warmup=max(1, args.warmup),
        target_s=args.target_s if args.target_s is not None else (0.2 if is_cuda else 0.05),
        min_reps=args.min_reps if args.min_reps is not None else (5 if is_cuda else 3),
        max_reps=args.max_reps if args.max_reps is not None else (200 if is_cuda else 30),
    )

    if is_cuda or args.full:
        set_name = "cuda-quick" if args.quick else "cuda"
    else:
        set_name = "cpu-quick" if args.quick else "cpu"
    cases = build_cases(args.cases, SIZES[set_name], seed=args.seed)
    jobs = [(c, dt) for dt in args.dtypes for c in cases if not (c.real_only and dt.is_complex)]

    env = bu.env_info(device)
    if is_cuda:
        print(f"device: {env['gpu']} (cuda:{device.index}, sm_{env['capability'].replace('.', '')}, "
              f"{env['sm_count']} SMs, {env['gpu_memory_gib']} GiB)")
    else:
        print(f"device: CPU ({env['cpu']}, {env['threads']} threads)")
    print(f"torch {env['torch']}, cuda {env['cuda']}, hip {env['hip']}, hsma_trsm {env['hsma_trsm']} "
          f"(git {env['git']}), date {env['date']}, float32 matmul precision {env['float32_matmul_precision']}")
    if is_cuda:
        try:
            if not torch._C._dispatch_has_kernel_for_dispatch_key("hsma::trsm", "CUDA"):
                print("WARNING: hsma::trsm has no CUDA kernel registered (extension built without CUDA?); "
                      "hsma rows will fail", flush=True)
        except Exception:  # noqa: BLE001 - private API, best effort
            pass
    if any(c.case == "kernel-digits" for c, _ in jobs):
        try:
            _, _, jitter, ell = digits_problem()
            print(f"kernel-digits: RBF lengthscale {ell:.2f} (median heuristic), jitter {jitter:g}")
        except Exception as e:  # noqa: BLE001 - reported per case below
            print(f"kernel-digits: data not available ({_short(e)})")
    if is_cuda:
        method = ("Left, lower, non-unit unless noted. Time = median of isolated calls timed with CUDA events "
                  "(device synchronized before each, launch overhead included); graph = per-call time of N calls "
                  "captured in one CUDA graph (GPU time only). GFLOP/s from m²n flops per solve (x4 complex). "
                  f"speedup = torch / hsma. hsma_trsm {env['hsma_trsm']} (git {env['git']}).")
    else:
        method = ("CPU path (no CUDA device). Left, lower, non-unit unless noted. Time = median of "
                  "time.perf_counter() around single calls. GFLOP/s from m²n flops per solve (x4 complex). "
                  f"speedup = torch / hsma. hsma_trsm {env['hsma_trsm']} (git {env['git']}).")
    print(f"{len(jobs)} cases ({set_name} set); speedup = torch / hsma; 'gr.' = CUDA graph replay per call\n")
    if is_cuda:
        bu.gpu_warmup(0.5)  # clocks up, CUDA / cuBLAS initialised before the first case
    bu.log(table_header())

    budget = args.time_budget if args.time_budget is not None else (0.0 if is_cuda else 100.0)
    rows = []
    bar = bu.progress(jobs, total=len(jobs), desc="bench", disable=args.no_progress)
    try:
        _run_jobs(bar, rows, device, cfg, budget, t_start, is_cuda)
    except KeyboardInterrupt:
        print(f"\ninterrupted: keeping the {len(rows)} finished case(s)", file=sys.stderr)
    if hasattr(bar, "close"):
        bar.close()

    # summary
    print()
    for dt in args.dtypes:
        name = bu.dtype_name(dt)
        sel = [r for r in rows if r["dtype"] == name]
        g = geomean([r["speedup"] for r in sel])
        gg = geomean([r["graph_speedup"] for r in sel])
        bad = sum(r["status"] != "ok" for r in sel)
        extra = f", graph {_sp(gg)}" if is_cuda and cfg.graph else ""
        print(f"geomean speedup {name:<10} {_sp(g)}{extra} over {len(sel)} cases"
              + (f" ({bad} not ok)" if bad else ""))

    if not args.no_save:
        stem = os.path.join(args.out, f"bench_{env['gpu_slug']}_{env['date']}")
        try:
            os.makedirs(args.out, exist_ok=True)
            write_csv(stem + ".csv", rows, env)
            write_markdown(stem + ".md", rows, env, method)
            print(f"\nwrote {stem}.csv and {stem}.md")
        except OSError as e:
            print(f"\ncould not write results: {_short(e)}", file=sys.stderr)
    print(f"total time {time.perf_counter() - t_start:.1f} s")
    not_ok = [r for r in rows if r["status"] != "ok"]
    if not_ok:
        print(f"{len(not_ok)} case(s) not ok: see the status column", file=sys.stderr)
    return 1 if (args.strict and not_ok) else 0


if __name__ == "__main__":
    sys.exit(main())
