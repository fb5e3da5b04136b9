"""Loads the compiled library and registers the Python-side part of torch.ops.hsma: the fake kernels of trsm,
trsm_, trtri and _lu_permutation (shape inference for torch.compile / FakeTensor) and the vmap rules of trsm and
_lu_permutation.

Private, for tests, benchmarks, the tuner and probes: the development overrides (overrides,
set_overrides, get_overrides) and the blocked path's plan (block_plan)."""
import collections
import contextlib
import os

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load_library():
    # Importing the extension module registers torch.ops.hsma (its static initialisers); it is
    # the build for this interpreter (another Python's _C*.so beside it is never loaded, which
    # would register the ops twice). load_library of the same file only records it in
    # torch.ops.loaded_libraries.
    try:
        from . import _C
    except ImportError as e:
        raise ImportError(
            "hsma_trsm: the compiled extension (hsma_trsm/_C*.so) for this Python was not found or "
            f"failed to load next to {_HERE} ({e}); build it with `pip install --no-build-isolation -e .`"
        ) from e
    torch.ops.load_library(_C.__file__)
    return _C


# _C.trsm is the eager entry of the public API (csrc/ops/python_entry.cpp): the typed dispatcher call
# without torch.ops' boxed argument parsing.
_C = _load_library()

# Under torch.compile, Dynamo traces the public functions: they take torch.ops.hsma.trsm there
# (Dynamo cannot trace into _C.trsm, a C function).
_is_compiling = getattr(torch.compiler, "is_dynamo_compiling", torch.compiler.is_compiling)
# The C++ side finds the shipped tuning tables (block sizes and paths, hsma_trsm/tuning/*.csv) here.
torch.ops.hsma._set_tuning_dir(os.path.join(_HERE, "tuning"))


# ---------------------------------------------------------------------------------------------
# Development overrides (csrc/overrides.h; keys and values in docs/kernels.md): forced kernel and
# block-size choices, one object in C++ that every solve reads. An unknown key or a bad value
# raises ValueError naming the key.


def get_overrides():
    """The keys set now, {key: value as a string}."""
    spec = torch.ops.hsma._get_overrides()
    return dict(item.split("=", 1) for item in spec.split(",") if item)


def set_overrides(**keys):
    """Sets the given keys (a value of None removes one) and keeps the others; returns the
    previous spec, which torch.ops.hsma._set_overrides(spec) restores."""
    previous = torch.ops.hsma._get_overrides()
    merged = get_overrides()
    for key, value in keys.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = str(int(value)) if isinstance(value, bool) else str(value)
    torch.ops.hsma._set_overrides(",".join(f"{k}={v}" for k, v in merged.items()))
    return previous


@contextlib.contextmanager
def overrides(**keys):
    """set_overrides(**keys) for the block; the previous overrides are restored after it."""
    previous = set_overrides(**keys)
    try:
        yield
    finally:
        torch.ops.hsma._set_overrides(previous)


# HSMA_TRSM_OVERRIDES (read when the library loaded) with a bad value stops the import here.
get_overrides()


BlockPlan = collections.namedtuple("BlockPlan", "nb variant ib source path rows cols segment")


def block_plan(dtype, k, rhs_cols=None, *, a_shared=True, gpu=None, capability=None, table="", batch=1, paths="",
               capturing=False):
    """The plan (csrc/planner.h) of a CUDA solve with a k x k triangle (k > 64) and rhs_cols
    right-hand-side columns in all (default k: a square solve; (n or m) x batch, over `batch`
    matrices), under the current overrides: what such a solve runs on the current CUDA device, or on
    the GPU named by gpu and capability (e.g. "NVIDIA H200", "9.0"; no GPU needed). table: a table
    file instead of the GPU's; paths: a path table (csrc/paths.h) instead of the GPU's; capturing: the plan while a
    CUDA graph is captured (the path table's gpu_path). path "aten" (torch's own kernel), "sweep" (with its rows,
    cols, segment) or "blocked" (nb, variant, ib); source says why."""
    if gpu is None or capability is None:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        gpu, capability = props.name, f"{props.major}.{props.minor}"
    rhs_cols = k if rhs_cols is None else rhs_cols
    return BlockPlan(*torch.ops.hsma._block_plan(dtype, int(k), int(rhs_cols), bool(a_shared), gpu, capability, table,
                                                 int(batch), paths, bool(capturing)))


def half_partner_pair(a_dtype, b_dtype):
    """Whether (A, B) is the one pair of two dtypes the op takes: float32 A (_C.half_partner) with a bfloat16 /
    float16 B (csrc/trsm.h, trsm_dtypes_agree)."""
    return a_dtype == _C.half_partner and b_dtype in _C.half_dtypes


def _result_shape(A, B, left):
    k = A.shape[-1]
    torch._check(A.dim() >= 2 and B.dim() >= 2, lambda: "hsma::trsm: A and B must have at least 2 dimensions")
    torch._check(A.shape[-1] == A.shape[-2], lambda: f"hsma::trsm: A must be square, got {tuple(A.shape)}")
    m, n = B.shape[-2], B.shape[-1]
    torch._check(
        k == (m if left else n),
        lambda: f"hsma::trsm: A is {k}x{k} but B is {m}x{n} (left={left})",
    )
    torch._check(
        A.dtype == B.dtype or half_partner_pair(A.dtype, B.dtype),
        lambda: f"hsma::trsm: A and B must have the same dtype (or float32 A with a bfloat16 / float16 B), got "
        f"{A.dtype} and {B.dtype}",
    )
    # Reached with a meta operand beside a real one too (the dispatcher picks the Meta kernel): that mix is refused
    # as the real kernels refuse any two devices, where torch's meta functions would return a meta tensor.
    torch._check(
        A.device == B.device,
        lambda: f"hsma::trsm: A and B must be on the same device, got A on {A.device} and B on {B.device}",
    )
    batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    return (*batch, m, n)


@torch.library.register_fake("hsma::trsm")
def _trsm_fake(A, B, *, left=True, upper=False, trans="N", unitriangular=False, alpha=1):
    return B.new_empty(_result_shape(A, B, left))


@torch.library.register_fake("hsma::trsm_")
def _trsm_inplace_fake(A, B, *, left=True, upper=False, trans="N", unitriangular=False, alpha=1):
    _result_shape(A, B, left)


# The autograd formula (reverse and forward mode) is registered in C++ (csrc/ops/autograd.cpp), so
# calls that want no gradient never enter Python.


# ---------------------------------------------------------------------------------------------
# torch.ops.hsma.trtri (csrc/ops/inverse.cpp, autograd included): fake kernel.


@torch.library.register_fake("hsma::_lu_permutation")
def _lu_permutation_fake(pivots, inverse=False):
    return pivots.new_empty(pivots.shape, dtype=torch.int64)


@torch.library.register_vmap("hsma::_lu_permutation")
def _lu_permutation_vmap(info, in_dims, pivots, inverse=False):
    """The op takes any batch dims: the vmapped one goes first, as one more."""
    dim = in_dims[0]
    if dim is None:
        return torch.ops.hsma._lu_permutation(pivots, inverse), None
    return torch.ops.hsma._lu_permutation(pivots.movedim(dim, 0), inverse), 0


@torch.library.register_fake("hsma::trtri")
def _trtri_fake(A, *, upper, unitriangular=False, out_dtype=None):
    torch._check(A.dim() >= 2, lambda: f"hsma::trtri: A must have at least 2 dimensions (*, k, k), got {A.dim()}")
    torch._check(A.shape[-1] == A.shape[-2], lambda: f"hsma::trtri: A must be square, got {tuple(A.shape)}")
    return A.new_empty(A.shape, dtype=A.dtype if out_dtype is None else out_dtype)




# ---------------------------------------------------------------------------------------------
# vmap: batch rules. The op broadcasts leading batch dims itself, so a vmapped dim only has to
# become the leading batch dim: it is moved to the front, and the operand with fewer (logical)
# batch dims gets size-1 dims after it so that the vmapped dims line up. One call of the op then
# solves the whole vmapped batch (no per-sample loop, no copy: movedim and indexing are views).


def _logical_batch_rank(t, bdim, name):
    nd = t.dim() - (bdim is not None)
    if nd < 2:
        shape = list(t.shape)
        if bdim is not None:
            del shape[bdim]
        what = "(*, k, k)" if name == "A" else "(*, m, n)"
        raise RuntimeError(f"hsma::trsm: {name} must have at least 2 dimensions {what}, got shape {shape}")
    return nd - 2


def _batched_to_front(t, bdim, rank, target_rank):
    """t with its vmapped dim first, followed by (target_rank - rank) size-1 dims."""
    t = t.movedim(bdim, 0)
    pad = target_rank - rank
    return t[(slice(None),) + (None,) * pad] if pad else t


def _align_vmapped(A, a_dim, B, b_dim):
    ra = _logical_batch_rank(A, a_dim, "A")
    rb = _logical_batch_rank(B, b_dim, "B")
    r = max(ra, rb)
    if a_dim is not None:
        A = _batched_to_front(A, a_dim, ra, r)
    if b_dim is not None:
        B = _batched_to_front(B, b_dim, rb, r)
    return A, B


@torch.library.register_vmap("hsma::trsm")
def _trsm_vmap(info, in_dims, A, B, *, left=True, upper=False, trans="N", unitriangular=False, alpha=1):
    A, B = _align_vmapped(A, in_dims[0], B, in_dims[1])
    X = torch.ops.hsma.trsm(A, B, left=left, upper=upper, trans=trans, unitriangular=unitriangular, alpha=alpha)
    return X, 0


@torch.library.register_vmap("hsma::trsm_")
def _trsm_inplace_vmap(info, in_dims, A, B, *, left=True, upper=False, trans="N", unitriangular=False, alpha=1):
    if in_dims[1] is None:
        raise RuntimeError(
            "vmap: hsma::trsm_(A, B) writes its result into B, but B is not batched while A is; "
            "the batched result cannot be written into B (use the functional hsma_trsm.trsm)"
        )
    # B.movedim(...) is a view of B, so the in-place solve writes B's own memory.
    A, B = _align_vmapped(A, in_dims[0], B, in_dims[1])
    torch.ops.hsma.trsm_(A, B, left=left, upper=upper, trans=trans, unitriangular=unitriangular, alpha=alpha)
    return None, None


@torch.library.register_vmap("hsma::trtri")
def _trtri_vmap(info, in_dims, A, *, upper, unitriangular=False, out_dtype=None):
    # The op inverts every leading batch entry: the vmapped dim only has to come first.
    (a_dim,) = in_dims
    if a_dim is None:
        return torch.ops.hsma.trtri(A, upper=upper, unitriangular=unitriangular, out_dtype=out_dtype), None
    _logical_batch_rank(A, a_dim, "A")
    A = A.movedim(a_dim, 0)
    return torch.ops.hsma.trtri(A, upper=upper, unitriangular=unitriangular, out_dtype=out_dtype), 0
