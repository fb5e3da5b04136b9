"""hsma_trsm.solve_tril (hsma_trsm/chunked.py): flash-linear-attention's solve_tril, (I + A)^-1 of every chunk of
fla's [B, T, H, BT] layout, with packed sequences (cu_seqlens, chunk_indices) and partial last chunks, against a
float64 inverse of each chunk computed here."""
import math

import pytest
import torch

import hsma_trsm

from conftest import DEVICES, make_generator

TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 2e-2, torch.float16: 4e-3}


def _inputs(B, T, H, BT, dtype, device, seed=0, scale=0.3):
    """A with a well-conditioned strictly lower part per chunk, NaN on and above each chunk's diagonal."""
    g = make_generator(seed)
    A = torch.randn(B, T, H, BT, generator=g, dtype=torch.float64) * scale / math.sqrt(BT)
    cols = torch.arange(BT)
    return A.to(dtype=dtype, device=device), cols


def _chunk_list(B, T, BT, cu_seqlens):
    """[(first row in [B * T], rows)] of every chunk, derived here from the sequences."""
    bounds = [(b * T, b * T + T) for b in range(B)] if cu_seqlens is None else \
        list(zip(cu_seqlens[:-1], cu_seqlens[1:]))
    return [(s, min(BT, e - s)) for a, e in bounds for s in range(a, e, BT)]


def _check(X, A, chunks, BT, dtype, out_dtype):
    B, T, H, _ = A.shape
    assert X.shape == A.shape and X.dtype == out_dtype
    flat_A = A.reshape(B * T, H, BT).double().cpu()
    flat_X = X.reshape(B * T, H, BT).double().cpu()
    covered = torch.zeros(B * T, dtype=torch.bool)
    tol = max(TOL[dtype], TOL.get(out_dtype, 0))
    for s, r in chunks:
        covered[s:s + r] = True
        for h in range(H):
            M = torch.eye(r, dtype=torch.float64) + torch.tril(flat_A[s:s + r, h, :r], -1)
            ref = torch.linalg.inv(M)
            got = flat_X[s:s + r, h]
            torch.testing.assert_close(got[:, :r], ref, rtol=tol, atol=tol)
            assert torch.all(got[:, r:] == 0)
    assert torch.all(flat_X[~covered] == 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16],
                         ids=["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("B,T,H,BT", [(2, 128, 3, 64), (1, 96, 2, 32), (2, 70, 2, 16), (1, 13, 1, 5)],
                         ids=["fixed-64", "fixed-32", "partial-16", "odd-5"])
def test_fixed_length(device, dtype, B, T, H, BT):
    A, _ = _inputs(B, T, H, BT, dtype, device)
    A_nan = A.clone()
    for s, r in _chunk_list(B, T, BT, None):  # NaN on and above each chunk's diagonal: never read
        b, t = divmod(s, T)
        for i in range(r):
            A_nan[b, t + i, :, i:] = math.nan
    A0 = A_nan.clone()
    X = hsma_trsm.solve_tril(A_nan)
    assert torch.equal(A_nan.isnan(), A0.isnan()) and torch.equal(A_nan.nan_to_num(), A0.nan_to_num())
    _check(X, A, _chunk_list(B, T, BT, None), BT, dtype, torch.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("BT", [16, 64])
@pytest.mark.parametrize("dtype,out_dtype", [(torch.float32, torch.float32), (torch.float32, torch.bfloat16),
                                             (torch.bfloat16, torch.bfloat16), (torch.float16, torch.float32)],
                         ids=["f32-f32", "f32-bf16", "bf16-bf16", "f16-f32"])
def test_packed_sequences_with_partial_chunks(device, BT, dtype, out_dtype):
    cu = [0, 5, 5, 71, 135, 200]  # a short, an empty and partial and whole chunks
    T, H = cu[-1], 3
    A, _ = _inputs(1, T, H, BT, dtype, device, seed=1)
    cu_t = torch.tensor(cu, device=device, dtype=torch.int32)
    X = hsma_trsm.solve_tril(A, cu_seqlens=cu_t, output_dtype=out_dtype)
    _check(X, A, _chunk_list(1, T, BT, cu), BT, dtype, out_dtype)
    # fla's chunk indices (sequence, chunk within it), padded with sentinel rows as its static variant pads them.
    lens = [b - a for a, b in zip(cu, cu[1:])]
    idx = [[s, i] for s, n in enumerate(lens) for i in range(-(-n // BT))] + [[-1, 0], [-1, 0]]
    Xi = hsma_trsm.solve_tril(A, cu_seqlens=cu_t, chunk_indices=torch.tensor(idx, device=device),
                              output_dtype=out_dtype)
    assert torch.equal(Xi, X)


@pytest.mark.parametrize("device", DEVICES)
def test_output_dtypes_and_strided_input(device):
    big, _ = _inputs(2, 64, 2, 64, torch.float32, device, seed=2)
    A = big[..., :32]  # BT = 32 columns of a wider tensor: not contiguous
    for out_dtype in (None, torch.bfloat16, torch.float64):
        X = hsma_trsm.solve_tril(A.view(2, 64, 2, 32) if A.is_contiguous() else A, output_dtype=out_dtype)
        _check(X, A, _chunk_list(2, 64, 32, None), 32, torch.float32, out_dtype or torch.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients(device):
    A, _ = _inputs(1, 11, 2, 4, torch.float64, device, seed=3)
    cu = torch.tensor([0, 6, 11], device=device)
    for kw in ({}, {"cu_seqlens": cu}):
        Ag = torch.tril(A.detach().clone()).requires_grad_()
        assert torch.autograd.gradcheck(lambda a: hsma_trsm.solve_tril(a, output_dtype=None, **kw), (Ag,))


def test_errors():
    A = torch.zeros(1, 8, 1, 4)
    cases = [
        (lambda: hsma_trsm.solve_tril(A[0]), ValueError, r"A must be \[B, T, H, BT\]"),
        (lambda: hsma_trsm.solve_tril([1.0]), TypeError, "argument 'A'"),
        (lambda: hsma_trsm.solve_tril(A, output_dtype="float"), TypeError, "output_dtype"),
        (lambda: hsma_trsm.solve_tril(A.expand(2, 8, 1, 4), cu_seqlens=torch.tensor([0, 8])), ValueError,
         "B must be 1"),
        (lambda: hsma_trsm.solve_tril(A, cu_seqlens=torch.tensor([0, 9])), ValueError, "rise from 0 to T"),
        (lambda: hsma_trsm.solve_tril(A, cu_seqlens=torch.tensor([0, 5, 3, 8])), ValueError, "rise from 0 to T"),
        (lambda: hsma_trsm.solve_tril(A, cu_seqlens=torch.tensor([0.0, 8.0])), TypeError, "integers"),
        (lambda: hsma_trsm.solve_tril(A, chunk_indices=torch.zeros(2, 2, dtype=torch.long)), ValueError,
         "needs cu_seqlens"),
        (lambda: hsma_trsm.solve_tril(A.to(torch.int32)), TypeError, "int32"),
    ]
    for call, err, match in cases:
        with pytest.raises(err, match=match) as e:
            call()
        assert str(e.value).startswith("hsma_trsm.solve_tril(): "), str(e.value)


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
def test_matches_fla(device):
    """Against fla's own solve_tril (triton; where fla-core is installed), fixed length and packed sequences."""
    fla_utils = pytest.importorskip("fla.ops.utils")
    cu = torch.tensor([0, 5, 71, 135, 200], device=device, dtype=torch.int32)
    for BT in (16, 32, 64):
        for B, T, kw in ((2, 256, {}), (1, 200, {"cu_seqlens": cu})):
            A, _ = _inputs(B, T, 4, BT, torch.float32, device, seed=BT)
            ours, theirs = hsma_trsm.solve_tril(A, **kw), fla_utils.solve_tril(_strict(A, BT, **kw), **kw)
            torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)


def _strict(A, BT, cu_seqlens=None):
    """A with zeros on and above each chunk's diagonal (fla's solve_tril reads A as given there)."""
    B, T, H, _ = A.shape
    out = A.clone()
    for s, r in _chunk_list(B, T, BT, None if cu_seqlens is None else cu_seqlens.tolist()):
        b, t = divmod(s, T)
        for i in range(r):
            out[b, t + i, :, i:] = 0
    return out
