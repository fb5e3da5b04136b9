"""Shape-space benchmark: hsma against torch on random shapes from the whole space a training process sends.

    python -m benchmarks.shapes                      # seeds 0,1; 600 shapes per seed on a GPU, 40 on the CPU
    python -m benchmarks.shapes --seeds 3 --count 200 --budget-s 120 --modes eager,gpu --apis dropin --out DIR
    python -m benchmarks.shapes --report DIR/shapes.csv   # summary and map again from a finished run's CSV
    python -m benchmarks --suite shapes              # the same through the main benchmark (an opt-in suite)

Shapes (:func:`sample_shapes`, seeded and deterministic; a shorter list is a prefix of a longer one): dtype
float32 / float64 / complex64 / complex128; order k log-uniform in [1, 8192]; n (right-hand sides: B's columns for a
left solve, its rows for a right one) 1 (40%), log-uniform 2-16 (30%) or 17-4096 (30%); batch 1 (70%) or log-uniform
2-4096; left / right, upper / lower 50/50; op(A) = A, A^T, A^H (A^H for complex dtypes only, else A^T) 60/20/20;
unit diagonal 20%; one A broadcast over the batch of B 30% of batched shapes. Memory: the batch, then n, then (only
for complex128 at k near 8192) k shrink until A + B + X stay under 1 GiB (GPU) or 16 MiB (CPU); on the CPU also
k <= 512, n <= 256, batch <= 64. Regions (:func:`region`): k <= 64; k > 64 with one matrix and n <= 16 or n > 16;
k > 64 batched.

Per shape, torch and hsma in the same process on the same inputs (bu.make_triangular, bu.make_rhs), eager times
alternating in EAGER_ROUNDS rounds (which goes first alternates by index); ratio = torch time / hsma time (above 1:
hsma faster). apis: "dropin",
hsma_trsm.solve_triangular against torch.linalg.solve_triangular (op(A) passed as an A.mT / A.mH view with upper
flipped, as client code does); "switch", torch.linalg.solve_triangular inside ``hsma_trsm.enabled()`` against
outside (CUDA only: the switch routes CUDA tensors). modes: "eager" (isolated calls, timing.time_cuda_events: device
synchronised before each call, host launch cost included; time_cpu on the CPU), "gpu" (timing.time_cuda_graph: calls
captured in a CUDA graph and replayed, GPU time only), "eager_bwd" and "gpu_bwd" (forward and
``torch.autograd.grad(X, (A, B), G)``, G fixed; the graph captures both). The forward dropin runs on every shape;
the backward modes and the switch on every third (:func:`in_subset`). hsma's X is checked against a float64
(complex128) torch solve of a part of the problem (bu.reference_subset) on that subset and on every shape of order
<= 1024: above the dtype's tolerance and 10x torch's own error the rows are "inaccurate". Each row also records the
path hsma's planner picks (``hsma_trsm.plan(...).path`` and ``.why``; empty where hsma_trsm has no plan). A failing
call is recorded in its row's status and note (error: hsma failed; partial: torch failed), never stops the run; past
``--budget-s`` the remaining shapes are recorded as "skipped (budget)".

Outputs in --out (default out/bench/<gpu-or-cpu-slug>/): shapes.csv (one row per seed x shape x api x mode, '# key:
value' lines first), shapes.md (:func:`summarize`) and shapes_map.png (:func:`plot_map`; skipped without matplotlib).
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import random
import signal
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Optional

import torch

from . import core
from . import output
from . import report as rp
from . import timing as tm
from . import util as bu
from .report import Col, Table
from .shapes_report import (APIS, DTYPES, MODES, REGIONS, SLOW, _pct, _x3, path_stats,  # noqa: F401 - re-exported
                            plot_map, region_stats, summarize)

SUITE = "shapes"
GRAPH_MODES = ("gpu", "gpu_bwd")
COLUMNS = ["seed", "idx", "region", "dtype", "k", "n", "batch", "left", "upper", "trans", "unit", "a_broadcast", "api",
           "mode", "path", "why", "torch_us", "hsma_us", "ratio", "rel_err", "status", "note"]

K_MAX, N_MAX, BATCH_MAX = 8192, 4096, 4096
CAPS = {"gpu": dict(bytes=1 << 30, k=K_MAX, n=N_MAX, batch=BATCH_MAX),
        "cpu": dict(bytes=16 << 20, k=512, n=256, batch=64)}
COUNT = {"gpu": 600, "cpu": 40}  # shapes per seed
QUICK_COUNT = {"gpu": 100, "cpu": 6}  # through python -m benchmarks --quick (one seed)
BUDGET_S = {"gpu": 420.0, "cpu": 120.0}  # standalone default; the suite takes core.BUDGETS
SUBSET_EVERY = 3  # backward modes, the switch and the accuracy check of large orders: every third shape
CHECK_K = 1024  # the accuracy check runs on every shape up to this order
_ITEMSIZE = {"float32": 4, "float64": 8, "complex64": 8, "complex128": 16}
_TOL = {"float32": 1e-3, "complex64": 1e-3, "float64": 1e-10, "complex128": 1e-10}

# Few repetitions: the point is many shapes, each measured cheaply.
EAGER = dict(warmup=2, target_s=0.03, min_reps=3, max_reps=20, max_s=0.25)
CPU = dict(warmup=1, target_s=0.02, min_reps=3, max_reps=20, max_s=0.25)
# Eager and CPU times: torch and hsma alternate in this many rounds (each a share of the calls above), the median
# of the round medians counts. Back to back, a drifting host decided single rows: the same torch kernel timed
# 0.52-1.83x itself in forward + backward (H200, 40004a6, the shapes handed to torch).
EAGER_ROUNDS = 3
GRAPH = dict(target_replay_s=2e-3, max_calls=20, warmup=1, target_s=0.02, min_reps=3, max_reps=20)


# ----------------------------------------------------------------------------------------------
# Shapes


@dataclass(frozen=True)
class Shape:
    """op(A) X = B (left) or X op(A) = B (right); A is k x k with its ``upper`` or lower triangle stored, B has
    ``n`` columns (left) or rows (right); ``batch`` 1 means no batch dimensions; ``a_broadcast``: A is (1, k, k)."""

    dtype: str
    k: int
    n: int
    batch: int
    left: bool
    upper: bool
    trans: str
    unit: bool
    a_broadcast: bool

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @property
    def b_dims(self) -> tuple:
        return (self.k, self.n) if self.left else (self.n, self.k)

    @property
    def batch_dims(self) -> tuple:
        return () if self.batch == 1 else (self.batch,)

    @property
    def a_batch_dims(self) -> tuple:
        return (1,) if self.a_broadcast else self.batch_dims

    @property
    def nbytes(self) -> int:
        return shape_bytes(self.dtype, self.k, self.n, self.batch, self.a_broadcast)

    def label(self) -> str:
        """'float32 k=100 n=3 b=8 right upper T unit bcast'."""
        s = f"{self.dtype} k={self.k} n={self.n}" + (f" b={self.batch}" if self.batch > 1 else "")
        flags = [("right", not self.left), ("upper", self.upper), (self.trans, self.trans != "N"),
                 ("unit", self.unit), ("bcast", self.a_broadcast)]
        return " ".join([s] + [f for f, on in flags if on])


def shape_bytes(dtype: str, k: int, n: int, batch: int, a_broadcast: bool = False) -> int:
    """Bytes of A, B and X."""
    return ((1 if a_broadcast else batch) * k * k + 2 * batch * k * n) * _ITEMSIZE[dtype]


def _log_uniform(u: float, lo: int, hi: int) -> int:
    """An integer in [lo, hi], log-uniform, from u in [0, 1)."""
    return min(hi, max(lo, int(math.exp(math.log(lo) + u * (math.log(hi + 1) - math.log(lo))))))


def _largest(fits, hi: int) -> int:
    """The largest v in [1, hi] with fits(v) (fits true up to some point, then false); 1 when none fits."""
    if hi <= 1 or fits(hi):
        return max(1, hi)
    if not fits(1):
        return 1
    lo = 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _fit(dtype, k, n, batch, left, upper, trans, unit, bcast, caps) -> Shape:
    """Caps k, n and batch, then shrinks the batch, then n, then k until A + B + X stay under caps['bytes'], a
    broadcast A counted once per batch entry (torch materialises it)."""
    k, n, batch = min(k, caps["k"]), min(n, caps["n"]), min(batch, caps["batch"])

    def fits(k_, n_, b_):
        return shape_bytes(dtype, k_, n_, b_) < caps["bytes"]

    batch = _largest(lambda b: fits(k, n, b), batch)
    n = _largest(lambda v: fits(k, v, batch), n)
    k = _largest(lambda v: fits(v, n, batch), k)
    return Shape(dtype, k, n, batch, left, upper, trans, unit, bcast and batch > 1)


def sample_shapes(seed: int, count: int, device_kind: str = "gpu") -> list:
    """``count`` random shapes (:class:`Shape`) of ``seed``, for device_kind 'gpu' or 'cpu' (its caps). The same
    draws feed both kinds, and every shape takes the same number of draws: the first shapes of a longer list are
    the shorter list."""
    if device_kind not in CAPS:
        raise ValueError(f"device_kind {device_kind!r}: use 'gpu' or 'cpu'")
    rng = random.Random(int(seed))
    out = []
    for _ in range(int(count)):
        u = [rng.random() for _ in range(11)]
        dtype = DTYPES[min(len(DTYPES) - 1, int(u[0] * len(DTYPES)))]
        k = _log_uniform(u[1], 1, K_MAX)
        n = 1 if u[2] < 0.4 else _log_uniform(u[3], 2, 16) if u[2] < 0.7 else _log_uniform(u[3], 17, N_MAX)
        batch = 1 if u[4] < 0.7 else _log_uniform(u[5], 2, BATCH_MAX)
        trans = "N" if u[8] < 0.6 else "T" if u[8] < 0.8 or not dtype.startswith("complex") else "C"
        out.append(_fit(dtype, k, n, batch, u[6] < 0.5, u[7] < 0.5, trans, u[9] < 0.2, u[10] < 0.3,
                        CAPS[device_kind]))
    return out


def region(shape) -> str:
    """'k<=64', 'k>64 one n<=16', 'k>64 one n>16' or 'k>64 batch' (a Shape or a row dict)."""
    get = (lambda a: getattr(shape, a)) if isinstance(shape, Shape) else (lambda a: int(float(shape[a])))
    if get("k") <= 64:
        return REGIONS[0]
    if get("batch") > 1:
        return REGIONS[3]
    return REGIONS[1] if get("n") <= 16 else REGIONS[2]


def in_subset(seed: int, idx: int) -> bool:
    """The shapes that also get the backward modes, the switch and the accuracy check at any order."""
    return (int(idx) + int(seed)) % SUBSET_EVERY == 0


def planned(seed: int, idx: int, shape: Shape, modes, apis, is_cuda: bool) -> list:
    """(api, mode) pairs measured for one shape: the forward dropin always, the rest on the subset; no graph
    modes and no switch without CUDA."""
    out = []
    for api in apis:
        if api == "switch" and not is_cuda:
            continue
        for mode in modes:
            if mode in GRAPH_MODES and not is_cuda:
                continue
            if (api == "switch" or mode.endswith("_bwd")) and not in_subset(seed, idx):
                continue
            out.append((api, mode))
    return out


def jobs_for(seeds, count: int, device_kind: str, dtypes=None) -> list:
    """(seed, idx, shape) in run order: the seeds interleaved, so that a used-up budget cuts every seed alike."""
    per = {s: sample_shapes(s, count, device_kind) for s in seeds}
    return [(s, i, per[s][i]) for i in range(count) for s in seeds
            if dtypes is None or per[s][i].dtype in dtypes]


# ----------------------------------------------------------------------------------------------
# Measuring


def _call(solve, shape: Shape, A, B):
    """solve(op(A), B, ...) as client code calls it: op(A) a view taken in the call, upper flipped for it, the
    keywords written out (a **kwargs call costs a builtin more)."""
    up, left, unit = shape.upper != (shape.trans != "N"), shape.left, shape.unit
    if shape.trans == "T":
        return lambda: solve(A.mT, B, upper=up, left=left, unitriangular=unit)
    if shape.trans == "C":
        return lambda: solve(A.mH, B, upper=up, left=left, unitriangular=unit)
    return lambda: solve(A, B, upper=up, left=left, unitriangular=unit)


def _call_bwd(solve, shape: Shape, A, B, G):
    fwd = _call(solve, shape, A, B)
    return lambda: torch.autograd.grad(fwd(), (A, B), G)


def _share(cfg: dict, rounds: int) -> dict:
    """A timing config's calls and seconds split over ``rounds`` rounds (at least one call each)."""
    return dict(cfg, target_s=cfg["target_s"] / rounds, min_reps=max(1, -(-cfg["min_reps"] // rounds)),
                max_reps=max(1, -(-cfg["max_reps"] // rounds)), max_s=cfg["max_s"] / rounds)


def _time(fn, mode: str, device, est_us: Optional[float] = None, rounds: int = 1, warm: bool = False) -> float:
    """One round's median time of fn: a CUDA graph's replays (graph modes, all in one round), else isolated calls,
    ``1 / rounds`` of them (``warm``: fn has run before, no warm-up)."""
    if device.type != "cuda":
        return tm.time_cpu(fn, warm=warm, **_share(CPU, rounds)).median_us
    if mode in GRAPH_MODES:
        return tm.time_cuda_graph(fn, est_us=est_us, **GRAPH).median_us
    return tm.time_cuda_events(fn, warm=warm, **_share(EAGER, rounds)).median_us


def _plan(plan_fn, shape: Shape, A, B) -> tuple:
    """(path, why) from hsma_trsm.plan, ('', '') without it."""
    if plan_fn is None:
        return "", ""
    try:
        p = plan_fn(A, B, left=shape.left, upper=shape.upper, trans=shape.trans, unitriangular=shape.unit)
        return str(getattr(p, "path", "")), " ".join(str(getattr(p, "why", "")).split())
    except Exception as e:  # noqa: BLE001 - a planner failure is data, not the run's end
        return "", "plan() failed: " + core.short(e)


def base_row(seed: int, idx: int, shape: Shape) -> dict:
    """A row's shape columns, the rest empty (suite: for run.py's summary; not a CSV column)."""
    return dict(suite=SUITE, seed=seed, idx=idx, region=region(shape), dtype=shape.dtype, k=shape.k, n=shape.n,
                batch=shape.batch, left=shape.left, upper=shape.upper, trans=shape.trans, unit=shape.unit,
                a_broadcast=shape.a_broadcast, path="", why="", torch_us=math.nan, hsma_us=math.nan, ratio=math.nan,
                rel_err=math.nan, status="", note="")


def _accuracy(shape: Shape, A, B, X: dict) -> tuple:
    """(hsma's rel err, torch's) against a float64 solve of a part of the problem; NaN where missing."""
    ref, select = bu.reference_subset(A, B, left=shape.left, upper=shape.upper, trans=shape.trans, unit=shape.unit)
    err = {name: bu.rel_error(select(x), ref) for name, x in X.items()}
    return err.get("hsma", math.nan), err.get("torch", math.nan)


def measure_api(api: str, modes, shape: Shape, A, B, G, device, check: bool, hsma_first: bool) -> list:
    """Rows (api, mode, times, ratio, rel_err, status, note; no shape columns) of one api on one shape's inputs."""
    import hsma_trsm

    null = contextlib.nullcontext
    sides = {"torch": (torch.linalg.solve_triangular, null),
             "hsma": (hsma_trsm.solve_triangular, null) if api == "dropin"
             else (torch.linalg.solve_triangular, hsma_trsm.enabled)}
    order = ("hsma", "torch") if hsma_first else ("torch", "hsma")
    failed, X = {}, {}
    for name in order:  # the first call of each: the accuracy check's X, and a failure found once
        solve, cm = sides[name]
        try:
            with cm():
                X[name] = _call(solve, shape, A, B)()
            core.sync(device)
        except Exception as e:  # noqa: BLE001
            failed[name] = core.short(e)
    rel_err = torch_err = math.nan
    notes = [f"{n} failed: {msg}" for n, msg in failed.items()]
    if check and "hsma" in X:
        try:
            rel_err, torch_err = _accuracy(shape, A, B, X)
        except Exception as e:  # noqa: BLE001
            notes.append("accuracy check failed: " + core.short(e))
    X.clear()
    inaccurate = check and "hsma" not in failed and not (rel_err <= _TOL[shape.dtype] or rel_err <= 10 * torch_err)
    if inaccurate:
        notes.append(f"rel err {rel_err:.1e} (torch {torch_err:.1e}) > tol {_TOL[shape.dtype]:.0e}")
    Ag = Bg = None
    rows, eager_us = [], {}
    for mode in modes:
        bwd, graph = mode.endswith("_bwd"), mode in GRAPH_MODES
        if bwd and Ag is None:
            Ag, Bg = A.detach().requires_grad_(), B.detach().requires_grad_()
        rounds = 1 if graph else EAGER_ROUNDS
        meds, errs = {}, {}
        for r in range(rounds):  # torch and hsma alternate round by round (eager; see EAGER_ROUNDS)
            for name in order:
                if name in failed or name in errs:
                    continue
                solve, cm = sides[name]
                try:
                    with cm():
                        fn = _call_bwd(solve, shape, Ag, Bg, G) if bwd else _call(solve, shape, A, B)
                        meds.setdefault(name, []).append(
                            _time(fn, mode, device, eager_us.get((name, bwd)), rounds=rounds, warm=r > 0))
                except Exception as e:  # noqa: BLE001 - one call's failure is this row's status, never the run's
                    errs[name] = core.short(e, root=graph)
                    if device.type == "cuda":
                        core.cleanup(device)
                finally:
                    fn = None
        us = {name: statistics.median(m) for name, m in meds.items() if name not in errs}
        if not graph:
            eager_us.update({(name, bwd): t for name, t in us.items()})
        what = "capture" if graph else "call"
        note = notes + [f"{n} {mode} {what}: {msg}" for n, msg in errs.items()]
        hsma_bad, torch_bad = "hsma" in failed or "hsma" in errs, "torch" in failed or "torch" in errs
        status = (rp.ERROR if hsma_bad else rp.PARTIAL if torch_bad else rp.INACCURATE if inaccurate else rp.OK)
        rows.append(dict(api=api, mode=mode, torch_us=us.get("torch", math.nan), hsma_us=us.get("hsma", math.nan),
                         ratio=rp.ratio(us.get("torch"), us.get("hsma")), rel_err=rel_err, status=status,
                         note="; ".join(note)))
    return rows


def measure_shape(seed: int, idx: int, shape: Shape, todo, device, plan_fn=None) -> list:
    """The rows of one shape: every (api, mode) in ``todo``, on one set of inputs."""
    base = base_row(seed, idx, shape)
    s = 7919 * int(seed) + 13 * int(idx)
    dt = shape.torch_dtype
    A = bu.make_triangular(shape.k, batch=shape.a_batch_dims, dtype=dt, device=device, upper=shape.upper,
                           unit=shape.unit, seed=s)
    B = bu.make_rhs(*shape.b_dims, batch=shape.batch_dims, dtype=dt, device=device, seed=s + 1)
    G = bu.make_rhs(*shape.b_dims, batch=shape.batch_dims, dtype=dt, device=device, seed=s + 2) \
        if any(m.endswith("_bwd") for _, m in todo) else None
    base["path"], base["why"] = _plan(plan_fn, shape, A, B)
    check = in_subset(seed, idx) or shape.k <= CHECK_K
    rows = []
    for api in dict.fromkeys(a for a, _ in todo):
        modes = [m for a, m in todo if a == api]
        rows += [dict(base, **r) for r in measure_api(api, modes, shape, A, B, G, device, check, idx % 2 == 1)]
    del A, B, G
    if device.type == "cuda" and shape.nbytes > (256 << 20):
        core.cleanup(device)
    return rows


def _line(i: int, total: int, seed: int, idx: int, shape: Shape, rows: list) -> str:
    by = {}
    for r in rows:
        by.setdefault(r["api"], []).append(f"{r['mode']} {rp.f_x(r['ratio'])}")
    bad = sorted({r["status"] for r in rows} - {rp.OK})
    path = rows[0]["path"] if rows else ""
    return (f"[{i}/{total}] s{seed}#{idx} {shape.label()} [{region(shape)}]" + (f" path={path}" if path else "")
            + ": " + "; ".join(f"{a} " + " ".join(v) for a, v in by.items()) + (f"  ({', '.join(bad)})" if bad else ""))


def run_shapes(jobs, device, *, modes=MODES, apis=APIS, budget_s: float = 0.0, quiet: bool = False) -> list:
    """Measures the (seed, idx, shape) jobs in order; rows of every (api, mode) planned for each (:func:`planned`).
    Past ``budget_s`` seconds (0: no limit), after a lost CUDA context or an interrupt (Ctrl-C, SIGTERM) the
    remaining shapes get rows with a 'skipped ...' status."""
    import hsma_trsm

    device = torch.device(device)
    is_cuda = device.type == "cuda"
    plan_fn = getattr(hsma_trsm, "plan", None)
    if hsma_trsm.is_enabled():
        output.log("note: hsma's switch was on; turned off so that torch's rows time torch")
        hsma_trsm.disable()
    t0, rows, stop, total = time.perf_counter(), [], None, len(jobs)
    for i, (seed, idx, shape) in enumerate(jobs, 1):
        todo = planned(seed, idx, shape, modes, apis, is_cuda)
        if not todo:
            continue
        if stop is None and budget_s > 0 and time.perf_counter() - t0 > budget_s:
            stop = (rp.SKIPPED_BUDGET, f"--budget-s {budget_s:g} used up")
        if stop is None:
            try:
                got = measure_shape(seed, idx, shape, todo, device, plan_fn)
            except KeyboardInterrupt:
                stop = ("skipped (interrupted)", "interrupted")
            except Exception as e:  # noqa: BLE001 - inputs or the planner failed: the whole shape errs
                got = [dict(base_row(seed, idx, shape), api=a, mode=m, status=rp.ERROR, note=core.short(e))
                       for a, m in todo]
                core.cleanup(device)
        if stop is not None:
            got = [dict(base_row(seed, idx, shape), api=a, mode=m, status=stop[0], note=stop[1]) for a, m in todo]
        else:
            if not quiet:
                output.log(_line(i, total, seed, idx, shape, got))
            if is_cuda and any(core.STICKY.search(r["note"]) for r in got):
                stop = (rp.SKIPPED_CONTEXT, f"CUDA context lost at s{seed}#{idx}")
        rows += got
    return rows


def write_outputs(out: str, rows, header) -> list:
    """shapes.csv (with ``header``), shapes.md and shapes_map.png in ``out``; returns the paths written."""
    os.makedirs(out, exist_ok=True)
    paths = [os.path.join(out, "shapes.csv"), os.path.join(out, "shapes.md")]
    output.write_csv(paths[0], rows, COLUMNS, header)
    _, rows = output.read_csv(paths[0])  # the summary of the CSV's rounded values, as --report gives it
    md = summarize(rows)
    with open(paths[1], "w") as f:
        f.write("\n".join(f"- {k}: {v}" for k, v in header) + "\n\n" + md)
    png = plot_map(rows, os.path.join(out, "shapes_map.png"))
    return paths + ([png] if png else [])


# ----------------------------------------------------------------------------------------------
# Suite (python -m benchmarks --suite shapes) and CLI


class _SummaryTable(Table):
    """The suite's part of report.md: the summary, not a table of every row."""

    def __init__(self):
        super().__init__([Col("summary", 0, lambda r: "")])

    def markdown(self, rows) -> list:
        return summarize(rows, heading="##").splitlines()[2:]


def list_lines(mode: str, dtypes, seed: int = 0) -> list:
    """--list lines of the suite."""
    kind, quick = ("cpu" if mode.startswith("cpu") else "gpu"), mode.endswith("quick")
    seeds = [seed] if quick else [seed, seed + 1]
    jobs = jobs_for(seeds, (QUICK_COUNT if quick else COUNT)[kind], kind, {bu.dtype_name(d) for d in dtypes})
    return [f"{SUITE}: {len(jobs)} random shapes (seeds {seeds})"] + [
        f"  s{s}#{i:<4} {sh.label():<52} {region(sh)}" for s, i, sh in jobs]


def suite_shapes(ctx) -> "core.SuiteResult":
    kind, quick = ("gpu" if ctx.is_cuda else "cpu"), ctx.mode.endswith("quick")
    seeds = [ctx.args.seed] if quick else [ctx.args.seed, ctx.args.seed + 1]
    count = (QUICK_COUNT if quick else COUNT)[kind]
    modes = [m for m in MODES if ctx.args.graph or m not in GRAPH_MODES]
    budget = ctx.budget(SUITE)
    if ctx.deadline:
        left = max(1e-3, ctx.deadline - time.perf_counter())
        budget = min(budget, left) if budget > 0 else left
    jobs = jobs_for(seeds, count, kind, {bu.dtype_name(d) for d in ctx.dtypes})
    output.log(f"{len(jobs)} shapes (seeds {seeds}, {count} per seed), modes {', '.join(modes)}, budget {budget:.0f} s")
    if ctx.is_cuda:
        tm.gpu_warmup(0.3)
    rows = run_shapes(jobs, ctx.device, modes=modes, apis=APIS, budget_s=budget)
    stats = [s for s in region_stats(rows) if s["region"] == "all"]
    extra = [f"- {s['api']} {s['mode']}: {s['shapes']} shapes, {_pct(s['below'])} below {SLOW}x, geomean "
             f"{_x3(s['geomean'])}, worst {_x3(s['worst'])}" for s in stats]
    for line in extra:
        output.log("  " + line[2:])
    if ctx.args.out:
        md = os.path.join(ctx.args.out, "shapes.md")
        with open(md, "w") as f:
            f.write(summarize(rows))
        plot_map(rows, os.path.join(ctx.args.out, "shapes_map.png"))
    method = (f"Random shapes (benchmarks/shapes.py: {count} per seed, seeds {seeds}), one row per shape x api x "
              "mode; ratio = torch / hsma. shapes.md and shapes_map.png beside this report.")
    return core.SuiteResult(rows, COLUMNS, _SummaryTable(), "shapes: random shapes across the space", method,
                          extra_md=extra, extra_header=dict(seeds=",".join(map(str, seeds)), count=count))


def _csv_list(s: str, valid, what: str) -> list:
    got = [x.strip() for x in s.split(",") if x.strip()]
    bad = [x for x in got if valid is not None and x not in valid]
    if bad or not got:
        raise SystemExit(f"--{what} {s!r}: use a comma-separated subset of {', '.join(valid or ())}")
    return list(dict.fromkeys(got))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.shapes", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0,1", help="comma-separated seeds (default 0,1)")
    p.add_argument("--count", type=int, default=None, help="shapes per seed (default 600 on a GPU, 40 on the CPU)")
    p.add_argument("--budget-s", type=float, default=None,
                   help="seconds after which the remaining shapes are skipped (default 420 GPU, 120 CPU; 0: none)")
    p.add_argument("--modes", default=",".join(MODES), help=f"subset of {','.join(MODES)}")
    p.add_argument("--apis", default=",".join(APIS), help=f"subset of {','.join(APIS)}")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N")
    p.add_argument("--out", default=None, help="output folder (default <repo>/out/bench/<gpu-or-cpu-slug>/)")
    p.add_argument("--report", default=None, metavar="CSV",
                   help="no timing: shapes.md and the map from a finished run's shapes.csv (into --out or its folder)")
    p.add_argument("--quiet", action="store_true", help="no line per shape")
    args = p.parse_args(argv)
    try:
        args.seeds = [int(s) for s in _csv_list(args.seeds, None, "seeds")]
    except ValueError:
        p.error(f"--seeds {args.seeds!r}: integers, comma-separated")
    args.modes = _csv_list(args.modes, MODES, "modes")
    args.apis = _csv_list(args.apis, APIS, "apis")
    return args


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    if args.report:
        _, rows = output.read_csv(args.report)
        out = os.path.abspath(args.out or os.path.dirname(os.path.abspath(args.report)))
        os.makedirs(out, exist_ok=True)
        md = summarize(rows)
        with open(os.path.join(out, "shapes.md"), "w") as f:
            f.write(md)
        plot_map(rows, os.path.join(out, "shapes_map.png"))
        print(md)
        return 0
    device = tm.resolve_device(args.device)
    kind = "gpu" if device.type == "cuda" else "cpu"
    import hsma_trsm  # noqa: F401 - loads the extension (fails early if it is not built)

    count = COUNT[kind] if args.count is None else args.count
    budget = BUDGET_S[kind] if args.budget_s is None else args.budget_s
    modes = [m for m in args.modes if kind == "gpu" or m not in GRAPH_MODES]
    apis = [a for a in args.apis if kind == "gpu" or a != "switch"]
    env = output.env_info(device)
    out = os.path.abspath(args.out) if args.out else output.default_out_dir(env)
    print(f"device: {env.get('gpu') if kind == 'gpu' else 'CPU (' + env['cpu'] + ')'}; torch {env['torch']}, "
          f"hsma_trsm {env['hsma_trsm']} (git {env['git']}); plan(): "
          f"{'yes' if hasattr(hsma_trsm, 'plan') else 'not in this build (path column empty)'}", flush=True)
    dropped = sorted(set(args.modes) - set(modes)) + sorted(set(args.apis) - set(apis))
    if dropped:
        print(f"CPU: skipping {', '.join(dropped)} (CUDA graphs / the switch's routing are CUDA only)", flush=True)
    jobs = jobs_for(args.seeds, count, kind)
    print(f"{len(jobs)} shapes (seeds {args.seeds}, {count} per seed), modes {', '.join(modes)}, apis "
          f"{', '.join(apis)}, budget {budget:g} s; output {out}", flush=True)
    prev = None
    try:
        prev = signal.signal(signal.SIGTERM, _raise_interrupt)
    except ValueError:  # not the main thread
        pass
    try:
        if kind == "gpu":
            tm.gpu_warmup(0.5)
        rows = run_shapes(jobs, device, modes=modes, apis=apis, budget_s=budget, quiet=args.quiet)
    finally:
        if prev is not None:
            signal.signal(signal.SIGTERM, prev)
    elapsed = time.perf_counter() - t_start
    header = output.result_header(env, suite=SUITE, seeds=",".join(map(str, args.seeds)), count=count,
                              modes=",".join(modes), apis=",".join(apis), budget_s=f"{budget:g}",
                              elapsed_s=f"{elapsed:.1f}")
    paths = write_outputs(out, rows, header)
    print(summarize(rows))
    print(f"{len(rows)} rows ({rp.status_summary(rows)}) in {time.perf_counter() - t_start:.1f} s; wrote "
          + ", ".join(paths), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
