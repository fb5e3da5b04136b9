"""bfloat16 and float16 solves: hsma_trsm.trsm / trsm_ / solve_triangular / torch.ops.hsma.trsm.

Half inputs are solved in float32 arithmetic (inputs widened exactly) and the result is rounded
once to the input's dtype; trsm(out_dtype=torch.float32) and solve_triangular(out=<float32>) return
the unrounded float32 solution. Every check is against an independent float64 reference solve of
the half inputs widened exactly (conftest.reference_trsm on A.double(), B.double()).

Error bound used below (normwise, relative, Frobenius): the float32 solve's bound
(conftest.forward_tolerance(float32, k)) plus one rounding of the half type, its unit roundoff
u = eps / 2 = 2^-8 (bfloat16) or 2^-11 (float16): an entrywise relative rounding error <= u gives
a normwise one <= u. The test triangles have cond < ~10, so a wrong triangle, side, transpose,
alpha or a double rounding through a lower precision is far outside it.

On CUDA the orders cover the three paths (all of them in float32 arithmetic): the small path (k <= 64,
whose kernels read and write the 16-bit types as stored), the sweep (narrow right-hand sides, k >= 384)
and the blocked path (the rest), which solve float32 copies.
"""
import math

import numpy as np
import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

import hsma_trsm
from hsma_trsm import _ops as hsma_ops
from conftest import (
    CUDA_DEVICES,
    DEVICES,
    assert_same_bits,
    assert_unchanged,
    b_shape,
    check_solution,
    dtype_id,
    forward_tolerance,
    make_rhs,
    make_triangular,
    randn_like,
    reference_trsm,
    relative_error,
    to_numpy_wide,
    triangle_mask,
)

BOOL = [False, True]
HALF_DTYPES = [torch.bfloat16, torch.float16]


def unit_roundoff(dtype):
    return torch.finfo(dtype).eps / 2  # 2^-8 for bfloat16, 2^-11 for float16


def half_tolerance(dtype, k):
    """The float32 solve's forward bound plus one rounding to `dtype`."""
    return forward_tolerance(torch.float32, k) + unit_roundoff(dtype)


def check_half(X, A, B, *, dtype, left=True, upper=False, trans="N", unitriangular=False, alpha=1):
    """X (of the half dtype `dtype`) against the float64 reference solve of A, B widened exactly."""
    Xref = reference_trsm(A, B, left=left, upper=upper, trans=trans, unitriangular=unitriangular, alpha=alpha)
    assert tuple(X.shape) == Xref.shape
    assert X.dtype == dtype
    assert X.device == B.device
    assert X.is_contiguous()
    if X.numel() == 0:
        return 0.0
    assert np.isfinite(to_numpy_wide(X)).all(), "non-finite entries (the reference is finite)"
    k = A.shape[-1]
    err = relative_error(X, Xref)
    tol = half_tolerance(dtype, k)
    assert err <= tol, f"relative error {err:.3e} > {tol:.3e} (k={k}, {dtype})"
    return err


def solve_kwargs(left, upper, trans, unit, alpha=1):
    return dict(left=left, upper=upper, trans=trans, unitriangular=unit, alpha=alpha)


def float32_twin(A, B, **kw):
    """The float32 solve of the widened A and B that a 16-bit A's solve equals bit for bit: on the kernel the 16-bit
    A takes. At 49-64 rows with over 2048 columns in all that is whole columns, where float32 A takes the split
    column kernel (select.h), which sums in another order; elsewhere both take one kernel. (It replaces a
    column_rows set in HSMA_TRSM_OVERRIDES.)"""
    with hsma_ops.overrides(column_rows=64):
        return hsma_trsm.trsm(A.float(), B.float(), **kw)


# ---------------------------------------------------------------------------------------------
# Every variant (side, uplo, trans, diag) on small orders. A holds NaN in its unused triangle (and
# on the diagonal when unitriangular): any read of it shows up as NaN in the result.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("trans", ["N", "T"])  # 'C' is 'T' for real dtypes (test_trsm covers the mapping)
@pytest.mark.parametrize("unit", BOOL, ids=["nonunit", "unit"])
@pytest.mark.parametrize("k,batch,alpha", [(5, (), 1), (33, (2,), -1.5)], ids=["k5", "k33-batch2-alpha"])
def test_half_variants(device, dtype, left, upper, trans, unit, k, batch, alpha, gen):
    A = make_triangular(k, batch=batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, 6, left=left, batch=batch), dtype=dtype, device=device, gen=gen)
    kw = solve_kwargs(left, upper, trans, unit, alpha)
    A0, B0 = A.clone(), B.clone()
    X = torch.ops.hsma.trsm(A, B, **kw)
    assert_unchanged(A, A0, "A")
    assert_unchanged(B, B0, "B")
    check_half(X, A, B, dtype=dtype, **kw)
    # out_dtype=float32: the unrounded float32 solution, within float32's tolerance of the reference
    # (check_solution: forward and backward error for float32).
    X32 = hsma_trsm.trsm(A, B, out_dtype=torch.float32, **kw)
    check_solution(X32, A, B, dtype=torch.float32, **kw)
    # ... and the half result is that solution rounded once (one kernel runs both at these orders: float32_twin).
    assert_same_bits(X, X32.to(dtype))


# ---------------------------------------------------------------------------------------------
# Orders and widths over the CUDA paths: small (16, 64), blocked (65, 200, and 500 with wide B),
# sweep (500 with n = 1, 8); batched and not. Two variants, one per side. The CPU (one path, through
# LAPACK) runs the batched cases with n = 1 and 64 only.

SIZE_VARIANTS = [(True, False, "N", False), (False, True, "T", True)]
SIZE_CASES = [
    pytest.param("cpu", k, n, (3,), id=f"cpu-k{k}-n{n}-batch3") for k in (16, 64, 65, 200, 500) for n in (1, 64)
] + [
    pytest.param(*CUDA_DEVICES[0].values, k, n, batch, marks=CUDA_DEVICES[0].marks,
                 id=f"cuda-k{k}-n{n}-batch{len(batch)}")
    for k in (16, 64, 65, 200, 500)
    for n in (1, 8, 64)
    for batch in ((), (3,))
]


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left,upper,trans,unit", SIZE_VARIANTS, ids=["LLNn", "RUTu"])
@pytest.mark.parametrize("device,k,n,batch", SIZE_CASES)
def test_half_sizes(device, dtype, left, upper, trans, unit, k, n, batch, gen):
    A = make_triangular(k, batch=batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, n, left=left, batch=batch), dtype=dtype, device=device, gen=gen)
    kw = solve_kwargs(left, upper, trans, unit)
    X = hsma_trsm.trsm(A, B, **kw)
    check_half(X, A, B, dtype=dtype, **kw)
    X32 = hsma_trsm.trsm(A, B, out_dtype=torch.float32, **kw)
    check_solution(X32, A, B, dtype=torch.float32, **kw)
    assert_same_bits(X, X32.to(dtype))  # (at most 192 columns in all: one kernel runs both, float32_twin)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k,n,batch", [(16, 8, (256,)), (64, 64, (40,)), (1000, 16, ()), (700, 1, (2,))])
def test_half_larger_cuda(device, dtype, k, n, batch, gen):
    A = make_triangular(k, batch=batch, dtype=dtype, upper=False, device=device, gen=gen)
    B = make_rhs((*batch, k, n), dtype=dtype, device=device, gen=gen)
    X = hsma_trsm.trsm(A, B, trans="T")
    check_half(X, A, B, dtype=dtype, trans="T")


# ---------------------------------------------------------------------------------------------
# 16-bit storage in the small kernels (CUDA, orders up to 64): A and B are read and X written in their
# dtype, with float32 arithmetic. Layouts: fla's [B, T, H, BT] chunks read in place (rows contiguous and
# 16-byte aligned: vector loads where the column kernel runs), the same one element off (misaligned:
# element loads), column-major A; batches of n = 64 columns (the column kernel: whole columns for a 16-bit A,
# its split form at 49-64 rows for float32 A beside a 16-bit B) and of one (the segment kernels beyond 16 rows;
# with 1280 matrices, one per warp: the warp-task kernel). The unread triangle holds NaN. The result is the
# float32 solve of the widened inputs, in the same layout and on the same kernel (float32_twin), rounded once:
# the same bits; so is that of float32 A beside the 16-bit B (out_dtype=B.dtype) with float32's own kernel.


def fla_chunks(T, dtype, *, k, heads, offset, device, gen, unit):
    """(2, T, heads, k) chunks of unit-or-not lower triangles in fla's layout, as (2, T // k, heads, k, k)."""
    A = make_triangular(k, batch=(2, T // k, heads), dtype=dtype, unit=unit, device=device, gen=gen)
    flat = torch.empty(offset + A.numel(), dtype=dtype, device=device)
    base = flat[offset:].view(2, T // k, k, heads, k)  # [B, T, H, BT], rows of each chunk apart by heads * k
    base.copy_(A.transpose(2, 3))
    return base.transpose(2, 3)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k", [8, 13, 16, 32, 48, 57, 64])
@pytest.mark.parametrize("layout", ["fla", "fla-offset", "fla-many", "column-major"])
@pytest.mark.parametrize("n", [1, 64])
def test_half_stored_small_kernels(device, dtype, k, layout, n, gen):
    unit = k % 2 == 0
    chunks, heads = (16, 40) if layout == "fla-many" else (8, 3)
    A = fla_chunks(chunks * k, dtype, k=k, heads=heads, offset=1 if layout == "fla-offset" else 0, device=device,
                   gen=gen, unit=unit)
    if layout == "column-major":
        A = A.mT.contiguous().mT
    B = make_rhs((*A.shape[:-1], n), dtype=dtype, device=device, gen=gen)
    for trans in ("N", "T"):
        X = hsma_trsm.trsm(A, B, trans=trans, unitriangular=unit)
        check_half(X, A, B, dtype=dtype, trans=trans, unitriangular=unit)
        A32 = A.float()
        assert A32.stride() == A.stride() or layout == "fla-offset"
        assert_same_bits(X, float32_twin(A32, B, trans=trans, unitriangular=unit).to(dtype))
        # float32 A beside the 16-bit B, as fla holds them: the float32 solve, rounded once.
        X32 = hsma_trsm.trsm(A32, B.float(), trans=trans, unitriangular=unit)
        assert_same_bits(hsma_trsm.trsm(A32, B, trans=trans, unitriangular=unit, out_dtype=dtype), X32.to(dtype))
    C = B.clone()
    hsma_trsm.trsm_(A, C, unitriangular=unit)  # in place: each element read before it is written
    assert_same_bits(C, hsma_trsm.trsm(A, B, unitriangular=unit))


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left,upper,trans,unit,alpha", [(True, True, "N", False, -1.5), (False, False, "T", True, 2),
                                                         (False, True, "N", True, 1)], ids=["LUN", "RLTu", "RUNu"])
@pytest.mark.parametrize("k,n", [(16, 64), (40, 1), (40, 64), (64, 1), (64, 64)])
def test_half_stored_variants(device, dtype, left, upper, trans, unit, alpha, k, n, gen):
    # Every side, uplo (an upper triangle read backwards) and alpha, batched enough for the column kernel (n = 64)
    # or the segment kernels (n = 1); float32 A beside the 16-bit B too, and both in place.
    A = make_triangular(k, batch=(48,), dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, n, left=left, batch=(48,)), dtype=dtype, device=device, gen=gen)
    kw = solve_kwargs(left, upper, trans, unit, alpha)
    X = hsma_trsm.trsm(A, B, **kw)
    check_half(X, A, B, dtype=dtype, **kw)
    assert_same_bits(X, float32_twin(A, B, **kw).to(dtype))
    X32 = hsma_trsm.trsm(A.float(), B.float(), **kw).to(dtype)
    assert_same_bits(hsma_trsm.trsm(A.float(), B, out_dtype=dtype, **kw), X32)
    for a, expected in ((A, X), (A.float(), X32)):
        C = B.clone()
        hsma_trsm.trsm_(a, C, **kw)
        assert_same_bits(C, expected)


# ---------------------------------------------------------------------------------------------
# Entry points, broadcasting, strided inputs.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("k", [7, 70])
def test_half_entry_points_agree(device, dtype, left, k, gen):
    A = make_triangular(k, batch=(2,), dtype=dtype, upper=True, device=device, gen=gen)
    B = make_rhs(b_shape(k, 5, left=left, batch=(2,)), dtype=dtype, device=device, gen=gen)
    X = torch.ops.hsma.trsm(A, B, left=left, upper=True)
    check_half(X, A, B, dtype=dtype, left=left, upper=True)
    assert_same_bits(hsma_trsm.trsm(A, B, left=left, upper=True), X)
    assert_same_bits(hsma_trsm.solve_triangular(A, B, upper=True, left=left), X)
    C = B.clone()
    assert hsma_trsm.trsm_(A, C, left=left, upper=True) is C
    assert_same_bits(C, X)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("layout", ["A-broadcast", "A-expanded", "mT", "step"])
def test_half_broadcast_and_strides(device, dtype, layout, gen):
    k, n = 40, 6
    A = make_triangular(k, dtype=dtype, device=device, gen=gen)
    B = make_rhs((3, k, n), dtype=dtype, device=device, gen=gen)
    if layout == "A-expanded":  # a stride-0 batch dim
        A = A.expand(3, k, k)
    elif layout == "mT":
        A, B = A.mT.contiguous().mT, B.mT.contiguous().mT
    elif layout == "step":
        A = torch.repeat_interleave(torch.repeat_interleave(A, 2, -1), 2, -2)[..., ::2, ::2]
        B = torch.repeat_interleave(B, 3, -1)[..., ::3]
        assert not A.is_contiguous() and not B.is_contiguous()
    X = hsma_trsm.trsm(A, B, trans="T")
    check_half(X, A, B, dtype=dtype, trans="T")
    assert_same_bits(X, hsma_trsm.trsm(A.contiguous(), B.contiguous(), trans="T"))


# ---------------------------------------------------------------------------------------------
# unitriangular with a stored diagonal that is not 1 (transformers' Qwen3.5 fallback form).


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k", [12, 64, 130])
def test_half_unitriangular_ignores_stored_diagonal(device, dtype, k, gen):
    A = make_triangular(k, batch=(2,), dtype=dtype, unit=True, device=device, gen=gen, fill=0.0)
    A.diagonal(dim1=-2, dim2=-1).fill_(3.0)  # stored, not read
    B = make_rhs((2, k, 4), dtype=dtype, device=device, gen=gen)
    X = hsma_trsm.solve_triangular(A, B, upper=False, unitriangular=True)
    check_half(X, A, B, dtype=dtype, unitriangular=True)
    # Reading the stored 3 would give a solution of order 1/3 of this one.
    Xwrong = reference_trsm(A, B, unitriangular=False)
    assert relative_error(X, Xwrong) > 0.1


# ---------------------------------------------------------------------------------------------
# In place.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("k", [5, 64, 70])
def test_half_inplace(device, dtype, left, k, gen):
    A = make_triangular(k, batch=(2,), dtype=dtype, upper=not left, unit=left, device=device, gen=gen)
    B = make_rhs(b_shape(k, 9, left=left, batch=(2,)), dtype=dtype, device=device, gen=gen)
    kw = solve_kwargs(left, not left, "C", left, alpha=0.5)
    expected = hsma_trsm.trsm(A, B, **kw)
    A0, B0 = A.clone(), B.clone()
    C = B.clone()
    assert hsma_trsm.trsm_(A, C, **kw) is C
    assert C.dtype == dtype
    assert_unchanged(A, A0, "A")
    check_half(C, A, B0, dtype=dtype, **kw)
    assert_same_bits(C, expected)
    D = B.clone()
    assert torch.ops.hsma.trsm_(A, D, **kw) is None
    assert_same_bits(D, expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
def test_half_inplace_mixed_dtypes(device, dtype, gen):
    k = 20
    A = make_triangular(k, dtype=dtype, device=device, gen=gen)
    B = make_rhs((k, 3), dtype=torch.float32, device=device, gen=gen)
    # Half A with float32 B: A widened to B's dtype (exactly); a float32 result.
    C = B.clone()
    hsma_trsm.trsm_(A, C)
    assert C.dtype == torch.float32
    check_solution(C, A, B, dtype=torch.float32)
    # float32 A with half B: the op's mixed pair, the float32 solve rounded once into B.
    D = B.to(dtype)
    hsma_trsm.trsm_(A.float(), D)
    assert_same_bits(D, hsma_trsm.trsm(A.float(), B.to(dtype).float()).to(dtype))
    # float64 A with half B: B cannot hold the promoted float64 result.
    with pytest.raises(TypeError):
        hsma_trsm.trsm_(A.double(), B.to(dtype))


# ---------------------------------------------------------------------------------------------
# out_dtype and out=.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
def test_out_dtype(device, dtype, gen):
    k = 24
    A = make_triangular(k, batch=(2,), dtype=dtype, upper=True, device=device, gen=gen)
    B = make_rhs((2, 5, k), dtype=dtype, device=device, gen=gen)
    kw = dict(left=False, upper=True, trans="T", alpha=2)
    X32 = hsma_trsm.trsm(A, B, out_dtype=torch.float32, **kw)
    assert X32.dtype == torch.float32
    check_solution(X32, A, B, dtype=torch.float32, **kw)
    # The float32 solution is more accurate than any half result could be: its error is well
    # below one rounding of the half type (so it really is unrounded).
    assert relative_error(X32, reference_trsm(A, B, **kw)) < unit_roundoff(dtype) / 16
    # out_dtype equal to the result's dtype: as without it.
    assert_same_bits(hsma_trsm.trsm(A, B, out_dtype=dtype, **kw), hsma_trsm.trsm(A, B, **kw))
    other = torch.float16 if dtype == torch.bfloat16 else torch.bfloat16
    for bad in (torch.float64, other, torch.complex64):
        with pytest.raises(TypeError, match="out_dtype"):
            hsma_trsm.trsm(A, B, out_dtype=bad, **kw)
    # out_dtype=float32 is for the half types only.
    with pytest.raises(TypeError, match="out_dtype"):
        hsma_trsm.trsm(A.double(), B.double(), out_dtype=torch.float32, **kw)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
def test_solve_triangular_out(device, dtype, left, gen):
    k = 18
    A = make_triangular(k, batch=(2,), dtype=dtype, device=device, gen=gen)
    B = make_rhs(b_shape(k, 4, left=left, batch=(2,)), dtype=dtype, device=device, gen=gen)
    out32 = torch.empty(B.shape, dtype=torch.float32, device=device)
    r = hsma_trsm.solve_triangular(A, B, upper=False, left=left, out=out32)
    assert r is out32
    check_solution(out32, A, B, left=left, dtype=torch.float32)
    assert_same_bits(out32, hsma_trsm.trsm(A, B, left=left, out_dtype=torch.float32))
    out_h = torch.empty(B.shape, dtype=dtype, device=device)
    assert hsma_trsm.solve_triangular(A, B, upper=False, left=left, out=out_h) is out_h
    assert_same_bits(out_h, out32.to(dtype))
    with pytest.raises(RuntimeError, match="dtype"):
        hsma_trsm.solve_triangular(A, B, upper=False, left=left, out=torch.empty(B.shape, dtype=torch.float64,
                                                                                 device=device))


# ---------------------------------------------------------------------------------------------
# Mixed dtypes promote (torch.promote_types): the result dtype and accuracy of the promoted solve.

MIXED = [
    (torch.float32, torch.bfloat16, torch.float32),
    (torch.bfloat16, torch.float32, torch.float32),
    (torch.float16, torch.float32, torch.float32),
    (torch.bfloat16, torch.float16, torch.float32),
    (torch.float64, torch.float16, torch.float64),
    (torch.bfloat16, torch.float64, torch.float64),
    (torch.float16, torch.complex64, torch.complex64),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("a_dtype,b_dtype,expected", MIXED, ids=[f"{dtype_id(a)}-{dtype_id(b)}" for a, b, _ in MIXED])
def test_mixed_dtypes_promote(device, a_dtype, b_dtype, expected, gen):
    k = 30
    A = make_triangular(k, dtype=a_dtype, upper=True, device=device, gen=gen)
    B = make_rhs((k, 4), dtype=b_dtype, device=device, gen=gen)
    for X in (hsma_trsm.trsm(A, B, upper=True), hsma_trsm.solve_triangular(A, B, upper=True)):
        assert X.dtype == expected
        check_solution(X, A, B, upper=True, dtype=expected)
    if a_dtype == torch.float32 and b_dtype in HALF_DTYPES:
        return  # the op's one mixed pair (below)
    with pytest.raises(TypeError, match="same dtype"):
        torch.ops.hsma.trsm(A, B, upper=True)


# ---------------------------------------------------------------------------------------------
# float32 A with a bfloat16 / float16 B (flash-linear-attention's float32 triangles beside its 16-bit keys): the op
# reads both as they are, X has B's dtype and is the float32 solve of the widened B, rounded once; trsm takes the
# pair with out_dtype=B.dtype (without it, it promotes, above), trsm_ solves into B. Gradients: A's in float32,
# B's in B's dtype, against float64 gradients of the widened inputs.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("k", [6, 64, 70])
def test_float32_a_half_b(device, dtype, left, k, gen):
    A = make_triangular(k, batch=(2,), dtype=torch.float32, unit=True, device=device, gen=gen)
    B = make_rhs(b_shape(k, 5, left=left, batch=(2,)), dtype=dtype, device=device, gen=gen)
    kw = solve_kwargs(left, False, "T", True, alpha=-2)
    A0, B0 = A.clone(), B.clone()
    X = torch.ops.hsma.trsm(A, B, **kw)
    assert_unchanged(A, A0, "A")
    assert_unchanged(B, B0, "B")
    check_half(X, A, B, dtype=dtype, **kw)
    assert_same_bits(X, torch.ops.hsma.trsm(A, B.float(), **kw).to(dtype))
    assert_same_bits(hsma_trsm.trsm(A, B, out_dtype=dtype, **kw), X)
    C = B.clone()
    assert hsma_trsm.trsm_(A, C, **kw) is C
    assert_same_bits(C, X)
    with pytest.raises(TypeError, match="same dtype"):  # the reverse pair: B could not hold A
        torch.ops.hsma.trsm(A.to(dtype), B.float(), **kw)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
def test_float32_a_half_b_autograd(device, dtype, left, gen):
    k = 9
    A = make_triangular(k, dtype=torch.float32, upper=True, device=device, gen=gen, fill=None)
    B = make_rhs(b_shape(k, 4, left=left), dtype=dtype, device=device, gen=gen)
    gX = make_rhs(b_shape(k, 4, left=left), dtype=dtype, device=device, gen=gen)
    kw = dict(left=left, upper=True, trans="N", unitriangular=False)
    Ar, Br = A.clone().requires_grad_(), B.clone().requires_grad_()
    X = torch.ops.hsma.trsm(Ar, Br, **kw)
    assert X.dtype == dtype
    gA, gB = torch.autograd.grad(X, (Ar, Br), gX)
    assert gA.dtype == torch.float32 and gB.dtype == dtype
    mask = triangle_mask(k, upper=True, unit=False, device=device)
    assert (gA.masked_fill(mask, 0) == 0).all()  # the unread triangle (finite junk here): exactly zero
    rA, rB = _torch_reference_grads(A, B, gX, left=left, upper=True, trans="N", unit=False)
    bound = 8 * unit_roundoff(dtype)  # G and X each rounded to the half type, cond(A) < ~10
    assert relative_error(gB, rB.numpy()) <= bound
    assert relative_error(gA, rA.numpy()) <= bound
    # Forward mode: the tangent has X's dtype and matches the float64 one within the same bound.
    dA = make_rhs((k, k), dtype=torch.float32, device=device, gen=gen).triu()
    dB = make_rhs(b_shape(k, 4, left=left), dtype=dtype, device=device, gen=gen)
    _, dX = torch.func.jvp(lambda a, b: torch.ops.hsma.trsm(a, b, **kw), (A, B), (dA, dB))
    assert dX.dtype == dtype
    A64, B64 = A.double().cpu(), B.double().cpu()
    _, rdX = torch.func.jvp(lambda a, b: torch.linalg.solve_triangular(a.triu(), b, upper=True, left=left),
                            (A64, B64), (dA.double().cpu(), dB.double().cpu()))
    assert relative_error(dX, rdX.numpy()) <= bound


@pytest.mark.parametrize("device", DEVICES)
def test_float32_a_half_b_compile_and_opcheck(device, fresh_dynamo, gen):
    A = make_triangular(8, batch=(3,), dtype=torch.float32, device=device, gen=gen)
    B = make_rhs((3, 8, 2), dtype=torch.bfloat16, device=device, gen=gen)
    torch.library.opcheck(torch.ops.hsma.trsm.default, (A, B), {"upper": False})
    f = torch.compile(lambda a, b: hsma_trsm.trsm(a, b, out_dtype=torch.bfloat16), fullgraph=True, backend="eager")
    assert_same_bits(f(A, B), torch.ops.hsma.trsm(A, B))


# ---------------------------------------------------------------------------------------------
# Autograd: gradients in the half dtype, against float64 gradients of torch's solve of the widened
# inputs. The backward runs in the half dtype (a solve and a product, each rounded): the bound is
# a few roundings of the half type.


def _torch_reference_grads(A, B, gX, *, left, upper, trans, unit):
    A64 = A.detach().double().cpu().requires_grad_()
    B64 = B.detach().double().cpu().requires_grad_()
    mask = triangle_mask(A.shape[-1], upper=upper, unit=unit)
    T = torch.where(mask, A64, torch.zeros((), dtype=torch.float64))
    if unit:
        T = T + torch.eye(A.shape[-1], dtype=torch.float64)
    if trans != "N":
        T, upper = T.mT, not upper
    X = torch.linalg.solve_triangular(T, B64, upper=upper, left=left)
    gA, gB = torch.autograd.grad(X, (A64, B64), gX.detach().double().cpu())
    return gA, gB


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("trans,unit", [("N", False), ("T", True)], ids=["Nn", "Tu"])
@pytest.mark.parametrize("k", [6, 70])
def test_half_autograd(device, dtype, left, upper, trans, unit, k, gen):
    A = make_triangular(k, batch=(2,), dtype=dtype, upper=upper, unit=unit, device=device, gen=gen, fill=None)
    B = make_rhs(b_shape(k, 5, left=left, batch=(2,)), dtype=dtype, device=device, gen=gen)
    A.requires_grad_()
    B.requires_grad_()
    X = hsma_trsm.trsm(A, B, left=left, upper=upper, trans=trans, unitriangular=unit)
    gX = randn_like(X, gen)
    gA, gB = torch.autograd.grad(X, (A, B), gX)
    assert gA.dtype == dtype and gB.dtype == dtype
    assert gA.shape == A.shape and gB.shape == B.shape
    # The unused part of A (finite junk here) gets exactly zero gradient.
    mask = triangle_mask(k, upper=upper, unit=unit, device=device)
    assert (gA.masked_fill(mask, 0) == 0).all()
    rA, rB = _torch_reference_grads(A, B, gX, left=left, upper=upper, trans=trans, unit=unit)
    tol = 8 * unit_roundoff(dtype)
    for got, ref in ((gA, rA), (gB, rB)):
        err = relative_error(got, ref.numpy())
        assert err <= tol, f"gradient relative error {err:.3e} > {tol:.3e}"


# ---------------------------------------------------------------------------------------------
# torch.compile (fullgraph) and opcheck.


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_bfloat16(device, fresh_dynamo, gen):
    dtype = torch.bfloat16

    def f(A, B, C):
        X = hsma_trsm.solve_triangular(A, B, upper=False)
        Y = hsma_trsm.solve_triangular(A, C, upper=False, left=False, unitriangular=True)
        return X, Y

    counter = CompileCounterWithBackend("aot_eager")
    cf = torch.compile(f, backend=counter, fullgraph=True)
    for _ in range(2):
        A = make_triangular(9, batch=(2,), dtype=dtype, device=device, gen=gen, fill=0.0)
        B = make_rhs((2, 9, 3), dtype=dtype, device=device, gen=gen)
        C = make_rhs((4, 9), dtype=dtype, device=device, gen=gen)
        X, Y = cf(A, B, C)
        check_half(X, A, B, dtype=dtype)
        check_half(Y, A, C, dtype=dtype, left=False, unitriangular=True)
        X0, Y0 = f(A, B, C)
        assert_same_bits(X, X0)
        assert_same_bits(Y, Y0)
    assert counter.frame_count == 1


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_bfloat16_backward(device, fresh_dynamo, gen):
    dtype = torch.bfloat16

    def f(A, B):
        return (hsma_trsm.solve_triangular(A, B, upper=True).float() ** 2).sum()

    cf = torch.compile(f, backend="aot_eager", fullgraph=True)
    A = make_triangular(8, batch=(3,), dtype=dtype, upper=True, device=device, gen=gen, fill=0.0).requires_grad_()
    B = make_rhs((3, 8, 2), dtype=dtype, device=device, gen=gen).requires_grad_()
    loss = cf(A, B)
    gA, gB = torch.autograd.grad(loss, (A, B))
    A2, B2 = A.detach().clone().requires_grad_(), B.detach().clone().requires_grad_()
    gA2, gB2 = torch.autograd.grad(f(A2, B2), (A2, B2))
    assert gA.dtype == dtype and gB.dtype == dtype
    Xref = reference_trsm(A, B, upper=True)
    assert abs(loss.item() - float((Xref ** 2).sum())) <= 2 * unit_roundoff(dtype) * float((Xref ** 2).sum())
    torch.testing.assert_close(gA, gA2, rtol=0, atol=0)
    torch.testing.assert_close(gB, gB2, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
@pytest.mark.parametrize(
    "k,batch,left,upper,trans,unit,alpha,requires_grad",
    [
        pytest.param(5, (), True, False, "N", False, 1, False, id="k5-LLNn"),
        pytest.param(6, (2,), False, True, "T", True, -0.5, False, id="k6-batch2-RUTu-alpha"),
        pytest.param(70, (), True, True, "C", False, 1, False, id="k70-LUCn"),
        pytest.param(4, (2,), True, False, "T", False, 2, True, id="k4-batch2-LLTn-grad"),
    ],
)
def test_opcheck_half(device, dtype, k, batch, left, upper, trans, unit, alpha, requires_grad, gen):
    A = make_triangular(k, batch=batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, 3, left=left, batch=batch), dtype=dtype, device=device, gen=gen)
    if requires_grad:
        A = make_triangular(k, batch=batch, dtype=dtype, upper=upper, device=device, gen=gen, fill=0.0)
        A.requires_grad_()
        B.requires_grad_()
    kw = solve_kwargs(left, upper, trans, unit, alpha)
    result = torch.library.opcheck(torch.ops.hsma.trsm.default, (A, B), kw)
    assert all(v == "SUCCESS" for v in result.values()), result
    check_half(torch.ops.hsma.trsm(A, B, **kw).detach(), A, B, dtype=dtype, **kw)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=dtype_id)
def test_opcheck_half_inplace(device, dtype, gen):
    A = make_triangular(7, batch=(2,), dtype=dtype, upper=True, device=device, gen=gen)
    B = make_rhs((2, 7, 3), dtype=dtype, device=device, gen=gen)
    B0 = B.clone()
    result = torch.library.opcheck(torch.ops.hsma.trsm_.default, (A, B), dict(upper=True, trans="T"))
    assert all(v == "SUCCESS" for v in result.values()), result
    torch.ops.hsma.trsm_(A, B0, upper=True, trans="T")
    check_half(B0, A, B, dtype=dtype, upper=True, trans="T")


# ---------------------------------------------------------------------------------------------
# Range: the final rounding is the only place where the half type's range matters.


@pytest.mark.parametrize("device", DEVICES)
def test_float16_overflow_becomes_inf(device):
    # x = b / a = 100 / 2^-10 = 102400 > 65504 (float16's largest): inf in float16; the unrounded
    # float32 solution is finite and exact.
    A = torch.full((1, 1), 2.0 ** -10, dtype=torch.float16, device=device)
    B = torch.tensor([[100.0, 60.0, -100.0]], dtype=torch.float16, device=device)
    X = hsma_trsm.trsm(A, B)
    assert X.dtype == torch.float16
    assert X[0, 0].item() == math.inf and X[0, 2].item() == -math.inf
    assert X[0, 1].item() == 60.0 * 1024  # 61440: within range, exact
    X32 = hsma_trsm.trsm(A, B, out_dtype=torch.float32)
    assert X32.tolist() == [[102400.0, 61440.0, -102400.0]]


@pytest.mark.parametrize("device", DEVICES)
def test_float16_no_intermediate_overflow(device):
    # alpha * B = 1024 * 100 overflows float16, but the arithmetic is float32: X = 100, finite.
    A = torch.tensor([[1024.0, 0.0], [512.0, 1024.0]], dtype=torch.float16, device=device)
    B = torch.tensor([[100.0], [150.0]], dtype=torch.float16, device=device)
    X = hsma_trsm.trsm(A, B, alpha=1024)
    # x0 = 1024 * 100 / 1024 = 100; x1 = (1024 * 150 - 512 * 100) / 1024 = 100
    assert X.dtype == torch.float16
    assert X.tolist() == [[100.0], [100.0]]


@pytest.mark.parametrize("device", DEVICES)
def test_underflow_in_final_rounding_only(device):
    # x = 1e-4 / 1e4 = 1e-8: below float16's smallest subnormal / 2 (2^-25 ~ 2.98e-8), so 0 in
    # float16; bfloat16 has float32's exponent range and keeps it.
    a, b = 1e4, 1e-4
    for dtype, expect_zero in ((torch.float16, True), (torch.bfloat16, False)):
        A = torch.tensor([[a]], dtype=dtype, device=device)
        B = torch.tensor([[b]], dtype=dtype, device=device)
        exact = B.double().item() / A.double().item()
        X = hsma_trsm.trsm(A, B)
        if expect_zero:
            assert X.item() == 0.0
        else:
            assert abs(X.double().item() - exact) <= unit_roundoff(dtype) * exact
        X32 = hsma_trsm.trsm(A, B, out_dtype=torch.float32)
        assert abs(X32.double().item() - exact) <= 1e-7 * exact


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,d", [(torch.bfloat16, 255.0), (torch.float16, 2047.0)], ids=["bfloat16", "float16"])
def test_entrywise_rounding_bound(device, dtype, d):
    # x = (d + 1) / d = 1 + 1/d lies just above the midpoint 1 + u of 1 and the next representable
    # number 1 + 2u (d = 2^p - 1, p the significand bits): its rounding errs by (1 - 1/d) * u
    # relative, nearly the unit roundoff u = eps / 2 (2^-8 for bfloat16, 2^-11 for float16). That
    # is the bound per entry checked here. (api.trsm's docstring gives 2^-9 / 2^-12 for "one
    # rounding of the half type": half of what this case shows.)
    A = torch.tensor([[d]], dtype=dtype, device=device)
    B = torch.tensor([[d + 1, 1.0, 3.0, -7.0]], dtype=dtype, device=device)
    X = hsma_trsm.trsm(A, B)
    exact = B.double().cpu() / d
    rel = ((X.double().cpu() - exact).abs() / exact.abs()).max().item()
    assert rel <= unit_roundoff(dtype)
    assert_same_bits(X, (B.float() / A.float()).to(dtype))
