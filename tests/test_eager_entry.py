"""The eager entry hsma_trsm._C.trsm (csrc/ops/python_entry.cpp), which hsma_trsm.trsm and
hsma_trsm.solve_triangular call before torch.ops.hsma.trsm: it must give torch.ops' results and
errors, keep every dispatch key (autograd, modes, profiler, inference mode), and decline (return
None, so that the public functions take torch.ops' path) exactly where that path differs."""
import functools

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import hsma_trsm
from hsma_trsm import _C
from conftest import (DEVICES, DTYPES, FunctionLog, LoggedTensor, b_shape, check_solution, dtype_id, make_generator,
                      make_rhs, make_triangular, sync)

CASES = [  # (k, other, left, upper, trans, unit, alpha)
    (5, 3, True, False, "N", False, 1),
    (17, 4, False, True, "T", True, 2.5),
    (33, 1, True, True, "C", False, -1),
    (64, 9, False, False, "c", True, 0.5),
    (80, 6, True, False, "N", False, 1),
]


def _inputs(k, other, left, upper, unit, dtype, device, seed):
    gen = make_generator(seed)
    A = make_triangular(k, batch=(2,), dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, other, left=left, batch=(2,)), dtype=dtype, device=device, gen=gen)
    return A, B


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"k{c[0]}-{'L' if c[2] else 'R'}-{c[4]}")
def test_entry_matches_torch_ops(device, dtype, case):
    k, other, left, upper, trans, unit, alpha = case
    if dtype.is_complex and alpha == 0.5:
        alpha = complex(0.5, -2.0)
    A, B = _inputs(k, other, left, upper, unit, dtype, device, seed=k)
    A0, B0 = A.clone(), B.clone()
    X = _C.trsm(A, B, left, upper, trans, unit, alpha)
    assert isinstance(X, torch.Tensor)
    Xop = torch.ops.hsma.trsm(A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=alpha)
    sync(device)
    assert torch.equal(X, Xop)  # one kernel, one result (NaN in the unused triangle never read)
    assert torch.equal(A.nan_to_num(), A0.nan_to_num()) and torch.equal(B, B0)
    check_solution(X, A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=alpha, device=device)
    Xpub = hsma_trsm.trsm(A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=alpha)
    assert torch.equal(Xpub, Xop)


class _DispatchLog(TorchDispatchMode):
    """Records each dispatched op and the device a factory call gets inside it."""

    def __init__(self):
        super().__init__()
        self.seen = []
        self.devices = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(func)
        self.devices.append(torch.empty(()).device)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("device", DEVICES)
def test_entry_declines_where_torch_ops_differs(device):
    A, B = _inputs(8, 3, True, False, False, torch.float64, device, seed=1)
    # Plain tensors (and Parameters, which torch treats as plain): taken.
    assert _C.trsm(A, B, True, False, "N", False, 1) is not None
    assert _C.trsm(torch.nn.Parameter(A), B, True, False, "N", False, 1) is not None
    # A subclass, or a TorchFunctionMode: its __torch_function__ must see the call.
    assert _C.trsm(A.as_subclass(LoggedTensor), B, True, False, "N", False, 1) is None
    with FunctionLog():
        assert _C.trsm(A, B, True, False, "N", False, 1) is None
    # Python types that torch.ops converts (or rejects) itself.
    assert _C.trsm(A, B, 1, False, "N", False, 1) is None
    assert _C.trsm(A, B, True, False, "N", None, 1) is None
    assert _C.trsm(A, B, True, False, "N", False, True) is None
    assert _C.trsm(A, B, True, False, "N", False, np.float64(2.0)) is None
    assert _C.trsm(A, B, True, False, "N", False, 2**70) is None
    assert _C.trsm(A, B, True, False, "\ud800", False, 1) is None  # not UTF-8 encodable: torch.ops' error
    # Dtypes the public functions promote or reject with their own errors.
    assert _C.trsm(A, B.float(), True, False, "N", False, 1) is None
    assert _C.trsm(A.to(torch.int32), B.to(torch.int32), True, False, "N", False, 1) is None
    with pytest.raises(TypeError, match="7 positional arguments"):
        _C.trsm(A, B)


@pytest.mark.parametrize("device", DEVICES)
def test_public_functions_after_a_decline(device):
    A, B = _inputs(8, 3, True, False, False, torch.float64, device, seed=2)
    # Mixed dtypes: solve_triangular and trsm promote (float32 B -> float64); the op raises.
    for fn in (lambda A, B: hsma_trsm.solve_triangular(A, B, upper=False), hsma_trsm.trsm):
        X = fn(A, B.float())
        assert X.dtype == torch.float64
        check_solution(X, A, B.float().double(), device=device)
    with pytest.raises(TypeError, match="same dtype"):
        torch.ops.hsma.trsm(A, B.float())
    with pytest.raises(hsma_trsm.UnsupportedDtypeError):
        hsma_trsm.solve_triangular(A.to(torch.int32), B.to(torch.int32), upper=False)
    # A subclass's __torch_function__ and a TorchFunctionMode see torch.ops.hsma.trsm.
    LoggedTensor.seen = []
    X = hsma_trsm.solve_triangular(A.as_subclass(LoggedTensor), B, upper=False)
    assert any("hsma" in str(f) and "trsm" in str(f) for f in LoggedTensor.seen), LoggedTensor.seen
    check_solution(X.as_subclass(torch.Tensor), A, B, device=device)
    with FunctionLog() as mode:
        X = hsma_trsm.trsm(A, B)
    assert any("hsma" in str(f) and "trsm" in str(f) for f in mode.seen), mode.seen
    check_solution(X, A, B, device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_entry_errors_are_torch_ops_errors(device):
    A, B = _inputs(8, 3, True, False, False, torch.float32, device, seed=3)
    bad = [
        (A, B[..., :5, :], True, "N", 1),       # A's order does not match B's rows
        (A[..., :6], B, True, "N", 1),          # A not square
        (A, B, True, "X", 1),                   # trans
        (A, B, True, "N", complex(1, 1)),       # complex alpha with real data
        (A[0, 0], B, True, "N", 1),             # A with one dim
        (A[0].expand(3, 8, 8), B, True, "N", 1),  # batch dims (3) and (2) do not broadcast
    ]
    for A_, B_, left, trans, alpha in bad:
        with pytest.raises(Exception) as via_ops:
            torch.ops.hsma.trsm(A_, B_, left=left, upper=False, trans=trans, unitriangular=False, alpha=alpha)
        with pytest.raises(Exception) as via_entry:
            _C.trsm(A_, B_, left, False, trans, False, alpha)
        assert type(via_entry.value) is type(via_ops.value)
        assert str(via_entry.value).splitlines()[0] == str(via_ops.value).splitlines()[0]


@pytest.mark.parametrize("device", DEVICES)
def test_entry_keeps_dispatch_keys(device):
    """trsm's entry (and the drop-in's where it calls the op: CUDA): a typed dispatcher call that every key
    sees. On the CPU the drop-in's entry is torch's function itself: its result, bit for bit."""
    A, B = _inputs(12, 4, True, False, False, torch.float64, device, seed=4)
    solve = hsma_trsm.trsm if device == "cpu" else functools.partial(hsma_trsm.solve_triangular, upper=False)
    if device == "cpu":
        X = hsma_trsm.solve_triangular(A, B, upper=False)
        Xt = torch.linalg.solve_triangular(A, B, upper=False)
        assert torch.equal(X, Xt) and X.stride() == Xt.stride()
    # TorchDispatchMode: the entry's dispatcher call reaches the mode.
    with _DispatchLog() as mode:
        X = solve(A, B)
    assert torch.ops.hsma.trsm.default in mode.seen
    check_solution(X, A, B, device=device)
    # Profiler: the op is recorded under its name.
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], acc_events=True) as prof:
        solve(A, B)
    assert any(e.name == "hsma::trsm" for e in prof.events())
    # Inference mode: the result is an inference tensor, as torch's would be.
    with torch.inference_mode():
        X = solve(A, B)
        Xt = torch.linalg.solve_triangular(A.nan_to_num(), B, upper=False)
    assert X.is_inference() == Xt.is_inference()
    # Autograd: the result carries the op's backward; gradients equal torch.ops' path's.
    Ag = A.nan_to_num().tril().requires_grad_()
    Bg = B.clone().requires_grad_()
    X = solve(Ag, Bg)
    assert X.grad_fn is not None
    gA, gB = torch.autograd.grad(X.square().sum(), (Ag, Bg))
    Xo = torch.ops.hsma.trsm(Ag, Bg)
    oA, oB = torch.autograd.grad(Xo.square().sum(), (Ag, Bg))
    assert torch.equal(gA, oA) and torch.equal(gB, oB)
    # No gradient wanted: no graph.
    with torch.no_grad():
        assert solve(Ag, Bg).grad_fn is None


@pytest.mark.parametrize("device", DEVICES)
def test_entry_with_torch_function_machinery(device):
    A, B = _inputs(6, 2, True, False, False, torch.float64, device, seed=5)
    Xop = torch.ops.hsma.trsm(A, B)
    # torch.overrides.redispatch_function sets "skip the next __torch_function__", which torch.ops'
    # check consumes (torch 2.13); the entry leaves such a call to torch.ops.
    if hasattr(torch.overrides, "redispatch_function"):
        X = torch.overrides.redispatch_function(hsma_trsm.trsm, (), (A, B), {})
        assert torch.equal(X, Xop)
    # `with torch.device(...)` and torch.set_default_device push torch's DeviceContext, a
    # TorchFunctionMode that passes this op through: the entry takes the call, same result.
    # With another mode on top, torch.ops' path (the mode sees the call).
    with torch.device(device):
        X = _C.trsm(A, B, True, False, "N", False, 1)
        assert X is not None and torch.equal(X, Xop)
        assert torch.equal(hsma_trsm.trsm(A, B), Xop)
        with FunctionLog() as mode:
            assert _C.trsm(A, B, True, False, "N", False, 1) is None
            assert torch.equal(hsma_trsm.trsm(A, B), Xop)
        assert any("hsma" in str(f) and "trsm" in str(f) for f in mode.seen), mode.seen
    # The call runs with the DeviceContext off the stack, as inside its __torch_function__: Python
    # code the dispatcher reaches (here a TorchDispatchMode) sees no default device, either path.
    with torch.device("meta"):
        with _DispatchLog() as mode:
            assert _C.trsm(A, B, True, False, "N", False, 1) is not None
            torch.ops.hsma.trsm(A, B)
    assert mode.devices and all(d == torch.device("cpu") for d in mode.devices), mode.devices
    assert torch._C._len_torch_function_stack() == 0  # (no default device set: None restores it)
    torch.set_default_device(device)
    try:
        X = _C.trsm(A, B, True, False, "N", False, 1)
        assert X is not None and torch.equal(X, Xop)
        X = hsma_trsm.solve_triangular(A, B, upper=False)
        assert X.device == A.device and torch.equal(X, Xop)
    finally:
        torch.set_default_device(None)
    # fx symbolic tracing records the op (Proxies are not tensors: torch.ops' path).
    gm = torch.fx.symbolic_trace(lambda A, B: hsma_trsm.solve_triangular(A, B, upper=False))
    assert any("hsma" in str(node.target) for node in gm.graph.nodes), gm.graph
    assert torch.equal(gm(A, B), Xop)


# ---------------------------------------------------------------------------------------------
# The solvers' entries (_C.cholesky_solve, _C.cholesky_inverse, _C.lu_solve)


def _solver_inputs(device, dtype=torch.float64):
    gen = make_generator(11)
    L = make_triangular(6, batch=(3, 1), dtype=dtype, device=device, gen=gen, fill=0.0)
    L.diagonal(dim1=-2, dim2=-1).copy_(L.diagonal(dim1=-2, dim2=-1).abs() + 1)
    A = make_rhs((2, 6, 6), dtype=dtype, device=device, gen=gen) + 4 * torch.eye(6, dtype=dtype, device=device)
    LU, piv = torch.linalg.lu_factor(A)
    B = make_rhs((2, 6, 4), dtype=dtype, device=device, gen=gen)
    return L, LU, piv, B


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_solver_entries_match_the_ops_and_torch(device, dtype):
    L, LU, piv, B = _solver_inputs(device, dtype)
    calls = [
        (_C.cholesky_solve(B, L, False), torch.ops.hsma.cholesky_solve(B, L, False), torch.cholesky_solve(B, L)),
        (_C.cholesky_inverse(L, False), torch.ops.hsma.cholesky_inverse(L, False), torch.cholesky_inverse(L)),
        (_C.lu_solve(LU, piv, B, True, False), torch.ops.hsma.lu_solve(LU, piv, B),
         torch.linalg.lu_solve(LU, piv, B)),
        (_C.lu_solve(LU, piv, B.mT, False, True), torch.ops.hsma.lu_solve(LU, piv, B.mT, left=False, adjoint=True),
         torch.linalg.lu_solve(LU, piv, B.mT, left=False, adjoint=True)),
    ]
    tol = 1e-4 if dtype in (torch.float32, torch.complex64) else 1e-11
    inverse = calls[1]
    for X, Xop, R in calls:
        # On the CPU, without a gradient, the entries are torch's functions (LAPACK), bit for bit, but for complex
        # cholesky_inverse (LAPACK's potri drops the imaginary part of the diagonal); elsewhere the ops.
        by_torch = device == "cpu" and not (X is inverse[0] and dtype.is_complex)
        assert isinstance(X, torch.Tensor) and torch.equal(X, R if by_torch else Xop)
        assert X.stride() == R.stride()
        torch.testing.assert_close(X, R, rtol=tol, atol=tol)
        torch.testing.assert_close(Xop, R, rtol=tol, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
def test_solver_entries_decline_what_the_checks_take(device):
    """None (the public functions then check and raise torch's errors, convert, or dispatch): a tensor subclass,
    a half dtype, mixed dtypes, bad shapes or pivots, flags that are not bool."""
    L, LU, piv, B = _solver_inputs(device)
    declined = [
        _C.cholesky_solve(B.as_subclass(LoggedTensor), L, False),
        _C.cholesky_solve(B.float(), L, False),
        _C.cholesky_solve(B.half(), L.half(), False),
        _C.cholesky_solve(B[..., :5, :], L, False),
        _C.cholesky_solve(B, L, 0),
        _C.cholesky_inverse(L[..., :5], False),
        _C.lu_solve(LU, piv.long(), B, True, False),
        _C.lu_solve(LU, piv[..., :5], B, True, False),
        _C.lu_solve(LU, piv, B, False, False),
        _C.lu_solve(LU, piv, B.expand(4, 2, 6, 4)[:3], True, False),  # (3, 2) against LU's (2,): broadcasts
    ]
    assert all(d is None for d in declined[:-1]) and declined[-1] is not None
    with FunctionLog():
        assert _C.cholesky_solve(B, L, False) is None  # a TorchFunctionMode
    with pytest.raises(RuntimeError, match="Incompatible matrix sizes"):
        hsma_trsm.cholesky_solve(B[..., :5, :], L)


@pytest.mark.parametrize("device", DEVICES)
def test_public_solve_triangular_is_the_builtin_entry(device):
    """hsma_trsm.solve_triangular is a builtin (_C.public_solve_triangular) with torch's signature and the Python
    docstring; the common call is taken in C++, every other goes to the Python implementation with its arguments as
    given: out=, keywords given as a **dict or built at run time, a missing or unknown keyword, non-bool flags,
    subclasses, and errors (named after the public function)."""
    import inspect
    import pickle

    from hsma_trsm import api

    f = hsma_trsm.solve_triangular
    assert str(inspect.signature(f)) == str(inspect.signature(api._solve_triangular_impl))
    assert f.__doc__ == inspect.getdoc(api._solve_triangular_impl) and f.__module__ == "hsma_trsm"
    assert pickle.loads(pickle.dumps(f)) is f
    A, B = _inputs(8, 3, True, False, False, torch.float64, device, seed=4)
    ref = api._solve_triangular_impl(A, B, upper=False)  # the same kernel, so the same bits
    torch.testing.assert_close(ref, torch.linalg.solve_triangular(A, B, upper=False), rtol=1e-12, atol=1e-12)
    upper = "".join(["up", "per"])  # a name that is not interned
    for X in (f(A, B, upper=False), f(A, B, **{"upper": False, "left": True}), f(A, B, **{upper: False}),
              f(A, B, upper=False, unitriangular=False, out=None)):
        torch.testing.assert_close(X, ref, rtol=0, atol=0)
    out = torch.empty_like(B)
    assert f(A, B, upper=False, out=out) is out and torch.equal(out, ref)
    with pytest.raises(TypeError, match="upper"):
        f(A, B)
    with pytest.raises(TypeError, match="argument 'upper' must be bool, not numpy.bool"):  # as torch
        f(A, B, upper=np.False_)
    with pytest.raises(TypeError):
        f(A, B, upper=False, lower=True)
    with pytest.raises(TypeError):
        f(A, B, False)
    with pytest.raises(RuntimeError, match=r"^hsma_trsm.solve_triangular\(\): A is 8x8 but B is 5x3"):
        f(A, B[..., :5, :], upper=False)
    LoggedTensor.seen = []
    f(A.as_subclass(LoggedTensor), B, upper=False)
    assert LoggedTensor.seen
