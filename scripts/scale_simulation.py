#!/usr/bin/env python
"""Distributed TRSM on a p x q process grid, simulated on CPU ranks (the schedule of docs/scale.md).

A (k x k, lower) is cut into nb x nb tiles, tile (I, J) on process (I mod p, J mod q) (2D block-cyclic, as
ScaLAPACK and SLATE). Block row K of B (nb x n) starts on the owner of A_KK, where block row K of X ends.
Fan-in schedule, per block step K:
  op = N (L X = B, K = 0 .. T-1):   reduce the partial sums W_K along process row K mod p to the owner of A_KK;
      solve X_K = A_KK^-1 (B_K - W_K); broadcast X_K along process column K mod q; each process of that column
      adds A_IK X_K into its W_I (I > K, I mod p = its row).
  op = T (L^T X = B, K = T-1 .. 0): the same with rows and columns swapped (reduce along process column K mod q,
      broadcast along process row K mod p, W_I += A_KI^T X_K for I < K).
Every rank runs the real solve on its tiles (gloo, dist.broadcast / dist.reduce on row and column subgroups).
Rank 0 checks X against torch.linalg.solve_triangular on the whole matrix and compares the counted collectives,
messages and words with the model's formulas (exact integers). `--h200` prints the model evaluated for the H200.

    .venv/bin/python scripts/scale_simulation.py            # 2x2 and 3x2 grids, both ops, then the H200 table
"""
import argparse
import datetime
import math
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

KINDS = ("bcast", "reduce")
FIELDS = ("calls", "messages", "words", "rounds")  # rounds: ceil(log2 g) per collective, summed (latency chain)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Comm:
    """Row/column subgroups of the grid, with every collective counted once (on its root)."""

    def __init__(self, rank, p, q):
        self.rank, self.p, self.q = rank, p, q
        self.r, self.c = divmod(rank, q)
        self.rows = [dist.new_group([r * q + c for c in range(q)]) for r in range(p)]
        self.cols = [dist.new_group([r * q + c for r in range(p)]) for c in range(q)]
        self.count = torch.zeros(len(KINDS), len(FIELDS), dtype=torch.int64)

    def _record(self, kind, size, numel):
        if size > 1:
            row = self.count[KINDS.index(kind)]
            row += torch.tensor([1, size - 1, (size - 1) * numel, math.ceil(math.log2(size))])

    def bcast(self, t, root, group, size):
        if size > 1:
            dist.broadcast(t, src=root, group=group)
        if self.rank == root:
            self._record("bcast", size, t.numel())

    def reduce(self, t, root, group, size):
        if size > 1:
            dist.reduce(t, dst=root, op=dist.ReduceOp.SUM, group=group)
        if self.rank == root:
            self._record("reduce", size, t.numel())


def problem(k, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(k, k, generator=g, dtype=torch.float64).tril() / math.sqrt(k)
    A.diagonal().copy_(1 + torch.rand(k, generator=g, dtype=torch.float64))
    return A, torch.randn(k, n, generator=g, dtype=torch.float64)


def distributed_solve(comm, A, B, nb, op):
    """Solve op(A) X = B with A's tiles block-cyclic on the grid. Returns {K: X_K} for the blocks this rank owns."""
    p, q, r, c, me = comm.p, comm.q, comm.r, comm.c, comm.rank
    k, n = B.shape
    T = k // nb
    tile = {(I, J): A[I * nb:(I + 1) * nb, J * nb:(J + 1) * nb].clone()  # only this rank's tiles are kept
            for I in range(T) for J in range(I + 1) if I % p == r and J % q == c}
    Bk = {K: B[K * nb:(K + 1) * nb].clone() for K in range(T) if (K % p, K % q) == (r, c)}
    W, X = {}, {}  # W[I]: this rank's partial sum of the updates to block row I
    steps = range(T) if op == "N" else range(T - 1, -1, -1)
    for K in steps:
        root = (K % p) * q + K % q
        first, last = (K == 0, K == T - 1) if op == "N" else (K == T - 1, K == 0)
        # 1. fan-in: sum the partial updates to block row K on the owner of A_KK
        if not first:
            if op == "N" and r == K % p:
                W.setdefault(K, torch.zeros(nb, n, dtype=B.dtype))
                comm.reduce(W[K], root, comm.rows[r], q)
            if op == "T" and c == K % q:
                W.setdefault(K, torch.zeros(nb, n, dtype=B.dtype))
                comm.reduce(W[K], root, comm.cols[c], p)
        # 2. the diagonal block solve
        if me == root:
            rhs = Bk[K] - W[K] if not first else Bk[K]
            D = tile[(K, K)]
            # gloo sends a tensor's storage as laid out: LAPACK's column-major result must be made contiguous
            X[K] = torch.linalg.solve_triangular(D if op == "N" else D.T, rhs, upper=(op == "T")).contiguous()
        if last:
            continue
        # 3. broadcast X_K to the processes holding the tiles that multiply it, 4. their local updates
        if op == "N" and c == K % q:
            xk = X[K] if me == root else torch.empty(nb, n, dtype=B.dtype)
            comm.bcast(xk, root, comm.cols[c], p)
            for I in range(K + 1, T):
                if I % p == r:
                    W[I] = W.get(I, torch.zeros(nb, n, dtype=B.dtype)) + tile[(I, K)] @ xk
        if op == "T" and r == K % p:
            xk = X[K] if me == root else torch.empty(nb, n, dtype=B.dtype)
            comm.bcast(xk, root, comm.rows[r], q)
            for I in range(K):
                if I % q == c:
                    W[I] = W.get(I, torch.zeros(nb, n, dtype=B.dtype)) + tile[(K, I)].T @ xk
    return X


def model_counts(k, n, nb, p, q, op):
    """The model's exact counts (same layout as Comm.count): T-1 broadcasts and T-1 reductions of nb*n words."""
    T = k // nb
    gb, gr = (p, q) if op == "N" else (q, p)  # group sizes of the broadcast and of the reduction
    out = torch.zeros(len(KINDS), len(FIELDS), dtype=torch.int64)
    for i, g in enumerate((gb, gr)):
        if g > 1:
            out[i] = torch.tensor([T - 1, (T - 1) * (g - 1), (T - 1) * (g - 1) * nb * n,
                                   (T - 1) * math.ceil(math.log2(g))])
    return out


def worker(rank, world, port, cases, p, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    torch.set_num_threads(1)
    comm = Comm(rank, p, q)
    for k, n, nb, op in cases:
        A, B = problem(k, n)
        comm.count.zero_()
        X = distributed_solve(comm, A, B, nb, op)
        full = torch.zeros(k, n, dtype=B.dtype)  # gather X for the check (not counted)
        for K, xk in X.items():
            full[K * nb:(K + 1) * nb] = xk
        dist.all_reduce(full)
        dist.all_reduce(comm.count)
        if rank == 0:
            ref = torch.linalg.solve_triangular(A if op == "N" else A.T, B, upper=(op == "T"))
            torch.testing.assert_close(full, ref, rtol=1e-10, atol=1e-10)
            want = model_counts(k, n, nb, p, q, op)
            T = k // nb
            print(f"\ngrid {p}x{q}, op={op}, k={k}, n={n}, nb={nb} (T={T} steps): X matches torch.linalg "
                  f"(max err {(full - ref).abs().max().item():.1e})")
            print(f"  {'quantity':<18}{'model':>10}{'measured':>10}  formula")
            gb, gr = (p, q) if op == "N" else (q, p)
            formula = {"calls": "T-1", "messages": "(T-1)(g-1)", "words": "(T-1)(g-1) nb n",
                       "rounds": "(T-1) ceil(log2 g)"}
            for i, kind in enumerate(KINDS):
                g = gb if kind == "bcast" else gr
                for j, f in enumerate(FIELDS):
                    print(f"  {kind + ' ' + f:<18}{want[i, j].item():>10}{comm.count[i, j].item():>10}  "
                          f"{formula[f]}, g={g}")
            tw, mw = want[:, 2].sum().item(), comm.count[:, 2].sum().item()
            print(f"  {'total words':<18}{tw:>10}{mw:>10}  (T-1) nb n (p+q-2)")
            assert torch.equal(want, comm.count), "counts differ from the model"
    dist.barrier()
    dist.destroy_process_group()


def simulate(p, q, cases, limit_s=120):
    world = p * q
    ctx = mp.start_processes(worker, args=(world, free_port(), cases, p, q), nprocs=world, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + limit_s
    while not ctx.join(timeout=2):
        if time.monotonic() > deadline:
            for proc in ctx.processes:
                proc.kill()
            sys.exit(f"simulation on {p}x{q} ranks timed out after {limit_s} s")


# ---- the cost model, evaluated for the H200 (assumptions stated in docs/scale.md) ----
ALPHA = 5e-6          # s, latency of one collective hop
BETA = 1 / 450e9      # s per byte, NVLink per direction per GPU
GEMM = 50e12          # flop/s, fp64 GEMM
HBM = 4.8e12          # byte/s, for the memory-bound (narrow n) updates
WORD = 8              # bytes, float64


def local_time(flops, nbytes):
    return max(flops / GEMM, nbytes / HBM)


def estimate(k, n, nb, p, q):
    """Fan-in schedule (the one simulated): (chain s, bulk s, words moved, partial-sum GB per GPU)."""
    P, T = p * q, math.ceil(k / nb)
    hops = math.ceil(math.log2(p)) + math.ceil(math.log2(q))
    step_comm = hops * ALPHA + 2 * BETA * WORD * nb * n            # a reduce and a broadcast of nb x n (pipelined)
    step_flop = local_time(3 * nb * nb * n, 2 * WORD * nb * nb)     # inverted diagonal block + next row's update
    chain = T * step_flop + (T - 1) * step_comm
    invert = math.ceil(T / math.lcm(p, q)) * nb ** 3 / 3 / GEMM     # diagonal blocks inverted first, in parallel
    bulk = local_time(k * k * n / P, WORD * k * k / 2 / P) + invert  # all tile updates, spread evenly
    return chain, bulk, (T - 1) * nb * n * (p + q - 2), WORD * math.ceil(T / p) * nb * n / 1e9


def estimate_2d(k, n, nb, p, q):
    """B-stationary schedule for wide n (B in nb x nb tiles on the grid, A's panels move): not simulated."""
    P, T = p * q, math.ceil(k / nb)
    lp, lq = math.ceil(math.log2(p)), math.ceil(math.log2(q))
    step = ((2 * lq + lp) * ALPHA + BETA * WORD * (2 * nb * nb + nb * n / q)  # A_KK and next panel tile on rows,
            + local_time(3 * nb * nb * n / q, 0))                             # X_K's tiles down the columns
    moved = BETA * WORD * (k * k / 2 / p + k * n / q)                 # what one GPU receives in all
    bulk = max(local_time(k * k * n / P, 0), moved)
    words = T * nb * nb * (q - 1) + (T - 1) * nb * n * (p - 1) + nb * nb * (q - 1) * T * (T - 1) // 2
    return T * step, bulk, words, WORD * math.ceil(T / p) * nb * math.ceil(n / q) / 1e9


def h200_table(k=200_000):
    print(f"\nH200 model, k={k}, float64: full A {WORD * k * k / 1e9:.0f} GB, triangle "
          f"{WORD * k * (k + 1) / 2 / 1e9:.0f} GB, B (n=k) {WORD * k * k / 1e9:.0f} GB")
    print(f"  {'n':>6} {'sched':>6} {'GPUs':>4} {'grid':>4} {'nb':>4} {'steps':>5} {'chain ms':>9} {'bulk ms':>9} "
          f"{'est. ms':>9} {'words moved':>11} {'B/W GB/GPU':>10}")
    for n in (1, 64, k):
        for name, fn in (("fan-in", estimate), ("B-stat", estimate_2d)):
            for p, q in ((2, 4), (4, 4), (8, 8)):
                best = min((sum(fn(k, n, nb, p, q)[:2]), nb) for nb in (256, 512, 1024, 2048, 4096))[1]
                chain, bulk, words, mem = fn(k, n, best, p, q)
                print(f"  {n:>6} {name:>6} {p * q:>4} {f'{p}x{q}':>4} {best:>4} {math.ceil(k / best):>5} "
                      f"{chain * 1e3:>9.2f} {bulk * 1e3:>9.2f} {(chain + bulk) * 1e3:>9.2f} {words:>11.2e} "
                      f"{mem:>10.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--h200", action="store_true", help="only print the H200 model table")
    args = ap.parse_args()
    if not args.h200:
        t0 = time.perf_counter()
        cases = [(384, 5, 32, "N"), (384, 5, 32, "T"), (512, 1, 16, "N")]
        simulate(2, 2, cases)
        simulate(3, 2, [(480, 3, 16, "N"), (480, 3, 16, "T")])
        print(f"\nsimulation: all solves match and all counts equal the model ({time.perf_counter() - t0:.1f} s)")
    h200_table()


if __name__ == "__main__":
    main()
