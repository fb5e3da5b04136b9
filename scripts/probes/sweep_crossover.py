"""Where the sweep (csrc/kernels/sweep.cu) should give way to the blocked path, and which row block
and task length it should take (development tool; thresholds live in csrc/planner.cpp).

For each (dtype, order k, columns n), left lower, one matrix: eager (event-timed isolated call) and
GPU-only (CUDA-graph replay) time of torch, of the blocked path (override sweep=0) and of the sweep
under each configuration given, in microseconds.

    python scripts/probes/sweep_crossover.py [--out DIR (default out/)] [--quick]
"""
import argparse
import csv
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import hsma_trsm  # noqa: E402,F401
from benchmarks import util as bu  # noqa: E402
from hsma_trsm import _ops  # noqa: E402

# Medium orders against many columns: where the sweep stops paying.
WIDE = [(k, n) for k in (128, 256, 384, 512, 1024) for n in (16, 64, 256, 1024)]
# Narrow right-hand sides: row block and task length.
NARROW = [(k, n) for k in (200, 1000, 2000, 4000, 8000, 16384) for n in (1, 8)]
NARROW_CONFIGS = [dict(sweep=1, sweep_rows=r, sweep_segment=g) for r in (64, 128) for g in (4, 8)]


def measure(fn):
    eager = bu.time_cuda_events(fn, target_s=0.05, max_reps=50).median_us
    graph = bu.time_cuda_graph(fn, target_s=0.05).median_us
    return eager, graph


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    jobs = []
    for dtype in (torch.float32, torch.float64):
        for k, n in WIDE[::3] if args.quick else WIDE:
            jobs.append((dtype, k, n, [dict(sweep=0), dict(sweep=1)]))
        for k, n in NARROW[::3] if args.quick else NARROW:
            cfgs = [c for c in NARROW_CONFIGS if dtype == torch.float32 or c["sweep_rows"] == 64]
            jobs.append((dtype, k, n, [dict(sweep=0)] + cfgs))
    for dtype, k, n, cfgs in jobs:
        A = bu.make_triangular(k, dtype=dtype, device="cuda")
        B = bu.make_rhs(k, n, dtype=dtype, device="cuda")
        ref = torch.linalg.solve_triangular(A.double(), B.double(), upper=False)
        t_eager, t_graph = measure(lambda: torch.linalg.solve_triangular(A, B, upper=False))
        rows.append(dict(dtype=bu.dtype_name(dtype), k=k, n=n, config="torch", eager_us=t_eager, gpu_us=t_graph,
                         error=""))
        for cfg in cfgs:
            with _ops.overrides(**cfg):
                err = bu.rel_error(torch.ops.hsma.trsm(A, B), ref)
                e, g = measure(lambda: torch.ops.hsma.trsm(A, B))
            name = ",".join(f"{key}={v}" for key, v in cfg.items())
            rows.append(dict(dtype=bu.dtype_name(dtype), k=k, n=n, config=name, eager_us=e, gpu_us=g,
                             error=f"{err:.1e}"))
            print(f"{bu.dtype_name(dtype):8s} k={k:5d} n={n:4d} {name:40s} eager {e:8.1f} us  gpu {g:8.1f} us  "
                  f"(torch {t_eager:8.1f} / {t_graph:8.1f})  err {err:.1e}", flush=True)
        del A, B, ref
        torch.cuda.empty_cache()
    path = os.path.join(args.out, "sweep_crossover.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("wrote", path)


if __name__ == "__main__":
    main()
