"""The in-place form torch.ops.hsma.trsm_ / hsma_trsm.trsm_, and every argument error."""
import pytest
import torch

import hsma_trsm
from conftest import (
    CUDA_DEVICES,
    DEVICES,
    DTYPES,
    HAS_CUDA,
    TRANS,
    assert_unchanged,
    b_shape,
    check_solution,
    default_alpha,
    dtype_id,
    forward_tolerance,
    make_rhs,
    make_triangular,
)

BOOL = [False, True]

# ---------------------------------------------------------------------------------------------
# trsm_: correctness.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("k,unit", [(1, False), (5, True), (64, False), (65, True), (200, False)])
@pytest.mark.parametrize("fn", ["op", "api"])
def test_inplace(device, dtype, left, upper, trans, k, unit, fn, gen):
    alpha = default_alpha(dtype) if k % 2 else 1
    A = make_triangular(k, batch=(2,), dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, 6, left=left, batch=(2,)), dtype=dtype, device=device, gen=gen)
    A0, B0 = A.clone(), B.clone()
    ptr, version = B.data_ptr(), B._version
    f = torch.ops.hsma.trsm_ if fn == "op" else hsma_trsm.trsm_
    r = f(A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=alpha)
    _check_inplace_return(r, B, fn)
    assert B.data_ptr() == ptr
    assert B._version > version, "the in-place solve must bump B's version counter"
    assert_unchanged(A, A0, "A")
    check_solution(B, A, B0, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=alpha)
    # The functional form gives the same values.
    X = torch.ops.hsma.trsm(A, B0, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=alpha)
    tol = forward_tolerance(dtype, k)
    torch.testing.assert_close(B, X, rtol=tol, atol=tol * X.abs().max().item())


def _check_inplace_return(r, B, fn):
    """hsma_trsm.trsm_ returns B itself; the op returns nothing (schema '-> ()') or B."""
    if fn == "api":
        assert r is B
    else:
        assert r is None or r is B


INPLACE_LAYOUTS = ["B.mT", "B-step", "B.conj", "B.neg", "A-broadcast", "A-expand0", "A.conj"]


INPLACE_PARAMS = [
    pytest.param(dtype, layout, id=f"{dtype_id(dtype)}-{layout}")
    for dtype in (torch.float32, torch.complex128)
    for layout in INPLACE_LAYOUTS
    if dtype.is_complex or "conj" not in layout
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("k", [12, 100])
@pytest.mark.parametrize("dtype,layout", INPLACE_PARAMS)
def test_inplace_layouts(device, dtype, left, k, layout, gen):
    """trsm_ into non-contiguous / conj / neg B, with broadcast or strided A."""
    upper, trans = (k == 12), ("C" if dtype.is_complex else "T")
    a_batch = () if layout == "A-broadcast" else (3,)
    A = make_triangular(k, batch=a_batch, dtype=dtype, upper=upper, device=device, gen=gen)
    B = make_rhs(b_shape(k, 5, left=left, batch=(3,)), dtype=dtype, device=device, gen=gen)
    base = None
    if layout == "B.mT":
        B = B.mT.contiguous().mT
    elif layout == "B-step":
        base = torch.full((6, *(2 * s for s in B.shape[1:])), float("nan"), dtype=dtype, device=device)
        base[::2, ::2, ::2] = B
        B = base[::2, ::2, ::2]
    elif layout == "B.conj":
        B = B.conj()
    elif layout == "B.neg":
        B = torch._neg_view(B)
    elif layout == "A-expand0":
        A = A[0].expand(3, k, k)
    elif layout == "A.conj":
        A = A.conj()
    A0, B0 = A.clone(), B.clone()
    ptr = B.data_ptr()
    r = torch.ops.hsma.trsm_(A, B, left=left, upper=upper, trans=trans)
    _check_inplace_return(r, B, "op")
    assert B.data_ptr() == ptr
    assert_unchanged(A, A0, "A")
    Bv = B.resolve_conj().resolve_neg().contiguous()  # check_solution wants a contiguous result
    check_solution(Bv, A, B0, left=left, upper=upper, trans=trans)
    if base is not None:  # nothing outside the view was written
        mask = torch.ones_like(base, dtype=torch.bool)
        mask[::2, ::2, ::2] = False
        assert torch.isnan(base[mask]).all()


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_broadcast_A_4d(device, gen):
    """A (2, 1, k, k) against B (2, 3, k, n): B already has the broadcast shape."""
    for k in (6, 90):
        A = make_triangular(k, batch=(2, 1), dtype=torch.float64, device=device, gen=gen)
        B = make_rhs((2, 3, k, 4), dtype=torch.float64, device=device, gen=gen)
        B0 = B.clone()
        hsma_trsm.trsm_(A, B)
        check_solution(B, A, B0)


# ---------------------------------------------------------------------------------------------
# trsm_: autograd refusal and shape errors.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("which", ["A", "B", "both"])
def test_inplace_refuses_autograd(device, which, gen):
    A = make_triangular(4, dtype=torch.float64, device=device, gen=gen)
    B0 = make_rhs((4, 3), dtype=torch.float64, device=device, gen=gen)
    if which in ("A", "both"):
        A.requires_grad_()
    B = B0.clone()
    if which in ("B", "both"):
        # a non-leaf requiring grad (a leaf requiring grad may not be written in place at all)
        B = (B0.clone().requires_grad_() * 1)
    before = B.detach().clone()
    with pytest.raises(RuntimeError, match=r"hsma::trsm_.*autograd"):
        torch.ops.hsma.trsm_(A, B)
    with pytest.raises(RuntimeError, match=r"^hsma_trsm\.trsm_\(\): .*autograd"):
        hsma_trsm.trsm_(A, B)
    assert_unchanged(B.detach(), before, "B")
    # With grad mode off it is allowed and solves.
    with torch.no_grad():
        r = hsma_trsm.trsm_(A, B)
    assert r is B
    check_solution(B.detach(), A.detach(), before)


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_inference_mode(device, gen):
    A = make_triangular(70, dtype=torch.complex64, device=device, gen=gen)
    B0 = make_rhs((70, 2), dtype=torch.complex64, device=device, gen=gen)
    with torch.inference_mode():
        B = B0.clone()
        torch.ops.hsma.trsm_(A, B, trans="C")
    check_solution(B, A, B0, trans="C")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "a_shape,b_shape_,left",
    [
        pytest.param((2, 5, 5), (5, 3), True, id="A-batch-B-none"),
        pytest.param((3, 5, 5), (1, 5, 3), True, id="B-batch1-A-batch3"),
        pytest.param((2, 1, 5, 5), (3, 5, 3), True, id="result-2x3"),
        pytest.param((4, 5, 5), (3, 5), False, id="right-A-batch"),
    ],
)
def test_inplace_wrong_shape(device, a_shape, b_shape_, left, gen):
    A = make_triangular(5, batch=a_shape[:-2], device=device, gen=gen)
    B = make_rhs(b_shape_, device=device, gen=gen)
    B0 = B.clone()
    with pytest.raises(RuntimeError, match=r"hsma::trsm_.*B must have the broadcast result's shape"):
        torch.ops.hsma.trsm_(A, B, left=left)
    assert_unchanged(B, B0, "B")


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_overlapping_B(device, gen):
    A = make_triangular(5, device=device, gen=gen)
    B = make_rhs((5, 1), device=device, gen=gen).expand(5, 3)
    with pytest.raises(RuntimeError, match=r"hsma::trsm_.*(overlap|share memory)"):
        torch.ops.hsma.trsm_(A, B)
    Bb = make_rhs((5, 3), device=device, gen=gen).expand(2, 5, 3)
    with pytest.raises(RuntimeError, match=r"hsma::trsm_.*(overlap|share memory)"):
        torch.ops.hsma.trsm_(A.expand(2, 5, 5), Bb)


# ---------------------------------------------------------------------------------------------
# Argument errors, through every entry point.


def _entry_points():
    def op(A, B, **kw):
        return torch.ops.hsma.trsm(A, B, **kw)

    def op_(A, B, **kw):
        return torch.ops.hsma.trsm_(A, B, **kw)

    def api(A, B, **kw):
        return hsma_trsm.trsm(A, B, **kw)

    def api_(A, B, **kw):
        return hsma_trsm.trsm_(A, B, **kw)

    def grad(A, B, **kw):  # through the autograd formula
        return torch.ops.hsma.trsm(A.detach().requires_grad_(A.is_floating_point() or A.is_complex()), B, **kw)

    return [pytest.param(f, id=f.__name__) for f in (op, op_, api, api_, grad)]


ENTRY = _entry_points()


def _who(fn):
    """How the errors of entry point fn start: the public function's name, or the op's."""
    return {"api": r"^hsma_trsm\.trsm\(\)", "api_": r"^hsma_trsm\.trsm_\(\)"}.get(fn.__name__, r"^hsma::trsm_?")


def _AB(device, k=4, n=3, dtype=torch.float64, a_batch=(), b_batch=()):
    A = make_triangular(k, batch=a_batch, dtype=dtype, device=device, fill=0.0)
    B = make_rhs((*b_batch, k, n), dtype=dtype, device=device)
    return A, B


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ENTRY)
@pytest.mark.parametrize("trans", ["X", "", "NN", "n ", "H", "CC", "conj"])
def test_error_trans(device, fn, trans):
    A, B = _AB(device)
    with pytest.raises(ValueError, match=_who(fn) + r": trans must be"):
        fn(A, B, trans=trans)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ENTRY)
@pytest.mark.parametrize("trans", ["n", "t", "c"])
def test_lowercase_trans_accepted(device, fn, trans, gen):
    A = make_triangular(6, dtype=torch.complex128, upper=True, device=device, gen=gen)
    B = make_rhs((6, 2), dtype=torch.complex128, device=device, gen=gen)
    B0 = B.clone()
    X = fn(A, B, upper=True, trans=trans)
    if fn.__name__.endswith("_"):
        X = B
    check_solution(X.detach(), A, B0, upper=True, trans=trans.upper())


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [p for p in ENTRY if p.id != "grad"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.complex32], ids=dtype_id)
def test_error_unsupported_dtype(device, fn, dtype):
    if dtype == torch.complex32 and device == "cpu":
        A = torch.eye(4, dtype=torch.complex64).to(dtype)
        B = torch.ones(4, 3, dtype=torch.complex64).to(dtype)
    else:
        A = torch.eye(4, device=device).to(dtype)
        B = torch.ones(4, 3, device=device).to(dtype)
    if fn.__name__.startswith("api"):  # the public functions: their own UnsupportedDtypeError, a TypeError
        with pytest.raises(hsma_trsm.UnsupportedDtypeError, match=r"^hsma_trsm\.trsm_?\(\): no solver for dtype"):
            fn(A, B)
        return
    with pytest.raises(TypeError,
                       match=_who(fn) + r": A must be float32, float64, complex64, complex128, bfloat16 or float16"):
        fn(A, B)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ENTRY)
@pytest.mark.parametrize(
    "da,db",
    [(torch.float32, torch.float64), (torch.float64, torch.complex128), (torch.complex64, torch.complex128),
     (torch.complex128, torch.float64), (torch.float64, torch.float32), (torch.float64, torch.complex64)],
    ids=lambda d: dtype_id(d),
)
def test_error_dtype_mismatch(device, fn, da, db):
    A = make_triangular(4, dtype=da, device=device, fill=0.0)
    B = make_rhs((4, 3), dtype=db, device=device)
    # The public trsm promotes, trsm_ converts A to B's dtype where that is the promoted one
    # (tests/test_argument_types.py); the ops themselves want one dtype.
    if fn.__name__ == "api" or (fn.__name__ == "api_" and torch.promote_types(da, db) == db):
        assert fn(A, B).dtype == torch.promote_types(da, db)
        return
    with pytest.raises(TypeError, match=_who(fn) + r": A and B must have the same dtype"):
        fn(A, B)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ENTRY)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
@pytest.mark.parametrize("alpha", [1j, 2 - 0.5j, complex(1, 0)])
def test_error_complex_alpha_real_dtype(device, fn, dtype, alpha):
    A, B = _AB(device, dtype=dtype)
    with pytest.raises(TypeError, match=_who(fn) + r": alpha is complex"):
        fn(A, B, alpha=alpha)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ENTRY)
@pytest.mark.parametrize("a_shape", [(4, 5), (2, 3, 4), (5, 4)])
def test_error_non_square(device, fn, a_shape):
    A = torch.ones(a_shape, dtype=torch.float64, device=device)
    B = torch.ones(4, 3, dtype=torch.float64, device=device)
    with pytest.raises(RuntimeError, match=_who(fn) + r": A must be batches of square matrices"):
        fn(A, B)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ENTRY)
@pytest.mark.parametrize("left,b_shape_", [(True, (5, 4)), (True, (3, 4)), (False, (4, 3)), (False, (4, 5)),
                                           (True, (2, 0, 4)), (False, (2, 4, 0))])
def test_error_order_mismatch(device, fn, left, b_shape_):
    A = make_triangular(4, device=device, fill=0.0)
    B = torch.ones(b_shape_, dtype=torch.float64, device=device)
    side = "rows" if left else "columns"
    with pytest.raises(RuntimeError, match=_who(fn) + rf": A is 4x4 but B is .*B's number of {side}"):
        fn(A, B, left=left)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ENTRY)
@pytest.mark.parametrize("which", ["A", "B"])
@pytest.mark.parametrize("shape", [(4,), ()])
def test_error_too_few_dims(device, fn, which, shape):
    A = torch.eye(4, dtype=torch.float64, device=device)
    B = torch.ones(4, 3, dtype=torch.float64, device=device)
    if which == "A":
        A = torch.ones(shape, dtype=torch.float64, device=device)
    else:
        B = torch.ones(shape, dtype=torch.float64, device=device)
    with pytest.raises(RuntimeError, match=_who(fn) + rf": {which} must have at least 2 dimensions"):
        fn(A, B)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ENTRY)
@pytest.mark.parametrize("a_batch,b_batch", [((2,), (3,)), ((2, 3), (4, 3)), ((3, 1), (2, 2))])
def test_error_batch_not_broadcastable(device, fn, a_batch, b_batch):
    A, B = _AB(device, a_batch=a_batch, b_batch=b_batch)
    with pytest.raises(RuntimeError, match=_who(fn) + r": the batch dimensions of A .* and B .* do not broadcast"):
        fn(A, B)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("fn", ENTRY)
@pytest.mark.parametrize("a_dev,b_dev", [("cuda", "cpu"), ("cpu", "cuda")])
def test_error_device_mismatch(device, fn, a_dev, b_dev):
    A = make_triangular(4, device=a_dev, fill=0.0)
    B = make_rhs((4, 3), device=b_dev)
    with pytest.raises(RuntimeError, match=_who(fn) + r": A and B must be on the same device"):
        fn(A, B)


@pytest.mark.parametrize("device", DEVICES)
def test_error_solve_triangular(device, gen):
    """The drop-in: its errors, and that upper is required as in torch."""
    A = make_triangular(4, device=device, gen=gen)
    B = make_rhs((4, 3), device=device, gen=gen)
    with pytest.raises(TypeError):
        hsma_trsm.solve_triangular(A, B)  # upper is keyword-only and required
    with pytest.raises(TypeError):
        hsma_trsm.solve_triangular(A, B, False)  # noqa  (upper is keyword-only)
    with pytest.raises(RuntimeError, match=r"out has dtype"):
        hsma_trsm.solve_triangular(A, B, upper=False, out=torch.empty(4, 3, dtype=torch.float32, device=device))
    with pytest.raises(RuntimeError, match=r"^hsma_trsm\.solve_triangular\(\): A is 4x4 but B is"):
        hsma_trsm.solve_triangular(A, B, upper=False, left=False)
    # Mixed dtypes: accepted as torch accepts them, both promoted (tests/test_dropin_parity.py).
    X = hsma_trsm.solve_triangular(A, B.float(), upper=False)
    assert X.dtype == torch.float64
    with pytest.raises(TypeError, match=r"^hsma::trsm: A and B must have the same dtype"):
        torch.ops.hsma.trsm(A, B.float(), upper=False)  # the op itself stays strict
    with pytest.raises(NotImplementedError, match=r"no solver for dtype torch.int64"):
        hsma_trsm.solve_triangular(A.long(), B.long(), upper=False)
    if HAS_CUDA:
        other = "cpu" if device != "cpu" else "cuda"
        with pytest.raises(RuntimeError, match=r"out is on"):
            hsma_trsm.solve_triangular(A, B, upper=False, out=torch.empty(4, 3, dtype=A.dtype, device=other))


@pytest.mark.parametrize("device", DEVICES)
def test_errors_leave_inputs_unchanged(device, gen):
    A = make_triangular(5, device=device, gen=gen)
    B = make_rhs((5, 3), device=device, gen=gen)
    A0, B0 = A.clone(), B.clone()
    for kw in (dict(trans="Q"), dict(alpha=1j), dict(left=False)):
        with pytest.raises((ValueError, TypeError, RuntimeError)):
            torch.ops.hsma.trsm_(A, B, **kw)
    assert_unchanged(A, A0, "A")
    assert_unchanged(B, B0, "B")


# ---------------------------------------------------------------------------------------------
# Devices with meta, the public functions' names in errors, the solvers' dtypes.


@pytest.mark.parametrize("a_dev,b_dev", [("meta", "cpu"), ("cpu", "meta")])
def test_meta_beside_a_real_device_raises(a_dev, b_dev):
    """A meta operand beside a CPU one raises as two real devices do (the meta kernel ran and returned an
    uninitialised CPU tensor; trsm_ did nothing); meta operands alone give meta results."""
    A, B = torch.eye(3, device=a_dev), torch.ones(3, 2, device=b_dev)
    B0 = B.clone()
    for call, who in [(lambda: hsma_trsm.solve_triangular(A, B, upper=False), r"hsma_trsm\.solve_triangular\(\)"),
                      (lambda: hsma_trsm.trsm(A, B), r"hsma_trsm\.trsm\(\)"),
                      (lambda: hsma_trsm.trsm_(A, B), r"hsma_trsm\.trsm_\(\)"),
                      (lambda: torch.ops.hsma.trsm(A, B), "hsma::trsm"),
                      (lambda: torch.ops.hsma.trsm_(A, B), "hsma::trsm")]:
        with pytest.raises(RuntimeError, match=who + ": A and B must be on the same device"):
            call()
    if b_dev == "cpu":
        assert_unchanged(B, B0, "B")
    X = hsma_trsm.solve_triangular(A.to("meta"), B.to("meta"), upper=False)
    assert X.device.type == "meta" and X.shape == (3, 2)


def test_errors_name_the_public_function():
    A, B = torch.eye(4, dtype=torch.float64), torch.ones(3, 2, dtype=torch.float64)
    L = torch.eye(4, dtype=torch.float64)
    calls = {
        "solve_triangular": lambda: hsma_trsm.solve_triangular(A, B, upper=False),
        "trsm": lambda: hsma_trsm.trsm(A, B),
        "trsm_": lambda: hsma_trsm.trsm_(A, B),
        "plan": lambda: hsma_trsm.plan(A, B),
        "inverse_triangular": lambda: hsma_trsm.inverse_triangular(torch.ones(3, 4), upper=False),
    }
    for name, call in calls.items():
        with pytest.raises(RuntimeError, match=rf"^hsma_trsm\.{name}\(\): ") as info:
            call()
        assert "hsma::" not in str(info.value), (name, str(info.value))
    # The solvers raise torch's messages (no hsma op named), as their drop-in targets do.
    with pytest.raises(RuntimeError, match=r"Incompatible matrix sizes for cholesky_solve"):
        hsma_trsm.cholesky_solve(B, L)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=dtype_id)
def test_solvers_refuse_half_dtypes_as_torch(device, dtype):
    """cholesky_solve, cholesky_inverse and lu_solve take torch's four dtypes: the half types raise
    NotImplementedError (hsma_trsm.UnsupportedDtypeError) where torch raises NotImplementedError or RuntimeError;
    the ops refuse them too."""
    L = torch.eye(4, device=device, dtype=dtype)
    B = torch.ones(4, 2, device=device, dtype=dtype)
    pivots = torch.arange(1, 5, device=device, dtype=torch.int32)
    for name, call in [("cholesky_solve", lambda: hsma_trsm.cholesky_solve(B, L)),
                       ("cholesky_inverse", lambda: hsma_trsm.cholesky_inverse(L)),
                       ("lu_solve", lambda: hsma_trsm.lu_solve(L, pivots, B))]:
        with pytest.raises(hsma_trsm.UnsupportedDtypeError, match=rf"^hsma_trsm\.{name}\(\): no solver for dtype"):
            call()
    for call in (lambda: torch.ops.hsma.cholesky_solve(B, L), lambda: torch.ops.hsma.cholesky_inverse(L),
                 lambda: torch.ops.hsma.lu_solve(L, pivots, B)):
        with pytest.raises(NotImplementedError, match=r"no solver for dtype"):
            call()
    with pytest.raises((NotImplementedError, RuntimeError)):  # torch's own functions refuse them as well
        torch.cholesky_solve(B, L)
