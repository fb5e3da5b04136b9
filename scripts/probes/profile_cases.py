"""Kernel-level profile of selected solves on a GPU (development tool, not the benchmark).

For each case: the GPU time per call of every kernel hsma and torch launch (torch.profiler, CUDA
activity, averaged over the profiled calls) and the host time per call back to back. Used to
decide where the time goes before changing a kernel; the benchmark (python -m benchmarks)
is what reports speed.

    python scripts/probes/profile_cases.py [--out DIR (default out/)] [--filter SUBSTRING]
"""
import argparse
import collections
import csv
import os
import time

import torch

import hsma_trsm
from hsma_trsm import _ops as hsma_ops

DT = {"f32": torch.float32, "f64": torch.float64, "c64": torch.complex64, "c128": torch.complex128,
      "bf16": torch.bfloat16, "f16": torch.float16, "a32b16": torch.bfloat16}
# A's dtype where it is not B's: a32b16 = float32 A beside a bfloat16 B (fla's w/u step; X in B's dtype)
A_DT = {"a32b16": torch.float32}
HALF = ("bf16", "f16", "a32b16")  # no torch solve to compare with; drawn in float32, then rounded


# the tile kernel, at 33-64 rows; stepsN: N steps per loop iteration
TILES = ("tiles", "tiles+steps1", "tiles+steps2", "tiles+steps4")
# the FP64 tensor-core kernel (mma4 / mma8: warps per block; fold0: no folding)
MMA = ("mma", "mma+mma4", "mma+mma8", "mma+fold0")
SEGMENT_ROWS = ("auto+seg-rows1", "auto+seg-rows2")  # rows per lane of warp-wide segments
SEGMENT_STEPS = ("auto+steps1", "auto+steps2", "auto+steps4", "auto+steps32")  # the blocked substitution's loop


def cases(all_kernels):
    for d in DT:
        for kernel in ("auto", "auto+sync-copy", "columns", "segments", "pipeline"):
            if kernel == "pipeline" and (d != "c128" or not torch.ops.hsma._ablation_built()):
                continue  # the pipeline: complex128 only, and only in an HSMA_TRSM_ABLATION=1 build
            for m, n in ((64, 64), (64, 1), (32, 64), (8, 64), (64, 4096)):
                if (kernel not in ("auto", "auto+sync-copy") and not all_kernels
                        and (m, n) not in ((64, 64), (64, 4096))):
                    continue
                if (m, n) == (64, 4096) and kernel == "segments":
                    yield f"single m={m} n={n} {d} segments:8", d, (), m, n, False, "segments:8"
                yield f"single m={m} n={n} {d} {kernel}", d, (), m, n, False, kernel
        for kernel in TILES:
            yield f"single m=64 n=4096 {d} {kernel}", d, (), 64, 4096, False, kernel
        for kernel in MMA if d in ("f64", "c128") else ():
            for n in (64, 4096):
                yield f"single m=64 n={n} {d} {kernel}", d, (), 64, n, False, kernel
        for rows in SEGMENT_ROWS + SEGMENT_STEPS:  # warp-wide segments: strided or blocked rows, loop steps
            for m, n, unit in ((64, 64, False), (64, 64, True), (64, 1, False), (48, 64, False), (32, 64, False),
                               (24, 16, False)):
                yield f"single m={m} n={n}{' unit' if unit else ''} {d} {rows}", d, (), m, n, unit, rows
        for batch, m, n, unit in ((10000, 32, 32, False), (10000, 32, 1, False), (10000, 8, 8, False),
                                  (10000, 16, 16, False), (4096, 48, 48, False), (4096, 64, 64, False),
                                  (4096, 64, 128, True)):
            forced = ("columns", "columns+rows16", "columns+rows32", "segments", "segments:8") + MMA + (
                TILES if m > 32 else ()) + ("columns+rows64",)
            for kernel in ("auto", "auto+sync-copy") + (forced if m >= 32 else ()):
                yield f"batched b={batch} m={m} n={n} {d} {kernel}", d, (batch,), m, n, unit, kernel
        for kernel in ("auto", "auto+sync-copy", "columns+rows32", "columns+rows64") + TILES + MMA:
            yield f"bcastA b=4096 m=64 n=64 {d} {kernel}", d, "bcast", 64, 64, False, kernel
        for gemm in ("auto", "aten-gemm"):  # aten-gemm: ATen's GEMMs, not cuBLAS's
            for m in (128, 256, 512, 1024, 4096):
                yield f"medium m=n={m} {d} {gemm}", d, (), m, m, False, gemm
            yield f"batched b=1024 m=128 n=128 {d} {gemm}", d, (1024,), 128, 128, False, gemm
            yield f"batched b=256 m=256 n=256 {d} {gemm}", d, (256,), 256, 256, False, gemm


# The variant parts (joined by "+") and the overrides they set (hsma_trsm._ops; docs/kernels.md).
VARIANT_PARTS = {
    "aten-gemm": {"aten_gemm": 1},  # ATen's GEMMs
    "sync-copy": {"async_copy": 0},  # triangles staged through registers
    "rows16": {"column_rows": 16},  # the split column kernel for complex types at 17-32 rows
    "rows32": {"column_rows": 32},  # ... at 33-64 rows
    "rows64": {"column_rows": 64},  # whole columns
    "mma4": {"mma_warps": 4}, "mma8": {"mma_warps": 8},  # warps per block of the tensor-core kernel
    "fold0": {"mma_fold": 0}, "fold1": {"mma_fold": 1},  # with A batched: substitute / fold inverses
    "seg-rows1": {"segment_rows": 1}, "seg-rows2": {"segment_rows": 2},  # rows per lane, warp-wide segments
    **{f"steps{s}": {"segment_steps": s} for s in (1, 2, 4, 32)},  # steps per loop iteration
    "auto": {},
}


def variant_overrides(spec):
    """The overrides of a variant: "+"-joined parts of VARIANT_PARTS, or a small kernel
    name[:lanes] (small_kernel[, segment_lanes])."""
    keys = {}
    for part in spec.split("+"):
        if part in VARIANT_PARTS:
            keys.update(VARIANT_PARTS[part])
        else:
            name, _, lanes = part.partition(":")
            keys.update(small_kernel=name, segment_lanes=lanes or None)
    return keys


def make(d, batch, m, n, unit):
    dtype = DT[d]
    if batch == "bcast":
        a_batch, b_batch = (), (4096,)
    else:
        a_batch = b_batch = batch
    drawn = torch.float32 if d in HALF else dtype
    A = torch.randn(*a_batch, m, m, dtype=drawn, device="cuda").tril() / m ** 0.5
    A.diagonal(dim1=-2, dim2=-1).add_(2)
    B = torch.randn(*b_batch, m, n, dtype=drawn, device="cuda")
    return A.to(A_DT.get(d, dtype)), B.to(dtype)


def kernel_times(fn, calls):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    out, cpu = collections.Counter(), collections.Counter()
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            t = ev.device_time if hasattr(ev, "device_time") else ev.cuda_time
            out[ev.name[:90]] += t / calls
        else:
            cpu[ev.name[:60]] += ev.self_cpu_time_total / calls
    return out, cpu


def host_us(fn, calls=200):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--filter", default="", help="run cases whose name contains one of these |-separated strings")
    ap.add_argument("--kernels", default="", help="only these ,-separated variants (e.g. auto,tiles)")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--plain", action="store_true",
                    help="only call each solve (a warm-up and --calls more), no torch.profiler: for running under ncu")
    ap.add_argument("--cpu-ops", type=int, default=0, help="print the N host ops with the most self CPU time")
    ap.add_argument("--all-kernels", action="store_true", help="every forced small kernel at every single-solve shape")
    args = ap.parse_args()
    rows = []
    for name, d, batch, m, n, unit, kernel in cases(args.all_kernels):
        if args.filter and not any(f in name for f in args.filter.split("|")):
            continue
        if args.kernels and kernel not in args.kernels.split(","):
            continue
        torch.ops.hsma._set_overrides("")
        hsma_ops.set_overrides(**variant_overrides(kernel))
        A, B = make(d, batch, m, n, unit)
        runs = {
            "hsma": (lambda: hsma_trsm.trsm(A, B, unitriangular=unit, out_dtype=B.dtype)) if d in A_DT else
            (lambda: hsma_trsm.solve_triangular(A, B, upper=False, unitriangular=unit)),
            "torch": lambda: torch.linalg.solve_triangular(A, B, upper=False, unitriangular=unit),
        }
        if kernel != "auto" or d in HALF:
            runs.pop("torch")
        for who, fn in runs.items():
            if args.plain:
                for _ in range(1 + args.calls):
                    fn()
                torch.cuda.synchronize()
                print(f"{name:44s} {who:5s} called {1 + args.calls} times")
                continue
            try:
                kt, cpu = kernel_times(fn, args.calls)
                h = host_us(fn)
            except Exception as e:  # report and go on: this is a survey
                print(f"{name} {who}: {type(e).__name__}: {e}")
                continue
            total = sum(kt.values())
            print(f"{name:44s} {who:5s} gpu {total:9.2f} us  host {h:7.2f} us  " +
                  "; ".join(f"{k[:50]} {v:.2f}" for k, v in kt.most_common(4)))
            if args.cpu_ops:  # where the host time goes: self CPU time per call of each op
                print("    host ops (self us/call): " +
                      "; ".join(f"{k} {v:.1f}" for k, v in cpu.most_common(args.cpu_ops)))
            for k, v in kt.items():
                rows.append({"case": name, "who": who, "kernel": k, "us_per_call": f"{v:.3f}",
                             "gpu_total_us": f"{total:.3f}", "host_us": f"{h:.2f}"})
        del A, B
        torch.cuda.empty_cache()
    torch.ops.hsma._set_overrides("")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "profile_cases.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["case", "who", "kernel", "us_per_call", "gpu_total_us", "host_us"])
        w.writeheader()
        w.writerows(rows)
    print("wrote", path)


if __name__ == "__main__":
    main()
