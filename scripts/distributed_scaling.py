#!/usr/bin/env python3
"""hsma_trsm on DTensors over several processes: correctness checks, then weak scaling of a batch-sharded solve.

Run (one process per GPU, NCCL when CUDA is available, else gloo on the CPU):

    torchrun --nproc-per-node N scripts/distributed_scaling.py      # torchrun: RANK / WORLD_SIZE set
    python scripts/distributed_scaling.py --nproc N                 # spawns N processes itself
    python scripts/distributed_scaling.py --backend gloo --nproc 2 --small   # CPU dry run, small sizes

1. Checks (float64, as tests/test_distributed.py): a batch-sharded solve (A and B Shard(0)) and a left solve with A
   replicated and B's columns sharded, forward and backward (gradients of A and B): the result keeps its sharding,
   neither pass issues a collective, and the result and gradients match the single-process solve of rank 0's copy.
2. Weak scaling: the per-rank batch is fixed; on meshes of 1, 2, 4, ..., N ranks (sub-groups of the world),
   hsma_trsm.solve_triangular and torch.linalg.solve_triangular on the same Shard(0) DTensors are timed (CUDA
   events, or perf_counter on the CPU; median of --reps after --warmup, the slowest rank's). The table: world size,
   case, hsma ms, torch ms, ratio torch/hsma (> 1: hsma faster), efficiency t(1 rank) / t(w ranks) of each.
"""
import argparse
import datetime
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist

FULL = [(4096, 64, 64), (512, 256, 256)]  # per-rank batch, order k, columns of B
SMALL = [(64, 16, 16), (8, 48, 32)]
DTYPES = [torch.float32, torch.float64]


def _tri(batch, k, dtype, device, gen):
    """Well-conditioned lower triangles: off-diagonal N(0, 1/k^2), diagonal in [1, 2)."""
    off = torch.randn(batch, k, k, dtype=dtype, device=device, generator=gen).tril(-1) / k
    return off + torch.diag_embed(1 + torch.rand(batch, k, dtype=dtype, device=device, generator=gen))


# ---------------------------------------------------------------------------------------------
# 1. Checks


def _check(name, mesh, device, A, B, placements, expect):
    """Solve on DTensors placed as `placements` vs the plain solve on rank 0's copy, forward and backward."""
    import hsma_trsm
    from torch.distributed.tensor import distribute_tensor
    from torch.distributed.tensor.debug import CommDebugMode

    A, B = A.to(device), B.to(device)
    g = torch.randn(B.shape, dtype=B.dtype, generator=torch.Generator().manual_seed(99)).to(device)
    dA, dB = (distribute_tensor(t.clone(), mesh, p, src_data_rank=None).requires_grad_()
              for t, p in zip((A, B), placements))
    with CommDebugMode() as fwd:
        out = hsma_trsm.solve_triangular(dA, dB, upper=False)
    with CommDebugMode() as bwd:
        out.backward(distribute_tensor(g, mesh, out.placements, src_data_rank=None))
    got = [out.full_tensor(), dA.grad.full_tensor(), dB.grad.full_tensor()]  # collectives: every rank
    if dist.get_rank() != 0:
        return
    assert tuple(out.placements) == tuple(expect), f"{name}: result placed {out.placements}, expected {expect}"
    assert fwd.get_total_counts() == 0, f"{name}: forward collectives {dict(fwd.get_comm_counts())}"
    assert bwd.get_total_counts() == 0, f"{name}: backward collectives {dict(bwd.get_comm_counts())}"
    rA, rB = A.clone().requires_grad_(), B.clone().requires_grad_()
    ref = hsma_trsm.solve_triangular(rA, rB, upper=False)
    ref.backward(g)
    errs = []
    for what, x, want in zip(("result", "grad A", "grad B"), got, (ref.detach(), rA.grad, rB.grad)):
        torch.testing.assert_close(x, want, rtol=1e-10, atol=1e-10, msg=lambda m: f"{name}, {what}: {m}")
        errs.append((x - want).abs().max().item())
    print(f"check ok: {name:<40} max |diff| result {errs[0]:.1e}, grad A {errs[1]:.1e}, grad B {errs[2]:.1e}",
          flush=True)


def checks(mesh, device):
    from torch.distributed.tensor import Replicate, Shard

    W, k = mesh.size(), 24
    gen = torch.Generator().manual_seed(1234)
    A = _tri(2 * W, k, torch.float64, "cpu", gen)
    B = torch.randn(2 * W, k, 5, dtype=torch.float64, generator=gen)
    _check("batch: A, B Shard(0)", mesh, device, A, B, [[Shard(0)], [Shard(0)]], [Shard(0)])
    B = torch.randn(2 * W, k, 2 * W + 1, dtype=torch.float64, generator=gen)
    _check("left: A Replicate, B Shard(2) (columns)", mesh, device, A, B, [[Replicate()], [Shard(2)]], [Shard(2)])


# ---------------------------------------------------------------------------------------------
# 2. Weak scaling


def _median_ms(fn, group, device, reps, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            dist.barrier(group=group, device_ids=[device.index])
            torch.cuda.synchronize(device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            dist.barrier(group=group)
            t0 = time.perf_counter()
            fn()
            times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def scaling(device, sizes, reps, warmup):
    """{(w, case): (hsma ms, torch ms)} on rank 0, each the slowest rank's median."""
    import hsma_trsm
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Shard

    assert not hsma_trsm.switch.is_enabled(), "hsma's switch is on: torch.linalg would run hsma's kernels"
    rank, world = dist.get_rank(), dist.get_world_size()
    worlds = sorted({w for w in (2 ** i for i in range(world.bit_length())) if w <= world} | {world})
    groups = {w: dist.group.WORLD if w == world else dist.new_group(list(range(w))) for w in worlds}  # all ranks
    results = {}
    for w in worlds:
        mesh = DeviceMesh.from_group(groups[w], device.type) if rank < w else None
        for dtype in DTYPES:
            for batch, k, n in sizes:
                case = f"{str(dtype)[6:]} {batch}x{k}x{k}, n={n}"
                ms = torch.zeros(2, dtype=torch.float64, device=device)
                if mesh is not None:
                    gen = torch.Generator(device=device).manual_seed(1000 * rank + k)
                    A = _tri(batch, k, dtype, device, gen)
                    B = torch.randn(batch, k, n, dtype=dtype, device=device, generator=gen)
                    dA, dB = (DTensor.from_local(t, mesh, [Shard(0)], run_check=False) for t in (A, B))
                    with torch.no_grad():
                        X = hsma_trsm.solve_triangular(dA, dB, upper=False)
                        Y = torch.linalg.solve_triangular(dA, dB, upper=False)
                        placed = (X.placements, Y.placements)
                        assert placed == ((Shard(0),), (Shard(0),)), f"{case}: results placed {placed}"
                        tol = 1e-3 if dtype == torch.float32 else 1e-9
                        torch.testing.assert_close(X.to_local(), Y.to_local(), rtol=tol, atol=tol)
                        for i, fn in enumerate((lambda: hsma_trsm.solve_triangular(dA, dB, upper=False),
                                                lambda: torch.linalg.solve_triangular(dA, dB, upper=False))):
                            ms[i] = _median_ms(fn, groups[w], device, reps, warmup)
                    del A, B, dA, dB, X, Y
                dist.all_reduce(ms, op=dist.ReduceOp.MAX)  # the slowest rank's; ranks outside the mesh give 0
                results[(w, case)] = tuple(ms.tolist())
        dist.barrier()
    return results


def table(results):
    base = {case: ms for (w, case), ms in results.items() if w == 1}
    head = (f"{'world':>5}  {'case':<26} {'hsma ms':>9} {'torch ms':>9} {'torch/hsma':>10} {'eff hsma':>8} "
            f"{'eff torch':>9}")
    lines = [head, "-" * len(head)]
    order = list(base)  # cases in the order run
    for (w, case), (h, t) in sorted(results.items(), key=lambda kv: (order.index(kv[0][1]), kv[0][0])):
        h1, t1 = base[case]
        lines.append(f"{w:>5}  {case:<26} {h:>9.3f} {t:>9.3f} {t / h:>10.2f} {h1 / h:>8.2f} {t1 / t:>9.2f}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Processes


def run(args, local_rank):
    from torch.distributed.device_mesh import DeviceMesh

    device = torch.device("cuda", local_rank) if args.backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(args.threads)
    import hsma_trsm  # noqa: F401 - also registers hsma_trsm.distributed's strategies

    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
        print(f"{world} ranks, backend {args.backend}, {name}, torch {torch.__version__}", flush=True)
    checks(DeviceMesh.from_group(dist.group.WORLD, device.type), device)
    sizes = SMALL if args.small else FULL
    results = scaling(device, sizes, args.reps or (3 if args.small else 10), args.warmup)
    if rank == 0:
        print(table(results), flush=True)


def _init(args, rank, world):
    kw = dict(backend=args.backend, timeout=datetime.timedelta(seconds=args.timeout))
    if rank is None:
        dist.init_process_group(**kw)  # torchrun's env://
    else:
        dist.init_process_group(**kw, rank=rank, world_size=world)


def _spawned(rank, args, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    _init(args, rank, args.nproc)
    try:
        run(args, rank)
    finally:
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # passed: skip torch's slow interpreter teardown; a failure takes the normal way out (spawn reports)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, default=torch.cuda.device_count() or 2, help="processes to spawn")
    p.add_argument("--backend", default="nccl" if torch.cuda.is_available() else "gloo")
    p.add_argument("--small", action="store_true", help="small sizes (a CPU dry run)")
    p.add_argument("--reps", type=int, default=0, help="timed repetitions (default 10, --small 3)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank on the CPU")
    p.add_argument("--timeout", type=float, default=600, help="seconds: collectives, and the spawned run")
    args = p.parse_args()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        _init(args, None, None)
        try:
            run(args, int(os.environ.get("LOCAL_RANK", 0)))
        finally:
            dist.destroy_process_group()
        return
    import torch.multiprocessing as mp

    if args.backend == "nccl" and args.nproc > torch.cuda.device_count():
        sys.exit(f"--nproc {args.nproc}: only {torch.cuda.device_count()} GPUs")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    ctx = mp.start_processes(_spawned, args=(args, port), nprocs=args.nproc, join=False, start_method="spawn")
    try:
        while not ctx.join(timeout=max(1.0, t0 + args.timeout - time.monotonic())):
            if time.monotonic() > t0 + args.timeout:
                sys.exit(f"{args.nproc} ranks: no result after {args.timeout:.0f} s")
    finally:
        for proc in ctx.processes:
            if proc.is_alive():
                proc.kill()
    print(f"done: {args.nproc} ranks in {time.monotonic() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
