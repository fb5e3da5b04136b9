"""Offline block-size tuner for the blocked path (the HSMA-TRSM paper's adaptive blocking).

    python -m benchmarks.tune [--sizes 128,256,...] [--dtypes f32,f64,c64,c128]
                             [--nbs 32,64,128,256,512,1024] [--variants recursive,blocked]
                             [--out PATH] [--sweep-csv PATH]

On the current CUDA GPU, for every (dtype, size) it times square left-lower solves (m = n = size)
for every candidate (NB, variant) as the block plan runs it: the candidate stands in for the
table's row (the overrides table_nb / variant) and the rules after the table still apply (orders
up to 256 take NB <= 64), so each effective plan (hsma_trsm._ops.block_plan) is timed once and the
table gets the effective NB and variant: every row means what runs. It keeps the fastest and
writes the table the C++ lookup reads (default: <repo>/out/tune/<gpu>-sm<cc>.csv;
copy it to hsma_trsm/tuning/, the file name the package picks for this GPU, to ship it). Point
the library at another table with HSMA_TRSM_TABLE=path. The full sweep (every candidate's time)
goes to --sweep-csv for ablations (adaptive vs fixed NB = 128). Candidates with NB < 128 are
skipped at sizes >= 8192 (hundreds of GEMM launches; never the fastest in our sweeps) unless
--all-nb is given.
"""
import argparse
import csv
import os
import sys

import torch

from . import output
from . import timing as tm
from . import util as bu

DEFAULT_SIZES = [128, 256, 512, 1024, 2048, 4096, 8192, 16384]
DEFAULT_NBS = [32, 64, 128, 256, 512, 1024]


def candidate_overrides(nb, variant):
    """The overrides of a candidate: NB as the table's row would give it, the rules after it applied."""
    return {"nb": None, "table_nb": nb, "variant": variant}


def plan_candidates(dtype, size, nbs, variants, all_nb=False, gpu=None, capability=None):
    """[(nb, variant, plan)]: the candidates to time at (dtype, size), each with the plan a square
    solve runs for it (on the current GPU, or the one named), one per effective (NB, variant)."""
    from hsma_trsm import _ops

    out, seen = [], set()
    for nb in nbs:
        if nb > size or (size >= 8192 and nb < 128 and not all_nb):
            continue
        for variant in variants:
            with bu.hsma_overrides(candidate_overrides(nb, variant)):
                plan = _ops.block_plan(dtype, size, gpu=gpu, capability=capability)
            if (plan.nb, plan.variant) not in seen:
                seen.add((plan.nb, plan.variant))
                out.append((nb, variant, plan))
    return out


def time_config(A, B, nb, variant, target_s):
    import hsma_trsm

    with bu.hsma_overrides(candidate_overrides(nb, variant)):
        t = tm.time_cuda_events(
            lambda: hsma_trsm.trsm(A, B), warmup=1, target_s=target_s, min_reps=3, max_reps=20, isolate=False
        )
    return t.median_us


def table_path_for_current_gpu():
    """The package's table for this GPU: <repo>/hsma_trsm/tuning/<gpu-slug>-sm<cc>.csv."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    name = f"{output.slugify(props.name)}-sm{props.major}{props.minor}.csv"
    return os.path.join(output.REPO_ROOT, "hsma_trsm", "tuning", name)


def default_out_path():
    """Where the tuner writes unless --out is given: <repo>/out/tune/<the package table's name>."""
    return os.path.join(output.REPO_ROOT, "out", "tune", os.path.basename(table_path_for_current_gpu()))


def write_table(path, best, info):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        f.write("# hsma_trsm block-size table: fastest (NB, variant) per (dtype, size), square left-lower solves; "
                "NB as the plan runs it\n")
        f.write(f"# gpu: {info['gpu']}\n# capability: {info['capability']}\n")
        f.write(f"# torch: {info['torch']}\n# cuda: {info['cuda']}\n# date: {info['date']}\n")
        f.write("dtype,size,nb,variant\n")
        for (dtype, size), (nb, variant, _) in sorted(best.items()):
            f.write(f"{dtype},{size},{nb},{variant}\n")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    ap.add_argument("--dtypes", default="f32,f64,c64,c128")
    ap.add_argument("--nbs", default=",".join(map(str, DEFAULT_NBS)))
    ap.add_argument("--variants", default="recursive,blocked")
    ap.add_argument("--out", default=None, help="table file (default: <repo>/out/tune/<gpu>-sm<cc>.csv)")
    ap.add_argument("--sweep-csv", default=None, help="also write every candidate's time here")
    ap.add_argument("--target-s", type=float, default=0.05, help="timed seconds per candidate")
    ap.add_argument("--all-nb", action="store_true", help="also try NB < 128 at sizes >= 8192")
    args = ap.parse_args(argv)

    if not torch.cuda.is_available():
        print("benchmarks.tune: no CUDA device; the tuner measures the GPU it runs on", file=sys.stderr)
        return 2
    import hsma_trsm  # noqa: F401

    info = output.env_info("cuda")
    sizes = [int(s) for s in args.sizes.split(",")]
    dtypes = [bu.parse_dtype(d) for d in args.dtypes.split(",")]
    nbs = [int(s) for s in args.nbs.split(",")]
    variants = args.variants.split(",")
    out = args.out or default_out_path()
    print(f"tuning on {info['gpu']} (sm {info['capability']}), torch {info['torch']}, CUDA {info['cuda']}")

    jobs = [(dtype, size, nb, variant, plan) for dtype in dtypes for size in sizes
            for nb, variant, plan in plan_candidates(dtype, size, nbs, variants, args.all_nb)]

    best = {}
    sweep = None
    if args.sweep_csv:  # written as it goes, so an interrupted sweep keeps what it measured
        os.makedirs(os.path.dirname(os.path.abspath(args.sweep_csv)), exist_ok=True)
        sweep = open(args.sweep_csv, "w", newline="")
        sweep.write(f"# gpu: {info['gpu']}\n# torch: {info['torch']}\n# cuda: {info['cuda']}\n# date: {info['date']}\n")
        sweep_writer = csv.writer(sweep)
        # nb, variant: the plan that ran; table_nb: the candidate that gave it
        sweep_writer.writerow(["dtype", "size", "nb", "variant", "median_us", "tflops", "table_nb"])
    current = None
    bar = output.progress(jobs, total=len(jobs), desc="tune")
    for dtype, size, nb, variant, plan in bar:
        if current != (dtype, size):
            current = (dtype, size)
            A = B = None
            torch.cuda.empty_cache()
            A = bu.make_triangular(size, dtype=dtype, device="cuda", seed=size)
            B = bu.make_rhs(size, size, dtype=dtype, device="cuda", seed=size + 1)
        try:
            us = time_config(A, B, nb, variant, args.target_s)
        except RuntimeError as e:  # e.g. out of memory: record and go on
            us = float("nan")
            print(f"\n{bu.dtype_name(dtype)} size {size} NB {plan.nb} {plan.variant}: {e}", file=sys.stderr)
        if sweep:
            flops = bu.trsm_flops(size, size, is_complex=dtype.is_complex)
            sweep_writer.writerow([bu.dtype_name(dtype), size, plan.nb, plan.variant, f"{us:.1f}",
                                   f"{flops / us / 1e6:.2f}", nb])
            sweep.flush()
        key = (bu.dtype_name(dtype), size)
        if us == us and (key not in best or us < best[key][2]):
            best[key] = (plan.nb, plan.variant, us)
            write_table(out, best, info)  # kept current, so an interrupted sweep still leaves a table
        if hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(f"{key[0]} {size} NB {plan.nb} {plan.variant}: {us:.0f} us")
    if hasattr(bar, "close"):
        bar.close()

    write_table(out, best, info)
    print(f"table written to {out} (use it: HSMA_TRSM_TABLE={out}; ship it: copy it to "
          f"{os.path.relpath(os.path.dirname(table_path_for_current_gpu()), output.REPO_ROOT)}/)")
    if sweep:
        sweep.close()
        print(f"sweep written to {args.sweep_csv}")
    print(f"{'dtype':<11} {'size':>6} {'NB':>5} {'variant':<10} {'us':>10}")
    for (dtype, size), (nb, variant, us) in sorted(best.items()):
        print(f"{dtype:<11} {size:>6} {nb:>5} {variant:<10} {us:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
