"""Parity of the drop-in hsma_trsm.solve_triangular with torch.linalg.solve_triangular.

Modelled on the cases torch's own test suite runs for solve_triangular (test/test_linalg.py:
test_linalg_solve_triangular{,_large,_broadcasting}, test_triangular_solve{,_batched,
_batched_many_batches,_batched_broadcasting,_out_errors_and_warnings}; the OpInfo sample grid
and its out=, conj/neg-view, non-contiguous, dtype and autograd checks), written here against the
drop-in and run side by side with torch's function: same results, same errors (ours is an
instance of torch's exception type), same warnings, same out= behaviour. Where torch is wrong
(mixed dtypes that drop information; out overlapping A) the drop-in is checked against the
float64 reference instead.

Last, a seeded random differential test of many configurations (dtype, variant, sizes 0..300,
batch shapes, strides, views, alpha) against the float64/complex128 SciPy reference: a few
hundred on the CPU, thousands on CUDA."""
import itertools
import math
import random
import warnings

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.autograd import gradcheck, gradgradcheck

import hsma_trsm
from conftest import (
    CUDA_DEVICES,
    DEVICES,
    DTYPES,
    HAS_CUDA,
    call_and_check,
    dtype_id,
    forward_tolerance,
    make_generator,
    make_rhs,
    make_triangular,
    reference_trsm,
    relative_error,
    sync,
)

ours = hsma_trsm.solve_triangular
theirs = torch.linalg.solve_triangular
BOOL = [False, True]


def _wide(dtype):
    return torch.complex128 if dtype.is_complex else torch.float64


def _rel(X, Y):
    """Normwise relative difference, in float64 / complex128 on the CPU."""
    X = X.detach().resolve_conj().resolve_neg().to("cpu", _wide(X.dtype))
    Y = Y.detach().resolve_conj().resolve_neg().to("cpu", _wide(Y.dtype))
    if Y.numel() == 0:
        return 0.0
    den = Y.norm().item()
    return (X - Y).norm().item() / (den if den > 0 else 1.0)


def _assert_same_solution(X, X_torch, k):
    """Same shape and dtype; values equal to within a few times the rounding of a correct solve
    (both solvers are backward stable and the matrices well conditioned)."""
    assert X.shape == X_torch.shape, (X.shape, X_torch.shape)
    assert X.dtype == X_torch.dtype
    assert X.device == X_torch.device
    err = _rel(X, X_torch)
    assert err <= 2 * forward_tolerance(X.dtype, k), f"relative difference {err:.2e} from torch (k={k})"


def _triangular(shape, dtype, device, gen, *, upper=True, unit=False):
    """Well-conditioned triangular (*, n, n): randn / sqrt(n) off the diagonal, |diag| in [1, 2]
    (a random sign or phase); zeros in the other triangle, ones on a unit diagonal (torch reads
    only the triangle too, so this is the matrix both solvers see)."""
    n = shape[-1]
    M = torch.randn(shape, dtype=_wide(dtype), generator=gen) / math.sqrt(max(n, 1))
    M = M.triu() if upper else M.tril()
    d = 1 + torch.rand(shape[:-1], dtype=torch.float64, generator=gen)
    if dtype.is_complex:
        d = torch.polar(d, 2 * math.pi * torch.rand(d.shape, dtype=torch.float64, generator=gen))
    else:
        d = d * (torch.randint(0, 2, d.shape, generator=gen, dtype=torch.float64) * 2 - 1)
    M.diagonal(dim1=-2, dim2=-1).copy_(torch.ones_like(d) if unit else d)
    return M.to(device=device, dtype=dtype)


def _randn(shape, dtype, device, gen):
    return torch.randn(shape, dtype=_wide(dtype), generator=gen).to(device=device, dtype=dtype)


def _matmul_check(A, X, B, left, k):
    """The residual A X - B (left) or X A - B (right) is small relative to |A| |X|."""
    if X.numel() == 0:
        return
    R = (A @ X if left else X @ A) - B
    scale = (A.abs().amax() * X.abs().amax() * max(k, 1)).item() or 1.0
    assert R.abs().amax().item() <= 50 * torch.finfo(X.dtype).eps * scale


# ---------------------------------------------------------------------------------------------
# test_linalg_solve_triangular: every combination of side, unit diagonal, expanded / transposed
# / conjugated A and B, for batch sizes 1, 2, 0 and sizes 0, 1, 3, 5; X against torch's, the
# residual, and out=B (the in-place solve) giving X.


def _gen_triangular_inputs(shape, dtype, device, gen):
    b, n, k = shape
    for left, uni, expand_a, tr_a, conj_a, expand_b, tr_b, conj_b in itertools.product(BOOL, repeat=8):
        if (conj_a or conj_b) and not dtype.is_complex:
            continue
        if (expand_a or expand_b) and b == 1:
            continue
        size_a = (b, n, n) if left else (b, k, k)
        size_b = (b, n, k) if not tr_b else (b, k, n)
        if b == 1 or expand_a:
            size_a = size_a[1:]
        if b == 1 or expand_b:
            size_b = size_b[1:]
        A = _triangular(size_a, dtype, device, gen, upper=True, unit=uni)
        B = _randn(size_b, dtype, device, gen)
        if tr_a:
            A = A.transpose(-2, -1)
        if tr_b:
            B = B.transpose(-2, -1)
        if conj_a:
            A = A.conj()
        if conj_b:
            B = B.conj()
        if expand_a:
            A = A.expand(b, *size_a)
        if expand_b:
            B = B.expand(b, n, k)
        yield A, B, left, not tr_a, uni


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_linalg_solve_triangular_grid(device, dtype):
    gen = make_generator(11)
    count = 0
    for b, n, k in itertools.product((1, 2, 0), (5, 0), (3, 1, 0)):
        for A, B, left, upper, uni in _gen_triangular_inputs((b, n, k), dtype, device, gen):
            kw = dict(upper=upper, left=left, unitriangular=uni)
            X = ours(A, B, **kw)
            _assert_same_solution(X, theirs(A, B, **kw), A.shape[-1])
            _matmul_check(A, X, B, left, A.shape[-1])
            out = B
            if not B.is_contiguous() and not B.transpose(-2, -1).is_contiguous():
                out = B.clone()  # B may be expanded
            r = ours(A, B, out=out, **kw)
            assert r is out
            _assert_same_solution(out, X, A.shape[-1])
            count += 1
    assert count == (864 if not dtype.is_complex else 3456)  # every combination ran


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_linalg_solve_triangular_large(device, dtype):
    """torch's 'large' cases (its MAGMA and iterative-cuBLAS paths; ours: the blocked path)."""
    gen = make_generator(12)
    for shape in ((9, 513, 1), (2, 64, 1)):
        for A, B, left, upper, uni in _gen_triangular_inputs(shape, dtype, device, gen):
            kw = dict(upper=upper, left=left, unitriangular=uni)
            X = ours(A, B, **kw)
            _assert_same_solution(X, theirs(A, B, **kw), A.shape[-1])
            out = B if (B.is_contiguous() or B.transpose(-2, -1).is_contiguous()) else B.clone()
            ours(A, B, out=out, **kw)
            _assert_same_solution(out, X, A.shape[-1])


BROADCAST_SIZES = [((2, 1, 3, 4, 4), (2, 1, 3, 4, 6)), ((2, 1, 3, 4, 4), (4, 6)), ((4, 4), (2, 1, 3, 4, 2)),
                   ((1, 3, 1, 4, 4), (2, 1, 3, 4, 5))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_linalg_solve_triangular_broadcasting(device, dtype):
    gen = make_generator(13)
    for size_a, size_b in BROADCAST_SIZES:
        for left, upper, uni in itertools.product(BOOL, repeat=3):
            A = _triangular(size_a, dtype, device, gen, upper=upper, unit=uni)
            B = _randn(size_b, dtype, device, gen)
            if not left:
                B = B.transpose(-2, -1)
            kw = dict(upper=upper, left=left, unitriangular=uni)
            X = ours(A, B, **kw)
            _assert_same_solution(X, theirs(A, B, **kw), 4)
            B_other = A @ X if left else X @ A
            B_b, B_other = torch.broadcast_tensors(B, B_other)
            assert _rel(B_other, B_b) <= 10 * forward_tolerance(dtype, 4)


# ---------------------------------------------------------------------------------------------
# The legacy torch.triangular_solve tests, as solves with the drop-in and the op (transpose ->
# trans='T'): unbatched, batched against the per-matrix results, empty and zero-batch inputs,
# many batches, and broadcasting against SciPy.


def _legacy(b, A, upper, unitriangular, transpose):
    """torch.triangular_solve(b, A, upper, transpose, unitriangular)[0] with the drop-in."""
    T = A.mT if transpose else A
    return ours(T, b, upper=upper != transpose, unitriangular=unitriangular)


def _legacy_inputs(A_dims, b_dims, upper, unitriangular, dtype, device, gen):
    A = _triangular(A_dims, dtype, device, gen, upper=upper, unit=unitriangular)
    return _randn(b_dims, dtype, device, gen), A


@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_triangular_solve_cases(device, dtype):
    gen = make_generator(14)
    for k, n, (upper, uni, transpose) in itertools.product([0, 1, 3], [0, 5], itertools.product(BOOL, repeat=3)):
        b, A = _legacy_inputs((n, n), (n, k), upper, uni, dtype, device, gen)
        x = _legacy(b, A, upper, uni, transpose)
        x_op = torch.ops.hsma.trsm(A, b, upper=upper, unitriangular=uni, trans="T" if transpose else "N")
        x_torch = torch.triangular_solve(b, A, upper=upper, transpose=transpose, unitriangular=uni)[0]
        _assert_same_solution(x, x_torch, n)
        _assert_same_solution(x_op, x_torch, n)
        _matmul_check(A.mT if transpose else A, x, b, True, n)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_triangular_solve_batched(device, dtype):
    gen = make_generator(15)
    for upper, uni, transpose in itertools.product(BOOL, repeat=3):
        for A_dims, b_dims in [((3, 5, 5), (3, 5, 10)), ((3, 0, 0), (3, 0, 10)), ((3, 0, 0), (3, 0, 0))]:
            b, A = _legacy_inputs(A_dims, b_dims, upper, uni, dtype, device, gen)
            x = _legacy(b, A, upper, uni, transpose)
            x_each = torch.stack([_legacy(b[i], A[i], upper, uni, transpose) for i in range(b_dims[0])])
            assert x.shape == x_each.shape == b.shape
            _assert_same_solution(x, x_each, A_dims[-1])
            _matmul_check(A.mT if transpose else A, x, b, True, A_dims[-1])
        b, A = _legacy_inputs((0, 5, 5), (0, 5, 10), upper, uni, dtype, device, gen)  # zero batch
        assert _legacy(b, A, upper, uni, transpose).shape == b.shape


@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_triangular_solve_many_batches(device, dtype):
    """torch: (256, 256) batches of 5x5 A, and one 3x3 A against (512, 512) batches of b (a
    slow test there); on the CPU a quarter of each side."""
    gen = make_generator(16)
    na, nb = (256, 512) if device == "cuda" else (64, 128)
    for upper, transpose, uni in [(True, False, False), (False, True, True), (True, True, False)]:
        b, A = _legacy_inputs((na, na, 5, 5), (5, 1), upper, uni, dtype, device, gen)
        x = _legacy(b, A, upper, uni, transpose)
        assert x.shape == (na, na, 5, 1)
        _assert_same_solution(x, torch.triangular_solve(b, A, upper=upper, transpose=transpose,
                                                        unitriangular=uni)[0], 5)
        b, A = _legacy_inputs((3, 3), (nb, nb, 3, 1), upper, uni, dtype, device, gen)
        x = _legacy(b, A, upper, uni, transpose)
        _matmul_check(A.mT if transpose else A, x, b, True, 3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_triangular_solve_batched_broadcasting(device, dtype):
    gen = make_generator(17)
    for upper, transpose, uni in itertools.product(BOOL, repeat=3):
        for A_dims, b_dims in [((2, 1, 3, 4, 4), (2, 1, 3, 4, 6)), ((2, 1, 3, 4, 4), (4, 6)),
                               ((4, 4), (2, 1, 3, 4, 2)), ((1, 3, 1, 4, 4), (2, 1, 3, 4, 5))]:
            b, A = _legacy_inputs(A_dims, b_dims, upper, uni, dtype, device, gen)
            x = _legacy(b, A, upper, uni, transpose)
            ref = reference_trsm(A, b, upper=upper, trans="T" if transpose else "N", unitriangular=uni)
            assert tuple(x.shape) == ref.shape
            assert relative_error(x, ref) <= forward_tolerance(dtype, 4)


# ---------------------------------------------------------------------------------------------
# out=: side by side with torch (results, exceptions, warnings, returned object, out's layout).


def _run(fn):
    """(result or exception, [(category, message)]) of fn()."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r = fn()
        except Exception as e:  # noqa: BLE001
            r = e
    msgs = [(x.category, str(x.message).split(" (Triggered internally")[0]) for x in w
            if "An output with one or more elements was resized" in str(x.message)]
    return r, msgs


def _out_scenarios(dtype, device, gen):
    """(name, A, B, out, kwargs, context) triples for a 4x4 system with 3 right-hand sides."""
    A = _triangular((2, 4, 4), dtype, device, gen, upper=False)
    B = _randn((2, 4, 3), dtype, device, gen)
    kw = dict(upper=False)
    e = lambda *s, dt=dtype: torch.empty(s, dtype=dt, device=device)  # noqa: E731
    yield "right-shape", A, B, e(2, 4, 3), kw
    yield "column-major", A, B, e(2, 3, 4).mT, kw
    yield "strided-view", A, B, e(2, 4, 6)[..., ::2], kw
    yield "zero-elements", A, B, e(0), kw
    yield "wrong-shape-1d", A, B, e(5), kw
    yield "wrong-batch", A, B, e(3, 4, 3), kw
    yield "transposed-shape", A, B, e(2, 3, 4), kw
    yield "right-side", A, B.mT.contiguous(), e(1), dict(upper=False, left=False)
    yield "broadcast-A", A[0], B, e(7), kw
    yield "conj-A-column-major", A.mT.contiguous().mT.conj(), B, e(7), kw
    yield "wrong-dtype", A, B, e(2, 4, 3, dt=torch.float32 if dtype != torch.float32 else torch.float64), kw
    yield "int-dtype", A, B, e(2, 4, 3, dt=torch.int32), kw
    yield "expanded-out", A, B, e(1, 4, 3).expand(2, 4, 3), kw
    yield "neg-view", A, B, torch._neg_view(e(2, 4, 3)), kw  # torch writes -X into it
    if dtype.is_complex:
        yield "conj-view", A, B, e(2, 4, 3).conj(), kw
        yield "conj-view-B", A, B.conj(), e(2, 4, 3), kw


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_out_matches_torch(device, dtype):
    gen = make_generator(18)
    for name, A, B, out, kw in _out_scenarios(dtype, device, gen):
        out_t = _same_kind_of_out(out)  # fresh, identical outs for both
        out_o = _same_kind_of_out(out)
        r_t, w_t = _run(lambda: theirs(A, B, out=out_t, **kw))
        r_o, w_o = _run(lambda: ours(A, B, out=out_o, **kw))
        if isinstance(r_t, Exception):
            assert isinstance(r_o, type(r_t)), f"{name}: torch raised {r_t!r}, ours {r_o!r}"
            continue
        assert not isinstance(r_o, Exception), f"{name}: torch succeeded, ours raised {r_o!r}"
        assert r_o is out_o and r_t is out_t, name
        assert w_o == w_t, f"{name}: warnings {w_o} != torch's {w_t}"
        assert out_o.shape == out_t.shape, name
        assert out_o.stride() == out_t.stride(), f"{name}: strides {out_o.stride()} != torch's {out_t.stride()}"
        assert out_o.is_conj() == out_t.is_conj() and out_o.is_neg() == out_t.is_neg(), name
        # Ours is always right; where torch is right too, the two agree. (Torch is not always
        # right: into a negative view, out._is_neg(), it writes -X.)
        ref = reference_trsm(A, B, upper=kw["upper"], left=kw.get("left", True))
        assert relative_error(out_o, ref) <= forward_tolerance(dtype, 4), name
        if relative_error(out_t, ref) <= forward_tolerance(dtype, 4):
            _assert_same_solution(out_o, out_t, 4)


def _same_kind_of_out(out):
    """A fresh tensor of the same shape, strides and conj/neg flags as `out` (sharing nothing)."""
    if out.dim() and any(s == 0 for s in out.stride()):  # expanded: keep the overlap
        base = torch.empty(out.shape[1:], dtype=out.dtype, device=out.device)
        return base.unsqueeze(0).expand(out.shape)
    base = torch.empty_strided(out.shape, out.stride(), dtype=out.dtype, device=out.device) if out.numel() else \
        torch.empty(out.shape, dtype=out.dtype, device=out.device)
    if out.is_conj():
        base = base.conj()
    if out.is_neg():
        base = torch._neg_view(base)
    return base


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("layout", ["contiguous", "column-major", "strided"])
def test_out_aliasing_b_is_an_inplace_solve(device, dtype, layout):
    gen = make_generator(19)
    A = _triangular((3, 5, 5), dtype, device, gen, upper=True)
    B = _randn((3, 5, 2), dtype, device, gen)
    if layout == "column-major":
        B = B.mT.contiguous().mT
    elif layout == "strided":
        B = _randn((3, 5, 4), dtype, device, gen)[..., ::2]
    B_t, B_o = B.clone(), B.clone()  # clone keeps a column-major layout
    assert B_o.stride() == B.stride() or layout == "strided"
    if layout == "strided":
        B_t = torch.empty(3, 5, 4, dtype=dtype, device=device)[..., ::2].copy_(B)
        B_o = torch.empty(3, 5, 4, dtype=dtype, device=device)[..., ::2].copy_(B)
    ptr = B_o.data_ptr()
    theirs(A, B_t, upper=True, out=B_t)
    r = ours(A, B_o, upper=True, out=B_o)
    assert r is B_o and B_o.data_ptr() == ptr
    _assert_same_solution(B_o, B_t, 5)
    _assert_same_solution(B_o, theirs(A, B, upper=True), 5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_out_overlapping_a_is_solved_correctly(device, dtype):
    """out=A (or a slice of A's memory): torch copies B into out first and so solves with a
    clobbered A (a wrong answer, silently); the drop-in solves first, then writes out."""
    gen = make_generator(20)
    A = _triangular((2, 5, 5), dtype, device, gen, upper=False)
    B = _randn((2, 5, 5), dtype, device, gen)
    ref = reference_trsm(A, B, upper=False)
    A1 = A.clone()
    r = ours(A1, B, upper=False, out=A1)
    assert r is A1
    assert relative_error(A1, ref) <= forward_tolerance(dtype, 5)
    big = torch.zeros(2, 5, 8, dtype=dtype, device=device)
    big[..., :5] = A
    Aview, outview = big[..., :5], big[..., 3:8]  # out overlaps A's last two columns
    ours(Aview, B, upper=False, out=outview)
    assert relative_error(outview, ref) <= forward_tolerance(dtype, 5)


@pytest.mark.parametrize("device", DEVICES)
def test_out_autograd_rules_match_torch(device):
    """out= is not differentiable, in torch and in the drop-in: the same errors, and under
    no_grad both work."""
    gen = make_generator(21)
    dtype = torch.float64
    A = _triangular((4, 4), dtype, device, gen)
    B = _randn((4, 2), dtype, device, gen)
    cases = [
        ("A requires grad", lambda f: f(A.clone().requires_grad_(), B, upper=True, out=torch.empty_like(B))),
        ("B requires grad", lambda f: f(A, B.clone().requires_grad_(), upper=True, out=torch.empty_like(B))),
        ("out requires grad", lambda f: f(A, B, upper=True, out=torch.empty_like(B).requires_grad_())),
    ]
    for name, call in cases:
        r_t, _ = _run(lambda: call(theirs))
        r_o, _ = _run(lambda: call(ours))
        assert isinstance(r_t, RuntimeError), name
        assert isinstance(r_o, type(r_t)) and "don't support automatic differentiation" in str(r_o), name
    with torch.no_grad():
        out_t, out_o = torch.empty_like(B), torch.empty_like(B)
        theirs(A.clone().requires_grad_(), B, upper=True, out=out_t)
        ours(A.clone().requires_grad_(), B, upper=True, out=out_o)
        _assert_same_solution(out_o, out_t, 4)
    with fwAD.dual_level():
        for make in (lambda: (fwAD.make_dual(A, torch.ones_like(A)), B, torch.empty_like(B)),
                     lambda: (A, B, fwAD.make_dual(torch.empty_like(B), torch.ones_like(B)))):
            a, b, o = make()
            r_t, _ = _run(lambda: theirs(a, b, upper=True, out=o))
            a, b, o = make()
            r_o, _ = _run(lambda: ours(a, b, upper=True, out=o))
            assert isinstance(r_t, NotImplementedError) and isinstance(r_o, NotImplementedError)


@pytest.mark.parametrize("device", CUDA_DEVICES)
def test_out_wrong_device_matches_torch(device):
    gen = make_generator(22)
    A = _triangular((4, 4), torch.float32, device, gen)
    B = _randn((4, 2), torch.float32, device, gen)
    for out in (torch.empty(4, 2), torch.empty(0)):
        r_t, _ = _run(lambda: theirs(A, B, upper=True, out=out.clone()))
        r_o, _ = _run(lambda: ours(A, B, upper=True, out=out.clone()))
        if isinstance(r_t, Exception):
            assert isinstance(r_o, type(r_t))
        else:  # torch accepted it: the values must agree
            assert not isinstance(r_o, Exception)
            _assert_same_solution(r_o.to(device), r_t.to(device), 4)
    # A and B on different devices.
    r_t, _ = _run(lambda: theirs(A, B.cpu(), upper=True))
    r_o, _ = _run(lambda: ours(A, B.cpu(), upper=True))
    assert isinstance(r_t, Exception) and isinstance(r_o, type(r_t))


# ---------------------------------------------------------------------------------------------
# dtypes and errors.

ALL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
              torch.bfloat16, *DTYPES]


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_support_matches_torch(device):
    """Same dtypes accepted, and bfloat16 / float16, which torch refuses; where torch raises
    otherwise, ours raises an instance of torch's type."""
    for dtype in ALL_DTYPES:
        A = (torch.eye(3, device=device) * 2).to(dtype)
        B = torch.ones(3, 2, device=device).to(dtype)
        r_t, _ = _run(lambda: theirs(A, B, upper=False))
        r_o, _ = _run(lambda: ours(A, B, upper=False))
        if dtype in (torch.bfloat16, torch.float16):
            assert not isinstance(r_o, Exception), f"{dtype}: ours raised {r_o!r}"
            assert r_o.dtype == dtype and torch.equal(r_o.float(), torch.full((3, 2), 0.5, device=device))
        elif isinstance(r_t, Exception):
            assert isinstance(r_o, type(r_t)), f"{dtype}: torch raised {r_t!r}, ours {r_o!r}"
            assert isinstance(r_o, TypeError)  # and still the op's own TypeError
        else:
            assert not isinstance(r_o, Exception), f"{dtype}: ours raised {r_o!r}"
            _assert_same_solution(r_o, r_t, 3)


@pytest.mark.parametrize("device", DEVICES)
def test_mixed_dtypes(device):
    """torch converts B to A's dtype. Where that loses nothing, the drop-in gives torch's dtype
    and values; where it drops B's imaginary part or precision, the drop-in promotes both and is
    right (against the complex128 reference of the original B), while torch's answer is not."""
    gen = make_generator(23)
    for da, db in itertools.permutations(DTYPES, 2):
        A = _triangular((2, 5, 5), da, device, gen, upper=True)
        B = _randn((2, 5, 3), db, device, gen)
        X = ours(A, B, upper=True)
        promoted = torch.promote_types(da, db)
        assert X.dtype == promoted
        ref = reference_trsm(A.to(promoted), B.to(promoted), upper=True)
        assert relative_error(X, ref) <= max(forward_tolerance(da, 5), forward_tolerance(db, 5)), (da, db)
        if promoted == da:  # torch is lossless here: same dtype, same values
            X_t = theirs(A, B, upper=True)
            assert X_t.dtype == X.dtype
            assert _rel(X, X_t) <= 2 * max(forward_tolerance(da, 5), forward_tolerance(db, 5))
    # Gradients flow back in each input's own dtype, as torch's do.
    A = _triangular((5, 5), torch.float64, device, gen).requires_grad_()
    B = _randn((5, 2), torch.float32, device, gen).requires_grad_()
    ours(A, B, upper=True).sum().backward()
    assert A.grad.dtype == torch.float64 and B.grad.dtype == torch.float32


@pytest.mark.parametrize("device", DEVICES)
def test_errors_match_torch(device):
    d = torch.float64
    e = lambda *s: torch.ones(s, dtype=d, device=device)  # noqa: E731
    eye = lambda n: torch.eye(n, dtype=d, device=device)  # noqa: E731
    cases = {
        "A 1-d": (e(3), e(3, 2), {}),
        "B 1-d": (eye(3), e(3), {}),
        "A not square": (e(3, 4), e(3, 2), {}),
        "left: rows differ": (eye(3), e(4, 2), {}),
        "right: columns differ": (eye(3), e(3, 2), dict(left=False)),
        "batch does not broadcast": (eye(3).expand(2, 3, 3), e(4, 3, 2), {}),
        "A 0-d": (torch.tensor(1.0, dtype=d, device=device), e(1, 1), {}),
    }
    for name, (A, B, kw) in cases.items():
        r_t, _ = _run(lambda: theirs(A, B, upper=False, **kw))
        r_o, _ = _run(lambda: ours(A, B, upper=False, **kw))
        assert isinstance(r_t, Exception), name
        assert isinstance(r_o, type(r_t)), f"{name}: torch raised {r_t!r}, ours {r_o!r}"
    for call in (lambda f: f(eye(3), e(3, 2)), lambda f: f(eye(3), e(3, 2), False)):  # upper is keyword-only
        r_t, _ = _run(lambda: call(theirs))
        r_o, _ = _run(lambda: call(ours))
        assert isinstance(r_t, TypeError) and isinstance(r_o, TypeError)


# ---------------------------------------------------------------------------------------------
# The OpInfo sample grid: batch 1, 2, 0; n 3, 0; k 1, 3, 0; side, triangle, unit diagonal:
# values, non-contiguous copies, conj and neg views, and autograd (gradients of A only, B only,
# both; forward-mode tangents; second order) against torch's.


def _opinfo_samples(dtype, device, gen):
    for b, n, k, (left, upper, uni) in itertools.product((1, 2, 0), (3, 0), (1, 3, 0), itertools.product(BOOL, repeat=3)):
        sa = (n, n) if left else (k, k)
        if b != 1:
            sa = (b, *sa)
        A = _triangular(sa, dtype, device, gen, upper=upper, unit=uni)
        B = _randn(((b,) if b != 1 else ()) + (n, k), dtype, device, gen)
        yield A, B, dict(upper=upper, left=left, unitriangular=uni)


def _noncontiguous(t):
    """The same values in memory with gaps between elements (like make_tensor(noncontiguous=True))."""
    if t.numel() == 0:
        return t
    big = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
    nc = big[..., ::2]
    nc.copy_(t)
    return nc


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_opinfo_samples_values_views(device, dtype):
    gen = make_generator(24)
    for A, B, kw in _opinfo_samples(dtype, device, gen):
        k = A.shape[-1]
        X_t = theirs(A, B, **kw)
        _assert_same_solution(ours(A, B, **kw), X_t, k)
        _assert_same_solution(ours(_noncontiguous(A), _noncontiguous(B), **kw), X_t, k)
        _assert_same_solution(ours(torch._neg_view(-A), torch._neg_view(-B), **kw), X_t, k)
        if dtype.is_complex:
            _assert_same_solution(ours(A.conj().resolve_conj().conj(), B.conj().resolve_conj().conj(), **kw), X_t, k)
            _assert_same_solution(ours(A.conj(), B.conj(), **kw), theirs(A.conj(), B.conj(), **kw), k)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=dtype_id)
def test_opinfo_samples_autograd(device, dtype):
    gen = make_generator(25)
    tol = dict(rtol=1e-10, atol=1e-10)
    for A, B, kw in _opinfo_samples(dtype, device, gen):
        for grad_a, grad_b in [(True, False), (False, True), (True, True)]:
            inputs = [A.clone().requires_grad_(grad_a), B.clone().requires_grad_(grad_b)]
            inputs_t = [A.clone().requires_grad_(grad_a), B.clone().requires_grad_(grad_b)]
            X = ours(*inputs, **kw)
            X_t = theirs(*inputs_t, **kw)
            G = _randn(X.shape, dtype, device, gen)
            wrt = [t for t in inputs if t.requires_grad]
            wrt_t = [t for t in inputs_t if t.requires_grad]
            for g, g_t in zip(torch.autograd.grad(X, wrt, G, allow_unused=True),
                              torch.autograd.grad(X_t, wrt_t, G, allow_unused=True)):
                torch.testing.assert_close(g, g_t, **tol)
        # Forward mode, tangents on both.
        dA, dB = _randn(A.shape, dtype, device, gen), _randn(B.shape, dtype, device, gen)
        with fwAD.dual_level():
            dX = fwAD.unpack_dual(ours(fwAD.make_dual(A, dA), fwAD.make_dual(B, dB), **kw)).tangent
            dX_t = fwAD.unpack_dual(theirs(fwAD.make_dual(A, dA), fwAD.make_dual(B, dB), **kw)).tangent
        if dX_t is None:  # torch returns no tangent for empty outputs
            assert dX is None or dX.numel() == 0
        else:
            torch.testing.assert_close(dX, dX_t, **tol)


@pytest.mark.parametrize("device", DEVICES)
def test_opinfo_gradcheck_fwgrad_bwgrad(device):
    """gradcheck / gradgradcheck (with forward-over-reverse) on a few samples of the grid, as
    torch's OpInfo runs them (supports_fwgrad_bwgrad=True)."""
    gen = make_generator(26)
    for i, (A, B, kw) in enumerate(_opinfo_samples(torch.complex128, device, gen)):
        if i % 9 or A.numel() == 0 or B.numel() == 0:
            continue

        def f(A, B):
            return ours(A, B, **kw)

        args = (A.requires_grad_(), B.requires_grad_())
        assert gradcheck(f, args, check_forward_ad=True, check_batched_grad=True)
        assert gradgradcheck(f, args, check_fwd_over_rev=True)


# ---------------------------------------------------------------------------------------------
# Seeded random differential test against the float64/complex128 reference.

LAYOUTS_A = ["contiguous", "transposed", "step", "expanded", "conj", "neg"]
LAYOUTS_B = ["contiguous", "transposed", "step", "expanded", "conj", "neg"]


def _random_config(rng):
    dtype = rng.choice(DTYPES)
    r = rng.random()
    k = rng.randint(0, 64) if r < 0.55 else (rng.randint(65, 256) if r < 0.85 else rng.randint(257, 300))
    other = rng.choice([0, 1, 2, 3, 5, 8, 17, 33, 64, 100])
    left, upper, unit = rng.random() < 0.5, rng.random() < 0.5, rng.random() < 0.3
    trans = rng.choice("NTC")
    # Batch shapes that broadcast: up to 3 dims, sizes 0..3, each side possibly 1 or absent.
    nd = rng.choice([0, 0, 1, 1, 2, 3])
    full = [rng.choice([1, 2, 3]) if rng.random() < 0.95 else 0 for _ in range(nd)]
    a_batch = [s if rng.random() < 0.7 else 1 for s in full][rng.randint(0, nd) if nd else 0:]
    b_batch = [s if rng.random() < 0.7 else 1 for s in full]
    la, lb = rng.choice(LAYOUTS_A), rng.choice(LAYOUTS_B)
    alpha = rng.choice([1, 1, -0.5, 2.5, complex(0.5, -1.25)])
    if not dtype.is_complex and isinstance(alpha, complex):
        alpha = 0.75
    return dict(dtype=dtype, k=k, other=other, left=left, upper=upper, unit=unit, trans=trans,
                a_batch=tuple(a_batch), b_batch=tuple(b_batch), la=la, lb=lb, alpha=alpha)


def _layout(t, layout, gen_seed):
    if layout == "transposed":
        return t.mT.contiguous().mT
    if layout == "step":
        big = torch.empty(*t.shape[:-1], 2 * t.shape[-1] if t.shape[-1] else 0, dtype=t.dtype, device=t.device)
        v = big[..., ::2] if t.shape[-1] else big
        return v.copy_(t)
    if layout == "expanded" and t.dim() > 2:
        return t[:1].expand(t.shape) if t.shape[0] > 0 else t
    if layout == "conj" and t.is_complex():
        return t.conj().resolve_conj().conj()  # a conj view holding the same values
    if layout == "neg":
        return torch._neg_view(-t)
    return t


def _differential(device, n_configs, seed, budget):
    rng = random.Random(seed)
    done = 0
    while done < n_configs:
        c = _random_config(rng)
        k = c["k"]
        batch = torch.broadcast_shapes(c["a_batch"], c["b_batch"])
        if math.prod(batch) * (k * k + k * c["other"]) > budget:
            continue  # keep the reference's time in bounds
        gen = make_generator(rng.randrange(2**31))
        A = make_triangular(k, batch=c["a_batch"], dtype=c["dtype"], upper=c["upper"], unit=c["unit"],
                            device=device, gen=gen)
        shape_b = (*c["b_batch"], k, c["other"]) if c["left"] else (*c["b_batch"], c["other"], k)
        B = make_rhs(shape_b, dtype=c["dtype"], device=device, gen=gen)
        A, B = _layout(A, c["la"], 0), _layout(B, c["lb"], 1)
        kw = dict(left=c["left"], upper=c["upper"], trans=c["trans"], unitriangular=c["unit"], alpha=c["alpha"])
        try:
            call_and_check(A, B, **kw)
            if c["trans"] == "N" and c["alpha"] == 1:  # the drop-in's own call (torch's layout where handed off)
                call_and_check(A, B, left=c["left"], upper=c["upper"], unitriangular=c["unit"], contiguous=False,
                               fn=lambda A, B, left, upper, trans, unitriangular, alpha:
                               ours(A, B, upper=upper, left=left, unitriangular=unitriangular))
        except AssertionError as e:
            raise AssertionError(f"config {done} (seed {seed}): {c}: {e}") from None
        done += 1
    sync(device)


def test_differential_cpu():
    _differential("cpu", n_configs=300, seed=20261130, budget=60_000)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_differential_cuda(device, seed):
    """4 x 600 configurations on the GPU (all paths: small kernels, direct leaves, inverted
    blocks), each against the float64 CPU reference."""
    _differential(device, n_configs=600, seed=seed, budget=400_000)
