"""Suites small (single solves, m <= 64; issue 3) and batched (batches of small systems; issue 4)."""
from __future__ import annotations

import math

import torch

from . import core
from . import output
from . import report as rp
from . import util as bu
from .cases import PLANS, Case, case_lines, dt_jobs, hsma_call
from .report import Col, Table, Target, f_err, f_frac_pct, f_rate, f_us, f_x, ratio
from .tidy import Tidy

# ----------------------------------------------------------------------------------------------
# Suite: small (issue 3)


def small_cases(plan: dict, dtypes, seed: int = 0) -> list:
    """(case, dtype) jobs of the small suite: single solves, the spot checks, the kernel ablation."""
    jobs = []
    cases = [Case("small", "single", m, n, seed=seed + 131 * m + n) for m in plan["small_m"] for n in plan["small_n"]]
    s = plan["spot"]
    spots = [
        Case("small", "upper", s, s, upper=True, seed=seed + 1),
        Case("small", "right", s, s, left=False, seed=seed + 2),
        Case("small", "trans-T", s, s, trans="T", seed=seed + 3),
        Case("small", "trans-C", s, s, trans="C", seed=seed + 4),
        Case("small", "unit", s, s, unit=True, seed=seed + 5),
    ]
    for dt in dtypes:
        jobs += dt_jobs(cases + spots, [dt])
    # The pipeline kernel is in the build only with HSMA_TRSM_ABLATION=1 (setup.py; scripts/gpu_run.sh sets it).
    if torch.complex128 in dtypes and _ablation_built():
        for kern in ("pipeline", "columns", "segments"):
            jobs.append((Case("small", "kernel-ablation", s, s, small_kernel=kern, seed=seed + 7), torch.complex128))
    return jobs


def _ablation_built() -> bool:
    import hsma_trsm  # noqa: F401 - loads the library (torch.ops.hsma)

    return torch.ops.hsma._ablation_built()


def _small_hsma_forced(kernel: str) -> core.Contender:
    return core.Contender("hsma", hsma_call, overrides={"small_kernel": kernel})


def list_small(mode: str, dtypes, seed: int = 0) -> list:
    return case_lines("small", small_cases(PLANS[mode], dtypes, seed))


def suite_small(ctx: core.Ctx) -> core.SuiteResult:
    cfg = ctx.timing("small")
    jobs = small_cases(ctx.plan, ctx.dtypes, ctx.args.seed)
    table = Table([
        core.C_CASE, core.shape_col(22), core.C_DTYPE,
        *core.C_EAGER, *core.C_GRAPH,
        Col("hsma GF/s", 9, lambda r: f_rate(r["hsma_gflops"])),
        Col("rel err", 8, lambda r: f_err(r["hsma_rel_err"])),
        core.C_STATUS,
    ])

    def run_one(job):
        case, dt = job
        hsma = _small_hsma_forced(case.small_kernel) if case.small_kernel else core.HSMA
        contenders = (hsma, core.TORCH)
        row = core.run_case(case, dt, ctx.device, cfg, contenders)
        row["small_kernel"] = case.small_kernel or ""
        return core.solve_rates(row)

    def skipped(job):
        case, dt = job
        return core.solve_rates(dict(core.base_row(case, dt), small_kernel=case.small_kernel or ""))

    rows = core.run_jobs(ctx, "small", jobs, table, run_one, skipped)
    # pipeline ablation: each forced kernel's time over the pipeline's (> 1: the pipeline is faster)
    abl = {r["small_kernel"]: r for r in rows if r["case"] == "kernel-ablation"}
    auto = [r for r in rows if r["case"] == "single" and r["m"] == r["n"] == ctx.plan["spot"]
            and r["dtype"] == "complex128"]
    if abl and auto:  # the launcher's own choice (small_kernel not forced) is the single-solve row
        abl["auto (unset)"] = auto[0]
    pipe = abl.get("pipeline")
    for r in abl.values():
        r["vs_pipeline"] = ratio(r["hsma_us"], pipe["hsma_us"]) if pipe else math.nan
        r["vs_pipeline_graph"] = ratio(r["hsma_graph_us"], pipe["hsma_graph_us"]) if pipe else math.nan
    extra_md = [] if _ablation_built() else [
        "Small-kernel ablation skipped: the pipeline kernel is not built (build with HSMA_TRSM_ABLATION=1)."]
    if abl:
        extra_md = ["Small-kernel ablation (m = n = 64, complex128; the override small_kernel forces a kernel; "
                    "ratio = that kernel's time / the pipeline's, > 1 means the pipeline is faster):", ""]
        extra_md += [f"- {k}: eager {f_us(r['hsma_us'])} us ({f_x(r['vs_pipeline'])}), graph "
                     f"{f_us(r['hsma_graph_us'])} us ({f_x(r['vs_pipeline_graph'])}); {rp.status_text(r)}"
                     for k, r in abl.items()]
        for line in extra_md[2:]:
            output.log("  " + line[2:])
    is64 = lambda r: r["case"] == "single" and r["m"] == 64 and r["n"] == 64  # noqa: E731
    targets = [
        Target("m=n=64 single solve >= 3x torch (eager)", is64, [("eager", "speedup")], ">=", 3.0),
        Target("m=n=64 GPU-only (graph) time <= 5 us", is64, [("graph", "hsma_graph_us")], "<=", 5.0,
               fmt=lambda v: f_us(v) + " us"),
        Target("no case slower than torch (eager and graph)", lambda r: r["case"] != "kernel-ablation",
               [("eager", "speedup"), ("graph", "graph_speedup")], ">=", 1.0, aggregate=True),
    ]
    cols = (core.BASE_COLS + core.timing_cols()
            + ["hsma_gflops", "torch_gflops", "hsma_graph_gflops", "torch_graph_gflops", "small_kernel", "vs_pipeline",
               "vs_pipeline_graph"] + core.tail_cols())
    method = ("Single solves (no batch), left lower non-unit unless the case says otherwise; trans cases call "
              "hsma_trsm.trsm(trans=...) and torch on A.mT / A.mH. GFLOP/s from m²n flops (mn² right; x4 complex).")
    return core.SuiteResult(rows, cols, table, "small: single solves, m <= 64 (issue 3)", method, targets, extra_md,
                            tidy=Tidy())


# ----------------------------------------------------------------------------------------------
# Suite: batched (issue 4)


def batched_cases(plan: dict, seed: int = 0) -> list:
    out = []
    for i, (label, b, m, n, unit, bcast) in enumerate(plan["batched"]):
        out.append(Case("batched", label, m, n, batch=(b,), a_batch=() if bcast else None, unit=unit,
                        seed=seed + 17 * i + m))
    return out


def list_batched(mode: str, dtypes, seed: int = 0) -> list:
    return case_lines("batched", dt_jobs(batched_cases(PLANS[mode], seed), dtypes))


def suite_batched(ctx: core.Ctx) -> core.SuiteResult:
    cfg = ctx.timing("batched")
    copy_gbs, copy_t, copy_bytes = math.nan, None, 0
    try:
        copy_gbs, copy_t, copy_bytes = bu.copy_bandwidth(ctx.device)
        output.log(f"copy bandwidth: {f_rate(copy_gbs)} GB/s (copy_ of {copy_bytes / 2**20:.0f} MiB, "
               f"median {f_us(copy_t.median_us)} us over {copy_t.reps}, 2x the bytes counted)")
    except Exception as e:  # noqa: BLE001
        output.log(f"copy bandwidth: not measured ({core.short(e)})")
    core.cleanup(ctx.device)
    jobs = dt_jobs(batched_cases(ctx.plan, ctx.args.seed), ctx.dtypes)
    table = Table([
        core.C_CASE, core.shape_col(24), core.C_DTYPE,
        *core.C_EAGER, *core.C_GRAPH,
        Col("hsma GF/s", 9, lambda r: f_rate(r["hsma_graph_gflops"] if rp.finite(r["hsma_graph_gflops"])
                                             else r["hsma_gflops"])),
        Col("GB/s", 7, lambda r: f_rate(r["hsma_gbs"])), Col("%copy", 6, lambda r: f_frac_pct(r["hsma_bw_frac"])),
        Col("rel err", 8, lambda r: f_err(r["hsma_rel_err"])),
        core.C_STATUS,
    ])

    def add_bw(row, case, dt):
        row["bytes"] = bu.trsm_bytes(case.m, case.n, itemsize=dt.itemsize, batch=case.batch_count,
                                     a_batch=case.a_count, left=case.left, unit=case.unit)
        row["copy_gbs"] = copy_gbs
        basis = "graph" if rp.finite(row.get("hsma_graph_us")) else "eager"
        row["bw_basis"] = basis
        for p in ("hsma", "torch"):
            us = row.get(f"{p}_graph_us") if basis == "graph" else row.get(f"{p}_us")
            if basis == "graph" and not rp.finite(us):
                us = math.nan
            row[f"{p}_gbs"] = bu.bandwidth_gbs(row["bytes"], us)
            row[f"{p}_bw_frac"] = ratio(row[f"{p}_gbs"], copy_gbs)
        return row

    def run_one(job):
        case, dt = job
        return add_bw(core.solve_rates(core.run_case(case, dt, ctx.device, cfg)), case, dt)

    def skipped(job):
        case, dt = job
        return add_bw(core.solve_rates(core.base_row(case, dt)), case, dt)

    rows = core.run_jobs(ctx, "batched", jobs, table, run_one, skipped)
    sq = lambda r: r["case"] == "batched" and r["m"] in (32, 64) and r["n"] == r["m"]  # noqa: E731
    spd = [("eager", "speedup"), ("graph", "graph_speedup")]
    targets = [
        Target("32x32 / 64x64 batches >= 60% of copy bandwidth", sq, [("", "hsma_bw_frac")], ">=", 0.6,
               fmt=f_frac_pct),
        Target("32x32 / 64x64 batches >= 4x torch", sq, spd, ">=", 4.0),
        Target("linear attention >= 4x torch (float32)",
               lambda r: r["case"] == "linear-attention" and r["dtype"] == "float32", spd, ">=", 4.0),
        Target("batch of 256x256 >= 1.5x torch", lambda r: r["case"] == "batched" and r["m"] == 256, spd, ">=", 1.5),
        Target("none slower than torch (eager and graph)", lambda r: True, spd, ">=", 1.0, aggregate=True),
    ]
    cols = (core.BASE_COLS + core.timing_cols() + ["hsma_gflops", "torch_gflops", "hsma_graph_gflops",
                                      "torch_graph_gflops", "bytes", "bw_basis", "hsma_gbs", "torch_gbs", "copy_gbs",
                                      "hsma_bw_frac", "torch_bw_frac"] + core.tail_cols())
    l2 = ctx.env.get("l2_cache_mib")
    method = ("Batches (batch = b), left lower; linear-attention: unit lower, n = 2m; broadcast-A: one A for the "
              "whole batch of B. bytes = A's triangle read once per distinct matrix + B read once + X written once; "
              "GB/s from the GPU-only (graph) time where measured (bw_basis), % of the copy bandwidth measured in "
              "this run" + (f"; working sets below the {l2:g} MiB L2 cache can exceed 100%" if l2 else "") + ".")
    extra_md = [f"Copy bandwidth: **{f_rate(copy_gbs)} GB/s** (`dst.copy_(src)` of {copy_bytes / 2**20:.0f} MiB, "
                f"2 x bytes / median time" + (f" {f_us(copy_t.median_us)} us" if copy_t else "") + ")."]
    return core.SuiteResult(rows, cols, table, "batched: batches of small systems (issue 4)", method, targets, extra_md,
                            extra_header={"copy_gbs": f"{copy_gbs:.1f}" if rp.finite(copy_gbs) else "nan"},
                            tidy=Tidy())
