"""Argument types and the dtype policy of the public functions (hsma_trsm.solve_triangular,
hsma_trsm.trsm, hsma_trsm.trsm_), side by side with torch.linalg.solve_triangular: a flag that is
not exactly a bool, a non-tensor A, B or out, a trans that is not a str or an alpha that is not a
number raise TypeError naming the public function and the argument (never torch.ops' schema dump);
mixed dtypes are promoted (trsm, solve_triangular) or converted to B's dtype (trsm_)."""
import itertools

import numpy as np
import pytest
import torch

import hsma_trsm
from conftest import (DEVICES, DTYPES, FunctionLog, LoggedTensor, assert_unchanged, check_solution, dtype_id,
                      make_generator, make_rhs, make_triangular)

FLAGS = ["left", "upper", "unitriangular"]
# Values that are not a bool; torch.linalg.solve_triangular refuses each with a TypeError.
BAD_BOOLS = [None, 0, 1, 2.5, "yes", torch.tensor(True), [True], np.True_, np.int64(1), torch.tensor([False])]
NOT_TENSORS = [[[1.0, 0.0], [0.0, 1.0]], np.eye(4), 3.0, None, (1, 2)]
# Traces of torch.ops' schema errors, which must not reach a user of the public functions.
PYBIND_DUMP = ("Expected a value of type", "Declaration:", "C++ type", "PYBIND11_DETAILED_ERROR_MESSAGES")


def _solve(A, B, **kw):
    kw.setdefault("upper", False)
    return hsma_trsm.solve_triangular(A, B, **kw)


def _trsm(A, B, **kw):
    return hsma_trsm.trsm(A, B, **kw)


def _trsm_(A, B, **kw):
    return hsma_trsm.trsm_(A, B, **kw)


_solve.public = "hsma_trsm.solve_triangular"
_trsm.public = "hsma_trsm.trsm"
_trsm_.public = "hsma_trsm.trsm_"
PUBLIC = [pytest.param(f, id=f.public) for f in (_solve, _trsm, _trsm_)]


def _torch_solve(A, B, **kw):
    kw.setdefault("upper", False)
    return torch.linalg.solve_triangular(A, B, **kw)


def _AB(device="cpu", k=4, n=3, dtype=torch.float64, seed=0, upper=False):
    gen = make_generator(seed)
    A = make_triangular(k, dtype=dtype, upper=upper, device=device, gen=gen, fill=0.0)
    B = make_rhs((k, n), dtype=dtype, device=device, gen=gen)
    return A, B


def _typename(v):
    return "Tensor" if isinstance(v, torch.Tensor) else type(v).__name__


def _no_dump(err):
    assert not any(s in str(err) for s in PYBIND_DUMP), f"torch.ops' schema dump reached the user: {err}"


# ---------------------------------------------------------------------------------------------
# Flags: exactly bool, as torch.


@pytest.mark.parametrize("fn", PUBLIC)
@pytest.mark.parametrize("arg", FLAGS)
@pytest.mark.parametrize("value", BAD_BOOLS, ids=lambda v: f"{_typename(v)}-{v!r}"[:40])
def test_flag_must_be_bool(fn, arg, value):
    A, B = _AB()
    B0 = B.clone()
    with pytest.raises(TypeError, match=rf"argument '{arg}' must be bool, not") as torch_err:
        _torch_solve(A, B, **{arg: value})
    with pytest.raises(TypeError) as ours:
        fn(A, B, **{arg: value})
    msg = str(ours.value)
    assert msg.startswith(f"{fn.public}(): argument '{arg}' must be bool, not "), msg
    # torch names the type as we do (int, NoneType, Tensor, numpy.bool, ...).
    assert msg.split(", not ")[-1] == str(torch_err.value).split(", not ")[-1]
    _no_dump(ours.value)
    assert_unchanged(B, B0, "B")


@pytest.mark.parametrize("fn", PUBLIC)
@pytest.mark.parametrize("arg", FLAGS)
def test_flag_checked_on_torch_ops_path(fn, arg):
    """A subclass or a TorchFunctionMode makes the call take torch.ops' path: the flags are
    checked there too, before any __torch_function__ runs (as torch's argument parser does)."""
    A, B = _AB()
    with pytest.raises(TypeError, match=rf"argument '{arg}' must be bool, not int"):
        fn(A.as_subclass(LoggedTensor), B, **{arg: 0})
    with FunctionLog() as mode:
        with pytest.raises(TypeError, match=rf"argument '{arg}' must be bool, not NoneType"):
            fn(A, B, **{arg: None})
    assert not any("hsma" in str(f) for f in mode.seen)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", PUBLIC)
@pytest.mark.parametrize("left,upper,unit", list(itertools.product([True, False], repeat=3)))
def test_bool_flags_give_right_values(device, fn, left, upper, unit):
    gen = make_generator(7)
    A = make_triangular(5, dtype=torch.float64, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs((5, 3) if left else (3, 5), dtype=torch.float64, device=device, gen=gen)
    B0 = B.clone()
    X = fn(A, B, left=left, upper=upper, unitriangular=unit)
    # The drop-in returns torch's own layout where it is torch's call (CPU; shapes handed off on CUDA).
    check_solution(X, A, B0, left=left, upper=upper, unitriangular=unit, device=device,
                   contiguous=fn is not _solve)


# ---------------------------------------------------------------------------------------------
# A, B, out: tensors, as torch.


@pytest.mark.parametrize("fn", PUBLIC)
@pytest.mark.parametrize("which", ["A", "B"])
@pytest.mark.parametrize("value", NOT_TENSORS, ids=lambda v: type(v).__name__)
def test_operands_must_be_tensors(fn, which, value):
    A, B = _AB()
    args = (value, B) if which == "A" else (A, value)
    with pytest.raises(TypeError, match=r"must be Tensor, not"):
        _torch_solve(*args)
    pos = 1 if which == "A" else 2
    with pytest.raises(TypeError) as ours:
        fn(*args)
    expected = f"{fn.public}(): argument '{which}' (position {pos}) must be Tensor, not "
    assert str(ours.value).startswith(expected), str(ours.value)
    _no_dump(ours.value)


@pytest.mark.parametrize("value", [[0.0], np.zeros((4, 3)), 1.0, "out"], ids=lambda v: type(v).__name__)
def test_out_must_be_tensor(value):
    A, B = _AB()
    with pytest.raises(TypeError, match=r"argument 'out' must be Tensor, not"):
        torch.linalg.solve_triangular(A, B, upper=False, out=value)
    with pytest.raises(TypeError, match=r"^hsma_trsm\.solve_triangular\(\): argument 'out' must be Tensor, not"):
        hsma_trsm.solve_triangular(A, B, upper=False, out=value)
    X = hsma_trsm.solve_triangular(A, B, upper=False, out=None)  # None: a new tensor
    check_solution(X, A, B, contiguous=False)


class _TensorLike:
    """Not a Tensor, but with __torch_function__ (as LinearOperator-like wrappers): it takes over
    the calls it is an argument of, so the public functions must hand it to torch.ops."""

    seen = []

    def __init__(self, t):
        self.t = t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func)

        def unwrap(x):
            return x.t if isinstance(x, _TensorLike) else x

        return func(*map(unwrap, args), **{k: unwrap(v) for k, v in (kwargs or {}).items()})


@pytest.mark.parametrize("fn", PUBLIC)
def test_torch_function_objects_reach_their_handler(fn):
    A, B = _AB(seed=3)
    B0 = B.clone()
    _TensorLike.seen = []
    X = fn(_TensorLike(A), B)
    assert any("hsma" in str(f) for f in _TensorLike.seen), _TensorLike.seen
    check_solution(B if fn is _trsm_ else X, A, B0)
    # Its flags are still checked first, as torch's argument parser checks them.
    with pytest.raises(TypeError, match=r"argument 'upper' must be bool, not int"):
        fn(_TensorLike(A), B, upper=0)


@pytest.mark.parametrize("fn", [_solve, _trsm], ids=lambda f: f.public)
def test_fx_symbolic_trace(fn):
    A, B = _AB(seed=4)
    gm = torch.fx.symbolic_trace(lambda A, B: fn(A, B, upper=False))
    assert any("hsma" in str(node.target) for node in gm.graph.nodes), gm.graph
    torch.testing.assert_close(gm(A, B), torch.ops.hsma.trsm(A, B), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# trans and alpha (trsm, trsm_).


@pytest.mark.parametrize("fn", [p for p in PUBLIC if p.id != "hsma_trsm.solve_triangular"])
@pytest.mark.parametrize("value", [None, 1, b"N", ["N"], torch.tensor(1)], ids=lambda v: type(v).__name__)
def test_trans_must_be_str(fn, value):
    A, B = _AB()
    with pytest.raises(TypeError) as ours:
        fn(A, B, trans=value)
    assert str(ours.value).startswith(f"{fn.public}(): argument 'trans' must be str, not "), str(ours.value)
    _no_dump(ours.value)


@pytest.mark.parametrize("fn", [p for p in PUBLIC if p.id != "hsma_trsm.solve_triangular"])
@pytest.mark.parametrize("value", [None, "2", [2.0], torch.tensor(2.0), True, False, np.True_],
                         ids=lambda v: f"{_typename(v)}-{v!r}"[:30])
def test_alpha_must_be_a_number(fn, value):
    """alpha: int, float or complex (Python or NumPy scalar). Not a bool (torch.add refuses a
    boolean alpha for non-boolean data too), not a Tensor (the op's schema takes a number)."""
    A, B = _AB()
    B0 = B.clone()
    with pytest.raises(TypeError) as ours:
        fn(A, B, alpha=value)
    assert str(ours.value).startswith(f"{fn.public}(): argument 'alpha' must be int, float or complex, not ")
    _no_dump(ours.value)
    assert_unchanged(B, B0, "B")


@pytest.mark.parametrize("fn", [p for p in PUBLIC if p.id != "hsma_trsm.solve_triangular"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("alpha", [2, -1.5, np.int64(3), np.float32(0.5), np.float64(-2.0), np.complex64(1 - 2j)],
                         ids=lambda v: f"{type(v).__name__}")
def test_alpha_numbers(fn, dtype, alpha):
    if isinstance(alpha, (complex, np.complexfloating)) and not dtype.is_complex:
        pytest.skip("complex alpha needs complex data")
    A, B = _AB(dtype=dtype, seed=5)
    B0 = B.clone()
    X = fn(A, B, alpha=alpha)
    X = B if fn is _trsm_ else X
    check_solution(X, A, B0, alpha=complex(alpha) if dtype.is_complex else float(alpha))


# ---------------------------------------------------------------------------------------------
# Dtypes.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("da,db", list(itertools.permutations(DTYPES, 2)), ids=lambda d: dtype_id(d))
@pytest.mark.parametrize("left,trans", [(True, "N"), (False, "C"), (True, "T")])
def test_trsm_promotes_mixed_dtypes(device, da, db, left, trans):
    """trsm converts A and B to torch.promote_types, as solve_triangular does; the value is
    checked against the float64/complex128 SciPy solve of the original A and B."""
    gen = make_generator(11)
    A = make_triangular(6, batch=(2,), dtype=da, upper=True, device=device, gen=gen)
    B = make_rhs((2, 6, 3) if left else (2, 3, 6), dtype=db, device=device, gen=gen)
    promoted = torch.promote_types(da, db)
    alpha = (0.5 - 1j) if promoted.is_complex else -2.0
    X = hsma_trsm.trsm(A, B, left=left, upper=True, trans=trans, alpha=alpha)
    assert X.dtype == promoted
    check_solution(X, A, B, left=left, upper=True, trans=trans, alpha=alpha, dtype=promoted, device=device)
    # solve_triangular, same policy.
    Y = hsma_trsm.solve_triangular(A, B, upper=True, left=left)
    assert Y.dtype == promoted
    check_solution(Y, A, B, left=left, upper=True, dtype=promoted, device=device)


def test_trsm_mixed_dtypes_gradients():
    """Gradients flow back in each input's own dtype (the conversion is differentiable)."""
    A, B = _AB(dtype=torch.float64, seed=12)
    A = A.requires_grad_()
    Bf = B.float().requires_grad_()
    hsma_trsm.trsm(A, Bf, upper=False).sum().backward()
    assert A.grad.dtype == torch.float64 and Bf.grad.dtype == torch.float32
    A2 = A.detach().clone().requires_grad_()
    B2 = Bf.detach().double().requires_grad_()
    hsma_trsm.trsm(A2, B2, upper=False).sum().backward()
    torch.testing.assert_close(A.grad, A2.grad)
    torch.testing.assert_close(Bf.grad, B2.grad.float())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("da,db", list(itertools.permutations(DTYPES, 2)), ids=lambda d: dtype_id(d))
def test_trsm_inplace_mixed_dtypes(device, da, db):
    """trsm_ writes B in B's dtype: A is converted when the promoted dtype is B's, else the op's
    dtype error, with B untouched."""
    gen = make_generator(13)
    A = make_triangular(5, dtype=da, upper=False, device=device, gen=gen)
    B = make_rhs((5, 2), dtype=db, device=device, gen=gen)
    B0 = B.clone()
    if torch.promote_types(da, db) == db:
        r = hsma_trsm.trsm_(A, B, trans="T")
        assert r is B and B.dtype == db
        check_solution(B, A, B0, trans="T", device=device)
    else:
        with pytest.raises(TypeError, match=r"^hsma_trsm\.trsm_\(\): A and B must have the same dtype"):
            hsma_trsm.trsm_(A, B, trans="T")
        assert_unchanged(B, B0, "B")


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("fn", PUBLIC)
@pytest.mark.parametrize("da,db", [(torch.int64, torch.int64), (torch.int32, torch.int64), (torch.int16, None),
                                   (torch.int64, torch.uint8), (torch.bool, None)], ids=lambda d: dtype_id(d))
def test_unsupported_dtypes(fn, da, db):
    db = db or da
    A = torch.eye(4).to(da)
    B = torch.ones(4, 3).to(db)
    with pytest.raises(hsma_trsm.UnsupportedDtypeError, match=rf"^{fn.public}\(\): no solver for dtype torch\."):
        fn(A, B)
    assert issubclass(hsma_trsm.UnsupportedDtypeError, TypeError)
    assert issubclass(hsma_trsm.UnsupportedDtypeError, NotImplementedError)


@pytest.mark.parametrize("fn", PUBLIC)
def test_integer_operand_promoted_with_float(fn):
    """An integer A with a float64 B: promoted to float64 (trsm_: B's dtype), as torch promotes."""
    A, B = _AB(seed=14)
    Ai = torch.tensor([[2, 0, 0, 0], [1, 3, 0, 0], [0, -1, 1, 0], [4, 0, 2, -2]])
    B0 = B.clone()
    X = fn(Ai, B)
    X = B if fn is _trsm_ else X
    assert X.dtype == torch.float64
    check_solution(X, Ai.double(), B0)


# ---------------------------------------------------------------------------------------------
# trsm_ returns B; the op itself is left as torch.ops has it.


@pytest.mark.parametrize("device", DEVICES)
def test_trsm_inplace_returns_B(device):
    A, B = _AB(device, seed=15)
    B0 = B.clone()
    r = hsma_trsm.trsm_(A, B, alpha=2.0)
    assert r is B
    check_solution(B, A, B0, alpha=2.0, device=device)
    assert torch.ops.hsma.trsm_(A, B0.clone()) is None


def test_torch_ops_keeps_its_own_conversions():
    """torch.ops.hsma.trsm called directly is torch.ops' business: its schema conversions (an
    int for a bool) and its schema errors stay as they are."""
    A, B = _AB(seed=16)
    torch.testing.assert_close(torch.ops.hsma.trsm(A, B, upper=0), torch.ops.hsma.trsm(A, B, upper=False))
    with pytest.raises(RuntimeError, match=r"Expected a value of type 'bool' for argument 'upper'"):
        torch.ops.hsma.trsm(A, B, upper="yes")


# ---------------------------------------------------------------------------------------------
# torch.compile: Dynamo traces the checks and the promotion.


def test_compile_fullgraph():
    A, B = _AB(seed=17)
    Bf = B.float()

    def f(A, B, a):
        X = hsma_trsm.trsm(A, B, alpha=a, trans="T")  # mixed dtypes: promoted in the graph
        Y = hsma_trsm.solve_triangular(A, B, upper=False)
        Z = B.double().clone()
        W = hsma_trsm.trsm_(A.float(), Z)  # float32 A converted to Z's float64
        return X, Y, Z, W

    X, Y, Z, W = torch.compile(f, fullgraph=True, backend="aot_eager")(A, Bf, 2.0)
    assert X.dtype == Y.dtype == Z.dtype == torch.float64
    check_solution(X, A, Bf, trans="T", alpha=2.0, dtype=torch.float64)
    check_solution(Y, A, Bf, dtype=torch.float64)
    check_solution(Z, A.float(), Bf, dtype=torch.float64)
    torch.testing.assert_close(W, Z, rtol=0, atol=0)


def test_compile_bad_flag_raises_type_error():
    A, B = _AB(seed=18)
    with pytest.raises(TypeError, match=r"^hsma_trsm\.trsm\(\): argument 'upper' must be bool, not int"):
        torch.compile(lambda A, B: hsma_trsm.trsm(A, B, upper=0), backend="eager")(A, B)
