"""Loads the compiled library and registers the Python-side part of torch.ops.hsma.trsm and
torch.ops.hsma.trsm_: their fake kernels (shape inference for torch.compile / FakeTensor)."""
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
# The C++ side finds the shipped block-size tables (hsma_trsm/tuning/*.csv) here.
torch.ops.hsma._set_tuning_dir(os.path.join(_HERE, "tuning"))


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


# The autograd formula is registered in C++ (csrc/autograd.cpp), so calls that want no gradient
# never enter Python.
