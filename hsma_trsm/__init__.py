"""hsma_trsm: fast triangular solves (TRSM) for PyTorch, after the HSMA-TRSM paper.

Importing the package loads the compiled extension, which registers ``torch.ops.hsma.trsm`` and
``torch.ops.hsma.trsm_`` with the dispatcher (CPU kernel through ATen/LAPACK; CUDA kernels when
built with CUDA), plus their fake (meta) kernels and autograd formulas.

Public API:
    solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None)
        drop-in for torch.linalg.solve_triangular;
    trsm(A, B, *, left=True, upper=False, trans="N", unitriangular=False, alpha=1)
        the BLAS-style solve op(A) X = alpha B (left) or X op(A) = alpha B (right).
"""
from . import _ops  # noqa: F401  (loads the library and registers fake + autograd)
from .api import UnsupportedDtypeError, solve_triangular, trsm, trsm_

__all__ = ["solve_triangular", "trsm", "trsm_", "UnsupportedDtypeError"]
__version__ = "0.1.0"
