"""Public Python API of hsma_trsm."""
import collections
import contextlib
import inspect
import numbers
import re
import warnings

import torch

from ._ops import _C, _is_compiling, half_partner_pair

__all__ = ["inverse_triangular", "plan", "solve_triangular", "trsm", "trsm_", "Plan", "UnsupportedDtypeError"]

Plan = collections.namedtuple("Plan", "path why")
Plan.__doc__ = """The path a solve takes (:func:`plan`): ``path`` and the reason ``why``."""


def trsm(A, B, *, left=True, upper=False, trans="N", unitriangular=False, alpha=1, out_dtype=None):
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
        out_dtype (torch.dtype, optional): ``torch.float32`` returns the float32 solution of
            bfloat16 / float16 inputs (not rounded to their dtype). B's dtype, for float32 A with a
            bfloat16 / float16 B (flash-linear-attention's triangles beside its keys): without promoting,
            X in B's dtype, the float32 solve rounded once. Otherwise only the result's own dtype is
            accepted (TypeError). Default None: the result's dtype.

    Returns:
        Tensor: X of shape ``(*broadcast batch, m, n)``, contiguous, of the dtype below.
        Neither A nor B is modified.

    Dtypes: float32, float64, complex64, complex128, bfloat16, float16; CPU and CUDA tensors (A and
    B on the same device). A and B of different dtypes are both converted to
    ``torch.promote_types(A.dtype, B.dtype)``, as :func:`solve_triangular` does (the op
    ``torch.ops.hsma.trsm`` itself wants one dtype, or float32 A with a bfloat16 / float16 B, whose
    result has B's dtype: ``out_dtype=B.dtype`` here); a promoted dtype outside the six raises
    :class:`UnsupportedDtypeError`. A zero on the diagonal gives inf/nan, as IEEE division does.
    bfloat16 and float16 are solved in float32 arithmetic (inputs widened exactly) and the result
    rounded once to their dtype: its error is the float32 solve's (about cond(A) times float32's
    rounding) plus one rounding of the half type (at most 2^-8 relative for bfloat16, 2^-11 for float16).
    Values beyond the half type's range (float16: 65504) become inf, and those below its
    smallest subnormal become 0, in that final rounding only; the float32 arithmetic before it
    neither overflows nor underflows where a float32 solve would not.

    Raises:
        RuntimeError: A or B with fewer than 2 dims, A not square, A's order not matching B's
            rows (left) or columns (right), batch dims that do not broadcast, devices that differ.
        TypeError: an argument of the wrong type, naming it, as torch's functions do: A or B not a
            Tensor, ``left``/``upper``/``unitriangular`` not a ``bool`` (0, 1, None, NumPy bools
            and 0-dim tensors are refused, as by torch), ``trans`` not a str, ``alpha`` not an int,
            float or complex (Python or NumPy scalar; not a bool); complex alpha with real data;
            :class:`UnsupportedDtypeError` (a TypeError) for an unsupported dtype.
        ValueError: ``trans`` not one of ``'N'``, ``'T'``, ``'C'``.

    Example::

        >>> A = torch.tensor([[2.0, 0.0], [1.0, 4.0]])   # (k, k) = (2, 2), lower
        >>> B = torch.tensor([[2.0, 4.0], [9.0, 6.0]])   # (m, n) = (2, 2)
        >>> hsma_trsm.trsm(A, B)                         # A X = B
        tensor([[1., 2.],
                [2., 1.]])
        >>> hsma_trsm.trsm(A, B, left=False, trans="T", alpha=0.5)   # X A^T = B / 2
        tensor([[0.5000, 0.3750],
                [2.2500, 0.1875]])

    Method: on CUDA, k <= 64 is the shared-memory direct solve; above, the GPU's measured path table
    (:func:`plan` says which) picks the sweep (one launch for a few columns), the blocked TRSM with
    inverted diagonal blocks and GEMM updates, after the HSMA-TRSM paper ("Hierarchical Shared
    Memory-Aware Optimization for TRSM on GPU Platforms"), or torch's own cuBLAS kernel where neither
    is faster; on CPU, LAPACK ``?trsm`` through ATen.
    Differentiable in reverse mode (first and higher order) and forward mode (torch.func.jvp,
    torch.autograd.forward_ad), under torch.func transforms, with a vmap batch rule; the autograd
    formulas are registered in C++.
    """
    try:
        if out_dtype is None and not _is_compiling():
            # The eager entry: the same op through a typed dispatcher call; None where torch.ops'
            # path must run (subclasses, TorchFunctionModes other than torch's DeviceContext,
            # argument conversions, errors).
            X = _C.trsm(A, B, left, upper, trans, unitriangular, alpha)
            if X is not None:
                return X
        alpha = _check_args("hsma_trsm.trsm", A, B, left, upper, unitriangular, trans, alpha)
        if isinstance(A, torch.Tensor) and isinstance(B, torch.Tensor) and not (
                out_dtype == B.dtype and half_partner_pair(A.dtype, B.dtype)):
            A, B = _promote("hsma_trsm.trsm", A, B)
            if out_dtype is not None and out_dtype != A.dtype:
                if not (out_dtype == torch.float32 and A.dtype in _HALF_DTYPES):
                    raise TypeError(
                        f"hsma_trsm.trsm(): out_dtype must be the result's dtype ({A.dtype} here), torch.float32 "
                        f"for bfloat16 / float16 inputs, or B's dtype for float32 A with a bfloat16 / float16 B; "
                        f"got {out_dtype}"
                    )
                A, B = A.float(), B.float()  # the float32 solve the half types take anyway, unrounded
        return torch.ops.hsma.trsm(A, B, left=left, upper=upper, trans=trans, unitriangular=unitriangular, alpha=alpha)
    except _OP_ERRORS as e:
        raise _renamed(e, "hsma_trsm.trsm") from None


def trsm_(A, B, *, left=True, upper=False, trans="N", unitriangular=False, alpha=1):
    """In-place :func:`trsm`: overwrites B with X and returns B itself (the op
    ``torch.ops.hsma.trsm_`` returns None).

    B must already have the broadcast result's shape and no overlapping memory. Not
    differentiable: raises RuntimeError when A or B requires grad (use :func:`trsm`).

    Dtypes: the result has B's dtype (float32, float64, complex64, complex128, bfloat16 or float16; others raise
    :class:`UnsupportedDtypeError`). A of another dtype is converted to B's when
    ``torch.promote_types(A.dtype, B.dtype)`` is B's dtype (float32 A with float64 or complex64 B).
    float32 A with a bfloat16 / float16 B is solved as it is (float32 arithmetic, rounded once into
    B). Otherwise (float64 A with float32 or complex64 B, complex A with real B) TypeError, the op's
    "A and B must have the same dtype": B could not hold the promoted result. Argument types and
    other errors as :func:`trsm`.

    Example::

        >>> A = torch.tensor([[2.0, 0.0], [1.0, 4.0]])
        >>> B = torch.tensor([[2.0], [9.0]])
        >>> hsma_trsm.trsm_(A, B) is B
        True
        >>> B
        tensor([[1.],
                [2.]])
    """
    try:
        alpha = _check_args("hsma_trsm.trsm_", A, B, left, upper, unitriangular, trans, alpha)
        if isinstance(A, torch.Tensor) and isinstance(B, torch.Tensor):
            dtype = B.dtype
            if dtype not in _TRSM_DTYPES:
                raise _unsupported("hsma_trsm.trsm_", dtype)
            if A.dtype != dtype and torch.promote_types(A.dtype, dtype) == dtype:
                A = A.to(dtype)
        torch.ops.hsma.trsm_(A, B, left=left, upper=upper, trans=trans, unitriangular=unitriangular, alpha=alpha)
        return B
    except _OP_ERRORS as e:
        raise _renamed(e, "hsma_trsm.trsm_") from None


# The dtypes of trsm and trtri, and the half types among them, as the C++ side defines them (csrc/trsm.h).
_TRSM_DTYPES = frozenset(_C.trsm_dtypes)
_HALF_DTYPES = frozenset(_C.half_dtypes)


class UnsupportedDtypeError(TypeError, NotImplementedError):
    """A dtype the solver has no kernel for. A TypeError (as ``torch.ops.hsma.trsm`` raises) and
    a NotImplementedError (as ``torch.linalg.solve_triangular`` raises for such dtypes), so code
    written against either keeps catching it.

    Example::

        >>> A = torch.eye(2, dtype=torch.int64)
        >>> try:
        ...     hsma_trsm.trsm(A, A)
        ... except NotImplementedError as e:
        ...     print(type(e).__name__)
        UnsupportedDtypeError
    """


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    r"""Drop-in replacement for :func:`torch.linalg.solve_triangular`, backed by ``torch.ops.hsma.trsm``.

    Solves ``A X = B`` (``left=True``) or ``X A = B`` (``left=False``) for triangular A.

    Args:
        A (Tensor): ``(*, k, k)``, ``k = m`` (left) or ``k = n`` (right), upper or lower
            triangular; only that triangle is read (not the diagonal when ``unitriangular``).
        B (Tensor): ``(*, m, n)`` right-hand sides; batch dims broadcast against A's.
        upper (bool): keyword-only, required, as in torch.
        left (bool): default True.
        unitriangular (bool): default False.
        out (Tensor, optional): receives the result, as in torch: ``out=B`` is an in-place solve;
            an ``out`` of another shape is resized (with torch's deprecation warning when it had
            elements; to torch's column-major layout); its dtype must be the result's (or float32
            for bfloat16 / float16 inputs: their unrounded float32 solution) and its device A's
            (RuntimeError otherwise); conjugate and negative views are written so that
            they read as the result; not differentiable (RuntimeError when an input or ``out``
            requires grad, NotImplementedError with forward-mode tangents, as torch).

    Returns:
        Tensor: X, ``(*broadcast batch, m, n)``.

    Example::

        >>> A = torch.tensor([[2.0, 0.0], [1.0, 4.0]])   # (k, k), lower
        >>> B = torch.tensor([[2.0], [9.0]])             # (m, n) = (2, 1)
        >>> hsma_trsm.solve_triangular(A, B, upper=False)
        tensor([[1.],
                [2.]])

    Differences from torch, where torch is wrong:
        - A and B of different dtypes are both converted to ``torch.promote_types``; torch
          converts B to A's dtype, which silently drops B's imaginary part (real A, complex B)
          or precision (float32 A, float64 B). Where torch's conversion loses nothing the two
          agree (same result dtype, same values).
        - ``out`` that overlaps A (e.g. ``out=A``): the solve reads A before ``out`` is written,
          so the result is right; torch overwrites A with B first and returns garbage.
        - A and B on two devices raise, a meta one beside a real one included; torch returns a meta
          tensor for that mix without checking the other operand.

    Dtypes: float32, float64, complex64, complex128, bfloat16, float16 (others, after promotion,
    raise :class:`UnsupportedDtypeError`, a TypeError and NotImplementedError; torch has no
    bfloat16 / float16 solve); A and B of different dtypes are promoted as in :func:`trsm`,
    half types solved in float32 as there. Argument types as torch checks them: A, B and ``out``
    must be Tensors and ``upper``, ``left``, ``unitriangular`` bools (TypeError naming the
    argument); errors otherwise as :func:`trsm`. Method and differentiability (reverse, forward,
    higher order, vmap) as :func:`trsm`. On the CPU, and where the plan hands a CUDA solve to torch's kernel,
    the eager call is ``torch.linalg.solve_triangular`` itself (its column-major layout and autograd): the CPU
    path is torch's LAPACK call either way, and this one adds no copy to it.
    """
    try:
        if out is None and not _is_compiling():
            X = _C.solve_triangular(A, B, upper, left, unitriangular)  # the eager entry, as in trsm()
            if X is not None:
                return X
        _check_args("hsma_trsm.solve_triangular", A, B, left, upper, unitriangular)
        if out is not None and not isinstance(out, torch.Tensor):
            raise TypeError(f"hsma_trsm.solve_triangular(): argument 'out' must be Tensor, not {_typename(out)}")
        if out is None and not (isinstance(A, torch.Tensor) and isinstance(B, torch.Tensor)):
            # Not tensors (an fx Proxy under symbolic tracing, ...): their __torch_function__ takes the call.
            return torch.ops.hsma.trsm(A, B, left=left, upper=upper, unitriangular=unitriangular)
        A, B = _promote("hsma_trsm.solve_triangular", A, B)
        if out is None:
            return torch.ops.hsma.trsm(A, B, left=left, upper=upper, unitriangular=unitriangular)
        return _solve_triangular_out(A, B, upper, left, unitriangular, out)
    except _OP_ERRORS as e:
        raise _renamed(e, "hsma_trsm.solve_triangular") from None


# The public solve_triangular is a builtin twin of the function above (csrc/ops/python_entry.cpp): it takes the common
# call without a Python frame (about 0.8 us of a CPU solve's 6) and hands every other call to the function above;
# torch.compile traces the function above in its place.
_solve_triangular_impl = solve_triangular
solve_triangular = _C.public_solve_triangular(
    _solve_triangular_impl, "solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None)\n--\n\n" +
    inspect.cleandoc(_solve_triangular_impl.__doc__ or ""))
torch.compiler.substitute_in_graph(solve_triangular)(_solve_triangular_impl)


def inverse_triangular(A, *, upper, unitriangular=False, out_dtype=None, out=None):
    r"""Inverse of triangular matrices (LAPACK's ``?trtri``, batched): ``X = A^{-1}``.

    Args:
        A (Tensor): ``(*, k, k)`` upper or lower triangular matrices, any strides (e.g. a strided
            ``(B, T/BT, H, BT, BT)`` view of flash-linear-attention's ``[B, T, H, BT]`` chunks, read
            in place). Only the triangle named by ``upper`` is read, not its diagonal when
            ``unitriangular``: the rest may hold anything (NaN, the other factor of an LU).
        upper (bool): keyword-only, required: A is upper (True) or lower (False) triangular.
        unitriangular (bool): A's diagonal is taken as 1 and not read. Default False.
        out_dtype (torch.dtype, optional): the result's dtype; default A's. Real A gives any real
            dtype of the six below (e.g. bfloat16 from float32 A, float32 from bfloat16 A), complex A
            a complex one; the arithmetic is A's (float32 for bfloat16 / float16), rounded once.
        out (Tensor, optional): receives the result (resized as torch's ``out=`` arguments are when
            its shape differs, with torch's warning if it had elements); its dtype is the result's
            (out_dtype, else out's own dtype is taken as out_dtype) and its device A's. Not
            differentiable.

    Returns:
        Tensor: ``(*, k, k)``, contiguous (unless ``out``): the inverse, triangular like A, exact zeros
        in the other triangle (ones on the diagonal when ``unitriangular``).

    Dtypes: float32, float64, complex64, complex128, bfloat16, float16 (others raise
    :class:`UnsupportedDtypeError`); CPU and CUDA. A zero pivot gives inf/nan in the columns that
    depend on it, and possibly in others (0 * inf in a blocked product), as torch's solve against an
    identity does.

    Raises:
        RuntimeError: A with fewer than 2 dims or not square; ``out`` on another device or of
            another dtype than ``out_dtype``; ``out`` with inputs that require grad.
        TypeError: A not a Tensor, ``upper`` / ``unitriangular`` not bool, ``out_dtype`` not a
            dtype or of the other kind (complex for real A or the reverse).

    Example::

        >>> A = torch.tensor([[2.0, 0.0], [1.0, 4.0]])
        >>> hsma_trsm.inverse_triangular(A, upper=False)
        tensor([[ 0.5000,  0.0000],
                [-0.1250,  0.2500]])

    Method: on CUDA, orders k <= 64 of real dtypes by a kernel that stages each triangle in shared
    memory and solves ``A x = e_j`` for every column at once, a thread per column, reading no
    identity (float32 arithmetic for the half types, float64 for float64); larger orders and complex
    dtypes by the solve against an identity (:func:`trsm`: inverted diagonal blocks and GEMMs). On
    CPU, LAPACK through ATen. Differentiable (first and higher order): ``dX = -X dA X``, the gradient
    projected on A's triangle (strict when ``unitriangular``).
    """
    try:
        fn = "hsma_trsm.inverse_triangular"
        _check_tensor(fn, "A", 1, A)
        _check_bool(fn, "upper", upper)
        _check_bool(fn, "unitriangular", unitriangular)
        if out is not None and not isinstance(out, torch.Tensor):
            raise TypeError(f"{fn}(): argument 'out' must be Tensor, not {_typename(out)}")
        if out_dtype is None and out is not None:
            out_dtype = out.dtype
        if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
            raise TypeError(f"{fn}(): argument 'out_dtype' must be torch.dtype, not {_typename(out_dtype)}")
        if isinstance(A, torch.Tensor) and A.dtype not in _TRSM_DTYPES:
            raise _unsupported(fn, A.dtype)
        if out is None:
            with _identities_replicated(A):
                return torch.ops.hsma.trtri(A, upper=upper, unitriangular=unitriangular, out_dtype=out_dtype)
        if torch.is_grad_enabled() and (A.requires_grad or out.requires_grad):
            raise RuntimeError(f"{fn}(): functions with out=... arguments don't support automatic differentiation, "
                               "but one of the arguments requires grad.")
        with _identities_replicated(A):
            X = torch.ops.hsma.trtri(A, upper=upper, unitriangular=unitriangular, out_dtype=out_dtype)
        if _check_out(fn, out, X, stacklevel=3):
            out.resize_(X.shape)
        out.copy_(X)
        return out
    except _OP_ERRORS as e:
        raise _renamed(e, "hsma_trsm.inverse_triangular") from None


@torch.compiler.disable
def plan(A, B, *, left=True, upper=False, trans="N", unitriangular=False):
    r"""Which path :func:`trsm` (and so :func:`solve_triangular`, the solvers and the switch) takes for these
    operands, and why. Nothing is solved: only the operands' shapes, dtypes and device are read. Eager only (it is
    not traced by torch.compile).

    Args:
        A (Tensor): ``(*, k, k)``; B (Tensor): ``(*, m, n)``; ``left``, ``upper``, ``trans``, ``unitriangular``
            as in :func:`trsm`. A and B of different dtypes are promoted as :func:`trsm` does.

    Returns:
        Plan: ``(path, why)``. ``path`` is ``"small"`` (CUDA, k <= 64: the shared-memory kernels, one launch),
        ``"sweep"`` (CUDA: one launch for a few right-hand-side columns), ``"blocked"`` (CUDA: inverted diagonal
        blocks and GEMMs), ``"aten"`` (CUDA: handed to torch's own kernel, cuBLAS trsm, where the GPU's measured
        path table says hsma's paths are not faster), ``"lapack"`` (CPU: LAPACK through ATen) or ``"empty"``.
        ``why`` names the rule or the path table's cell with its measured times, and the block sizes. While a CUDA
        graph is captured on the current stream the plan is the table's GPU-only choice (its ``gpu_path``: a
        replay spends no host time, so the path fastest on the GPU), and ``why`` says so; called outside a
        capture, ``why`` names that path too where it differs.

    Raises:
        RuntimeError, TypeError: as :func:`trsm` for operands it refuses.

    Example::

        >>> A, B = torch.eye(1000), torch.ones(1000, 8)
        >>> hsma_trsm.plan(A, B).path                      # CPU tensors; on CUDA "sweep", "blocked", ...
        'lapack'

    Method: csrc/planner.cpp (plan_large) from the GPU's path table (``hsma_trsm/tuning/<gpu>-paths.csv``,
    measured by ``python -m benchmarks.tune_paths``; ``HSMA_TRSM_PATHS`` names another) and block-size table.
    """
    try:
        _check_args("hsma_trsm.plan", A, B, left, upper, unitriangular, trans, 1)
        A, B = _promote("hsma_trsm.plan", A, B)
        return Plan(*torch.ops.hsma._plan(A, B, left=left, upper=upper, trans=trans, unitriangular=unitriangular))
    except _OP_ERRORS as e:
        raise _renamed(e, "hsma_trsm.plan") from None


def _identities_replicated(*tensors):
    """For ops that build a plain identity inside (trtri's autograd, cholesky_inverse): with a DTensor operand,
    plain tensors count as replicated in the block (:func:`hsma_trsm.distributed.replicating`), else DTensor
    refuses the mix; a context that does nothing for plain tensors and under torch.compile."""
    if _is_compiling() or all(type(t) is torch.Tensor for t in tensors):
        return contextlib.nullcontext()
    try:
        from .distributed import replicating
    except ImportError:  # a torch without torch.distributed: no DTensor either
        return contextlib.nullcontext()
    return replicating(*tensors)


def _typename(obj):
    """obj's type as torch's argument errors name it: int, NoneType, Tensor, numpy.bool, ..."""
    if isinstance(obj, torch.Tensor):
        return "Tensor"
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _check_tensor(fn, name, position, x):
    """torch's TypeError for a tensor argument that is not one. Objects with __torch_function__ (fx Proxies,
    tensor-likes) pass: they take the call over themselves."""
    if not isinstance(x, torch.Tensor) and not hasattr(x, "__torch_function__"):
        raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be Tensor, not {_typename(x)}")


def _check_bool(fn, name, value):
    """Exactly True or False: torch refuses 0/1, None, NumPy bools and 0-dim tensors alike."""
    if value is not True and value is not False:
        raise _not_bool(fn, name, value)


def _check_args(fn, A, B, left, upper, unitriangular, trans="N", alpha=1):
    """Raises torch's TypeError for an argument of the wrong type (the public functions' path
    after the eager entry declined, trsm_, and under torch.compile). Returns alpha, a NumPy
    scalar as the Python number torch.ops takes. Straight-line: trsm_ runs it on every call."""
    if not isinstance(A, torch.Tensor) and not hasattr(A, "__torch_function__"):
        raise TypeError(f"{fn}(): argument 'A' (position 1) must be Tensor, not {_typename(A)}")
    if not isinstance(B, torch.Tensor) and not hasattr(B, "__torch_function__"):
        raise TypeError(f"{fn}(): argument 'B' (position 2) must be Tensor, not {_typename(B)}")
    if left is not True and left is not False:
        raise _not_bool(fn, "left", left)
    if upper is not True and upper is not False:
        raise _not_bool(fn, "upper", upper)
    if unitriangular is not True and unitriangular is not False:
        raise _not_bool(fn, "unitriangular", unitriangular)
    if not isinstance(trans, str):
        raise TypeError(f"{fn}(): argument 'trans' must be str, not {_typename(trans)}")
    if type(alpha) in _NUMBER_TYPES or isinstance(alpha, (torch.SymInt, torch.SymFloat)):
        return alpha
    if isinstance(alpha, numbers.Number) and not isinstance(alpha, bool):
        if isinstance(alpha, (int, float, complex)):  # subclasses (numpy.float64, numpy.complex128)
            return alpha
        if type(alpha).__module__ == "numpy":  # numpy.int64, numpy.float32, ...: as torch.add takes them
            return alpha.item()
    # bool as torch refuses a boolean alpha for non-boolean data; Tensors, as the op's schema does.
    raise TypeError(f"{fn}(): argument 'alpha' must be int, float or complex, not {_typename(alpha)}")


_NUMBER_TYPES = (int, float, complex)


def _not_bool(fn, name, value):
    return TypeError(f"{fn}(): argument '{name}' must be bool, not {_typename(value)}")


def _unsupported(fn, dtype, dtypes=_C.trsm_dtypes):
    names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
    return UnsupportedDtypeError(f"{fn}(): no solver for dtype {dtype} ({names})")


# Errors of the ops below a public function, whose messages start with the op's name ("hsma::trsm: A is 3x3 ..."):
# raised again naming the function the user called. Exact types only (torch's own subclasses, such as
# torch.OutOfMemoryError, pass as they are).
_OP_ERRORS = (RuntimeError, TypeError, ValueError, NotImplementedError)
_OP_NAME = re.compile(r"^hsma::(?:trsm_?|trtri|cholesky_solve|cholesky_inverse|lu_solve|_plan):")


def _renamed(e, fn):
    """e, or an exception of its type whose message names ``fn()`` where it named an hsma op."""
    if type(e) not in _OP_ERRORS + (UnsupportedDtypeError,) or len(e.args) != 1 or not isinstance(e.args[0], str):
        return e
    message, n = _OP_NAME.subn(f"{fn}():", e.args[0], count=1)
    return type(e)(message).with_traceback(e.__traceback__) if n else e


def _promote(fn, A, B):
    """A and B in torch.promote_types of their dtypes; UnsupportedDtypeError where no solver has it."""
    dtype = A.dtype
    if B.dtype != dtype:
        dtype = torch.promote_types(dtype, B.dtype)
        A, B = A.to(dtype), B.to(dtype)
    if dtype not in _TRSM_DTYPES:
        raise _unsupported(fn, dtype)
    return A, B


def _has_tangent(t):
    return torch.autograd.forward_ad.unpack_dual(t).tangent is not None


def _solve_triangular_out(A, B, upper, left, unitriangular, out):
    """solve_triangular's out= path, with torch.linalg.solve_triangular's rules."""
    if torch.is_grad_enabled() and (A.requires_grad or B.requires_grad or out.requires_grad):
        raise RuntimeError(
            "linalg_solve_triangular(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad."
        )
    if _has_tangent(A) or _has_tangent(B) or _has_tangent(out):
        raise NotImplementedError(
            "Trying to use forward AD with hsma_trsm.solve_triangular(out=...) that does not support it "
            "because it is an out= function"
        )
    # The solve comes first (it validates A and B, and it reads A before out is written, so an
    # out that overlaps A is safe), then out is checked, resized and written.
    if out.dtype == torch.float32 and A.dtype in _HALF_DTYPES:  # the unrounded float32 solution
        A, B = A.float(), B.float()
    X = torch.ops.hsma.trsm(A, B, left=left, upper=upper, unitriangular=unitriangular)
    if _check_out("hsma_trsm.solve_triangular", out, X, stacklevel=4):
        # torch.linalg.solve_triangular's layout for a resized out (the rule's one home: csrc/trsm.h)
        if _C.torch_solve_row_major(A, B):
            out.resize_(X.shape)
        else:
            out.resize_(*X.shape[:-2], X.shape[-1], X.shape[-2])
            out.transpose_(-2, -1)
    out.copy_(X)
    return out


def _check_out(fn, out, X, stacklevel):
    """Checks out= against the result X (dtype, device: RuntimeError); True when out must be resized, after
    torch's resize_output warning, word for word, where out had elements."""
    if out.dtype != X.dtype:
        raise RuntimeError(f"{fn}: out has dtype {out.dtype}, expected the result's dtype {X.dtype}")
    if out.device != X.device:
        raise RuntimeError(f"{fn}: out is on {out.device}, expected the result's device {X.device}")
    if out.shape == X.shape:
        return False
    if out.numel() != 0:
        warnings.warn(
            f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
            f"which does not match the required output shape {list(X.shape)}. This behavior is "
            "deprecated, and in a future PyTorch release outputs will not be resized unless they "
            "have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, "
            "to zero elements with t.resize_(0).",
            UserWarning,
            stacklevel=stacklevel,
        )
    return True
