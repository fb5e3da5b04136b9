"""Suite solvers: cholesky_solve and lu_solve, hsma against torch, and torch's own functions under the switch.

Cases ((batch, k, n): batch systems of order k, n right-hand-side columns; GPU sizes):

    batched  16 x 16x16 (n = 16), 1024 x 32x32 (n = 32);
    large    order 1024 and 4096, n = 1 and n = k.

Ops: ``cholesky_solve`` (L from make_triangular with a positive diagonal: a Cholesky factor) and ``lu_solve`` (LU and
pivots of ``torch.linalg.lu_factor`` of a scaled permutation plus noise: partial pivoting swaps rows).

Contenders, on the same inputs: torch (``torch.cholesky_solve`` / ``torch.linalg.lu_solve``), hsma
(``hsma_trsm.cholesky_solve`` / ``hsma_trsm.lu_solve``), and, on CUDA, switch (torch's function inside
``hsma_trsm.enabled()``: hsma's kernels reached through the dispatcher, as unchanged client code reaches them).
Each is timed as core.py times a solve (rounds of isolated calls, CUDA events; then CUDA-graph replay) and checked
against the float64 (complex128) torch result of the same inputs. torch's own implementation (switch off) is not
graph-captured (:func:`graph_capturable`): its torch graph cell and the graph ratios are blank.
"""
from __future__ import annotations

import contextlib
import math
import time

import torch

from . import core
from . import timing as tm
from . import util as bu
from .report import Col, Table, Target, f_err, f_us, f_x, ratio
from .tidy import Tidy

SUITE = "solvers"
OPS = ("cholesky_solve", "lu_solve")
NAMES = ("torch", "hsma", "switch")
PLANS = {
    "gpu": dict(shapes=[(16, 16, 16), (1024, 32, 32), (1, 1024, 1), (1, 1024, 1024), (1, 4096, 1), (1, 4096, 4096)]),
    "gpu-quick": dict(shapes=[(16, 16, 16), (1024, 32, 32), (1, 1024, 1), (1, 1024, 1024)]),
    "cpu": dict(shapes=[(16, 16, 16), (256, 32, 32), (1, 512, 1), (1, 512, 512)]),
    "cpu-quick": dict(shapes=[(16, 16, 16), (32, 32, 32), (1, 128, 1)]),
}
TIMING = {
    "gpu": tm.TimingCfg(warmup=2, target_s=0.05, min_reps=6, max_reps=100, max_s=0.3, cap_s=3.0, graph_max_us=5000.0,
                        graph_replay_s=2e-3, graph_max_calls=50, graph_target_s=0.02, graph_min_reps=5,
                        graph_max_reps=30),
    "cpu": tm.TimingCfg(warmup=1, target_s=0.02, min_reps=3, max_reps=20, max_s=0.5, warm_after_s=0.25, cap_s=3.0,
                        graph=False),
}
_TOL = {torch.float32: 1e-3, torch.complex64: 1e-3, torch.float64: 1e-9, torch.complex128: 1e-9}
# torch's operators that may run MAGMA on CUDA (batched cholesky_solve; cholesky_inverse and lu_solve by torch's
# backend heuristics). MAGMA's calls cannot be captured in a CUDA graph, and a failed capture leaves MAGMA's queue
# broken: the next MAGMA call aborts the process (magma_queue::setup_ptrArray assertion).
MAGMA_OPS = frozenset({"cholesky_solve", "cholesky_inverse", "lu_solve"})
NOT_CAPTURABLE_NOTE = "torch graph: not capturable (MAGMA)"


def graph_capturable(op: str, reaches_hsma: bool) -> bool:
    """Whether a benchmark may capture a call of ``op`` in a CUDA graph. ``reaches_hsma``: the call is hsma's
    function, or torch's inside ``hsma_trsm.enabled()`` (routed to hsma): capturable. Otherwise it is torch's own
    implementation (switch off): False for a MAGMA-backed operator, never tried, since a failed capture leaves
    MAGMA unusable for the rest of the process."""
    return reaches_hsma or op not in MAGMA_OPS


def jobs_of(plan: dict, dtypes) -> list:
    return [(op, shape, dt) for dt in dtypes for op in OPS for shape in plan["shapes"]]


def shape_label(shape) -> str:
    b, k, n = shape
    return (f"b={b} " if b > 1 else "") + f"k={k} n={n}"


def list_lines(mode: str, dtypes, seed: int = 0) -> list:
    jobs = jobs_of(PLANS[mode], dtypes)
    return [f"{SUITE}: {len(jobs)} cases"] + [f"  {op:<16} {shape_label(s):<30} {bu.dtype_name(dt)}"
                                             for op, s, dt in jobs]


def make_inputs(op: str, shape, dtype, device, seed: int):
    """(factor args, B): (L,) or (LU, pivots), and B of shape (batch, k, n)."""
    b, k, n = shape
    batch = (b,) if b > 1 else ()
    B = bu.make_rhs(k, n, batch=batch, dtype=dtype, device=device, seed=seed + 1)
    if op == "cholesky_solve":
        L = bu.make_triangular(k, batch=batch, dtype=dtype, device=device, seed=seed)
        L.diagonal(dim1=-2, dim2=-1).copy_(L.diagonal(dim1=-2, dim2=-1).abs())
        return (L,), B
    g = torch.Generator(device="cpu").manual_seed(seed)
    perm = torch.stack([torch.randperm(k, generator=g) for _ in range(b)])
    P = torch.nn.functional.one_hot(perm, k).to(device=device, dtype=dtype)
    A = 3 * P + bu.make_rhs(k, k, batch=(b,), dtype=dtype, device=device, seed=seed + 2) / math.sqrt(k)
    LU, piv = torch.linalg.lu_factor(A if b > 1 else A[0])
    return (LU, piv), B


def calls(op: str, args, B) -> dict:
    import hsma_trsm

    if op == "cholesky_solve":
        (L,) = args
        t = lambda: torch.cholesky_solve(B, L)  # noqa: E731
        h = lambda: hsma_trsm.cholesky_solve(B, L)  # noqa: E731
    else:
        LU, piv = args
        t = lambda: torch.linalg.lu_solve(LU, piv, B)  # noqa: E731
        h = lambda: hsma_trsm.lu_solve(LU, piv, B)  # noqa: E731
    return {"torch": t, "hsma": h, "switch": t}


def _wide(t):
    if t.is_floating_point() or t.is_complex():
        return t.to(torch.complex128 if t.is_complex() else torch.float64)
    return t


def blank_row(op, shape, dtype) -> dict:
    b, k, n = shape
    row = dict(suite=SUITE, case=op, shape=shape_label(shape), dtype=bu.dtype_name(dtype), batch=b, k=k, n=n,
               flops=2 * bu.trsm_flops(k, n, batch=b, is_complex=dtype.is_complex), status="", note="", rounds=0)
    for p in NAMES:
        row.update({f"{p}_us": math.nan, f"{p}_min_us": math.nan, f"{p}_reps": 0, f"{p}_graph_us": math.nan,
                    f"{p}_rel_err": math.nan, f"{p}_spread": math.nan, f"{p}_rounds_us": ""})
    row.update(speedup=math.nan, switch_speedup=math.nan, graph_speedup=math.nan, switch_graph_speedup=math.nan)
    return row


def run_solver_case(ctx: core.Ctx, cfg: tm.TimingCfg, op: str, shape, dtype) -> dict:
    import hsma_trsm

    row = blank_row(op, shape, dtype)
    device = ctx.device
    names = NAMES if ctx.is_cuda else NAMES[:2]  # the switch routes CUDA tensors only
    args, B = make_inputs(op, shape, dtype, device, ctx.args.seed + 17 * shape[1] + shape[2])
    fns = calls(op, args, B)
    ref = calls(op, tuple(_wide(a) for a in args), _wide(B))["torch"]()
    notes, failed, timings = [], set(), {}
    for name in names:
        ctx_mgr = hsma_trsm.enabled() if name == "switch" else contextlib.nullcontext()
        try:
            with ctx_mgr:
                core.sync(device)
                t0 = time.perf_counter()
                X = fns[name]()
                core.sync(device)
                first_s = time.perf_counter() - t0
                row[f"{name}_rel_err"] = bu.rel_error(_wide(X), ref)
                del X
                t = tm.time_eager(fns[name], device, cfg, first_s >= cfg.warm_after_s, first_s)
            timings[name] = t
            tm.record_timing(row, name, t)
        except Exception as e:  # noqa: BLE001
            failed.add(name)
            notes.append(f"{name}: " + core.short(e))
    if ctx.is_cuda and cfg.graph:
        # hsma and switch reach hsma's kernels; torch is torch's own call (switch off).
        graphed = [p for p in names if p not in failed and graph_capturable(op, reaches_hsma=p != "torch")]
        eager = [row[f"{p}_us"] for p in graphed]
        if eager and max(eager) <= cfg.graph_max_us:
            if "torch" not in failed and "torch" not in graphed:
                notes.append(NOT_CAPTURABLE_NOTE)  # its graph cell and the graph ratios stay blank (NaN)
            for name in graphed:
                try:
                    with hsma_trsm.enabled() if name == "switch" else contextlib.nullcontext():
                        t = tm.graph_time(fns[name], row[f"{name}_us"], cfg)
                    row[f"{name}_graph_us"] = t.median_us
                except Exception as e:  # noqa: BLE001
                    failed.add(f"graph-{name}")
                    notes.append(f"graph({name}): " + core.short(e, root=True))
    del fns, args, B, ref
    row["speedup"] = ratio(row["torch_us"], row["hsma_us"])
    row["switch_speedup"] = ratio(row["torch_us"], row["switch_us"])
    row["graph_speedup"] = ratio(row["torch_graph_us"], row["hsma_graph_us"])
    row["switch_graph_speedup"] = ratio(row["torch_graph_us"], row["switch_graph_us"])
    tol = _TOL.get(dtype, 1e-3)
    bad = [p for p in names if p != "torch" and p not in failed and not row[f"{p}_rel_err"] <= tol]
    flag, flag_notes = tm.timing_flags(timings, device.type, row["flops"])
    notes += flag_notes
    error = any(p in failed for p in ("hsma", "switch"))
    if bad and not error:
        notes += [f"{p} rel_err {row[f'{p}_rel_err']:.2e} > tol {tol:.0e}" for p in bad]
    row.update(status=core.row_status(error, bool(bad), bool(failed), flag), note="; ".join(notes))
    return row


def suite_solvers(ctx: core.Ctx) -> core.SuiteResult:
    cfg = ctx.timing(SUITE, TIMING["gpu" if ctx.is_cuda else "cpu"])
    jobs = jobs_of(PLANS[ctx.mode], ctx.dtypes)
    table = Table([
        Col("op", 14, lambda r: r["case"], left=True), core.shape_col(18), core.C_DTYPE,
        Col("torch us", 9, lambda r: f_us(r["torch_us"])), Col("hsma us", 9, lambda r: f_us(r["hsma_us"])),
        Col("speedup", 8, lambda r: f_x(r["speedup"])), Col("switch", 8, lambda r: f_x(r["switch_speedup"])),
        Col("gr.spd", 7, lambda r: f_x(r["graph_speedup"])), Col("gr.sw", 7, lambda r: f_x(r["switch_graph_speedup"])),
        Col("rel err", 8, lambda r: f_err(r["hsma_rel_err"])), core.C_STATUS,
    ])
    rows = core.run_jobs(ctx, SUITE, jobs, table, lambda job: run_solver_case(ctx, cfg, *job),
                       lambda job: blank_row(*job))
    cols = (["suite", "case", "shape", "dtype", "batch", "k", "n", "flops", "torch_us", "hsma_us", "switch_us",
             "speedup", "switch_speedup", "torch_graph_us", "hsma_graph_us", "switch_graph_us", "graph_speedup",
             "switch_graph_speedup", "hsma_rel_err", "switch_rel_err", "torch_rel_err", "status", "note", "rounds"]
            + [f"{p}_{s}" for s in ("min_us", "reps", "spread", "rounds_us") for p in NAMES])
    speed = [("eager", "speedup"), ("graph", "graph_speedup")]
    targets = [
        Target("cholesky_solve >= 2x torch on batched small systems",
               lambda r: r["case"] == "cholesky_solve" and r["batch"] > 1, speed, ">=", 2.0),
        Target("cholesky_solve >= 1.3x torch at order >= 1024",
               lambda r: r["case"] == "cholesky_solve" and r["k"] >= 1024, speed, ">=", 1.3),
        Target("lu_solve >= 1.5x torch.linalg.lu_solve", lambda r: r["case"] == "lu_solve", speed, ">=", 1.5),
    ]
    method = ("torch.cholesky_solve / torch.linalg.lu_solve against hsma_trsm.cholesky_solve / lu_solve on the same "
              "inputs (L: a triangular factor with a positive diagonal; LU, pivots: torch.linalg.lu_factor of a "
              "scaled permutation plus noise, so rows are swapped); 'switch' is torch's function inside "
              "hsma_trsm.enabled() (CUDA only): hsma's kernels reached through the dispatcher. speedup = torch us / "
              "hsma us, switch = torch us / switch us; gr. = the same from CUDA-graph replay (GPU time only; blank "
              "where torch's own call may run MAGMA, which cannot be captured: not tried). "
              "rel err against the float64 (complex128) torch result.")
    res = core.SuiteResult(rows, cols, table, "solvers: cholesky_solve and lu_solve, hsma vs torch", method, targets,
                           tidy=Tidy(impls=NAMES))
    return res
