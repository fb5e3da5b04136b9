"""Autograd of torch.ops.hsma.trsm: gradcheck / gradgradcheck (finite differences are the
independent reference), the projection of A's gradient onto the triangle that was read, broadcast
reduction, and agreement with torch.linalg.solve_triangular's gradients."""
import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

import hsma_trsm
from conftest import (
    CUDA_DEVICES,
    DEVICES,
    TRANS,
    b_shape,
    default_alpha,
    dtype_id,
    hsma_solver,
    make_rhs,
    make_triangular,
    randn_like,
    triangle_mask,
)

BOOL = [False, True]
GRAD_DTYPES = [torch.float64, torch.complex128]


def _torch_solver(left, upper, trans, unit, alpha):
    """The same solve written with torch.linalg.solve_triangular (gradients from torch)."""

    def f(A, B):
        T = {"N": A, "T": A.mT, "C": A.mH}[trans]
        up = upper if trans == "N" else not upper
        return torch.linalg.solve_triangular(T, alpha * B, upper=up, left=left, unitriangular=unit)

    return f


def _leaves(k, other, *, left, upper, unit, dtype, device, gen, a_batch=(), b_batch=(), fill=None):
    """A (junk, finite, in the unused part unless `fill`) and B, both requiring grad."""
    A = make_triangular(k, batch=a_batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen, fill=fill)
    B = make_rhs(b_shape(k, other, left=left, batch=b_batch), dtype=dtype, device=device, gen=gen)
    return A.requires_grad_(), B.requires_grad_()


# ---------------------------------------------------------------------------------------------
# gradcheck / gradgradcheck over every variant (small k; the unused part of A holds finite junk,
# so finite differences also check that it is not read).


# (device, k, other, alpha): on CUDA only the k = 3 case (each finite difference is a launch).
GRADCHECK_CASES = [
    pytest.param("cpu", 3, 2, "default", id="cpu-k3-alpha"),
    pytest.param("cpu", 5, 4, 1, id="cpu-k5"),
    pytest.param(*CUDA_DEVICES[0].values, 3, 2, "default", marks=CUDA_DEVICES[0].marks, id="cuda-k3-alpha"),
]


@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("unit", BOOL, ids=["nonunit", "unit"])
@pytest.mark.parametrize("device,k,other,alpha", GRADCHECK_CASES)
def test_gradcheck_variants(device, dtype, left, upper, trans, unit, k, other, alpha, gen):
    alpha = default_alpha(dtype) if alpha == "default" else alpha
    A, B = _leaves(k, other, left=left, upper=upper, unit=unit, dtype=dtype, device=device, gen=gen)
    f = hsma_solver(left, upper, trans, unit, alpha)
    assert gradcheck(f, (A, B))
    assert gradgradcheck(f, (A, B))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize(
    "a_batch,b_batch",
    [((2, 1), (3,)), ((), (4,)), ((5,), ()), ((1,), (2,))],
    ids=["A21-B3", "A-B4", "A5-B", "A1-B2"],
)
def test_gradcheck_broadcast(device, dtype, left, a_batch, b_batch, gen):
    upper, trans, unit = left, ("C" if left else "T"), not left
    A, B = _leaves(3, 2, left=left, upper=upper, unit=unit, dtype=dtype, device=device, gen=gen,
                   a_batch=a_batch, b_batch=b_batch)
    f = hsma_solver(left, upper, trans, unit, default_alpha(dtype))
    assert gradcheck(f, (A, B))
    assert gradgradcheck(f, (A, B))


# ---------------------------------------------------------------------------------------------
# Gradients against torch.linalg.solve_triangular's, and the shape of A's gradient.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + [torch.float32, torch.complex64], ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("unit", BOOL, ids=["nonunit", "unit"])
@pytest.mark.parametrize("k,a_batch,b_batch", [(4, (2, 1), (3,)), (70, (), (2,))], ids=["k4-bcast", "k70"])
def test_grads_match_torch(device, dtype, left, upper, trans, unit, k, a_batch, b_batch, gen):
    alpha = default_alpha(dtype)
    A, B = _leaves(k, 3, left=left, upper=upper, unit=unit, dtype=dtype, device=device, gen=gen,
                   a_batch=a_batch, b_batch=b_batch)
    X = hsma_solver(left, upper, trans, unit, alpha)(A, B)
    G = randn_like(X, gen)
    gA, gB = torch.autograd.grad(X, (A, B), G)
    A2, B2 = A.detach().clone().requires_grad_(), B.detach().clone().requires_grad_()
    X2 = _torch_solver(left, upper, trans, unit, alpha)(A2, B2)
    gA2, gB2 = torch.autograd.grad(X2, (A2, B2), G)
    assert gA.shape == A.shape and gB.shape == B.shape  # broadcast dims reduced
    tol = 1e-4 if dtype in (torch.float32, torch.complex64) else 1e-10
    torch.testing.assert_close(X, X2, rtol=tol, atol=tol)
    torch.testing.assert_close(gB, gB2, rtol=tol, atol=tol * gB2.abs().max().item())
    torch.testing.assert_close(gA, gA2, rtol=tol, atol=tol * gA2.abs().max().item())
    # A's gradient vanishes exactly off the triangle that was read.
    unused = ~triangle_mask(k, upper=upper, unit=unit, device=device)
    assert torch.count_nonzero(gA[..., unused]) == 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("unit", BOOL, ids=["nonunit", "unit"])
@pytest.mark.parametrize("k", [4, 80])
def test_drop_in_grads_match_torch(device, dtype, left, upper, unit, k, gen):
    A, B = _leaves(k, 2, left=left, upper=upper, unit=unit, dtype=dtype, device=device, gen=gen, b_batch=(2,))
    X = hsma_trsm.solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)
    G = randn_like(X, gen)
    gA, gB = torch.autograd.grad(X, (A, B), G)
    A2, B2 = A.detach().clone().requires_grad_(), B.detach().clone().requires_grad_()
    X2 = torch.linalg.solve_triangular(A2, B2, upper=upper, left=left, unitriangular=unit)
    gA2, gB2 = torch.autograd.grad(X2, (A2, B2), G)
    torch.testing.assert_close(X, X2, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(gA, gA2, rtol=1e-10, atol=1e-10 * gA2.abs().max().item())
    torch.testing.assert_close(gB, gB2, rtol=1e-10, atol=1e-10 * gB2.abs().max().item())
    if k == 4:
        f = lambda A, B: hsma_trsm.solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)  # noqa: E731
        assert gradcheck(f, (A, B))
        assert gradgradcheck(f, (A, B))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("unit", BOOL, ids=["nonunit", "unit"])
def test_grad_A_zero_off_triangle_with_nan(device, dtype, left, upper, trans, unit, gen):
    """With NaN in the unused part of A, the gradients are finite, A's is exactly zero there
    (and on the diagonal when unitriangular), and equal to those of the cleaned-up A."""
    k = 6
    A, B = _leaves(k, 3, left=left, upper=upper, unit=unit, dtype=dtype, device=device, gen=gen,
                   fill=float("nan"))
    f = hsma_solver(left, upper, trans, unit, default_alpha(dtype))
    X = f(A, B)
    G = randn_like(X, gen)
    gA, gB = torch.autograd.grad(X, (A, B), G)
    assert torch.isfinite(gA).all() and torch.isfinite(gB).all()
    used = triangle_mask(k, upper=upper, unit=unit, device=device)
    assert torch.count_nonzero(gA[~used]) == 0
    assert torch.count_nonzero(gA[used]) == used.sum()  # a random cotangent reaches every used entry
    # Second order: grad of <gA, W> w.r.t. B is finite too.
    A.grad = None
    X = f(A, B)
    gA, = torch.autograd.grad(X, A, G, create_graph=True)
    W = torch.randn(gA.shape, dtype=gA.dtype, generator=gen).to(device)
    ggB, = torch.autograd.grad((gA * W.conj()).real.sum(), B)
    assert torch.isfinite(ggB).all()
    # Same gradients as with zeros in the unused part.
    A0 = torch.where(used, A.detach(), torch.zeros((), dtype=dtype, device=device)).requires_grad_()
    gA0, gB0 = torch.autograd.grad(f(A0, B), (A0, B), G)
    torch.testing.assert_close(gA, gA0, rtol=0, atol=0)
    torch.testing.assert_close(gB, gB0, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("which", ["A", "B"])
def test_grad_one_input(device, which, gen):
    """Only one input requires grad: the other gets none, and the one computed is right."""
    dtype, k = torch.complex128, 5
    A = make_triangular(k, dtype=dtype, upper=True, device=device, gen=gen, fill=None)
    B = make_rhs((3, k), dtype=dtype, device=device, gen=gen)
    (A if which == "A" else B).requires_grad_()
    f = hsma_solver(False, True, "T", False, 0.5j)
    X = f(A, B)
    assert X.requires_grad
    X.abs().sum().backward()
    assert (A.grad is None) == (which == "B") and (B.grad is None) == (which == "A")
    assert gradcheck(f, (A, B))


@pytest.mark.parametrize("device", DEVICES)
def test_no_grad_no_graph(device, gen):
    A, B = _leaves(4, 2, left=True, upper=False, unit=False, dtype=torch.float64, device=device, gen=gen)
    with torch.no_grad():
        X = torch.ops.hsma.trsm(A, B)
    assert not X.requires_grad and X.grad_fn is None


# ---------------------------------------------------------------------------------------------
# CUDA: the small path and the blocked path (k = 70 with NB = 32).


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
@pytest.mark.parametrize(
    "left,upper,trans,unit", [(True, False, "N", False), (False, True, "C", True), (True, True, "T", False),
                              (False, False, "T", True)]
)
def test_gradcheck_cuda_blocked(device, dtype, left, upper, trans, unit, block_size, gen):
    block_size(32)
    k = 70
    A, B = _leaves(k, 2, left=left, upper=upper, unit=unit, dtype=dtype, device=device, gen=gen, b_batch=(2,))
    f = hsma_solver(left, upper, trans, unit, default_alpha(dtype))
    assert gradcheck(f, (A, B), fast_mode=True)
    assert gradgradcheck(f, (A, B), fast_mode=True)
    # And the full gradients equal the CPU ones.
    X = f(A, B)
    G = randn_like(X, gen)
    gA, gB = torch.autograd.grad(X, (A, B), G)
    Ac, Bc = A.detach().cpu().requires_grad_(), B.detach().cpu().requires_grad_()
    gAc, gBc = torch.autograd.grad(f(Ac, Bc), (Ac, Bc), G.cpu())
    torch.testing.assert_close(gA.cpu(), gAc, rtol=1e-9, atol=1e-9 * gAc.abs().max().item())
    torch.testing.assert_close(gB.cpu(), gBc, rtol=1e-9, atol=1e-9 * gBc.abs().max().item())
