"""Public Python API of hsma_trsm."""
import warnings

import torch

__all__ = ["solve_triangular", "trsm", "trsm_"]


def trsm(A, B, *, left=True, upper=False, trans="N", unitriangular=False, alpha=1):
    r"""Triangular solve with many right-hand sides, BLAS ``?trsm`` style.

    Returns X with ``op(A) @ X = alpha * B`` (``left=True``) or ``X @ op(A) = alpha * B``
    (``left=False``), where ``op(A)`` is ``A``, ``A^T`` or ``A^H`` for ``trans`` = ``'N'``,
    ``'T'``, ``'C'``.

    Args:
        A (Tensor): ``(*, k, k)`` triangular matrices, ``k = m`` (left) or ``k = n`` (right).
            Only the triangle named by ``upper`` is read; with ``unitriangular`` the diagonal is
            taken as 1 and not read either, so the rest may hold anything (packed LU factors, NaN).
        B (Tensor): ``(*, m, n)`` right-hand sides; batch dims broadcast against A's.
        left (bool): side. Default True.
        upper (bool): uplo: A is upper (True) or lower (False) triangular. Default False.
        trans (str): ``'N'``, ``'T'`` or ``'C'`` (either case). Default ``'N'``.
        unitriangular (bool): diag: A has a unit diagonal. Default False.
        alpha (Number): scale of B (complex only with complex dtypes). Default 1.

    Returns:
        Tensor: X of shape ``(*broadcast batch, m, n)``, contiguous, dtype of A and B.
        Neither A nor B is modified.

    Dtypes: float32, float64, complex64, complex128 (A and B the same); CPU and CUDA tensors
    (A and B on the same device). A zero on the diagonal gives inf/nan, as IEEE division does.

    Raises:
        RuntimeError: A or B with fewer than 2 dims, A not square, A's order not matching B's
            rows (left) or columns (right), batch dims that do not broadcast, devices that differ.
        TypeError: an unsupported dtype, A and B of different dtypes, complex alpha with real data.
        ValueError: ``trans`` not one of ``'N'``, ``'T'``, ``'C'``.

    Method: on CUDA, k <= 64 is the shared-memory direct solve and larger k the blocked TRSM with
    inverted diagonal blocks and GEMM updates, after the HSMA-TRSM paper ("Hierarchical Shared
    Memory-Aware Optimization for TRSM on GPU Platforms"); on CPU, LAPACK ``?trsm`` through ATen.
    Differentiable (first and higher order): the autograd formula is registered in C++.
    """
    return torch.ops.hsma.trsm(A, B, left=left, upper=upper, trans=trans, unitriangular=unitriangular, alpha=alpha)


def trsm_(A, B, *, left=True, upper=False, trans="N", unitriangular=False, alpha=1):
    """In-place :func:`trsm`: overwrites B with X and returns B.

    B must already have the broadcast result's shape and no overlapping memory. Not
    differentiable: raises RuntimeError when A or B requires grad (use :func:`trsm`).
    """
    torch.ops.hsma.trsm_(A, B, left=left, upper=upper, trans=trans, unitriangular=unitriangular, alpha=alpha)
    return B


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    r"""Drop-in replacement for :func:`torch.linalg.solve_triangular`, backed by ``torch.ops.hsma.trsm``.

    Solves ``A X = B`` (``left=True``) or ``X A = B`` (``left=False``) for triangular A.

    Args:
        A (Tensor): ``(*, n, n)`` (left: ``n = B.shape[-2]``; right: ``n = B.shape[-1]``)
            upper or lower triangular; only that triangle is read (not the diagonal when
            ``unitriangular``).
        B (Tensor): ``(*, n, k)`` (left) or ``(*, k, n)`` (right); batch dims broadcast.
        upper (bool): keyword-only, required, as in torch.
        left (bool): default True.
        unitriangular (bool): default False.
        out (Tensor, optional): written with the result; resized (with torch's warning when it
            had elements) if its shape differs; must have the result's dtype and device.

    Returns:
        Tensor: the solution, shape ``(*broadcast batch, rows of B, cols of B)``.

    Dtypes float32, float64, complex64, complex128; errors as :func:`trsm` (plus out's dtype and
    device mismatches). Method and differentiability as :func:`trsm`.
    """
    X = torch.ops.hsma.trsm(A, B, left=left, upper=upper, unitriangular=unitriangular)
    if out is None:
        return X
    if out.dtype != X.dtype:
        raise RuntimeError(
            f"hsma_trsm.solve_triangular: out has dtype {out.dtype}, expected the result's dtype {X.dtype}"
        )
    if out.device != X.device:
        raise RuntimeError(
            f"hsma_trsm.solve_triangular: out is on {out.device}, expected the result's device {X.device}"
        )
    if out.shape != X.shape:
        if out.numel() != 0:
            warnings.warn(
                f"An output with one or more elements was resized since it had shape {tuple(out.shape)}, "
                f"which does not match the required output shape {tuple(X.shape)}. This behavior is "
                "deprecated, and in a future PyTorch release outputs will not be resized unless they "
                "have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, "
                "to zero elements with t.resize_(0).",
                UserWarning,
                stacklevel=2,
            )
        out.resize_(X.shape)
    out.copy_(X)
    return out
