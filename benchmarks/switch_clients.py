"""Suite switch: real clients with hsma's switch off and on (``hsma_trsm.enabled()``), unchanged client code.

Clients (GPU sizes; float32 and float64 unless said):

    exact     GPyTorch ExactGP training step (benchmarks.gp_models.make_step: zero_grad, -mll, backward, Adam) at
              n in {1000, 4000, 8000}, Cholesky path for every n;
    svgp      GPyTorch SVGP step, 1024 inducing points, minibatch 4096;
    fit       BoTorch SingleTaskGP on 500 points in [0, 1]^6: building the model and fit_gpytorch_mll (L-BFGS), float64;
    qlogei    BoTorch qLogExpectedImprovement (q = 2, 256 Sobol samples) optimised with optimize_acqf (4 restarts,
              64 raw samples) on that fitted model, float64;
    kalman    a batched Kalman filter in plain torch: 10000 independent filters, state and observations of size 6,
              20 time steps (Cholesky of the innovation covariance, cholesky_solve for the gain, solve_triangular for
              the likelihood), its negative log likelihood, backward and an Adam step.

Each client is built twice from the same seed: once with torch's kernels, once inside ``hsma_trsm.enabled()``. The
first steps of each are the warm-up and the check (the outputs of the two runs, step by step: max abs difference;
calls that reached hsma, per step); the steps after them are timed as core.py times a call. On the CPU path the switch
routes nothing (it routes CUDA tensors): both runs are torch's, and the suite only shows that it runs.
"""
from __future__ import annotations

import contextlib
import math
import time
import warnings

import torch

from . import core, gp_models
from . import output
from . import report as rp
from . import timing as tm
from . import util as bu
from .report import Col, Table, Target, f_err, f_x, ratio
from .tidy import Tidy

SUITE = "switch"
KINDS = ("exact", "svgp", "fit", "qlogei", "kalman")
PLANS = {
    "gpu": dict(exact=[1000, 4000, 8000], svgp=[(1024, 4096)], botorch=[(500, 6)], kalman=[(10000, 20)], check_steps=3),
    "gpu-quick": dict(exact=[1000], svgp=[(1024, 4096)], botorch=[(100, 4)], kalman=[(10000, 10)], check_steps=2),
    "cpu": dict(exact=[200], svgp=[(64, 256)], botorch=[(30, 3)], kalman=[(200, 10)], check_steps=2),
    "cpu-quick": dict(exact=[60], svgp=[(16, 64)], botorch=[(12, 2)], kalman=[(50, 5)], check_steps=2),
}
# No CUDA-graph timing (graph=False, which the CLI cannot turn on): the torch run's steps call torch's own
# cholesky_solve, which may run MAGMA and cannot be captured (solvers.graph_capturable).
TIMING = {
    "gpu": tm.TimingCfg(warmup=1, target_s=0.3, min_reps=3, max_reps=30, max_s=2.0, warm_after_s=0.0, cap_s=8.0,
                        graph=False),
    "cpu": tm.TimingCfg(warmup=1, target_s=0.05, min_reps=3, max_reps=10, max_s=1.0, warm_after_s=0.0, cap_s=4.0,
                        graph=False),
}
# Max abs difference of the two runs' outputs, relative to max(1, |output|): rounding only (an optimiser such as
# L-BFGS may amplify it over its iterations, hence BoTorch's looser bound).
TOL = {"exact": {torch.float32: 1e-3, torch.float64: 1e-8}, "svgp": {torch.float32: 1e-3, torch.float64: 1e-8},
       "kalman": {torch.float32: 1e-3, torch.float64: 1e-8}, "fit": {torch.float64: 1e-4},
       "qlogei": {torch.float64: 1e-4}}
NEEDS = {"exact": "gpytorch", "svgp": "gpytorch", "fit": "botorch", "qlogei": "botorch", "kalman": None}


def client_jobs(plan: dict, dtypes) -> list:
    real = [dt for dt in (torch.float32, torch.float64) if dt in dtypes]
    jobs = [("exact", (n,), dt) for dt in real for n in plan["exact"]]
    jobs += [("svgp", s, dt) for dt in real for s in plan["svgp"]]
    if torch.float64 in dtypes:
        jobs += [(k, s, torch.float64) for k in ("fit", "qlogei") for s in plan["botorch"]]
    jobs += [("kalman", s, dt) for dt in real for s in plan["kalman"]]
    return jobs


def shape_label(kind: str, size: tuple) -> str:
    if kind == "exact":
        return f"n={size[0]}"
    if kind == "svgp":
        return f"M={size[0]} b={size[1]}"
    if kind in ("fit", "qlogei"):
        return f"n={size[0]} d={size[1]}"
    return f"batch={size[0]} T={size[1]}"


def list_lines(mode: str, dtypes, seed: int = 0) -> list:
    jobs = client_jobs(PLANS[mode], dtypes)
    return [f"{SUITE}: {len(jobs)} cases"] + [f"  {k:<16} {shape_label(k, s):<30} {bu.dtype_name(dt)}"
                                             for k, s, dt in jobs]


def _import(name):
    try:
        return __import__(name), None
    except Exception as e:  # noqa: BLE001 - missing, or broken against this torch
        return None, core.short(e)


class ServedCalls:
    """The calls hsma's switch kernels served since the last ``reset()`` (``calls``)."""

    def __init__(self):
        self.reset()

    @staticmethod
    def _total():
        from hsma_trsm import switch
        return sum(switch.routed_calls().values())

    def reset(self):
        self._start = self._total()

    @property
    def calls(self):
        return self._total() - self._start


@contextlib.contextmanager
def counted_switch():
    """``hsma_trsm.enabled()`` (from off), yielding a :class:`ServedCalls`."""
    import hsma_trsm

    hsma_trsm.disable()
    count = ServedCalls()
    with hsma_trsm.enabled():
        yield count


# ----------------------------------------------------------------------------------------------
# Clients: each make_* returns a zero-argument step returning a detached tensor (what the check compares)


def make_gpytorch(kind, size, dtype, device, seed):
    gpytorch = _import("gpytorch")[0]
    return gp_models.make_step(gpytorch, kind, size, dtype, device, seed)


def _botorch_data(n, d, device, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, dtype=torch.float64, generator=g)
    Y = torch.sin(2 * math.pi * X @ torch.linspace(0.5, 1.5, d, dtype=torch.float64)).unsqueeze(-1)
    Y += 0.05 * torch.randn(Y.shape, dtype=torch.float64, generator=g)
    return X.to(device), Y.to(device)


def _fitted_model(X, Y, seed):
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    torch.manual_seed(seed)
    gp = SingleTaskGP(X, Y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
    return gp


def make_fit(kind, size, dtype, device, seed):
    X, Y = _botorch_data(*size, device, seed)

    def step():
        gp = _fitted_model(X, Y, seed)
        return torch.cat([p.detach().reshape(-1) for p in gp.parameters()])

    return step


def make_qlogei(kind, size, dtype, device, seed):
    from botorch.acquisition.logei import qLogExpectedImprovement
    from botorch.optim import optimize_acqf
    from botorch.sampling import SobolQMCNormalSampler

    X, Y = _botorch_data(*size, device, seed)
    gp = _fitted_model(X, Y, seed)
    acq = qLogExpectedImprovement(gp, best_f=Y.max(), sampler=SobolQMCNormalSampler(torch.Size([256]), seed=seed))
    bounds = torch.stack([torch.zeros(size[1]), torch.ones(size[1])]).to(device=device, dtype=torch.float64)

    def step():
        torch.manual_seed(seed)
        cand, value = optimize_acqf(acq, bounds=bounds, q=2, num_restarts=4, raw_samples=64)
        return torch.cat([cand.detach().reshape(-1), value.detach().reshape(-1)])

    return step


KALMAN_DIM = 6


def make_kalman(kind, size, dtype, device, seed):
    """A batch of independent linear-Gaussian state-space models sharing F, H, Q, R (learned): the filter's
    negative log likelihood of simulated observations, its backward and an Adam step, in plain torch."""
    batch, steps = size
    d = KALMAN_DIM
    g = torch.Generator().manual_seed(seed)
    F_true = 0.9 * torch.linalg.qr(torch.randn(d, d, dtype=torch.float64, generator=g))[0]
    xs, obs = torch.zeros(batch, d, dtype=torch.float64), []
    for _ in range(steps):
        xs = xs @ F_true.T + 0.3 * torch.randn(batch, d, dtype=torch.float64, generator=g)
        obs.append(xs + 0.5 * torch.randn(batch, d, dtype=torch.float64, generator=g))
    ys = torch.stack(obs).to(device=device, dtype=dtype)
    torch.manual_seed(seed)
    F = torch.nn.Parameter(torch.eye(d, dtype=dtype, device=device) * 0.8)
    H = torch.nn.Parameter(torch.eye(d, dtype=dtype, device=device))
    log_q = torch.nn.Parameter(torch.full((d,), -1.0, dtype=dtype, device=device))
    log_r = torch.nn.Parameter(torch.full((d,), -1.0, dtype=dtype, device=device))
    opt = torch.optim.Adam([F, H, log_q, log_r], lr=0.01)
    eye = torch.eye(d, dtype=dtype, device=device)

    def neg_log_likelihood():
        Q, R = torch.diag(log_q.exp()), torch.diag(log_r.exp())
        x = torch.zeros(batch, d, dtype=dtype, device=device)
        P = eye.expand(batch, d, d)
        nll = 0.0
        for t in range(steps):
            x = x @ F.T
            P = F @ P @ F.T + Q
            S = H @ P @ H.T + R
            Ls = torch.linalg.cholesky(S)
            v = (ys[t] - x @ H.T).unsqueeze(-1)
            K = torch.cholesky_solve(H @ P, Ls).mT  # P H^T S^-1 (P, S symmetric)
            x = x + (K @ v).squeeze(-1)
            P = (eye - K @ H) @ P
            z = torch.linalg.solve_triangular(Ls, v, upper=False)
            nll = nll + 0.5 * z.square().sum((-2, -1)) + Ls.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return nll.mean() / steps

    def step():
        opt.zero_grad(set_to_none=True)
        loss = neg_log_likelihood()
        loss.backward()
        opt.step()
        return loss.detach()

    return step


MAKERS = {"exact": make_gpytorch, "svgp": make_gpytorch, "fit": make_fit, "qlogei": make_qlogei,
          "kalman": make_kalman}


# A client step is many small operators, each with host work: run.PLAUSIBLE's bound gets this much on top of the
# step's flops (in flops at its rate: about 1 s on the CPU path, 10 ms on the GPU).
HOST_ALLOWANCE_FLOPS = 1e9


def _step_flops(kind: str, size: tuple) -> float:
    """A generous flop count of one step, host allowance included: for the implausible flag only."""
    if kind == "exact":
        flops = 20.0 * size[0] ** 3
    elif kind == "svgp":
        flops = 20.0 * (size[0] ** 3 + size[0] ** 2 * size[1])
    elif kind in ("fit", "qlogei"):
        flops = 1e4 * 20.0 * size[0] ** 3  # hundreds of optimiser iterations
    else:
        flops = 100.0 * size[0] * size[1] * KALMAN_DIM ** 3
    return flops + HOST_ALLOWANCE_FLOPS


# ----------------------------------------------------------------------------------------------
# The suite


def blank_row(kind: str, size: tuple, dtype, check_steps: int) -> dict:
    row = dict(suite=SUITE, case=kind, shape=shape_label(kind, size), dtype=bu.dtype_name(dtype),
               check_steps=check_steps, torch_ms=math.nan, switch_ms=math.nan, speedup=math.nan,
               max_abs_diff=math.nan, scale=math.nan, routed_per_step=math.nan, status="", note="", rounds=0)
    for p in ("torch", "switch"):
        row.update({f"{p}_us": math.nan, f"{p}_min_us": math.nan, f"{p}_reps": 0, f"{p}_spread": math.nan,
                    f"{p}_rounds_us": ""})
    return row


def run_client_case(ctx: core.Ctx, cfg: tm.TimingCfg, kind: str, size: tuple, dtype, check_steps: int) -> dict:
    import hsma_trsm

    row = blank_row(kind, size, dtype, check_steps)
    seed = ctx.args.seed + 2000 + size[0]
    outs, timings, notes = {}, {}, []
    gpytorch = _import("gpytorch")[0] if NEEDS[kind] else None
    for name in ("torch", "switch"):
        with contextlib.ExitStack() as stack:
            if gpytorch is not None:
                stack.enter_context(gpytorch.settings.max_cholesky_size(10 ** 9))
            stack.enter_context(warnings.catch_warnings())
            warnings.simplefilter("ignore")  # jitter added to a Cholesky, deprecations, optimizer messages
            with counted_switch() if name == "switch" else contextlib.nullcontext() as count:
                step = MAKERS[kind](kind, size, dtype, ctx.device, seed)
                if count is not None:
                    count.reset()  # the steps' calls only (qlogei fits its model while made)
                core.sync(ctx.device)
                t0 = time.perf_counter()
                outs[name] = [step().double().cpu() for _ in range(check_steps)]
                first_s = (time.perf_counter() - t0) / check_steps
                if count is not None:
                    row["routed_per_step"] = count.calls / check_steps
            if name == "switch":
                stack.enter_context(hsma_trsm.enabled())
            t = tm.time_eager(step, ctx.device, cfg, True, first_s)
        timings[name] = t
        tm.record_timing(row, name, t)
        row[f"{name}_ms"] = t.median_us / 1e3
        del step
        core.cleanup(ctx.device)
    row["speedup"] = ratio(row["torch_us"], row["switch_us"])
    diff = max((a - b).abs().max().item() for a, b in zip(outs["torch"], outs["switch"]))
    scale = max(1.0, max(a.abs().max().item() for a in outs["torch"]))
    row.update(max_abs_diff=diff, scale=scale)
    flag, flag_notes = tm.timing_flags(timings, ctx.device.type, _step_flops(kind, size))
    notes += flag_notes
    tol = TOL[kind][dtype]
    if not (diff <= tol * scale):
        status = rp.INACCURATE
        notes.append(f"outputs differ by {diff:.2e} > {tol:.0e} x {scale:.3g}")
    elif ctx.is_cuda and not row["routed_per_step"] > 0:
        status = rp.PARTIAL
        notes.append("no call reached hsma: the runs are the same")
    else:
        status = flag
    if not ctx.is_cuda:
        notes.append("CPU: the switch routes CUDA tensors only; both runs are torch's")
    row.update(status=status, note="; ".join(notes))
    return row


def suite_switch(ctx: core.Ctx) -> core.SuiteResult:
    cfg = ctx.timing(SUITE, TIMING["gpu" if ctx.is_cuda else "cpu"])
    plan = PLANS[ctx.mode]
    jobs = client_jobs(plan, ctx.dtypes)
    missing = {}
    for pkg in ("gpytorch", "botorch"):
        mod, why = _import(pkg)
        if mod is None:
            missing[pkg] = why
        else:
            output.log(f"{pkg} {mod.__version__}")
    table = Table([
        Col("client", 7, lambda r: r["case"], left=True), core.shape_col(16), core.C_DTYPE,
        Col("torch ms", 9, lambda r: rp.f_us(r["torch_ms"])), Col("switch ms", 9, lambda r: rp.f_us(r["switch_ms"])),
        Col("speedup", 8, lambda r: f_x(r["speedup"])), Col("diff", 9, lambda r: f_err(r["max_abs_diff"])),
        Col("routed/step", 11, lambda r: f"{r['routed_per_step']:.0f}" if rp.finite(r["routed_per_step"]) else "-"),
        core.C_STATUS,
    ])

    def skipped(job):
        return blank_row(*job, plan["check_steps"])

    def run_one(job):
        pkg = NEEDS[job[0]]
        if pkg in missing:
            status = rp.SKIPPED_NO_GPYTORCH if pkg == "gpytorch" else rp.SKIPPED_NO_PACKAGE
            return dict(skipped(job), status=status, note=f"{pkg}: {missing[pkg]}")
        return run_client_case(ctx, cfg, *job, plan["check_steps"])

    rows = core.run_jobs(ctx, SUITE, jobs, table, run_one, skipped)
    cols = (["suite", "case", "shape", "dtype", "torch_ms", "switch_ms", "speedup", "max_abs_diff", "scale",
             "routed_per_step", "check_steps", "torch_us", "switch_us", "torch_min_us", "switch_min_us", "torch_reps",
             "switch_reps", "status", "note", "rounds", "torch_spread", "switch_spread", "torch_rounds_us",
             "switch_rounds_us"])
    targets = [Target("no real-client step slower with the switch", lambda r: True, [("step", "speedup")], ">=", 1.0,
                      aggregate=True)]
    method = ("Real clients built twice from one seed, unchanged: torch's kernels, then inside hsma_trsm.enabled() "
              "(torch's solves on CUDA tensors routed to hsma by the dispatcher). exact / svgp: GPyTorch training "
              "steps (benchmarks/gp_models.py); fit: BoTorch SingleTaskGP built and fitted "
              "(fit_gpytorch_mll); qlogei: optimize_acqf of qLogExpectedImprovement on the fitted model; kalman: a "
              "batched Kalman filter's negative log likelihood, backward and Adam step in plain torch. The first "
              f"{plan['check_steps']} steps of each run warm up and give the check (diff = max abs difference of the "
              "outputs step by step: losses, fitted parameters, candidates and acquisition value; routed/step = "
              "calls that reached hsma per step); then steps timed like a solve (median of round medians of "
              "isolated steps). speedup = torch ms / switch ms.")
    return core.SuiteResult(rows, cols, table, "switch: real clients with hsma's switch off and on", method, targets,
                            tidy=Tidy(impls=("torch", "switch"), modes=(("step", "{impl}_us"),), err="max_abs_diff",
                                      headline="switch"))
