"""Suite gpytorch: GPyTorch training steps with torch's triangular solve and with hsma_trsm's.

Models (GPyTorch, float32 and float64, inputs in [0, 1]^4, a noisy sine target):

    exact  ExactGP (constant mean, scaled RBF kernel, Gaussian likelihood) on n in {1000, 4000, 8000} points,
           exact marginal log likelihood; max_cholesky_size raised so every n takes the Cholesky path (the
           default, 800, would run CG / Lanczos, which sends no triangular solve);
    svgp   ApproximateGP with a VariationalStrategy over 1024 learned inducing points, a Cholesky variational
           distribution and the variational ELBO on a fixed minibatch of 4096 points.

One step: zero_grad, loss = -mll, loss.backward(), Adam.step(). Each model is built twice from the same seed:
once plain, once with ``torch.linalg.solve_triangular`` routed to ``hsma_trsm.solve_triangular``
(:func:`routed_solve_triangular`). The first steps of each are the warm-up and the loss check (the losses of the
two runs, step by step: max abs difference); the steps after them are timed as core.py times a call (rounds of
isolated steps, CUDA events on a GPU). GPyTorch also calls torch.cholesky_solve, which is not routed.
"""
from __future__ import annotations

import contextlib
import functools
import math
import sys
import time
import warnings

import torch

from . import core
from . import output
from . import report as rp
from . import timing as tm
from . import util as bu
from .gp_models import make_step
from .report import Col, Table, Target, f_x, ratio
from .tidy import Tidy

SUITE = "gpytorch"
# Sizes per mode: exact GP training-set sizes, SVGP (inducing points, minibatch), steps before timing.
PLANS = {
    "gpu": dict(exact=[1000, 4000, 8000], svgp=[(1024, 4096)], check_steps=5),
    "gpu-quick": dict(exact=[1000, 4000], svgp=[(1024, 4096)], check_steps=3),
    "cpu": dict(exact=[250, 500], svgp=[(128, 512)], check_steps=3),
    "cpu-quick": dict(exact=[100], svgp=[(32, 128)], check_steps=2),
}
TIMING = {
    "gpu": tm.TimingCfg(warmup=1, target_s=0.3, min_reps=6, max_reps=30, max_s=1.5, cap_s=4.0, graph=False),
    "cpu": tm.TimingCfg(warmup=1, target_s=0.05, min_reps=3, max_reps=10, max_s=1.0, warm_after_s=0.25, cap_s=3.0,
                        graph=False),
}
# Losses of the two runs differ by rounding only: more than this (relative to max(1, |loss|)) is inaccurate.
LOSS_TOL = {torch.float32: 1e-3, torch.float64: 1e-8}
PATCHED_PACKAGES = ("gpytorch", "linear_operator", "botorch")


@contextlib.contextmanager
def routed_solve_triangular(solve, packages=PATCHED_PACKAGES):
    """Inside the block ``torch.linalg.solve_triangular`` calls ``solve`` when A and B are tensors; anything else
    (a LinearOperator) goes to torch's function, whose __torch_function__ dispatch linear_operator registers under
    torch's function object (``@_implements(torch.linalg.solve_triangular)``). GPyTorch 1.15 and linear_operator
    0.6 look the name up as ``torch.linalg.solve_triangular`` at each call, so patching the attribute after their
    import reaches every call; module globals of ``packages`` bound to torch's function (``from torch.linalg import
    solve_triangular``) are rebound as well. Yields {'routed': calls sent to ``solve``, 'passed': calls left to
    torch}; everything is restored on exit."""
    orig = torch.linalg.solve_triangular
    count = {"routed": 0, "passed": 0}

    @functools.wraps(orig)
    def routed(A, B, *args, **kwargs):
        if isinstance(A, torch.Tensor) and isinstance(B, torch.Tensor):
            count["routed"] += 1
            return solve(A, B, *args, **kwargs)
        count["passed"] += 1
        return orig(A, B, *args, **kwargs)

    rebound = []
    for name, mod in list(sys.modules.items()):
        if mod is None or name.split(".")[0] not in packages:
            continue
        for attr, val in list(vars(mod).items()):
            if val is orig:
                setattr(mod, attr, routed)
                rebound.append((mod, attr))
    torch.linalg.solve_triangular = routed
    try:
        yield count
    finally:
        torch.linalg.solve_triangular = orig
        for mod, attr in rebound:
            setattr(mod, attr, orig)


def import_gpytorch():
    """(gpytorch module, None) or (None, why it could not be imported)."""
    try:
        import gpytorch
    except Exception as e:  # noqa: BLE001 - ImportError, or an install broken against this torch
        return None, core.short(e)
    return gpytorch, None


def _step_flops(kind: str, size: tuple) -> float:
    """A generous flop count of one step (Cholesky, its backward, solves, kernel): for the implausible flag only."""
    if kind == "exact":
        return 20.0 * size[0] ** 3
    m, b = size
    return 20.0 * (m ** 3 + m * m * b)


# ----------------------------------------------------------------------------------------------
# The suite


def gp_jobs(plan: dict, dtypes) -> list:
    """(kind, size, dtype) of the suite; real dtypes of ``dtypes`` only."""
    dts = [dt for dt in (torch.float32, torch.float64) if dt in dtypes]
    return ([("exact", (n,), dt) for dt in dts for n in plan["exact"]]
            + [("svgp", s, dt) for dt in dts for s in plan["svgp"]])


def _shape(kind: str, size: tuple) -> str:
    return f"n={size[0]}" if kind == "exact" else f"M={size[0]} b={size[1]}"


def list_lines(mode: str, dtypes, seed: int = 0) -> list:
    """--list lines of the suite."""
    jobs = gp_jobs(PLANS[mode], dtypes)
    return [f"{SUITE}: {len(jobs)} cases"] + [f"  {k:<16} {_shape(k, s):<30} {bu.dtype_name(dt)}"
                                             for k, s, dt in jobs]


def blank_row(kind: str, size: tuple, dtype, check_steps: int) -> dict:
    row = dict(suite=SUITE, case=kind, shape=_shape(kind, size), dtype=bu.dtype_name(dtype),
               n_train=size[0] if kind == "exact" else size[1], inducing=size[0] if kind == "svgp" else 0,
               check_steps=check_steps, torch_ms=math.nan, hsma_ms=math.nan, speedup=math.nan,
               loss_max_abs_diff=math.nan, torch_loss=math.nan, hsma_loss=math.nan, hsma_solves_per_step=math.nan,
               torch_passed_per_step=math.nan, status="", note="", rounds=0)
    for p in ("torch", "hsma"):
        row.update({f"{p}_us": math.nan, f"{p}_min_us": math.nan, f"{p}_reps": 0, f"{p}_spread": math.nan,
                    f"{p}_rounds_us": ""})
    return row


def run_gp_case(gpytorch, ctx: core.Ctx, cfg: tm.TimingCfg, kind: str, size: tuple, dtype, check_steps: int) -> dict:
    """Both runs of one model: losses of the first ``check_steps`` steps, then the timed steps."""
    import hsma_trsm

    row = blank_row(kind, size, dtype, check_steps)
    seed = ctx.args.seed + 1000 + size[0]
    losses, timings, notes = {}, {}, []
    for name in ("torch", "hsma"):
        with contextlib.ExitStack() as stack:
            stack.enter_context(gpytorch.settings.max_cholesky_size(10 ** 9))
            stack.enter_context(warnings.catch_warnings())
            warnings.simplefilter("ignore")  # jitter added to a Cholesky, linear_operator deprecations
            count = (stack.enter_context(routed_solve_triangular(hsma_trsm.solve_triangular))
                     if name == "hsma" else None)
            step = make_step(gpytorch, kind, size, dtype, ctx.device, seed)
            core.sync(ctx.device)
            t0 = time.perf_counter()
            losses[name] = [step().item() for _ in range(check_steps)]
            first_s = (time.perf_counter() - t0) / check_steps
            if count is not None:
                row["hsma_solves_per_step"] = count["routed"] / check_steps
                row["torch_passed_per_step"] = count["passed"] / check_steps
            t = tm.time_eager(step, ctx.device, cfg, True, first_s)
        timings[name] = t
        tm.record_timing(row, name, t)
        row[f"{name}_ms"] = t.median_us / 1e3
        row[f"{name}_loss"] = losses[name][-1]
        del step
        core.cleanup(ctx.device)
    row["speedup"] = ratio(row["torch_us"], row["hsma_us"])
    diff = max(abs(a - b) for a, b in zip(losses["torch"], losses["hsma"]))
    row["loss_max_abs_diff"] = diff
    scale = max(1.0, max(abs(v) for v in losses["torch"]))
    flag, flag_notes = tm.timing_flags(timings, ctx.device.type, _step_flops(kind, size))
    notes += flag_notes
    if not (diff <= LOSS_TOL[dtype] * scale):
        status = rp.INACCURATE
        notes.append(f"losses differ by {diff:.2e} > {LOSS_TOL[dtype]:.0e} x {scale:.3g}")
    elif not row["hsma_solves_per_step"] > 0:
        status = rp.PARTIAL
        notes.append("hsma_trsm.solve_triangular was never called: the runs are the same")
    else:
        status = flag
    row.update(status=status, note="; ".join(notes))
    return row


def suite_gpytorch(ctx: core.Ctx) -> core.SuiteResult:
    cfg = ctx.timing(SUITE, TIMING["gpu" if ctx.is_cuda else "cpu"])
    plan = PLANS[ctx.mode]
    jobs = gp_jobs(plan, ctx.dtypes)
    gpytorch, why = import_gpytorch()
    if gpytorch is not None:
        output.log(f"gpytorch {gpytorch.__version__}")
    table = Table([
        Col("model", 6, lambda r: r["case"], left=True), core.shape_col(14), core.C_DTYPE,
        Col("torch ms", 9, lambda r: rp.f_us(r["torch_ms"])), Col("hsma ms", 9, lambda r: rp.f_us(r["hsma_ms"])),
        Col("speedup", 8, lambda r: f_x(r["speedup"])),
        Col("loss diff", 9, lambda r: rp.f_err(r["loss_max_abs_diff"])),
        Col("loss", 10, lambda r: f"{r['torch_loss']:.5g}" if rp.finite(r["torch_loss"]) else "-"),
        Col("solves/step", 11, lambda r: f"{r['hsma_solves_per_step']:.0f}"
            if rp.finite(r["hsma_solves_per_step"]) else "-"),
        core.C_STATUS,
    ])

    def skipped(job):
        return blank_row(*job, plan["check_steps"])

    def run_one(job):
        if gpytorch is None:
            return dict(skipped(job), status=rp.SKIPPED_NO_GPYTORCH, note=why)
        return run_gp_case(gpytorch, ctx, cfg, *job, plan["check_steps"])

    rows = core.run_jobs(ctx, SUITE, jobs, table, run_one, skipped)
    cols = (["suite", "case", "shape", "dtype", "n_train", "inducing", "torch_ms", "hsma_ms", "speedup",
             "loss_max_abs_diff", "torch_loss", "hsma_loss", "hsma_solves_per_step", "torch_passed_per_step",
             "check_steps", "torch_us", "hsma_us", "torch_min_us", "hsma_min_us", "torch_reps", "hsma_reps", "status",
             "note", "rounds", "torch_spread", "hsma_spread", "torch_rounds_us", "hsma_rounds_us"])
    targets = [Target("GPyTorch steps never slower with hsma", lambda r: True, [("step", "speedup")], ">=", 1.0,
                      aggregate=True)]
    method = ("GPyTorch training steps (zero_grad, -mll, backward, Adam) of the same model built twice from one "
              "seed: torch's `torch.linalg.solve_triangular`, then routed to `hsma_trsm.solve_triangular` (tensors "
              "only; LinearOperators keep torch's function; restored afterwards). exact: ExactGP, scaled RBF, "
              "Cholesky path for every n (max_cholesky_size raised); svgp: VariationalStrategy with M learned "
              f"inducing points, variational ELBO on a fixed minibatch of b points. The first {plan['check_steps']} "
              "steps of each run warm up and give the loss check (loss diff = max abs difference step by step; loss "
              "= torch's last); then steps timed like a solve (median of round medians of isolated steps). "
              "speedup = torch ms / hsma ms; solves/step = calls routed to hsma per step. torch.cholesky_solve "
              "(also called by GPyTorch) is not routed.")
    return core.SuiteResult(rows, cols, table, "gpytorch: GPyTorch training steps, torch vs routed to hsma", method,
                            targets, tidy=Tidy(impls=("torch", "hsma"), modes=(("step", "{impl}_us"),),
                                               err="loss_max_abs_diff"))
