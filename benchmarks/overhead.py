"""Suite overhead: host time per call issued back to back (hsma's entry points, torch, torch.add as the floor)."""
from __future__ import annotations

import math

import torch

from . import core
from . import report as rp
from . import timing as tm
from . import util as bu
from .cases import PLANS, TOL, Case, make_inputs
from .report import Col, Table, f_err, f_us, f_x, ratio
from .tidy import Tidy

TORCH_API = "torch.linalg.solve_triangular"  # the row the others' speedups are against


def overhead_apis():
    """(label, factory(A, B) -> callable) for the host-overhead suite; bound once, called many times."""
    import hsma_trsm

    pkt = torch.ops.hsma.trsm
    ovl = torch.ops.hsma.trsm.default
    st = hsma_trsm.solve_triangular
    tst = torch.linalg.solve_triangular
    return [  # the floor and torch first, so each later row can be compared as it is printed
        ("torch.add (floor)", lambda A, B: (lambda: torch.add(B, B))),
        (TORCH_API, lambda A, B: (lambda: tst(A, B, upper=False))),
        ("hsma_trsm.solve_triangular", lambda A, B: (lambda: st(A, B, upper=False))),
        ("torch.ops.hsma.trsm", lambda A, B: (lambda: pkt(A, B))),
        ("torch.ops.hsma.trsm.default", lambda A, B: (lambda: ovl(A, B))),
    ]


def list_overhead(mode: str, dtypes, seed: int = 0) -> list:
    """--list lines: float32 only, whatever the dtypes."""
    plan, apis = PLANS[mode], [label for label, _ in overhead_apis()]
    return ([f"overhead: {len(plan['overhead']) * len(apis)} cases"]
            + [f"  m={m} n={n} float32 {label}" for m, n in plan["overhead"] for label in apis])


def suite_overhead(ctx: core.Ctx) -> core.SuiteResult:
    dt = torch.float32
    plan = ctx.plan
    calls, repeats = plan["overhead_calls"], plan["overhead_repeats"]
    jobs = [(m, n, label, make) for m, n in plan["overhead"] for label, make in overhead_apis()]
    table = Table([
        Col("shape", 12, lambda r: r["shape"], left=True), Col("api", 30, lambda r: r["api"], left=True),
        Col("host us", 8, lambda r: f_us(r["host_us"])), Col("min us", 8, lambda r: f_us(r["host_min_us"])),
        Col("wall us", 8, lambda r: f_us(r["wall_us"])), Col("-floor", 7, lambda r: f_us(r["over_floor_us"])),
        Col("speedup", 8, lambda r: f_x(r["speedup"])),
        Col("eager us", 9, lambda r: f_us(r["eager_us"])),
        Col("rel err", 8, lambda r: f_err(r["rel_err"])),
        core.C_STATUS,
    ])
    inputs, floor, ref_torch = {}, {}, {}

    def blank(job):
        m, n, label, _ = job
        return dict(suite="overhead", case="single", shape=f"m={m} n={n}", dtype=bu.dtype_name(dt), m=m, n=n,
                    api=label, calls=calls, repeats=repeats, host_us=math.nan, host_min_us=math.nan,
                    wall_us=math.nan, over_floor_us=math.nan, speedup=math.nan, eager_us=math.nan,
                    eager_speedup=math.nan, rel_err=math.nan, status="", note="", rounds=0, host_spread=math.nan,
                    eager_spread=math.nan)

    def run_one(job):
        m, n, label, make = job
        row = blank(job)
        if (m, n) not in inputs:
            case = Case("overhead", "single", m, n, seed=ctx.args.seed + m)
            A, B = make_inputs(case, dt, ctx.device)
            ref, select = bu.reference_subset(A, B)
            inputs[(m, n)] = (A, B, ref, select)
        A, B, ref, select = inputs[(m, n)]
        fn = make(A, B)
        is_floor = "floor" in label
        try:
            if not is_floor:
                row["rel_err"] = bu.rel_error(select(fn()), ref)
            host = tm.host_overhead(fn, calls=calls, repeats=repeats,
                                    sync=(torch.cuda.synchronize if ctx.is_cuda else None))
            row.update({k: v for k, v in host.items() if k != "host_repeats_us"})
            # Isolated calls as the small suite times them (the device idle before each): torch.add's
            # is the least any op's eager time can be on this machine.
            eager = tm.time_rounds(fn, ctx.device, rounds=getattr(ctx.args, "rounds", 3), max_s=0.2, cap_s=2.0)
            host_t = tm.Timing.from_rounds(host["host_repeats_us"])
            row.update(eager_us=eager.median_us, rounds=eager.rounds, host_spread=host_t.spread,
                       eager_spread=eager.spread)
            flag, notes = tm.timing_flags({"host": host_t, "eager": eager}, ctx.device.type,
                                       bu.trsm_flops(m, n), bu.trsm_bytes(m, n, itemsize=dt.itemsize))
            bad = not is_floor and not (row["rel_err"] <= TOL[dt])
            if bad:
                notes.append(f"rel_err {row['rel_err']:.2e} > tol {TOL[dt]:.0e}")
            row.update(status=rp.INACCURATE if bad else flag, note="; ".join(notes))
        except Exception as e:  # noqa: BLE001
            row.update(status=rp.ERROR, note=core.short(e))
        if is_floor:
            floor[(m, n)] = row["host_us"]
        if label == TORCH_API:
            ref_torch[(m, n)] = (row["host_us"], row["eager_us"])
        f = floor.get((m, n), math.nan)
        row["over_floor_us"] = row["host_us"] - f if rp.finite(f) and rp.finite(row["host_us"]) else math.nan
        ref_host, ref_eager = ref_torch.get((m, n), (math.nan, math.nan))
        row["speedup"] = ratio(ref_host, row["host_us"])
        row["eager_speedup"] = ratio(ref_eager, row["eager_us"])
        return row

    def skipped(job):
        return blank(job)

    rows = core.run_jobs(ctx, "overhead", jobs, table, run_one, skipped)
    inputs.clear()
    cols = ["suite", "case", "shape", "dtype", "m", "n", "api", "calls", "repeats", "host_us", "host_min_us", "wall_us",
            "over_floor_us", "speedup", "eager_us", "eager_speedup", "rel_err", "status", "note", "rounds",
            "host_spread",
            "eager_spread"]
    method = (f"float32, left lower. {calls} calls back to back without synchronization between two perf_counter "
              f"readings, median (min) over {repeats} repeats of the time / calls = host us; wall us adds the final "
              "synchronize (GPU-bound when the GPU work per call exceeds the host's). -floor = host us minus "
              "torch.add's (a native elementwise op on B); speedup = torch.linalg.solve_triangular's host us / this "
              "row's. eager us = the case's time of isolated calls as in the small suite (device synchronized before "
              "each call): torch.add's is the floor of any op's eager time. Callables bound once (no attribute "
              "lookups in the loop).")
    # host: calls back to back, eager: isolated calls; the ratios against torch's row of the shape
    tidy = Tidy(impl_col="api", baseline=TORCH_API, modes=(("host", "host_us"), ("eager", "eager_us")), err="rel_err",
                ratio_cols={"host": "speedup", "eager": "eager_speedup"}, headline="hsma_trsm.solve_triangular")
    return core.SuiteResult(rows, cols, table, "overhead: host time per call", method, tidy=tidy)
