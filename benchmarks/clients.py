"""Suite clients: the shapes training code sends, hsma against torch, forward and forward + backward.

Groups (left lower unless said; A from bu.make_triangular: |diag| in [1, 2], off-diagonal randn / sqrt(k)):

    narrow    k x k against k x n, k in {512, ..., 16384}, n in {1, 2, 8, 32}, float32 and float64 (GP, Kalman:
              TRSV-class solves, bound by reading the triangle once);
    variants  upper / lower x left / right x op N / T at k in {1000, 4000}, n in {1, 8}, float32;
    complex   complex64 and complex128 at k in {1000, 4000}, n = 1;
    kalman    a batch of 10000 systems 6 x 6 against 6 x 1, float32 and float64;
    svgp      k in {512, 1024, 2048} against n = 4096 (GPyTorch's SVGP, k inducing points), float32 and float64;
    squares   k = n in {128, ..., 512}, all four dtypes.

Both solvers are called as client code calls them: ``solve_triangular(op(A), B, upper=..., left=...)``
(op(A) = A.mT for op T, a view taken inside the call). The forward runs through run.run_case (rounds of
isolated calls, CUDA-graph replay, the float64 reference check); its ``extra`` hook times forward +
backward on the same A and B: ``torch.autograd.grad(X, (A, B), G)`` with a fixed upstream gradient G,
eager and by graph replay, hsma's gradients checked against torch's. Without a GPU: smaller sizes, no graphs.
"""
from __future__ import annotations

import math
import time
from typing import Callable

import torch

from . import core
from . import output
from . import report as rp
from . import timing as tm
from . import util as bu
from .cases import ALL_DTYPES, TOL, Case
from .report import Col, Table, Target, f_err, f_frac_pct, f_rate, f_us, f_x, ratio
from .tidy import EAGER_GRAPH, Tidy

SUITE = "clients"
GROUPS = ("narrow", "variants", "complex", "kalman", "svgp", "squares")
F32, F64, C64, C128 = torch.float32, torch.float64, torch.complex64, torch.complex128

# Sizes per mode (cases.PLANS' modes). Narrow cases of order BIG_K and above run last, so that a used-up
# time budget skips them, not the rest; the CSV and report keep the order above.
PLANS = {
    "gpu": dict(narrow_k=[512, 1000, 2000, 4000, 8000, 16384], narrow_n=[1, 2, 8, 32], variant_k=[1000, 4000],
                variant_n=[1, 8], complex_k=[1000, 4000], kalman=10000, svgp_k=[512, 1024, 2048], svgp_n=4096,
                squares=[128, 192, 256, 384, 512]),
    "gpu-quick": dict(narrow_k=[1000, 4000, 16384], narrow_n=[1, 8], variant_k=[1000], variant_n=[1],
                      complex_k=[1000], kalman=10000, svgp_k=[1024], svgp_n=4096, squares=[256, 512]),
    "cpu": dict(narrow_k=[256, 1000, 2000], narrow_n=[1, 8, 32], variant_k=[500], variant_n=[1, 8],
                complex_k=[500], kalman=1000, svgp_k=[256], svgp_n=1024, squares=[128, 256]),
    "cpu-quick": dict(narrow_k=[64, 256], narrow_n=[1, 8], variant_k=[64], variant_n=[1], complex_k=[64],
                      kalman=100, svgp_k=[64], svgp_n=256, squares=[128]),
}
BIG_K = 8000

# Per case: forward and forward + backward, each eager and by graph replay, for both solvers (about 0.6 s
# on the H200); core.BUDGETS["gpu"]["clients"] keeps the suite within about 150 s.
TIMING = {
    "gpu": tm.TimingCfg(warmup=2, target_s=0.03, min_reps=6, max_reps=100, max_s=0.3, cap_s=2.0,
                        graph_replay_s=2e-3, graph_max_calls=50, graph_target_s=0.02, graph_min_reps=5,
                        graph_max_reps=30),
    "cpu": tm.TimingCfg(warmup=1, target_s=0.01, min_reps=3, max_reps=20, max_s=0.5, warm_after_s=0.25, cap_s=2.0,
                        graph=False),
}

# Status precedence when the forward's and the backward's statuses are combined (first wins).
_RANK = (rp.ERROR, rp.INACCURATE, rp.PARTIAL, rp.CAPPED, rp.IMPLAUSIBLE, rp.NOISY, rp.OK)


# ----------------------------------------------------------------------------------------------
# Cases


def client_cases(plan: dict, dtypes, seed: int = 0) -> list:
    """(run.Case, dtype) pairs of the suite in report order; dtypes not in ``dtypes`` are left out.
    Case.case holds the group; right solves have m = n right-hand sides and n = k."""
    out = []

    def add(group, m, n, dts, **kw):
        for dt in dts:
            if dt in dtypes:
                out.append((Case(SUITE, group, m, n, seed=seed + 31 * len(out), **kw), dt))

    for dt in (F32, F64):
        for k in plan["narrow_k"]:
            for n in plan["narrow_n"]:
                add("narrow", k, n, (dt,))
    for k in plan["variant_k"]:
        for n in plan["variant_n"]:
            for upper in (False, True):
                for left in (True, False):
                    for trans in ("N", "T"):
                        if not upper and left and trans == "N" and k in plan["narrow_k"] and n in plan["narrow_n"]:
                            continue  # a narrow case
                        add("variants", k if left else n, n if left else k, (F32,), upper=upper, left=left,
                            trans=trans)
    for dt in (C64, C128):
        for k in plan["complex_k"]:
            add("complex", k, 1, (dt,))
    add("kalman", 6, 1, (F32, F64), batch=(plan["kalman"],))
    for dt in (F32, F64):
        for k in plan["svgp_k"]:
            add("svgp", k, plan["svgp_n"], (dt,))
    for dt in ALL_DTYPES:
        for k in plan["squares"]:
            add("squares", k, k, (dt,))
    return out


def run_order(cases: list) -> list:
    """(index, (case, dtype)) of ``cases`` in the order they run: narrow cases of order BIG_K and above last (the
    budget skips them first), smaller orders first within each part."""
    def key(job):
        i, (case, _) = job
        return case.case == "narrow" and case.k >= BIG_K, case.k, i

    return sorted(enumerate(cases), key=key)


def rhs_count(case: Case) -> int:
    """Right-hand sides of a case: B's columns (left) or rows (right)."""
    return case.n if case.left else case.m


def shape_label(case: Case) -> str:
    """'k=4000 n=8', 'b=10000 k=6 n=1', 'k=1000 n=1 right upper op=T'."""
    s = f"k={case.k} n={rhs_count(case)}"
    if case.batch:
        s = f"b={case.batch_count} " + s
    flags = [("right", not case.left), ("upper", case.upper), (f"op={case.trans}", case.trans != "N")]
    return " ".join([s] + [f for f, on in flags if on])


def list_lines(mode: str, dtypes, seed: int = 0) -> list:
    """--list lines of the suite."""
    jobs = client_cases(PLANS[mode], dtypes, seed)
    return [f"{SUITE}: {len(jobs)} cases"] + [f"  {c.case:<16} {shape_label(c):<30} {bu.dtype_name(dt)}"
                                             for c, dt in jobs]


def _dropin(solve):
    """(case, A, B) -> callable: ``solve(op(A), B, upper=, left=, unitriangular=)``, op(A) taken inside the call."""
    def make(case, A, B):  # keywords written out, as client code calls (a **kwargs call costs a builtin more)
        up, left, unit = case.upper != (case.trans != "N"), case.left, case.unit
        if case.trans == "N":
            return lambda: solve(A, B, upper=up, left=left, unitriangular=unit)
        op = (lambda T: T.mT) if case.trans == "T" else (lambda T: T.mH)
        return lambda: solve(op(A), B, upper=up, left=left, unitriangular=unit)
    return make


def contenders() -> tuple:
    """hsma_trsm.solve_triangular (checked) and torch.linalg.solve_triangular, as client code calls them."""
    import hsma_trsm

    return (core.Contender("hsma", _dropin(hsma_trsm.solve_triangular)),
            core.Contender("torch", _dropin(torch.linalg.solve_triangular), checked=False))


# ----------------------------------------------------------------------------------------------
# Forward + backward


def fwd_bwd(device, cfg: tm.TimingCfg, case: Case, dtype, solvers) -> Callable:
    """run_case's ``extra``: times ``torch.autograd.grad(solve(A, B), (A, B), G)`` of each solver on the case's
    A and B (G fixed, the result's shape), eager then (CUDA, every eager time below cfg.graph_max_us) by graph
    replay; hsma's gradients against torch's in ``hsma_grad_rel_err``. Failures and timings go to row['_fb']
    (run_case rewrites status and note after ``extra``; :func:`merge_fwd_bwd` folds them in)."""
    def measure(A, B, row):
        fb = row["_fb"] = dict(timings={}, notes=[], failed=set())
        Ag, Bg = A.detach().requires_grad_(), B.detach().requires_grad_()
        G = bu.make_rhs(case.m, case.n, batch=case.batch, dtype=dtype, device=device, seed=case.seed + 2)
        fns, grads, first = {}, {}, {}
        for c in solvers:
            fwd = c.make(case, Ag, Bg)
            fns[c.name] = fn = (lambda f=fwd: torch.autograd.grad(f(), (Ag, Bg), G))
            try:
                core.sync(device)
                t0 = time.perf_counter()
                grads[c.name] = fn()
                core.sync(device)
                first[c.name] = time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001
                fb["failed"].add(c.name)
                fb["notes"].append(f"{c.name} fwd+bwd: " + core.short(e))
        if "hsma" in grads and "torch" in grads:
            row["hsma_grad_rel_err"] = max(bu.rel_error(h, t) for h, t in zip(grads["hsma"], grads["torch"]))
        grads.clear()
        for c in solvers:
            if c.name in fb["failed"]:
                continue
            try:
                t = tm.time_eager(fns[c.name], device, cfg, first[c.name] >= cfg.warm_after_s, first[c.name])
                fb["timings"][f"{c.name} fwd+bwd"] = t
                tm.record_timing(row, f"{c.name}_fb", t)
            except Exception as e:  # noqa: BLE001
                fb["failed"].add(c.name)
                fb["notes"].append(f"{c.name} fwd+bwd timing: " + core.short(e))
        eager = [row[f"{c.name}_fb_us"] for c in solvers if c.name not in fb["failed"]]
        if device.type == "cuda" and cfg.graph and eager and max(eager) <= cfg.graph_max_us:
            for c in solvers:
                if c.name in fb["failed"]:
                    continue
                try:
                    t = tm.graph_time(fns[c.name], row[f"{c.name}_fb_us"], cfg)
                    row[f"{c.name}_fb_graph_us"], row[f"{c.name}_fb_graph_calls"] = t.median_us, t.calls_per_sample
                except Exception as e:  # noqa: BLE001
                    fb["failed"].add(f"graph-{c.name}")
                    fb["notes"].append(f"graph({c.name} fwd+bwd): " + core.short(e, root=True))
        fns.clear()  # the closures hold A, B and G
    return measure


def merge_fwd_bwd(row: dict, case: Case, dtype, device_type: str) -> dict:
    """Folds row['_fb'] into status and note: hsma failing -> error, gradients off torch's by more than run's
    tolerance -> inaccurate, torch or a graph failing -> partial, else the timing flags (4x the forward's flops
    and bytes: the backward is one more solve and a k x k outer product); the worse of that and the forward's
    status stays."""
    fb = row.pop("_fb", None)
    if fb is None:
        return row
    tol = TOL.get(dtype, 1e-3)
    flag, flag_notes = tm.timing_flags(fb["timings"], device_type, 4 * row["flops"], 4 * core.case_bytes(case, dtype),
                                       case.batch_count)
    notes = fb["notes"] + flag_notes
    err = row.get("hsma_grad_rel_err", math.nan)
    error = "hsma" in fb["failed"]
    off = "torch" not in fb["failed"] and not (err <= tol)
    if off and not error:
        notes.append(f"hsma gradients off torch's by {err:.2e} > tol {tol:.0e}")
    status = core.row_status(error, off, bool(fb["failed"]), flag)
    old = row.get("status") or rp.OK
    rank = {s: i for i, s in enumerate(_RANK)}
    row["status"] = min(old, status, key=lambda s: rank.get(s, 0))
    row["note"] = "; ".join(x for x in [row.get("note", "")] + notes if x)
    return row


# ----------------------------------------------------------------------------------------------
# The suite


_FB_NAMES = ("hsma_fb", "torch_fb")


def blank_row(case: Case, dtype) -> dict:
    """run.base_row plus the suite's columns, unmeasured."""
    row = core.base_row(case, dtype)
    row.update(shape=shape_label(case), k=case.k, rhs=rhs_count(case), hsma_grad_rel_err=math.nan)
    for p in _FB_NAMES:
        row.update({f"{p}_us": math.nan, f"{p}_min_us": math.nan, f"{p}_reps": 0, f"{p}_graph_us": math.nan,
                    f"{p}_graph_calls": 0, f"{p}_spread": math.nan, f"{p}_rounds_us": ""})
    return row


def add_rates(row: dict, case: Case, dtype, copy_gbs: float) -> dict:
    """Speedups (torch / hsma) of the forward and of forward + backward, eager and graph; achieved bandwidth of
    the forward (triangle + B + X bytes over the GPU-only time, else the eager time: bw_basis)."""
    core.solve_rates(row)
    row["fb_speedup"] = ratio(row.get("torch_fb_us"), row.get("hsma_fb_us"))
    row["fb_graph_speedup"] = ratio(row.get("torch_fb_graph_us"), row.get("hsma_fb_graph_us"))
    row["bytes"] = core.case_bytes(case, dtype)
    basis = "graph" if rp.finite(row.get("hsma_graph_us")) else "eager"
    row["bw_basis"], row["copy_gbs"] = basis, copy_gbs
    for p in ("hsma", "torch"):
        row[f"{p}_gbs"] = bu.bandwidth_gbs(row["bytes"], row.get(f"{p}_graph_us" if basis == "graph" else f"{p}_us"))
    row["hsma_bw_frac"] = ratio(row["hsma_gbs"], copy_gbs)
    return row


def _targets() -> list:
    def narrow(r, lo, hi=math.inf):
        return r["case"] == "narrow" and r["rhs"] <= 8 and lo <= r["k"] <= hi

    sq = lambda r: r["case"] == "squares" and 128 <= r["k"] <= 512  # noqa: E731
    fb = [("eager", "fb_speedup"), ("graph", "fb_graph_speedup")]
    every = [("fwd eager", "speedup"), ("fwd graph", "graph_speedup"), ("fwd+bwd eager", "fb_speedup"),
             ("fwd+bwd graph", "fb_graph_speedup")]
    return [
        Target("narrow n <= 8, k >= 2000: >= 5x torch GPU-only", lambda r: narrow(r, 2000),
               [("graph", "graph_speedup")], ">=", 5.0, aggregate=True),
        Target("narrow n <= 8, k >= 2000: >= 3x torch eager", lambda r: narrow(r, 2000), [("eager", "speedup")],
               ">=", 3.0, aggregate=True),
        Target("narrow n <= 8, k = 1000: >= 2x torch eager", lambda r: narrow(r, 1000, 1000),
               [("eager", "speedup")], ">=", 2.0, aggregate=True),
        *[Target(f"{g}: fwd+bwd >= 1.5x torch", lambda r, g=g: r["case"] == g, fb, ">=", 1.5, aggregate=True)
          for g in GROUPS],
        Target("squares 128-512: >= 1.5x torch GPU-only", sq, [("graph", "graph_speedup")], ">=", 1.5,
               aggregate=True),
        Target("squares 128-512: >= 1.0x torch eager", sq, [("eager", "speedup")], ">=", 1.0, aggregate=True),
        Target("no clients value below 1.0x", lambda r: True, every, ">=", 1.0, aggregate=True),
    ]


def summary_lines(rows: list) -> list:
    """Markdown bullets: per group the geometric-mean speedups (fwd, fwd+bwd; eager / GPU-only)."""
    out = []
    for g in GROUPS:
        sel = [r for r in rows if r["case"] == g]
        if sel:
            gm = [f_x(rp.geomean(r.get(key) for r in sel))
                  for key in ("speedup", "graph_speedup", "fb_speedup", "fb_graph_speedup")]
            out.append(f"- {g} ({len(sel)} rows): fwd {gm[0]} eager / {gm[1]} GPU-only; "
                       f"fwd+bwd {gm[2]} eager / {gm[3]} GPU-only")
    return out


def suite_clients(ctx: core.Ctx) -> core.SuiteResult:
    cfg = ctx.timing(SUITE, TIMING["gpu" if ctx.is_cuda else "cpu"])
    copy_gbs = core.logged_copy_gbs(ctx.device)
    solvers = contenders()
    cases = client_cases(PLANS[ctx.mode], ctx.dtypes, ctx.args.seed)
    jobs = run_order(cases)
    table = Table([
        Col("group", 8, lambda r: r["case"], left=True), core.shape_col(26), core.C_DTYPE,
        *core.C_EAGER, core.C_GRAPH[0], core.C_GRAPH[2],
        Col("fb hsma us", 10, lambda r: f_us(r["hsma_fb_us"])),
        Col("fb torch us", 11, lambda r: f_us(r["torch_fb_us"])),
        Col("fb spd", 7, lambda r: f_x(r["fb_speedup"])), Col("fb gr.spd", 9, lambda r: f_x(r["fb_graph_speedup"])),
        Col("GB/s", 7, lambda r: f_rate(r["hsma_gbs"])), Col("%copy", 6, lambda r: f_frac_pct(r["hsma_bw_frac"])),
        Col("rel err", 8, lambda r: f_err(max((e for e in (r["hsma_rel_err"], r["hsma_grad_rel_err"])
                                                 if rp.finite(e)), default=math.nan))),
        core.C_STATUS,
    ])

    def run_one(job):
        _, (case, dt) = job
        row = core.run_case(case, dt, ctx.device, cfg, solvers, extra=fwd_bwd(ctx.device, cfg, case, dt, solvers))
        row = {**blank_row(case, dt), **row, "shape": shape_label(case)}
        row = add_rates(merge_fwd_bwd(row, case, dt, ctx.device.type), case, dt, copy_gbs)
        if case.k >= 4096:
            core.cleanup(ctx.device)  # hundreds of MB to GB per case: give the memory back
        return row

    def skipped(job):
        _, (case, dt) = job
        return add_rates(blank_row(case, dt), case, dt, copy_gbs)

    done = core.run_jobs(ctx, SUITE, jobs, table, run_one, skipped)
    rows = [row for _, row in sorted(zip((i for i, _ in jobs), done), key=lambda p: p[0])]
    extra_md = summary_lines(rows)
    for line in extra_md:
        output.log("  " + line[2:])
    extra_md = (["Geometric means of torch / hsma per group:", ""] + extra_md + ["",
                f"Copy bandwidth: **{f_rate(copy_gbs)} GB/s** (`dst.copy_(src)`, 2 x bytes / median time)."])
    cols = (core.BASE_COLS + ["k", "rhs", "hsma_us", "torch_us", "speedup", "hsma_graph_us", "torch_graph_us",
                        "graph_speedup", "hsma_fb_us", "torch_fb_us", "fb_speedup", "hsma_fb_graph_us",
                        "torch_fb_graph_us", "fb_graph_speedup", "bytes", "bw_basis", "hsma_gbs", "torch_gbs",
                        "copy_gbs", "hsma_bw_frac"]
            + [f"{p}_{s}" for s in ("min_us", "reps", "graph_calls") for p in ("hsma", "torch", *_FB_NAMES)]
            + ["hsma_rel_err", "torch_rel_err", "hsma_grad_rel_err", "status", "note", "rounds"]
            + [f"{p}_{s}" for s in ("spread", "rounds_us") for p in ("hsma", "torch", *_FB_NAMES)])
    method = ("Shapes from training code (GPyTorch exact GP and SVGP, Kalman filters), left lower "
              "unless the shape says right / upper / op=T; k = order of A, n = right-hand sides, b = batch. Both "
              "solvers called as client code calls them, `solve_triangular(op(A), B, ...)` (op(A) = A.mT, a view "
              "taken in the call). fwd: the solve; fb (fwd+bwd): `torch.autograd.grad(X, (A, B), G)` with a fixed "
              "G, hsma's gradients checked against torch's (rel err shows the larger of the forward's and the "
              "gradients' errors). Eager and GPU-only (graph) times as in small; graph only where every eager "
              f"time of the measurement is below {cfg.graph_max_us / 1000:g} ms. GB/s: the triangle k(k+1)/2, B "
              "and X once each over hsma's GPU-only forward time (eager where there is none), %copy of the copy "
              "bandwidth measured in this run. Narrow cases of order >= "
              f"{BIG_K} run last, so the suite's time budget skips them first.")
    return core.SuiteResult(rows, cols, table, "clients: shapes training code sends, forward and backward", method,
                            _targets(), extra_md,
                            extra_header={"copy_gbs": f"{copy_gbs:.1f}" if rp.finite(copy_gbs) else "nan"},
                            tidy=Tidy(modes=EAGER_GRAPH + (("eager_fwd_bwd", "{impl}_fb_us"),
                                                           ("graph_fwd_bwd", "{impl}_fb_graph_us"))))
