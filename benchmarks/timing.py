"""The benchmarks' timing core: every timer the suites use, and how a case's timings are judged.

Timers (all return a :class:`Timing`, microseconds per call; ``fn`` is a zero-argument callable on fixed inputs,
its result discarded):
    time_cuda_events(fn)  median of isolated calls, each bracketed by CUDA events;
    time_cuda_graph(fn)   N calls captured into one CUDA graph, replays timed, per-call time (GPU time only);
    time_cpu(fn)          median of time.perf_counter() around single calls;
    time_fn(fn, device)   time_cuda_events or time_cpu by device;
    time_rounds(fn, device)
                          rounds of time_fn: the median of the round medians, their spread, a time cap;
    host_overhead(fn)     host time per call issued back to back.
A suite's settings are a :class:`TimingCfg`; :func:`time_eager` and :func:`graph_time` apply one.
:func:`timing_flags` turns a case's timings into its status (capped, implausible, noisy, ok).
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import torch

from . import report as rp
from .report import f_us, finite

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



# ----------------------------------------------------------------------------------------------
# A suite's timing settings, applied


@dataclass
class TimingCfg:
    """Timing settings of a suite (see time_rounds / time_cuda_graph). target_s, min_reps,
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


def time_eager(fn, device, cfg: TimingCfg, warm: bool, first_s: float = 0.0) -> Timing:
    """The case's time of fn: cfg.rounds rounds, each a median over isolated calls (CUDA events on a
    GPU, perf_counter on the CPU), then the median of the round medians, within cfg.cap_s
    (time_rounds). A first call (``first_s``) already past the cap is the only sample: capped."""
    if cfg.cap_s is not None and first_s > cfg.cap_s:
        return Timing.from_rounds([first_s * 1e6], capped=True)
    return time_rounds(fn, device, rounds=cfg.rounds, cap_s=cfg.cap_s, warm=warm, warmup=cfg.warmup,
                       target_s=cfg.target_s, min_reps=cfg.min_reps, max_reps=cfg.max_reps, max_s=cfg.max_s)


def graph_time(fn, est_us: float, cfg: TimingCfg) -> Timing:
    """fn's GPU-only time per call (time_cuda_graph) with cfg's graph settings."""
    return time_cuda_graph(fn, est_us=est_us, warmup=cfg.warmup, target_replay_s=cfg.graph_replay_s,
                           max_calls=cfg.graph_max_calls, target_s=cfg.graph_target_s,
                           min_reps=cfg.graph_min_reps, max_reps=cfg.graph_max_reps)


# ----------------------------------------------------------------------------------------------
# Judging a case's timings

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


def record_timing(row: dict, name: str, t: Timing) -> None:
    """<name>_us (median of the round medians), _min_us, _reps, _spread, _rounds_us; rounds = the
    fewest rounds of the row's contenders."""
    row[f"{name}_us"], row[f"{name}_min_us"], row[f"{name}_reps"] = t.median_us, t.min_us, t.reps
    row[f"{name}_spread"] = t.spread
    row[f"{name}_rounds_us"] = ";".join(f"{x:.6g}" for x in t.rounds_us)
    row["rounds"] = t.rounds if not row.get("rounds") else min(row["rounds"], t.rounds)


def timing_flags(timings: dict, device_type: str, flops: float, nbytes: float = 0.0, matrices: int = 1) -> tuple:
    """(status, notes) of the timings {name: Timing} of one case: the first of capped,
    implausible (median above PLAUSIBLE's bound for the flops and bytes), noisy (round spread above
    NOISY_SPREAD) that any of them has, else ok; a note per finding."""
    limit = PLAUSIBLE.get(device_type, PLAUSIBLE["cpu"]).max_us(flops, nbytes, matrices)
    found, notes = set(), []
    for name, t in timings.items():
        if t.capped:
            found.add(rp.CAPPED)
            notes.append(f"{name} capped after {t.rounds} round(s) at {f_us(t.median_us)} us per call")
        if finite(t.median_us) and t.median_us > limit:
            found.add(rp.IMPLAUSIBLE)
            notes.append(f"{name} {f_us(t.median_us)} us per call > {f_us(limit)} us plausible here")
        if finite(t.spread) and t.spread > NOISY_SPREAD:
            found.add(rp.NOISY)
            notes.append(f"{name} rounds {f_us(min(t.rounds_us))}-{f_us(max(t.rounds_us))} us "
                         f"({t.spread:.2f}x > {NOISY_SPREAD:g}x)")
    return next((f for f in rp.FLAGGED if f in found), rp.OK), notes
