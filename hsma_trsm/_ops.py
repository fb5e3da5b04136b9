"""Loads the compiled library and registers the Python-side parts of torch.ops.hsma.trsm:
the fake kernel (shape inference for torch.compile / FakeTensor) and the autograd formula."""
import glob
import os

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load_library():
    found = sorted(glob.glob(os.path.join(_HERE, "_C*.so")) + glob.glob(os.path.join(_HERE, "_C*.pyd")))
    if not found:
        raise ImportError(
            "hsma_trsm: the compiled extension (hsma_trsm/_C*.so) was not found next to "
            f"{_HERE}; build it with `pip install --no-build-isolation -e .`"
        )
    torch.ops.load_library(found[0])


_load_library()


def _result_shape(A, B, left):
    k = A.shape[-1]
    torch._check(A.dim() >= 2 and B.dim() >= 2, lambda: "hsma::trsm: A and B must have at least 2 dimensions")
    torch._check(A.shape[-1] == A.shape[-2], lambda: f"hsma::trsm: A must be square, got {tuple(A.shape)}")
    m, n = B.shape[-2], B.shape[-1]
    torch._check(
        k == (m if left else n),
        lambda: f"hsma::trsm: A is {k}x{k} but B is {m}x{n} (left={left})",
    )
    torch._check(A.dtype == B.dtype, lambda: f"hsma::trsm: A and B must have the same dtype, got {A.dtype} and {B.dtype}")
    batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    return (*batch, m, n)


@torch.library.register_fake("hsma::trsm")
def _trsm_fake(A, B, *, left=True, upper=False, trans="N", unitriangular=False, alpha=1):
    return B.new_empty(_result_shape(A, B, left))


@torch.library.register_fake("hsma::trsm_")
def _trsm_inplace_fake(A, B, *, left=True, upper=False, trans="N", unitriangular=False, alpha=1):
    _result_shape(A, B, left)
    return B


# --------------------------------------------------------------------------------------------
# Autograd. With T = op(A):
#   left:  T X = alpha B  ->  G = T^{-H} gX,  gB = conj(alpha) G,  gT = -G X^H
#   right: X T = alpha B  ->  G = gX T^{-H},  gB = conj(alpha) G,  gT = -X^H G
# gA is gT mapped back through op (transpose / conjugate-transpose) and projected on the triangle
# that was read (strictly, when the diagonal is unit). The solves call the op itself, so double
# backward works.

_ADJOINT_TRANS = {"N": "C", "T": "N", "C": "N"}


def _adjoint_solve(A, gX, left, upper, trans, unitriangular):
    """G = T^{-H} gX (left) or gX T^{-H} (right), T = op(A)."""
    trans = trans.upper()
    if A.is_complex() and trans == "T":
        A = A.conj()  # T^H = (A^T)^H = conj(A): solve with conj(A), no transpose
    return torch.ops.hsma.trsm(
        A, gX, left=left, upper=upper, trans=_ADJOINT_TRANS[trans], unitriangular=unitriangular
    )


def _reduce_to(grad, shape):
    """Sums a broadcast gradient back to `shape` (batch dims only)."""
    if tuple(grad.shape) == tuple(shape):
        return grad
    lead = grad.dim() - len(shape)
    if lead:
        grad = grad.sum(dim=tuple(range(lead)))
    dims = tuple(i for i, s in enumerate(shape[:-2]) if s == 1 and grad.shape[i] != 1)
    if dims:
        grad = grad.sum(dim=dims, keepdim=True)
    return grad


def _setup_context(ctx, inputs, keyword_only_inputs, output):
    A, B = inputs
    ctx.kw = dict(keyword_only_inputs)
    ctx.a_shape, ctx.b_shape = A.shape, B.shape
    ctx.save_for_backward(A, output)


def _backward(ctx, gX):
    A, X = ctx.saved_tensors
    kw = ctx.kw
    left, upper = kw.get("left", True), kw.get("upper", False)
    trans, unit = kw.get("trans", "N").upper(), kw.get("unitriangular", False)
    alpha = kw.get("alpha", 1)
    G = _adjoint_solve(A, gX, left, upper, trans, unit)
    gA = gB = None
    if ctx.needs_input_grad[1]:
        gB = G if alpha == 1 else G * (alpha.conjugate() if isinstance(alpha, complex) else alpha)
        gB = _reduce_to(gB, ctx.b_shape)
    if ctx.needs_input_grad[0]:
        gT = -(G @ X.mH) if left else -(X.mH @ G)
        if trans == "T":
            gT = gT.mT
        elif trans == "C":
            gT = gT.mH
        gA = gT.triu(1 if unit else 0) if upper else gT.tril(-1 if unit else 0)
        gA = _reduce_to(gA, ctx.a_shape)
    return gA, gB


torch.library.register_autograd("hsma::trsm", _backward, setup_context=_setup_context)
