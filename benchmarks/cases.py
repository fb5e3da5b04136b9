"""The solve suites' problems: the cases (a triangular solve's shape and options), their inputs, the hsma and
torch calls that solve them, and each suite's sizes and timing per mode.

Modes: "gpu" (CUDA), "gpu-quick" (CUDA --quick), "cpu" (no GPU), "cpu-quick". PLANS holds the sizes of the suites
small, batched, large, ablation, split and overhead; TIMING their timing settings per device kind.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from . import util as bu
from .timing import TimingCfg

ALL_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)


# rel. error above this flags the case "inaccurate" (inputs have condition number ~5; the
# kernel-digits factor ~1e3): a loose bound meant to catch real bugs, not rounding.
TOL = {torch.float32: 1e-3, torch.complex64: 1e-3, torch.float64: 1e-10, torch.complex128: 1e-10}


# ----------------------------------------------------------------------------------------------
# Sizes and timing per mode

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


def dt_jobs(cases, dtypes):
    """(case, dtype) pairs, dtype-major; the digits problem is real only, and op = A^H only for complex
    dtypes (for real ones it is op = A^T)."""
    return [(c, dt) for dt in dtypes for c in cases
            if not (c.digits and dt.is_complex) and not (c.trans == "C" and not dt.is_complex)]


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

    if case.trans == "N":  # keywords written out, as client code calls (a **kwargs call costs a builtin more)
        up, left, unit = case.upper, case.left, case.unit
        return lambda: hsma_trsm.solve_triangular(A, B, upper=up, left=left, unitriangular=unit)
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
    left, unit = case.left, case.unit
    return lambda: torch.linalg.solve_triangular(At, B, upper=up, left=left, unitriangular=unit)


def case_lines(suite: str, jobs) -> list:
    """--list lines of a solve suite's (case, dtype) jobs."""
    return [f"{suite}: {len(jobs)} cases"] + [f"  {c.case:<16} {c.shape:<30} {bu.dtype_name(dt)}" for c, dt in jobs]
