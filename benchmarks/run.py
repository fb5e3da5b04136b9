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
CPU path, as is any --out inside benchmarks/results). Per suite ``<suite>.csv``, a row per case, implementation
and mode (:mod:`benchmarks.tidy`), and ``details/<suite>.csv``, a row per case with every column (``# key: value``
lines first: date, git, gpu, torch, ...); ``report.md``; a later run overwrites them. The console shows a line
per suite and a summary (:mod:`benchmarks.summary`); ``--verbose`` adds every case's line.

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
tm.NOISY_SPREAD), implausible (slower than tm.PLAUSIBLE allows for the case's flops and bytes), capped
(calls so slow the case hit its time cap, tm.TimingCfg.cap_s, and stopped early); skipped (budget)
(a suite or --time-budget ran out: not a failure), skipped (gpytorch not installed); failed: error,
inaccurate, partial. A failing case does not stop the run; each suite's CSV is written as soon as
the suite ends, so an interrupted run keeps the finished suites.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Optional

import torch

from . import core
from . import output
from . import report as rp
from . import summary
from . import timing as tm
from . import util as bu
from .cases import PLANS
from .registry import OPT_IN_SUITES, REGISTRY, SUITES
from .tidy import COLUMNS as TIDY_COLUMNS
from .tidy import melt

REPORT_NAME = "report.md"
DETAILS = "details"  # the folder of the wide CSVs (every measured column) of the suites with a long CSV

# The earlier --cases names, mapped to the suite that now holds them.
_CASE_ALIASES = {
    "small": "small", "square": "large", "batched": "batched", "batch": "batched",
    "linear-attention": "batched", "linear_attention": "batched", "linattn": "batched", "la": "batched",
    "kernel-digits": "large", "kernel": "large", "digits": "large", "rbf": "large",
}


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
    p.add_argument("--verbose", "-v", action="store_true",
                   help="print every case's line and each suite's targets (default: one line per suite and a "
                        "summary; the details are in the result files)")
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
    names["report"] = REPORT_NAME
    return names


def resolve_out_dir(out: Optional[str], curated: bool, env: dict, is_cuda: bool, root: Optional[str] = None) -> str:
    """The run's output folder: ``out`` (relative to the working directory), or with ``curated``
    ``<repo>/benchmarks/results/<gpu-slug>/``, else ``<repo>/out/bench/<slug>/`` (output.default_out_dir;
    the repository is found from this file, never the working directory). The curated results are
    GPU results: a CPU run into benchmarks/results raises SystemExit."""
    root = root or output.REPO_ROOT
    results = os.path.join(root, output.RESULTS_DIR)
    if curated:
        if not is_cuda:
            raise SystemExit("--curated: refused on the CPU path; benchmarks/results/ holds GPU results only "
                             "(a CPU run writes to out/bench/ by default, or give --out)")
        return output.curated_dir(env, root)
    if out:
        path = os.path.abspath(out)
        if not is_cuda and output.is_within(path, results):
            raise SystemExit(f"--out {out}: refused on the CPU path; {output.RESULTS_DIR}/ holds curated GPU results "
                             "only (use the default out/bench/ or another folder)")
        return path
    return output.default_out_dir(env, root)


def _mode(is_cuda: bool, quick: bool, full: bool) -> str:
    if is_cuda or full:
        return "gpu-quick" if quick else "gpu"
    return "cpu-quick" if quick else "cpu"


def list_cases(suites, dtypes, seed: int = 0, mode: str = "gpu") -> list:
    """Lines describing the cases of each suite (for --list), with the sizes of ``mode``."""
    return [line for s in suites for line in REGISTRY[s].list_lines(mode, dtypes, seed)]


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _write_suite(out: str, names: dict, suite: str, res, meta: list) -> list:
    """Writes the suite's CSV (long where the suite has a Tidy spec, with its wide rows in details/); the paths."""
    path = os.path.join(out, names[suite])
    if res.tidy is None:
        output.write_csv(path, res.rows, res.columns, meta)
        return [path]
    output.write_csv(path, melt(res.rows, res.tidy), TIDY_COLUMNS, meta)
    detail = os.path.join(out, DETAILS, names[suite])
    os.makedirs(os.path.dirname(detail), exist_ok=True)
    output.write_csv(detail, res.rows, res.columns, meta)
    return [path, detail]


def _run_suites(ctx, args, names, header, intro, reports, all_targets, results, times) -> bool:
    """Runs the selected suites in order, printing a line and writing the files of each; True when interrupted.
    ``results`` gets (suite, wide rows, long rows, Tidy spec) per suite."""
    device, is_cuda = ctx.device, ctx.is_cuda
    interrupted = False
    for suite in args.suites:
        t0 = time.perf_counter()
        output.log(f"\n== {suite}")
        try:
            res = REGISTRY[suite].run(ctx)
        except KeyboardInterrupt:
            interrupted = True
            break
        except Exception as e:  # noqa: BLE001 - a broken suite must not lose the others
            print(f"suite {suite} failed: {core.short(e, 400)}", file=sys.stderr)
            core.cleanup(device)
            continue
        times[suite] = time.perf_counter() - t0
        evaluated = rp.evaluate_targets(res.targets, res.rows, applicable=is_cuda)
        if evaluated:
            output.log(f"targets ({rp.target_counts(evaluated)}):")
            output.log("\n".join(rp.target_lines(evaluated)))
        long_rows = melt(res.rows, res.tidy)
        print(summary.suite_line(suite, res.rows, long_rows, res.tidy, times[suite]), flush=True)
        all_targets += evaluated
        results.append((suite, res.rows, long_rows, res.tidy))
        title = res.title + (" (interrupted: partial)" if ctx.interrupted else "")
        reports.append(rp.SuiteReport(suite, title, res.method, res.table, res.rows, evaluated, names[suite],
                                      times[suite], res.extra_md))
        if not args.no_save:
            try:
                meta = header + [("suite", suite)] + list(res.extra_header.items())
                paths = _write_suite(args.out, names, suite, res, meta)
                with open(os.path.join(args.out, names["report"]), "w") as f:
                    f.write(rp.markdown_report(header, intro, reports))
                output.log(f"wrote {', '.join(paths)} (and {names['report']})")
            except OSError as e:
                print(f"could not write results: {core.short(e)}", file=sys.stderr)
        if ctx.interrupted:
            interrupted = True
            break
    return interrupted


def _print_summary(results: list, all_targets: list, out: Optional[str], seconds: float) -> None:
    """The run's summary on stdout: totals, missed targets, the worst cases, where the results went."""
    all_rows = [r for _, rows, _, _ in results for r in rows]
    print(f"\n== summary: {len(all_rows)} cases in {seconds:.1f} s (start-up included)")
    print(summary.clip(f"statuses: {rp.status_summary(all_rows)}"))
    for line in summary.target_summary(all_targets):
        print(line)
    worst = summary.worst_lines([(s, long_rows, spec) for s, _, long_rows, spec in results])
    if worst:
        print("worst ratios of the ok cases (baseline time / this time; < 1: slower than the baseline):")
        print("\n".join(worst))
    if out:
        print(summary.clip(f"results: {out}"))
        print(f"  <suite>.csv: a row per case x implementation x mode ({', '.join(TIDY_COLUMNS[4:9])}, ...)")
        print(f"  {DETAILS}/<suite>.csv: every column; {REPORT_NAME}: every table and target")


def main(argv=None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    output.set_verbose(args.verbose)

    device = tm.resolve_device(args.device)
    is_cuda = device.type == "cuda"
    mode = _mode(is_cuda, args.quick, args.full)
    plan = PLANS[mode]
    if args.list:
        print(f"mode {mode}")
        print("\n".join(list_cases(args.suites, args.dtypes, args.seed, mode)))
        return 0
    if not is_cuda:
        why = "no CUDA device" if not torch.cuda.is_available() else "--device cpu"
        print(f"{why}: the CPU path (perf_counter timing, smaller sizes, no CUDA graph times, GPU targets n/a)",
              flush=True)

    import hsma_trsm  # noqa: F401 - loads the extension (fails early if it is not built)

    if args.threads:
        torch.set_num_threads(args.threads)

    env = output.env_info(device)
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
    print(summary.clip(f"torch {env['torch']}, cuda {env['cuda']}, hip {env['hip']}, hsma_trsm {env['hsma_trsm']} "
                       f"(git {env['git']}), date {env['date']}"))
    out = None if args.no_save else resolve_out_dir(args.out, args.curated, env, is_cuda)
    print(summary.clip(f"suites: {', '.join(args.suites)} ({mode} sizes); "
                       f"dtypes: {', '.join(map(bu.dtype_name, args.dtypes))}"), flush=True)
    output.log(f"{rp.SPEEDUP_NOTE}; 'gr.' = CUDA graph replay per call (GPU time only); each time the median of "
               f"{args.rounds} round medians")
    print(f"output: {out if out else 'none (--no-save)'}", flush=True)
    if out and output.is_within(out, os.path.join(output.REPO_ROOT, output.RESULTS_DIR)) and \
            os.path.basename(os.path.normpath(out)) != output.run_slug(env):
        print(f"WARNING: {out} is in the curated results but not this GPU's folder ({output.run_slug(env)})",
              flush=True)
    if torch.ops.hsma._get_overrides():
        print(f"note: development overrides are set ({torch.ops.hsma._get_overrides()}, from HSMA_TRSM_OVERRIDES): "
              "every hsma solve runs under them; the ablations change only their own keys")
    if os.environ.get("HSMA_TRSM_TABLE"):
        print(f"note: HSMA_TRSM_TABLE={os.environ['HSMA_TRSM_TABLE']}: this block-size table, not the package's")

    ctx = core.Ctx(device=device, mode=mode, dtypes=args.dtypes, args=args, env=env, budget_scale=args.budget_scale,
              deadline=(t_start + args.time_budget) if args.time_budget > 0 else 0.0, plan=plan)
    names = output_names(args.suites)
    header = output.result_header(env, rounds=args.rounds)
    intro = (f"hsma_trsm against torch.linalg.solve_triangular, same process and inputs; **{rp.SPEEDUP_NOTE}**. "
             f"Every time is the median of {args.rounds} round medians, each round a median over calls: " + (
                 "eager = isolated calls timed with CUDA events (device synchronized before each, launch overhead "
                 "included); graph = per-call time of N calls captured in one CUDA graph (GPU time only). "
                 if is_cuda else "CPU path: time.perf_counter() around single calls (no graph times). ")
             + f"A case is noisy when its round medians differ by more than {tm.NOISY_SPREAD:g}x, implausible when a "
             "median exceeds the slowest credible time for its flops and bytes on this device, capped when its "
             "calls hit the case's time cap. rel err = ||X - X_ref|| / ||X_ref|| against a float64 (complex128) "
             "torch solve of the first <= 64 batch entries and <= 32 columns (rows for right solves). Targets "
             "from the issues: PASS / MISS on the values shown"
             + ("." if is_cuda else "; n/a on the CPU path (they are GPU targets)."))
    if is_cuda:
        tm.gpu_warmup(0.5)  # clocks up, CUDA / cuBLAS initialised before the first case
    args.out = out
    if out:
        os.makedirs(out, exist_ok=True)

    reports, all_targets, results, times = [], [], [], {}
    interrupted = False
    # `timeout` (scripts/gpu_run.sh) sends SIGTERM: treat it like Ctrl-C, so the suite running keeps
    # its finished rows and is written out.
    prev_term = None
    try:
        prev_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    except ValueError:  # not the main thread
        pass
    try:
        interrupted = _run_suites(ctx, args, names, header, intro, reports, all_targets, results, times)
    finally:
        if prev_term is not None:
            signal.signal(signal.SIGTERM, prev_term)

    _print_summary(results, all_targets, out, time.perf_counter() - t_start)
    all_rows = [r for _, rows, _, _ in results for r in rows]
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
