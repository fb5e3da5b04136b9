"""Reusable helpers for hsma_trsm benchmarks (the main benchmark, tuners, ablations).

Timing:
    time_cuda_events(fn)  median of isolated calls, each bracketed by CUDA events;
    time_cuda_graph(fn)   N calls captured into one CUDA graph, replays timed, per-call time;
    time_cpu(fn)          median of time.perf_counter() around single calls;
    time_fn(fn, device)   picks time_cuda_events or time_cpu by device.
All return a :class:`Timing` (microseconds per call). ``fn`` is a zero-argument callable whose
inputs are fixed tensors (closures); its result is discarded.

Inputs and bookkeeping:
    make_triangular, make_rhs   well-conditioned triangular matrices / right-hand sides;
    trsm_flops, gflops          flop count (LAPACK convention) and rate;
    rel_error                   ||X - X_ref|| / ||X_ref||;
    env_info, slugify           GPU name, torch / CUDA / HIP versions, date, git revision;
    progress, log               tqdm progress bar on stderr (plain fallback), tqdm-safe printing.
"""
from __future__ import annotations

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
    "gpu_warmup",
    "make_triangular",
    "make_rhs",
    "trsm_flops",
    "gflops",
    "rel_error",
    "real_dtype",
    "dtype_name",
    "parse_dtype",
    "env_info",
    "slugify",
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
    """

    median_us: float
    min_us: float
    mean_us: float
    reps: int
    calls_per_sample: int = 1
    samples_us: list = field(default_factory=list, repr=False)

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
    def nan(cls) -> "Timing":
        return cls(math.nan, math.nan, math.nan, 0)


def choose_repeats(est_s: float, target_s: float = 0.2, min_reps: int = 5, max_reps: int = 200) -> int:
    """Number of repeats so that ``repeats * est_s`` is about ``target_s``, clamped."""
    if not (est_s > 0) or math.isinf(est_s):
        return max_reps if not (est_s > 0) else min_reps
    return int(min(max_reps, max(min_reps, round(target_s / est_s))))


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
    isolate: bool = True,
) -> Timing:
    """Median time of one call of ``fn`` on the current CUDA device, measured with CUDA events.

    Each sample is one isolated call: (synchronize,) record start event, call, record end event
    on the current stream. With ``isolate`` (default) the device is synchronized before every
    sample, so a sample sees an empty queue and includes the host-side launch cost of the call
    (what a user of one call waits for); ``isolate=False`` lets samples queue back to back.
    The number of samples adapts to the call time (about ``target_s`` of timed calls).
    """
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
    est_s = start.elapsed_time(end) * 1e-3  # elapsed_time is in milliseconds
    reps = choose_repeats(est_s, target_s, min_reps, max_reps)

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if isolate:
            torch.cuda.synchronize()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()  # all end events complete before reading them
    samples = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]  # ms -> us
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
) -> Timing:
    """Median wall time (time.perf_counter) of one call of ``fn`` on the CPU."""
    t0 = time.perf_counter()
    fn()
    first_s = time.perf_counter() - t0
    for _ in range(_n_warmup(first_s, warmup) - 1):
        fn()
    t0 = time.perf_counter()
    fn()
    est_s = time.perf_counter() - t0
    reps = choose_repeats(est_s, target_s, min_reps, max_reps)
    samples = []
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


# ----------------------------------------------------------------------------------------------
# Environment


def slugify(name: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200'."""
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "unknown"


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
        "git": _git_revision(),
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
        )
    else:
        info.update(gpu="none", gpu_slug="cpu", device="cpu")
    return info


# ----------------------------------------------------------------------------------------------
# Output


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
