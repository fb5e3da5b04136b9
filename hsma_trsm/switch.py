"""The opt-in switch: torch's own triangular, Cholesky and LU solves run on hsma for CUDA tensors.

    hsma_trsm.enable()            # from here on, in this process
    hsma_trsm.disable()           # torch's kernels again
    with hsma_trsm.enabled():     # for a block; nestable, restores the state it found

While enabled, hsma's implementations are the CUDA kernels of the ATen operators behind
``torch.linalg.solve_triangular``, ``torch.triangular_solve``, ``torch.cholesky_solve``,
``torch.cholesky_inverse`` and ``torch.linalg.lu_solve`` (registered with ``torch.library`` for the
dispatch key CUDA). CPU tensors and the ``out=`` variants keep torch's kernels.

Why the dispatcher and not a patch of torch's Python functions: the kernel sits below everything that
looks at those functions. ``__torch_function__`` handlers keyed on torch's function objects (linear_operator's
LinearOperator) keep matching, whatever the import order; autograd keeps torch's derivative formulas (they
call the same operators, so backward passes run on hsma too); torch.compile keeps torch's meta functions
and calls the operator at run time (the kernels return the strides those promise); vmap, forward AD and
CUDA graphs see an ordinary kernel. ``disable()`` deletes the registration, and the dispatcher serves torch's
own kernel again.

No recursion: hsma's CUDA kernels call no routed operator (the blocked path's products are GEMMs). Its CPU
kernel is ATen's linalg_solve_triangular itself, which is why CPU is never routed.
"""
import contextlib
import threading
import warnings

import torch

from . import solvers

__all__ = ["enable", "disable", "enabled", "is_enabled"]

# ATen operator (overload "default") -> hsma's implementation, which takes the operator's arguments.
ROUTED = {
    "linalg_solve_triangular": solvers._solve_triangular,
    "triangular_solve": solvers._triangular_solve,
    "cholesky_solve": solvers._cholesky_solve,
    "cholesky_inverse": solvers._cholesky_inverse,
    "linalg_lu_solve": solvers._lu_solve,
}
# The operators whose hsma implementation may be routed on the CPU (tests only): the rest end in ATen's
# CPU linalg_solve_triangular, whose routing would call itself.
CPU_SAFE = ("triangular_solve", "cholesky_solve", "cholesky_inverse", "linalg_lu_solve")

_lock = threading.RLock()
_lib = None  # the torch.library.Library holding the registrations while enabled
_config = None  # (keys, ops) registered, or None


def _register(keys, ops):
    unknown = [op for op in ops if op not in ROUTED]
    if unknown:
        raise ValueError(f"hsma_trsm.enable: unknown operators {unknown} (routable: {sorted(ROUTED)})")
    if "CPU" in keys and any(op not in CPU_SAFE for op in ops):
        raise ValueError("hsma_trsm.enable: linalg_solve_triangular cannot be routed on the CPU (hsma's CPU "
                         "kernel calls it: infinite recursion)")
    lib = torch.library.Library("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            # Where torch has a kernel for the key, the dispatcher warns that it is overridden: intended.
            warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
            for op in ops:
                for key in keys:
                    lib.impl(op, ROUTED[op], key)
    except BaseException:
        lib._destroy()
        raise
    return lib


def _set(config):
    global _lib, _config
    with _lock:
        if config == _config:
            return
        if _lib is not None:
            _lib._destroy()
            _lib, _config = None, None
        if config is not None:
            _lib, _config = _register(*config), config


def enable(*, _keys=("CUDA",), _ops=None):
    """Routes torch's triangular, Cholesky and LU solves on CUDA tensors to hsma (see the module's
    docstring), for the whole process until :func:`disable`. Calling it again changes nothing.

    ``_keys`` and ``_ops`` are for tests: the dispatch keys and the operators (names in ``ROUTED``) to
    route."""
    _set((tuple(_keys), tuple(ROUTED if _ops is None else _ops)))


def disable():
    """Restores torch's own kernels (a no-op when not enabled)."""
    _set(None)


def is_enabled():
    """True while the switch routes anything."""
    return _config is not None


@contextlib.contextmanager
def enabled(*, _keys=("CUDA",), _ops=None):
    """:func:`enable` for the block; on exit, the state found on entry (enabled or not) is restored.
    The switch is process-wide, not per thread, and each block restores the state it found on entry: blocks in
    several threads must not overlap (overlapping ones can turn the switch off inside another thread's block,
    or leave it enabled after all have exited)."""
    with _lock:
        previous = _config
        enable(_keys=_keys, _ops=_ops)
    try:
        yield
    finally:
        _set(previous)
