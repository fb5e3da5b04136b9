"""Suite deltanet: chunked linear attention (DeltaNet) on hsma against flash-linear-attention's solve_tril (issue 43).

Per 64-row chunk DeltaNet needs T = (I + A)^-1 with A strictly lower (A = beta K K^T below the diagonal), and
then w = T (beta K), u = T (beta V). flash-linear-attention (fla-core 0.6.0) stores A as [B, T, H, BT] float32
(row t of chunk t // BT, head h, column j) and inverts it with ``fla.ops.utils.solve_tril(A, output_dtype=...)``
(Triton; output in the same layout). hsma reads the same memory as a strided (B, T/BT, H, BT, BT) view
(:func:`chunk_view`) with ``unitriangular=True``: the stored diagonal of A is 0 and is never read.

Groups (case column):

    inverse  fla's solve_tril benchmark shapes (B1 T8192 H96, B4 T4096 H64, B8 T2048 H32) x BT in {16, 32, 64},
             output float32 and bfloat16: fla ``solve_tril(A, output_dtype=)`` against
             ``hsma_trsm.inverse_triangular(view, upper=False, unitriangular=True, out_dtype=)`` (result
             (*, BT, BT) contiguous) against torch (``torch.linalg.solve_triangular(view, I expanded,
             unitriangular=True)``, float32 only: torch has no half-precision solve, its bfloat16 rows are NaN);
    wu       the w/u step at the same shapes, BT = 64, K = V = 128: fla's pipeline, ``solve_tril`` with bfloat16
             output then its fused w/u kernel (``fla.ops.delta_rule.wy_fast.recompute_w_u_fwd``: w = Ai (beta
             K), u = Ai (beta V), bf16 k, v and beta, beta applied inside), against one hsma solve of the view
             of A against the view of [beta K | beta V], unitriangular: hsma = fla's float32 A with the bfloat16
             right-hand side as they are (``trsm(..., out_dtype=torch.bfloat16)``: bfloat16 result, fla's
             output dtype), hsma_bf16 = A rounded to bfloat16 as well (``solve_triangular``), hsma_inv =
             ``hsma_trsm.solve_tril`` (bfloat16 output) then fla's w/u kernel. [beta K | beta V] is formed
             beforehand (bf16, [B, T, H, K + V]) and not timed;
    qwen     transformers' Qwen3.5 fallback form, ``solve_triangular(ut [B, H, NC, 64, 64], v_beta [B, H, NC,
             64, dv], upper=False, unitriangular=True)``, ut = tril(beta K K^T) with its diagonal (beta |k|^2,
             not 1) stored, float32 and bfloat16: hsma against torch (float32 only);
    bf16     batches of 8192 and 16384 lower 64 x 64 systems against 64 x 64: hsma in bfloat16 against hsma in
             float32 on the same values (hsma_f32) and torch float32;
    e2e      fla's ``chunk_gated_delta_rule`` forward, and forward + backward, at training shapes (K = V = 128, bf16),
             stock against fla's unfused intra-chunk step with fla's solve_tril (fla_unfused) and with hsma's (hsma),
             eager only (benchmarks/deltanet_e2e.py says why the swap needs the unfused step).

A is built as fla's chunk_scaled_dot_kkt builds it (l2-normalized keys, beta = sigmoid(randn)). Each contender's
first call is checked on 8 matrices spread over the batch against a float64 reference (max abs diff; hsma's
must stay within 1e-3 (float32 result) / 3e-2 (bfloat16) times max(1, max |ref|); fla and torch are reported,
not judged), then timed as core.py times a solve: rounds of isolated CUDA-event-timed calls (eager) and CUDA graph
replays (GPU time only). Bytes (hsma's least traffic): A's strict triangle read (BT(BT-1)/2 elements: the unit
diagonal is not read) plus, for the inverse, the whole BT x BT inverse written (the zeros above the diagonal
included, as both fla and hsma write them), for solves the right-hand side read and the solution written.

fla is imported lazily. Its rows (inverse, wu) are "skipped (no GPU)" on the CPU path (Triton) and "skipped (fla
not installed)" where it cannot be imported; qwen and bf16 need hsma only. To make fla available (the GPU machine
has no network; fla-core is pure Python and needs torch, triton >= 3.3, einops and packaging, nothing else at
import time):

    pip download --no-deps fla-core==0.6.0 -d wheels      # here, with network; wheels/ is git-ignored
    # the device tool's run: carry=["wheels"]; scripts/gpu_run.sh's bench stage then runs
    pip install --no-deps --no-index wheels/fla_core-0.6.0-py3-none-any.whl

Without the install the suite unzips the newest ``wheels/fla_core-*.whl`` into ``out/fla_core/<wheel>/``
(git-ignored) and imports fla from there (:func:`import_fla`).

fla's kernels are autotuned on their first call per (H, BT, dtypes): 12-16 configs each compiled and timed,
several seconds per key, over a minute for the whole plan on a cold Triton cache. Before the first fla row the
suite compiles every config of every key the plan needs in parallel child processes (:func:`precompile_fla`;
Triton's on-disk cache, no launches, no timing), so the autotuning in the run itself only times the configs.
HSMA_BENCH_FLA_PRECOMPILE=0 turns this off, =N sets the number of processes (default min(12, CPUs)). The first
call's time (autotuning included) is the column fla_first_s; the later runs of a warm machine find the tuning
in the cache (fla enables Triton's autotune cache).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from . import core
from . import output
from . import report as rp
from . import timing as tm
from . import util as bu
from .deltanet_data import chunk_view, deltanet_A, pick_index, unit_lower
from .deltanet_e2e import gdn_inputs, gdn_step, step_flops, unfused_intra
from .fla_kernels import Fla, import_fla, precompile_fla
from .report import Col, Table, Target, f_err, f_frac_pct, f_rate, f_us, f_x, ratio
from .tidy import Tidy

SUITE = "deltanet"
GROUPS = ("inverse", "wu", "qwen", "bf16", "e2e")
FLA_GROUPS = ("inverse", "wu", "e2e")  # the groups that compare against fla
F32, BF16 = torch.float32, torch.bfloat16
NAN = math.nan

# Statuses of rows that cannot run here (not failures: --strict ignores them)
SKIPPED_NO_GPU = "skipped (no GPU)"
SKIPPED_NO_FLA = "skipped (fla not installed)"

# fla's solve_tril benchmark shapes (B, T, H)
FLA_SHAPES = [(1, 8192, 96), (4, 4096, 64), (8, 2048, 32)]

# Sizes per mode (cases.PLANS' modes): inverse and wu shapes (B, T, H), the chunk sizes BT of the inverse rows,
# (K, V) of the w/u and e2e rows, qwen shapes (B, H, T) with dv value columns, the bf16 group's batches, the e2e
# shapes (B, T, H): issue 52's training shapes.
GDN_SHAPES = [(4, 8192, 16), (1, 32768, 32), (16, 2048, 8)]
PLANS = {
    "gpu": dict(inverse=FLA_SHAPES, bts=[16, 32, 64], wu=FLA_SHAPES, wu_kv=(128, 128),
                qwen=[(1, 32, 8192), (4, 32, 4096)], dv=128, bf16=[8192, 16384], e2e=GDN_SHAPES),
    "gpu-quick": dict(inverse=[(4, 4096, 64)], bts=[64], wu=[(4, 4096, 64)], wu_kv=(128, 128),
                      qwen=[(1, 32, 8192)], dv=128, bf16=[8192], e2e=GDN_SHAPES[:1]),
    "cpu": dict(inverse=[(1, 512, 4)], bts=[16, 32, 64], wu=[(1, 512, 4)], wu_kv=(32, 32),
                qwen=[(1, 4, 512)], dv=32, bf16=[512], e2e=[(1, 512, 4)]),
    "cpu-quick": dict(inverse=[(1, 128, 2)], bts=[64], wu=[(1, 128, 2)], wu_kv=(32, 32),
                      qwen=[(1, 2, 128)], dv=32, bf16=[64], e2e=[(1, 128, 2)]),
}
KEY_DIM = 64  # head dim of the keys that build A for the inverse rows (fla's solve_tril test uses 64)
TOL = {F32: 1e-3, BF16: 3e-2}  # hsma's max abs diff / max(1, max |ref|) above this: inaccurate

# Per row: up to four contenders, each checked, timed eagerly and by graph replay (about 0.5 s on the H200);
# core.BUDGETS["gpu"]["deltanet"] (90 s) also covers fla's autotuning. graph_max_us is per contender here.
TIMING = {
    "gpu": tm.TimingCfg(warmup=2, target_s=0.03, min_reps=6, max_reps=60, max_s=0.25, cap_s=2.0, graph_max_us=10000.0,
                        graph_replay_s=2e-3, graph_max_calls=20, graph_target_s=0.02, graph_min_reps=5,
                        graph_max_reps=20),
    "cpu": tm.TimingCfg(warmup=1, target_s=0.01, min_reps=3, max_reps=10, max_s=0.3, warm_after_s=0.25, cap_s=2.0,
                        graph=False),
}

# Contender column prefixes: hsma is each row's headline hsma call; hsma_bf16 (wu) the all-bfloat16 solve;
# hsma_inv (wu) hsma's solve_tril and fla's w/u kernel; hsma_f32 (bf16) the float32 solve of the same values;
# hsma_solve (inverse) the inverse by the solve against an identity (the override inverse=solve), where hsma is
# trtri's own choice.
NAMES = ("fla", "hsma", "torch", "hsma_bf16", "hsma_inv", "hsma_f32", "hsma_solve", "fla_unfused")
# Per group the contender the long CSV's ratios are against (the headline comparison of the group).
BASELINE = {"inverse": "fla", "wu": "fla", "qwen": "torch", "bf16": "hsma_f32", "e2e": "fla"}


# ----------------------------------------------------------------------------------------------
# Cases


@dataclass(frozen=True)
class DCase:
    """One row. inverse / wu: fla's layout [B, T, H, BT]; qwen: B, H and T = 64 NC; bf16: B = the batch.
    dtype: inverse the output dtype, wu the right-hand side's (bfloat16), qwen / bf16 the inputs'. n: right-hand
    side columns (wu K + V, qwen dv, bf16 64; 0 for the inverse). bwd: e2e rows time the backward too."""

    group: str
    B: int
    T: int
    H: int
    BT: int
    dtype: torch.dtype
    n: int = 0
    seed: int = 0
    bwd: bool = True

    @property
    def k(self) -> int:
        """Order of each triangular matrix."""
        return self.BT

    @property
    def matrices(self) -> int:
        if self.group == "bf16":
            return self.B
        return self.B * (self.T // self.BT) * self.H

    @property
    def shape(self) -> str:
        if self.group == "bf16":
            return f"b={self.B} k={self.k} n={self.n}"
        if self.group == "qwen":
            return f"B{self.B} H{self.H} NC{self.T // self.BT} k={self.k} dv={self.n}"
        s = f"B{self.B} T{self.T} H{self.H} BT{self.BT}"
        return s + (f" K+V={self.n}" if self.group in ("wu", "e2e") else "") + ("" if self.bwd else " fwd")


def deltanet_cases(plan: dict, dtypes=(F32,), seed: int = 0) -> list:
    """The suite's rows in report order (groups as GROUPS). Every row has float32 data (bfloat16 rows are float32
    A with bfloat16 output, or bfloat16 inputs, which --dtypes cannot name): none unless float32 is in dtypes."""
    if F32 not in dtypes:
        return []
    out = []

    def add(*args, **kw):
        out.append(DCase(*args, seed=seed + 101 * len(out), **kw))

    for B, T, H in plan["inverse"]:
        for bt in plan["bts"]:
            for dt in (F32, BF16):
                add("inverse", B, T, H, bt, dt)
    kdim, vdim = plan["wu_kv"]
    for B, T, H in plan["wu"]:
        add("wu", B, T, H, 64, BF16, n=kdim + vdim)
    for B, H, T in plan["qwen"]:
        for dt in (F32, BF16):
            add("qwen", B, T, H, 64, dt, n=plan["dv"])
    for b in plan["bf16"]:
        add("bf16", b, 0, 0, 64, BF16, n=64)
    for B, T, H in plan["e2e"]:
        for bwd in (False, True):
            add("e2e", B, T, H, 64, BF16, n=kdim + vdim, bwd=bwd)
    return out


def run_order(cases: list) -> list:
    """(index, case) in the order they run: BT = 64 inverse and w/u rows first (fla's production chunk size), then
    qwen and bf16, BT = 16 / 32 inverse rows (fla's costliest autotuning), e2e last (fla's whole step autotunes,
    minutes on a cold cache: run it with --budget-scale 0), so that a used-up time budget skips those first."""
    rank = {"wu": 1, "qwen": 2, "bf16": 3, "e2e": 7}

    def key(job):
        i, c = job
        if c.group == "inverse":
            return ({64: 0, 16: 4, 32: 5}.get(c.BT, 6), i)
        return (rank[c.group], i)

    return sorted(enumerate(cases), key=key)


def list_lines(mode: str, dtypes, seed: int = 0) -> list:
    """--list lines of the suite."""
    cases = deltanet_cases(PLANS[mode], dtypes, seed)
    return [f"{SUITE}: {len(cases)} cases"] + [f"  {c.group:<16} {c.shape:<30} {bu.dtype_name(c.dtype)}"
                                              for c in cases]


# ----------------------------------------------------------------------------------------------
# Bytes and rates


def case_bytes(case: DCase) -> int:
    """Least memory traffic of hsma's call: A's strict triangle read (unit diagonal: BT(BT-1)/2 elements; float32
    for inverse and wu, the input dtype for qwen; bf16 solves read the whole triangle, non-unit), plus the whole
    BT x BT inverse written (inverse) or the right-hand side read and the solution written (wu: bf16; qwen,
    bf16: the input dtype)."""
    k, m = case.k, case.matrices
    if case.group == "e2e":
        return 0  # (a whole training step: no least traffic of hsma's own)
    tri = bu.triangle_elements(k, unit=case.group != "bf16")
    if case.group == "inverse":
        return m * (tri * 4 + k * k * case.dtype.itemsize)
    if case.group == "wu":
        return m * (tri * 4 + k * case.n * (2 + 2))
    s = case.dtype.itemsize
    return m * (tri + 2 * k * case.n) * s


def add_rates(row: dict) -> dict:
    """Ratios (> 1: hsma faster) and hsma's (and fla's) bandwidth, from the times in the row:
    fla_speedup = fla / hsma, speedup = torch / hsma, fla_speedup_bf16 = fla / hsma_bf16, fla_speedup_inv = fla /
    hsma_inv, vs_f32 = hsma_f32 / hsma, fla_speedup_solve = fla / hsma_solve, fla_speedup_unfused = fla_unfused /
    hsma, each eager and graph;
    GB/s = bytes over the GPU-only (graph) time where measured, else the eager time (bw_basis), *_bw_frac = GB/s /
    copy_gbs."""
    for key, num, den in (("fla_speedup", "fla", "hsma"), ("speedup", "torch", "hsma"),
                          ("fla_speedup_bf16", "fla", "hsma_bf16"), ("fla_speedup_inv", "fla", "hsma_inv"),
                          ("vs_f32", "hsma_f32", "hsma"),
                          ("fla_speedup_solve", "fla", "hsma_solve"), ("fla_speedup_unfused", "fla_unfused", "hsma")):
        row[key] = ratio(row.get(f"{num}_us"), row.get(f"{den}_us"))
        gkey = "graph_" + key if key in ("speedup", "vs_f32") else key.replace("fla_", "fla_graph_", 1)
        row[gkey] = ratio(row.get(f"{num}_graph_us"), row.get(f"{den}_graph_us"))
    basis = "graph" if rp.finite(row.get("hsma_graph_us")) else "eager"
    row["bw_basis"] = basis
    for p in ("hsma", "fla"):
        us = row.get(f"{p}_graph_us" if basis == "graph" else f"{p}_us", NAN)
        row[f"{p}_gbs"] = bu.bandwidth_gbs(row["bytes"], us if rp.finite(us) and row["bytes"] else NAN)
        row[f"{p}_bw_frac"] = ratio(row[f"{p}_gbs"], row.get("copy_gbs", NAN))
    return row


def blank_row(case: DCase, copy_gbs: float = NAN) -> dict:
    """The row of a case, nothing measured."""
    row = dict(suite=SUITE, case=case.group, shape=case.shape, dtype=bu.dtype_name(case.dtype), B=case.B, T=case.T,
               H=case.H, BT=case.BT, k=case.k, n=case.n, matrices=case.matrices, bytes=case_bytes(case),
               copy_gbs=copy_gbs, fla_first_s=NAN, ref_max=NAN, status="", note="", rounds=0)
    for p in NAMES:
        row.update({f"{p}_us": NAN, f"{p}_min_us": NAN, f"{p}_reps": 0, f"{p}_graph_us": NAN, f"{p}_graph_calls": 0,
                    f"{p}_max_diff": NAN, f"{p}_spread": NAN, f"{p}_rounds_us": ""})
    return add_rates(row)


COLUMNS = (["suite", "case", "shape", "dtype", "B", "T", "H", "BT", "k", "n", "matrices"]
           + [f"{p}_us" for p in NAMES] + ["fla_speedup", "speedup", "fla_speedup_bf16", "fla_speedup_inv", "vs_f32",
                                          "fla_speedup_solve", "fla_speedup_unfused"]
           + [f"{p}_graph_us" for p in NAMES]
           + ["fla_graph_speedup", "graph_speedup", "fla_graph_speedup_bf16", "fla_graph_speedup_inv", "graph_vs_f32",
              "fla_graph_speedup_solve", "fla_graph_speedup_unfused"]
           + ["bytes", "bw_basis", "hsma_gbs", "fla_gbs", "copy_gbs", "hsma_bw_frac", "fla_bw_frac", "fla_first_s"]
           + [f"{p}_{s}" for s in ("min_us", "reps", "graph_calls") for p in NAMES]
           + [f"{p}_max_diff" for p in NAMES] + ["ref_max", "status", "note", "rounds"]
           + [f"{p}_{s}" for s in ("spread", "rounds_us") for p in NAMES])


# ----------------------------------------------------------------------------------------------
# Inputs, contenders and the reference


@dataclass
class Contender:
    name: str
    make: Callable  # inputs -> zero-argument callable
    pick: Callable  # (inputs, result) -> the checked matrices (batch of CHECK_MATRICES)
    ref: str = "ref"  # key of its float64 reference in the inputs
    checked: bool = True  # hsma's: its error decides the status
    tol: float = 1e-3
    graph: bool = True  # also timed by CUDA graph replay


def _forced(fn: Callable, **overrides) -> Callable:
    """fn under hsma's development overrides (set and restored around each call: a few microseconds)."""
    from hsma_trsm import _ops

    def call():
        with _ops.overrides(**overrides):
            return fn()
    return call


def build_inverse(case: DCase, device, fla: Optional[Fla]) -> tuple:
    """(inputs, contenders, notes) of an inverse row."""
    import hsma_trsm

    B, T, H, BT = case.B, case.T, case.H, case.BT
    g = bu._generator(device, case.seed)
    keys = torch.nn.functional.normalize(torch.randn(B, T, H, KEY_DIM, device=device, generator=g), dim=-1)
    beta = torch.sigmoid(torch.randn(B, T, H, device=device, generator=g))
    A = deltanet_A(B, T, H, BT, keys, beta)
    del keys, beta
    V = chunk_view(A, BT)
    idx = pick_index(V.shape[:-2], device)
    eye = torch.eye(BT, dtype=torch.float64, device=device)
    inputs = dict(A=A, V=V, ref=torch.linalg.solve_triangular(unit_lower(V[idx]), eye.expand(len(idx[0]), BT, BT),
                                                              upper=False))
    out = case.dtype
    tol = TOL[out]
    cons = []
    if fla is not None:
        cons.append(Contender("fla", lambda i: (lambda: fla.solve_tril(i["A"], output_dtype=out)),
                              lambda i, X: chunk_view(X, BT)[idx], checked=False, tol=tol))
    od = None if out == F32 else out  # float32: the default path (the input's dtype)
    cons.append(Contender("hsma", lambda i: (lambda: hsma_trsm.inverse_triangular(
        i["V"], upper=False, unitriangular=True, out_dtype=od)), lambda i, X: X[idx], tol=tol))
    cons.append(Contender("hsma_solve", lambda i: _forced(lambda: hsma_trsm.inverse_triangular(
        i["V"], upper=False, unitriangular=True, out_dtype=od), inverse="solve"), lambda i, X: X[idx], tol=tol))
    notes = []
    if out == F32:
        inputs["I"] = torch.eye(BT, device=device).expand(V.shape)
        cons.append(Contender("torch", lambda i: (lambda: torch.linalg.solve_triangular(
            i["V"], i["I"], upper=False, unitriangular=True)), lambda i, X: X[idx], checked=False, tol=tol))
    else:
        notes.append("torch: no bfloat16 triangular solve")
    return inputs, cons, notes


def build_wu(case: DCase, device, fla: Optional[Fla]) -> tuple:
    """(inputs, contenders, notes) of a w/u row."""
    import hsma_trsm

    B, T, H, BT = case.B, case.T, case.H, case.BT
    K = case.n // 2
    Vd = case.n - K
    g = bu._generator(device, case.seed)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K, device=device, generator=g), dim=-1).to(BF16)
    v = torch.randn(B, T, H, Vd, device=device, generator=g).to(BF16)
    beta = torch.sigmoid(torch.randn(B, T, H, device=device, generator=g)).to(BF16)
    A = deltanet_A(B, T, H, BT, k, beta)  # from the bf16 k and beta fla's kkt kernel reads
    R = torch.cat([k * beta[..., None], v * beta[..., None]], dim=-1)  # [beta K | beta V], bf16
    Av, Rv = chunk_view(A, BT), chunk_view(R, BT)
    Ah = A.to(BF16)
    Ahv = chunk_view(Ah, BT)
    idx = pick_index(Av.shape[:-2], device)
    Rs = Rv[idx].double()
    inputs = dict(A=A, k=k, v=v, beta=beta, Av=Av, Rv=Rv, Ahv=Ahv,
                  ref=torch.linalg.solve_triangular(unit_lower(Av[idx]), Rs, upper=False),
                  ref_h=torch.linalg.solve_triangular(unit_lower(Ahv[idx]), Rs, upper=False))
    cons = []
    if fla is not None:
        def wu(solve_tril):  # fla's w/u kernel after an inverse, fla's or hsma's (bf16 output, as fla's)
            return lambda i: (lambda: fla.recompute_w_u_fwd(i["k"], i["v"], i["beta"],
                                                            solve_tril(i["A"], output_dtype=BF16), None))

        pick_wu = lambda i, X: torch.cat([chunk_view(X[0], BT)[idx], chunk_view(X[1], BT)[idx]], dim=-1)  # noqa
        cons.append(Contender("fla", wu(fla.solve_tril), pick_wu, checked=False, tol=TOL[BF16]))
        cons.append(Contender("hsma_inv", wu(hsma_trsm.solve_tril), pick_wu, tol=TOL[BF16]))
    solve, trsm = hsma_trsm.solve_triangular, hsma_trsm.trsm
    cons.append(Contender("hsma", lambda i: (lambda: trsm(i["Av"], i["Rv"], unitriangular=True, out_dtype=BF16)),
                          lambda i, X: X[idx], tol=TOL[BF16]))
    cons.append(Contender("hsma_bf16", lambda i: (lambda: solve(i["Ahv"], i["Rv"], upper=False, unitriangular=True)),
                          lambda i, X: X[idx], ref="ref_h", tol=TOL[BF16]))
    return inputs, cons, []


def build_qwen(case: DCase, device, fla=None) -> tuple:
    """(inputs, contenders, notes) of a Qwen3.5 fallback row: ut [B, H, NC, 64, 64] with its diagonal stored."""
    import hsma_trsm

    B, H, NC, C, dv, dt = case.B, case.H, case.T // case.BT, case.BT, case.n, case.dtype
    g = bu._generator(device, case.seed)
    key = torch.nn.functional.normalize(torch.randn(B, H, NC, C, 128, device=device, generator=g), dim=-1)
    beta = torch.sigmoid(torch.randn(B, H, NC, C, 1, device=device, generator=g))
    ut = ((key * beta) @ key.mT).tril().to(dt)  # diagonal beta |k|^2, not 1: unitriangular ignores it
    v_beta = (torch.randn(B, H, NC, C, dv, device=device, generator=g) * beta).to(dt)
    del key
    idx = pick_index(ut.shape[:-2], device)
    inputs = dict(ut=ut, v_beta=v_beta,
                  ref=torch.linalg.solve_triangular(unit_lower(ut[idx]), v_beta[idx].double(), upper=False))
    cons = [Contender("hsma", lambda i: (lambda: hsma_trsm.solve_triangular(i["ut"], i["v_beta"], upper=False,
                                                                            unitriangular=True)),
                      lambda i, X: X[idx], tol=TOL[dt])]
    notes = []
    if dt == F32:
        cons.append(Contender("torch", lambda i: (lambda: torch.linalg.solve_triangular(
                                  i["ut"], i["v_beta"], upper=False, unitriangular=True)),
                              lambda i, X: X[idx], checked=False))
    else:
        notes.append("torch: no bfloat16 triangular solve")
    return inputs, cons, notes


def build_bf16(case: DCase, device, fla=None) -> tuple:
    """(inputs, contenders, notes) of a bf16 batched row: lower 64 x 64 (bu.make_triangular) against 64 x 64."""
    import hsma_trsm

    A32 = bu.make_triangular(case.k, batch=(case.B,), dtype=F32, device=device, seed=case.seed).to(BF16).float()
    B32 = bu.make_rhs(case.k, case.n, batch=(case.B,), dtype=F32, device=device, seed=case.seed + 1).to(BF16).float()
    A, Bm = A32.to(BF16), B32.to(BF16)  # the same values in both dtypes (bf16 rounding done once)
    idx = pick_index((case.B,), device)
    inputs = dict(A=A, B=Bm, A32=A32, B32=B32,
                  ref=torch.linalg.solve_triangular(A32[idx].double(), B32[idx].double(), upper=False))
    solve = hsma_trsm.solve_triangular
    cons = [Contender("hsma", lambda i: (lambda: solve(i["A"], i["B"], upper=False)), lambda i, X: X[idx],
                      tol=TOL[BF16]),
            Contender("hsma_f32", lambda i: (lambda: solve(i["A32"], i["B32"], upper=False)), lambda i, X: X[idx],
                      tol=TOL[F32]),
            Contender("torch", lambda i: (lambda: torch.linalg.solve_triangular(i["A32"], i["B32"], upper=False)),
                      lambda i, X: X[idx], checked=False)]
    return inputs, cons, []


def build_e2e(case: DCase, device, fla: Optional[Fla]) -> tuple:
    """(inputs, contenders, notes) of an e2e row: each contender's result is fla's output and gradients (samples
    of them), checked against stock fla's."""
    import hsma_trsm

    K = case.n // 2
    inputs = gdn_inputs(case.B, case.T, case.H, K, case.n - K, device, bu._generator(device, case.seed))
    stock = gdn_step(inputs, backward=case.bwd)()
    scale = [max(1.0, t.abs().max().item()) for t in stock]  # each tensor against its own size
    pick = lambda i, X: torch.cat([t.double() / s for t, s in zip(X, scale)])  # noqa: E731
    inputs["ref"] = pick(inputs, stock)
    variants = (("fla", None), ("fla_unfused", unfused_intra(fla.solve_tril)),
                ("hsma", unfused_intra(hsma_trsm.solve_tril)))
    cons = [Contender(name, lambda i, intra=intra: gdn_step(i, intra, case.bwd), pick, checked=name == "hsma",
                      tol=TOL[BF16], graph=False) for name, intra in variants]
    return inputs, cons, []


BUILDERS = {"inverse": build_inverse, "wu": build_wu, "qwen": build_qwen, "bf16": build_bf16, "e2e": build_e2e}


def _flops(case: DCase) -> float:
    """Flops of hsma's call (for the implausible flag only): k^3 / 3 per inverse, k^2 n per solve, e2e's step."""
    k = case.k
    if case.group == "e2e":
        return step_flops(case.B, case.T, case.H, k, case.n // 2, case.n - case.n // 2, case.bwd)
    per = k ** 3 / 3.0 if case.group == "inverse" else float(k * k * case.n)
    return per * case.matrices


# ----------------------------------------------------------------------------------------------
# One row


def run_row(case: DCase, device, cfg: tm.TimingCfg, copy_gbs: float = NAN, fla: Optional[Fla] = None) -> dict:
    """Builds the case's inputs and contenders, checks each contender's first call on CHECK_MATRICES matrices
    against the float64 reference, then times each: a second (warm) call, rounds of isolated calls
    (timing.time_eager), and on CUDA graph replays where its eager time is below cfg.graph_max_us. Never raises
    for a contender's failure: hsma's makes the row error / inaccurate, fla's or torch's (or a graph's)
    partial."""
    row = blank_row(case, copy_gbs)
    notes, failed = [], set()
    try:
        inputs, contenders, absent = BUILDERS[case.group](case, device, fla)
    except Exception as e:  # noqa: BLE001
        row.update(status=rp.ERROR, note="inputs: " + core.short(e))
        return row
    notes += absent
    row["ref_max"] = max(inputs[c.ref].abs().max().item() for c in contenders)
    fns, warm_s = {}, {}
    for c in contenders:
        try:
            fn = c.make(inputs)
            core.sync(device)
            t0 = time.perf_counter()
            X = fn()  # fla: autotunes here on the first call of a key
            core.sync(device)
            if c.name == "fla":
                row["fla_first_s"] = time.perf_counter() - t0
            row[f"{c.name}_max_diff"] = (c.pick(inputs, X).double() - inputs[c.ref]).abs().max().item()
            del X
            core.sync(device)
            t0 = time.perf_counter()
            fn()  # a warm call: its time sizes the timing (the first one may hold compiling and autotuning)
            core.sync(device)
            warm_s[c.name] = time.perf_counter() - t0
            fns[c.name] = fn
        except Exception as e:  # noqa: BLE001
            failed.add(c.name)
            notes.append(f"{c.name}: " + core.short(e))
    if failed:
        core.cleanup(device)

    timings = {}
    for c in contenders:
        if c.name in failed:
            continue
        try:
            t = tm.time_eager(fns[c.name], device, cfg, True, warm_s[c.name])
            timings[c.name] = t
            tm.record_timing(row, c.name, t)
        except Exception as e:  # noqa: BLE001
            failed.add(c.name)
            notes.append(f"{c.name} timing: " + core.short(e))

    if device.type == "cuda" and cfg.graph:
        for c in contenders:
            if c.name in failed or not c.graph or not (row[f"{c.name}_us"] <= cfg.graph_max_us):
                continue
            try:
                t = tm.graph_time(fns[c.name], row[f"{c.name}_us"], cfg)
                row[f"{c.name}_graph_us"], row[f"{c.name}_graph_calls"] = t.median_us, t.calls_per_sample
            except Exception as e:  # noqa: BLE001
                failed.add(f"graph-{c.name}")
                notes.append(f"graph({c.name}): " + core.short(e, root=True))
    del inputs, fns

    scale = max(1.0, row["ref_max"]) if rp.finite(row["ref_max"]) else 1.0
    bad = []
    for c in contenders:
        err = row[f"{c.name}_max_diff"]
        if c.name in failed or err <= c.tol * scale:
            continue
        if c.checked:
            bad.append(c.name)
        notes.append(f"{c.name} max diff {f_err(err)} > {c.tol:g} x {scale:.3g}")  # NaN included
    flag, flag_notes = tm.timing_flags(timings, device.type, _flops(case), row["bytes"], case.matrices)
    notes += flag_notes
    error = any(c.checked and c.name in failed for c in contenders)
    row.update(status=core.row_status(error, bool(bad), bool(failed), flag), note="; ".join(notes))
    return add_rates(row)


# ----------------------------------------------------------------------------------------------
# The suite


def _targets() -> list:
    both = lambda a, b: [("eager", a), ("graph", b)]  # noqa: E731
    inv = lambda r: r["case"] == "inverse"  # noqa: E731
    return [
        Target("inverse >= 3x fla solve_tril", inv, both("fla_speedup", "fla_graph_speedup"), ">=", 3.0),
        Target("inverse >= 70% of copy bandwidth", inv, [("", "hsma_bw_frac")], ">=", 0.7, fmt=f_frac_pct),
        Target("w/u solve >= 1.5x fla solve_tril + w/u kernel", lambda r: r["case"] == "wu",
               both("fla_speedup", "fla_graph_speedup"), ">=", 1.5),
        Target("bf16 batched 64x64 >= 1.5x hsma float32", lambda r: r["case"] == "bf16",
               both("vs_f32", "graph_vs_f32"), ">=", 1.5),
        Target("chunk_gated_delta_rule with hsma >= stock fla", lambda r: r["case"] == "e2e",
               [("eager", "fla_speedup")], ">=", 1.0),
    ]


def summary_lines(rows: list) -> list:
    """Markdown bullets: per group the geometric means of the ratios it has."""
    out = []
    keys = {"inverse": ("fla_speedup", "fla_graph_speedup", "fla_speedup_solve", "fla_graph_speedup_solve", "speedup"),
            "wu": ("fla_speedup", "fla_graph_speedup", "fla_speedup_bf16", "fla_speedup_inv"),
            "qwen": ("speedup", "graph_speedup"),
            "bf16": ("vs_f32", "graph_vs_f32"), "e2e": ("fla_speedup", "fla_speedup_unfused")}
    for g in GROUPS:
        sel = [r for r in rows if r["case"] == g]
        if sel:
            parts = [f"{k} {f_x(rp.geomean(r.get(k) for r in sel))}" for k in keys[g]]
            out.append(f"- {g} ({len(sel)} rows): " + ", ".join(parts))
    return out


def _alt_us(r: dict, graph: bool = False) -> float:
    """The row's second hsma call: hsma_inv (wu), hsma_f32 (bf16) or hsma_solve (inverse)."""
    sfx = "_graph_us" if graph else "_us"
    return next((v for v in (r.get(p + sfx, NAN) for p in ("hsma_inv", "hsma_f32", "hsma_solve")) if rp.finite(v)),
                NAN)


def _max_diff(r: dict) -> float:
    return max((r[f"{p}_max_diff"] for p in ("hsma", "hsma_bf16", "hsma_inv", "hsma_f32", "hsma_solve")
                if rp.finite(r[f"{p}_max_diff"])),
               default=NAN)


def suite_deltanet(ctx: core.Ctx) -> core.SuiteResult:
    cfg = ctx.timing(SUITE, TIMING["gpu" if ctx.is_cuda else "cpu"])
    copy_gbs = core.logged_copy_gbs(ctx.device)
    cases = deltanet_cases(PLANS[ctx.mode], ctx.dtypes, ctx.args.seed)
    if not cases:
        output.log("no cases: the suite's rows are float32 / bfloat16, and float32 is not among --dtypes")
    fla, why = (None, "no GPU")
    if ctx.is_cuda and any(c.group in FLA_GROUPS for c in cases):
        fla, why = import_fla()
        output.log(f"fla {fla.version} from {fla.root}" if fla else f"fla: not available ({why}); its rows are skipped")
    state = {}
    jobs = run_order(cases)
    table = Table([
        Col("group", 7, lambda r: r["case"], left=True), core.shape_col(30), core.C_DTYPE,
        Col("fla us", 8, lambda r: f_us(r["fla_us"])), Col("hsma us", 8, lambda r: f_us(r["hsma_us"])),
        Col("torch us", 8, lambda r: f_us(r["torch_us"])), Col("h-alt us", 8, lambda r: f_us(_alt_us(r))),
        Col("fla/hsma", 8, lambda r: f_x(r["fla_speedup"])), Col("gr.fla/h", 8, lambda r: f_x(r["fla_graph_speedup"])),
        Col("spd", 6, lambda r: f_x(r["speedup"])), Col("gr.spd", 6, lambda r: f_x(r["graph_speedup"])),
        Col("f32/bf16", 8, lambda r: f_x(r["vs_f32"])),
        Col("GB/s", 6, lambda r: f_rate(r["hsma_gbs"])), Col("%copy", 5, lambda r: f_frac_pct(r["hsma_bw_frac"])),
        Col("diff", 7, lambda r: f_err(_max_diff(r))),
        core.C_STATUS,
    ])

    def run_one(job):
        _, case = job
        if case.group in FLA_GROUPS:
            if not ctx.is_cuda:
                return dict(blank_row(case, copy_gbs), status=SKIPPED_NO_GPU,
                            note="fla's solve_tril is a Triton (GPU) kernel")
            if fla is None:
                return dict(blank_row(case, copy_gbs), status=SKIPPED_NO_FLA, note=why)
            if "precompile" not in state:
                pc = state["precompile"] = precompile_fla(fla, cases)
                output.log(f"fla precompile: {pc['kernels']} kernels by {pc['workers']} processes in "
                       f"{pc['seconds']:.1f} s" + (f"; {'; '.join(pc['errors'][:3])}" if pc["errors"] else ""))
        row = run_row(case, ctx.device, cfg, copy_gbs, fla if case.group in FLA_GROUPS else None)
        core.cleanup(ctx.device)  # hundreds of MB per case: give the memory back
        return row

    def skipped(job):
        return blank_row(job[1], copy_gbs)

    done = core.run_jobs(ctx, SUITE, jobs, table, run_one, skipped)
    rows = [row for _, row in sorted(zip((i for i, _ in jobs), done), key=lambda p: p[0])]  # report order
    summary = summary_lines(rows)
    for line in summary:
        output.log("  " + line[2:])
    pc = state.get("precompile")
    fla_line = (f"fla-core {fla.version} ({fla.root})" if fla else f"fla: not available ({why})")
    if pc:
        fla_line += (f"; its kernels precompiled by {pc['workers']} processes in {pc['seconds']:.1f} s "
                     f"({pc['kernels']} configs)")
    extra_md = ([fla_line + ".", "", "Geometric means (> 1: hsma faster):", ""] + summary
                + ["", f"Copy bandwidth: **{f_rate(copy_gbs)} GB/s** (`dst.copy_(src)`, 2 x bytes / median time)."])
    method = ("DeltaNet's per-chunk triangular work (issue 43): inverse = (I + A)^-1 of fla's [B, T, H, BT] float32 "
              "A (fla `solve_tril` / `hsma_trsm.inverse_triangular` on the strided (B, T/BT, H, BT, BT) view with "
              "unitriangular=True / torch `solve_triangular` against an expanded identity, float32 only; h-alt = hsma "
              "by the solve against an identity, the override inverse=solve); dtype = "
              "the inverse's output dtype. wu = w, u at BT 64, K = V = 128: fla `solve_tril` (bf16 output) + its "
              "w/u kernel `recompute_w_u_fwd` (bf16 k, v, beta) against one hsma solve of the A view against the "
              "[beta K | beta V] view (bf16, formed beforehand): hsma = float32 A (bf16 result), h-alt = "
              "hsma_inv, hsma `solve_tril` (bf16 output) + fla's w/u kernel; hsma_bf16 (CSV only): A in bf16 too. "
              "qwen = transformers' Qwen3.5 fallback `solve_triangular(ut, v_beta, upper=False, unitriangular=True)`, "
              "ut's stored diagonal not 1. bf16 = batches of 64 x 64 "
              "against 64 x 64 in bf16; h-alt = hsma float32 on the same values, f32/bf16 = its time / the bf16 "
              "time. e2e = fla chunk_gated_delta_rule forward (fwd), and forward + backward (bf16, K = V = 128): "
              "stock fla vs fla with its unfused intra-chunk step and hsma's solve_tril (fla_unfused: with fla's "
              "own), eager only, inputs requiring grad (fwd records autograd too), checked against stock fla. "
              "fla/hsma = fla time / hsma time, spd = torch / hsma, eager and graph (GPU-only). Every "
              "contender's first result checked on 8 matrices against float64 (diff = hsma's max abs diff). "
              "GB/s: A's strict triangle read (BT(BT-1)/2 float32) + the whole BT x BT inverse written (inverse), "
              "or + right-hand side read + solution written (solves), over hsma's graph time (eager where none); "
              f"%copy of the copy bandwidth measured in this run. Timing: about {cfg.target_s:g} s of calls per "
              "measurement in rounds; fla_first_s (CSV) is fla's first call, its autotuning included. Run order: "
              "BT 64 and wu first, BT 16 / 32 last (the time budget skips those first).")
    header = {"copy_gbs": f"{copy_gbs:.1f}" if rp.finite(copy_gbs) else "nan",
              "fla": fla.version if fla else f"not available: {why}"}
    if pc:
        header["fla_precompile_s"] = f"{pc['seconds']:.1f}"
    return core.SuiteResult(rows, COLUMNS, table, "deltanet: DeltaNet chunks, hsma vs fla solve_tril (issue 43)",
                            method, _targets(), extra_md, extra_header=header,
                            tidy=Tidy(impls=NAMES, baseline=lambda r: BASELINE[r["case"]], err="{impl}_max_diff"))
