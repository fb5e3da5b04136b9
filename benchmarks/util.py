"""Reusable helpers for hsma_trsm benchmarks (the main benchmark, tuners, ablations).

Timing:
    time_cuda_events(fn)  median of isolated calls, each bracketed by CUDA events;
    time_cuda_graph(fn)   N calls captured into one CUDA graph, replays timed, per-call time;
    time_cpu(fn)          median of time.perf_counter() around single calls;
    time_fn(fn, device)   picks time_cuda_events or time_cpu by device;
    time_rounds(fn, device)
                          several rounds of time_fn: the median of the round medians, their
                          spread (max / min), with a time cap.
All return a :class:`Timing` (microseconds per call). ``fn`` is a zero-argument callable whose
inputs are fixed tensors (closures); its result is discarded.

Inputs and bookkeeping:
    make_triangular, make_rhs   well-conditioned triangular matrices / right-hand sides;
    trsm_flops, gemm_flops      flop counts (LAPACK convention); gflops, tflops: rates;
    trsm_bytes, bandwidth_gbs   least memory traffic of a solve and the achieved GB/s;
    copy_bandwidth              the device's measured copy bandwidth (the 100% line);
    rel_error, reference_subset ||X - X_ref|| / ||X_ref|| against a float64 reference (of a
                                batch/column subset, so large problems stay cheap to check);
    profile_kernels, classify_kernel, split_kernel_times
                                kernel times from torch.profiler summed by category;
    host_overhead               host time per call issued back to back;
    hsma_overrides              hsma_trsm's development overrides for a block;
    env_info, slugify           GPU name, torch / CUDA / HIP versions, date, git revision;
    REPO_ROOT, run_slug, default_out_dir, curated_dir, is_within
                                where results go: out/bench/<slug>/ by default,
                                benchmarks/results/<gpu-slug>/ (curated) only when asked;
    result_header, write_csv, read_csv
                                result files: '# key: value' lines, then the CSV;
    progress, log               tqdm progress bar on stderr (plain fallback), tqdm-safe printing.
"""
from __future__ import annotations

import contextlib
import csv
import datetime
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import torch

__all__ = [
    "Timing",
    "choose_repeats",
    "time_cuda_events",
    "time_cuda_graph",
    "time_cpu",
    "time_fn",
    "time_rounds",
    "gpu_warmup",
    "make_triangular",
    "make_rhs",
    "trsm_flops",
    "gemm_flops",
    "gflops",
    "tflops",
    "triangle_elements",
    "trsm_bytes",
    "bandwidth_gbs",
    "copy_bandwidth",
    "rel_error",
    "reference_subset",
    "classify_kernel",
    "device_kernel_times",
    "profile_kernels",
    "split_kernel_times",
    "host_overhead",
    "hsma_overrides",
    "real_dtype",
    "dtype_name",
    "parse_dtype",
    "env_info",
    "slugify",
    "REPO_ROOT",
    "RESULTS_DIR",
    "run_slug",
    "default_out_dir",
    "curated_dir",
    "is_within",
    "result_header",
    "csv_value",
    "write_csv",
    "read_csv",
    "progress",
    "log",
    "fmt_num",
]


# ----------------------------------------------------------------------------------------------
# Timing


@dataclass
class Timing:
    """Per-call times in microseconds.

    ``median_us`` is the headline number. ``calls_per_sample`` is 1 for plain timing and N for
    graph timing (each sample is one replay of N captured calls, already divided by N).
    ``rounds_us``: the round medians when timed in rounds (:func:`time_rounds`; ``median_us`` is
    then their median); ``capped``: the rounds stopped early at the time cap.
    """

    median_us: float
    min_us: float
    mean_us: float
    reps: int
    calls_per_sample: int = 1
    samples_us: list = field(default_factory=list, repr=False)
    rounds_us: list = field(default_factory=list)
    capped: bool = False

    @classmethod
    def from_samples(cls, samples_us: Sequence[float], calls_per_sample: int = 1) -> "Timing":
        s = list(samples_us)
        return cls(
            median_us=statistics.median(s),
            min_us=min(s),
            mean_us=statistics.fmean(s),
            reps=len(s),
            calls_per_sample=calls_per_sample,
            samples_us=s,
        )

    @classmethod
    def from_rounds(cls, rounds_us: Sequence[float], samples_us: Optional[Sequence[float]] = None,
                    capped: bool = False) -> "Timing":
        """The median of the round medians ``rounds_us``; min, mean and reps over ``samples_us``
        (all calls of all rounds; default: the round medians themselves)."""
        r = list(rounds_us)
        s = list(samples_us) if samples_us else r
        return cls(median_us=statistics.median(r), min_us=min(s), mean_us=statistics.fmean(s), reps=len(s),
                   samples_us=s, rounds_us=r, capped=capped)

    @classmethod
    def nan(cls) -> "Timing":
        return cls(math.nan, math.nan, math.nan, 0)

    @property
    def rounds(self) -> int:
        return len(self.rounds_us)

    @property
    def spread(self) -> float:
        """max / min of the round medians; NaN with fewer than two rounds."""
        r = [x for x in self.rounds_us if x > 0 and math.isfinite(x)]
        if len(r) < 2 or len(r) != len(self.rounds_us):
            return math.nan
        return max(r) / min(r)


def choose_repeats(
    est_s: float, target_s: float = 0.2, min_reps: int = 5, max_reps: int = 200, max_s: Optional[float] = None
) -> int:
    """Number of repeats so that ``repeats * est_s`` is about ``target_s``, clamped to
    [``min_reps``, ``max_reps``]; with ``max_s``, then cut so that ``repeats * est_s`` stays
    within ``max_s`` (at least one repeat): slow calls get fewer samples than ``min_reps``."""
    if not (est_s > 0) or math.isinf(est_s):
        return max_reps if not (est_s > 0) else min_reps
    reps = int(min(max_reps, max(min_reps, round(target_s / est_s))))
    if max_s is not None and reps * est_s > max_s:
        reps = max(1, int(max_s / est_s))
    return reps


def _n_warmup(est_s: float, warmup: int) -> int:
    """Fewer warm-up calls for slow calls (at least one)."""
    if est_s > 0.1:
        return 1
    return max(1, warmup)


def time_cuda_events(
    fn: Callable[[], object],
    *,
    warmup: int = 3,
    target_s: float = 0.2,
    min_reps: int = 5,
    max_reps: int = 200,
    max_s: Optional[float] = None,
    isolate: bool = True,
    warm: bool = False,
) -> Timing:
    """Median time of one call of ``fn`` on the current CUDA device, measured with CUDA events.

    Each sample is one isolated call: (synchronize,) record start event, call, record end event
    on the current stream. With ``isolate`` (default) the device is synchronized before every
    sample, so a sample sees an empty queue and includes the host-side launch cost of the call
    (what a user of one call waits for); ``isolate=False`` lets samples queue back to back.
    The number of samples adapts to the call time (about ``target_s`` of timed calls, at most
    ``max_s`` when given; see :func:`choose_repeats`).

    ``warm``: the caller has already called ``fn`` (e.g. for a correctness check), so no untimed
    first call or warm-up is made, and the estimating call, an isolated event-timed call like
    the others, counts as the first sample (for slow calls, where every call costs).
    """
    if not warm:
        # First call (may include lazy initialisation), timed only roughly to size the warm-up.
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        for _ in range(_n_warmup(first_s, warmup) - 1):
            fn()
    torch.cuda.synchronize()

    # Estimate from one isolated event-timed call.
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    est_ms = start.elapsed_time(end)  # elapsed_time is in milliseconds
    reps = choose_repeats(est_ms * 1e-3, target_s, min_reps, max_reps, max_s)
    samples = []
    if warm:
        samples.append(est_ms * 1e3)
        reps -= 1

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if isolate:
            torch.cuda.synchronize()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()  # all end events complete before reading them
    samples += [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]  # ms -> us
    return Timing.from_samples(samples)


def time_cuda_graph(
    fn: Callable[[], object],
    *,
    calls: Optional[int] = None,
    est_us: Optional[float] = None,
    target_replay_s: float = 5e-3,
    max_calls: int = 100,
    warmup: int = 3,
    target_s: float = 0.2,
    min_reps: int = 5,
    max_reps: int = 200,
) -> Timing:
    """GPU-only time per call: ``calls`` calls of ``fn`` captured into one CUDA graph, replays
    timed with CUDA events (back to back, so the GPU never waits for the host), divided by
    ``calls``.

    ``fn`` must only touch static tensors (the same input tensors every call); its outputs live in
    the graph's private memory pool and are discarded. If ``calls`` is None it is chosen so one
    replay takes about ``target_replay_s`` from ``est_us`` (a per-call estimate, e.g. the
    :func:`time_cuda_events` median; measured here if not given), between 1 and ``max_calls``.

    Raises whatever capture raises (e.g. the op synchronizes or allocates outside the caching
    allocator); the current stream is restored first, so callers can catch and go on.
    """
    prev_stream = torch.cuda.current_stream()
    # Warm-up on a side stream, as the CUDA graphs docs recommend (lazy init, cuBLAS handles and
    # workspaces, autotuning, allocator state) before capture.
    side = torch.cuda.Stream()
    side.wait_stream(prev_stream)
    t0 = time.perf_counter()
    with torch.cuda.stream(side):
        fn()
        side.synchronize()
        first_s = time.perf_counter() - t0
        for _ in range(_n_warmup(first_s, warmup) - 1):
            fn()
    prev_stream.wait_stream(side)
    torch.cuda.synchronize()

    if calls is None:
        est_s = est_us * 1e-6 if (est_us is not None and est_us > 0 and math.isfinite(est_us)) else first_s
        calls = int(min(max_calls, max(1, round(target_replay_s / max(est_s, 1e-9)))))

    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            for _ in range(calls):
                fn()
        torch.cuda.synchronize()
    except BaseException:
        # torch.cuda.graph.__exit__ skips restoring the stream when capture_end raises.
        torch.cuda.set_stream(prev_stream)
        del g
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - best effort cleanup
            pass
        raise
    torch.cuda.set_stream(prev_stream)  # no-op when the context manager restored it

    try:
        g.replay()  # first replay uploads the graph
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        reps = choose_repeats(start.elapsed_time(end) * 1e-3, target_s, min_reps, max_reps)

        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            starts[i].record()
            g.replay()
            ends[i].record()
        torch.cuda.synchronize()
        samples = [s.elapsed_time(e) * 1e3 / calls for s, e in zip(starts, ends)]
    finally:
        del g  # releases the graph's private memory pool
    return Timing.from_samples(samples, calls_per_sample=calls)


def resolve_device(name: str = "auto") -> torch.device:
    """The device a benchmark runs on: ``auto`` (CUDA if available, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``
    (made current; SystemExit when CUDA is asked for and not available)."""
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda asked for, but torch.cuda.is_available() is False")
        if device.index is not None:
            torch.cuda.set_device(device)
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def gpu_warmup(seconds: float = 0.5, device=None) -> None:
    """Keeps the GPU busy with matrix products for about ``seconds`` so clocks ramp up and
    lazy CUDA / cuBLAS initialisation is done before the first measurement."""
    dev = device if device is not None else "cuda"
    a = torch.randn(2048, 2048, device=dev)
    b = torch.randn(2048, 2048, device=dev) / math.sqrt(2048)
    c = torch.empty_like(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
    del a, b, c


def time_cpu(
    fn: Callable[[], object],
    *,
    warmup: int = 1,
    target_s: float = 0.05,
    min_reps: int = 3,
    max_reps: int = 50,
    max_s: Optional[float] = None,
    warm: bool = False,
) -> Timing:
    """Median wall time (time.perf_counter) of one call of ``fn`` on the CPU; ``max_s`` and
    ``warm`` as in :func:`time_cuda_events`."""
    if not warm:
        t0 = time.perf_counter()
        fn()
        first_s = time.perf_counter() - t0
        for _ in range(_n_warmup(first_s, warmup) - 1):
            fn()
    t0 = time.perf_counter()
    fn()
    est_s = time.perf_counter() - t0
    reps = choose_repeats(est_s, target_s, min_reps, max_reps, max_s)
    samples = []
    if warm:
        samples.append(est_s * 1e6)
        reps -= 1
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return Timing.from_samples(samples)


def time_fn(fn: Callable[[], object], device, **kw) -> Timing:
    """:func:`time_cuda_events` on a CUDA device, :func:`time_cpu` otherwise."""
    if torch.device(device).type == "cuda":
        return time_cuda_events(fn, **kw)
    return time_cpu(fn, **kw)


def time_rounds(
    fn: Callable[[], object],
    device,
    *,
    rounds: int = 3,
    cap_s: Optional[float] = None,
    warm: bool = False,
    warmup: int = 1,
    target_s: float = 0.05,
    min_reps: int = 3,
    max_reps: int = 50,
    max_s: Optional[float] = None,
) -> Timing:
    """Times ``fn`` in ``rounds`` rounds of :func:`time_fn`, each the median over its calls; the
    result's ``median_us`` is the median of the round medians (one disturbed round cannot decide
    it) and ``spread`` their max / min (rounds that disagree: a noisy host).

    ``target_s``, ``min_reps``, ``max_reps`` and ``max_s`` are for all rounds together; each round
    gets its share (at least one call). Only the first round warms up (unless ``warm``).
    ``cap_s``: seconds for all rounds; no further round starts once the elapsed time plus the last
    round's median passes it, and the result is then ``capped`` with fewer rounds.
    """
    rounds = max(1, int(rounds))
    t0 = time.perf_counter()
    meds, samples, capped = [], [], False
    for i in range(rounds):
        r_max_s = max_s / rounds if max_s else None
        if cap_s is not None:
            share = max(0.0, cap_s - (time.perf_counter() - t0)) / (rounds - i)
            r_max_s = share if r_max_s is None else min(r_max_s, share)
        t = time_fn(fn, device, warmup=warmup, target_s=target_s / rounds, min_reps=max(1, -(-min_reps // rounds)),
                    max_reps=max(1, -(-max_reps // rounds)), max_s=r_max_s, warm=warm or i > 0)
        meds.append(t.median_us)
        samples += t.samples_us
        if cap_s is not None and i + 1 < rounds and time.perf_counter() - t0 + t.median_us * 1e-6 > cap_s:
            capped = True
            break
    return Timing.from_rounds(meds, samples, capped=capped)


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
    """Well-conditioned ``(*batch, k, k)`` triangular matrices; the other triangle is zero.

    Off-diagonal entries are randn / sqrt(k) (complex: unit variance in total); the diagonal has
    modulus uniform in [1, 2] with a random sign (real) or phase (complex), or is exactly 1 when
    ``unit``. Condition numbers stay around 5-6 for any k. Generated on ``device`` directly.
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
    with profile(activities=acts, acc_events=True) as prof:  # one cycle; acc_events silences a reuse warning
        for _ in range(calls):
            fn()
            sync()
    return device_kernel_times(prof.events(), on_device=is_cuda)


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


def host_overhead(
    fn: Callable[[], object], *, calls: int = 1000, repeats: int = 5, sync: Optional[Callable[[], object]] = None
) -> dict:
    """Host time per call of ``fn`` issued back to back without synchronization: ``calls`` calls
    between two perf_counter readings, then one ``sync``; the median (and min) over ``repeats``
    of the loop time / ``calls`` is ``host_us`` (``host_min_us``), loop plus the final sync /
    ``calls`` is ``wall_us``; ``host_repeats_us`` lists each repeat's host time per call. One
    untimed warm-up call first. While the GPU keeps up with the host (each call's GPU work
    shorter than its host cost) ``host_us`` is the dispatch cost."""
    sync = sync or (lambda: None)
    fn()
    sync()
    host, wall = [], []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e6 / calls)
        wall.append((t2 - t0) * 1e6 / calls)
    return dict(host_us=statistics.median(host), host_min_us=min(host), wall_us=statistics.median(wall),
                calls=calls, repeats=repeats, host_repeats_us=host)


@contextlib.contextmanager
def hsma_overrides(keys: Optional[dict]):
    """hsma_trsm's development overrides for the block (hsma_trsm._ops.overrides; {key: value},
    a value of None removes the key), the previous ones restored after it."""
    from hsma_trsm import _ops

    with _ops.overrides(**(keys or {})):
        yield


# ----------------------------------------------------------------------------------------------
# Environment


def slugify(name: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200'."""
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "unknown"


# The repository this benchmarks/ folder lives in (not the working directory).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Curated results (committed): one folder per GPU, written only when asked for.
RESULTS_DIR = os.path.join("benchmarks", "results")


def run_slug(env: dict) -> str:
    """Folder name of a run's device: the GPU slug ('nvidia-h200'), on the CPU path 'cpu-' and the
    CPU model ('cpu-amd-epyc-7b13')."""
    if env.get("gpu", "none") != "none":
        return env.get("gpu_slug") or slugify(env["gpu"])
    name = re.sub(r"\((r|tm)\)|\bcpu\b|\bprocessor\b|@.*$", " ", env.get("cpu", ""), flags=re.I)
    return "cpu-" + slugify(name) if name.strip() else "cpu"


def default_out_dir(env: dict, root: Optional[str] = None) -> str:
    """``<repo>/out/bench/<run slug>/``: where a run writes unless told otherwise (git-ignored)."""
    return os.path.join(root or REPO_ROOT, "out", "bench", run_slug(env))


def curated_dir(env: dict, root: Optional[str] = None) -> str:
    """``<repo>/benchmarks/results/<gpu slug>/``, the committed results of that GPU."""
    return os.path.join(root or REPO_ROOT, RESULTS_DIR, run_slug(env))


def is_within(path: str, folder: str) -> bool:
    """True when ``path`` is ``folder`` or lies below it (both resolved)."""
    p, f = os.path.realpath(path), os.path.realpath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"


def _git_revision(cwd: Optional[str] = None) -> str:
    """The checkout's revision (+dirty); HSMA_BENCH_GIT overrides it, for a copy of the tree whose
    .git is not the source's (the device machine's copy)."""
    if os.environ.get("HSMA_BENCH_GIT"):
        return os.environ["HSMA_BENCH_GIT"]
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5
        )
        if rev.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True, text=True, timeout=5
        )
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except Exception:  # noqa: BLE001 - no git, not a repo, ...
        return "unknown"


def env_info(device="cuda") -> dict:
    """Environment facts for result files: device / GPU name and slug, torch, CUDA and HIP
    versions, today's date, CPU, threads, hsma_trsm version and git revision."""
    device = torch.device(device)
    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "hip": getattr(torch.version, "hip", None) or "none",
        "date": datetime.date.today().isoformat(),
        "datetime": datetime.datetime.now().isoformat(timespec="seconds"),
        "cpu": _cpu_name(),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "git": _git_revision(os.path.dirname(os.path.abspath(__file__))),
    }
    try:
        import hsma_trsm

        info["hsma_trsm"] = getattr(hsma_trsm, "__version__", "unknown")
    except Exception:  # noqa: BLE001
        info["hsma_trsm"] = "not importable"
    if device.type == "cuda" and torch.cuda.is_available():
        idx = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        info.update(
            gpu=props.name,
            gpu_slug=slugify(props.name),
            device=f"cuda:{idx}",
            sm_count=props.multi_processor_count,
            capability=f"{props.major}.{props.minor}",
            gpu_memory_gib=round(props.total_memory / 2**30, 1),
            l2_cache_mib=round(getattr(props, "L2_cache_size", 0) / 2**20, 1) or None,
        )
    else:
        info.update(gpu="none", gpu_slug="cpu", device="cpu")
    return info


# ----------------------------------------------------------------------------------------------
# Output


def result_header(env: dict, **extra) -> list:
    """The '# key: value' header lines of a result file: gpu, torch, cuda, date, git (the
    first four as in the earlier result files), then hsma_trsm, python, float32 matmul precision
    and ``extra`` (e.g. suite=...)."""
    if env.get("gpu", "none") != "none":
        gpu = env["gpu"]
    else:
        gpu = f"none (CPU path: {env.get('cpu', '?')}, {env.get('threads', '?')} threads)"
    cuda = env.get("cuda", "none")
    if env.get("hip", "none") != "none":
        cuda = f"{cuda} (hip {env['hip']})"
    lines = [("gpu", gpu), ("torch", env.get("torch", "?")), ("cuda", cuda), ("date", env.get("date", "?")),
             ("git", env.get("git", "unknown")), ("hsma_trsm", env.get("hsma_trsm", "?")),
             ("python", env.get("python", "?")),
             ("float32_matmul_precision", env.get("float32_matmul_precision", "?"))]
    lines += [(k, v) for k, v in extra.items() if v is not None]
    return lines


def csv_value(v):
    """A CSV cell: floats with 6 significant digits ('nan' for NaN), others as they are."""
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return f"{v:.6g}"
    return "" if v is None else v


def write_csv(path: str, rows: Sequence[dict], columns: Sequence[str], header: Sequence = ()) -> None:
    """Writes ``rows`` (dicts) with exactly ``columns`` (missing keys empty, extra keys dropped)
    under '# key: value' lines from ``header`` (pairs, see :func:`result_header`)."""
    with open(path, "w", newline="") as f:
        for k, v in header:
            f.write(f"# {k}: {' '.join(str(v).split())}\n")
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: csv_value(r.get(k, "")) for k in columns})


def read_csv(path: str) -> tuple:
    """Reads a file written by :func:`write_csv`: (header dict, list of row dicts of strings)."""
    header, lines = {}, []
    with open(path, newline="") as f:
        for line in f:
            if line.startswith("#") and not lines:
                k, _, v = line[1:].partition(":")
                header[k.strip()] = v.strip()
            else:
                lines.append(line)
    return header, list(csv.DictReader(lines))


def fmt_num(x, spec: str = ".1f", width: int = 0) -> str:
    """Formats a number, '-' for None/NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        s = "-"
    else:
        s = format(x, spec)
    return s.rjust(width) if width else s


try:  # tqdm is optional
    from tqdm.auto import tqdm as _tqdm
except Exception:  # noqa: BLE001
    _tqdm = None

_active_bar = None


class _PlainProgress:
    """Minimal stand-in for tqdm: one line per step on stderr."""

    def __init__(self, iterable, total=None, desc=""):
        self.iterable = iterable
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
        self.desc = desc
        self.postfix = ""
        self.i = 0
        self._printed = False

    def _print(self):
        sys.stderr.write(f"[{self.i}/{self.total or '?'}] {self.desc} {self.postfix}".rstrip() + "\n")
        sys.stderr.flush()
        self._printed = True

    def __iter__(self):
        for i, item in enumerate(self.iterable):
            self.i, self._printed, self.postfix = i + 1, False, ""
            yield item
            if not self._printed:  # the step had no postfix: report it once done
                self._print()

    def set_postfix_str(self, s):
        self.postfix = s
        self._print()

    def close(self):
        pass


def progress(iterable, total=None, desc="", disable=False):
    """A tqdm progress bar on stderr (or a plain fallback when tqdm is missing)."""
    global _active_bar
    if disable:
        return iterable
    if _tqdm is not None and os.environ.get("HSMA_BENCH_NO_TQDM", "") == "":
        # disable=None: tqdm switches itself off when stderr is not a terminal (logs, CI)
        bar = _tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True, disable=None)
    elif not sys.stderr.isatty():
        return iterable
    else:
        bar = _PlainProgress(iterable, total=total, desc=desc)
    _active_bar = bar
    return bar


def log(msg: str = "") -> None:
    """Prints to stdout without breaking an active tqdm bar."""
    if _tqdm is not None and _active_bar is not None and isinstance(_active_bar, _tqdm):
        _tqdm.write(msg, file=sys.stdout)
    else:
        print(msg, flush=True)
