"""hsma_trsm: fast triangular solves (TRSM) for PyTorch, after the HSMA-TRSM paper.

Importing the package loads the compiled extension, which registers ``torch.ops.hsma.trsm`` and
``torch.ops.hsma.trsm_`` with the dispatcher (CPU kernel through ATen/LAPACK; CUDA kernels when
built with CUDA), plus their fake (meta) kernels and autograd formulas.

Public API:
    solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None)
        drop-in for torch.linalg.solve_triangular;
    trsm(A, B, *, left=True, upper=False, trans="N", unitriangular=False, alpha=1)
        the BLAS-style solve op(A) X = alpha B (left) or X op(A) = alpha B (right);
    trsm_(A, B, ...) the same in place: writes X into B and returns B;
    inverse_triangular(A, *, upper, unitriangular=False, out_dtype=None, out=None)
        inverses of triangular matrices (LAPACK's trtri, batched);
    solve_tril(A, cu_seqlens=None, chunk_indices=None, output_dtype=torch.float32)
        drop-in for flash-linear-attention's solve_tril: (I + A)^-1 per chunk, packed sequences too;
    cholesky_solve(B, L, upper=False), cholesky_inverse(L, upper=False),
    lu_solve(LU, pivots, B, *, left=True, adjoint=False)
        drop-ins for torch's functions of the same names, built on trsm (hsma_trsm/solvers.py);
    plan(A, B, *, left=True, upper=False, trans="N", unitriangular=False)
        which path a solve takes (hsma's kernels or torch's own) and why;
    enable(), disable(), enabled(), is_enabled()
        the opt-in switch that runs torch's own solves on hsma for CUDA tensors (hsma_trsm/switch.py).

Dtypes: float32, float64, complex64, complex128, and bfloat16 / float16 in float32 arithmetic.

Arguments are checked as torch checks them (TypeError naming the argument: flags exactly bool, A
and B tensors); A and B of different dtypes are promoted (trsm_: A converted to B's dtype), except
float32 A with a bfloat16 / float16 B where asked (trsm's out_dtype=B.dtype, trsm_): X in B's dtype.
"""
from ._version import __version__  # noqa: F401
from . import _ops  # noqa: F401  (loads the library and registers fake + autograd)
from .api import Plan, UnsupportedDtypeError, inverse_triangular, plan, solve_triangular, trsm, trsm_
from .chunked import solve_tril
from .solvers import cholesky_inverse, cholesky_solve, lu_solve
from .switch import disable, enable, enabled, is_enabled

try:  # DTensor sharding strategies of torch.ops.hsma (a torch without torch.distributed has no DTensor)
    from . import distributed  # noqa: F401
except ImportError:
    pass
except Exception as _e:  # noqa: BLE001 - DTensor internals of another torch: the rest of hsma_trsm still works
    import warnings as _warnings

    _warnings.warn(f"hsma_trsm: DTensor support is off ({type(_e).__name__}: {_e})", stacklevel=2)

__all__ = ["inverse_triangular", "plan", "Plan", "solve_triangular", "solve_tril", "trsm", "trsm_",
           "UnsupportedDtypeError", "cholesky_solve", "cholesky_inverse", "lu_solve", "enable", "disable", "enabled",
           "is_enabled"]
