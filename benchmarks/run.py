"""Main benchmark: hsma_trsm against torch.linalg.solve_triangular, in suites.

Run from anywhere (the output folder is found from this file, not the working directory)::

    python -m benchmarks                          # every suite (about 10 min on an H200)
    python -m benchmarks --suite small,batched    # some suites
    python -m benchmarks --quick                  # reduced sizes (CPU / CI smoke run)
    python -m benchmarks --dtypes f32,c128 --out /tmp/results
    python -m benchmarks --curated                # GPU only: into benchmarks/results/<gpu-slug>/
    python -m benchmarks --list                   # print the cases of each suite, run nothing

Output: ``<repo>/out/bench/<gpu-or-cpu-slug>/`` (git-ignored) unless ``--out DIR`` or
``--curated`` (``<repo>/benchmarks/results/<gpu-slug>/``, the committed results; refused on the
CPU path, as is any --out inside benchmarks/results). One ``<suite>.csv`` per suite (``# key:
value`` lines first: date, git, gpu, torch, ...) and ``report.md``; a later run overwrites them.

Suites:

    small     single solves, m in {8,16,24,32,48,64} x n in {1,16,64,256,4096}, left lower; upper,
              right, trans 'T'/'C' and unit spot checks at m = n = 64; the small-kernel ablation
              at m = n = 64 complex128 (the override small_kernel = pipeline / columns / segments).
    batched   batches of small systems (8..256), linear attention (unit lower, n = 2m), one A
              broadcast over a batch of B; achieved bandwidth against the measured copy bandwidth.
    large     m = n in {512, ..., 16384}, right/upper/trans at 4096, the digits kernel solve; TFLOP/s
              and the share of the same-shape torch.matmul rate measured in the same run.
    ablation  the block-size table's NB (adaptive) against a fixed NB = 128 (the override nb).
    split     kernel time by kind (diagonal-block inversion, GEMM, small solve, other) from
              torch.profiler, at m = n = 1024 and 16384.
    overhead  host time per call issued back to back (hsma entry points, torch, torch.add).
    clients   the shapes training code sends (narrow right-hand sides, Kalman batches, SVGP, squares),
              forward and forward + backward (benchmarks/clients.py).
    gpytorch  GPyTorch training steps (exact GP, SVGP) with torch's solve and routed to hsma's
              (benchmarks/gp_clients.py; skipped when gpytorch is not installed).
    deltanet  DeltaNet chunks: the (I + A)^-1 inverse and the w/u solve against fla's solve_tril, transformers'
              Qwen3.5 fallback solve, bfloat16 batches (benchmarks/deltanet.py; fla rows skipped without fla).
    solvers   cholesky_solve and lu_solve: torch, hsma_trsm's, and torch's under the switch (benchmarks/solvers.py).
    switch    real clients with the switch off and on: GPyTorch exact GP and SVGP steps, a BoTorch fit and qLogEI,
              a batched Kalman filter (benchmarks/switch_clients.py; GPyTorch / BoTorch rows skip without them).
    shapes    opt-in, only when named: random shapes across the whole space, forward and backward, eager and CUDA
              graph, drop-in and switch; a summary per region and a map (benchmarks/shapes.py).

Both solvers run in the same process on the same inputs; speedup = torch / hsma (> 1: hsma
faster) in every table. Each time is the median of 3 round medians (``--rounds``), each round a
median over calls: on CUDA isolated calls timed with CUDA events (device synchronized before each
call, launch overhead included), plus a "graph" time: N calls captured into one CUDA graph,
replays timed, divided by N (GPU time only). Every case is checked against a float64
(complex128) torch solve of a subset (:func:`benchmarks.util.reference_subset`). Without a GPU
the CPU path runs with smaller sizes and time.perf_counter timing; the GPU targets are then n/a.

Statuses (report.STATUS_HELP): ok; flagged: noisy (round medians disagree by more than
NOISY_SPREAD), implausible (slower than PLAUSIBLE allows for the case's flops and bytes), capped
(calls so slow the case hit its time cap, TimingCfg.cap_s, and stopped early); skipped (budget)
(a suite or --time-budget ran out: not a failure), skipped (gpytorch not installed); failed: error,
inaccurate, partial. A failing case does not stop the run; each suite's CSV is written as soon as
the suite ends, so an interrupted run keeps the finished suites.
"""
from __future__ import annotations

import argparse
import functools
import gc
import math
import os
import re
import signal
import sys
import time
import types
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from . import report as rp
from . import util as bu
from .report import Col, Table, Target, f_err, f_frac_pct, f_pct, f_rate, f_us, f_x, ratio

SUITES = ("small", "batched", "large", "ablation", "split", "overhead", "clients", "gpytorch", "deltanet", "solvers",
          "switch")
# Run only when named (--suite shapes), never by default: random shapes over the whole space (benchmarks/shapes.py).
OPT_IN_SUITES = ("shapes",)
ALL_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)

# The earlier --cases names, mapped to the suite that now holds them.
_CASE_ALIASES = {
    "small": "small", "square": "large", "batched": "batched", "batch": "batched",
    "linear-attention": "batched", "linear_attention": "batched", "linattn": "batched", "la": "batched",
    "kernel-digits": "large", "kernel": "large", "digits": "large", "rbf": "large",
}

# rel. error above this flags the case "inaccurate" (inputs have condition number ~5; the
# kernel-digits factor ~1e3): a loose bound meant to catch real bugs, not rounding.
_TOL = {torch.float32: 1e-3, torch.complex64: 1e-3, torch.float64: 1e-10, torch.complex128: 1e-10}

# Round medians of one case more than this factor apart (max / min) make it "noisy": on a quiet
# GPU they agree within a few percent, so 1.5x means something else ran in between.
NOISY_SPREAD = 1.5


@dataclass(frozen=True)
class Plausible:
    """Slowest credible cost of one call: fixed + per matrix + flops at ``gflops`` + bytes at ``gbs``."""

    fixed_us: float
    per_matrix_us: float
    gflops: float
    gbs: float

    def max_us(self, flops: float, nbytes: float = 0.0, matrices: int = 1) -> float:
        return (self.fixed_us + self.per_matrix_us * matrices + flops / (self.gflops * 1e3)
                + nbytes / (self.gbs * 1e3))


# A median above PLAUSIBLE[device].max_us(...) is flagged "implausible" (a stalled or oversubscribed
# host, not the solver's cost): each term is 10x or more below the slowest case of the H200 runs
# (cuda) and of 2-core CPU runs (cpu), so a real solve never comes near it.
PLAUSIBLE = {
    "cuda": Plausible(fixed_us=2000.0, per_matrix_us=0.5, gflops=100.0, gbs=20.0),
    "cpu": Plausible(fixed_us=1000.0, per_matrix_us=20.0, gflops=1.0, gbs=1.0),
}

_STICKY = re.compile(
    r"illegal memory access|device-side assert|unspecified launch failure|misaligned address|"
    r"illegal instruction|an illegal|context is destroyed",
    re.I,
)

# ----------------------------------------------------------------------------------------------
# Sizes per mode: "gpu" (CUDA), "gpu-quick" (CUDA --quick), "cpu" (no GPU), "cpu-quick".

_BATCHED_FULL = [  # (case, batch, m, n, unit, A broadcast over the batch)
    ("batched", 10000, 8, 8, False, False),
    ("batched", 10000, 16, 16, False, False),
    ("batched", 10000, 32, 32, False, False),
    ("narrow", 10000, 32, 1, False, False),
    ("batched", 4096, 64, 64, False, False),
    ("linear-attention", 4096, 64, 128, True, False),
    ("batched", 1024, 128, 128, False, False),
    ("batched", 256, 256, 256, False, False),
    ("broadcast-A", 4096, 64, 64, False, True),
]


def _scaled(cases, div):
    return [(c, max(2, b // div), m, n, u, bc) for c, b, m, n, u, bc in cases]


PLANS = {
    "gpu": dict(
        small_m=[8, 16, 24, 32, 48, 64], small_n=[1, 16, 64, 256, 4096], spot=64,
        batched=_BATCHED_FULL,
        large=[512, 1024, 2048, 4096, 8192, 16384], large_spot=4096, digits=True,
        ablation=[512, 1024, 2048, 4096, 8192, 16384],
        split=[1024, 16384],
        overhead=[(64, 64), (8, 8)], overhead_calls=1000, overhead_repeats=5,
    ),
    "gpu-quick": dict(
        small_m=[16, 64], small_n=[1, 64], spot=64,
        batched=[_BATCHED_FULL[i] for i in (2, 5, 8)],
        large=[1024, 4096], large_spot=4096, digits=False,
        ablation=[1024, 4096],
        split=[1024],
        overhead=[(64, 64), (8, 8)], overhead_calls=500, overhead_repeats=3,
    ),
    "cpu": dict(
        small_m=[8, 16, 24, 32, 48, 64], small_n=[1, 16, 64, 256, 4096], spot=64,
        batched=_scaled(_BATCHED_FULL, 10),
        large=[256, 512, 1024], large_spot=512, digits=True,
        ablation=[512, 1024],
        split=[256, 1024],
        overhead=[(64, 64), (8, 8)], overhead_calls=300, overhead_repeats=3,
    ),
    "cpu-quick": dict(
        small_m=[8, 64], small_n=[1, 64], spot=64,
        batched=_scaled(_BATCHED_FULL, 100),
        large=[128, 256], large_spot=256, digits=False,
        ablation=[256],
        split=[256],
        overhead=[(64, 64), (8, 8)], overhead_calls=100, overhead_repeats=3,
    ),
}

# Seconds after which a suite skips its remaining cases (a safety net for the ~7 minute GPU run;
# scaled by --budget-scale, 0 = none). Typical H200 times are well below (see the README).
BUDGETS = {
    "gpu": dict(small=45, batched=30, large=100, ablation=35, split=25, overhead=10, clients=140, gpytorch=90,
                deltanet=90, solvers=90, switch=240, shapes=420),
    "cpu": dict(small=30, batched=30, large=30, ablation=20, split=20, overhead=10, clients=60, gpytorch=60,
                deltanet=30, solvers=60, switch=120, shapes=60),
}


@dataclass
class TimingCfg:
    """Timing settings of a suite (see bu.time_rounds / bu.time_cuda_graph). target_s, min_reps,
    max_reps and max_s are for all rounds of a measurement together."""

    warmup: int = 3
    target_s: float = 0.05
    min_reps: int = 10
    max_reps: int = 200
    max_s: Optional[float] = None
    warm_after_s: float = 0.02  # a first call at least this slow counts as the warm-up
    rounds: int = 3  # the case's time: the median of the round medians
    cap_s: Optional[float] = 5.0  # seconds of timing per contender of a case; past it: "capped"
    graph: bool = True
    graph_max_us: float = 5000.0  # no graph timing when an eager time exceeds this
    graph_replay_s: float = 1e-3
    graph_max_calls: int = 100
    graph_target_s: float = 0.02
    graph_min_reps: int = 10
    graph_max_reps: int = 50


# cap_s: a few times the slowest case's timing on the device (H200: 16384 complex128, about 0.4 s
# per call; CPU path: well under 0.1 s), so only far too slow calls hit it.
TIMING = {
    "gpu": dict(
        small=TimingCfg(target_s=0.05, min_reps=10, max_reps=200, cap_s=2.0, graph_replay_s=1e-3,
                        graph_max_calls=100, graph_target_s=0.02, graph_max_reps=50),
        batched=TimingCfg(target_s=0.1, min_reps=6, max_reps=100, max_s=0.5, cap_s=3.0, graph_replay_s=2e-3,
                          graph_max_calls=50, graph_target_s=0.05, graph_min_reps=5, graph_max_reps=50),
        large=TimingCfg(warmup=2, target_s=0.2, min_reps=3, max_reps=50, max_s=0.6, cap_s=10.0, graph_max_us=3000.0,
                        graph_replay_s=5e-3, graph_max_calls=20, graph_target_s=0.05, graph_min_reps=3,
                        graph_max_reps=20),
        ablation=TimingCfg(warmup=2, target_s=0.15, min_reps=3, max_reps=50, max_s=0.6, cap_s=10.0,
                           graph_max_us=3000.0, graph_replay_s=5e-3, graph_max_calls=20, graph_target_s=0.05,
                           graph_min_reps=3, graph_max_reps=20),
        split=TimingCfg(warmup=2, target_s=0.1, min_reps=1, max_reps=20, max_s=0.5, cap_s=10.0, graph=False),
    ),
    "cpu": dict(
        # warm_after_s high: on a busy machine a preempted first call must not cut the samples to one
        small=TimingCfg(warmup=1, target_s=0.01, min_reps=9, max_reps=30, warm_after_s=0.25, cap_s=2.0,
                        graph=False),
        batched=TimingCfg(warmup=1, target_s=0.03, min_reps=6, max_reps=20, max_s=1.0, warm_after_s=0.25, cap_s=3.0,
                          graph=False),
        large=TimingCfg(warmup=1, target_s=0.05, min_reps=3, max_reps=10, max_s=1.0, warm_after_s=0.25, cap_s=5.0,
                        graph=False),
        ablation=TimingCfg(warmup=1, target_s=0.05, min_reps=3, max_reps=10, max_s=1.0, warm_after_s=0.25,
                           cap_s=5.0, graph=False),
        split=TimingCfg(warmup=1, target_s=0.05, min_reps=1, max_reps=10, max_s=1.0, warm_after_s=0.25, cap_s=5.0,
                        graph=False),
    ),
}


# ----------------------------------------------------------------------------------------------
# Cases


@dataclass
class Case:
    suite: str
    case: str  # label within the suite: single, upper, right, trans-T, unit, batched, ...
    m: int
    n: int
    batch: tuple = ()  # B's batch dims (and the result's)
    a_batch: Optional[tuple] = None  # A's batch dims; None: the same as B's, () broadcast
    left: bool = True
    upper: bool = False
    trans: str = "N"
    unit: bool = False
    seed: int = 0
    small_kernel: Optional[str] = None  # kernel-ablation rows: the override small_kernel
    digits: bool = False  # the digits RBF kernel problem (real dtypes only)

    @property
    def k(self) -> int:
        return self.m if self.left else self.n

    @property
    def a_dims(self) -> tuple:
        return self.batch if self.a_batch is None else self.a_batch

    @property
    def batch_count(self) -> int:
        return math.prod(self.batch) if self.batch else 1

    @property
    def a_count(self) -> int:
        return math.prod(self.a_dims) if self.a_dims else 1

    @property
    def shape(self) -> str:
        s = f"m={self.m} n={self.n}"
        if self.batch:
            s = f"b={'x'.join(map(str, self.batch))} " + s
        if self.batch and not self.a_dims:
            s += " A bcast"
        if self.digits:
            s = "digits " + s
        if self.unit:
            s += " unit"
        if not self.left:
            s += " right"
        if self.upper:
            s += " upper"
        if self.trans != "N":
            s += f" op={self.trans}"
        if self.small_kernel:
            s += f" [{self.small_kernel}]"
        return s


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
    if case.digits:
        L, Y, _, _ = digits_problem()
        return L.to(device=device, dtype=dtype), Y.to(device=device, dtype=dtype)
    A = bu.make_triangular(case.k, batch=case.a_dims, dtype=dtype, device=device, upper=case.upper,
                           unit=case.unit, seed=case.seed)
    B = bu.make_rhs(case.m, case.n, batch=case.batch, dtype=dtype, device=device, seed=case.seed + 1)
    return A, B


def hsma_call(case: Case, A, B) -> Callable:
    """hsma's call for the case: the drop-in solve_triangular, or trsm for op = A^T / A^H."""
    import hsma_trsm

    if case.trans == "N":
        kw = dict(upper=case.upper, left=case.left, unitriangular=case.unit)
        return lambda: hsma_trsm.solve_triangular(A, B, **kw)
    kw = dict(upper=case.upper, left=case.left, unitriangular=case.unit, trans=case.trans)
    return lambda: hsma_trsm.trsm(A, B, **kw)


def torch_call(case: Case, A, B) -> Callable:
    """torch.linalg.solve_triangular for the case; op(A) = A.mT / A.mH views (other triangle)."""
    if case.trans == "N":
        At, up = A, case.upper
    elif case.trans == "T":
        At, up = A.mT, not case.upper
    else:
        At, up = A.mH, not case.upper
    kw = dict(upper=up, left=case.left, unitriangular=case.unit)
    return lambda: torch.linalg.solve_triangular(At, B, **kw)


@dataclass
class Contender:
    name: str  # column prefix: hsma, torch, adaptive, fixed
    make: Callable  # (case, A, B) -> zero-argument callable
    overrides: Optional[dict] = None  # hsma_trsm's overrides for all of its calls (None values remove a key)
    checked: bool = True  # its rel. error decides the status (False: the torch baseline)


HSMA = Contender("hsma", hsma_call)
TORCH = Contender("torch", torch_call, checked=False)

# ----------------------------------------------------------------------------------------------
# Running one case


def _time_eager(fn, device, cfg: TimingCfg, warm: bool, first_s: float = 0.0) -> "bu.Timing":
    """The case's time of fn: cfg.rounds rounds, each a median over isolated calls (CUDA events on a
    GPU, perf_counter on the CPU), then the median of the round medians, within cfg.cap_s
    (bu.time_rounds). A first call (``first_s``) already past the cap is the only sample: capped."""
    if cfg.cap_s is not None and first_s > cfg.cap_s:
        return bu.Timing.from_rounds([first_s * 1e6], capped=True)
    return bu.time_rounds(fn, device, rounds=cfg.rounds, cap_s=cfg.cap_s, warm=warm, warmup=cfg.warmup,
                          target_s=cfg.target_s, min_reps=cfg.min_reps, max_reps=cfg.max_reps, max_s=cfg.max_s)


def timing_flags(timings: dict, device_type: str, flops: float, nbytes: float = 0.0, matrices: int = 1) -> tuple:
    """(status, notes) of the timings {name: bu.Timing} of one case: the first of capped,
    implausible (median above PLAUSIBLE's bound for the flops and bytes), noisy (round spread above
    NOISY_SPREAD) that any of them has, else ok; a note per finding."""
    limit = PLAUSIBLE.get(device_type, PLAUSIBLE["cpu"]).max_us(flops, nbytes, matrices)
    found, notes = set(), []
    for name, t in timings.items():
        if t.capped:
            found.add(rp.CAPPED)
            notes.append(f"{name} capped after {t.rounds} round(s) at {f_us(t.median_us)} us per call")
        if _finite(t.median_us) and t.median_us > limit:
            found.add(rp.IMPLAUSIBLE)
            notes.append(f"{name} {f_us(t.median_us)} us per call > {f_us(limit)} us plausible here")
        if _finite(t.spread) and t.spread > NOISY_SPREAD:
            found.add(rp.NOISY)
            notes.append(f"{name} rounds {f_us(min(t.rounds_us))}-{f_us(max(t.rounds_us))} us "
                         f"({t.spread:.2f}x > {NOISY_SPREAD:g}x)")
    return next((f for f in rp.FLAGGED if f in found), rp.OK), notes


def record_timing(row: dict, name: str, t: "bu.Timing") -> None:
    """<name>_us (median of the round medians), _min_us, _reps, _spread, _rounds_us; rounds = the
    fewest rounds of the row's contenders."""
    row[f"{name}_us"], row[f"{name}_min_us"], row[f"{name}_reps"] = t.median_us, t.min_us, t.reps
    row[f"{name}_spread"] = t.spread
    row[f"{name}_rounds_us"] = ";".join(f"{x:.6g}" for x in t.rounds_us)
    row["rounds"] = t.rounds if not row.get("rounds") else min(row["rounds"], t.rounds)


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


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def _cleanup(device):
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


def run_case(case: Case, dtype, device, cfg: TimingCfg, contenders=(HSMA, TORCH), extra=None) -> dict:
    """Checks and times each contender on one (case, dtype); never raises for their failures.

    Order: a first call of each (its result checked against the float64 reference), the rounds
    of isolated calls of each (:func:`_time_eager`), then CUDA graph replays of each (when every
    eager time is below ``cfg.graph_max_us``), then ``extra(A, B, row)`` (suite-specific
    measurements). Columns ``<name>_us``, ``_min_us``, ``_reps``, ``_graph_us``, ``_graph_calls``,
    ``_rel_err``, ``_spread``, ``_rounds_us`` and ``rounds``; the status is a failure's, else
    :func:`timing_flags`'s.
    """
    names = [c.name for c in contenders]
    row = base_row(case, dtype, names)
    notes, failed = [], set()
    is_cuda = device.type == "cuda"
    try:
        A, B = make_inputs(case, dtype, device)
    except Exception as e:  # noqa: BLE001
        row.update(status=rp.ERROR, note="inputs: " + _short(e))
        return row
    fns = {c.name: c.make(case, A, B) for c in contenders}

    # first calls and correctness
    X, first_s = {}, {}
    for c in contenders:
        try:
            with bu.hsma_overrides(c.overrides), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                _sync(device)
                t0 = time.perf_counter()
                X[c.name] = fns[c.name]()
                _sync(device)
                first_s[c.name] = time.perf_counter() - t0
            for w in caught:
                msg = str(w.message)
                if "hsma" in msg.lower():
                    notes.append(f"{c.name} warned: " + " ".join(msg.split())[:200])
        except Exception as e:  # noqa: BLE001
            failed.add(c.name)
            notes.append(f"{c.name}: " + _short(e))
    if X:
        try:
            ref, select = bu.reference_subset(A, B, left=case.left, upper=case.upper, trans=case.trans,
                                              unit=case.unit)
            for name, x in X.items():
                row[f"{name}_rel_err"] = bu.rel_error(select(x), ref)
            del ref
        except Exception as e:  # noqa: BLE001 - e.g. out of memory: the case is unchecked, not inaccurate
            failed.add("reference")
            notes.append("reference: " + _short(e))
    X.clear()
    if failed:
        _cleanup(device)

    # rounds of isolated eager calls
    timings = {}
    for c in contenders:
        if c.name in failed:
            continue
        fs = first_s.get(c.name, 0.0)
        try:
            with bu.hsma_overrides(c.overrides):
                t = _time_eager(fns[c.name], device, cfg, fs >= cfg.warm_after_s, fs)
            timings[c.name] = t
            record_timing(row, c.name, t)
        except Exception as e:  # noqa: BLE001
            failed.add(c.name)
            notes.append(f"{c.name} timing: " + _short(e))
    if failed:
        _cleanup(device)

    # CUDA graph replays (GPU time only)
    if is_cuda and cfg.graph:
        eager = [row[f"{n}_us"] for n in names if n not in failed]
        if eager and max(eager) <= cfg.graph_max_us:
            for c in contenders:
                if c.name in failed:
                    continue
                try:
                    with bu.hsma_overrides(c.overrides):
                        t = graph_time(fns[c.name], row[f"{c.name}_us"], cfg)
                    row[f"{c.name}_graph_us"], row[f"{c.name}_graph_calls"] = t.median_us, t.calls_per_sample
                except Exception as e:  # noqa: BLE001
                    failed.add(f"graph-{c.name}")
                    notes.append(f"graph({c.name}): " + _short(e, root=True))

    if extra is not None:
        try:
            extra(A, B, row)
        except Exception as e:  # noqa: BLE001
            failed.add("extra")
            notes.append(_short(e))
    del A, B, fns
    if failed:
        _cleanup(device)

    tol = _TOL.get(dtype, 1e-3)
    bad = [c.name for c in contenders if c.checked and c.name not in failed and "reference" not in failed
           and not (row[f"{c.name}_rel_err"] <= tol)]  # NaN counts as inaccurate
    flag, flag_notes = timing_flags(timings, device.type, row["flops"], case_bytes(case, dtype), case.batch_count)
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
        bu.log(f"copy bandwidth: {f_rate(gbs)} GB/s")
    except Exception as e:  # noqa: BLE001
        bu.log(f"copy bandwidth: not measured ({_short(e)})")
    _cleanup(device)
    return gbs


def graph_time(fn, est_us: float, cfg: TimingCfg) -> "bu.Timing":
    """fn's GPU-only time per call (bu.time_cuda_graph) with cfg's graph settings."""
    return bu.time_cuda_graph(fn, est_us=est_us, warmup=cfg.warmup, target_replay_s=cfg.graph_replay_s,
                              max_calls=cfg.graph_max_calls, target_s=cfg.graph_target_s,
                              min_reps=cfg.graph_min_reps, max_reps=cfg.graph_max_reps)


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

    def timing(self, suite: str, base: Optional[TimingCfg] = None) -> TimingCfg:
        """The suite's TimingCfg (TIMING's, or ``base`` for a suite kept in its own module) with the CLI's
        overrides applied."""
        base = base or TIMING["gpu" if self.is_cuda else "cpu"][suite]
        cfg = TimingCfg(**vars(base))
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


def run_jobs(ctx: Ctx, suite: str, jobs, table: Table, run_one, skipped_row) -> list:
    """Runs ``run_one(job) -> row`` for each job with the suite's time budget and the sticky-
    error guard, printing each row as it finishes; a job past the budget gets ``skipped_row`` with
    status "skipped (budget)" (after a lost CUDA context: "skipped (context lost)")."""
    rows = []
    t0 = time.perf_counter()
    budget = ctx.budget(suite)
    bu.log(table.header())
    bar = bu.progress(jobs, total=len(jobs), desc=suite, disable=ctx.args.no_progress)
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
                    row = dict(skipped_row(job), status=rp.ERROR, note=_short(e))
                if row.get("status") == rp.ERROR:
                    _cleanup(ctx.device)
                if ctx.is_cuda and row.get("status") in rp.FAILED and _STICKY.search(row.get("note", "")):
                    ctx.lost_context = f"{suite} {row.get('shape', '')} {row.get('dtype', '')}"
            rows.append(row)
            bu.log(table.row(row))
    except KeyboardInterrupt:
        print(f"\ninterrupted: keeping the {len(rows)} finished case(s) of {suite}", file=sys.stderr)
        ctx.interrupted = True
    finally:
        if hasattr(bar, "close"):
            bar.close()
    return rows


def _dt_jobs(cases, dtypes):
    """(case, dtype) pairs, dtype-major; the digits problem is real only, and op = A^H only for complex
    dtypes (for real ones it is op = A^T)."""
    return [(c, dt) for dt in dtypes for c in cases
            if not (c.digits and dt.is_complex) and not (c.trans == "C" and not dt.is_complex)]


# Column groups of the solve suites' CSVs
_BASE = ["suite", "case", "shape", "dtype", "batch", "m", "n", "left", "upper", "trans", "unit", "flops"]


def _timing_cols(names=("hsma", "torch")):
    """<a>_us, <b>_us, speedup, <a>_graph_us, <b>_graph_us, graph_speedup, then min / reps / calls."""
    cols = [f"{p}_us" for p in names] + ["speedup"] + [f"{p}_graph_us" for p in names] + ["graph_speedup"]
    for suffix in ("min_us", "reps", "graph_calls"):
        cols += [f"{p}_{suffix}" for p in names]
    return cols


def _tail(names=("hsma", "torch")):
    """rel errors, status, note, then the round columns (added after note, so the earlier columns
    keep their places)."""
    return ([f"{p}_rel_err" for p in names] + ["status", "note", "rounds"] + [f"{p}_spread" for p in names]
            + [f"{p}_rounds_us" for p in names])


_C_CASE = Col("case", 16, lambda r: r["case"], left=True)
_C_DTYPE = Col("dtype", 10, lambda r: r["dtype"], left=True)
_C_STATUS = Col("status", 0, rp.status_text, left=True)


def _shape_col(w):
    return Col("shape", w, lambda r: r["shape"], left=True)


# Eager times and speedup of hsma and torch, then (graph=True) the CUDA-graph times and speedup.
_C_EAGER = [Col("hsma us", 9, lambda r: f_us(r["hsma_us"])), Col("torch us", 9, lambda r: f_us(r["torch_us"])),
            Col("speedup", 8, lambda r: f_x(r["speedup"]))]
_C_GRAPH = [Col("hsma gr.us", 10, lambda r: f_us(r["hsma_graph_us"])),
            Col("torch gr.us", 11, lambda r: f_us(r["torch_graph_us"])),
            Col("gr.spd", 7, lambda r: f_x(r["graph_speedup"]))]


# ----------------------------------------------------------------------------------------------
# Suite: small (issue 3)


def small_cases(plan: dict, dtypes, seed: int = 0) -> list:
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
        jobs += _dt_jobs(cases + spots, [dt])
    if torch.complex128 in dtypes:
        for kern in ("pipeline", "columns", "segments"):
            jobs.append((Case("small", "kernel-ablation", s, s, small_kernel=kern, seed=seed + 7), torch.complex128))
    return jobs


def _small_hsma_forced(kernel: str) -> Contender:
    return Contender("hsma", hsma_call, overrides={"small_kernel": kernel})


def suite_small(ctx: Ctx) -> SuiteResult:
    cfg = ctx.timing("small")
    jobs = small_cases(ctx.plan, ctx.dtypes, ctx.args.seed)
    table = Table([
        _C_CASE, _shape_col(22), _C_DTYPE,
        *_C_EAGER, *_C_GRAPH,
        Col("hsma GF/s", 9, lambda r: f_rate(r["hsma_gflops"])),
        Col("rel err", 8, lambda r: f_err(r["hsma_rel_err"])),
        _C_STATUS,
    ])

    def run_one(job):
        case, dt = job
        contenders = (_small_hsma_forced(case.small_kernel), TORCH) if case.small_kernel else (HSMA, TORCH)
        row = run_case(case, dt, ctx.device, cfg, contenders)
        row["small_kernel"] = case.small_kernel or ""
        return solve_rates(row)

    def skipped(job):
        case, dt = job
        return solve_rates(dict(base_row(case, dt), small_kernel=case.small_kernel or ""))

    rows = run_jobs(ctx, "small", jobs, table, run_one, skipped)
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
    extra_md = []
    if abl:
        extra_md = ["Small-kernel ablation (m = n = 64, complex128; the override small_kernel forces a kernel; "
                    "ratio = that kernel's time / the pipeline's, > 1 means the pipeline is faster):", ""]
        extra_md += [f"- {k}: eager {f_us(r['hsma_us'])} us ({f_x(r['vs_pipeline'])}), graph "
                     f"{f_us(r['hsma_graph_us'])} us ({f_x(r['vs_pipeline_graph'])}); {rp.status_text(r)}"
                     for k, r in abl.items()]
        for line in extra_md[2:]:
            bu.log("  " + line[2:])
    is64 = lambda r: r["case"] == "single" and r["m"] == 64 and r["n"] == 64  # noqa: E731
    targets = [
        Target("m=n=64 single solve >= 3x torch (eager)", is64, [("eager", "speedup")], ">=", 3.0),
        Target("m=n=64 GPU-only (graph) time <= 5 us", is64, [("graph", "hsma_graph_us")], "<=", 5.0,
               fmt=lambda v: f_us(v) + " us"),
        Target("no case slower than torch (eager and graph)", lambda r: r["case"] != "kernel-ablation",
               [("eager", "speedup"), ("graph", "graph_speedup")], ">=", 1.0, aggregate=True),
    ]
    cols = (_BASE + _timing_cols() + ["hsma_gflops", "torch_gflops", "hsma_graph_gflops", "torch_graph_gflops",
                                      "small_kernel", "vs_pipeline", "vs_pipeline_graph"] + _tail())
    method = ("Single solves (no batch), left lower non-unit unless the case says otherwise; trans cases call "
              "hsma_trsm.trsm(trans=...) and torch on A.mT / A.mH. GFLOP/s from m²n flops (mn² right; x4 complex).")
    return SuiteResult(rows, cols, table, "small: single solves, m <= 64 (issue 3)", method, targets, extra_md)


# ----------------------------------------------------------------------------------------------
# Suite: batched (issue 4)


def batched_cases(plan: dict, seed: int = 0) -> list:
    out = []
    for i, (label, b, m, n, unit, bcast) in enumerate(plan["batched"]):
        out.append(Case("batched", label, m, n, batch=(b,), a_batch=() if bcast else None, unit=unit,
                        seed=seed + 17 * i + m))
    return out


def suite_batched(ctx: Ctx) -> SuiteResult:
    cfg = ctx.timing("batched")
    copy_gbs, copy_t, copy_bytes = math.nan, None, 0
    try:
        copy_gbs, copy_t, copy_bytes = bu.copy_bandwidth(ctx.device)
        bu.log(f"copy bandwidth: {f_rate(copy_gbs)} GB/s (copy_ of {copy_bytes / 2**20:.0f} MiB, "
               f"median {f_us(copy_t.median_us)} us over {copy_t.reps}, 2x the bytes counted)")
    except Exception as e:  # noqa: BLE001
        bu.log(f"copy bandwidth: not measured ({_short(e)})")
    _cleanup(ctx.device)
    jobs = _dt_jobs(batched_cases(ctx.plan, ctx.args.seed), ctx.dtypes)
    table = Table([
        _C_CASE, _shape_col(24), _C_DTYPE,
        *_C_EAGER, *_C_GRAPH,
        Col("hsma GF/s", 9, lambda r: f_rate(r["hsma_graph_gflops"] if _finite(r["hsma_graph_gflops"])
                                             else r["hsma_gflops"])),
        Col("GB/s", 7, lambda r: f_rate(r["hsma_gbs"])), Col("%copy", 6, lambda r: f_frac_pct(r["hsma_bw_frac"])),
        Col("rel err", 8, lambda r: f_err(r["hsma_rel_err"])),
        _C_STATUS,
    ])

    def add_bw(row, case, dt):
        row["bytes"] = bu.trsm_bytes(case.m, case.n, itemsize=dt.itemsize, batch=case.batch_count,
                                     a_batch=case.a_count, left=case.left, unit=case.unit)
        row["copy_gbs"] = copy_gbs
        basis = "graph" if _finite(row.get("hsma_graph_us")) else "eager"
        row["bw_basis"] = basis
        for p in ("hsma", "torch"):
            us = row.get(f"{p}_graph_us") if basis == "graph" else row.get(f"{p}_us")
            if basis == "graph" and not _finite(us):
                us = math.nan
            row[f"{p}_gbs"] = bu.bandwidth_gbs(row["bytes"], us)
            row[f"{p}_bw_frac"] = ratio(row[f"{p}_gbs"], copy_gbs)
        return row

    def run_one(job):
        case, dt = job
        return add_bw(solve_rates(run_case(case, dt, ctx.device, cfg)), case, dt)

    def skipped(job):
        case, dt = job
        return add_bw(solve_rates(base_row(case, dt)), case, dt)

    rows = run_jobs(ctx, "batched", jobs, table, run_one, skipped)
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
    cols = (_BASE + _timing_cols() + ["hsma_gflops", "torch_gflops", "hsma_graph_gflops",
                                      "torch_graph_gflops", "bytes", "bw_basis", "hsma_gbs", "torch_gbs", "copy_gbs",
                                      "hsma_bw_frac", "torch_bw_frac"] + _tail())
    l2 = ctx.env.get("l2_cache_mib")
    method = ("Batches (batch = b), left lower; linear-attention: unit lower, n = 2m; broadcast-A: one A for the "
              "whole batch of B. bytes = A's triangle read once per distinct matrix + B read once + X written once; "
              "GB/s from the GPU-only (graph) time where measured (bw_basis), % of the copy bandwidth measured in "
              "this run" + (f"; working sets below the {l2:g} MiB L2 cache can exceed 100%" if l2 else "") + ".")
    extra_md = [f"Copy bandwidth: **{f_rate(copy_gbs)} GB/s** (`dst.copy_(src)` of {copy_bytes / 2**20:.0f} MiB, "
                f"2 x bytes / median time" + (f" {f_us(copy_t.median_us)} us" if copy_t else "") + ")."]
    return SuiteResult(rows, cols, table, "batched: batches of small systems (issue 4)", method, targets, extra_md,
                       extra_header={"copy_gbs": f"{copy_gbs:.1f}" if _finite(copy_gbs) else "nan"})


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


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


# The overrides of a solve that runs the block-size table's choice (nothing forced on the blocked path).
_TABLE_PLAN = {"nb": None, "variant": None}


def blocking_choice(dtype, k: int, overrides: Optional[dict] = None, gpu: Optional[str] = None,
                    capability: Optional[str] = None, table: str = "", rhs_cols: Optional[int] = None) -> tuple:
    """(NB, variant, source) of the block plan a solve with a k x k triangle and rhs_cols right-hand-side
    columns in all (default k) runs (hsma_trsm._ops.block_plan), on the current CUDA device or the given
    gpu name / capability, under ``overrides`` (e.g. {"nb": 128})."""
    from hsma_trsm import _ops

    with bu.hsma_overrides(overrides):
        plan = _ops.block_plan(dtype, k, rhs_cols, gpu=gpu, capability=capability, table=table)
    return plan.nb, plan.variant, plan.source


def _source_short(source: str) -> str:
    """'table /path/nvidia-h200-sm90.csv (size 4096)' -> 'table nvidia-h200-sm90.csv (size 4096)'."""
    return re.sub(r"table \S*/", "table ", source)


def suite_large(ctx: Ctx) -> SuiteResult:
    cfg = ctx.timing("large")
    jobs = _dt_jobs(large_cases(ctx.plan, ctx.args.seed), ctx.dtypes)
    gemm_cache = {}
    table = Table([
        _C_CASE, _shape_col(24), _C_DTYPE,
        *_C_EAGER, _C_GRAPH[2],
        Col("hsma TF/s", 9, lambda r: f_rate(r["hsma_tflops"])),
        Col("torch TF/s", 10, lambda r: f_rate(r["torch_tflops"])),
        Col("GEMM TF/s", 9, lambda r: f_rate(r["gemm_tflops"])), Col("%GEMM", 6, lambda r: f_pct(r["hsma_gemm_pct"])),
        Col("NB", 9, lambda r: f"{r['nb']} {r['variant'][:3]}" if r.get("nb") else "-"),
        Col("rel err", 8, lambda r: f_err(r["hsma_rel_err"])),
        _C_STATUS,
    ])

    def gemm(case, dt):
        def measure(A, B, row):
            key = (case.m, case.n, case.k, case.digits, dt)  # square right solves share the left one's GEMM
            if key not in gemm_cache:
                fn = (lambda: torch.matmul(A, B)) if case.left else (lambda: torch.matmul(B, A))
                _sync(ctx.device)
                t0 = time.perf_counter()
                fn()
                _sync(ctx.device)
                first = time.perf_counter() - t0
                t = _time_eager(fn, ctx.device, cfg, first >= cfg.warm_after_s, first)
                gemm_cache[key] = (t.median_us, t.reps)
            row["gemm_us"], row["gemm_reps"] = gemm_cache[key]
        return measure

    def add(row, case, dt):
        solve_rates(row, unit="tflops")
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
                row["nb"], row["variant"], src = blocking_choice(dt, k, overrides=_TABLE_PLAN, rhs_cols=rhs_cols)
                row["nb_source"] = _source_short(src)
            except Exception as e:  # noqa: BLE001
                row["note"] = (row.get("note", "") + "; " if row.get("note") else "") + "lookup: " + _short(e)
        return row

    def run_one(job):
        case, dt = job
        row = run_case(case, dt, ctx.device, cfg, extra=gemm(case, dt))
        row = add(row, case, dt)
        _cleanup(ctx.device)  # multi-GB tensors: give the memory back between cases
        return row

    def skipped(job):
        case, dt = job
        return add(dict(base_row(case, dt), gemm_us=math.nan), case, dt)

    rows = run_jobs(ctx, "large", jobs, table, run_one, skipped)
    gemm_cache.clear()
    _cleanup(ctx.device)
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
    cols = (_BASE + _timing_cols() + ["hsma_tflops", "torch_tflops", "hsma_graph_tflops",
                                      "torch_graph_tflops", "gemm_flops", "gemm_us", "gemm_reps", "gemm_tflops",
                                      "hsma_gemm_pct", "torch_gemm_pct", "nb", "variant", "nb_source"] + _tail())
    method = ("Square solves (m = n), left lower unless noted; kernel-digits: the Cholesky factor of an RBF kernel "
              "on sklearn's digits (1797 x 1797) against its one-hot labels (real dtypes). TFLOP/s from m²n flops "
              "(x4 complex). GEMM: torch.matmul of the same A (m x m) and B (m x n) in the same run, 2m²n flops; "
              "%GEMM = hsma's TFLOP/s / the GEMM's. Slow calls are timed fewer times (at least one sample after a "
              f"warm call, about {cfg.max_s:g} s per measurement at most); graph times only where every eager time "
              f"is below {cfg.graph_max_us / 1000:g} ms. NB / variant: the block plan the solve runs "
              "(the block-size table's row and the rules after it; hsma_trsm._ops.block_plan).")
    return SuiteResult(rows, cols, table, "large: blocked solves, m = n up to 16384 (issue 5)", method, targets)


# ----------------------------------------------------------------------------------------------
# Suite: ablation (issue 5; paper Fig. 11-12, Table 3)

FIXED_NB = 128


def suite_ablation(ctx: Ctx) -> SuiteResult:
    cfg = ctx.timing("ablation")
    adaptive = Contender("adaptive", hsma_call, overrides=_TABLE_PLAN)
    fixed = Contender("fixed", hsma_call, overrides={**_TABLE_PLAN, "nb": FIXED_NB})
    cases = [Case("ablation", "square", m, m, seed=ctx.args.seed + 7 * m) for m in ctx.plan["ablation"]]
    jobs = _dt_jobs(cases, ctx.dtypes)
    names = ("adaptive", "fixed")
    table = Table([
        _shape_col(16), _C_DTYPE,
        Col("NB adapt.", 14, lambda r: f"{r['nb_adaptive']} {r['variant_adaptive']}" if r.get("nb_adaptive") else "-"),
        Col("NB fixed", 14, lambda r: f"{r['nb_fixed']} {r['variant_fixed']}" if r.get("nb_fixed") else "-"),
        Col("adapt. us", 10, lambda r: f_us(r["adaptive_us"])), Col("fixed us", 10, lambda r: f_us(r["fixed_us"])),
        Col("fixed/adapt", 11, lambda r: f_x(r["speedup"])), Col("gr.fix/ad", 9, lambda r: f_x(r["graph_speedup"])),
        Col("adapt TF/s", 10, lambda r: f_rate(r["adaptive_tflops"])),
        Col("fixed TF/s", 10, lambda r: f_rate(r["fixed_tflops"])),
        Col("rel err", 8, lambda r: f_err(max(r["adaptive_rel_err"], r["fixed_rel_err"]))
            if _finite(r["adaptive_rel_err"]) and _finite(r["fixed_rel_err"]) else "-"),
        _C_STATUS,
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
                row["nb_adaptive"], row["variant_adaptive"], src = blocking_choice(dt, case.k,
                                                                                   overrides=adaptive.overrides)
                row["nb_source"] = _source_short(src)
                row["nb_fixed"], row["variant_fixed"], _ = blocking_choice(dt, case.k, overrides=fixed.overrides)
            except Exception as e:  # noqa: BLE001
                row["note"] = (row.get("note", "") + "; " if row.get("note") else "") + "lookup: " + _short(e)
        return row

    def run_one(job):
        case, dt = job
        row = add(run_case(case, dt, ctx.device, cfg, contenders=(adaptive, fixed)), case, dt)
        _cleanup(ctx.device)
        return row

    def skipped(job):
        case, dt = job
        return add(base_row(case, dt, names), case, dt)

    rows = run_jobs(ctx, "ablation", jobs, table, run_one, skipped)
    for dt in ctx.dtypes:
        sel = [r for r in rows if r["dtype"] == bu.dtype_name(dt)]
        if sel:
            bu.log(f"  geomean fixed/adaptive time {bu.dtype_name(dt):<10} {f_x(rp.geomean(r['speedup'] for r in sel))}"
                   f" over {len(sel)} sizes")
    cols = (_BASE + ["nb_adaptive", "variant_adaptive", "nb_source", "nb_fixed", "variant_fixed"] + _timing_cols(names)
            + ["adaptive_tflops", "fixed_tflops"] + _tail(names))
    extra = "" if ctx.is_cuda else " CPU path: LAPACK, no blocking, so NB has no effect and is not looked up."
    method = (f"hsma alone, square left-lower solves: the block-size table's NB (adaptive; no NB forced) "
              f"against NB = {FIXED_NB} forced (fixed; the override nb), the table's variant for both. "
              "No torch here: fixed/adapt = fixed time / adaptive time (> 1: the adaptive choice is faster; the "
              "CSV's speedup column). Timing as in large." + extra)
    return SuiteResult(rows, cols, table, f"ablation: adaptive NB vs fixed NB = {FIXED_NB} (issue 5)", method)


# ----------------------------------------------------------------------------------------------
# Suite: split (issue 5; paper Table 3)

_SPLIT_CATS = bu.KERNEL_CATEGORIES  # inverse, small, gemm, other


def suite_split(ctx: Ctx) -> SuiteResult:
    cfg = ctx.timing("split")
    cases = [Case("split", "square", m, m, seed=ctx.args.seed + 7 * m) for m in ctx.plan["split"]]
    jobs = _dt_jobs(cases, ctx.dtypes)
    table = Table([
        _shape_col(16), _C_DTYPE,
        Col("call us", 9, lambda r: f_us(r["call_us"])), Col("kernel us", 9, lambda r: f_us(r["kernel_us"])),
        Col("inverse", 16, lambda r: f"{f_pct(r['inverse_pct'], 1)} {f_us(r['inverse_us'])}"),
        Col("gemm", 16, lambda r: f"{f_pct(r['gemm_pct'], 1)} {f_us(r['gemm_us'])}"),
        Col("small", 16, lambda r: f"{f_pct(r['small_pct'], 1)} {f_us(r['small_us'])}"),
        Col("other", 16, lambda r: f"{f_pct(r['other_pct'], 1)} {f_us(r['other_us'])}"),
        Col("kern/call", 9, lambda r: f"{r['kernels']:.0f}" if _finite(r["kernels"]) else "-"),
        Col("rel err", 8, lambda r: f_err(r["hsma_rel_err"])),
        _C_STATUS,
    ])

    def blank(case, dt):
        row = dict(base_row(case, dt, ("hsma",)), call_us=math.nan, kernel_us=math.nan, kernels=math.nan,
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
            _sync(ctx.device)
            t0 = time.perf_counter()
            X = fn()
            _sync(ctx.device)
            first = time.perf_counter() - t0
            ref, select = bu.reference_subset(A, B)
            row["hsma_rel_err"] = bu.rel_error(select(X), ref)
            del X, ref
            t = _time_eager(fn, ctx.device, cfg, first >= cfg.warm_after_s, first)
            record_timing(row, "hsma", t)
            row["call_us"] = t.median_us
            flag, flag_notes = timing_flags({"hsma": t}, ctx.device.type, row["flops"], case_bytes(case, dt))
            notes += flag_notes
            calls = 1 if t.median_us > 20000 else 5
            kernels = bu.profile_kernels(fn, ctx.device, calls=calls)
            row.update(bu.split_kernel_times(kernels, calls=calls))
            row["profiled_calls"] = calls
            row["activity"] = "cuda kernels" if ctx.is_cuda else "cpu ops (self time)"
            row["gap_us"] = row["call_us"] - row["kernel_us"]
            if ctx.is_cuda:
                row["nb"], row["variant"], _ = blocking_choice(dt, case.k, overrides=_TABLE_PLAN)
            if not kernels:
                notes.append("the profiler recorded no device activity")
            tol = _TOL.get(dt, 1e-3)
            if not (row["hsma_rel_err"] <= tol):
                notes.append(f"rel_err {row['hsma_rel_err']:.2e} > tol {tol:.0e}")
                row["status"] = rp.INACCURATE
            else:
                row["status"] = flag if kernels else rp.PARTIAL
        except Exception as e:  # noqa: BLE001
            row["status"] = rp.ERROR
            notes.append(_short(e))
        row["note"] = "; ".join(notes)
        del A, B, fn
        _cleanup(ctx.device)
        return row

    def skipped(job):
        return blank(*job)

    rows = run_jobs(ctx, "split", jobs, table, run_one, skipped)
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
    return SuiteResult(rows, cols, table, "split: where the time goes (issue 5)", method)


# ----------------------------------------------------------------------------------------------
# Suite: overhead


def overhead_apis():
    """(label, factory(A, B) -> callable) for the host-overhead suite; bound once, called many times."""
    import hsma_trsm

    pkt = torch.ops.hsma.trsm
    ovl = torch.ops.hsma.trsm.default
    st = hsma_trsm.solve_triangular
    tst = torch.linalg.solve_triangular
    return [  # the floor and torch first, so each later row can be compared as it is printed
        ("torch.add (floor)", lambda A, B: (lambda: torch.add(B, B))),
        ("torch.linalg.solve_triangular", lambda A, B: (lambda: tst(A, B, upper=False))),
        ("hsma_trsm.solve_triangular", lambda A, B: (lambda: st(A, B, upper=False))),
        ("torch.ops.hsma.trsm", lambda A, B: (lambda: pkt(A, B))),
        ("torch.ops.hsma.trsm.default", lambda A, B: (lambda: ovl(A, B))),
    ]


def suite_overhead(ctx: Ctx) -> SuiteResult:
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
        _C_STATUS,
    ])
    inputs, floor, ref_torch = {}, {}, {}

    def blank(job):
        m, n, label, _ = job
        return dict(suite="overhead", case="single", shape=f"m={m} n={n}", dtype=bu.dtype_name(dt), m=m, n=n,
                    api=label, calls=calls, repeats=repeats, host_us=math.nan, host_min_us=math.nan,
                    wall_us=math.nan, over_floor_us=math.nan, speedup=math.nan, eager_us=math.nan, rel_err=math.nan,
                    status="", note="", rounds=0, host_spread=math.nan, eager_spread=math.nan)

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
            host = bu.host_overhead(fn, calls=calls, repeats=repeats,
                                    sync=(torch.cuda.synchronize if ctx.is_cuda else None))
            row.update({k: v for k, v in host.items() if k != "host_repeats_us"})
            # Isolated calls as the small suite times them (the device idle before each): torch.add's
            # is the least any op's eager time can be on this machine.
            eager = bu.time_rounds(fn, ctx.device, rounds=getattr(ctx.args, "rounds", 3), max_s=0.2, cap_s=2.0)
            host_t = bu.Timing.from_rounds(host["host_repeats_us"])
            row.update(eager_us=eager.median_us, rounds=eager.rounds, host_spread=host_t.spread,
                       eager_spread=eager.spread)
            flag, notes = timing_flags({"host": host_t, "eager": eager}, ctx.device.type,
                                       bu.trsm_flops(m, n), bu.trsm_bytes(m, n, itemsize=dt.itemsize))
            bad = not is_floor and not (row["rel_err"] <= _TOL[dt])
            if bad:
                notes.append(f"rel_err {row['rel_err']:.2e} > tol {_TOL[dt]:.0e}")
            row.update(status=rp.INACCURATE if bad else flag, note="; ".join(notes))
        except Exception as e:  # noqa: BLE001
            row.update(status=rp.ERROR, note=_short(e))
        if is_floor:
            floor[(m, n)] = row["host_us"]
        if label == "torch.linalg.solve_triangular":
            ref_torch[(m, n)] = row["host_us"]
        f = floor.get((m, n), math.nan)
        row["over_floor_us"] = row["host_us"] - f if _finite(f) and _finite(row["host_us"]) else math.nan
        row["speedup"] = ratio(ref_torch.get((m, n), math.nan), row["host_us"])
        return row

    def skipped(job):
        return blank(job)

    rows = run_jobs(ctx, "overhead", jobs, table, run_one, skipped)
    inputs.clear()
    cols = ["suite", "case", "shape", "dtype", "m", "n", "api", "calls", "repeats", "host_us", "host_min_us", "wall_us",
            "over_floor_us", "speedup", "eager_us", "rel_err", "status", "note", "rounds", "host_spread",
            "eager_spread"]
    method = (f"float32, left lower. {calls} calls back to back without synchronization between two perf_counter "
              f"readings, median (min) over {repeats} repeats of the time / calls = host us; wall us adds the final "
              "synchronize (GPU-bound when the GPU work per call exceeds the host's). -floor = host us minus "
              "torch.add's (a native elementwise op on B); speedup = torch.linalg.solve_triangular's host us / this "
              "row's. eager us = the case's time of isolated calls as in the small suite (device synchronized before "
              "each call): torch.add's is the floor of any op's eager time. Callables bound once (no attribute "
              "lookups in the loop).")
    return SuiteResult(rows, cols, table, "overhead: host time per call", method)


def suite_clients(ctx: Ctx) -> SuiteResult:
    from . import clients  # imported here: it imports this module

    return clients.suite_clients(ctx)


def suite_gpytorch(ctx: Ctx) -> SuiteResult:
    from . import gp_clients

    return gp_clients.suite_gpytorch(ctx)


def suite_deltanet(ctx: Ctx) -> SuiteResult:
    from . import deltanet

    return deltanet.suite_deltanet(ctx)


def suite_solvers(ctx: Ctx) -> SuiteResult:
    from . import solvers

    return solvers.suite_solvers(ctx)


def suite_switch(ctx: Ctx) -> SuiteResult:
    from . import switch_clients

    return switch_clients.suite_switch(ctx)


def suite_shapes(ctx: Ctx) -> SuiteResult:
    from . import shapes

    return shapes.suite_shapes(ctx)


SUITE_FUNCS = {
    "small": suite_small,
    "batched": suite_batched,
    "large": suite_large,
    "ablation": suite_ablation,
    "split": suite_split,
    "overhead": suite_overhead,
    "clients": suite_clients,
    "gpytorch": suite_gpytorch,
    "deltanet": suite_deltanet,
    "solvers": suite_solvers,
    "switch": suite_switch,
    "shapes": suite_shapes,
}

# ----------------------------------------------------------------------------------------------
# CLI


def _parse_list(s: Optional[str], parse, what: str, valid: str = "") -> list:
    out = []
    for item in (s or "").split(","):
        item = item.strip()
        if not item:
            continue
        v = parse(item)
        if v is None:
            raise SystemExit(f"unknown {what} {item!r}" + (f"; use {valid}" if valid else ""))
        if v not in out:
            out.append(v)
    return out


def parse_suites(s: Optional[str]) -> list:
    """'small,large' -> ['small', 'large'] in the canonical order; 'all' or empty: every suite."""
    if s is None or s.strip().lower() in ("", "all"):
        return list(SUITES)
    known = SUITES + OPT_IN_SUITES
    got = _parse_list(s, lambda x: x.lower() if x.lower() in known else None, "suite", ", ".join(known))
    return [x for x in known if x in got]


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Time hsma_trsm against torch.linalg.solve_triangular, suite by suite.",
    )
    p.add_argument("--suite", "--suites", dest="suite", default=None,
                   help=f"comma-separated subset of {', '.join(SUITES)} (default: all), or the opt-in "
                        f"{', '.join(OPT_IN_SUITES)}")
    p.add_argument("--cases", default=None,
                   help="old name of --suite: small, square (-> large), batched / linear-attention (-> batched), "
                        "kernel-digits (-> large)")
    p.add_argument("--quick", action="store_true", help="reduced sizes (CPU / CI smoke run; on a GPU a short check)")
    p.add_argument("--full", action="store_true", help="the GPU sizes even on the CPU path (very slow)")
    p.add_argument("--dtypes", default="float32,float64,complex64,complex128",
                   help="comma-separated dtypes (float32, float64, complex64, complex128; f32/f64/c64/c128); "
                        "the overhead suite is float32 only")
    p.add_argument("--out", default=None,
                   help="folder for <suite>.csv and report.md (default: <repo>/out/bench/<gpu-or-cpu-slug>/)")
    p.add_argument("--curated", action="store_true",
                   help="write the committed results, <repo>/benchmarks/results/<gpu-slug>/ (GPU runs only)")
    p.add_argument("--no-save", action="store_true", help="do not write the CSV / Markdown files")
    p.add_argument("--list", action="store_true", help="print the cases of the selected suites and exit")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N")
    p.add_argument("--no-graph", dest="graph", action="store_false", help="skip the CUDA graph timing")
    p.add_argument("--target-s", type=float, default=None, help="seconds of timed calls per measurement "
                   "(default per suite)")
    p.add_argument("--min-reps", type=int, default=None, help="minimum timed calls (default per suite)")
    p.add_argument("--max-reps", type=int, default=None, help="maximum timed calls (default per suite)")
    p.add_argument("--rounds", type=int, default=3,
                   help="timing rounds per case; its time is the median of the round medians (default 3)")
    p.add_argument("--budget-scale", type=float, default=1.0,
                   help="scales each suite's time budget, after which it skips its remaining cases (0 = no limit)")
    p.add_argument("--time-budget", type=float, default=0.0,
                   help="seconds for the whole run, after which the remaining cases are skipped (0 = no limit)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (torch.set_num_threads; default: torch's own choice)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--strict", action="store_true",
                   help="exit with status 1 if any case failed (error, inaccurate, partial) or the run was "
                        "interrupted; flagged (noisy, implausible, capped) and skipped (budget) cases do not count")
    args = p.parse_args(argv)
    if args.cases is not None and args.suite is None:
        mapped = _parse_list(args.cases, lambda s: _CASE_ALIASES.get(s.lower()), "case",
                             ", ".join(sorted(_CASE_ALIASES)))
        args.suite = ",".join(mapped)
    args.suites = parse_suites(args.suite)
    try:
        args.dtypes = _parse_list(args.dtypes, bu.parse_dtype, "dtype")
    except ValueError as e:
        p.error(str(e))
    if not args.dtypes:
        p.error("nothing to run: empty --dtypes")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if args.curated and args.out:
        p.error("--curated names the output folder itself: give --curated or --out, not both")
    return args


def output_names(suites) -> dict:
    """File names inside the output folder: '<suite>.csv' per suite and 'report' -> 'report.md'
    (no date or tag: the run is identified by the files' '# key: value' lines)."""
    names = {s: f"{s}.csv" for s in suites}
    names["report"] = "report.md"
    return names


def resolve_out_dir(out: Optional[str], curated: bool, env: dict, is_cuda: bool, root: Optional[str] = None) -> str:
    """The run's output folder: ``out`` (relative to the working directory), or with ``curated``
    ``<repo>/benchmarks/results/<gpu-slug>/``, else ``<repo>/out/bench/<slug>/`` (bu.default_out_dir;
    the repository is found from this file, never the working directory). The curated results are
    GPU results: a CPU run into benchmarks/results raises SystemExit."""
    root = root or bu.REPO_ROOT
    results = os.path.join(root, bu.RESULTS_DIR)
    if curated:
        if not is_cuda:
            raise SystemExit("--curated: refused on the CPU path; benchmarks/results/ holds GPU results only "
                             "(a CPU run writes to out/bench/ by default, or give --out)")
        return bu.curated_dir(env, root)
    if out:
        path = os.path.abspath(out)
        if not is_cuda and bu.is_within(path, results):
            raise SystemExit(f"--out {out}: refused on the CPU path; {bu.RESULTS_DIR}/ holds curated GPU results "
                             "only (use the default out/bench/ or another folder)")
        return path
    return bu.default_out_dir(env, root)


def _mode(is_cuda: bool, quick: bool, full: bool) -> str:
    if is_cuda or full:
        return "gpu-quick" if quick else "gpu"
    return "cpu-quick" if quick else "cpu"


def list_cases(suites, plan: dict, dtypes, seed: int = 0, mode: str = "gpu") -> list:
    """Lines describing the cases of each suite (for --list); ``mode`` picks the sizes of the suites kept in their
    own modules (clients, gpytorch, solvers, switch)."""
    lines = []
    for s in suites:
        if s in ("clients", "gpytorch", "deltanet", "solvers", "switch", "shapes"):
            from . import clients, deltanet, gp_clients, shapes, solvers, switch_clients

            mod = {"clients": clients, "gpytorch": gp_clients, "deltanet": deltanet, "solvers": solvers,
                   "switch": switch_clients, "shapes": shapes}[s]
            lines += mod.list_lines(mode, dtypes, seed)
            continue
        if s == "small":
            jobs = small_cases(plan, dtypes, seed)
        elif s == "batched":
            jobs = _dt_jobs(batched_cases(plan, seed), dtypes)
        elif s == "large":
            jobs = _dt_jobs(large_cases(plan, seed), dtypes)
        elif s in ("ablation", "split"):
            jobs = _dt_jobs([Case(s, "square", m, m) for m in plan[s]], dtypes)
        else:
            apis = [label for label, _ in overhead_apis()]
            lines.append(f"{s}: {len(plan['overhead']) * len(apis)} cases")
            lines += [f"  m={m} n={n} float32 {label}" for m, n in plan["overhead"] for label in apis]
            continue
        lines.append(f"{s}: {len(jobs)} cases")
        for c, dt in jobs:
            lines.append(f"  {c.case:<16} {c.shape:<30} {bu.dtype_name(dt)}")
    return lines


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _run_suites(ctx, args, names, header, intro, reports, all_targets, all_rows, times) -> bool:
    """Runs the selected suites in order, printing and writing each; True when interrupted."""
    device, is_cuda = ctx.device, ctx.is_cuda
    interrupted = False
    for suite in args.suites:
        t0 = time.perf_counter()
        print(f"\n== {suite}", flush=True)
        try:
            res = SUITE_FUNCS[suite](ctx)
        except KeyboardInterrupt:
            interrupted = True
            break
        except Exception as e:  # noqa: BLE001 - a broken suite must not lose the others
            print(f"suite {suite} failed: {_short(e, 400)}", file=sys.stderr)
            _cleanup(device)
            continue
        times[suite] = time.perf_counter() - t0
        evaluated = rp.evaluate_targets(res.targets, res.rows, applicable=is_cuda)
        if evaluated:
            print(f"targets ({rp.target_counts(evaluated)}):")
            print("\n".join(rp.target_lines(evaluated)))
        print(f"{suite}: {len(res.rows)} rows ({rp.status_summary(res.rows)}) in {times[suite]:.1f} s", flush=True)
        all_targets += evaluated
        all_rows += res.rows
        title = res.title + (" (interrupted: partial)" if ctx.interrupted else "")
        reports.append(rp.SuiteReport(suite, title, res.method, res.table, res.rows, evaluated, names[suite],
                                      times[suite], res.extra_md))
        if not args.no_save:
            try:
                path = os.path.join(args.out, names[suite])
                bu.write_csv(path, res.rows, res.columns, header + [("suite", suite)] + list(res.extra_header.items()))
                report_path = os.path.join(args.out, names["report"])
                with open(report_path, "w") as f:
                    f.write(rp.markdown_report(header, intro, reports))
                print(f"wrote {path} (and {names['report']})", flush=True)
            except OSError as e:
                print(f"could not write results: {_short(e)}", file=sys.stderr)
        if ctx.interrupted:
            interrupted = True
            break

    return interrupted


def main(argv=None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()

    device = bu.resolve_device(args.device)
    is_cuda = device.type == "cuda"
    mode = _mode(is_cuda, args.quick, args.full)
    plan = PLANS[mode]
    if args.list:
        print(f"mode {mode}")
        print("\n".join(list_cases(args.suites, plan, args.dtypes, args.seed, mode)))
        return 0
    if not is_cuda:
        why = "no CUDA device" if not torch.cuda.is_available() else "--device cpu"
        print(f"{why}: running the CPU path (perf_counter timing, smaller sizes, no CUDA graph numbers; "
              "the GPU targets are shown as n/a)", flush=True)

    import hsma_trsm  # noqa: F401 - loads the extension (fails early if it is not built)

    if args.threads:
        torch.set_num_threads(args.threads)

    env = bu.env_info(device)
    if is_cuda:
        l2 = f", L2 {env['l2_cache_mib']} MiB" if env.get("l2_cache_mib") else ""
        print(f"device: {env['gpu']} (cuda:{device.index}, sm_{env['capability'].replace('.', '')}, "
              f"{env['sm_count']} SMs, {env['gpu_memory_gib']} GiB{l2})")
        try:
            if not torch._C._dispatch_has_kernel_for_dispatch_key("hsma::trsm", "CUDA"):
                print("WARNING: hsma::trsm has no CUDA kernel registered (extension built without CUDA?); "
                      "hsma rows will fail", flush=True)
        except Exception:  # noqa: BLE001 - private API, best effort
            pass
    else:
        print(f"device: CPU ({env['cpu']}, {env['threads']} threads)")
    print(f"torch {env['torch']}, cuda {env['cuda']}, hip {env['hip']}, hsma_trsm {env['hsma_trsm']} "
          f"(git {env['git']}), date {env['date']}, float32 matmul precision {env['float32_matmul_precision']}")
    out = None if args.no_save else resolve_out_dir(args.out, args.curated, env, is_cuda)
    print(f"suites: {', '.join(args.suites)} ({mode} sizes); dtypes: {', '.join(map(bu.dtype_name, args.dtypes))}; "
          f"{rp.SPEEDUP_NOTE}; 'gr.' = CUDA graph replay per call (GPU time only); each time the median of "
          f"{args.rounds} round medians", flush=True)
    print(f"output: {out if out else 'none (--no-save)'}", flush=True)
    if out and bu.is_within(out, os.path.join(bu.REPO_ROOT, bu.RESULTS_DIR)) and \
            os.path.basename(os.path.normpath(out)) != bu.run_slug(env):
        print(f"WARNING: {out} is in the curated results but not this GPU's folder ({bu.run_slug(env)})", flush=True)
    if torch.ops.hsma._get_overrides():
        print(f"note: development overrides are set ({torch.ops.hsma._get_overrides()}, from HSMA_TRSM_OVERRIDES): "
              "every hsma solve runs under them; the ablations change only their own keys")
    if os.environ.get("HSMA_TRSM_TABLE"):
        print(f"note: HSMA_TRSM_TABLE={os.environ['HSMA_TRSM_TABLE']}: this block-size table, not the package's")

    ctx = Ctx(device=device, mode=mode, dtypes=args.dtypes, args=args, env=env, budget_scale=args.budget_scale,
              deadline=(t_start + args.time_budget) if args.time_budget > 0 else 0.0, plan=plan)
    names = output_names(args.suites)
    header = bu.result_header(env, rounds=args.rounds)
    intro = (f"hsma_trsm against torch.linalg.solve_triangular, same process and inputs; **{rp.SPEEDUP_NOTE}**. "
             f"Every time is the median of {args.rounds} round medians, each round a median over calls: " + (
                 "eager = isolated calls timed with CUDA events (device synchronized before each, launch overhead "
                 "included); graph = per-call time of N calls captured in one CUDA graph (GPU time only). "
                 if is_cuda else "CPU path: time.perf_counter() around single calls (no graph times). ")
             + f"A case is noisy when its round medians differ by more than {NOISY_SPREAD:g}x, implausible when a "
             "median exceeds the slowest credible time for its flops and bytes on this device, capped when its "
             "calls hit the case's time cap. rel err = ||X - X_ref|| / ||X_ref|| against a float64 (complex128) "
             "torch solve of the first <= 64 batch entries and <= 32 columns (rows for right solves). Targets "
             "from the issues: PASS / MISS on the values shown"
             + ("." if is_cuda else "; n/a on the CPU path (they are GPU targets)."))
    if is_cuda:
        bu.gpu_warmup(0.5)  # clocks up, CUDA / cuBLAS initialised before the first case
    args.out = out
    if out:
        os.makedirs(out, exist_ok=True)

    reports, all_targets, all_rows, times = [], [], [], {}
    interrupted = False
    # `timeout` (scripts/gpu_run.sh) sends SIGTERM: treat it like Ctrl-C, so the suite running keeps
    # its finished rows and is written out.
    prev_term = None
    try:
        prev_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    except ValueError:  # not the main thread
        pass
    try:
        interrupted = _run_suites(ctx, args, names, header, intro, reports, all_targets, all_rows, times)
    finally:
        if prev_term is not None:
            signal.signal(signal.SIGTERM, prev_term)

    print("\n== summary")
    for s, t in times.items():
        rows = [r for r in all_rows if r.get("suite") == s]
        print(f"  {s:<9} {t:6.1f} s  {rp.status_summary(rows)}")
    print(f"  total     {time.perf_counter() - t_start:6.1f} s (including start-up)")
    print(f"statuses: {rp.status_summary(all_rows)}")
    if all_targets:
        print(f"targets: {rp.target_counts(all_targets)}")
    if out:
        print(f"results: {out}")
    if interrupted:
        print("interrupted: the finished suites and the finished cases of the interrupted one were saved",
              file=sys.stderr)
    failed = rp.count_in(all_rows, rp.FAILED)
    flagged = rp.count_in(all_rows, rp.FLAGGED)
    skipped = rp.count_in(all_rows, rp.SKIPPED)
    if failed:
        print(f"{failed} case(s) failed ({', '.join(rp.FAILED)}): see their status column", file=sys.stderr)
    if flagged:
        print(f"{flagged} case(s) flagged ({', '.join(rp.FLAGGED)}): measured, but do not trust their values",
              file=sys.stderr)
    if skipped:
        print(f"{skipped} case(s) skipped (time budget, lost CUDA context or a package not installed): not run, "
              "not failed", file=sys.stderr)
    return 1 if (args.strict and (failed or interrupted)) else 0


if __name__ == "__main__":
    sys.exit(main())
