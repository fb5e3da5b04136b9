"""Path tuner: which path serves a CUDA solve of order above 64 on this GPU (csrc/paths.h).

    python -m benchmarks.tune_paths [--dtypes f32,f64,c64,c128] [--ks 96,160,...] [--cols 1,2,...]
                                    [--batches 1,4,...] [--out PATH] [--budget-s S]

On the current CUDA GPU, for every cell (dtype, order k, right-hand-side columns per matrix, batch) of the grid it
times left-lower solves `hsma_trsm.trsm(A, B)` with the path forced (the override `path`: blocked, sweep, aten =
torch's own kernel reached through hsma) and torch.linalg.solve_triangular itself, each eager (isolated calls, host
launch cost included) and GPU-only (CUDA-graph replay). A cell takes the path whose worse ratio to torch, eager
or GPU-only, is the best (choose_path); while a CUDA graph is captured, host time is not spent again at replay,
so the cell's gpu_path is the fastest GPU-only (choose_gpu_path). The table the C++ plan reads gets one row per
cell with both choices and every time measured (default: <repo>/out/tune/<gpu>-sm<cc>-paths.csv; copy it to
hsma_trsm/tuning/ to ship it, or point the library at it with HSMA_TRSM_PATHS=path). Cells whose operands pass
--mem-gib are left out (the plan takes the nearest cell). The sweep is timed up to --sweep-max-cols columns (its
chain of row blocks makes it slow for more). The rows are written as they are measured, so an interrupted run
leaves a usable table.
--rechoose TABLE takes no GPU: it chooses each cell's paths again from the times the table holds and rewrites it.
"""
import argparse
import math
import os
import sys
import time

import torch

from . import output
from . import timing as tm
from . import util as bu

DEFAULT_KS = [72, 96, 128, 160, 200, 256, 320, 400, 512, 640, 800, 1024, 1600, 2560, 4096, 8192]
DEFAULT_COLS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096]
DEFAULT_BATCHES = [1, 4, 32, 256, 2048]
PATHS = ("blocked", "sweep", "aten")  # hsma's candidates (LargePath's names); "torch" is the reference
HEADER = ["dtype", "k", "cols", "batch", "path", "gpu_path"] + [f"{p}_us" for p in PATHS + ("torch",)] + \
         [f"{p}_gpu_us" for p in PATHS + ("torch",)]


def cell_bytes(dtype, k, cols, batch):
    """Bytes of A, B and X of one cell."""
    return batch * (k * k + 2 * k * cols) * (torch.finfo(dtype).bits // 8) * (2 if dtype.is_complex else 1)


def grid(dtypes, ks, cols, batches, mem_bytes):
    """The cells [(dtype, k, cols, batch)] whose operands fit in mem_bytes, in order."""
    return [(d, k, c, b) for d in dtypes for k in ks for c in cols for b in batches
            if cell_bytes(d, k, c, b) <= mem_bytes]


def choose_path(eager, gpu):
    """The path of a cell from {name: us} eager and GPU-only times of hsma's candidates and of "torch": the one
    whose worse ratio to torch, eager or GPU-only, is the best (a path 1.3x torch's speed eager and 0.9x GPU-only
    counts 0.9x); ties go to the earlier of PATHS. Candidates without a finite time in both modes are out; None
    if none is in, or torch has no times."""
    ok = [p for p in PATHS if math.isfinite(eager.get(p, math.nan)) and math.isfinite(gpu.get(p, math.nan))]
    te, tg = eager.get("torch", math.nan), gpu.get("torch", math.nan)
    if not ok or not (math.isfinite(te) and math.isfinite(tg)):
        return None
    return min(ok, key=lambda p: (max(eager[p] / te, gpu[p] / tg), PATHS.index(p)))


GPU_MARGIN = 0.05  # a path replaces the eager choice under capture only when this much faster GPU-only (noise)


def choose_gpu_path(eager_choice, gpu):
    """The path of a cell while a CUDA graph is captured (replay costs GPU time only): the candidate with the
    least GPU-only time when it beats eager_choice's by more than GPU_MARGIN, else eager_choice (None stays
    None)."""
    if eager_choice is None:
        return None
    ok = [p for p in PATHS if math.isfinite(gpu.get(p, math.nan))]
    best = min(ok, key=lambda p: (gpu[p], PATHS.index(p)))
    now = gpu.get(eager_choice, math.nan)
    return best if not math.isfinite(now) or gpu[best] < (1 - GPU_MARGIN) * now else eager_choice


def choose(times):
    """(path, gpu_path) of a cell from {name: (eager us, GPU-only us)}."""
    names = PATHS + ("torch",)
    gpu = {p: times[p][1] for p in names}
    path = choose_path({p: times[p][0] for p in names}, gpu)
    return path, choose_gpu_path(path, gpu)


def time_both(fn, slow_us):
    """(eager us, GPU-only us) of fn; a call slower than slow_us is timed eager only, once more (GPU-only = eager)."""
    t = tm.time_cuda_events(fn, warmup=2, target_s=0.01, min_reps=3, max_reps=15, max_s=0.05)
    if t.median_us > slow_us:
        return t.median_us, t.median_us
    g = tm.time_cuda_graph(fn, est_us=t.median_us, target_replay_s=1e-3, max_calls=20, warmup=1, target_s=0.004,
                           min_reps=3, max_reps=10)
    return t.median_us, g.median_us


def measure_cell(dtype, k, cols, batch, sweep_max_cols, slow_us):
    """{name: (eager us, GPU-only us)} for hsma's paths and torch at one cell (NaN where not timed)."""
    import hsma_trsm
    from hsma_trsm import _ops

    shape = (batch,) if batch > 1 else ()
    A = bu.make_triangular(k, batch=shape, dtype=dtype, device="cuda", seed=k + cols)
    B = bu.make_rhs(k, cols, batch=shape, dtype=dtype, device="cuda", seed=k + cols + 1)
    out = {}
    for path in PATHS:
        if path == "sweep" and cols > sweep_max_cols:
            out[path] = (math.nan, math.nan)
            continue
        with _ops.overrides(path=path):
            out[path] = time_both(lambda: hsma_trsm.trsm(A, B), slow_us)
    out["torch"] = time_both(lambda: torch.linalg.solve_triangular(A, B, upper=False), slow_us)
    return out


def table_name():
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return f"{output.slugify(props.name)}-sm{props.major}{props.minor}-paths.csv"


TITLE = ("# hsma_trsm path table: the path of each (dtype, k, cols, batch) cell, left-lower solves, eager (path) and "
         "while a CUDA graph is captured (gpu_path); times in us, eager (isolated calls) and gpu (CUDA-graph replay); "
         "aten = torch's kernel through hsma, torch = torch.linalg.solve_triangular (python -m benchmarks.tune_paths)")


def write_table(path, rows, info, meta=None):
    """The table file: the title, the run's metadata (or `meta`, the '#' lines after a table's title, as they are),
    the header and the rows."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        f.write(TITLE + "\n")
        if meta is None:
            f.write(f"# gpu: {info['gpu']}\n# capability: {info['capability']}\n")
            f.write(f"# torch: {info['torch']}\n# cuda: {info['cuda']}\n# date: {info['date']}\n# git: {info['git']}\n")
        else:
            f.writelines(line + "\n" for line in meta)
        f.write(",".join(HEADER) + "\n")
        for r in rows:
            f.write(",".join(r) + "\n")


def row_of(dtype, k, cols, batch, paths, times):
    """A table row; paths: (path, gpu_path)."""
    fmt = lambda x: f"{x:.1f}" if math.isfinite(x) else ""  # noqa: E731
    names = PATHS + ("torch",)
    return [bu.dtype_name(dtype), str(k), str(cols), str(batch), *paths] + [fmt(times[n][0]) for n in names] + \
        [fmt(times[n][1]) for n in names]


def read_times(path):
    """(the '#' lines after the title, [(dtype name, k, cols, batch, {name: (eager us, GPU-only us)})]) of a table
    file (either header: with or without gpu_path)."""
    with open(path) as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    meta = [line for line in lines if line.startswith("#") and line != TITLE and "path table:" not in line]
    body = [line.split(",") for line in lines if not line.startswith("#")]
    col = {name: i for i, name in enumerate(body[0])}
    num = lambda row, key: float(row[col[key]]) if row[col[key]] else math.nan  # noqa: E731
    cells = [(r[0], int(r[1]), int(r[2]), int(r[3]),
              {p: (num(r, f"{p}_us"), num(r, f"{p}_gpu_us")) for p in PATHS + ("torch",)}) for r in body[1:]]
    return meta, cells


def rechoose(path):
    """Chooses every cell's paths again from the times in the table at `path` and rewrites it; the rows' count."""
    meta, cells = read_times(path)
    meta = [m for m in meta if not m.startswith("# rechosen:")] + \
        [f"# rechosen: {time.strftime('%Y-%m-%d')}, from these times (python -m benchmarks.tune_paths --rechoose)"]
    chosen = [(d, k, cols, batch, choose(times), times) for d, k, cols, batch, times in cells]
    rows = [row_of(bu.parse_dtype(d), k, cols, batch, paths, times)
            for d, k, cols, batch, paths, times in chosen if paths[0] is not None]  # (main leaves those out too)
    write_table(path, rows, None, meta=meta)
    return len(rows)


def summary(results):
    """Lines: per dtype, the cells handed to torch and those where the chosen path is below 0.97x torch."""
    lines = [f"{'dtype':<11} {'cells':>5} {'aten':>5} {'sweep':>5} {'blocked':>7} {'<0.97 eager':>11} "
             f"{'<0.97 gpu':>9}"]
    for d in sorted({r[0] for r in results}):
        rs = [r for r in results if r[0] == d]
        count = {p: sum(r[4] == p for r in rs) for p in PATHS}
        slow_e = sum(r[5]["torch"][0] / r[5][r[4]][0] < 0.97 for r in rs)
        slow_g = sum(r[5]["torch"][1] / r[5][r[4]][1] < 0.97 for r in rs)
        lines.append(f"{d:<11} {len(rs):>5} {count['aten']:>5} {count['sweep']:>5} {count['blocked']:>7} "
                     f"{slow_e:>11} {slow_g:>9}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tune_paths", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtypes", default="f32,f64,c64,c128")
    ap.add_argument("--ks", default=",".join(map(str, DEFAULT_KS)))
    ap.add_argument("--cols", default=",".join(map(str, DEFAULT_COLS)))
    ap.add_argument("--batches", default=",".join(map(str, DEFAULT_BATCHES)))
    ap.add_argument("--mem-gib", type=float, default=1.0, help="largest operands of a cell (A + B + X), GiB")
    ap.add_argument("--sweep-max-cols", type=int, default=64, help="most columns the sweep is timed with")
    ap.add_argument("--slow-us", type=float, default=20000.0, help="calls slower than this are timed eager only")
    ap.add_argument("--budget-s", type=float, default=0.0, help="stop after this many seconds (0: no limit)")
    ap.add_argument("--out", default=None, help="table file (default: <repo>/out/tune/<gpu>-sm<cc>-paths.csv)")
    ap.add_argument("--rechoose", metavar="TABLE", default=None,
                    help="no timing: choose the paths of TABLE's cells again from its times, and rewrite it")
    args = ap.parse_args(argv)
    if args.rechoose:
        print(f"{args.rechoose}: {rechoose(args.rechoose)} cells chosen again from their times")
        return 0
    if not torch.cuda.is_available():
        print("benchmarks.tune_paths: no CUDA device; the tuner measures the GPU it runs on", file=sys.stderr)
        return 2
    info = output.env_info("cuda")
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    cells = grid([bu.parse_dtype(d) for d in args.dtypes.split(",")], ints(args.ks), ints(args.cols),
                 ints(args.batches), args.mem_gib * 2**30)
    out = args.out or os.path.join(output.REPO_ROOT, "out", "tune", table_name())
    print(f"path tuning on {info['gpu']} (sm {info['capability']}), torch {info['torch']}: {len(cells)} cells")
    tm.gpu_warmup()
    start, rows, results = time.perf_counter(), [], []
    for dtype, k, cols, batch in output.progress(cells, total=len(cells), desc="paths"):
        if args.budget_s and time.perf_counter() - start > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s spent: {len(cells) - len(rows)} cells not measured")
            break
        try:
            times = measure_cell(dtype, k, cols, batch, args.sweep_max_cols, args.slow_us)
        except RuntimeError as e:  # e.g. out of memory: the cell is left out, the plan takes its neighbour
            print(f"{bu.dtype_name(dtype)} k {k} cols {cols} batch {batch}: {str(e)[:200]}", file=sys.stderr)
            torch.cuda.empty_cache()
            continue
        paths = choose(times)
        if paths[0] is None:
            continue
        rows.append(row_of(dtype, k, cols, batch, paths, times))
        results.append((bu.dtype_name(dtype), k, cols, batch, paths[0], times))
        write_table(out, rows, info)
    write_table(out, rows, info)
    print(f"table written to {out} ({len(rows)} cells, {time.perf_counter() - start:.0f} s); use it with "
          f"HSMA_TRSM_PATHS={out}, ship it in hsma_trsm/tuning/")
    print("\n".join(summary(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
