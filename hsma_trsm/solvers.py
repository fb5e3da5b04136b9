"""Solvers built on the triangular solve: cholesky_solve, cholesky_inverse and lu_solve.

Each checks its arguments as torch does (torch's exception types and messages), then calls the op
``torch.ops.hsma.cholesky_solve`` / ``cholesky_inverse`` / ``lu_solve`` (``csrc/ops/solvers.cpp``): two
triangular solves on hsma's kernels (plus, for LU, the pivots' permutation and a gather), with the results
and output layout of torch's function of the same name. Autograd comes from the composition: trsm's
registered formulas and the gather's. The switch's kernels (:mod:`hsma_trsm.switch`) run the same
compositions. On the CPU, an eager call that records no gradient is torch's own function (LAPACK), as the CPU
``solve_triangular`` is; complex ``cholesky_inverse`` excepted (LAPACK's potri ignores the imaginary part of the
factor's diagonal).
"""
import torch
from torch.overrides import handle_torch_function, has_torch_function

from ._ops import _C, _is_compiling
from .api import _OP_ERRORS, _check_bool, _check_tensor, _identities_replicated, _renamed, _typename, _unsupported

__all__ = ["cholesky_solve", "cholesky_inverse", "lu_solve"]


# ---------------------------------------------------------------------------------------------
# Public functions: argument types, then the cores.


def cholesky_solve(B, L, upper=False):
    r"""Drop-in replacement for :func:`torch.cholesky_solve`: solves ``A X = B`` given the Cholesky
    factor of the Hermitian positive-definite ``A`` (``A = L L^H``, or ``A = U^H U`` with ``upper``).

    Args:
        B (Tensor): ``(*, k, n)`` right-hand sides.
        L (Tensor): ``(*, k, k)`` lower (or with ``upper``, upper) triangular Cholesky factor; only that
            triangle is read. Batch dims of B and L broadcast.
        upper (bool): L is upper triangular. Default False.

    Returns:
        Tensor: X, ``(*broadcast batch, k, n)``, in torch's layout (each matrix column-major).

    Dtypes: float32, float64, complex64, complex128, as torch's; others, bfloat16 and float16 included, raise
    :class:`hsma_trsm.UnsupportedDtypeError` (a NotImplementedError, as torch raises, and a TypeError). B and L
    of one dtype, as torch requires. CPU and CUDA.

    Raises:
        RuntimeError: B or L with fewer than 2 dims, L not square, L's order not B's rows, different dtypes
            or devices, batch dims that do not broadcast (torch's messages).
        TypeError: B or L not a Tensor, ``upper`` not a bool (naming the argument).

    Example::

        >>> L = torch.tensor([[2.0, 0.0], [1.0, 4.0]])   # A = L L^T = [[4, 2], [2, 17]]
        >>> hsma_trsm.cholesky_solve(torch.tensor([[8.0], [36.0]]), L)
        tensor([[1.],
                [2.]])

    Method: ``Y = L^{-1} B`` then ``X = L^{-H} Y`` (upper: ``U^{-H}``, then ``U^{-1}``), two triangular
    solves on hsma's kernels; the second is written as the transposed (right-side) solve so that X comes
    out column-major as torch's does, without a copy. Differentiable (reverse and forward mode). On the CPU
    without a gradient: torch's function (LAPACK potrs).
    """
    try:
        if not _is_compiling():
            X = _C.cholesky_solve(B, L, upper)  # the eager entry (csrc/ops/python_entry.cpp); None: the checks below
            if X is not None:
                return X
        if has_torch_function((B, L)):
            return handle_torch_function(cholesky_solve, (B, L), B, L, upper=upper)
        _check_tensor("hsma_trsm.cholesky_solve", "B", 1, B)
        _check_tensor("hsma_trsm.cholesky_solve", "L", 2, L)
        _check_bool("hsma_trsm.cholesky_solve", "upper", upper)
        return _cholesky_solve(B, L, upper)
    except _OP_ERRORS as e:
        raise _renamed(e, "hsma_trsm.cholesky_solve") from None


def cholesky_inverse(L, upper=False):
    r"""Drop-in replacement for :func:`torch.cholesky_inverse`: the inverse of ``A = L L^H`` (or
    ``A = U^H U`` with ``upper``) from its Cholesky factor.

    Args:
        L (Tensor): ``(*, k, k)`` lower (or upper) triangular Cholesky factor; only that triangle is read.
        upper (bool): L is upper triangular. Default False.

    Returns:
        Tensor: ``A^{-1}``, ``(*, k, k)``, column-major as torch's. Hermitian up to rounding (as torch's
        CUDA result); exactly Hermitian where torch's CPU function runs (below).

    Dtypes, devices and differentiability as :func:`cholesky_solve`.

    Raises:
        RuntimeError: L with fewer than 2 dims or not square (torch's messages).
        TypeError: L not a Tensor, ``upper`` not a bool.

    Example::

        >>> L = torch.tensor([[2.0, 0.0], [1.0, 4.0]])   # A = L L^T = [[4, 2], [2, 17]]
        >>> torch.allclose(hsma_trsm.cholesky_inverse(L) * 64, torch.tensor([[17.0, -2.0], [-2.0, 4.0]]))
        True

    Method: :func:`cholesky_solve` against the identity (two triangular solves), as torch does on CUDA. On the
    CPU, real L, without a gradient: torch's function (LAPACK potri), which raises
    :class:`torch.linalg.LinAlgError` for a zero on L's diagonal; the solves return inf or nan there.
    """
    try:
        if not _is_compiling():
            X = _C.cholesky_inverse(L, upper)  # the eager entry, as in cholesky_solve
            if X is not None:
                return X
        if has_torch_function((L,)):
            return handle_torch_function(cholesky_inverse, (L,), L, upper=upper)
        _check_tensor("hsma_trsm.cholesky_inverse", "L", 1, L)
        _check_bool("hsma_trsm.cholesky_inverse", "upper", upper)
        with _identities_replicated(L):  # DTensor L: the identity the op solves against counts as replicated
            return _cholesky_inverse(L, upper)
    except _OP_ERRORS as e:
        raise _renamed(e, "hsma_trsm.cholesky_inverse") from None


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    r"""Drop-in replacement for :func:`torch.linalg.lu_solve`: solves ``A X = B`` (``left=False``:
    ``X A = B``; ``adjoint``: with ``A^H`` in place of ``A``) given the LU factorisation ``A = P L U`` of
    :func:`torch.linalg.lu_factor`.

    Args:
        LU (Tensor): ``(*, k, k)`` packed factors: L unit lower triangular below the diagonal (its diagonal
            is not read), U upper triangular on and above it.
        pivots (Tensor): ``(*, k)`` int32, LAPACK's 1-based row interchanges; batch dims exactly LU's.
        B (Tensor): ``(*, k, n)`` (left) or ``(*, n, k)`` (right); batch dims broadcast with LU's.
        left (bool): solve ``A X = B`` (True) or ``X A = B`` (False). Default True.
        adjoint (bool): use ``A^H``. Default False.

    Returns:
        Tensor: X of B's shape with the broadcast batch dims, in torch's layout (column-major matrices for
        ``left``, row-major otherwise).

    Dtypes: LU and B of one dtype among float32, float64, complex64, complex128 (others, bfloat16 and float16
    included, raise :class:`hsma_trsm.UnsupportedDtypeError`, as :func:`cholesky_solve`); pivots int32. CPU and
    CUDA.

    Raises:
        RuntimeError: as torch: dims, LU not square, incompatible shapes, LU and B of different dtypes,
            pivots not int32 or of the wrong shape, batch dims that do not broadcast.
        TypeError: LU, pivots or B not a Tensor, ``left`` or ``adjoint`` not a bool.

    Example::

        >>> LU, pivots = torch.linalg.lu_factor(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
        >>> X = hsma_trsm.lu_solve(LU, pivots, torch.tensor([[5.0], [11.0]]))   # A X = B
        >>> torch.allclose(X, torch.tensor([[1.0], [2.0]]))
        True

    Method: the pivots become one permutation (``torch.ops.hsma._lu_permutation``: on CUDA one kernel that
    applies the interchanges in order, a block per batch entry, up to order 6144; on the CPU and above that
    ``torch.lu_unpack`` into a one-byte ``k x k`` matrix per batch entry, then its argmax), applied to B (or to
    the result) by a gather; then the unit lower and the upper triangular solves on hsma's kernels, with ``trans``
    and ``left`` chosen so that no operand is copied and the result has torch's layout. Differentiable
    in B and LU (reverse and forward mode); the pivots, integers, get no gradient. On the CPU without a gradient:
    torch's function (LAPACK getrs).
    """
    try:
        if not _is_compiling():
            X = _C.lu_solve(LU, pivots, B, left, adjoint)  # the eager entry, as in cholesky_solve
            if X is not None:
                return X
        if has_torch_function((LU, pivots, B)):
            return handle_torch_function(lu_solve, (LU, pivots, B), LU, pivots, B, left=left, adjoint=adjoint)
        _check_tensor("hsma_trsm.lu_solve", "LU", 1, LU)
        _check_tensor("hsma_trsm.lu_solve", "pivots", 2, pivots)
        _check_tensor("hsma_trsm.lu_solve", "B", 3, B)
        _check_bool("hsma_trsm.lu_solve", "left", left)
        _check_bool("hsma_trsm.lu_solve", "adjoint", adjoint)
        return _lu_solve(LU, pivots, B, left=left, adjoint=adjoint)
    except _OP_ERRORS as e:
        raise _renamed(e, "hsma_trsm.lu_solve") from None


# ---------------------------------------------------------------------------------------------
# Checks with torch's messages (ATen's names of dtypes: Float, Double, ComplexFloat, ...).

_ATEN_DTYPE = {
    torch.float32: "Float", torch.float64: "Double", torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble", torch.float16: "Half", torch.bfloat16: "BFloat16",
    torch.int32: "Int", torch.int64: "Long", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
    torch.bool: "Bool",
}


def _aten_name(dtype):
    return _ATEN_DTYPE.get(dtype, str(dtype).replace("torch.", ""))


def _check_square(A, prefix):
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{prefix}A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _check_b_and_a(b, A, fn):
    """torch's linearSolveCheckInputs(b, A, fn): devices, dtypes, A square, matching orders."""
    if b.device != A.device:
        raise RuntimeError(f"Expected b and A to be on the same device, but found b on {b.device} and A on "
                           f"{A.device} instead.")
    if b.dtype != A.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type {_aten_name(b.dtype)} "
                           f"and A of type {_aten_name(A.dtype)} instead.")
    _check_square(A, "")
    if A.shape[-1] != b.shape[-2]:
        raise RuntimeError(f"Incompatible matrix sizes for {fn}: each A matrix is {A.shape[-1]} by {A.shape[-1]} "
                           f"but each b matrix is {b.shape[-2]} by {b.shape[-1]}")


def _broadcast_batch(b, A):
    """The broadcast batch shape of b and A, or torch's RuntimeError (its message: at::infer_size's, dims
    compared from the last) where they do not broadcast."""
    x, y = b.shape[:-2], A.shape[:-2]
    n = max(len(x), len(y))
    out = [1] * n
    for i in range(n - 1, -1, -1):
        sx = x[i - n + len(x)] if i - n + len(x) >= 0 else 1
        sy = y[i - n + len(y)] if i - n + len(y) >= 0 else 1
        if sx != sy and sx != 1 and sy != 1:
            raise RuntimeError(f"The size of tensor a ({sx}) must match the size of tensor b ({sy}) at non-singleton "
                               f"dimension {i}")
        out[i] = sy if sx == 1 else sx
    return torch.Size(out)


# The solvers' dtypes, as the C++ side defines them (csrc/trsm.h): torch's, without the half types that trsm takes.
_SOLVER_DTYPES = frozenset(_C.solver_dtypes)


def _check_dtype(fn, dtype):
    """UnsupportedDtypeError (a TypeError and a NotImplementedError, as torch raises) for a dtype without a solver."""
    if dtype not in _SOLVER_DTYPES:
        raise _unsupported(fn, dtype, _C.solver_dtypes)


def _check_solver(A, B, left, fn):
    """torch's checkInputsSolver(A, B, left, fn) (A square checked before)."""
    if B.dim() < 2:
        raise RuntimeError(f"{fn}: The input tensor B must have at least 2 dimensions.")
    if A.shape[-1] != (B.shape[-2] if left else B.shape[-1]):
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} "
                           f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")


# ---------------------------------------------------------------------------------------------
# Cores: torch's checks, in its order, then the op.


def _cholesky_solve(B, L, upper=False):
    """torch.cholesky_solve(B, L, upper): X column-major."""
    if B.dim() < 2:
        raise RuntimeError(f"b should have at least 2 dimensions, but has {B.dim()} dimensions instead")
    if L.dim() < 2:
        raise RuntimeError(f"u should have at least 2 dimensions, but has {L.dim()} dimensions instead")
    _check_b_and_a(B, L, "cholesky_solve")
    _check_dtype("hsma_trsm.cholesky_solve", L.dtype)
    _broadcast_batch(B, L)
    return torch.ops.hsma.cholesky_solve(B, L, upper)


def _cholesky_inverse(L, upper=False):
    """torch.cholesky_inverse(L, upper): cholesky_solve against the identity, column-major."""
    if L.dim() < 2:
        raise RuntimeError("cholesky_inverse: The input tensor A must have at least 2 dimensions.")
    _check_square(L, "cholesky_inverse: ")
    _check_dtype("hsma_trsm.cholesky_inverse", L.dtype)
    return torch.ops.hsma.cholesky_inverse(L, upper)


def _lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """torch.linalg.lu_solve(LU, pivots, B, ...): X column-major (left) or row-major (right)."""
    if not (LU.is_floating_point() or LU.is_complex()):
        raise RuntimeError(f"torch.linalg.lu_solve: Expected a floating point or complex tensor as input. Got "
                           f"{_aten_name(LU.dtype)}")
    if LU.dtype != B.dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type "
                           f"{_aten_name(LU.dtype)} and B of type {_aten_name(B.dtype)} instead")
    if pivots.dtype != torch.int32:
        raise RuntimeError("linalg.lu_solve: pivots should be a Tensor of scalar type torch.int32")
    if LU.dim() < 2:
        raise RuntimeError("torch.linalg.lu_solve: The input tensor A must have at least 2 dimensions.")
    _check_square(LU, "torch.linalg.lu_solve: ")
    _check_solver(LU, B, left, "linalg.lu_solve")
    if pivots.dim() < 1 or pivots.shape[-1] != LU.shape[-1]:
        raise RuntimeError("linalg.lu_solve: Number of pivots per batch should be same as the dimension of the "
                           "matrix")
    if pivots.shape != LU.shape[:-1]:
        raise RuntimeError(f"linalg.lu_solve: Expected LU.shape[:-1] and pivots.shape to be the same, but got "
                           f"pivots with shape {list(pivots.shape)} instead")
    _check_dtype("hsma_trsm.lu_solve", LU.dtype)
    _broadcast_batch(B, LU)
    return torch.ops.hsma.lu_solve(LU, pivots, B, left=left, adjoint=adjoint)
