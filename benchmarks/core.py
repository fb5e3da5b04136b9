"""The suites' harness: what every suite module uses to run its cases and hand back its result.

    Ctx, SuiteResult       what a suite gets (device, mode, sizes, options) and returns (rows, CSV columns,
                           console table, targets, Markdown);
    Contender, run_case    check and time each contender (hsma, torch, ...) on one case: first call checked
                           against a float64 reference, rounds of isolated calls, CUDA graph replays;
    run_jobs               a suite's cases under its time budget, one console line per case;
    base_row, solve_rates, row_status
                           the shared columns of a solve row and its status;
    blocking_choice        the block plan a blocked solve runs (NB, variant, source);
    console columns        the Col objects the suites' tables share.
Suite modules import this module, :mod:`benchmarks.cases`, :mod:`benchmarks.timing`, :mod:`benchmarks.util`,
:mod:`benchmarks.output` and :mod:`benchmarks.report`, never each other or the CLI (:mod:`benchmarks.run`).
"""
from __future__ import annotations

import gc
import math
import re
import sys
import time
import types
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from . import output
from . import report as rp
from . import timing as tm
from . import util as bu
from .cases import TIMING, TOL, Case, hsma_call, make_inputs, torch_call
from .report import Col, Table, f_rate, f_us, f_x, ratio
from .tidy import Tidy

STICKY = re.compile(
    r"illegal memory access|device-side assert|unspecified launch failure|misaligned address|"
    r"illegal instruction|an illegal|context is destroyed",
    re.I,
)


# Seconds after which a suite skips its remaining cases (a safety net for the ~7 minute GPU run;
# scaled by --budget-scale, 0 = none). Typical H200 times are well below (see the README).
BUDGETS = {
    "gpu": dict(small=45, batched=30, large=100, ablation=35, split=25, overhead=10, clients=140, gpytorch=90,
                deltanet=90, solvers=90, switch=240, shapes=420),
    "cpu": dict(small=30, batched=30, large=30, ablation=20, split=20, overhead=10, clients=60, gpytorch=60,
                deltanet=30, solvers=60, switch=120, shapes=60),
}


# ----------------------------------------------------------------------------------------------
# Running one case


@dataclass
class Contender:
    name: str  # column prefix: hsma, torch, adaptive, fixed
    make: Callable  # (case, A, B) -> zero-argument callable
    overrides: Optional[dict] = None  # hsma_trsm's overrides for all of its calls (None values remove a key)
    checked: bool = True  # its rel. error decides the status (False: the torch baseline)


HSMA = Contender("hsma", hsma_call)


TORCH = Contender("torch", torch_call, checked=False)


def short(e: BaseException, limit: int = 160, root: bool = False) -> str:
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


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def cleanup(device):
    gc.collect()
    if device.type == "cuda":
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001
            pass
        torch.cuda.empty_cache()


def base_row(case: Case, dtype, names=("hsma", "torch")) -> dict:
    nan = math.nan
    row = dict(
        suite=case.suite, case=case.case, shape=case.shape, dtype=bu.dtype_name(dtype), batch=case.batch_count,
        m=case.m, n=case.n, left=case.left, upper=case.upper, trans=case.trans, unit=case.unit,
        flops=bu.trsm_flops(case.m, case.n, batch=case.batch_count, left=case.left, is_complex=dtype.is_complex),
        status="", note="", rounds=0,
    )
    for p in names:
        row.update({f"{p}_us": nan, f"{p}_min_us": nan, f"{p}_reps": 0, f"{p}_graph_us": nan,
                    f"{p}_graph_calls": 0, f"{p}_rel_err": nan, f"{p}_spread": nan, f"{p}_rounds_us": ""})
    return row


def case_bytes(case: Case, dtype) -> int:
    """Least memory traffic of the case's solve (bu.trsm_bytes)."""
    return bu.trsm_bytes(case.m, case.n, itemsize=dtype.itemsize, batch=case.batch_count, a_batch=case.a_count,
                         left=case.left, unit=case.unit)


def run_case(case: Case, dtype, device, cfg: tm.TimingCfg, contenders=(HSMA, TORCH), extra=None) -> dict:
    """Checks and times each contender on one (case, dtype); never raises for their failures.

    Order: a first call of each (its result checked against the float64 reference), the rounds
    of isolated calls of each (:func:`tm.time_eager`), then CUDA graph replays of each (when every
    eager time is below ``cfg.graph_max_us``), then ``extra(A, B, row)`` (suite-specific
    measurements). Columns ``<name>_us``, ``_min_us``, ``_reps``, ``_graph_us``, ``_graph_calls``,
    ``_rel_err``, ``_spread``, ``_rounds_us`` and ``rounds``; the status is a failure's, else
    :func:`tm.timing_flags`'s.
    """
    names = [c.name for c in contenders]
    row = base_row(case, dtype, names)
    notes, failed = [], set()
    is_cuda = device.type == "cuda"
    try:
        A, B = make_inputs(case, dtype, device)
    except Exception as e:  # noqa: BLE001
        row.update(status=rp.ERROR, note="inputs: " + short(e))
        return row
    fns = {c.name: c.make(case, A, B) for c in contenders}

    # first calls and correctness
    X, first_s = {}, {}
    for c in contenders:
        try:
            with bu.hsma_overrides(c.overrides), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sync(device)
                t0 = time.perf_counter()
                X[c.name] = fns[c.name]()
                sync(device)
                first_s[c.name] = time.perf_counter() - t0
            for w in caught:
                msg = str(w.message)
                if "hsma" in msg.lower():
                    notes.append(f"{c.name} warned: " + " ".join(msg.split())[:200])
        except Exception as e:  # noqa: BLE001
            failed.add(c.name)
            notes.append(f"{c.name}: " + short(e))
    if X:
        try:
            ref, select = bu.reference_subset(A, B, left=case.left, upper=case.upper, trans=case.trans,
                                              unit=case.unit)
            for name, x in X.items():
                row[f"{name}_rel_err"] = bu.rel_error(select(x), ref)
            del ref
        except Exception as e:  # noqa: BLE001 - e.g. out of memory: the case is unchecked, not inaccurate
            failed.add("reference")
            notes.append("reference: " + short(e))
    X.clear()
    if failed:
        cleanup(device)

    # rounds of isolated eager calls
    timings = {}
    for c in contenders:
        if c.name in failed:
            continue
        fs = first_s.get(c.name, 0.0)
        try:
            with bu.hsma_overrides(c.overrides):
                t = tm.time_eager(fns[c.name], device, cfg, fs >= cfg.warm_after_s, fs)
            timings[c.name] = t
            tm.record_timing(row, c.name, t)
        except Exception as e:  # noqa: BLE001
            failed.add(c.name)
            notes.append(f"{c.name} timing: " + short(e))
    if failed:
        cleanup(device)

    # CUDA graph replays (GPU time only)
    if is_cuda and cfg.graph:
        eager = [row[f"{n}_us"] for n in names if n not in failed]
        if eager and max(eager) <= cfg.graph_max_us:
            for c in contenders:
                if c.name in failed:
                    continue
                try:
                    with bu.hsma_overrides(c.overrides):
                        t = tm.graph_time(fns[c.name], row[f"{c.name}_us"], cfg)
                    row[f"{c.name}_graph_us"], row[f"{c.name}_graph_calls"] = t.median_us, t.calls_per_sample
                except Exception as e:  # noqa: BLE001
                    failed.add(f"graph-{c.name}")
                    notes.append(f"graph({c.name}): " + short(e, root=True))

    if extra is not None:
        try:
            extra(A, B, row)
        except Exception as e:  # noqa: BLE001
            failed.add("extra")
            notes.append(short(e))
    del A, B, fns
    if failed:
        cleanup(device)

    tol = TOL.get(dtype, 1e-3)
    bad = [c.name for c in contenders if c.checked and c.name not in failed and "reference" not in failed
           and not (row[f"{c.name}_rel_err"] <= tol)]  # NaN counts as inaccurate
    flag, flag_notes = tm.timing_flags(timings, device.type, row["flops"], case_bytes(case, dtype), case.batch_count)
    notes += flag_notes
    error = any(c.checked and c.name in failed for c in contenders)
    if bad and not error:
        notes += [f"{n} rel_err {row[f'{n}_rel_err']:.2e} > tol {tol:.0e}" for n in bad]
    row.update(status=row_status(error, bool(bad), bool(failed), flag), note="; ".join(notes))
    return row


def logged_copy_gbs(device) -> float:
    """The copy bandwidth (bu.copy_bandwidth, GB/s; NaN where it fails), logged; the memory given back."""
    gbs = math.nan
    try:
        gbs, _, _ = bu.copy_bandwidth(device)
        output.log(f"copy bandwidth: {f_rate(gbs)} GB/s")
    except Exception as e:  # noqa: BLE001
        output.log(f"copy bandwidth: not measured ({short(e)})")
    cleanup(device)
    return gbs


def row_status(error: bool, inaccurate: bool, partial: bool, flag: str) -> str:
    """A row's status, the worst that applies: error (a checked contender failed), inaccurate (one's result is
    off), partial (an unchecked contender or a graph failed), else the timing flag (ok, noisy, ...)."""
    return rp.ERROR if error else rp.INACCURATE if inaccurate else rp.PARTIAL if partial else flag


def solve_rates(row: dict, names=("hsma", "torch"), unit: str = "gflops") -> dict:
    """Adds speedup (torch / hsma), graph_speedup and the rates (GFLOP/s or TFLOP/s) of each."""
    row["speedup"] = ratio(row.get("torch_us"), row.get("hsma_us"))
    row["graph_speedup"] = ratio(row.get("torch_graph_us"), row.get("hsma_graph_us"))
    rate = bu.gflops if unit == "gflops" else bu.tflops
    for p in names:
        row[f"{p}_{unit}"] = rate(row["flops"], row.get(f"{p}_us", math.nan))
        row[f"{p}_graph_{unit}"] = rate(row["flops"], row.get(f"{p}_graph_us", math.nan))
    return row


# ----------------------------------------------------------------------------------------------
# Suite machinery


@dataclass
class Ctx:
    """What every suite needs: device, plan and timing of the mode, options, environment."""

    device: torch.device
    mode: str  # gpu, gpu-quick, cpu, cpu-quick
    dtypes: list
    args: types.SimpleNamespace
    env: dict
    budget_scale: float = 1.0
    deadline: float = 0.0  # perf_counter time after which everything is skipped (0: none)
    lost_context: Optional[str] = None
    plan: dict = field(default_factory=dict)
    interrupted: bool = False  # Ctrl-C / SIGTERM: the current suite keeps its finished rows, no more suites

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def timing(self, suite: str, base: Optional[tm.TimingCfg] = None) -> tm.TimingCfg:
        """The suite's TimingCfg (TIMING's, or ``base`` for a suite kept in its own module) with the CLI's
        overrides applied."""
        base = base or TIMING["gpu" if self.is_cuda else "cpu"][suite]
        cfg = tm.TimingCfg(**vars(base))
        cfg.graph = cfg.graph and self.args.graph
        for k in ("target_s", "min_reps", "max_reps", "rounds"):
            v = getattr(self.args, k, None)
            if v is not None:
                setattr(cfg, k, v)
        return cfg

    def budget(self, suite: str) -> float:
        return BUDGETS["gpu" if self.is_cuda else "cpu"][suite] * self.budget_scale


@dataclass
class SuiteResult:
    rows: list
    columns: list
    table: Table
    title: str
    method: str
    targets: list = field(default_factory=list)  # Target specs
    extra_md: list = field(default_factory=list)
    extra_header: dict = field(default_factory=dict)
    tidy: Optional[Tidy] = None  # how the rows melt into the long CSV (None: the rows are written as they are)


def run_jobs(ctx: Ctx, suite: str, jobs, table: Table, run_one, skipped_row) -> list:
    """Runs ``run_one(job) -> row`` for each job with the suite's time budget and the sticky-
    error guard, printing each row as it finishes; a job past the budget gets ``skipped_row`` with
    status "skipped (budget)" (after a lost CUDA context: "skipped (context lost)")."""
    rows = []
    t0 = time.perf_counter()
    budget = ctx.budget(suite)
    output.log(table.header())
    bar = output.progress(jobs, total=len(jobs), desc=suite, disable=ctx.args.no_progress)
    try:
        for job in bar:
            now = time.perf_counter()
            if ctx.lost_context:
                row = dict(skipped_row(job), status=rp.SKIPPED_CONTEXT,
                           note=f"CUDA context lost earlier ({ctx.lost_context})")
            elif budget > 0 and now - t0 > budget:
                row = dict(skipped_row(job), status=rp.SKIPPED_BUDGET,
                           note=f"suite time budget of {budget:g} s used up (--budget-scale 0: no limit)")
            elif ctx.deadline and now > ctx.deadline:
                row = dict(skipped_row(job), status=rp.SKIPPED_BUDGET, note="--time-budget used up")
            else:
                try:
                    row = run_one(job)
                except Exception as e:  # noqa: BLE001 - keep going whatever happens
                    row = dict(skipped_row(job), status=rp.ERROR, note=short(e))
                if row.get("status") == rp.ERROR:
                    cleanup(ctx.device)
                if ctx.is_cuda and row.get("status") in rp.FAILED and STICKY.search(row.get("note", "")):
                    ctx.lost_context = f"{suite} {row.get('shape', '')} {row.get('dtype', '')}"
            rows.append(row)
            output.log(table.row(row))
    except KeyboardInterrupt:
        print(f"\ninterrupted: keeping the {len(rows)} finished case(s) of {suite}", file=sys.stderr)
        ctx.interrupted = True
    finally:
        if hasattr(bar, "close"):
            bar.close()
    return rows


# ----------------------------------------------------------------------------------------------
# Column groups of the solve suites' CSVs and console tables

# Column groups of the solve suites' CSVs
BASE_COLS = ["suite", "case", "shape", "dtype", "batch", "m", "n", "left", "upper", "trans", "unit", "flops"]


def timing_cols(names=("hsma", "torch")):
    """<a>_us, <b>_us, speedup, <a>_graph_us, <b>_graph_us, graph_speedup, then min / reps / calls."""
    cols = [f"{p}_us" for p in names] + ["speedup"] + [f"{p}_graph_us" for p in names] + ["graph_speedup"]
    for suffix in ("min_us", "reps", "graph_calls"):
        cols += [f"{p}_{suffix}" for p in names]
    return cols


def tail_cols(names=("hsma", "torch")):
    """rel errors, status, note, then the round columns (added after note, so the earlier columns
    keep their places)."""
    return ([f"{p}_rel_err" for p in names] + ["status", "note", "rounds"] + [f"{p}_spread" for p in names]
            + [f"{p}_rounds_us" for p in names])


C_CASE = Col("case", 16, lambda r: r["case"], left=True)


C_DTYPE = Col("dtype", 10, lambda r: r["dtype"], left=True)


C_STATUS = Col("status", 0, rp.status_text, left=True)


def shape_col(w):
    return Col("shape", w, lambda r: r["shape"], left=True)


# Eager times and speedup of hsma and torch, then (graph=True) the CUDA-graph times and speedup.
C_EAGER = [Col("hsma us", 9, lambda r: f_us(r["hsma_us"])), Col("torch us", 9, lambda r: f_us(r["torch_us"])),
            Col("speedup", 8, lambda r: f_x(r["speedup"]))]


C_GRAPH = [Col("hsma gr.us", 10, lambda r: f_us(r["hsma_graph_us"])),
            Col("torch gr.us", 11, lambda r: f_us(r["torch_graph_us"])),
            Col("gr.spd", 7, lambda r: f_x(r["graph_speedup"]))]


# ----------------------------------------------------------------------------------------------
# The block plan of a blocked solve

# The overrides of a solve that runs the block-size table's choice (nothing forced on the blocked path).
TABLE_PLAN = {"nb": None, "variant": None}


def blocking_choice(dtype, k: int, overrides: Optional[dict] = None, gpu: Optional[str] = None,
                    capability: Optional[str] = None, table: str = "", rhs_cols: Optional[int] = None) -> tuple:
    """(NB, variant, source) of the block plan a solve with a k x k triangle and rhs_cols right-hand-side
    columns in all (default k) runs (hsma_trsm._ops.block_plan), on the current CUDA device or the given
    gpu name / capability, under ``overrides`` (e.g. {"nb": 128})."""
    from hsma_trsm import _ops

    with bu.hsma_overrides(overrides):
        plan = _ops.block_plan(dtype, k, rhs_cols, gpu=gpu, capability=capability, table=table)
    return plan.nb, plan.variant, plan.source


def source_short(source: str) -> str:
    """'table /path/nvidia-h200-sm90.csv (size 4096)' -> 'table nvidia-h200-sm90.csv (size 4096)'."""
    return re.sub(r"table \S*/", "table ", source)
