"""torch.ops.hsma and the public functions on DTensors (hsma_trsm/distributed.py): CPU processes over gloo.

One process group per world size (2 ranks: a 1-D mesh; 4 ranks: a 1-D and a 2x2 mesh) runs every case in
turn. Each case solves the same global operands (float64, k <= 12) on every rank as plain tensors (the reference)
and as DTensors with the given placements, then checks: the result is a DTensor with the expected placements;
with a sharded strategy, neither the forward nor the backward pass issues a collective (CommDebugMode); the result
and the gradients equal the reference (bitwise where the local solves are the reference's own matrices: batch
sharding; within 1e-12 where a sum over ranks is involved: gradients of replicated operands).
"""
import datetime
import os
import sys
import time
import traceback

import pytest
import torch

F64 = torch.float64
K, N = 6, 5  # order of the triangles, columns (left) or rows (right) of B
SEED = 1234


# ---------------------------------------------------------------------------------------------
# Operands (the same on every rank: a fixed seed)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _tri(*batch, k=K, upper=False, seed=0):
    """Well-conditioned triangular (*batch, k, k), the other triangle NaN (never read)."""
    g = _gen(SEED + seed)
    M = 0.3 * torch.randn(*batch, k, k, dtype=F64, generator=g) + torch.diag_embed(
        1.5 + torch.rand(*batch, k, dtype=F64, generator=g))
    keep = torch.ones(k, k, dtype=torch.bool).triu() if upper else torch.ones(k, k, dtype=torch.bool).tril()
    return M.masked_fill(~keep, float("nan"))


def _rhs(*shape, seed=1):
    return torch.randn(*shape, dtype=F64, generator=_gen(SEED + 100 + seed))


def _chol(*batch, k=K):
    """Lower Cholesky factors of SPD matrices."""
    M = torch.randn(*batch, k, k, dtype=F64, generator=_gen(SEED + 7))
    return torch.linalg.cholesky(M @ M.mT + k * torch.eye(k, dtype=F64))


def _lu(*batch, k=K):
    M = torch.randn(*batch, k, k, dtype=F64, generator=_gen(SEED + 8)) + 3 * torch.eye(k, dtype=F64)
    return torch.linalg.lu_factor(M)


# ---------------------------------------------------------------------------------------------
# One case: reference vs DTensor, forward and backward


def _compare(what, got, want, exact):
    if exact:
        assert torch.equal(got, want), f"{what}: not bitwise equal, max diff {(got - want).abs().max().item()}"
    else:
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, msg=lambda m: f"{what}: {m}")


def _case(mesh, f, inputs, placements, expect, *, exact=True, exact_grads=None, backward=True, comm_free=True):
    """f(*inputs) on plain tensors and on DTensors (inputs[i] placed as placements[i]); expect: the result's
    placements (None: any). Gradients flow to the floating-point inputs; exact_grads (default: exact) per input."""
    from torch.distributed.tensor import DTensor, distribute_tensor
    from torch.distributed.tensor.debug import CommDebugMode

    wants_grad = [backward and t.is_floating_point() for t in inputs]
    ref_in = [t.clone().requires_grad_(w) for t, w in zip(inputs, wants_grad)]
    ref = f(*ref_in)
    d_in = [distribute_tensor(t.clone(), mesh, p, src_data_rank=None).requires_grad_(w)
            for t, p, w in zip(inputs, placements, wants_grad)]
    with CommDebugMode() as comm:
        out = f(*d_in)
    assert isinstance(out, DTensor), f"result is a {type(out).__name__}"
    if expect is not None:
        assert tuple(out.placements) == tuple(expect), f"result placed {out.placements}, expected {expect}"
    if comm_free:
        assert comm.get_total_counts() == 0, f"forward issued collectives: {dict(comm.get_comm_counts())}"
    _compare("result", out.full_tensor(), ref.detach(), exact)
    if not backward:
        return
    g = torch.randn(ref.shape, dtype=ref.dtype, generator=_gen(SEED + 999))
    ref.backward(g)
    with CommDebugMode() as comm:
        out.backward(distribute_tensor(g, mesh, out.placements, src_data_rank=None))
    if comm_free:
        assert comm.get_total_counts() == 0, f"backward issued collectives: {dict(comm.get_comm_counts())}"
    exact_grads = [exact] * len(inputs) if exact_grads is None else exact_grads
    for i, (r, d) in enumerate(zip(ref_in, d_in)):
        if r.requires_grad:
            _compare(f"gradient {i}", d.grad.full_tensor(), r.grad, exact_grads[i])


# ---------------------------------------------------------------------------------------------
# The cases, for a 1-D mesh of W ranks


def _cases_1d(mesh):
    import hsma_trsm
    from torch.distributed.tensor import Replicate, Shard

    W = mesh.size()
    b = 2 * W  # batch
    R, S = [Replicate()], lambda d: [Shard(d)]
    solve = lambda A, B: hsma_trsm.solve_triangular(A, B, upper=False)  # noqa: E731
    right_t = lambda A, B: hsma_trsm.trsm(A, B, left=False, upper=True, trans="T", alpha=0.5)  # noqa: E731
    L, LU, piv = _chol(b), *_lu(b)
    near = [False, True]  # gradient of a replicated A is a sum over ranks (Partial); B's is exact
    cases = {
        "batch, both Shard(0)": lambda: _case(mesh, solve, [_tri(b), _rhs(b, K, N)], [S(0), S(0)], S(0)),
        "batch, right, trans T, alpha": lambda: _case(
            mesh, right_t, [_tri(b, upper=True), _rhs(b, N, K)], [S(0), S(0)], S(0)),
        "batch, uneven (W + 1)": lambda: _case(mesh, solve, [_tri(W + 1), _rhs(W + 1, K, N)], [S(0), S(0)], S(0)),
        "batch, 4-D, Shard(1), A with fewer dims": lambda: _case(
            mesh, solve, [_tri(b), _rhs(3, b, K, N)], [S(0), S(1)], S(1)),
        "A broadcast (k, k) Replicate": lambda: _case(
            mesh, solve, [_tri(), _rhs(b, K, N)], [R, S(0)], S(0), exact_grads=near),
        "A broadcast (1, k, k) Replicate": lambda: _case(
            mesh, solve, [_tri(1), _rhs(2, b, K, N)], [R, S(1)], S(1), exact_grads=near),
        "B broadcast (k, n) Replicate": lambda: _case(
            mesh, solve, [_tri(b), _rhs(K, N)], [S(0), R], S(0), exact_grads=[True, False]),
        "left, B by columns": lambda: _case(
            mesh, solve, [_tri(b), _rhs(b, K, 2 * W + 1)], [R, S(2)], S(2), exact=False),
        "left, B (k, n) by columns, A batched": lambda: _case(
            mesh, solve, [_tri(2), _rhs(K, 2 * W)], [R, S(1)], S(2), exact=False),
        "right, B by rows": lambda: _case(
            mesh, right_t, [_tri(b, upper=True), _rhs(b, 2 * W + 1, K)], [R, S(1)], S(1), exact=False),
        "everything replicated": lambda: _case(mesh, solve, [_tri(b), _rhs(b, K, N)], [R, R], R),
        "op trsm, default kwargs": lambda: _case(
            mesh, torch.ops.hsma.trsm, [_tri(b), _rhs(b, K, N)], [S(0), R], S(0), exact_grads=[True, False]),
        "left, B by rows: redistributed": lambda: _case(
            mesh, solve, [_tri(b), _rhs(b, K, N)], [R, S(1)], None, comm_free=False),
        "left then right, same placements": lambda: _left_then_right(mesh),
        "inverse_triangular batch": lambda: _case(
            mesh, lambda A: hsma_trsm.inverse_triangular(A, upper=True), [_tri(b, upper=True)], [S(0)], S(0)),
        "op trtri batch, no grad": lambda: _case(
            mesh, lambda A: torch.ops.hsma.trtri(A, upper=False), [_tri(b)], [S(0)], S(0), backward=False),
        "cholesky_solve batch": lambda: _case(
            mesh, hsma_trsm.cholesky_solve, [_rhs(b, K, N), L], [S(0), S(0)], S(0)),
        "cholesky_solve by columns": lambda: _case(
            mesh, hsma_trsm.cholesky_solve, [_rhs(b, K, 2 * W), L], [S(2), R], S(2), exact=False),
        "cholesky_inverse batch": lambda: _case(mesh, hsma_trsm.cholesky_inverse, [L], [S(0)], S(0)),
        "implicit replication flag restored": lambda: _replication_flag(mesh, L),
        "lu_solve batch": lambda: _case(
            mesh, hsma_trsm.lu_solve, [LU, piv, _rhs(b, K, N)], [S(0), S(0), S(0)], S(0)),
        "lu_solve by columns": lambda: _case(
            mesh, hsma_trsm.lu_solve, [LU, piv, _rhs(b, K, 2 * W)], [R, R, S(2)], S(2), exact=False),
        "lu_solve right by rows, adjoint": lambda: _case(
            mesh, lambda LU, p, B: hsma_trsm.lu_solve(LU, p, B, left=False, adjoint=True),
            [LU, piv, _rhs(b, 2 * W, K)], [R, R, S(1)], S(1), exact=False),
        "inference mode: solvers as one op": lambda: _inference(mesh, L, LU, piv),
        "trsm_ in place": lambda: _in_place(mesh),
        "switch: torch.linalg.solve_triangular": lambda: _switch(mesh),
    }
    return cases


def _left_then_right(mesh):
    """The sharding cache must tell left=True from left=False (B's columns may be split only for the first)."""
    import hsma_trsm
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    k = 2 * mesh.size()
    A, B = _tri(2, k=k), _rhs(2, k, k)
    _case(mesh, lambda A, B: hsma_trsm.trsm(A, B, left=True), [A, B], [[Replicate()], [Shard(2)]], [Shard(2)],
          exact=False)
    _case(mesh, lambda A, B: hsma_trsm.trsm(A, B, left=False), [A, B], [[Replicate()], [Shard(2)]],
          None, comm_free=False, exact=False)
    assert hsma_trsm.trsm(*(distribute_tensor(t, mesh, p, src_data_rank=None) for t, p in
                            [(A, [Replicate()]), (B, [Shard(2)])]), left=False).placements != (Shard(2),)


def _replication_flag(mesh, L):
    """cholesky_inverse's implicit replication restores the setting it found (on or off)."""
    import hsma_trsm
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor
    from torch.distributed.tensor.experimental import implicit_replication

    dL = distribute_tensor(L, mesh, [Shard(0)], src_data_rank=None)
    flag = lambda: DTensor._op_dispatcher._allow_implicit_replication  # noqa: E731
    hsma_trsm.cholesky_inverse(dL)
    assert flag() is False
    with implicit_replication():
        hsma_trsm.cholesky_inverse(dL)
        assert flag() is True


def _inference(mesh, L, LU, piv):
    """Under inference_mode the composite solvers reach DTensor whole: their own strategies."""
    import hsma_trsm
    from torch.distributed.tensor import Replicate, Shard

    W, b = mesh.size(), L.shape[0]
    R, S = [Replicate()], lambda d: [Shard(d)]
    # Close, not bitwise: the plain reference is torch's LAPACK call (the CPU solvers' eager entries without a
    # gradient), the local shards run hsma's compositions.
    with torch.inference_mode():
        _case(mesh, hsma_trsm.cholesky_solve, [_rhs(b, K, N), L], [S(0), S(0)], S(0), backward=False, exact=False)
        _case(mesh, hsma_trsm.cholesky_solve, [_rhs(b, K, 2 * W), L], [S(2), R], S(2), backward=False, exact=False)
        _case(mesh, hsma_trsm.cholesky_inverse, [L], [S(0)], S(0), backward=False, exact=False)
        _case(mesh, hsma_trsm.lu_solve, [LU, piv, _rhs(b, K, N)], [S(0), S(0), S(0)], S(0), backward=False,
              exact=False)
        right = lambda LU, p, B: hsma_trsm.lu_solve(LU, p, B, left=False)  # noqa: E731
        _case(mesh, right, [LU, piv, _rhs(b, 2 * W, K)], [R, R, S(1)], S(1), backward=False, exact=False)


def _in_place(mesh):
    """trsm_ writes into B's own shards; A (replicated, full batch) is split locally. B by rows in a left solve
    cannot stay where it is: refused."""
    import hsma_trsm
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.debug import CommDebugMode

    b = 2 * mesh.size()
    A, B = _tri(b), _rhs(b, K, N)
    dA = distribute_tensor(A, mesh, [Replicate()], src_data_rank=None)
    dB = distribute_tensor(B.clone(), mesh, [Shard(0)], src_data_rank=None)
    local = dB._local_tensor
    with CommDebugMode() as comm:
        assert hsma_trsm.trsm_(dA, dB) is dB
    assert comm.get_total_counts() == 0 and dB.placements == (Shard(0),) and dB._local_tensor is local
    _compare("trsm_", dB.full_tensor(), hsma_trsm.trsm(A, B), exact=True)
    rows = distribute_tensor(B.clone(), mesh, [Shard(1)], src_data_rank=None)
    with pytest.raises(RuntimeError, match="in place"):
        torch.ops.hsma.trsm_(dA, rows)


def _switch(mesh):
    """hsma_trsm.switch._enabled(keys=("CPU",)): DTensor's own strategy for linalg_solve_triangular, hsma's kernel."""
    import hsma_trsm
    from hsma_trsm.switch import routed_calls
    from torch.distributed.tensor import Shard

    b = 2 * mesh.size()
    A, B = torch.nan_to_num(_tri(b)), _rhs(b, K, N)
    ref = torch.linalg.solve_triangular(A, B, upper=False)
    f = lambda A, B: torch.linalg.solve_triangular(A, B, upper=False)  # noqa: E731
    with hsma_trsm.switch._enabled(keys=("CPU",)):
        before = routed_calls()["linalg_solve_triangular"]
        _case(mesh, f, [A, B], [[Shard(0)], [Shard(0)]], [Shard(0)], backward=False, exact=False)
        assert routed_calls()["linalg_solve_triangular"] > before, "the switch did not serve the local solve"
    _compare("switch vs torch", f(A, B), ref, exact=False)


def _case_2d(mesh):
    """A 2x2 mesh: batch on its first dim, B's columns on its second."""
    import hsma_trsm
    from torch.distributed.tensor import Replicate, Shard

    solve = lambda A, B: hsma_trsm.solve_triangular(A, B, upper=False)  # noqa: E731
    _case(mesh, solve, [_tri(4), _rhs(4, K, 6)], [[Shard(0), Replicate()], [Shard(0), Shard(2)]],
          [Shard(0), Shard(2)], exact=False)
    _case(mesh, solve, [_tri(4), _rhs(4, K, 6)], [[Shard(0), Shard(0)], [Shard(0), Shard(0)]],
          [Shard(0), Shard(0)])


# Cases that need a newer torch's DTensor than the one installed, by the torch they passed on: on torch 2.11 the
# backward's matmul cannot flatten a sharded batch dim (view of Shard(1)), the gradient of a replicated input is
# all-reduced rather than left Partial, and torch.linalg.solve_triangular has no sharding strategy (torch's own
# function fails on DTensor there, switch or not). docs/scale.md lists them.
NEWER_DTENSOR = {
    "batch, 4-D, Shard(1), A with fewer dims": (2, 13),
    "A broadcast (1, k, k) Replicate": (2, 13),
    "right, B by rows": (2, 13),
    "cholesky_solve by columns": (2, 13),
    "switch: torch.linalg.solve_triangular": (2, 13),
}
TORCH_VERSION = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])


# ---------------------------------------------------------------------------------------------
# Processes


def _worker(rank, world, init_file):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    try:
        meshes = [("1-D", init_device_mesh("cpu", (world,)), _cases_1d)]
        if world == 4:
            meshes.append(("2x2", init_device_mesh("cpu", (2, 2)), lambda m: {"2-D mesh": lambda: _case_2d(m)}))
        failures = []
        for mesh_name, mesh, cases in meshes:
            for name, run in cases(mesh).items():
                if TORCH_VERSION < NEWER_DTENSOR.get(name, (0, 0)):
                    print(f"[{mesh_name} mesh, {world} ranks] {name}: skipped, needs torch >= "
                          f"{'.'.join(map(str, NEWER_DTENSOR[name]))} (DTensor)")
                    continue
                try:
                    run()
                except Exception:  # noqa: BLE001 - every case runs; the failures are listed together
                    failures.append(f"[{mesh_name} mesh, {world} ranks] {name}:\n{traceback.format_exc()}")
        if failures:
            raise AssertionError(f"rank {rank}: {len(failures)} case(s) failed\n" + "\n".join(failures))
    finally:
        dist.destroy_process_group()
    # Passed: skip the interpreter's teardown of torch (seconds per process on a 2-core machine). A failure
    # above takes the normal way out, by which spawn reports the exception.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _run(world, tmp_path, limit_s=240):
    import torch.multiprocessing as mp

    ctx = mp.start_processes(_worker, args=(world, str(tmp_path / "store")), nprocs=world, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + limit_s
    try:
        while not ctx.join(timeout=max(1.0, deadline - time.monotonic())):
            if time.monotonic() > deadline:
                pytest.fail(f"{world} ranks: no result after {limit_s} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()


def _available():
    import torch.distributed as dist

    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    if not dist.is_gloo_available():
        pytest.skip("the gloo backend is not available")
    import hsma_trsm

    if not hasattr(hsma_trsm, "distributed"):
        pytest.skip("hsma_trsm.distributed did not load")


@pytest.mark.parametrize("world", [2, 4])
def test_dtensor(world, tmp_path):
    _available()
    _run(world, tmp_path)
