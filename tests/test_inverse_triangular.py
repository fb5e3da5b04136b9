"""hsma_trsm.inverse_triangular and torch.ops.hsma.trtri (LAPACK's trtri, batched).

Every value check is against an independent reference: torch.linalg.inv in float64 / complex128 of
the triangle built explicitly from the input widened exactly (unused part zeroed, a unit diagonal
set; conftest.reference_op_matrix). Error bound (relative, Frobenius, per matrix): the arithmetic
dtype's conftest.forward_tolerance (float32 for bfloat16 / float16 inputs) plus one rounding of the
result's dtype (unit roundoff eps / 2). The test triangles have cond < ~10.

Orders run around the CUDA kernel's paddings (16, 32, 64) and past its limit (k > 64, and complex
dtypes, take the solve against an identity). A holds NaN in its unused triangle (and on the
diagonal when unitriangular), so any read of it poisons the result.
"""
import warnings

import numpy as np
import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch.autograd import gradcheck, gradgradcheck

import hsma_trsm
from conftest import (
    CUDA_DEVICES,
    DEVICES,
    assert_same_bits,
    assert_unchanged,
    dtype_id,
    eps_of,
    forward_tolerance,
    make_generator,
    make_triangular,
    reference_op_matrix,
    to_numpy_wide,
    triangle_mask,
)

BOOL = [False, True]
ALL_DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128, torch.bfloat16, torch.float16]
REAL = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
HALF = (torch.bfloat16, torch.float16)


def arithmetic_dtype(dtype):
    return torch.float32 if dtype in HALF else dtype


def inverse_tolerance(in_dtype, out_dtype, k):
    return forward_tolerance(arithmetic_dtype(in_dtype), k) + eps_of(out_dtype) / 2


def reference_inverse(A, *, upper, unit):
    """inv of the triangle of A (unused part zeroed, unit diagonal set), float64/complex128 NumPy."""
    T = torch.from_numpy(reference_op_matrix(A, upper=upper, unitriangular=unit))
    return torch.linalg.inv(T).numpy()


def per_matrix_errors(X, Xref):
    k = Xref.shape[-1]
    Xn = to_numpy_wide(X).reshape(-1, k, k)
    R = Xref.reshape(-1, k, k)
    return np.linalg.norm(Xn - R, axis=(1, 2)) / np.linalg.norm(R, axis=(1, 2))


def check_inverse(X, A, *, upper, unit, dtype=None, contiguous=True):
    """X = inverse_triangular(A, ...) of dtype `dtype` (default A's): shape, dtype, device, exact
    zeros in the other triangle, exact ones on a unit diagonal, finite, error per matrix."""
    dtype = A.dtype if dtype is None else dtype
    assert X.shape == A.shape
    assert X.dtype == dtype
    assert X.device == A.device
    if contiguous:
        assert X.is_contiguous()
    if X.numel() == 0:
        return
    k = A.shape[-1]
    Xn = to_numpy_wide(X)
    assert np.isfinite(Xn).all(), "non-finite entries (the reference is finite)"
    other = ~triangle_mask(k, upper=upper, unit=False).numpy()
    assert (Xn[..., other] == 0).all(), "the other triangle is not exactly zero"
    if unit:
        assert (np.diagonal(Xn, axis1=-2, axis2=-1) == 1).all(), "unit diagonal of the inverse is not exactly 1"
    err = per_matrix_errors(X, reference_inverse(A, upper=upper, unit=unit)).max()
    tol = inverse_tolerance(A.dtype, dtype, k)
    assert err <= tol, f"relative error {err:.3e} > {tol:.3e} (k={k}, {A.dtype} -> {dtype})"


# ---------------------------------------------------------------------------------------------
# Every dtype, uplo and diag over orders 1..70 around the kernel's paddings.

ORDERS = [1, 2, 5, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 70]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("unit", BOOL, ids=["nonunit", "unit"])
@pytest.mark.parametrize("k", ORDERS)
def test_inverse(device, dtype, upper, unit, k, gen):
    A = make_triangular(k, batch=(3,), dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    A0 = A.clone()
    X = hsma_trsm.inverse_triangular(A, upper=upper, unitriangular=unit)
    assert_unchanged(A, A0, "A")
    check_inverse(X, A, upper=upper, unit=unit)
    assert_same_bits(torch.ops.hsma.trtri(A, upper=upper, unitriangular=unit), X)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("k,batch", [(16, (1000,)), (32, (333,)), (64, (257,)), (128, (9,)), (700, ())])
def test_inverse_larger_cuda(device, dtype, upper, k, batch, gen):
    A = make_triangular(k, batch=batch, dtype=dtype, upper=upper, device=device, gen=gen)
    check_inverse(hsma_trsm.inverse_triangular(A, upper=upper), A, upper=upper, unit=False)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("k", [7, 16, 32, 64])
def test_inverse_grid_stride_cuda(device, dtype, k, hsma_overrides, gen):
    """The kernel's grid capped at one / three blocks: each block loops over its tasks."""
    A = make_triangular(k, batch=(37,), dtype=dtype, unit=(k == 32), device=device, gen=gen)
    for cap in (1, 3):
        hsma_overrides(max_blocks=cap)
        check_inverse(hsma_trsm.inverse_triangular(A, upper=False, unitriangular=k == 32), A, upper=False,
                      unit=k == 32)


# ---------------------------------------------------------------------------------------------
# Both CUDA methods forced (the override `inverse`): the kernel, which stages in 16-byte loads where the
# rows are contiguous and 16-byte aligned (element by element otherwise), and the solve against an identity.


def _window(A, shift):
    """A inside a NaN buffer whose rows have 8 spare elements, starting `shift` elements in: 16-byte aligned
    rows for shift 8 (and 0), not for 2."""
    k = A.shape[-1]
    big = torch.full((*A.shape[:-2], k, k + 8), float("nan"), dtype=A.dtype, device=A.device)
    big[..., shift:shift + k] = A
    return big[..., shift:shift + k]


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("method", ["kernel", "solve"])
@pytest.mark.parametrize("dtype", REAL, ids=dtype_id)
@pytest.mark.parametrize("shift", [None, 2, 8], ids=["contiguous", "shift2", "shift8"])
@pytest.mark.parametrize("k", [16, 24, 61, 64])
@pytest.mark.parametrize("upper,unit", [(False, False), (False, True), (True, False)],
                         ids=["lower", "lower-unit", "upper"])
def test_inverse_methods_cuda(device, method, dtype, shift, k, upper, unit, hsma_overrides, gen):
    A = make_triangular(k, batch=(5,), dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    V = A if shift is None else _window(A, shift)
    hsma_overrides(inverse=method)
    X = hsma_trsm.inverse_triangular(V, upper=upper, unitriangular=unit)
    check_inverse(X, A, upper=upper, unit=unit)


# ---------------------------------------------------------------------------------------------
# out_dtype.

OUT_ORDERS = [7, 64, 70]
REAL_PAIRS = [(a, b) for a in REAL for b in REAL]
COMPLEX_PAIRS = [(torch.complex64, torch.complex128), (torch.complex128, torch.complex64)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("in_dtype,out_dtype", REAL_PAIRS + COMPLEX_PAIRS,
                         ids=[f"{dtype_id(a)}-to-{dtype_id(b)}" for a, b in REAL_PAIRS + COMPLEX_PAIRS])
@pytest.mark.parametrize("k", OUT_ORDERS)
def test_out_dtype(device, in_dtype, out_dtype, k, gen):
    upper = k == 64
    A = make_triangular(k, batch=(2,), dtype=in_dtype, upper=upper, device=device, gen=gen)
    X = hsma_trsm.inverse_triangular(A, upper=upper, out_dtype=out_dtype)
    check_inverse(X, A, upper=upper, unit=False, dtype=out_dtype)
    assert_same_bits(torch.ops.hsma.trtri(A, upper=upper, out_dtype=out_dtype), X)
    if in_dtype in (torch.float32, *HALF) and out_dtype in HALF:
        # float32 arithmetic either way, rounded once: the float32 inverse rounded.
        X32 = hsma_trsm.inverse_triangular(A, upper=upper, out_dtype=torch.float32)
        assert_same_bits(X, X32.to(out_dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_out_dtype_errors(device, gen):
    A = make_triangular(6, dtype=torch.float32, device=device, gen=gen)
    Z = make_triangular(6, dtype=torch.complex64, device=device, gen=gen)
    for bad in (torch.complex64, torch.complex128):  # complex result of a real A
        with pytest.raises(TypeError, match="out_dtype"):
            hsma_trsm.inverse_triangular(A, upper=False, out_dtype=bad)
        with pytest.raises(TypeError, match="out_dtype"):
            torch.ops.hsma.trtri(A, upper=False, out_dtype=bad)
    for bad in (torch.float32, torch.float64, torch.bfloat16):  # real result of a complex A
        with pytest.raises(TypeError, match="out_dtype"):
            hsma_trsm.inverse_triangular(Z, upper=False, out_dtype=bad)
    with pytest.raises(TypeError, match="out_dtype"):
        hsma_trsm.inverse_triangular(A, upper=False, out_dtype=torch.int32)
    with pytest.raises(TypeError, match="out_dtype"):
        hsma_trsm.inverse_triangular(A, upper=False, out_dtype="float32")


# ---------------------------------------------------------------------------------------------
# Batches and strided views.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("batch", [(0,), (5,), (2, 3), (2, 1, 3), (3, 0, 2)], ids=lambda b: "x".join(map(str, b)))
@pytest.mark.parametrize("k", [8, 40, 70])
def test_batches(device, dtype, batch, k, gen):
    A = make_triangular(k, batch=batch, dtype=dtype, upper=True, unit=k == 40, device=device, gen=gen)
    X = hsma_trsm.inverse_triangular(A, upper=True, unitriangular=k == 40)
    check_inverse(X, A, upper=True, unit=k == 40)


def _view(A, layout):
    """A strided / conjugate / negative view: A's values in another memory layout, except
    "expanded" (A[0] repeated along a stride-0 batch dim) and "five-batch-dims" (A's batch
    dims permuted)."""
    if layout == "mT":  # column-major triangles
        return A.mT.contiguous().mT
    if layout == "step":  # every second row and column of a bigger buffer
        return torch.repeat_interleave(torch.repeat_interleave(A, 2, -1), 2, -2)[..., ::2, ::2]
    if layout == "offset":  # a window of a bigger buffer (storage offset, row stride > k)
        k = A.shape[-1]
        big = torch.full((*A.shape[:-2], k + 3, k + 5), float("nan"), dtype=A.dtype, device=A.device)
        big[..., 2:2 + k, 1:1 + k] = A
        return big[..., 2:2 + k, 1:1 + k]
    if layout == "batch-last":  # batch dim innermost in memory
        return A.permute(1, 2, 0).contiguous().permute(2, 0, 1)
    if layout == "expanded":  # stride-0 batch dim
        return A[:1].expand(A.shape)
    if layout == "five-batch-dims":  # (2, 2, 2, 2, 2) batch permuted: no two batch dims merge
        return A.permute(4, 2, 0, 3, 1, 5, 6)
    if layout == "conj":
        return A.conj_physical().conj()  # a conjugate view holding A's values
    if layout == "neg":
        return torch._neg_view(-A)  # a negative view holding A's values
    raise ValueError(layout)


LAYOUTS = ["mT", "step", "offset", "batch-last", "expanded", "five-batch-dims", "conj", "neg"]


VIEW_CASES = [
    pytest.param(dtype, layout, id=f"{dtype_id(dtype)}-{layout}")
    for dtype in (torch.float32, torch.float64, torch.complex64, torch.bfloat16)
    for layout in LAYOUTS
    if layout != "conj" or dtype.is_complex  # conjugate views are complex
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,layout", VIEW_CASES)
@pytest.mark.parametrize("k,upper", [(9, False), (33, True), (64, True), (66, False)],
                         ids=["k9-lower", "k33-upper", "k64-upper", "k66-lower"])
def test_views(device, dtype, layout, upper, k, gen):
    batch = (2, 2, 2, 2, 2) if layout == "five-batch-dims" else (6,)
    A = make_triangular(k, batch=batch, dtype=dtype, upper=upper, device=device, gen=gen)
    V = _view(A, layout)
    assert V.is_conj() == (layout == "conj") and V.is_neg() == (layout == "neg")
    if layout not in ("conj", "neg"):
        assert not V.is_contiguous()
    if layout not in ("expanded", "five-batch-dims"):
        assert_same_bits(V.resolve_conj().resolve_neg(), A)  # A's values, in another layout
    V0 = V.clone()
    X = hsma_trsm.inverse_triangular(V, upper=upper)
    assert_unchanged(V, V0, "A")
    check_inverse(X, V, upper=upper, unit=False)


# ---------------------------------------------------------------------------------------------
# flash-linear-attention's layout: A is a [B, T, H, BT] tensor, chunk c of head h the BT x BT block
# A[b, c*BT:(c+1)*BT, h, :], strictly lower (fla.ops.utils.solve_tril returns (I + A)^-1). The
# strided view (B, T//BT, H, BT, BT) reads it in place. Whole chunks only: T is rounded down to a
# multiple of BT (fla's partial last chunk is not supported); the rows of a partial chunk hold NaN
# and must not be read.

FLA_GRID = [(1, 63, 1, 16), (2, 500, 4, 32), (2, 1000, 5, 64), (3, 1024, 6, 64), (4, 2048, 8, 64)]


def fla_input(B, T, H, BT, dtype, device, gen):
    """The [B, T, H, BT] tensor (NaN outside the strictly lower chunks) and its chunk view."""
    nt = T // BT
    rows = torch.arange(T)
    used = (torch.arange(BT)[None, :] < (rows % BT)[:, None]) & (rows < nt * BT)[:, None]  # (T, BT)
    values = torch.randn((B, T, H, BT), generator=gen).to(dtype) / BT ** 0.5
    raw = values.masked_fill_(~used[None, :, None, :], float("nan")).to(device)
    view = raw.as_strided((B, nt, H, BT, BT), (T * H * BT, BT * H * BT, BT, H * BT, 1))
    return raw, view


def fla_reference(view):
    """(I + A)^-1 in float64, A the strictly lower part of each chunk (widened exactly)."""
    BT = view.shape[-1]
    A64 = view.detach().cpu().double()
    strict = torch.ones(BT, BT, dtype=torch.bool).tril(-1)
    I_plus_A = torch.where(strict, A64, torch.zeros((), dtype=torch.float64)) + torch.eye(BT, dtype=torch.float64)
    return torch.linalg.inv(I_plus_A).numpy()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("B,T,H,BT", FLA_GRID, ids=[f"B{b}-T{t}-H{h}-BT{bt}" for b, t, h, bt in FLA_GRID])
@pytest.mark.parametrize("dtype,out_dtype", [(torch.float32, None), (torch.float32, torch.bfloat16),
                                             (torch.bfloat16, torch.float32)],
                         ids=["float32", "float32-to-bfloat16", "bfloat16-to-float32"])
def test_fla_layout(device, B, T, H, BT, dtype, out_dtype, gen):
    raw, view = fla_input(B, T, H, BT, dtype, device, gen)
    assert view[0, 0, 0, 1, 0] == raw[0, 1, 0, 0]  # chunk 0, row 1, column 0
    if T // BT > 1:
        assert view[-1, 1, -1, 2, 1] == raw[-1, BT + 2, -1, 1]
    raw0 = raw.clone()
    X = hsma_trsm.inverse_triangular(view, upper=False, unitriangular=True, out_dtype=out_dtype)
    assert_unchanged(raw, raw0, "the [B, T, H, BT] input")
    out = dtype if out_dtype is None else out_dtype
    assert X.shape == (B, T // BT, H, BT, BT) and X.dtype == out and X.is_contiguous()
    Xn = to_numpy_wide(X)
    assert np.isfinite(Xn).all()
    assert (np.triu(Xn, 1) == 0).all() and (np.diagonal(Xn, axis1=-2, axis2=-1) == 1).all()
    err = per_matrix_errors(X, fla_reference(view)).max()
    tol = inverse_tolerance(dtype, out, BT)
    assert err <= tol, f"relative error {err:.3e} > {tol:.3e}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("B,T,H,BT", [FLA_GRID[0], FLA_GRID[2]], ids=["B1-T63-H1-BT16", "B2-T1000-H5-BT64"])
def test_fla_layout_out_view(device, B, T, H, BT, gen):
    """fla writes the inverse into a [B, T, H, BT] buffer too: out= that same strided view."""
    raw, view = fla_input(B, T, H, BT, torch.float32, device, gen)
    buf = torch.full((B, T, H, BT), float("nan"), dtype=torch.bfloat16, device=device)
    out = buf.as_strided(view.shape, view.stride())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no resize
        r = hsma_trsm.inverse_triangular(view, upper=False, unitriangular=True, out=out)
    assert r is out
    expected = hsma_trsm.inverse_triangular(view, upper=False, unitriangular=True, out_dtype=torch.bfloat16)
    assert_same_bits(out, expected)
    nt = T // BT
    for c in range(nt):  # chunk c of head h is buf[:, c*BT:(c+1)*BT, h, :]
        assert_same_bits(buf[:, c * BT:(c + 1) * BT].permute(0, 2, 1, 3), expected[:, c])
    assert buf[:, nt * BT:].isnan().all()  # the partial chunk's rows are not written


# ---------------------------------------------------------------------------------------------
# out=.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("k", [6, 70])
def test_out(device, dtype, k, gen):
    A = make_triangular(k, batch=(3,), dtype=dtype, upper=True, device=device, gen=gen)
    X = hsma_trsm.inverse_triangular(A, upper=True)
    check_inverse(X, A, upper=True, unit=False)
    # Written in place, returned.
    out = torch.full(A.shape, float("nan"), dtype=dtype, device=device)
    assert hsma_trsm.inverse_triangular(A, upper=True, out=out) is out
    assert_same_bits(out, X)
    # A non-contiguous out (column-major): written through the view.
    out_cm = torch.full(A.shape, float("nan"), dtype=dtype, device=device).mT.contiguous().mT
    assert not out_cm.is_contiguous()
    assert hsma_trsm.inverse_triangular(A, upper=True, out=out_cm) is out_cm
    assert_same_bits(out_cm, X)
    # Empty out: resized silently.
    empty = torch.empty(0, dtype=dtype, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hsma_trsm.inverse_triangular(A, upper=True, out=empty) is empty
    assert_same_bits(empty, X)
    # Elements of another shape: resized with torch's warning.
    wrong = torch.zeros(2, 2, dtype=dtype, device=device)
    with pytest.warns(UserWarning, match="was resized"):
        assert hsma_trsm.inverse_triangular(A, upper=True, out=wrong) is wrong
    assert_same_bits(wrong, X)


@pytest.mark.parametrize("device", DEVICES)
def test_out_dtype_from_out_and_errors(device, gen):
    k = 12
    A = make_triangular(k, batch=(2,), dtype=torch.float32, device=device, gen=gen)
    # out's dtype is the result's dtype: float32 arithmetic into a bfloat16 / float64 out.
    for dt in (torch.bfloat16, torch.float64):
        out = torch.empty(A.shape, dtype=dt, device=device)
        hsma_trsm.inverse_triangular(A, upper=False, out=out)
        check_inverse(out, A, upper=False, unit=False, dtype=dt)
        assert_same_bits(out, hsma_trsm.inverse_triangular(A, upper=False, out_dtype=dt))
    # out of another dtype than out_dtype.
    with pytest.raises(RuntimeError, match="dtype"):
        hsma_trsm.inverse_triangular(A, upper=False, out_dtype=torch.bfloat16, out=torch.empty(A.shape, device=device))
    # A complex out for a real A: its dtype taken as out_dtype, which is of the other kind.
    with pytest.raises(TypeError):
        hsma_trsm.inverse_triangular(A, upper=False, out=torch.empty(A.shape, dtype=torch.complex64, device=device))
    # out= is not differentiable.
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        hsma_trsm.inverse_triangular(A.clone().requires_grad_(), upper=False, out=torch.empty_like(A))
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        hsma_trsm.inverse_triangular(A, upper=False, out=torch.empty_like(A).requires_grad_())
    with pytest.raises(TypeError, match="out"):
        hsma_trsm.inverse_triangular(A, upper=False, out=A.tolist())


@pytest.mark.parametrize("device", CUDA_DEVICES)
def test_out_on_another_device(device, gen):
    A = make_triangular(5, dtype=torch.float32, device=device, gen=gen)
    with pytest.raises(RuntimeError, match="cpu"):
        hsma_trsm.inverse_triangular(A, upper=False, out=torch.empty(5, 5))


# ---------------------------------------------------------------------------------------------
# Zero pivots and argument errors.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("k", [6, 70])
def test_zero_pivot(device, dtype, k, gen):
    """A zero at pivot p: X[p, p] is not finite; the leading p x p block (rows above p) does not
    depend on it and is the leading block's inverse; the upper triangle stays exactly zero.
    (The columns after p do not depend on the pivot mathematically, but a blocked solve against
    the identity -- MKL's trsm on the CPU -- multiplies 0 by inf there and gives NaN, so they are
    not checked.)"""
    p = k // 2
    A = make_triangular(k, dtype=torch.float64, gen=gen)
    A[p, p] = 0.0
    A = A.to(dtype=dtype, device=device)
    X = to_numpy_wide(hsma_trsm.inverse_triangular(A, upper=False))
    assert not np.isfinite(X[p, p])
    assert (X[np.triu_indices(k, 1)] == 0).all()
    lead = X[:p, :p]
    assert np.isfinite(lead).all()
    err = per_matrix_errors(torch.from_numpy(lead.copy()), reference_inverse(A[:p, :p], upper=False, unit=False))
    assert err.max() <= inverse_tolerance(dtype, dtype, k)


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    A = torch.eye(4, device=device)
    for bad in (torch.ones(4, device=device), torch.ones((), device=device), torch.ones(3, 4, device=device),
                torch.ones(2, 4, 3, device=device)):
        with pytest.raises(RuntimeError):
            hsma_trsm.inverse_triangular(bad, upper=False)
        with pytest.raises(RuntimeError):
            torch.ops.hsma.trtri(bad, upper=False)
    for dt in (torch.int32, torch.int64, torch.bool, torch.uint8):
        with pytest.raises(hsma_trsm.UnsupportedDtypeError):
            hsma_trsm.inverse_triangular(A.to(dt), upper=False)
        with pytest.raises(TypeError):
            torch.ops.hsma.trtri(A.to(dt), upper=False)
    assert issubclass(hsma_trsm.UnsupportedDtypeError, TypeError)
    for bad in (1, 0, None, "True", np.True_, torch.tensor(True)):
        with pytest.raises(TypeError, match="upper"):
            hsma_trsm.inverse_triangular(A, upper=bad)
        with pytest.raises(TypeError, match="unitriangular"):
            hsma_trsm.inverse_triangular(A, upper=True, unitriangular=bad)
    with pytest.raises(TypeError):
        hsma_trsm.inverse_triangular(A)  # upper is required
    with pytest.raises(TypeError):
        hsma_trsm.inverse_triangular(A, False)  # and keyword-only
    with pytest.raises(TypeError, match="'A'"):
        hsma_trsm.inverse_triangular(A.tolist(), upper=False)


# ---------------------------------------------------------------------------------------------
# Autograd: gradcheck / gradgradcheck (finite differences are the reference). The unused part
# of A holds finite junk, so the checks also see that it gets no gradient.

GRAD_DTYPES = [torch.float64, torch.complex128]
GRAD_CASES = [
    pytest.param("cpu", 1, (), id="cpu-k1"),
    pytest.param("cpu", 3, (), id="cpu-k3"),
    pytest.param("cpu", 5, (2,), id="cpu-k5-batch2"),
    pytest.param(*CUDA_DEVICES[0].values, 3, (2,), marks=CUDA_DEVICES[0].marks, id="cuda-k3-batch2"),
    pytest.param(*CUDA_DEVICES[0].values, 66, (), marks=CUDA_DEVICES[0].marks, id="cuda-k66"),
]


@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("unit", BOOL, ids=["nonunit", "unit"])
@pytest.mark.parametrize("device,k,batch", GRAD_CASES)
def test_gradcheck(device, dtype, upper, unit, k, batch, gen):
    A = make_triangular(k, batch=batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen, fill=None)
    A.requires_grad_()

    def f(A):
        return hsma_trsm.inverse_triangular(A, upper=upper, unitriangular=unit)

    assert gradcheck(f, (A,), fast_mode=k > 5)  # k = 66: the full Jacobian would be 4356^2 (x2, complex)
    if k <= 5:
        assert gradgradcheck(f, (A,))
    (g,) = torch.autograd.grad(f(A), A, torch.ones_like(A))
    mask = triangle_mask(k, upper=upper, unit=unit, device=device)
    assert (g.masked_fill(mask, 0) == 0).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,out_dtype", [(torch.bfloat16, torch.float32), (torch.float32, torch.float64),
                                             (torch.float16, None)], ids=["bf16-to-f32", "f32-to-f64", "f16"])
def test_grad_across_dtypes(device, dtype, out_dtype, gen):
    """The gradient has A's dtype; against the float64 gradient of torch.linalg.inv of the triangle."""
    k = 10
    A = make_triangular(k, batch=(2,), dtype=dtype, device=device, gen=gen, fill=None).requires_grad_()
    X = hsma_trsm.inverse_triangular(A, upper=False, out_dtype=out_dtype)
    gX = torch.randn(X.shape, dtype=torch.float64, generator=gen)
    (g,) = torch.autograd.grad(X, A, gX.to(X.dtype).to(device))
    assert g.dtype == dtype
    A64 = A.detach().cpu().double().requires_grad_()
    (ref,) = torch.autograd.grad(torch.linalg.inv(A64.tril()), A64, gX.to(X.dtype).double())
    err = np.linalg.norm(to_numpy_wide(g) - ref.numpy()) / np.linalg.norm(ref.numpy())
    assert err <= 8 * eps_of(dtype), f"gradient relative error {err:.3e}"


# ---------------------------------------------------------------------------------------------
# opcheck and torch.compile.

OPCHECK_CASES = [
    pytest.param(torch.float64, 5, (), "plain", False, False, None, True, id="float64-k5-grad"),
    pytest.param(torch.complex128, 4, (2,), "plain", True, True, None, True, id="complex128-k4-upper-unit-grad"),
    pytest.param(torch.float32, 70, (), "mT", True, False, None, False, id="float32-k70-mT"),
    pytest.param(torch.float32, 33, (2,), "plain", False, True, torch.bfloat16, False, id="float32-k33-to-bf16"),
    pytest.param(torch.bfloat16, 16, (3,), "plain", False, False, torch.float32, False, id="bf16-k16-to-f32"),
    pytest.param(torch.float16, 8, (), "step", True, True, None, False, id="float16-k8-step"),
    pytest.param(torch.complex64, 65, (), "plain", False, False, None, False, id="complex64-k65"),
    pytest.param(torch.float32, 3, (0,), "plain", False, False, None, False, id="float32-batch0"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,k,batch,layout,upper,unit,out_dtype,requires_grad", OPCHECK_CASES)
def test_opcheck(device, dtype, k, batch, layout, upper, unit, out_dtype, requires_grad, gen):
    fill = 0.0 if requires_grad else float("nan")
    A = make_triangular(k, batch=batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen, fill=fill)
    if layout != "plain":
        A = _view(A, layout)
    A.requires_grad_(requires_grad)
    kwargs = dict(upper=upper, unitriangular=unit, out_dtype=out_dtype)
    result = torch.library.opcheck(torch.ops.hsma.trtri.default, (A,), kwargs)
    assert all(v == "SUCCESS" for v in result.values()), result
    check_inverse(torch.ops.hsma.trtri(A, **kwargs).detach(), A.detach(), upper=upper, unit=unit,
                  dtype=out_dtype or dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_fla_view(device, gen):
    _, view = fla_input(1, 40, 2, 16, torch.float32, device, gen)
    result = torch.library.opcheck(torch.ops.hsma.trtri.default, (view,), dict(upper=False, unitriangular=True))
    assert all(v == "SUCCESS" for v in result.values()), result


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compile_fullgraph(device, dynamic, fresh_dynamo, gen):
    def f(A, B):
        X = hsma_trsm.inverse_triangular(A, upper=False)
        Y = hsma_trsm.inverse_triangular(A.mT, upper=True, unitriangular=True)
        return (X @ B).sin().sum() + (Y ** 2).sum(), X

    counter = CompileCounterWithBackend("aot_eager")
    cf = torch.compile(f, backend=counter, fullgraph=True, dynamic=dynamic)
    shapes = [(5, 2), (9, 3), (12, 4)] if dynamic else [(5, 2), (5, 2)]
    for k, batch in shapes:
        A = make_triangular(k, batch=(batch,), device=device, gen=gen, fill=0.0).requires_grad_()
        B = torch.randn((batch, k, 3), dtype=torch.float64, generator=gen).to(device)
        loss, X = cf(A, B)
        check_inverse(X.detach(), A.detach(), upper=False, unit=False)
        (g,) = torch.autograd.grad(loss, A)
        A2 = A.detach().clone().requires_grad_()
        loss2, _ = f(A2, B)
        (g2,) = torch.autograd.grad(loss2, A2)
        torch.testing.assert_close(loss.detach(), loss2.detach(), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(g, g2, rtol=1e-10, atol=1e-12)
        # The loss against the float64 reference.
        L = A.detach().cpu().tril()
        U = L.mT.triu(1) + torch.eye(k, dtype=torch.float64)  # A.mT read as unit upper
        ref = (torch.linalg.inv(L) @ B.cpu()).sin().sum() + (torch.linalg.inv(U) ** 2).sum()
        torch.testing.assert_close(loss.detach().cpu(), ref, rtol=1e-10, atol=1e-10)
    assert counter.frame_count == 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("in_dim", [0, 1, 2])
def test_vmap(device, in_dim, gen):
    """The batch rule: one call for the vmapped batch (no per-sample fallback warning), any vmapped dim."""
    A = make_triangular(9, batch=(4, 3), device=device, gen=gen).movedim(0, in_dim)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        X = torch.vmap(lambda a: hsma_trsm.inverse_triangular(a, upper=False, out_dtype=torch.float32),
                       in_dims=in_dim)(A)
    A0 = A.movedim(in_dim, 0)
    assert X.shape == A0.shape and X.dtype == torch.float32
    Xref = reference_inverse(A0, upper=False, unit=False)
    assert per_matrix_errors(X, Xref).max() <= inverse_tolerance(torch.float64, torch.float32, 9)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_out_dtype(device, fresh_dynamo, gen):
    def f(A):
        return hsma_trsm.inverse_triangular(A, upper=True, out_dtype=torch.bfloat16) * 2

    cf = torch.compile(f, backend="aot_eager", fullgraph=True)
    A = make_triangular(20, batch=(2,), dtype=torch.float32, upper=True, device=device, gen=gen)
    X = cf(A)
    check_inverse(X / 2, A, upper=True, unit=False, dtype=torch.bfloat16)
    assert_same_bits(X, f(A))


# ---------------------------------------------------------------------------------------------
# CUDA graphs: the inverse captured and replayed with new inputs (kernel and solve routes).


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("k,batch,dtype,out_dtype", [
    pytest.param(16, (64,), torch.bfloat16, None, id="kernel-k16-bf16"),
    pytest.param(64, (8,), torch.float32, torch.bfloat16, id="kernel-k64-f32-to-bf16"),
    pytest.param(40, (3,), torch.float64, None, id="kernel-k40-f64"),
    pytest.param(100, (2,), torch.float32, None, id="solve-k100-f32"),
    pytest.param(20, (2,), torch.complex64, None, id="solve-k20-c64"),
])
def test_cuda_graph_capture(device, k, batch, dtype, out_dtype):
    def inputs(seed):
        return make_triangular(k, batch=batch, dtype=dtype, device=device, gen=make_generator(seed))

    static = inputs(1)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            hsma_trsm.inverse_triangular(static, upper=False, out_dtype=out_dtype)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = hsma_trsm.inverse_triangular(static, upper=False, out_dtype=out_dtype)
    for seed in (2, 3):
        fresh = inputs(seed)
        static.copy_(fresh)
        g.replay()
        torch.cuda.synchronize()
        check_inverse(static_out, fresh, upper=False, unit=False, dtype=out_dtype or dtype)
        eager = hsma_trsm.inverse_triangular(fresh, upper=False, out_dtype=out_dtype)
        if k <= 64:  # the inverse kernel, captured or not
            assert_same_bits(static_out, eager)
        else:  # the solve against an identity: under capture its plan takes the fastest path GPU-only (gpu_path)
            torch.testing.assert_close(static_out, eager, rtol=1e-4, atol=1e-5)
