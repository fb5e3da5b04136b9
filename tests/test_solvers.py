"""hsma_trsm.cholesky_solve, cholesky_inverse and lu_solve (hsma_trsm/solvers.py) against an independent
float64/complex128 NumPy reference and against torch's functions of the same names: values, shapes with batch
broadcasting, output layout (strides), upper/lower, left/right, adjoint, every dtype; gradcheck; gradients
through a factorisation equal to torch's; errors of torch's types and messages. Also the switch's kernels of
linalg_solve_triangular and triangular_solve against torch's operators, routed here on the CPU."""
import math
import re
import warnings

import numpy as np
import pytest
import torch
from torch.autograd import gradcheck

import hsma_trsm
from hsma_trsm import solvers, switch
from conftest import DEVICES, DTYPES, dtype_id, make_generator, make_triangular, to_numpy_wide

BOOL = [False, True]
GRAD_DTYPES = [torch.float64, torch.complex128]
# (B's batch, the factor's batch): broadcasting both ways, none, empty
BATCHES = [((), ()), ((2, 1), (3,)), ((4,), ()), ((), (2,)), ((0,), (1,))]


def _tol(dtype, k):
    """Relative error bound: condition numbers here stay below ~100 (cholesky) / ~30 (lu)."""
    return 2e3 * torch.finfo(dtype).eps * math.sqrt(max(k, 1))


def _rel(X, ref):
    Xn = to_numpy_wide(X)
    assert Xn.shape == ref.shape
    if ref.size == 0:
        return 0.0
    return float(np.linalg.norm(Xn - ref) / max(np.linalg.norm(ref), 1e-300))


def _rhs(shape, dtype, device, gen):
    wide = torch.complex128 if dtype.is_complex else torch.float64
    return torch.randn(shape, dtype=wide, generator=gen).to(dtype=dtype, device=device)


def _dense_factor(F, upper):
    """The triangle of F (NumPy, wide) with the other one zeroed."""
    Fn = to_numpy_wide(F)
    return np.triu(Fn) if upper else np.tril(Fn)


def _chol_matrix(F, upper):
    T = _dense_factor(F, upper)
    Th = np.conj(np.swapaxes(T, -1, -2))
    return Th @ T if upper else T @ Th


def _solve(A, B):
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    A = np.broadcast_to(A, (*batch, *A.shape[-2:]))
    B = np.broadcast_to(B, (*batch, *B.shape[-2:]))
    if A.size == 0 or B.size == 0:
        return np.zeros(B.shape, dtype=np.result_type(A, B))
    return np.linalg.solve(A, B)


def _check_like_torch(X, R):
    """Same shape, dtype, device and strides as torch's result R (the strides of dims longer than 1, which
    is what torch.compile asserts on an operator's output)."""
    assert X.shape == R.shape and X.dtype == R.dtype and X.device == R.device
    if X.numel():
        assert [s for s, n in zip(X.stride(), X.shape) if n > 1] == [s for s, n in zip(R.stride(), R.shape) if n > 1]


# ---------------------------------------------------------------------------------------------
# cholesky_solve / cholesky_inverse


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("b_batch,l_batch", BATCHES, ids=lambda b: "x".join(map(str, b)) or "-")
@pytest.mark.parametrize("k,n", [(1, 1), (5, 3), (33, 8), (70, 2)])
def test_cholesky_solve_matches_reference(device, dtype, upper, b_batch, l_batch, k, n, seed):
    gen = make_generator(seed)
    F = make_triangular(k, batch=l_batch, dtype=dtype, upper=upper, device=device, gen=gen)  # NaN elsewhere
    B = _rhs((*b_batch, k, n), dtype, device, gen)
    X = hsma_trsm.cholesky_solve(B, F, upper=upper)
    ref = _solve(_chol_matrix(F, upper), to_numpy_wide(B))
    assert _rel(X, ref) <= _tol(dtype, k)
    R = torch.cholesky_solve(B, torch.where(torch.isnan(F), 0, F), upper=upper)
    _check_like_torch(X, R)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("batch", [(), (3,), (2, 1), (0,)], ids=lambda b: "x".join(map(str, b)) or "-")
@pytest.mark.parametrize("k", [0, 1, 6, 40])
def test_cholesky_inverse_matches_reference(device, dtype, upper, batch, k, seed):
    F = make_triangular(k, batch=batch, dtype=dtype, upper=upper, device=device, gen=make_generator(seed))
    X = hsma_trsm.cholesky_inverse(F, upper=upper)
    A = _chol_matrix(F, upper)
    ref = np.linalg.inv(A) if A.size else np.zeros(A.shape, A.dtype)
    assert _rel(X, ref) <= _tol(dtype, k)
    _check_like_torch(X, torch.cholesky_inverse(torch.where(torch.isnan(F), 0, F), upper=upper))


def test_cholesky_solve_of_a_factorisation_matches_torch(gen):
    """The usual client pattern: L from torch.linalg.cholesky; values and the gradients reaching K and B."""
    x = torch.rand(40, 3, dtype=torch.float64, generator=gen)
    K0 = torch.exp(-torch.cdist(x, x) ** 2) + 1e-2 * torch.eye(40, dtype=torch.float64)
    B0 = torch.randn(40, 5, dtype=torch.float64, generator=gen)
    grads = []
    for fn in (torch.cholesky_solve, hsma_trsm.cholesky_solve):
        K, B = K0.clone().requires_grad_(), B0.clone().requires_grad_()
        X = fn(B, torch.linalg.cholesky(K))
        (X.square().sum() + torch.cholesky_inverse(torch.linalg.cholesky(K)).trace()).backward()
        grads.append((X.detach(), K.grad, B.grad))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)
    # cholesky_inverse's gradient through the factorisation too
    K = K0.clone().requires_grad_()
    g_ours = torch.autograd.grad(hsma_trsm.cholesky_inverse(torch.linalg.cholesky(K)).sum(), K)[0]
    g_torch = torch.autograd.grad(torch.cholesky_inverse(torch.linalg.cholesky(K)).sum(), K)[0]
    torch.testing.assert_close(g_ours, g_torch, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------------------------
# lu_solve


def _lu_input(k, batch, dtype, device, gen):
    """A well-conditioned A whose partial pivoting swaps rows: a scaled permutation plus noise."""
    wide = torch.complex128 if dtype.is_complex else torch.float64
    count = math.prod(batch)
    perms = torch.stack([torch.randperm(k, generator=gen) for _ in range(count)]) if count else \
        torch.zeros(0, k, dtype=torch.long)
    P = torch.nn.functional.one_hot(perms, k).to(wide).reshape(*batch, k, k) if k else torch.zeros(*batch, 0, 0)
    A = 3 * P.to(wide) + torch.randn((*batch, k, k), dtype=wide, generator=gen) / math.sqrt(max(k, 1))
    return A.to(dtype=dtype, device=device)


def _apply_pivots(pivots, M):
    """LAPACK's row interchanges applied in order to the rows of M (NumPy; the reference's own loop)."""
    M = M.copy()
    piv = pivots.cpu().numpy().reshape(-1, pivots.shape[-1]) - 1
    flat = M.reshape(-1, *M.shape[-2:])
    for b in range(flat.shape[0]):
        for i, p in enumerate(piv[b]):
            flat[b, [i, p]] = flat[b, [p, i]]
    return flat.reshape(M.shape)


def _lu_matrix(LU, pivots):
    """P L U, rebuilt in float64/complex128 from the packed factors and the pivots (A = P L U: applying the
    interchanges to the rows of L U in reverse order is P (L U); here as P^T applied to I, transposed)."""
    T = to_numpy_wide(LU)
    k = T.shape[-1]
    Lm = np.tril(T, -1) + np.eye(k, dtype=T.dtype)
    LUm = Lm @ np.triu(T)
    eye = np.broadcast_to(np.eye(k, dtype=T.dtype), T.shape)
    PT = _apply_pivots(pivots, eye)  # rows of I interchanged in order: P^T
    return np.swapaxes(PT, -1, -2) @ LUm


def _lu_reference(A, B, left, adjoint):
    Aop = np.conj(np.swapaxes(A, -1, -2)) if adjoint else A
    if left:
        return _solve(Aop, B)
    return np.swapaxes(_solve(np.swapaxes(Aop, -1, -2), np.swapaxes(B, -1, -2)), -1, -2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("adjoint", BOOL, ids=["plain", "adjoint"])
@pytest.mark.parametrize("b_batch,lu_batch", BATCHES, ids=lambda b: "x".join(map(str, b)) or "-")
@pytest.mark.parametrize("k,n", [(1, 2), (6, 3), (40, 5), (90, 1)])
def test_lu_solve_matches_reference(device, dtype, left, adjoint, b_batch, lu_batch, k, n, seed):
    gen = make_generator(seed)
    LU, pivots = torch.linalg.lu_factor(_lu_input(k, lu_batch, dtype, device, gen))
    B = _rhs((*b_batch, k, n) if left else (*b_batch, n, k), dtype, device, gen)
    X = hsma_trsm.lu_solve(LU, pivots, B, left=left, adjoint=adjoint)
    ref = _lu_reference(_lu_matrix(LU, pivots), to_numpy_wide(B), left, adjoint)
    assert _rel(X, ref) <= _tol(dtype, k)
    _check_like_torch(X, torch.linalg.lu_solve(LU, pivots, B, left=left, adjoint=adjoint))


@pytest.mark.parametrize("device", DEVICES)
def test_lu_solve_any_pivots_applied_in_order(device):
    """Pivots that are no LAPACK factorisation's (an earlier row swapped with a later one and back, a row
    swapped twice) are applied in order, as torch applies them."""
    gen = make_generator(5)
    LU = (0.3 * torch.randn(2, 5, 5, dtype=torch.float64, generator=gen) + 3 * torch.eye(5)).to(device)
    pivots = torch.tensor([[3, 1, 5, 2, 5], [5, 5, 5, 5, 5]], dtype=torch.int32, device=device)
    B = _rhs((2, 5, 3), torch.float64, device, gen)
    X = hsma_trsm.lu_solve(LU, pivots, B)
    ref = _lu_reference(_lu_matrix(LU, pivots), to_numpy_wide(B), True, False)
    assert _rel(X, ref) <= 1e-12
    torch.testing.assert_close(X, torch.linalg.lu_solve(LU, pivots, B), rtol=1e-12, atol=1e-12)


def _permutation_reference(pivots):
    """perm (P[perm[j], j] = 1) of LAPACK's 1-based pivots, by applying the interchanges in order."""
    piv = pivots.reshape(-1, pivots.shape[-1]).cpu().numpy() - 1
    perm = np.tile(np.arange(piv.shape[-1]), (piv.shape[0], 1))
    for b in range(piv.shape[0]):
        for i, j in enumerate(piv[b]):
            perm[b, [i, j]] = perm[b, [j, i]]
    return perm.reshape(pivots.shape)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [1, 7, 64, 6144, 6145])  # 6144: the CUDA kernel's largest order; 6145 by ATen
@pytest.mark.parametrize("inverse", BOOL, ids=["perm", "inverse"])
def test_lu_permutation_applies_pivots_in_order(device, k, inverse):
    gen = make_generator(k)
    batch = (3, 2) if k < 1000 else (1,)
    # LAPACK's pivots (row i swapped with a row j >= i), then some that are no LAPACK's (j < i, repeats)
    low = torch.arange(1, k + 1).expand(*batch, k)
    pivots = (low + (torch.rand(*batch, k, generator=gen) * (k + 1 - low)).long()).clamp(max=k)
    pivots[..., -1] = torch.randint(1, k + 1, (), generator=gen)
    pivots = pivots.to(device=device, dtype=torch.int32).mT.contiguous().mT  # strided
    perm = torch.ops.hsma._lu_permutation(pivots, inverse)
    ref = _permutation_reference(pivots)
    if inverse:
        ref = np.argsort(ref, axis=-1)
    assert perm.dtype == torch.int64 and perm.shape == pivots.shape
    np.testing.assert_array_equal(perm.cpu().numpy(), ref)


@pytest.mark.parametrize("device", DEVICES)
def test_vmap_decomposes_into_batch_rules(device):
    """torch.vmap over the solvers runs their compositions on batch rules (trsm's, _lu_permutation's, ATen's):
    torch's results, and no warning of a per-sample fallback."""
    gen = make_generator(3)
    A = (torch.randn(3, 5, 5, dtype=torch.float64, generator=gen) + 3 * torch.eye(5, dtype=torch.float64)).to(device)
    LU, piv = torch.linalg.lu_factor(A)
    L = torch.linalg.cholesky(A @ A.mT)
    B = _rhs((3, 5, 2), torch.float64, device, gen)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = [torch.vmap(hsma_trsm.lu_solve)(LU, piv, B),
               torch.vmap(hsma_trsm.lu_solve, in_dims=(None, None, 0))(LU[0], piv[0], B),
               torch.vmap(lambda lu, p, b: hsma_trsm.lu_solve(lu, p, b, left=False, adjoint=True))(LU, piv, B.mT),
               torch.vmap(hsma_trsm.cholesky_solve)(B, L), torch.vmap(hsma_trsm.cholesky_inverse)(L)]
    refs = [torch.linalg.lu_solve(LU, piv, B), torch.linalg.lu_solve(LU[0], piv[0], B),
            torch.linalg.lu_solve(LU, piv, B.mT, left=False, adjoint=True), torch.cholesky_solve(B, L),
            torch.cholesky_inverse(L)]
    for X, R in zip(got, refs):
        torch.testing.assert_close(X, R, rtol=1e-10, atol=1e-10)


def test_lu_solve_gradients_match_torch(gen):
    """Gradients reaching A through torch.linalg.lu_factor, and reaching B, as torch's (every variant)."""
    A0 = _lu_input(6, (2,), torch.float64, "cpu", gen)
    for left in BOOL:
        for adjoint in BOOL:
            B0 = torch.randn((2, 6, 3) if left else (2, 3, 6), dtype=torch.float64, generator=gen)
            grads = []
            for fn in (torch.linalg.lu_solve, hsma_trsm.lu_solve):
                A, B = A0.clone().requires_grad_(), B0.clone().requires_grad_()
                LU, piv = torch.linalg.lu_factor(A)
                fn(LU, piv, B, left=left, adjoint=adjoint).square().sum().backward()
                grads.append((A.grad, B.grad))
            for a, b in zip(*grads):
                torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------------------------
# gradcheck (finite differences: the independent reference), forward mode included


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
def test_gradcheck_cholesky(device, dtype, upper, gen):
    F = make_triangular(3, batch=(2,), dtype=dtype, upper=upper, device=device, gen=gen, fill=None).requires_grad_()
    B = _rhs((3, 2), dtype, device, gen).requires_grad_()
    assert gradcheck(lambda b, f: hsma_trsm.cholesky_solve(b, f, upper=upper), (B, F), check_forward_ad=True)
    assert gradcheck(lambda f: hsma_trsm.cholesky_inverse(f, upper=upper), (F,), check_forward_ad=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("adjoint", BOOL, ids=["plain", "adjoint"])
def test_gradcheck_lu_solve(device, dtype, left, adjoint, gen):
    LU, pivots = torch.linalg.lu_factor(_lu_input(3, (2,), dtype, device, gen))
    B = _rhs((2, 3, 2) if left else (2, 2, 3), dtype, device, gen).requires_grad_()
    LU.requires_grad_()
    assert gradcheck(lambda lu, b: hsma_trsm.lu_solve(lu, pivots, b, left=left, adjoint=adjoint), (LU, B),
                     check_forward_ad=True)


# ---------------------------------------------------------------------------------------------
# The switch's kernels of the one-solve operators, against torch's (routed here on the CPU)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("unit", BOOL, ids=["nonunit", "unit"])
def test_switch_solve_triangular_matches_torch(dtype, left, upper, unit, gen):
    A = make_triangular(7, batch=(3, 1), dtype=dtype, upper=upper, unit=unit, gen=gen, fill=None)
    B = _rhs((2, 7, 4) if left else (2, 4, 7), dtype, "cpu", gen)
    # views: conjugate A, transposed A (the other triangle), column-major B
    for a, up, b in ((A, upper, B), (A.conj(), upper, B), (A.mT, not upper, B.mT.contiguous().mT)):
        R = torch.linalg.solve_triangular(a, b, upper=up, left=left, unitriangular=unit)
        served = switch.routed_calls()["linalg_solve_triangular"]
        with hsma_trsm.switch._enabled(keys=("CPU",)):
            X = torch.linalg.solve_triangular(a, b, upper=up, left=left, unitriangular=unit)
        assert switch.routed_calls()["linalg_solve_triangular"] == served + 1
        torch.testing.assert_close(X, R, rtol=_tol(dtype, 7), atol=_tol(dtype, 7))
        _check_like_torch(X, R)


@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("transpose", BOOL, ids=["N", "T"])
def test_switch_triangular_solve_matches_torch(dtype, upper, transpose, gen):
    A = make_triangular(6, batch=(3,), dtype=dtype, upper=upper, gen=gen, fill=None)
    b = _rhs((2, 1, 6, 3), dtype, "cpu", gen)
    R, MR = torch.triangular_solve(b, A, upper=upper, transpose=transpose)
    served = switch.routed_calls()["triangular_solve"]
    with hsma_trsm.switch._enabled(keys=("CPU",)):
        X, M = torch.triangular_solve(b, A, upper=upper, transpose=transpose)
    assert switch.routed_calls()["triangular_solve"] == served + 1
    torch.testing.assert_close(X, R, rtol=_tol(dtype, 6), atol=_tol(dtype, 6))
    _check_like_torch(X, R)
    _check_like_torch(M, MR)
    assert torch.equal(M, MR) and M.data_ptr() != A.data_ptr()


# ---------------------------------------------------------------------------------------------
# Errors: torch's exception types, and its messages where they are replicated


def _t(*shape, dtype=torch.float64):
    return torch.randn(*shape, dtype=torch.float64).to(dtype)


_LU, _PIV = torch.linalg.lu_factor(_t(2, 3, 3) + 3 * torch.eye(3, dtype=torch.float64))

# (label, torch's call, ours, same message); the message may differ only for batch broadcasting
ERROR_CASES = [
    ("cs-b-1d", lambda f: f(_t(3), _t(3, 3)), True),
    ("cs-l-1d", lambda f: f(_t(3, 2), _t(3)), True),
    ("cs-not-square", lambda f: f(_t(3, 2), _t(3, 4)), True),
    ("cs-sizes", lambda f: f(_t(4, 2), _t(3, 3)), True),
    ("cs-dtypes", lambda f: f(_t(3, 2, dtype=torch.float32), _t(3, 3)), True),
    ("cs-batch", lambda f: f(_t(2, 3, 2), _t(3, 3, 3)), False),
    ("cs-int", lambda f: f(_t(3, 2, dtype=torch.int32), _t(3, 3, dtype=torch.int32)), False),
]
INV_ERROR_CASES = [
    ("ci-1d", lambda f: f(_t(3)), True),
    ("ci-not-square", lambda f: f(_t(3, 4)), True),
    ("ci-int", lambda f: f(_t(3, 3, dtype=torch.int32)), False),
]
LU_ERROR_CASES = [
    ("lu-lu-1d", lambda f: f(_t(3), torch.ones(3, dtype=torch.int32), _t(3, 2)), True),
    ("lu-not-square", lambda f: f(_t(3, 4), _PIV[0], _t(3, 2)), True),
    ("lu-b-1d", lambda f: f(_LU, _PIV, _t(3)), True),
    ("lu-sizes", lambda f: f(_LU, _PIV, _t(4, 2)), True),
    ("lu-sizes-right", lambda f: f(_LU, _PIV, _t(3, 2), left=False), True),
    ("lu-dtypes", lambda f: f(_LU, _PIV, _t(3, 2, dtype=torch.float32)), True),
    ("lu-int", lambda f: f(_LU.int(), _PIV, _t(3, 2, dtype=torch.int32)), True),
    ("lu-pivots-dtype", lambda f: f(_LU, _PIV.long(), _t(3, 2)), True),
    ("lu-pivots-count", lambda f: f(_LU, _PIV[:, :2], _t(3, 2)), True),
    ("lu-pivots-batch", lambda f: f(_LU, _PIV[:1], _t(3, 2)), True),
    ("lu-batch", lambda f: f(_LU, _PIV, _t(3, 3, 2)), False),
]


def _raised(call):
    with pytest.raises(Exception) as info:
        call()
    return info.value


@pytest.mark.parametrize("case,call,same_message",
                         [pytest.param(*c, id=c[0]) for c in ERROR_CASES + INV_ERROR_CASES + LU_ERROR_CASES])
def test_errors_as_torch(case, call, same_message):
    theirs_fn, ours_fn = {"cs": (torch.cholesky_solve, hsma_trsm.cholesky_solve),
                          "ci": (torch.cholesky_inverse, hsma_trsm.cholesky_inverse),
                          "lu": (torch.linalg.lu_solve, hsma_trsm.lu_solve)}[case[:2]]
    theirs, ours = _raised(lambda: call(theirs_fn)), _raised(lambda: call(ours_fn))
    assert isinstance(ours, type(theirs)), (type(ours), type(theirs), ours)
    if same_message:
        assert str(ours) == str(theirs).split("\n")[0]


@pytest.mark.parametrize("call,name", [
    (lambda: hsma_trsm.cholesky_solve([1.0], _t(3, 3)), "B"),
    (lambda: hsma_trsm.cholesky_solve(_t(3, 2), None), "L"),
    (lambda: hsma_trsm.cholesky_solve(_t(3, 2), _t(3, 3), upper=1), "upper"),
    (lambda: hsma_trsm.cholesky_solve(_t(3, 2), _t(3, 3), np.bool_(True)), "upper"),
    (lambda: hsma_trsm.cholesky_inverse(np.eye(3)), "L"),
    (lambda: hsma_trsm.cholesky_inverse(_t(3, 3), upper=None), "upper"),
    (lambda: hsma_trsm.lu_solve(_LU, [1, 2, 3], _t(3, 2)), "pivots"),
    (lambda: hsma_trsm.lu_solve(_LU, _PIV, _t(3, 2), left=0), "left"),
    (lambda: hsma_trsm.lu_solve(_LU, _PIV, _t(3, 2), adjoint=torch.tensor(True)), "adjoint"),
])
def test_argument_types(call, name):
    with pytest.raises(TypeError, match=f"argument '{name}'"):
        call()


def test_tensor_likes_take_the_call():
    """Objects with __torch_function__ get the call, as with torch's own functions."""
    class Handler:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return func.__name__, kwargs

    assert hsma_trsm.cholesky_solve(Handler(), _t(3, 3)) == ("cholesky_solve", {"upper": False})
    assert hsma_trsm.lu_solve(_LU, _PIV, Handler(), adjoint=True) == ("lu_solve", {"left": True, "adjoint": True})


def test_torch_compile_fullgraph(gen):
    """The public functions trace whole under torch.compile (forward and backward), with the eager values."""
    M = torch.randn(3, 5, 5, dtype=torch.float64, generator=gen)
    L0 = torch.linalg.cholesky(M @ M.mT + 5 * torch.eye(5, dtype=torch.float64))
    LU, piv = torch.linalg.lu_factor(M + 3 * torch.eye(5, dtype=torch.float64))
    B0 = torch.randn(3, 5, 2, dtype=torch.float64, generator=gen)

    def f(B, L):
        return (hsma_trsm.cholesky_solve(B, L).square().sum() + hsma_trsm.lu_solve(LU, piv, B, adjoint=True).sum()
                + hsma_trsm.cholesky_inverse(L, upper=False).sum())

    def run(fn):
        B, L = B0.clone().requires_grad_(), L0.clone().requires_grad_()
        out = fn(B, L)
        return (out.detach(), *torch.autograd.grad(out, (B, L)))

    torch._dynamo.reset()
    for a, b in zip(run(torch.compile(f, fullgraph=True)), run(f)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("call", ["cholesky_solve", "lu_solve"])
def test_batch_mismatch_message_as_torch(call):
    """Batch dims that do not broadcast: torch's RuntimeError, word for word."""
    B, F = torch.randn(3, 4, 2, dtype=torch.float64), torch.randn(2, 4, 4, dtype=torch.float64)
    piv = torch.ones(2, 4, dtype=torch.int32)
    ours = {"cholesky_solve": lambda: hsma_trsm.cholesky_solve(B, F),
            "lu_solve": lambda: hsma_trsm.lu_solve(F, piv, B)}
    theirs = {"cholesky_solve": lambda: torch.cholesky_solve(B, F),
              "lu_solve": lambda: torch.linalg.lu_solve(F, piv, B)}
    with pytest.raises(RuntimeError) as t:
        theirs[call]()
    with pytest.raises(RuntimeError, match="^" + re.escape(str(t.value)) + "$"):
        ours[call]()


def test_cpu_cholesky_inverse_of_a_singular_factor():
    """On the CPU without a gradient cholesky_inverse is torch's (LAPACK potri: LinAlgError for a zero pivot); with a
    gradient, hsma's solves give inf there (as documented)."""
    L = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    with pytest.raises(torch.linalg.LinAlgError):
        torch.cholesky_inverse(L)
    with pytest.raises(torch.linalg.LinAlgError):
        hsma_trsm.cholesky_inverse(L)
    X = hsma_trsm.cholesky_inverse(L.clone().requires_grad_())
    assert not torch.isfinite(X).all()
