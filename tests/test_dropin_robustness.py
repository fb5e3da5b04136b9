"""Numerical robustness and determinism.

- Subnormal and huge pivots: row-scaled systems (T = D T0 for a left solve, T0 D for a right one)
  whose solution is O(1) while some pivots' reciprocals overflow (subnormal pivots) or underflow
  (huge pivots). A solver that multiplies by 1/d gets inf or garbage; one that divides is right.
  Reference: substitution in extended precision (NumPy longdouble, whose exponent range covers
  these values as normal numbers) on exactly the values the solver saw. torch's error is reported
  alongside.
- inf/nan propagation: which entries are non-finite is the same for a batch and for its
  matrices solved one by one, and (with CUDA) on the GPU and the CPU.
- Determinism: repeated runs give bitwise the same result (forward and backward).
- A sweep that runs every CUDA code path once on small inputs (what scripts/gpu_run.sh runs under
  compute-sanitizer: `-k cuda_path_sweep`)."""
import math

import numpy as np
import pytest
import torch

import hsma_trsm
from conftest import (
    CUDA_DEVICES,
    DEVICES,
    b_shape,
    call_and_check,
    default_alpha,
    dtype_id,
    forward_tolerance,
    make_generator,
    make_rhs,
    make_triangular,
    set_small_kernel,
    sync,
    to_numpy_wide,
)

LD = np.longdouble
HAS_EXTENDED = np.finfo(LD).maxexp >= 16384 or np.finfo(LD).nexp > 11

# Scales per dtype: a subnormal pivot d = s * t (|t| in [1, 2]) has 1/d beyond the largest
# finite value; a huge one has 1/d below the smallest normal.
SCALES = {
    torch.float32: dict(sub=2.0 ** -130, huge=2.0 ** 126),
    torch.float64: dict(sub=2.0 ** -1050, huge=2.0 ** 1022),
}


def _real(dtype):
    return {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype, dtype)


def _substitute_ld(T, B, lower):
    """X with T X = B by substitution in extended precision (T, B longdouble NumPy arrays)."""
    k = T.shape[-1]
    X = np.zeros(B.shape, dtype=B.dtype)
    for i in (range(k) if lower else range(k - 1, -1, -1)):
        X[i] = (B[i] - T[i, :] @ X) / T[i, i]
    return X


def _to_ld(t):
    a = to_numpy_wide(t)
    return a.astype(np.clongdouble if np.iscomplexobj(a) else LD)


def _scaled_problem(k, n, dtype, left, lower, pattern, device, gen):
    """(T, X_true): T = D T0 (left) / T0 D (right) with D cycling through the pattern's scales."""
    s = SCALES[_real(dtype)]
    cycle = {"sub": [1.0, s["sub"]], "huge": [1.0, s["huge"]], "mixed": [1.0, s["sub"], s["huge"]]}[pattern]
    T0 = make_triangular(k, dtype=torch.complex128 if dtype.is_complex else torch.float64, upper=not lower,
                         gen=gen, fill=0.0)
    T0 = _to_ld(T0)
    d = np.array([cycle[i % len(cycle)] for i in range(k)], dtype=LD)
    T = d[:, None] * T0 if left else T0 * d[None, :]
    # A small solution keeps the huge rows' right-hand sides far from overflow.
    Xt = 0.01 * _to_ld(make_rhs((k, n) if left else (n, k), dtype=dtype, gen=gen))
    return T, Xt


# Orders above 64 on CUDA: the sweep, which substitutes in the diagonal blocks whose inverses are not accurate;
# and the blocked path (its plan for 3 columns at order 300: NB 256 inverted in two levels, IB 32; or one level
# of 128 x 128 blocks), whose repair launch solves again by substitution when an inverse has an inf, nan or
# subnormal entry.
LARGE_PATHS = {"sweep": dict(sweep=1), "blocked": dict(sweep=0), "blocked-nb128": dict(nb=128, ib=128)}


@pytest.mark.skipif(not HAS_EXTENDED, reason="needs an extended-precision NumPy longdouble")
@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("path", list(LARGE_PATHS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128], ids=dtype_id)
def test_large_paths_extreme_pivots(device, path, dtype, hsma_overrides):
    hsma_overrides(**LARGE_PATHS[path])
    for pattern, (left, lower, trans) in zip(["sub", "huge", "mixed"], [(True, True, "N"), (False, False, "T"),
                                                                         (True, False, "C")]):
        check_extreme_pivots(device, dtype, pattern, 300, left, lower, trans)


@pytest.mark.skipif(not HAS_EXTENDED, reason="needs an extended-precision NumPy longdouble")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("pattern", ["sub", "huge", "mixed"])
@pytest.mark.parametrize("k", [5, 40, 150, 300])
@pytest.mark.parametrize("left,lower,trans", [(True, True, "N"), (False, False, "T"), (True, False, "C"),
                                              (False, True, "N")])
def test_subnormal_and_huge_pivots(device, dtype, pattern, k, left, lower, trans, hsma_overrides):
    # hsma's own kernels: a shape the plan hands to torch's kernel has torch's numerics there (README, Limitations).
    hsma_overrides(sweep=0)
    check_extreme_pivots(device, dtype, pattern, k, left, lower, trans)


@pytest.mark.skipif(not HAS_EXTENDED, reason="needs an extended-precision NumPy longdouble")
@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("k", [29, 41, 57, 64])
@pytest.mark.parametrize("kernel", ["segments:8", "tiles", "tiles+steps1", "tiles+steps2", "tiles+steps4", "mma",
                                    "segments+seg-rows1", "segments+seg-rows2",
                                    "segments+seg-rows2+steps1", "segments+seg-rows2+steps4"])
def test_extreme_pivots_batch_kernels(device, dtype, k, kernel, hsma_overrides):
    """The kernels for batches of many columns, the segment kernel with 8 lanes per column
    (segment_lanes; complex k = 41 takes its 48-row build), the tile kernel (33-64
    rows; its default loop or 1, 2 or 4 steps per iteration, segment_steps; k = 29
    takes another kernel), the tensor-core kernel (float64 and complex128; its 8-row
    diagonal blocks substituted by the dividing copy), and warp-wide segments with strided or
    blocked rows (segment_rows, 1 or 2 contiguous rows per lane; the blocked ones also
    as a loop of 1 or 4 steps per iteration, segment_steps), divide where a
    reciprocal would not do."""
    set_small_kernel(hsma_overrides, kernel)
    for pattern, (left, lower, trans) in zip(["sub", "huge", "mixed"], [(True, True, "N"), (False, False, "T"),
                                                                         (True, False, "C")]):
        check_extreme_pivots(device, dtype, pattern, k, left, lower, trans)


@pytest.mark.skipif(not HAS_EXTENDED, reason="needs an extended-precision NumPy longdouble")
@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype,kernel", [(torch.complex64, "auto"), (torch.complex128, "tiles"),
                                          (torch.complex128, "auto")], ids=["complex64", "complex128-tiles", "complex128"])
@pytest.mark.parametrize("pattern", ["sub", "huge"])
@pytest.mark.parametrize("max_blocks", [None, "3"], ids=["block-per-task", "grid3"])
def test_extreme_pivots_in_tile_batches(device, dtype, kernel, pattern, max_blocks, hsma_overrides):
    """A large complex batch of 64x64 triangles with 100 columns each, in the tile kernel (complex64
    by the launcher's choice: one column tile of eight warps, seven with columns, the seventh partly
    past n; complex128 forced: two tiles) or the launcher's tensor-core kernel (complex128 on sm_80+:
    four tiles of 32 columns, the fourth partly past n, folding each A's inverses), every other
    matrix with pivots whose reciprocals would not do: those tasks leave the register tiles for one
    serial column per lane (substitute_column_exact), or substitute with divisions instead of
    folding, in the same launch as the ordinary ones. Each entry against its extended-precision
    substitution. With the grid capped at 3 blocks (the override max_blocks), each block alternates
    between the two kinds of task, clearing and setting the shared flag that tells them apart once
    per task."""
    set_small_kernel(hsma_overrides, kernel)
    if max_blocks is not None:
        hsma_overrides(max_blocks=max_blocks)
    k, n = 64, 100
    batch = 4 * torch.cuda.get_device_properties(device).multi_processor_count + 72
    gen = make_generator(11 + len(pattern))
    T, Xt = _scaled_problem(k, n, dtype, True, True, pattern, device, gen)
    T_plain = _to_ld(make_triangular(k, dtype=torch.complex128, upper=False, gen=gen, fill=0.0))
    Xt_plain = _to_ld(make_rhs((k, n), dtype=dtype, gen=gen))
    wide = np.complex128
    A_pair = torch.from_numpy(np.stack([T.astype(wide), T_plain.astype(wide)])).to(device, dtype)
    B_pair = torch.from_numpy(np.stack([(T @ Xt).astype(wide), (T_plain @ Xt_plain).astype(wide)])).to(device, dtype)
    A = A_pair.repeat(batch // 2, 1, 1)
    B = B_pair.repeat(batch // 2, 1, 1)
    X = torch.ops.hsma.trsm(A, B)
    sync(device)
    fin = torch.finfo(_real(dtype))
    granularity = fin.smallest_normal * fin.eps / SCALES[_real(dtype)]["sub"] if pattern != "huge" else 0.0
    tol = forward_tolerance(dtype, k) + 30 * math.sqrt(k) * granularity
    for j in range(2):
        ref = _substitute_ld(_to_ld(A_pair[j]), _to_ld(B_pair[j]), True)
        ref_norm = np.linalg.norm(ref.astype(np.complex128))
        Xj = X[j::2]
        assert bool(torch.isfinite(Xj).all()), f"matrix {j}: non-finite entries"
        e = float(np.linalg.norm((_to_ld(Xj[0]) - ref).astype(np.complex128)) / ref_norm)
        assert e <= tol, f"matrix {j}: relative error {e:.2e} > {tol:.2e}"
        # every entry of a pair's half solves the same system: the same result, bit for bit
        assert torch.equal(Xj, Xj[:1].expand_as(Xj)), f"matrix {j}: entries differ"


def check_extreme_pivots(device, dtype, pattern, k, left, lower, trans):
    gen = make_generator(k * 7 + len(pattern))
    n = 3
    T, Xt = _scaled_problem(k, n, dtype, left, lower, pattern, device, gen)
    # The hazard is there: some pivots' reciprocals overflow (sub) or are subnormal (huge).
    recip = 1 / torch.from_numpy(np.abs(np.diagonal(T)).astype(np.float64)).to(_real(dtype))
    if pattern != "huge":
        assert torch.isinf(recip).any()
    if pattern != "sub":
        assert ((recip > 0) & (recip < torch.finfo(_real(dtype)).smallest_normal)).any()
    # The solver's inputs: op(A) = T, so A = T, T^T or T^H; B = T X (left) or X T (right).
    A_ld = {"N": T, "T": T.T, "C": T.conj().T}[trans]
    upper = (not lower) if trans == "N" else lower
    B_ld = T @ Xt if left else Xt @ T
    A = torch.from_numpy(A_ld.astype(np.complex128 if dtype.is_complex else np.float64)).to(device, dtype)
    B = torch.from_numpy(B_ld.astype(np.complex128 if dtype.is_complex else np.float64)).to(device, dtype)
    # The reference solves the rounded system the solver sees.
    Tr = {"N": _to_ld(A), "T": _to_ld(A).T, "C": _to_ld(A).conj().T}[trans]
    Br = _to_ld(B)
    ref = _substitute_ld(Tr, Br, lower) if left else _substitute_ld(Tr.T, Br.T, not lower).T

    def err(X):
        Xn = _to_ld(X)
        return float(np.linalg.norm((Xn - ref).astype(np.complex128)) / np.linalg.norm(ref.astype(np.complex128)))

    X = torch.ops.hsma.trsm(A, B, left=left, upper=upper, trans=trans)
    sync(device)
    finite = bool(torch.isfinite(X).all())
    e = err(X) if finite else math.inf
    # Subnormal rows carry absolute rounding of ~2^-(mantissa) of the smallest subnormal.
    fin = torch.finfo(_real(dtype))
    granularity = fin.smallest_normal * fin.eps / SCALES[_real(dtype)]["sub"] if pattern != "huge" else 0.0
    tol = forward_tolerance(dtype, k) + 30 * math.sqrt(k) * granularity
    T_op = {"N": A, "T": A.mT, "C": A.mH}[trans]
    Xt_torch = torch.linalg.solve_triangular(T_op, B, upper=lower is False, left=left)
    e_torch = err(Xt_torch) if bool(torch.isfinite(Xt_torch).all()) else math.inf
    assert finite, f"non-finite entries (torch: error {e_torch:.2e})"
    assert e <= tol, f"relative error {e:.2e} > {tol:.2e} (torch.linalg.solve_triangular: {e_torch:.2e})"
    if pattern == "sub":  # the drop-in, the same solve
        if trans == "N":
            Xd = hsma_trsm.solve_triangular(A, B, upper=upper, left=left)
            assert torch.isfinite(Xd).all() and err(Xd) <= tol


# ---------------------------------------------------------------------------------------------
# inf / nan propagation: batched vs one by one, GPU vs CPU.


def _poisoned_batch(k, dtype, device, gen, left, upper):
    """A batch of 5 systems: clean; a zero pivot; NaN in the read triangle; inf in B; NaN in B."""
    A = make_triangular(k, batch=(5,), dtype=dtype, upper=upper, device=device, gen=gen, fill=0.0)
    B = make_rhs(b_shape(k, 4, left=left, batch=(5,)), dtype=dtype, device=device, gen=gen)
    j = k // 3
    A[1, j, j] = 0
    lo, hi = (j + 1, j) if not upper else (j, j + 1)
    if k > 1:
        A[2, lo, hi] = float("nan")  # inside the read triangle
    if left:
        B[3, j, 1] = float("inf")
        B[4, k - 1 - j, 2] = float("nan")
    else:
        B[3, 1, j] = float("inf")
        B[4, 2, k - 1 - j] = float("nan")
    return A, B


# Systems 2 and 4 hold NaN only: every entry that depends on it is NaN whatever the order of
# operations, so the NaN pattern itself must match. Systems 1 and 3 (a zero pivot, an inf) give
# inf or nan depending on summation order (inf - inf), so there only "non-finite" must match.
NAN_ONLY = (2, 4)


def _assert_same_nonfinite(X, Y, what, nan_exact=False):
    X, Y = X.cpu(), Y.cpu()
    assert torch.equal(torch.isfinite(X), torch.isfinite(Y)), f"{what}: different non-finite entries"
    if nan_exact:
        assert torch.equal(torch.isnan(X), torch.isnan(Y)), f"{what}: different NaN entries"
    fin = torch.isfinite(X)
    torch.testing.assert_close(X[fin], Y[fin], rtol=1e-4, atol=1e-4, msg=what)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("k", [1, 9, 40, 100, 300])
@pytest.mark.parametrize("left,upper,trans", [(True, False, "N"), (False, True, "T"), (True, True, "C")])
def test_nonfinite_batched_vs_unbatched(device, dtype, k, left, upper, trans):
    gen = make_generator(k + 3)
    A, B = _poisoned_batch(k, dtype, device, gen, left, upper)
    kw = dict(left=left, upper=upper, trans=trans)
    X = torch.ops.hsma.trsm(A, B, **kw)
    assert torch.isfinite(X[0]).all(), "a clean system next to poisoned ones must stay finite"
    if k > 1:
        assert not torch.isfinite(X[1:]).all(dim=(-2, -1)).any(), "every poisoned system has non-finite entries"
    for i in range(5):
        _assert_same_nonfinite(X[i], torch.ops.hsma.trsm(A[i], B[i], **kw), f"system {i} batched vs alone",
                               nan_exact=i in NAN_ONLY)
    # Broadcast A (one matrix for the batch) vs the same matrix materialised.
    Xb = torch.ops.hsma.trsm(A[1], B, **kw)
    Xe = torch.ops.hsma.trsm(A[1].expand_as(A).contiguous(), B, **kw)
    _assert_same_nonfinite(Xb, Xe, "broadcast A vs expanded copy")


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64], ids=dtype_id)
@pytest.mark.parametrize("k", [9, 40, 100, 300])
def test_nonfinite_cuda_vs_cpu(device, dtype, k, hsma_overrides):
    # Above order 64, the sweep: it spreads inf/nan as substitution does. (The blocked path multiplies by
    # inverted blocks, whose zeros times an inf of X make nans where substitution has none.)
    hsma_overrides(sweep=1)
    gen = make_generator(k + 4)
    for left, upper, trans in [(True, False, "N"), (False, True, "C")]:
        A, B = _poisoned_batch(k, dtype, "cpu", gen, left, upper)
        kw = dict(left=left, upper=upper, trans=trans)
        X_gpu, X_cpu = torch.ops.hsma.trsm(A.to(device), B.to(device), **kw), torch.ops.hsma.trsm(A, B, **kw)
        for i in range(5):
            _assert_same_nonfinite(X_gpu[i], X_cpu[i], f"k={k} {kw} system {i}: CUDA vs CPU", nan_exact=i in NAN_ONLY)


# ---------------------------------------------------------------------------------------------
# Determinism: the same inputs give bitwise the same outputs, forward and backward.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("k,batch,other", [(8, (500,), 16), (48, (3,), 1), (64, (), 200), (150, (2,), 40),
                                           (600, (), 64)])
def test_bitwise_deterministic(device, dtype, k, batch, other):
    gen = make_generator(k)
    for left, upper, trans, unit in [(True, False, "N", False), (False, True, "C", True)]:
        A = make_triangular(k, batch=batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen, fill=0.0)
        B = make_rhs(b_shape(k, other, left=left, batch=batch), dtype=dtype, device=device, gen=gen)
        kw = dict(left=left, upper=upper, trans=trans, unitriangular=unit, alpha=default_alpha(dtype))
        A.requires_grad_()
        B.requires_grad_()
        G = make_rhs(B.shape, dtype=dtype, device=device, gen=gen)
        runs = []
        for _ in range(3):
            X = torch.ops.hsma.trsm(A, B, **kw)
            gA, gB = torch.autograd.grad(X, (A, B), G)
            runs.append((X.detach(), gA, gB))
        for r in runs[1:]:
            for a, b in zip(runs[0], r):
                assert torch.equal(a, b), "repeated runs differ"


# ---------------------------------------------------------------------------------------------
# Every CUDA code path once, on small inputs: the compute-sanitizer subset.

SWEEP = [
    # (k, batch, other, left, upper, trans, unit, dtype, overrides)
    pytest.param(8, (3,), 16, True, False, "N", False, torch.float32, {}, id="small-columns-f32"),
    pytest.param(33, (), 2, False, True, "C", True, torch.complex64, {}, id="small-segments-c64"),
    pytest.param(48, (2,), 3, True, True, "T", False, torch.complex128,
                 {"small_kernel": "segments"}, id="small-segments-c128"),
    pytest.param(64, (2,), 5, True, False, "N", True, torch.float64, {"small_kernel": "columns"},
                 id="small-columns-k64"),
    pytest.param(64, (3,), 70, True, False, "C", False, torch.complex128, {"small_kernel": "pipeline"},
                 id="small-pipeline-c128",
                 marks=pytest.mark.skipif(not torch.ops.hsma._ablation_built(), reason="ablation kernel not built")),
    pytest.param(32, (600,), 1, True, False, "N", False, torch.complex64, {}, id="small-warp-tasks"),
    pytest.param(64, (40,), 64, False, False, "N", False, torch.complex64, {}, id="small-narrow-segments-c64"),
    pytest.param(45, (40,), 64, True, True, "T", False, torch.complex128, {}, id="small-narrow-segments-48-c128"),
    pytest.param(41, (600,), 70, True, False, "N", False, torch.complex128, {},
                 id="small-mma-41-c128-batch"),  # (the tile kernel before 8c7e52d; below sm_90 still)
    pytest.param(40, (5,), 17, True, True, "C", False, torch.complex128, {"small_kernel": "segments",
                 "segment_lanes": "8"}, id="small-narrow-segments-c128"),
    pytest.param(61, (), 11, True, False, "C", False, torch.complex128, {"small_kernel": "segments"},
                 id="small-blocked-segments-c128"),
    pytest.param(27, (2,), 3, False, True, "T", True, torch.float32, {"segment_rows": "1"},
                 id="small-strided-segments-f32"),
    pytest.param(64, (3,), 9, True, False, "C", False, torch.complex64, {"small_kernel": "columns",
                 "async_copy": "0"}, id="small-columns-register-staging"),
    pytest.param(64, (3,), 70, False, True, "C", False, torch.complex128, {"small_kernel": "columns"},
                 id="small-columns-split-c128"),
    pytest.param(50, (2,), 7, True, False, "T", True, torch.float32, {"small_kernel": "columns",
                 "column_rows": "32"}, id="small-columns-split-f32"),
    pytest.param(64, (600,), 64, True, False, "N", False, torch.float64, {}, id="small-columns-split-f64-batch"),
    pytest.param(57, (600,), 40, True, False, "N", True, torch.float64, {"async_copy": "0"},
                 id="small-columns-split-f64-register-staging"),
    pytest.param(49, (600,), 33, True, False, "N", False, torch.float32, {}, id="small-columns-split-f32-batch"),
    pytest.param(64, (600,), 64, True, False, "N", False, torch.float32, {},
                 id="small-columns-split-f32-packed-vector-copies"),
    pytest.param(64, (600,), 20, True, False, "N", False, torch.float32, {},
                 id="small-columns-split-f32-packed-groups"),
    pytest.param(64, (), 2100, True, False, "N", False, torch.float32, {}, id="small-columns-split-f32-shared-a"),
    pytest.param(32, (600,), 32, True, False, "N", False, torch.complex128, {}, id="small-columns-c128-capped-registers"),
    pytest.param(57, (3,), 70, True, False, "C", False, torch.complex128, {"small_kernel": "tiles"},
                 id="small-tiles-c128"),
    pytest.param(40, (2,), 20, False, True, "T", True, torch.float32, {"small_kernel": "tiles"},
                 id="small-tiles-f32"),
    pytest.param(57, (3,), 70, True, False, "C", False, torch.complex128, {"small_kernel": "mma"},
                 id="small-mma-c128"),
    pytest.param(20, (2,), 13, False, True, "T", True, torch.float64, {"small_kernel": "mma"},
                 id="small-mma-f64"),
    pytest.param(64, (), 200, True, False, "N", False, torch.complex128, {"small_kernel": "mma"},
                 id="small-mma-fold-c128"),
    pytest.param(57, (5,), 70, True, False, "C", False, torch.complex128, {"small_kernel": "tiles",
                 "max_blocks": "2"}, id="small-tiles-c128-grid-stride"),
    pytest.param(64, (7,), 64, True, False, "N", False, torch.complex64, {"small_kernel": "tiles",
                 "max_blocks": "2"}, id="small-tiles-c64-grid-stride"),
    pytest.param(41, (5,), 20, True, True, "T", False, torch.complex128, {"small_kernel": "segments",
                 "segment_lanes": "8", "max_blocks": "2"}, id="small-narrow-segments-grid-stride"),
    pytest.param(8, (601,), 1, True, False, "N", False, torch.float64, {"small_kernel": "columns",
                 "max_blocks": "2"}, id="small-columns-grid-stride"),
    pytest.param(33, (37,), 2, True, False, "N", False, torch.complex64, {"small_kernel": "warps",
                 "max_blocks": "2"}, id="small-warp-tasks-grid-stride"),
    pytest.param(100, (2,), 4, False, False, "T", False, torch.float64, {"sweep": "0"}, id="direct-leaves"),
    pytest.param(300, (), 3, True, True, "N", False, torch.float32, {"sweep": "0", "variant": "recursive"},
                 id="inverted-blocks-recursive"),
    pytest.param(300, (2,), 2, False, False, "C", True, torch.complex128, {"sweep": "0", "variant": "blocked"},
                 id="inverted-blocks-left-looking"),
    # The sweep in one block of threads (max_blocks 1): its tasks run in order, so compute-sanitizer's
    # racecheck, which may run blocks one at a time, never waits on a block that is not running.
    pytest.param(500, (2,), 3, True, False, "N", False, torch.float32, {"max_blocks": "1"}, id="sweep-narrow"),
    pytest.param(700, (), 2, True, True, "C", False, torch.complex64, {"sweep_segment": "1", "max_blocks": "1"},
                 id="sweep-tasks"),
    pytest.param(400, (), 20, False, False, "T", True, torch.float32,
                 {"sweep": "1", "sweep_rows": "128", "max_blocks": "1"}, id="sweep-rows128"),
    pytest.param(200, (3,), 40, True, False, "N", False, torch.float64, {"sweep": "1", "max_blocks": "1"},
                 id="sweep-panels"),
    pytest.param(600, (), 5, True, False, "N", False, torch.float64, {"nb": "512", "ib": "64"},
                 id="inverted-blocks-two-level"),
    pytest.param(600, (2,), 7, False, True, "C", False, torch.complex64,
                 {"nb": "256", "ib": "32", "aten_gemm": "1"}, id="aten-gemms"),
]


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("k,batch,other,left,upper,trans,unit,dtype,forced", SWEEP)
def test_cuda_path_sweep(device, k, batch, other, left, upper, trans, unit, dtype, forced, hsma_overrides):
    hsma_overrides(**forced)
    gen = make_generator(k)
    A = make_triangular(k, batch=batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, other, left=left, batch=batch), dtype=dtype, device=device, gen=gen)
    kw = dict(left=left, upper=upper, trans=trans, unitriangular=unit)
    X = call_and_check(A, B, alpha=default_alpha(dtype), **kw)
    # In place (the small kernel writes B directly; larger ones through a temporary).
    Bi = B.clone()
    torch.ops.hsma.trsm_(A, Bi, alpha=default_alpha(dtype), **kw)
    sync(device)
    tol = forward_tolerance(dtype, k)
    torch.testing.assert_close(Bi, X, rtol=tol, atol=tol * X.abs().max().item())
    # Backward (the adjoint solve and its GEMMs).
    A0 = make_triangular(k, batch=batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen, fill=0.0)
    A0.requires_grad_()
    X = torch.ops.hsma.trsm(A0, B, **kw)
    (gA,) = torch.autograd.grad(X.abs().sum(), A0)
    sync(device)
    assert torch.isfinite(gA).all()
