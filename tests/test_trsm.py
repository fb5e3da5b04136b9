"""Correctness of torch.ops.hsma.trsm against an independent float64/complex128 reference.

Every test checks real values: forward relative error and backward error against SciPy on the
explicitly built op(A) (see conftest.check_solution), that A and B were not modified, that the
result is contiguous, of the broadcast shape, and finite wherever the reference is.
"""
import warnings

import numpy as np
import pytest
import torch

import hsma_trsm
from conftest import (
    CUDA_DEVICES,
    DEVICES,
    DTYPES,
    TRANS,
    assert_unchanged,
    b_shape,
    call_and_check,
    check_solution,
    clean_triangular,
    default_alpha,
    dtype_id,
    forward_tolerance,
    make_rhs,
    make_triangular,
    reference_trsm,
    relative_error,
    sync,
    triangle_mask,
    to_numpy_wide,
)

BOOL = [False, True]


def variant_id(left, upper, trans, unit):
    return f"{'L' if left else 'R'}{'U' if upper else 'L'}{trans}{'u' if unit else 'n'}"


# ---------------------------------------------------------------------------------------------
# Full cross-product of the BLAS variants on a few sizes.
# k = 3: tiny (small path); k = 33: odd, batched, non-unit alpha (small path); k = 129: blocked
# path on CUDA (default NB = 128 -> one full block and a 1-row block), alpha an integer.
FULL_CASES = [
    # k, batch, other, alpha (None -> default_alpha(dtype))
    pytest.param(3, (), 4, 1, id="k3"),
    pytest.param(33, (2,), 5, None, id="k33-batch2-alpha"),
    pytest.param(129, (), 3, 2, id="k129-alpha2"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("unit", BOOL, ids=["nonunit", "unit"])
@pytest.mark.parametrize("k,batch,other,alpha", FULL_CASES)
def test_all_variants(device, dtype, left, upper, trans, unit, k, batch, other, alpha, gen):
    alpha = default_alpha(dtype) if alpha is None else alpha
    A = make_triangular(k, batch=batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, other, left=left, batch=batch), dtype=dtype, device=device, gen=gen)
    call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=alpha)


# ---------------------------------------------------------------------------------------------
# Size sweep on a pairwise-covering subset of the variants (every pair of values of
# side x uplo x trans x diag appears at least once).
PAIRWISE_VARIANTS = [
    (True, False, "N", False),
    (False, True, "N", True),
    (True, True, "T", False),
    (False, False, "T", True),
    (True, False, "C", True),
    (False, True, "C", False),
]
SWEEP_SIZES = [0, 1, 2, 3, 5, 31, 32, 33, 63, 64, 65, 127, 128, 129, 300]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left,upper,trans,unit", PAIRWISE_VARIANTS, ids=[variant_id(*v) for v in PAIRWISE_VARIANTS])
@pytest.mark.parametrize("k", SWEEP_SIZES)
def test_size_sweep(device, dtype, left, upper, trans, unit, k, gen):
    A = make_triangular(k, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, 7, left=left), dtype=dtype, device=device, gen=gen)
    call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize(
    "k,other,dtype,left,upper,trans,unit",
    [
        pytest.param(2000, 48, torch.float32, True, False, "N", False, id="k2000-float32-LLNn"),
        pytest.param(3000, 33, torch.complex64, False, True, "C", False, id="k3000-complex64-RUCn"),
        pytest.param(2500, 17, torch.float64, True, True, "T", True, id="k2500-float64-LUTu"),
    ],
)
def test_large_cuda(device, k, other, dtype, left, upper, trans, unit, gen):
    A = make_triangular(k, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, other, left=left), dtype=dtype, device=device, gen=gen)
    call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit)


# ---------------------------------------------------------------------------------------------
# Shapes of B: one column, odd, wide.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("k", [20, 100])
@pytest.mark.parametrize("other", [1, 17, 1000])
def test_rhs_shapes(device, dtype, left, k, other, gen):
    upper, trans, unit = (k == 100), ("C" if left else "T"), False
    A = make_triangular(k, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, other, left=left), dtype=dtype, device=device, gen=gen)
    call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit)


# ---------------------------------------------------------------------------------------------
# alpha: integers, floats, zero, complex.


def _alphas():
    cases = []
    for dtype in DTYPES:
        vals = [0, -1, 3, 0.5, -2.25]
        if dtype.is_complex:
            vals += [1j, 0.5 - 2j, complex(1.0, 0.0)]
        cases += [pytest.param(dtype, a, id=f"{dtype_id(dtype)}-{a}") for a in vals]
    return cases


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,alpha", _alphas())
@pytest.mark.parametrize("k", [6, 80])
def test_alpha(device, dtype, alpha, k, gen):
    left, upper, trans = (k == 6), (k == 80), "C" if dtype.is_complex else "T"
    A = make_triangular(k, dtype=dtype, upper=upper, device=device, gen=gen)
    B = make_rhs(b_shape(k, 5, left=left), dtype=dtype, device=device, gen=gen)
    X = call_and_check(A, B, left=left, upper=upper, trans=trans, alpha=alpha)
    if alpha == 0:
        assert torch.count_nonzero(X) == 0
    # Linearity in alpha: X(alpha) = alpha X(1).
    X1 = torch.ops.hsma.trsm(A, B, left=left, upper=upper, trans=trans)
    tol = 10 * forward_tolerance(dtype, k)
    torch.testing.assert_close(X, alpha * X1, rtol=tol, atol=tol * X1.abs().max().item())


# ---------------------------------------------------------------------------------------------
# Batch broadcasting.
BROADCAST_CASES = [
    # A batch, B batch
    pytest.param((2, 1), (3,), id="A21-B3"),
    pytest.param((), (4,), id="A-B4"),
    pytest.param((5,), (), id="A5-B"),
    pytest.param((1,), (3,), id="A1-B3"),
    pytest.param((3, 1, 2), (4, 1), id="A312-B41"),
    pytest.param((2, 3, 1, 2, 1), (3, 1, 2, 2), id="A5dims-B4dims"),
    pytest.param((2, 1, 2, 1, 2), (1, 2, 1, 2, 1), id="alternating-5dims"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64], ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("k", [7, 70])
@pytest.mark.parametrize("a_batch,b_batch", BROADCAST_CASES)
def test_broadcast_batch(device, dtype, left, k, a_batch, b_batch, gen):
    upper, trans, unit = left, ("N" if k == 7 else "C"), (k == 70)
    A = make_triangular(k, batch=a_batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, 3, left=left, batch=b_batch), dtype=dtype, device=device, gen=gen)
    X = call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit)
    assert X.shape == (*torch.broadcast_shapes(a_batch, b_batch), *B.shape[-2:])


# ---------------------------------------------------------------------------------------------
# Non-contiguous inputs.


def _strided_copy(t, step, fill=float("nan")):
    """A view with the values of t whose every dim has stride `step` times the packed one, in a
    NaN-filled buffer (the gaps must never be read or written)."""
    big = torch.full([s * step for s in t.shape], fill, dtype=t.dtype, device=t.device)
    idx = tuple(slice(None, None, step) for _ in t.shape)
    big[idx] = t
    return big[idx], big


def _column_major(t):
    return t.mT.contiguous().mT


LAYOUTS = ["A.mT", "B.mT", "both.mT", "A-step", "B-step", "both-step", "A-expand0", "B-expand0", "A-expand0+B.mT",
           "B-batch-permuted"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64], ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("k", [9, 64, 90])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_noncontiguous(device, dtype, left, k, layout, gen):
    upper = k != 64
    trans = {9: "N", 64: "T", 90: "C"}[k]
    unit = k == 64
    batch = (3,)
    A = make_triangular(k, batch=batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, 6, left=left, batch=batch), dtype=dtype, device=device, gen=gen)
    bases = []
    if layout in ("A.mT", "both.mT"):
        A = _column_major(A)
    if layout in ("B.mT", "both.mT", "A-expand0+B.mT"):
        B = _column_major(B)
    if layout in ("A-step", "both-step"):
        A, base = _strided_copy(A, 2)
        bases.append(base)
    if layout in ("B-step", "both-step"):
        B, base = _strided_copy(B, 3)
        bases.append(base)
    if layout.startswith("A-expand0"):
        A = A[0].expand(3, k, k)
        assert A.stride(0) == 0
    if layout == "B-expand0":
        B = B[0].expand(3, *B.shape[-2:])
        assert B.stride(0) == 0
    if layout == "B-batch-permuted":
        B = B.unsqueeze(0).expand(2, *B.shape).clone().transpose(0, 1)  # (3, 2, m, n), batch strides swapped
        A = A.unsqueeze(1)
    assert not (A.is_contiguous() and B.is_contiguous())
    base_copies = [b.clone() for b in bases]
    call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit)
    for base, copy in zip(bases, base_copies):
        assert_unchanged(base, copy, "the buffer around a strided input")


# ---------------------------------------------------------------------------------------------
# Conjugate and negative views.
VIEW_CASES = ["A.conj", "B.conj", "A.conj+B.conj", "A.mH", "A.mT", "A.mH+B.neg", "A.neg", "B.neg", "A.neg+B.conj", "A.conj.neg"]


VIEW_PARAMS = [
    pytest.param(dtype, view, id=f"{dtype_id(dtype)}-{view}")
    for dtype in DTYPES
    for view in VIEW_CASES
    if dtype.is_complex or "conj" not in view  # conj views exist for complex dtypes only
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("k", [10, 100])
@pytest.mark.parametrize("dtype,view", VIEW_PARAMS)
def test_conj_neg_views(device, dtype, left, trans, k, view, gen):
    upper = k == 10
    A = make_triangular(k, batch=(2,), dtype=dtype, upper=upper, device=device, gen=gen)
    B = make_rhs(b_shape(k, 4, left=left, batch=(2,)), dtype=dtype, device=device, gen=gen)
    if view.startswith("A.mH") or view == "A.mT":
        A = A.mH if view.startswith("A.mH") else A.mT  # (conj view +) transposed strides:
        upper = not upper  # now the other triangle is the used one
    if view in ("A.conj", "A.conj+B.conj", "A.conj.neg"):
        A = A.conj()
        assert A.is_conj()
    if view in ("B.conj", "A.conj+B.conj", "A.neg+B.conj"):
        B = B.conj()
        assert B.is_conj()
    if view in ("A.neg", "A.neg+B.conj", "A.conj.neg"):
        A = torch._neg_view(A)
        assert A.is_neg()
    if view in ("B.neg", "A.mH+B.neg"):
        B = torch._neg_view(B)
        assert B.is_neg()
    X = call_and_check(A, B, left=left, upper=upper, trans=trans, alpha=default_alpha(dtype))
    assert not X.is_conj() and not X.is_neg()


# ---------------------------------------------------------------------------------------------
# The unused triangle and the unit diagonal are never read.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left,upper,trans,unit", PAIRWISE_VARIANTS, ids=[variant_id(*v) for v in PAIRWISE_VARIANTS])
@pytest.mark.parametrize("k", [17, 150])
def test_unused_part_never_read(device, dtype, left, upper, trans, unit, k, gen):
    A_nan = make_triangular(k, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    used = triangle_mask(k, upper=upper, unit=unit, device=device)
    assert torch.isnan(A_nan[~used]).all()
    B = make_rhs(b_shape(k, 5, left=left), dtype=dtype, device=device, gen=gen)
    X_nan = call_and_check(A_nan, B, left=left, upper=upper, trans=trans, unitriangular=unit)
    # Same used part, other junk (huge finite values, inf) in the unused part: same bits out.
    for junk in (1e30, float("inf"), 0.0):
        A_junk = torch.where(used, A_nan, torch.full((), junk, dtype=dtype, device=device))
        X_junk = torch.ops.hsma.trsm(A_junk, B, left=left, upper=upper, trans=trans, unitriangular=unit)
        assert torch.equal(X_junk, X_nan), f"the result depends on the unused part of A (filled with {junk})"


# ---------------------------------------------------------------------------------------------
# Agreement with torch.linalg.solve_triangular on the same device (and the drop-in).


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("unit", BOOL, ids=["nonunit", "unit"])
@pytest.mark.parametrize("k,batch", [(4, (3,)), (65, ()), (200, (2,))])
def test_matches_torch_solve_triangular(device, dtype, left, upper, unit, k, batch, gen):
    A = make_triangular(k, batch=batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, 9, left=left, batch=batch), dtype=dtype, device=device, gen=gen)
    A_clean = clean_triangular(A, upper=upper, unit=unit)
    expected = torch.linalg.solve_triangular(A_clean, B, upper=upper, left=left, unitriangular=unit)
    A0, B0 = A.clone(), B.clone()
    got = hsma_trsm.solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)
    got_op = torch.ops.hsma.trsm(A, B, left=left, upper=upper, unitriangular=unit)
    got_fn = hsma_trsm.trsm(A, B, left=left, upper=upper, unitriangular=unit)
    assert_unchanged(A, A0, "A")
    assert_unchanged(B, B0, "B")
    assert got.shape == expected.shape and got.dtype == expected.dtype and got.device == expected.device
    tol = 2 * forward_tolerance(dtype, k)
    ref = reference_trsm(A, B, left=left, upper=upper, unitriangular=unit)
    assert relative_error(expected, ref) <= tol  # torch itself is accurate here...
    assert relative_error(got, ref) <= tol  # ...and so are we,
    diff = (got - expected).norm() / expected.norm()  # and we agree with it directly.
    assert diff <= 2 * tol
    assert torch.equal(got, got_op) and torch.equal(got, got_fn)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
def test_solve_triangular_out(device, dtype, left, gen):
    k = 12
    A = make_triangular(k, batch=(2,), dtype=dtype, upper=True, device=device, gen=gen)
    B = make_rhs(b_shape(k, 3, left=left, batch=(2,)), dtype=dtype, device=device, gen=gen)
    ref = reference_trsm(A, B, left=left, upper=True)
    # Right shape: written in place, returned, no warning.
    out = torch.empty(B.shape, dtype=dtype, device=device)
    ptr = out.data_ptr()
    r = hsma_trsm.solve_triangular(A, B, upper=True, left=left, out=out)
    assert r is out and out.data_ptr() == ptr
    assert relative_error(out, ref) <= forward_tolerance(dtype, k)
    # Non-contiguous out of the right shape.
    out_nc = torch.empty(B.shape[:-2] + B.shape[-2:][::-1], dtype=dtype, device=device).mT
    hsma_trsm.solve_triangular(A, B, upper=True, left=left, out=out_nc)
    assert relative_error(out_nc, ref) <= forward_tolerance(dtype, k)
    # Empty out: resized silently.
    out0 = torch.empty(0, dtype=dtype, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hsma_trsm.solve_triangular(A, B, upper=True, left=left, out=out0)
    assert out0.shape == B.shape and relative_error(out0, ref) <= forward_tolerance(dtype, k)
    # Wrong non-empty shape: resized, with a UserWarning, like torch.
    out_bad = torch.empty(5, dtype=dtype, device=device)
    with pytest.warns(UserWarning, match="resized"):
        hsma_trsm.solve_triangular(A, B, upper=True, left=left, out=out_bad)
    assert out_bad.shape == B.shape and relative_error(out_bad, ref) <= forward_tolerance(dtype, k)


# ---------------------------------------------------------------------------------------------
# Empty tensors.
EMPTY_CASES = [
    # A shape, B shape, left, expected result shape
    pytest.param((0, 0), (0, 5), True, (0, 5), id="k0-left"),
    pytest.param((0, 0), (4, 0), False, (4, 0), id="k0-right"),
    pytest.param((0, 0), (2, 0, 0), True, (2, 0, 0), id="k0-n0-batch"),
    pytest.param((6, 6), (6, 0), True, (6, 0), id="n0-left"),
    pytest.param((6, 6), (0, 6), False, (0, 6), id="m0-right"),
    pytest.param((0, 6, 6), (0, 6, 3), True, (0, 6, 3), id="batch0"),
    pytest.param((0, 6, 6), (6, 3), True, (0, 6, 3), id="A-batch0"),
    pytest.param((1, 6, 6), (0, 6, 3), True, (0, 6, 3), id="B-batch0-bcastA"),
    pytest.param((2, 0, 70, 70), (1, 3, 70), False, (2, 0, 3, 70), id="batch0-blocked-right"),
    pytest.param((70, 70), (3, 70, 0), True, (3, 70, 0), id="blocked-n0"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("a_shape,b_shape_,left,expected", EMPTY_CASES)
def test_empty(device, dtype, a_shape, b_shape_, left, expected, gen):
    k = a_shape[-1]
    A = make_triangular(k, batch=a_shape[:-2], dtype=dtype, device=device, gen=gen)
    B = make_rhs(b_shape_, dtype=dtype, device=device, gen=gen)
    for trans in TRANS:
        X = torch.ops.hsma.trsm(A, B, left=left, trans=trans)
        assert X.shape == expected and X.dtype == dtype and X.device == B.device
        assert X.is_contiguous()
        X2 = hsma_trsm.solve_triangular(A, B, upper=False, left=left)
        assert X2.shape == expected
    Bi = torch.empty(expected, dtype=dtype, device=device)
    assert hsma_trsm.trsm_(A, Bi, left=left) is Bi
    torch.ops.hsma.trsm_(A, Bi, left=left, trans="C")
    assert Bi.shape == expected


# ---------------------------------------------------------------------------------------------
# A zero on the diagonal: no error, inf/nan where the solution depends on it, and the entries
# that do not depend on that pivot are still the exact solution.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("trans", ["N", "T"])
@pytest.mark.parametrize("k,j", [(9, 4), (150, 131), (150, 20)])
def test_zero_diagonal(device, dtype, left, upper, trans, k, j, gen):
    A = make_triangular(k, dtype=dtype, upper=upper, device=device, gen=gen)
    A[j, j] = 0
    B = make_rhs(b_shape(k, 4, left=left), dtype=dtype, device=device, gen=gen)
    X = torch.ops.hsma.trsm(A, B, left=left, upper=upper, trans=trans)
    sync(device)
    assert X.shape == B.shape
    Xn = to_numpy_wide(X)
    assert not np.isfinite(Xn).all(), "a zero pivot must give inf/nan"
    # Which entries do not depend on pivot j: op(A) lower & left -> rows < j; upper & left ->
    # rows > j; for right solves, X T = B is T^T X^T = B^T (triangle flipped) over columns.
    lower_eff = (not upper) != (trans != "N")
    if not left:
        lower_eff = not lower_eff
    idx = np.arange(k)
    indep = idx < j if lower_eff else idx > j
    A_fixed = A.clone()
    A_fixed[j, j] = 1  # any nonzero: the independent entries do not see it
    ref = reference_trsm(A_fixed, B, left=left, upper=upper, trans=trans)
    got = Xn[indep, :] if left else Xn[:, indep]
    want = ref[indep, :] if left else ref[:, indep]
    assert np.isfinite(got).all()
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert err <= forward_tolerance(dtype, k)
    # The pivot's own row (left) / column (right) has inf or nan in it.
    piv = Xn[j, :] if left else Xn[:, j]
    assert not np.isfinite(piv).any()


# ---------------------------------------------------------------------------------------------
# CPU and CUDA agree (when CUDA is present).


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("k", [40, 257])
def test_cuda_matches_cpu(device, dtype, k, gen):
    for left, upper, trans, unit in PAIRWISE_VARIANTS:
        A = make_triangular(k, batch=(2,), dtype=dtype, upper=upper, unit=unit, gen=gen)
        B = make_rhs(b_shape(k, 6, left=left, batch=(2,)), dtype=dtype, gen=gen)
        kw = dict(left=left, upper=upper, trans=trans, unitriangular=unit)
        X_cpu = torch.ops.hsma.trsm(A, B, **kw)
        X_gpu = torch.ops.hsma.trsm(A.to(device), B.to(device), **kw)
        assert X_gpu.device.type == "cuda"
        diff = (X_gpu.cpu() - X_cpu).norm() / X_cpu.norm()
        assert diff <= 2 * forward_tolerance(dtype, k)
