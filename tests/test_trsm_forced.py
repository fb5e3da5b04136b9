"""Correctness of torch.ops.hsma.trsm with its kernels and block sizes forced (the development overrides): every
small-path kernel and variant around its size boundaries, the blocked path's block sizes and two-level inversion.
The same checks as tests/test_trsm.py (conftest.check_solution)."""
import pytest
import torch

from conftest import (
    CUDA_DEVICES,
    DTYPES,
    REAL_DTYPES,
    TRANS,
    b_shape,
    call_and_check,
    check_solution,
    default_alpha,
    dtype_id,
    make_rhs,
    make_triangular,
    set_small_kernel,
    sync,
)
from tests.test_trsm import BOOL, PAIRWISE_VARIANTS  # (the repository root is on pytest's pythonpath)

# The ablation kernel (small_kernel=pipeline) is in a build with HSMA_TRSM_ABLATION=1 only.
PIPELINE = pytest.param("pipeline", marks=pytest.mark.skipif(
    not torch.ops.hsma._ablation_built(), reason="the ablation kernel is not built (HSMA_TRSM_ABLATION=1)"))


# ---------------------------------------------------------------------------------------------
# The blocked path's block size, forced (the override nb), around its boundaries.


def _nb_sizes(nb):
    sizes = {nb - 1, nb, nb + 1, 2 * nb - 1, 2 * nb, 2 * nb + 1, 3 * nb + 7, 4 * nb + nb // 2 + 3}
    return sorted(s for s in sizes if s > 64 or s in (nb - 1, nb, nb + 1))


NB_CASES = [(nb, k) for nb in (32, 64, 128) for k in _nb_sizes(nb)]


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64], ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("nb,k", NB_CASES, ids=[f"NB{nb}-k{k}" for nb, k in NB_CASES])
@pytest.mark.parametrize("variant", ["recursive", "blocked"])
def test_block_size_boundaries(device, dtype, left, upper, nb, k, variant, block_size, hsma_overrides, gen):
    """A forced NB around its boundaries, for both blocked-path variants (the override variant)."""
    block_size(nb)
    hsma_overrides(variant=variant)
    # Cycle trans and diag over the sizes so every NB sees all of them.
    i = NB_CASES.index((nb, k))
    trans = TRANS[i % 3]
    unit = i % 2 == 1
    A = make_triangular(k, batch=(2,), dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, 5, left=left, batch=(2,)), dtype=dtype, device=device, gen=gen)
    call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=default_alpha(dtype))
    # A shared by the batch (broadcast) and a non-contiguous B on the same block size.
    A1 = make_triangular(k, dtype=dtype, upper=upper, unit=not unit, device=device, gen=gen)
    Bt = make_rhs(b_shape(k, 3, left=left, batch=(3,)), dtype=dtype, device=device, gen=gen).mT.contiguous().mT
    call_and_check(A1, Bt, left=left, upper=upper, trans=TRANS[(i + 1) % 3], unitriangular=not unit)


# The small path's kernels (the override small_kernel): the column kernel rounds k up to
# M in {8, 16, 32, 48, 64}; the segment kernel rounds it up to 32 or 64 and spreads a column over
# 32 lanes (1 or 2 rows per lane) or over 8 (complex batches, for complex types also at M = 48;
# forced here with segment_lanes); warp-wide segments hold two contiguous rows per lane
# (the blocked substitution; "+seg-rows2" forces it with segment_rows) or, forced with
# "+seg-rows1", one row per lane and step (strided); "+stepsN" (segment_steps) runs the
# blocked substitution as a loop of N steps per iteration (32: fully unrolled). At 33-64 rows a column kernel thread holds the whole
# column in registers (real types, complex64) or 32 rows at a time (complex128, and "+rows32":
# column_rows=32); "+rows16" also splits complex columns of 17-32 rows in halves. "tiles": the register-tiled kernel at 33-64 rows (the launcher's
# choice below; "+stepsN": N of its steps per loop iteration). "mma": the FP64 tensor-core kernel (float64 and complex128; other dtypes fall
# through to the column or segment kernels), 8-row blocks padded to 32 or 64 rows, substituting
# where A is batched and multiplying by folded inverses where one A serves the call (the unbatched
# shapes); "+mma4" with four warps per block. Triangles are staged into shared memory with cp.async; "+sync-copy" stages them
# through registers (async_copy=0: the path of GPUs without cp.async, AMD's).
# Sizes on both sides of each of those edges, with B shapes that change the thread tiling (one
# column; odd widths; wide; many small systems).
SMALL_SIZES = [1, 2, 7, 8, 9, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64]
SMALL_SHAPES = [(1, (1,)), (33, (3,)), (300, (1,)), (5, (150,)), (2, (4, 5))]


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("kernel", ["auto", "columns", "columns+rows16", "columns+rows32", "segments", "segments+seg-rows1",
                                    "segments+seg-rows2", "segments+seg-rows2+steps1", "segments+seg-rows2+steps2",
                                    "segments+seg-rows2+steps4", "segments+seg-rows2+steps32", "segments:8",
                                    "warps", PIPELINE,
                                    "tiles", "tiles+steps1", "tiles+steps4", "mma", "mma+mma4", "mma+sync-copy", "columns+sync-copy", "columns+rows16+sync-copy", "columns+rows32+sync-copy", "segments:8+sync-copy",
                                    "segments+seg-rows2+sync-copy", "segments+seg-rows1+sync-copy",
                                    "warps+sync-copy", "tiles+sync-copy"])
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k", SMALL_SIZES)
def test_small_path_kernels(device, kernel, dtype, k, hsma_overrides, gen):
    set_small_kernel(hsma_overrides, kernel)
    for i, (other, batch) in enumerate(SMALL_SHAPES):
        left, upper, trans, unit = PAIRWISE_VARIANTS[(i + k) % len(PAIRWISE_VARIANTS)]
        A = make_triangular(k, batch=batch if i % 2 else (), dtype=dtype, upper=upper, unit=unit, device=device,
                            gen=gen)
        B = make_rhs(b_shape(k, other, left=left, batch=batch), dtype=dtype, device=device, gen=gen)
        call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=default_alpha(dtype))


# Every small-path kernel with its grid capped at 3 blocks (the override max_blocks), so that each
# block's grid-stride loop solves many tasks in turn, reusing its shared memory (the staged
# triangle, pivots, flags) from one task to the next; uncapped, these launches have more blocks
# than 3 (a block per task, per four warp tasks, or per group of column tasks: 601 one-column
# systems give the column kernel several groups per block, the last one partial). The capped run
# must equal the uncapped one bit for bit (the same kernel and the same operations per task) and
# the reference.
@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("kernel", ["auto", "columns", "columns+rows32", "segments", "segments:8", "warps", PIPELINE,
                                    "tiles", "mma"])
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k", [20, 41, 64])
def test_small_kernels_grid_stride(device, kernel, dtype, k, hsma_overrides, gen):
    set_small_kernel(hsma_overrides, kernel)
    for i, (n, a_batched, batch) in enumerate([(1, True, 37), (70, True, 37), (64, False, 37), (1, True, 601)]):
        left, upper, trans, unit = PAIRWISE_VARIANTS[(i + k) % len(PAIRWISE_VARIANTS)]
        A = make_triangular(k, batch=(batch,) if a_batched else (), dtype=dtype, upper=upper, unit=unit,
                            device=device, gen=gen)
        B = make_rhs(b_shape(k, n, left=left, batch=(batch,)), dtype=dtype, device=device, gen=gen)
        kw = dict(left=left, upper=upper, trans=trans, unitriangular=unit, alpha=default_alpha(dtype))
        hsma_overrides(max_blocks=None)
        X_full = torch.ops.hsma.trsm(A, B, **kw)
        hsma_overrides(max_blocks=3)
        X = call_and_check(A, B, **kw)
        assert torch.equal(X, X_full), f"n={n}: 3 blocks and a block per task differ"


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("k,unit,trans", [(64, False, "N"), (57, True, "C"), (20, False, "T")])
@pytest.mark.parametrize("shared", [True, False], ids=["bcastA", "batchedA"])
def test_mma_folded_triangle_reused(device, dtype, k, unit, trans, shared, hsma_overrides, gen):
    """The tensor-core kernel folding A's inverses, with more tasks than blocks: with one A for the
    batch (A broadcast) each block folds A once and reuses it for all its tasks; with A batched
    (several column tiles per matrix) once per matrix for its tiles. A task with inf or nan in B
    stages L again and substitutes, and the block's next task folds again: the finite systems
    match the reference, the poisoned ones the non-finite pattern of a substitution (the segment
    kernel)."""
    hsma_overrides(small_kernel="mma")
    batch, n = 1200, 72
    A = make_triangular(k, batch=() if shared else (batch,), dtype=dtype, unit=unit, device=device, gen=gen)
    B = make_rhs((batch, k, n), dtype=dtype, device=device, gen=gen)
    poisoned = {5: (7, 3, float("inf")), 600: (k // 3, 33, float("nan")), 1199: (k - 1, n - 1, float("inf"))}
    for i, (r, c, v) in poisoned.items():
        B[i, min(r, k - 1), c] = v
    kw = dict(upper=False, trans=trans, unitriangular=unit, alpha=default_alpha(dtype))
    X = torch.ops.hsma.trsm(A, B, **kw)
    clean = torch.tensor([i for i in range(batch) if i not in poisoned], device=device)
    check_solution(X[clean], A if shared else A[clean], B[clean], **kw, dtype=dtype, device=device)
    hsma_overrides(small_kernel="segments")
    Y = torch.ops.hsma.trsm(A, B, **kw)
    for i in poisoned:
        assert not torch.isfinite(X[i]).all()
        assert torch.equal(torch.isfinite(X[i]), torch.isfinite(Y[i])), f"system {i}: different non-finite entries"
        fin = torch.isfinite(X[i])
        torch.testing.assert_close(X[i][fin], Y[i][fin], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("shared", [True, False], ids=["bcastA", "batchedA"])
def test_mma_fold_overflow_substitutes(device, dtype, shared, hsma_overrides, gen):
    """A triangle whose pivot reciprocals are usable but whose folded W overflows: pivot 3 is 1e-160
    (reciprocal 1e160) and L(40, 3) is 1e160, so W = L(40.., 0..) L(0..7, 0..7)^-1 holds inf. The
    tensor-core kernel must notice, stage L again and substitute (the rows of B and X at 3 are 0,
    so the substitution multiplies the huge entries by exact zeros, while W would give inf * 0 =
    nan). With A batched only system 7 has that triangle, between systems that fold."""
    hsma_overrides(small_kernel="mma")
    k, batch, n = 64, 600, 72
    A = make_triangular(k, batch=() if shared else (batch,), dtype=dtype, device=device, gen=gen, fill=0.0)
    T = A if shared else A[7]
    T[3, :3] = 0
    T[3, 3] = 1e-160
    T[40, 3] = 1e160
    Xt = make_rhs((batch, k, n), dtype=dtype, device=device, gen=gen)
    Xt[:, 3, :] = 0
    B = A @ Xt
    X = torch.ops.hsma.trsm(A, B)
    assert torch.isfinite(X).all()
    check_solution(X, A, B, dtype=dtype, device=device)
    hsma_overrides(small_kernel="segments")
    torch.testing.assert_close(X, torch.ops.hsma.trsm(A, B), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
def test_blocked_segments_match_strided(device, dtype, hsma_overrides, gen):
    """Warp-wide segments with two contiguous rows per lane (segment_rows=2, CUDA's
    default), whether their substitution is a loop of 1, 2 or 4 steps per iteration or fully
    unrolled (segment_steps), run the operations of one row per lane (=1) in the same
    order: for real types the results are bitwise the same (complex ones may differ in the last bit:
    the compiler fuses the complex products differently)."""
    hsma_overrides(small_kernel="segments")
    for i, k in enumerate([1, 17, 31, 32, 33, 48, 57, 64]):
        left, upper, trans, unit = PAIRWISE_VARIANTS[i % len(PAIRWISE_VARIANTS)]
        A = make_triangular(k, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
        B = make_rhs(b_shape(k, 5, left=left), dtype=dtype, device=device, gen=gen)
        X = []
        for rows, steps in ((1, None), (2, 1), (2, 2), (2, 4), (2, 32)):
            hsma_overrides(segment_rows=rows, segment_steps=steps)
            X.append(call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit,
                                    alpha=default_alpha(dtype)))
        for x, steps in zip(X[1:], (1, 2, 4, 32)):
            assert torch.equal(X[0], x), f"k={k}: blocked rows ({steps} steps per iteration) and strided rows differ"


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k,a_batch,b_batch", [(5, (65537,), (65537,)), (64, (), (65537,)), (3, (65537,), ())],
                         ids=["both", "A-broadcast", "B-broadcast"])
def test_small_batch_past_grid_limits(device, dtype, k, a_batch, b_batch, gen):
    """More than 65535 small systems in one call, with A or B broadcast over the batch."""
    n = 2 if k < 64 else 1
    A = make_triangular(k, batch=a_batch, dtype=dtype, device=device, gen=gen)
    B = make_rhs((*b_batch, k, n), dtype=dtype, device=device, gen=gen)
    X = call_and_check(A, B, alpha=default_alpha(dtype))
    assert X.shape == (65537, k, n)


# Large batches of a few columns each take one warp per matrix (the warp-task kernel) where its
# triangles fit in shared memory: orders on both sides of 32, one to four columns, A broadcast or
# batched, B strided.
@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k,n", [(17, 1), (32, 4), (33, 1), (64, 2)])
def test_small_batches_of_vectors(device, dtype, k, n, gen):
    for i, (left, upper, trans, unit) in enumerate(PAIRWISE_VARIANTS[:4]):
        a_batch = (600,) if i % 2 == 0 else ()
        A = make_triangular(k, batch=a_batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
        B = make_rhs(b_shape(k, n, left=left, batch=(600,)), dtype=dtype, device=device, gen=gen)
        if i >= 2:
            B = B.mT.contiguous().mT
        call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=default_alpha(dtype))


# Large batches of 49-64 rows with many columns: the launcher's choice among the tensor-core
# kernel (complex128 on sm_80+; float64 with A broadcast), the tile kernel (complex64 with 64 or
# more columns per matrix; complex128 before sm_80) and the others, at orders and widths around
# those edges, A batched or broadcast, B strided; of 17-32 rows, whose columns the column kernel
# splits in halves of 16 rows in such batches (complex64 on CUDA); for real types the column kernel
# with one task of 64 or more columns per block, and float64's split kernel (packed triangle, capped
# registers, row-major L; a transposed L takes the column-major form); complex128 of 33-48 rows:
# the tensor-core kernel (the tile kernel before sm_80) with A batched and 48-128 columns (41 rows,
# 70 columns: a third tile of 6 columns), two columns per 8-lane segment otherwise (41 rows, 45
# columns: a segment's second column past the last).
@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k,n,a_batched", [(64, 64, False), (57, 65, False), (49, 128, True), (64, 130, True),
                                           (64, 64, True), (48, 128, True), (41, 70, True), (41, 45, True), (32, 32, True),
                                           (17, 40, False), (25, 7, True)])
def test_small_wide_batches(device, dtype, k, n, a_batched, gen):
    # A batch past the launcher's threshold for the tile kernel (4 matrices per multiprocessor).
    batch = 4 * torch.cuda.get_device_properties(device).multi_processor_count + 72
    a_batch = (batch,) if a_batched else ()
    for i, (left, upper, trans, unit) in enumerate([PAIRWISE_VARIANTS[j] for j in (0, 2, 4, 5)]):
        A = make_triangular(k, batch=a_batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
        B = make_rhs(b_shape(k, n, left=left, batch=(batch,)), dtype=dtype, device=device, gen=gen)
        if i == 3:
            B = B.mT.contiguous().mT
        call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=default_alpha(dtype))


# The real types' split column kernel (49-64 rows) with several tasks per block: n <= 32 columns
# per matrix in a batch of 600 gives tiles of up to 32 columns, two or more per block; packed
# triangles (float64's, and float32's with A batched: 16-byte copies into the second group's region
# at 64 rows, element copies below, register staging) and float32's shared-memory copy of the top
# half beside several groups' triangles, with n not a multiple of the tile; unit diagonals (NaN on
# the diagonal, never read).
@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", REAL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k,n,unit,async_copy", [(64, 32, False, True), (64, 20, True, True), (57, 32, False, False),
                                                 (49, 20, True, True), (64, 7, False, False)])
def test_split_columns_several_tasks_per_block(device, dtype, k, n, unit, async_copy, hsma_overrides, gen):
    if not async_copy:
        hsma_overrides(async_copy=0)
    for left, upper, trans in [(True, False, "N"), (False, True, "C"), (True, True, "T")]:
        A = make_triangular(k, batch=(600,), dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
        B = make_rhs(b_shape(k, n, left=left, batch=(600,)), dtype=dtype, device=device, gen=gen)
        call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=default_alpha(dtype))


# Two-level diagonal-block inversion (the override ib): IB x IB tiles inverted by the kernel,
# combined into NB x NB inverses by GEMM doubling, including a last partial pair of blocks.
IB_CASES = [(256, 32, 300), (256, 64, 513), (256, 128, 700), (512, 64, 600), (512, 256, 1100), (256, 16, 257)]


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("nb,ib,k", IB_CASES, ids=[f"NB{nb}-IB{ib}-k{k}" for nb, ib, k in IB_CASES])
def test_two_level_inversion(device, dtype, nb, ib, k, block_size, hsma_overrides, gen):
    block_size(nb)
    hsma_overrides(ib=ib)
    for i, (left, upper, trans, unit) in enumerate(PAIRWISE_VARIANTS):
        # A shared by a batch of two (the two-level path), then A batched (one level per entry).
        a_batch = () if i % 2 == 0 else (2,)
        A = make_triangular(k, batch=a_batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
        B = make_rhs(b_shape(k, 3, left=left, batch=(2,)), dtype=dtype, device=device, gen=gen)
        call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=default_alpha(dtype))


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("nb", [1, 7, 100, 1024])
def test_block_size_unusual(device, nb, block_size, gen):
    """Extreme and odd NB values still give correct results."""
    block_size(nb)
    for k, dtype, left, upper, trans in [(65, torch.float32, True, False, "N"), (301, torch.complex128, False, True, "C"),
                                         (130, torch.float64, True, True, "T")]:
        A = make_triangular(k, dtype=dtype, upper=upper, device=device, gen=gen)
        B = make_rhs(b_shape(k, 4, left=left), dtype=dtype, device=device, gen=gen)
        call_and_check(A, B, left=left, upper=upper, trans=trans)
