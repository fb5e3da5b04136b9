"""The opt-in switch: torch's own triangular, Cholesky and LU solves run on hsma for CUDA tensors.

    hsma_trsm.enable()            # from here on, in this process
    hsma_trsm.disable()           # torch's kernels again
    with hsma_trsm.enabled():     # for a block; nestable, restores the state it found

While enabled, hsma's C++ kernels (``csrc/ops/switch.cpp``) are the CUDA kernels of the ATen operators behind
``torch.linalg.solve_triangular``, ``torch.triangular_solve``, ``torch.cholesky_solve``,
``torch.cholesky_inverse`` and ``torch.linalg.lu_solve`` (registered for the dispatch key CUDA while the switch
is on). CPU tensors and the ``out=`` variants keep torch's kernels. Each kernel serves what torch would take and
hsma supports (strided, one device, float32, float64, complex64 or complex128); anything else goes to torch's
own implementation, which gives torch's result or raises torch's error.

Why the dispatcher and not a patch of torch's Python functions: the kernel sits below everything that
looks at those functions. ``__torch_function__`` handlers keyed on torch's function objects (linear_operator's
LinearOperator) keep matching, whatever the import order; autograd keeps torch's derivative formulas (they
call the same operators, so backward passes run on hsma too); torch.compile keeps torch's meta functions
and calls the operator at run time (the kernels return the strides those promise); vmap, forward AD and
CUDA graphs see an ordinary kernel. ``disable()`` deletes the registration, and the dispatcher serves torch's
own kernel again. Why C++ kernels and not Python ones: a Python kernel takes the GIL and converts every
argument on each call, host time that made small routed solves slower than torch's.

No recursion: hsma calls none of the routed operators (where it solves through ATen, on the CPU and for a few
CUDA shapes, it calls the out= overload), and a routed operator called while one of these kernels runs on the same
thread would go to torch's implementation.

Threads: turn the switch on or off while no other thread is solving. Changing the dispatcher's table is not safe
against calls that other threads are dispatching at that moment (torch's dispatcher reads it without a lock).
"""
import contextlib
import threading

import torch

from ._ops import _C

__all__ = ["enable", "disable", "enabled", "is_enabled", "routed_calls"]

# The routable ATen operators (overload "default"), in the order of torch.ops.hsma._routed_calls(), as the C++ side
# lists them (csrc/ops/switch.h).
ROUTED = _C.routed_ops

_lock = threading.RLock()
_config = None  # (keys, ops) registered, or None


def _set(config):
    global _config
    with _lock:
        if config == _config:
            return
        if config is not None and not (config[0] and config[1]):
            raise ValueError("hsma_trsm.enable: no dispatch key or no operator to route")
        # The C++ side checks the names (ValueError) and changes nothing on an error.
        torch.ops.hsma._route(list(config[1]) if config else [], list(config[0]) if config else [])
        _config = config


def routed_calls():
    """{operator: calls served by hsma} since the process started: those that returned (not those that raised, nor
    those handed to torch).

    Example::

        >>> sorted(hsma_trsm.switch.routed_calls())[:2]
        ['cholesky_inverse', 'cholesky_solve']
    """
    return dict(zip(ROUTED, torch.ops.hsma._routed_calls()))


def enable():
    """Routes torch's triangular, Cholesky and LU solves on CUDA tensors to hsma (see the module's
    docstring), for the whole process until :func:`disable`. Calling it again changes nothing.

    Example::

        >>> hsma_trsm.enable()        # torch.cholesky_solve, ... on CUDA tensors now run on hsma
        >>> hsma_trsm.is_enabled()
        True
        >>> hsma_trsm.disable()
    """
    _enable()


def _enable(keys=("CUDA",), ops=None):
    """:func:`enable` for tests: the dispatch keys ("CUDA"; "CPU" routes CPU tensors too) and the operators (names
    in ``ROUTED``; default all) to route."""
    _set((tuple(keys), tuple(ROUTED if ops is None else ops)))


def disable():
    """Restores torch's own kernels (a no-op when not enabled).

    Example::

        >>> hsma_trsm.disable()
        >>> hsma_trsm.is_enabled()
        False
    """
    _set(None)


def is_enabled():
    """True while the switch routes anything.

    Example::

        >>> hsma_trsm.is_enabled()
        False
    """
    return _config is not None


def enabled():
    """:func:`enable` for a ``with`` block; on exit, the state found on entry (enabled or not) is restored.
    The switch is process-wide, not per thread, and each block restores the state it found on entry: blocks in
    several threads must not overlap (overlapping ones can turn the switch off inside another thread's block,
    or leave it enabled after all have exited).

    Example::

        >>> with hsma_trsm.enabled():  # e.g. a GPyTorch loss: its Cholesky solves run on hsma
        ...     hsma_trsm.is_enabled()
        True
        >>> hsma_trsm.is_enabled()
        False
    """
    return _enabled()


@contextlib.contextmanager
def _enabled(keys=("CUDA",), ops=None):
    """:func:`enabled` for tests, with :func:`_enable`'s arguments."""
    with _lock:
        previous = _config
        _enable(keys, ops)
    try:
        yield
    finally:
        _set(previous)
