"""The blocked solves: suites large (m = n up to 16384; issue 5), ablation (the table's NB against a fixed NB) and
split (kernel time by kind; paper Table 3)."""
from __future__ import annotations

import math
import time

import torch

from . import core
from . import output
from . import report as rp
from . import timing as tm
from . import util as bu
from .cases import PLANS, TOL, Case, case_lines, dt_jobs, hsma_call, make_inputs
from .report import Col, Table, Target, f_err, f_pct, f_rate, f_us, f_x, ratio
from .tidy import Tidy

# ----------------------------------------------------------------------------------------------
# Suite: large (issue 5)


def large_cases(plan: dict, seed: int = 0) -> list:
    out = [Case("large", "square", m, m, seed=seed + 7 * m) for m in plan["large"]]
    s = plan["large_spot"]
    out += [
        Case("large", "right", s, s, left=False, seed=seed + 1),
        Case("large", "upper", s, s, upper=True, seed=seed + 2),
        Case("large", "trans-T", s, s, trans="T", seed=seed + 3),
        Case("large", "trans-C", s, s, trans="C", seed=seed + 4),
    ]
    if plan.get("digits"):
        out.append(Case("large", "kernel-digits", 1797, 10, digits=True))
    return out


def square_cases(suite: str, plan: dict, seed: int = 0) -> list:
    """Square left-lower solves of the suite's sizes (ablation, split)."""
    return [Case(suite, "square", m, m, seed=seed + 7 * m) for m in plan[suite]]


def list_large(mode: str, dtypes, seed: int = 0) -> list:
    return case_lines("large", dt_jobs(large_cases(PLANS[mode], seed), dtypes))


def list_ablation(mode: str, dtypes, seed: int = 0) -> list:
    return case_lines("ablation", dt_jobs(square_cases("ablation", PLANS[mode], seed), dtypes))


def list_split(mode: str, dtypes, seed: int = 0) -> list:
    return case_lines("split", dt_jobs(square_cases("split", PLANS[mode], seed), dtypes))


def suite_large(ctx: core.Ctx) -> core.SuiteResult:
    cfg = ctx.timing("large")
    jobs = dt_jobs(large_cases(ctx.plan, ctx.args.seed), ctx.dtypes)
    gemm_cache = {}
    table = Table([
        core.C_CASE, core.shape_col(24), core.C_DTYPE,
        *core.C_EAGER, core.C_GRAPH[2],
        Col("hsma TF/s", 9, lambda r: f_rate(r["hsma_tflops"])),
        Col("torch TF/s", 10, lambda r: f_rate(r["torch_tflops"])),
        Col("GEMM TF/s", 9, lambda r: f_rate(r["gemm_tflops"])), Col("%GEMM", 6, lambda r: f_pct(r["hsma_gemm_pct"])),
        Col("NB", 9, lambda r: f"{r['nb']} {r['variant'][:3]}" if r.get("nb") else "-"),
        Col("rel err", 8, lambda r: f_err(r["hsma_rel_err"])),
        core.C_STATUS,
    ])

    def gemm(case, dt):
        def measure(A, B, row):
            key = (case.m, case.n, case.k, case.digits, dt)  # square right solves share the left one's GEMM
            if key not in gemm_cache:
                fn = (lambda: torch.matmul(A, B)) if case.left else (lambda: torch.matmul(B, A))
                core.sync(ctx.device)
                t0 = time.perf_counter()
                fn()
                core.sync(ctx.device)
                first = time.perf_counter() - t0
                t = tm.time_eager(fn, ctx.device, cfg, first >= cfg.warm_after_s, first)
                gemm_cache[key] = (t.median_us, t.reps)
            row["gemm_us"], row["gemm_reps"] = gemm_cache[key]
        return measure

    def add(row, case, dt):
        core.solve_rates(row, unit="tflops")
        k = case.k
        gf = bu.gemm_flops(case.m, k, case.n, is_complex=dt.is_complex)  # A @ B (left) or B @ A (right)
        row["gemm_flops"] = gf
        row["gemm_tflops"] = bu.tflops(gf, row.get("gemm_us", math.nan))
        for p in ("hsma", "torch"):
            row[f"{p}_gemm_pct"] = 100.0 * ratio(row[f"{p}_tflops"], row["gemm_tflops"])
        row.setdefault("nb", "")
        row.setdefault("variant", "")
        if ctx.is_cuda and not row["nb"]:
            try:
                rhs_cols = (case.n if case.left else case.m) * math.prod(case.batch)
                row["nb"], row["variant"], src = core.blocking_choice(dt, k, overrides=core.TABLE_PLAN,
                                                                      rhs_cols=rhs_cols)
                row["nb_source"] = core.source_short(src)
            except Exception as e:  # noqa: BLE001
                row["note"] = (row.get("note", "") + "; " if row.get("note") else "") + "lookup: " + core.short(e)
        return row

    def run_one(job):
        case, dt = job
        row = core.run_case(case, dt, ctx.device, cfg, extra=gemm(case, dt))
        row = add(row, case, dt)
        core.cleanup(ctx.device)  # multi-GB tensors: give the memory back between cases
        return row

    def skipped(job):
        case, dt = job
        return add(dict(core.base_row(case, dt), gemm_us=math.nan), case, dt)

    rows = core.run_jobs(ctx, "large", jobs, table, run_one, skipped)
    gemm_cache.clear()
    core.cleanup(ctx.device)
    spd = [("eager", "speedup"), ("graph", "graph_speedup")]
    targets = [
        Target("every size >= torch (eager and graph)", lambda r: r["case"] == "square", spd, ">=", 1.0,
               aggregate=True),
        Target("4096 >= 1.5x torch (float32, float64)",
               lambda r: r["case"] == "square" and r["m"] == 4096 and r["dtype"] in ("float32", "float64"),
               spd, ">=", 1.5),
        Target("16384 >= 90% of the GEMM rate", lambda r: r["case"] == "square" and r["m"] == 16384,
               [("", "hsma_gemm_pct")], ">=", 90.0, fmt=f_pct),
    ]
    cols = (core.BASE_COLS + core.timing_cols() + ["hsma_tflops", "torch_tflops", "hsma_graph_tflops",
                                      "torch_graph_tflops", "gemm_flops", "gemm_us", "gemm_reps", "gemm_tflops",
                                      "hsma_gemm_pct", "torch_gemm_pct", "nb", "variant", "nb_source"]
            + core.tail_cols())
    method = ("Square solves (m = n), left lower unless noted; kernel-digits: the Cholesky factor of an RBF kernel "
              "on sklearn's digits (1797 x 1797) against its one-hot labels (real dtypes). TFLOP/s from m²n flops "
              "(x4 complex). GEMM: torch.matmul of the same A (m x m) and B (m x n) in the same run, 2m²n flops; "
              "%GEMM = hsma's TFLOP/s / the GEMM's. Slow calls are timed fewer times (at least one sample after a "
              f"warm call, about {cfg.max_s:g} s per measurement at most); graph times only where every eager time "
              f"is below {cfg.graph_max_us / 1000:g} ms. NB / variant: the block plan the solve runs "
              "(the block-size table's row and the rules after it; hsma_trsm._ops.block_plan).")
    return core.SuiteResult(rows, cols, table, "large: blocked solves, m = n up to 16384 (issue 5)", method, targets,
                            tidy=Tidy(impls=("hsma", "torch", "gemm")))


# ----------------------------------------------------------------------------------------------
# Suite: ablation (issue 5; paper Fig. 11-12, Table 3)

FIXED_NB = 128


def suite_ablation(ctx: core.Ctx) -> core.SuiteResult:
    cfg = ctx.timing("ablation")
    adaptive = core.Contender("adaptive", hsma_call, overrides=core.TABLE_PLAN)
    fixed = core.Contender("fixed", hsma_call, overrides={**core.TABLE_PLAN, "nb": FIXED_NB})
    jobs = dt_jobs(square_cases("ablation", ctx.plan, ctx.args.seed), ctx.dtypes)
    names = ("adaptive", "fixed")
    table = Table([
        core.shape_col(16), core.C_DTYPE,
        Col("NB adapt.", 14, lambda r: f"{r['nb_adaptive']} {r['variant_adaptive']}" if r.get("nb_adaptive") else "-"),
        Col("NB fixed", 14, lambda r: f"{r['nb_fixed']} {r['variant_fixed']}" if r.get("nb_fixed") else "-"),
        Col("adapt. us", 10, lambda r: f_us(r["adaptive_us"])), Col("fixed us", 10, lambda r: f_us(r["fixed_us"])),
        Col("fixed/adapt", 11, lambda r: f_x(r["speedup"])), Col("gr.fix/ad", 9, lambda r: f_x(r["graph_speedup"])),
        Col("adapt TF/s", 10, lambda r: f_rate(r["adaptive_tflops"])),
        Col("fixed TF/s", 10, lambda r: f_rate(r["fixed_tflops"])),
        Col("rel err", 8, lambda r: f_err(max(r["adaptive_rel_err"], r["fixed_rel_err"]))
            if rp.finite(r["adaptive_rel_err"]) and rp.finite(r["fixed_rel_err"]) else "-"),
        core.C_STATUS,
    ])

    def add(row, case, dt):
        row["speedup"] = ratio(row.get("fixed_us"), row.get("adaptive_us"))
        row["graph_speedup"] = ratio(row.get("fixed_graph_us"), row.get("adaptive_graph_us"))
        for p in names:
            row[f"{p}_tflops"] = bu.tflops(row["flops"], row.get(f"{p}_us", math.nan))
        for key in ("nb_adaptive", "variant_adaptive", "nb_source", "nb_fixed", "variant_fixed"):
            row.setdefault(key, "")
        if ctx.is_cuda and not row["nb_adaptive"]:
            try:
                row["nb_adaptive"], row["variant_adaptive"], src = core.blocking_choice(dt, case.k,
                                                                                   overrides=adaptive.overrides)
                row["nb_source"] = core.source_short(src)
                row["nb_fixed"], row["variant_fixed"], _ = core.blocking_choice(dt, case.k, overrides=fixed.overrides)
            except Exception as e:  # noqa: BLE001
                row["note"] = (row.get("note", "") + "; " if row.get("note") else "") + "lookup: " + core.short(e)
        return row

    def run_one(job):
        case, dt = job
        row = add(core.run_case(case, dt, ctx.device, cfg, contenders=(adaptive, fixed)), case, dt)
        core.cleanup(ctx.device)
        return row

    def skipped(job):
        case, dt = job
        return add(core.base_row(case, dt, names), case, dt)

    rows = core.run_jobs(ctx, "ablation", jobs, table, run_one, skipped)
    for dt in ctx.dtypes:
        sel = [r for r in rows if r["dtype"] == bu.dtype_name(dt)]
        if sel:
            output.log(f"  geomean fixed/adaptive time {bu.dtype_name(dt):<10} "
                       f"{f_x(rp.geomean(r['speedup'] for r in sel))}"
                   f" over {len(sel)} sizes")
    cols = (core.BASE_COLS + ["nb_adaptive", "variant_adaptive", "nb_source", "nb_fixed", "variant_fixed"]
            + core.timing_cols(names)
            + ["adaptive_tflops", "fixed_tflops"] + core.tail_cols(names))
    extra = "" if ctx.is_cuda else " CPU path: LAPACK, no blocking, so NB has no effect and is not looked up."
    method = (f"hsma alone, square left-lower solves: the block-size table's NB (adaptive; no NB forced) "
              f"against NB = {FIXED_NB} forced (fixed; the override nb), the table's variant for both. "
              "No torch here: fixed/adapt = fixed time / adaptive time (> 1: the adaptive choice is faster; the "
              "CSV's speedup column). Timing as in large." + extra)
    return core.SuiteResult(rows, cols, table, f"ablation: adaptive NB vs fixed NB = {FIXED_NB} (issue 5)", method,
                            tidy=Tidy(impls=names, baseline="fixed", headline="adaptive"))


# ----------------------------------------------------------------------------------------------
# Suite: split (issue 5; paper Table 3)

_SPLIT_CATS = bu.KERNEL_CATEGORIES  # inverse, small, gemm, other
# The long CSV: hsma's call time (eager), its summed kernel time (kernels) and each kind's share of it (modes named
# by the kind); no ratio (one implementation).
SPLIT_TIDY = Tidy(impls=("hsma",), baseline=None,
                  modes=(("eager", "call_us"), ("kernels", "kernel_us")) + tuple((c, f"{c}_us") for c in _SPLIT_CATS))


def suite_split(ctx: core.Ctx) -> core.SuiteResult:
    cfg = ctx.timing("split")
    jobs = dt_jobs(square_cases("split", ctx.plan, ctx.args.seed), ctx.dtypes)
    table = Table([
        core.shape_col(16), core.C_DTYPE,
        Col("call us", 9, lambda r: f_us(r["call_us"])), Col("kernel us", 9, lambda r: f_us(r["kernel_us"])),
        Col("inverse", 16, lambda r: f"{f_pct(r['inverse_pct'], 1)} {f_us(r['inverse_us'])}"),
        Col("gemm", 16, lambda r: f"{f_pct(r['gemm_pct'], 1)} {f_us(r['gemm_us'])}"),
        Col("small", 16, lambda r: f"{f_pct(r['small_pct'], 1)} {f_us(r['small_us'])}"),
        Col("other", 16, lambda r: f"{f_pct(r['other_pct'], 1)} {f_us(r['other_us'])}"),
        Col("kern/call", 9, lambda r: f"{r['kernels']:.0f}" if rp.finite(r["kernels"]) else "-"),
        Col("rel err", 8, lambda r: f_err(r["hsma_rel_err"])),
        core.C_STATUS,
    ])

    def blank(case, dt):
        row = dict(core.base_row(case, dt, ("hsma",)), call_us=math.nan, kernel_us=math.nan, kernels=math.nan,
                   gap_us=math.nan, profiled_calls=0, top_other="", nb="", variant="", activity="")
        for c in _SPLIT_CATS:
            row[f"{c}_us"] = row[f"{c}_pct"] = math.nan
        return row

    def run_one(job):
        case, dt = job
        row = blank(case, dt)
        notes = []
        A, B = make_inputs(case, dt, ctx.device)
        fn = hsma_call(case, A, B)
        try:
            core.sync(ctx.device)
            t0 = time.perf_counter()
            X = fn()
            core.sync(ctx.device)
            first = time.perf_counter() - t0
            ref, select = bu.reference_subset(A, B)
            row["hsma_rel_err"] = bu.rel_error(select(X), ref)
            del X, ref
            t = tm.time_eager(fn, ctx.device, cfg, first >= cfg.warm_after_s, first)
            tm.record_timing(row, "hsma", t)
            row["call_us"] = t.median_us
            flag, flag_notes = tm.timing_flags({"hsma": t}, ctx.device.type, row["flops"], core.case_bytes(case, dt))
            notes += flag_notes
            calls = 1 if t.median_us > 20000 else 5
            kernels = bu.profile_kernels(fn, ctx.device, calls=calls)
            row.update(bu.split_kernel_times(kernels, calls=calls))
            row["profiled_calls"] = calls
            row["activity"] = "cuda kernels" if ctx.is_cuda else "cpu ops (self time)"
            row["gap_us"] = row["call_us"] - row["kernel_us"]
            if ctx.is_cuda:
                row["nb"], row["variant"], _ = core.blocking_choice(dt, case.k, overrides=core.TABLE_PLAN)
            if not kernels:
                notes.append("the profiler recorded no device activity")
            tol = TOL.get(dt, 1e-3)
            if not (row["hsma_rel_err"] <= tol):
                notes.append(f"rel_err {row['hsma_rel_err']:.2e} > tol {tol:.0e}")
                row["status"] = rp.INACCURATE
            else:
                row["status"] = flag if kernels else rp.PARTIAL
        except Exception as e:  # noqa: BLE001
            row["status"] = rp.ERROR
            notes.append(core.short(e))
        row["note"] = "; ".join(notes)
        del A, B, fn
        core.cleanup(ctx.device)
        return row

    def skipped(job):
        return blank(*job)

    rows = core.run_jobs(ctx, "split", jobs, table, run_one, skipped)
    cols = (["suite", "case", "shape", "dtype", "m", "n", "flops", "call_us", "hsma_reps", "profiled_calls", "activity",
             "kernel_us", "kernels"] + [f"{c}_us" for c in _SPLIT_CATS] + [f"{c}_pct" for c in _SPLIT_CATS]
            + ["gap_us", "nb", "variant", "top_other", "hsma_rel_err", "status", "note", "rounds", "hsma_spread",
               "hsma_rounds_us"])
    if ctx.is_cuda:
        method = ("hsma alone, square left-lower solves. torch.profiler (CPU + CUDA activities) over 5 calls (1 above "
                  "20 ms), each synchronized; kernel (and memcpy/memset) times summed by name per call: inverse = "
                  "'diag_inverse', small = 'small_solve' / 'small_pipeline', gemm = cuBLAS/CUTLASS names (gemm, gemv, "
                  "cutlass, xmma, nvjet, splitKreduce), other = the rest (top_other names them). Percentages are of "
                  "the summed kernel time; call us = the case's time outside the profiler (median of round medians "
                  "of isolated event-timed calls); gap = call - "
                  "kernel time (launch gaps, host work).")
    else:
        method = ("CPU path: no kernels; the profiler's CPU ops are summed by self time with the same name rules "
                  "(so nearly everything is 'other': LAPACK runs inside aten::linalg_solve_triangular).")
    return core.SuiteResult(rows, cols, table, "split: where the time goes (issue 5)", method, tidy=SPLIT_TIDY)
