"""Launch-floor probe: how fast can any single-call entry point be on this host?

Issue 3 asks a single 64x64 solve to run 3x faster than torch.linalg.solve_triangular, eager and
event-timed as the benchmark times it (device synchronized, start event, call, end event). This
probe measures the floor of that timing with the same function (benchmarks.util), for
entry points that skip more and more of what a torch op does:

  - torch.add(B, B) (the benchmark's floor: a torch op through the Python arg parser and the
    dispatcher, one output allocation, one launch);
  - torch.linalg.solve_triangular and hsma_trsm.solve_triangular on a 64x64 system of each dtype
    (n = 64, lower);
  - a pybind function of a throw-away extension (built here with load_inline, not part of the
    package) that allocates the output with at::detail::empty_cuda (the caching allocator, no
    dispatcher) and launches a one-warp kernel that spins for a given number of clock cycles
    (0: an empty kernel; others chosen so that its GPU time, measured by CUDA-graph replay, is
    near the solve kernel's);
  - the same without the allocation (launch only, returns None).

Each row (CSV columns): round; api; eager_us / eager_min_us, the median / least isolated eager
time (as the benchmark's eager column); graph_us, the GPU-only time per call (CUDA graph); host_us /
host_min_us, the median / least host time per call issued back to back. The whole list is measured
``rounds`` times (default 3), interleaved. Writes launch_floor.csv to the folder given (default
$OUT, else out/) once every round is done. Run on the GPU machine (HSMA_BENCH_GIT names the commit
where .git is stale, as for the benchmark):
    python scripts/probes/launch_floor_probe.py "$OUT" [rounds]
"""
import csv
import datetime
import os
import sys

import torch
from torch.utils.cpp_extension import load_inline

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import hsma_trsm  # noqa: E402
from benchmarks import util as bu  # noqa: E402

CPP = (
    "void launch_only(torch::Tensor B, int64_t cycles);\n"
    "torch::Tensor alloc_launch(torch::Tensor B, int64_t cycles);\n"
)
CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAException.h>

__global__ void spin_kernel(long long cycles) {
  if (cycles <= 0) return;
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// B is taken (and not used) so that the call converts a tensor argument, as the solve's entry does.
void launch_only(torch::Tensor B, int64_t cycles) {
  spin_kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(cycles);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor alloc_launch(torch::Tensor B, int64_t cycles) {
  at::Tensor X(at::detail::empty_cuda(B.sizes(), B.scalar_type(), B.device(), std::nullopt));
  spin_kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(cycles);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return X;
}
"""


def main(outdir: str, rounds: int = 3) -> None:
    os.makedirs(outdir, exist_ok=True)
    major, minor = torch.cuda.get_device_capability()
    arch = f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"  # this GPU only
    ext = load_inline("launch_floor_probe", CPP, cuda_sources=CUDA, functions=["launch_only", "alloc_launch"],
                      extra_cuda_cflags=["-O3", arch], verbose=False)
    dev = torch.device("cuda")
    B = torch.randn(64, 64, device=dev)
    st, tst = hsma_trsm.solve_triangular, torch.linalg.solve_triangular
    cases = [("torch.add (floor)", lambda: torch.add(B, B))]
    for dt in (torch.float32, torch.float64, torch.complex64, torch.complex128):
        At = bu.make_triangular(64, dtype=dt, device=dev)
        Bt = torch.randn(64, 64, dtype=dt, device=dev)
        name = bu.dtype_name(dt)
        cases.append((f"torch.linalg.solve_triangular {name}", lambda At=At, Bt=Bt: tst(At, Bt, upper=False)))
        cases.append((f"hsma_trsm.solve_triangular {name}", lambda At=At, Bt=Bt: st(At, Bt, upper=False)))
    for cycles in (0, 4000, 6000):
        cases.append((f"pybind alloc + launch, spin {cycles} cycles", lambda c=cycles: ext.alloc_launch(B, c)))
        cases.append((f"pybind launch only, spin {cycles} cycles", lambda c=cycles: ext.launch_only(B, c)))
    bu.gpu_warmup(0.5)
    rows = []
    for rnd in range(rounds):  # the whole list once per round, so that host drift hits every entry
        for label, fn in cases:
            eager = bu.time_cuda_events(fn, max_reps=400, target_s=0.3)
            graph = bu.time_cuda_graph(fn, est_us=eager.median_us)
            host = bu.host_overhead(fn, calls=1000, repeats=5, sync=torch.cuda.synchronize)
            row = dict(round=rnd, api=label, eager_us=round(eager.median_us, 3), eager_min_us=round(eager.min_us, 3),
                       graph_us=round(graph.median_us, 3), host_us=round(host["host_us"], 3),
                       host_min_us=round(host["host_min_us"], 3))
            rows.append(row)
            print(row, flush=True)
    print("\nper entry point, over the rounds: eager median us (range), GPU-only us (range), host us back to back")
    for label, _ in cases:
        mine = [r for r in rows if r["api"] == label]
        e = sorted(r["eager_us"] for r in mine)
        g = sorted(r["graph_us"] for r in mine)
        print(f"  {label:45s} eager {e[0]:7.2f}-{e[-1]:7.2f}  graph {g[0]:6.2f}-{g[-1]:6.2f}  "
              f"host {min(r['host_us'] for r in mine):6.2f}-{max(r['host_us'] for r in mine):6.2f}")
    path = os.path.join(outdir, "launch_floor.csv")
    with open(path, "w", newline="") as f:
        f.write(f"# gpu: {torch.cuda.get_device_name()}\n# torch: {torch.__version__}\n# cuda: {torch.version.cuda}\n"
                f"# date: {datetime.date.today().isoformat()}\n# git: {bu._git_revision()}\n"
                f"# hsma_trsm: {hsma_trsm.__version__}\n# python: {sys.version.split()[0]}\n")
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("wrote", path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "out"),
         int(sys.argv[2]) if len(sys.argv) > 2 else 3)
