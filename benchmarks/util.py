from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import tempfile
from typing import Callable, Optional, Sequence

import torch

# The timers and the output helpers have their own modules (timing, output); scripts and notebooks that import
# them from here keep working.
from .output import (REPO_ROOT, RESULTS_DIR, csv_value, curated_dir, default_out_dir, env_info,  # noqa: F401
                     is_within, log, progress, read_csv, result_header, run_slug, slugify, write_csv, _git_revision)
from .timing import (Timing, choose_repeats, gpu_warmup, host_overhead, resolve_device, time_cpu,  # noqa: F401
                     time_cuda_events, time_cuda_graph, time_fn, time_rounds)

# ----------------------------------------------------------------------------------------------
# Inputs

_REAL = {
    torch.float32: torch.float32,
    torch.float64: torch.float64,
    torch.complex64: torch.float32,
    torch.complex128: torch.float64,
    torch.float16: torch.float16,
    torch.bfloat16: torch.bfloat16,
}

_DTYPE_ALIASES = {
    "float32": torch.float32, "f32": torch.float32, "fp32": torch.float32, "float": torch.float32, "s": torch.float32,
    "float64": torch.float64, "f64": torch.float64, "fp64": torch.float64, "double": torch.float64, "d": torch.float64,
    "complex64": torch.complex64, "c64": torch.complex64, "cfloat": torch.complex64, "c": torch.complex64,
    "complex128": torch.complex128, "c128": torch.complex128, "cdouble": torch.complex128, "z": torch.complex128,
}


def real_dtype(dtype: torch.dtype) -> torch.dtype:
    return _REAL[dtype]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def parse_dtype(name: str) -> torch.dtype:
    try:
        return _DTYPE_ALIASES[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; use one of float32, float64, complex64, complex128") from None


def _generator(device, seed):
    g = torch.Generator(device=torch.device(device))
    g.manual_seed(int(seed))
    return g


def make_triangular(
    k: int,
    *,
    batch: Sequence[int] = (),
    dtype: torch.dtype = torch.float32,
    device="cpu",
    upper: bool = False,
    unit: bool = False,
    seed: int = 0,
) -> torch.Tensor:
    """Problems and bookkeeping for the hsma_trsm benchmarks: inputs, flop and byte counts, the reference check,
the kernel-time split.

    make_triangular, make_rhs   well-conditioned triangular matrices / right-hand sides;
    trsm_flops, gemm_flops      flop counts (LAPACK convention); gflops, tflops: rates;
    trsm_bytes, bandwidth_gbs   least memory traffic of a solve and the achieved GB/s;
    copy_bandwidth              the device's measured copy bandwidth (the 100% line);
    rel_error, reference_subset ||X - X_ref|| / ||X_ref|| against a float64 reference (of a
                                batch/column subset, so large problems stay cheap to check);
    profile_kernels, classify_kernel, split_kernel_times
                                kernel times from torch.profiler summed by category;
    hsma_overrides              hsma_trsm's development overrides for a block;
    real_dtype, dtype_name, parse_dtype
                                dtype names as the CLI and the CSVs spell them.
The timers are in :mod:`benchmarks.timing`, the result files and the console in :mod:`benchmarks.output`.
"""
    device = torch.device(device)
    g = _generator(device, seed)
    shape = (*batch, k, k)
    A = torch.randn(shape, dtype=dtype, device=device, generator=g)
    A.mul_(1.0 / math.sqrt(k))
    A = A.triu(1) if upper else A.tril(-1)
    diag = A.diagonal(dim1=-2, dim2=-1)
    if unit:
        diag.fill_(1)
    else:
        rdt = real_dtype(dtype)
        mag = 1.0 + torch.rand((*batch, k), dtype=rdt, device=device, generator=g)
        if dtype.is_complex:
            phase = torch.rand((*batch, k), dtype=rdt, device=device, generator=g) * (2 * math.pi)
            diag.copy_(torch.polar(mag, phase))
        else:
            flip = torch.rand((*batch, k), dtype=rdt, device=device, generator=g) < 0.5
            diag.copy_(torch.where(flip, -mag, mag))
    return A


def make_rhs(
    m: int, n: int, *, batch: Sequence[int] = (), dtype: torch.dtype = torch.float32, device="cpu", seed: int = 1
) -> torch.Tensor:
    """Random ``(*batch, m, n)`` right-hand sides (standard normal)."""
    device = torch.device(device)
    return torch.randn((*batch, m, n), dtype=dtype, device=device, generator=_generator(device, seed))


def trsm_flops(m: int, n: int, *, batch: int = 1, left: bool = True, is_complex: bool = False) -> float:
    """Flops of one TRSM, LAPACK convention: ``m^2 n`` (left) or ``m n^2`` (right) real flops
    (a multiply-add counts 2, halved by the triangle), times ``batch``; complex counts 4x."""
    f = float(m) * m * n if left else float(m) * n * n
    return f * batch * (4.0 if is_complex else 1.0)


def gflops(flops: float, us: float) -> float:
    """GFLOP/s of ``flops`` done in ``us`` microseconds (NaN when the time is not positive)."""
    if not (us > 0) or not math.isfinite(us):
        return math.nan
    return flops / (us * 1e3)


def rel_error(X: torch.Tensor, ref: torch.Tensor) -> float:
    """||X - ref|| / ||ref|| (2-norm over all elements, batch included)."""
    num = torch.linalg.vector_norm(X - ref).item()
    den = torch.linalg.vector_norm(ref).item()
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


def tflops(flops: float, us: float) -> float:
    """TFLOP/s of ``flops`` done in ``us`` microseconds (NaN when the time is not positive)."""
    return gflops(flops, us) * 1e-3


def gemm_flops(m: int, k: int, n: int, *, batch: int = 1, is_complex: bool = False) -> float:
    """Flops of ``batch`` products of an ``m x k`` and a ``k x n`` matrix: ``2 m k n`` real flops
    each (a multiply-add counts 2), complex 4x. A left TRSM of the same shape (``m = k``) is
    half of it, so TRSM rate / GEMM rate = GEMM time / (2 * TRSM time)."""
    return 2.0 * m * k * n * batch * (4.0 if is_complex else 1.0)


def triangle_elements(k: int, unit: bool = False) -> int:
    """Elements a solve must read from a ``k x k`` triangle: ``k(k+1)/2``, ``k(k-1)/2`` when the
    diagonal is implicit (unit)."""
    return k * (k - 1) // 2 if unit else k * (k + 1) // 2


def trsm_bytes(
    m: int, n: int, *, itemsize: int, batch: int = 1, a_batch: Optional[int] = None, left: bool = True,
    unit: bool = False,
) -> int:
    """Least memory traffic of a (batched) TRSM: every distinct triangle of A read once (its
    triangle only, see :func:`triangle_elements`; ``a_batch`` matrices, default ``batch``, 1 for
    an A broadcast over the batch), B (``batch`` of ``m x n``) read once and X written once."""
    k = m if left else n
    a_batch = batch if a_batch is None else a_batch
    return (a_batch * triangle_elements(k, unit) + 2 * batch * m * n) * itemsize


def bandwidth_gbs(nbytes: float, us: float) -> float:
    """GB/s (1e9 bytes per second) of ``nbytes`` moved in ``us`` microseconds; NaN when the time
    is not positive."""
    if not (us > 0) or not math.isfinite(us):
        return math.nan
    return nbytes / (us * 1e3)


def copy_bandwidth(device, nbytes: Optional[int] = None) -> tuple:
    """Measured copy bandwidth of ``device``: ``dst.copy_(src)`` of ``nbytes`` (default 1 GiB on
    CUDA, far above the L2 cache; 64 MiB on the CPU), median of back-to-back event-timed copies
    (CUDA) or perf_counter (CPU). Counts ``2 * nbytes`` (read + write). Returns (GB/s, Timing,
    nbytes)."""
    device = torch.device(device)
    is_cuda = device.type == "cuda"
    if nbytes is None:
        nbytes = (1 << 30) if is_cuda else (64 << 20)
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    fn = lambda: dst.copy_(src)  # noqa: E731
    if is_cuda:
        # isolate=False: copies queue back to back, each event pair brackets GPU time only.
        t = time_cuda_events(fn, warmup=3, target_s=0.05, min_reps=10, max_reps=50, isolate=False)
    else:
        t = time_cpu(fn, warmup=2, target_s=0.2, min_reps=5, max_reps=20)
    nbytes = (nbytes // 4) * 4
    return bandwidth_gbs(2 * nbytes, t.median_us), t, nbytes


_DOUBLE = {
    torch.float32: torch.float64,
    torch.float64: torch.float64,
    torch.complex64: torch.complex128,
    torch.complex128: torch.complex128,
}


def reference_subset(
    A: torch.Tensor,
    B: torch.Tensor,
    *,
    left: bool = True,
    upper: bool = False,
    trans: str = "N",
    unit: bool = False,
    max_cols: int = 32,
    max_batch: int = 64,
):
    """Float64 (complex128) reference for part of ``op(A) X = B`` (left) or ``X op(A) = B``
    (right): the first ``max_batch`` entries of the broadcast batch and the first ``max_cols``
    columns (left) or rows (right) of B, which a triangular solve treats independently, solved
    by ``torch.linalg.solve_triangular`` on ``op(A)`` (``A.mT`` / ``A.mH`` views for 'T' / 'C').
    Keeps the check cheap for 16384 x 16384 problems and batches of 10000.

    Returns ``(ref, select)``: ``select(X)`` takes the same part of a full result X (in the
    reference dtype), so ``rel_error(select(X), ref)`` is X's relative error there.
    """
    dd = _DOUBLE.get(A.dtype, torch.float64)
    batch = tuple(torch.broadcast_shapes(A.shape[:-2], B.shape[:-2]))
    if batch:
        count = min(math.prod(batch), max_batch)
        idx = torch.unravel_index(torch.arange(count, device=B.device), batch)

        def pick(T):  # advanced indexing on the expanded view gathers only `count` matrices
            return T.expand(*batch, *T.shape[-2:])[idx]
    else:

        def pick(T):
            return T

    m, n = B.shape[-2], B.shape[-1]

    def part(T):
        return T[..., :, : min(n, max_cols)] if left else T[..., : min(m, max_cols), :]

    Ad = pick(A).to(dd)
    tr = trans.upper()
    if tr == "T":
        Ad, up = Ad.mT, not upper
    elif tr == "C":
        Ad, up = Ad.mH, not upper
    else:
        up = upper
    ref = torch.linalg.solve_triangular(Ad, part(pick(B)).to(dd), upper=up, left=left, unitriangular=unit)
    return ref, lambda X: part(pick(X)).to(dd)


# ----------------------------------------------------------------------------------------------
# Kernel-time split (torch.profiler) and host overhead

_KERNEL_CATEGORIES = (
    ("inverse", re.compile(r"diag_inverse", re.I)),
    ("small", re.compile(r"small_solve|small_pipeline", re.I)),
    ("gemm", re.compile(r"gemm|gemv|cutlass|xmma|nvjet|splitkreduce|cublas", re.I)),
)
KERNEL_CATEGORIES = tuple(c for c, _ in _KERNEL_CATEGORIES) + ("other",)


def classify_kernel(name: str) -> str:
    """Category of a kernel name: 'inverse' (hsma's diagonal-block inversion), 'small' (hsma's
    direct small-solve kernels), 'gemm' (cuBLAS / CUTLASS GEMM and GEMV kernels, split-K
    reductions) or 'other' (copies, fills, memcpy/memset, anything else)."""
    for cat, rx in _KERNEL_CATEGORIES:
        if rx.search(name):
            return cat
    return "other"


def device_kernel_times(events, on_device: bool = True) -> list:
    """(name, microseconds) of every device activity (kernels, memcpy, memset) in a
    torch.profiler event list; with ``on_device=False`` (CPU path: there are no kernels) the
    self CPU time of every CPU op instead."""
    DeviceType = torch.autograd.DeviceType
    out = []
    for e in events:
        if on_device:
            if e.device_type != DeviceType.CUDA or getattr(e, "is_user_annotation", False):
                continue
            out.append((e.name, float(e.time_range.elapsed_us())))
        else:
            if e.device_type != DeviceType.CPU:
                continue
            out.append((e.name, float(e.self_cpu_time_total)))
    return out


def profile_kernels(fn: Callable[[], object], device, calls: int = 1) -> list:
    """Runs ``fn`` ``calls`` times (synchronized after each) under torch.profiler with CPU and
    (on CUDA) CUDA activities; returns :func:`device_kernel_times` of the trace."""
    from torch.profiler import ProfilerActivity, profile

    is_cuda = torch.device(device).type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if is_cuda else [])
    sync = torch.cuda.synchronize if is_cuda else (lambda: None)
    sync()
    with _without_profiler_marks(), profile(activities=acts, acc_events=True) as prof:  # acc_events: no reuse warning
        for _ in range(calls):
            fn()
            sync()
    return device_kernel_times(prof.events(), on_device=is_cuda)


# Kineto's trace markers, which it writes to stderr (fd 2) at each profiler start and stop.
_PROFILER_MARK = re.compile(r"^USDT:.*profiler_(start|stop)\s*$")


@contextlib.contextmanager
def _without_profiler_marks():
    """Inside the block fd 2 goes to a temporary file; after it, its lines go back to stderr but kineto's start / stop
    markers (two stray lines per profiled case otherwise)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = [ln for ln in tmp.read().decode(errors="replace").splitlines(keepends=True)
                    if not _PROFILER_MARK.match(ln)]
            sys.stderr.write("".join(kept))


def split_kernel_times(kernels: Sequence, calls: int = 1, top: int = 3) -> dict:
    """Sums (name, us) pairs by :func:`classify_kernel` category, per call: ``<cat>_us`` and
    ``<cat>_pct`` (share of the summed time) for every category, ``kernel_us`` (all), ``kernels``
    (count per call) and ``top_other`` (the largest 'other' names with their share)."""
    calls = max(1, int(calls))
    tot = {c: 0.0 for c in KERNEL_CATEGORIES}
    other = {}
    for name, us in kernels:
        cat = classify_kernel(name)
        tot[cat] += us
        if cat == "other":
            other[name] = other.get(name, 0.0) + us
    total = sum(tot.values())
    out = {"kernel_us": total / calls, "kernels": len(kernels) / calls}
    for c in KERNEL_CATEGORIES:
        out[f"{c}_us"] = tot[c] / calls
        out[f"{c}_pct"] = 100.0 * tot[c] / total if total > 0 else math.nan
    names = sorted(other.items(), key=lambda kv: -kv[1])[:top]
    out["top_other"] = "; ".join(f"{n[:60]} ({100.0 * us / total:.0f}%)" for n, us in names) if total > 0 else ""
    return out



@contextlib.contextmanager
def hsma_overrides(keys: Optional[dict]):
    """hsma_trsm's development overrides for the block (hsma_trsm._ops.overrides; {key: value},
    a value of None removes the key), the previous ones restored after it."""
    from hsma_trsm import _ops

    with _ops.overrides(**(keys or {})):
        yield

