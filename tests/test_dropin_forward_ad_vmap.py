"""Forward-mode AD (torch.autograd.forward_ad and torch.func.jvp), functorch transforms
(grad, jacrev, jacfwd, hessian), double backward, the no-grad fast path, and torch.func.vmap
(batch rules of hsma::trsm and hsma::trsm_) -- for the op and the drop-in.

References: finite differences (gradcheck / central differences, independent of any formula)
and torch.linalg.solve_triangular's own derivatives and vmap."""
import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.autograd import gradcheck, gradgradcheck
from torch.func import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap

import hsma_trsm
from conftest import (
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


def _torch_op(left, upper, trans, unit, alpha):
    """The same solve through torch.linalg.solve_triangular (torch's derivatives), on the cleaned
    triangle of A so that torch sees exactly what the op reads."""

    def f(A, B):
        k = A.shape[-1]
        used = triangle_mask(k, upper=upper, unit=unit, device=A.device)
        Ac = torch.where(used, A, torch.zeros((), dtype=A.dtype, device=A.device))
        if unit:
            Ac = Ac + torch.eye(k, dtype=A.dtype, device=A.device)
        T = {"N": Ac, "T": Ac.mT, "C": Ac.mH}[trans]
        up = upper if trans == "N" else not upper
        return torch.linalg.solve_triangular(T, alpha * B, upper=up, left=left)

    return f


def _inputs(k, other, *, left, upper, unit, dtype, device, gen, a_batch=(), b_batch=(), fill=None):
    A = make_triangular(k, batch=a_batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen, fill=fill)
    B = make_rhs(b_shape(k, other, left=left, batch=b_batch), dtype=dtype, device=device, gen=gen)
    return A, B


# ---------------------------------------------------------------------------------------------
# Forward mode: gradcheck's forward-AD check (finite differences) over every variant.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("unit", BOOL, ids=["nonunit", "unit"])
def test_gradcheck_forward_ad(device, dtype, left, upper, trans, unit, gen):
    """Forward AD (and batched forward AD, i.e. vmap over jvp) against finite differences; the
    unused part of A holds finite junk, so a tangent that leaks from it is caught."""
    A, B = _inputs(3, 2, left=left, upper=upper, unit=unit, dtype=dtype, device=device, gen=gen, b_batch=(2,))
    f = hsma_solver(left, upper, trans, unit, default_alpha(dtype))
    assert gradcheck(f, (A.requires_grad_(), B.requires_grad_()), check_forward_ad=True, check_backward_ad=False,
                     check_undefined_grad=False, check_batched_forward_grad=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left,upper,trans,unit", [(True, False, "N", True), (False, True, "C", False),
                                                   (True, True, "T", True), (False, False, "T", False)])
def test_gradgradcheck_fwd_over_rev(device, dtype, left, upper, trans, unit, gen):
    """Double backward and forward-over-reverse (the backward formula's own tangents)."""
    A, B = _inputs(3, 2, left=left, upper=upper, unit=unit, dtype=dtype, device=device, gen=gen, a_batch=(2, 1),
                   b_batch=(3,))
    f = hsma_solver(left, upper, trans, unit, default_alpha(dtype))
    assert gradgradcheck(f, (A.requires_grad_(), B.requires_grad_()), check_fwd_over_rev=True,
                         check_rev_over_rev=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES + [torch.float32, torch.complex64], ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("unit", BOOL, ids=["nonunit", "unit"])
@pytest.mark.parametrize("k,a_batch,b_batch", [(5, (2, 1), (3,)), (70, (), (2,))], ids=["k5-bcast", "k70"])
def test_jvp_matches_torch(device, dtype, left, trans, unit, k, a_batch, b_batch, gen):
    """torch.func.jvp and torch.autograd.forward_ad give torch's tangents (of the solve on the
    cleaned triangle); tangents on both inputs, on A only, on B only."""
    upper = trans != "T"
    alpha = default_alpha(dtype)
    A, B = _inputs(k, 3, left=left, upper=upper, unit=unit, dtype=dtype, device=device, gen=gen, a_batch=a_batch,
                   b_batch=b_batch, fill=float("nan"))
    dA, dB = randn_like(A, gen), randn_like(B, gen)
    f, g = hsma_solver(left, upper, trans, unit, alpha), _torch_op(left, upper, trans, unit, alpha)
    tol = 1e-4 if dtype in (torch.float32, torch.complex64) else 1e-10
    for tangents in [(dA, dB), (dA, torch.zeros_like(B)), (torch.zeros_like(A), dB)]:
        X, dX = jvp(f, (A, B), tangents)
        X2, dX2 = jvp(g, (A, B), tangents)
        assert dX.shape == X.shape and torch.isfinite(dX).all()
        torch.testing.assert_close(X, X2, rtol=tol, atol=tol * X2.abs().max().item())
        torch.testing.assert_close(dX, dX2, rtol=tol, atol=tol * dX2.abs().max().item())
    # torch.autograd.forward_ad, with a tangent on A only (B an ordinary tensor).
    with fwAD.dual_level():
        X3 = f(fwAD.make_dual(A, dA), B)
        X3, dX3 = fwAD.unpack_dual(X3)
    _, dX4 = jvp(g, (A, B), (dA, torch.zeros_like(B)))
    torch.testing.assert_close(dX3, dX4, rtol=tol, atol=tol * dX4.abs().max().item())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("left", BOOL, ids=["right", "left"])
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
def test_jvp_central_differences(device, dtype, left, upper, gen):
    """jvp of the drop-in against central differences of the drop-in itself."""
    k = 6
    A, B = _inputs(k, 4, left=left, upper=upper, unit=False, dtype=dtype, device=device, gen=gen, fill=0.0)
    used = triangle_mask(k, upper=upper, unit=False, device=device)
    dA = torch.where(used, randn_like(A, gen), torch.zeros((), dtype=dtype, device=device))
    dB = randn_like(B, gen)

    def f(A, B):
        return hsma_trsm.solve_triangular(A, B, upper=upper, left=left)

    _, dX = jvp(f, (A, B), (dA, dB))
    h = 1e-6
    fd = (f(A + h * dA, B + h * dB) - f(A - h * dA, B - h * dB)) / (2 * h)
    torch.testing.assert_close(dX, fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("upper", BOOL, ids=["lower", "upper"])
@pytest.mark.parametrize("trans", TRANS)
def test_unit_diagonal_and_unused_part_have_no_tangent(device, dtype, upper, trans, gen):
    """A tangent on the unit diagonal or on the unused triangle changes nothing (exact zero);
    the same tangent on a non-unit diagonal does change X."""
    k = 7
    A, B = _inputs(k, 3, left=True, upper=upper, unit=True, dtype=dtype, device=device, gen=gen, fill=0.0)
    ignored = ~triangle_mask(k, upper=upper, unit=True, device=device)  # diagonal + other triangle
    dA = torch.where(ignored, randn_like(A, gen), torch.zeros((), dtype=dtype, device=device))
    _, dX = jvp(hsma_solver(True, upper, trans, True, 1), (A, B), (dA, torch.zeros_like(B)))
    assert torch.count_nonzero(dX) == 0
    A_nonunit = A.clone()
    A_nonunit.diagonal(dim1=-2, dim2=-1).fill_(1.5)
    _, dX = jvp(hsma_solver(True, upper, trans, False, 1), (A_nonunit, B), (dA, torch.zeros_like(B)))
    assert torch.count_nonzero(dX) > 0  # the diagonal's tangent counts when it is read
    # Reverse mode and the Hessian agree: nothing flows to / from the ignored entries.
    Ar = A.clone().requires_grad_()
    X = hsma_solver(True, upper, trans, True, 1)(Ar, B)
    (gA,) = torch.autograd.grad(X.abs().sum(), Ar, create_graph=True)
    assert torch.count_nonzero(gA.detach()[..., ignored]) == 0
    (ggA,) = torch.autograd.grad((gA * randn_like(gA, gen)).real.sum(), Ar)
    assert torch.count_nonzero(ggA[..., ignored]) == 0


@pytest.mark.parametrize("device", DEVICES)
def test_functorch_transforms_match_torch(device, gen):
    """torch.func.grad, vjp, jacrev, jacfwd and hessian (forward-over-reverse) of the drop-in
    equal those of torch.linalg.solve_triangular."""
    dtype, k = torch.float64, 5
    A, B = _inputs(k, 2, left=True, upper=True, unit=False, dtype=dtype, device=device, gen=gen, fill=0.0)

    def ours(A, B):
        return hsma_trsm.solve_triangular(A, B, upper=True)

    def theirs(A, B):
        return torch.linalg.solve_triangular(A.triu(), B, upper=True)

    def loss(f):
        return lambda A, B: (f(A, B) ** 2).sum()

    tol = dict(rtol=1e-10, atol=1e-10)
    for argnums in (0, 1, (0, 1)):
        torch.testing.assert_close(grad(loss(ours), argnums)(A, B), grad(loss(theirs), argnums)(A, B), **tol)
    X, pull = vjp(ours, A, B)
    X2, pull2 = vjp(theirs, A, B)
    G = randn_like(X, gen)
    torch.testing.assert_close(pull(G), pull2(G), **tol)
    for jac in (jacrev, jacfwd):
        torch.testing.assert_close(jac(ours, argnums=(0, 1))(A, B), jac(theirs, argnums=(0, 1))(A, B), **tol)
    torch.testing.assert_close(hessian(loss(ours))(A, B), hessian(loss(theirs))(A, B), **tol)
    torch.testing.assert_close(jacfwd(jacrev(loss(ours), argnums=1), argnums=1)(A, B),
                               hessian(loss(theirs), argnums=1)(A, B), **tol)


# ---------------------------------------------------------------------------------------------
# The Autograd kernel's fast path and graph.


@pytest.mark.parametrize("device", DEVICES)
def test_no_grad_fast_path_builds_no_graph(device, gen):
    A, B = _inputs(4, 2, left=True, upper=False, unit=False, dtype=torch.float64, device=device, gen=gen)
    A.requires_grad_()
    with torch.no_grad():
        assert torch.ops.hsma.trsm(A, B).grad_fn is None
    with torch.inference_mode():
        X = torch.ops.hsma.trsm(A, B)
        assert X.grad_fn is None and X.is_inference()
    X = torch.ops.hsma.trsm(A.detach(), B)  # grad mode on, nothing requires grad
    assert X.grad_fn is None and not X.requires_grad
    X = torch.ops.hsma.trsm(A, B)  # reverse mode only: a torch::autograd::Function node
    assert X.requires_grad and "TrsmFunction" in X.grad_fn.name()
    with fwAD.dual_level():  # with a tangent: the hand-made node, which also sets the tangent
        Xd = torch.ops.hsma.trsm(A, fwAD.make_dual(B, torch.ones_like(B)))
        assert Xd.grad_fn.name() == "HsmaTrsmBackward"
        assert Xd.grad_fn.next_functions[1][0] is None  # B needs no gradient: no edge
        assert fwAD.unpack_dual(Xd).tangent is not None
    # A saved-tensor graph is released after backward; a second backward is refused.
    X.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        X.sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_refuses_forward_ad(device, gen):
    A, B = _inputs(4, 2, left=True, upper=False, unit=False, dtype=torch.float64, device=device, gen=gen)
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="does not support forward-mode AD"):
            torch.ops.hsma.trsm_(fwAD.make_dual(A, torch.ones_like(A)), B.clone())
        with pytest.raises(RuntimeError, match="does not support forward-mode AD"):
            torch.ops.hsma.trsm_(A, fwAD.make_dual(B.clone(), torch.ones_like(B)))


# ---------------------------------------------------------------------------------------------
# vmap


def test_batch_rules_are_registered():
    """vmap uses the batch rules, not functorch's per-sample fallback."""
    for op in ("hsma::trsm", "hsma::trsm_"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op, "FuncTorchBatched")


# (in_dims, A shape, B shape) for a left solve with k = 4: the vmapped dim of size 3 is where
# in_dims says; logical A/B batch shapes differ to exercise broadcasting inside vmap.
VMAP_CASES = [
    pytest.param((0, 0), (3, 4, 4), (3, 4, 2), id="both-dim0"),
    pytest.param((0, None), (3, 4, 4), (4, 2), id="A-only"),
    pytest.param((None, 0), (4, 4), (3, 4, 2), id="B-only"),
    pytest.param((1, 2), (2, 3, 4, 4), (4, 2, 3), id="dims-1-2"),
    pytest.param((-3, -1), (3, 4, 4), (5, 4, 2, 3), id="negative-dims"),
    pytest.param((0, 1), (3, 2, 1, 4, 4), (6, 3, 4, 2), id="logical-broadcast"),
    pytest.param((2, 0), (1, 5, 3, 4, 4), (3, 5, 4, 2), id="A-more-batch-dims"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("in_dims,a_shape,b_shape_", VMAP_CASES)
@pytest.mark.parametrize("fn", ["dropin", "op"])
def test_vmap_matches_torch(device, dtype, in_dims, a_shape, b_shape_, fn, gen):
    A = torch.randn(a_shape, dtype=dtype, generator=gen).to(device)
    A = A + 3 * torch.eye(4, dtype=dtype, device=device)  # well conditioned on the read triangle
    B = torch.randn(b_shape_, dtype=dtype, generator=gen).to(device)
    if fn == "dropin":
        def ours(a, b):
            return hsma_trsm.solve_triangular(a, b, upper=True)
    else:
        def ours(a, b):
            return torch.ops.hsma.trsm(a, b, upper=True, trans="C", alpha=0.5)

    def theirs(a, b):
        if fn == "dropin":
            return torch.linalg.solve_triangular(a.triu(), b, upper=True)
        return torch.linalg.solve_triangular(a.triu().mH, 0.5 * b, upper=False)

    X = vmap(ours, in_dims=in_dims)(A, B)
    X2 = vmap(theirs, in_dims=in_dims)(A, B)
    assert X.shape == X2.shape
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(X, X2, rtol=tol, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
def test_vmap_nested_and_with_grad(device, gen):
    dtype = torch.float64
    A = torch.randn(3, 5, 4, 4, dtype=dtype, generator=gen).to(device) + 3 * torch.eye(4, dtype=dtype, device=device)
    B = torch.randn(5, 3, 4, 2, dtype=dtype, generator=gen).to(device)

    def ours(a, b):
        return hsma_trsm.solve_triangular(a, b, upper=False, left=True, unitriangular=True)

    def theirs(a, b):
        return torch.linalg.solve_triangular(a.tril(-1) + torch.eye(4, dtype=dtype, device=device), b, upper=False)

    nest = lambda f: vmap(vmap(f, in_dims=(0, 0)), in_dims=(0, 1))  # noqa: E731
    torch.testing.assert_close(nest(ours)(A, B), nest(theirs)(A, B), rtol=1e-12, atol=1e-12)
    # Per-sample gradients (vmap over grad) and the vmapped backward of jacrev.
    loss = lambda f: (lambda a, b: (f(a, b) ** 3).sum())  # noqa: E731
    torch.testing.assert_close(vmap(grad(loss(ours)))(A[:, 0], B[0]), vmap(grad(loss(theirs)))(A[:, 0], B[0]),
                               rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(jacrev(ours)(A[0, 0], B[0, 0]), jacrev(theirs)(A[0, 0], B[0, 0]),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_vmap_inplace(device, gen):
    dtype = torch.complex64
    A = make_triangular(6, batch=(3,), dtype=dtype, upper=True, device=device, gen=gen)
    B = make_rhs((6, 3, 2), dtype=dtype, device=device, gen=gen)  # vmapped dim of B: 1

    def solve_into(a, b):
        torch.ops.hsma.trsm_(a, b, upper=True, left=True, trans="T")
        return b

    B0 = B.clone()
    r = vmap(solve_into, in_dims=(0, 1), out_dims=1)(A, B)
    assert r.data_ptr() == B.data_ptr()  # written into B's own memory
    ref = torch.stack([torch.ops.hsma.trsm(A[i], B0[:, i], upper=True, trans="T") for i in range(3)], dim=1)
    torch.testing.assert_close(B, ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="B is not batched while A is"):
        vmap(solve_into, in_dims=(0, None))(A, B0[:, 0].clone())


@pytest.mark.parametrize("device", DEVICES)
def test_vmap_errors(device):
    A = torch.eye(3, dtype=torch.float64, device=device).expand(2, 3, 3)
    with pytest.raises(RuntimeError, match=r"hsma::trsm: B must have at least 2 dimensions"):
        vmap(lambda a, b: torch.ops.hsma.trsm(a, b))(A, torch.ones(2, 3, dtype=torch.float64, device=device))
    with pytest.raises(RuntimeError, match=r"hsma::trsm: A is 3x3 but B is 4x2"):
        vmap(lambda a, b: torch.ops.hsma.trsm(a, b))(A, torch.ones(2, 4, 2, dtype=torch.float64, device=device))
