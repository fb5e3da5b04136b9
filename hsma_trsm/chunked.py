"""Chunked linear attention's inverse in flash-linear-attention's layout: :func:`solve_tril`."""
import torch

from .api import _OP_ERRORS, _TRSM_DTYPES, _check_tensor, _renamed, _typename, _unsupported, inverse_triangular

__all__ = ["solve_tril"]

_FN = "hsma_trsm.solve_tril"


def solve_tril(A, cu_seqlens=None, chunk_indices=None, output_dtype=torch.float32):
    r"""Drop-in for flash-linear-attention's ``fla.ops.utils.solve_tril``: ``(I + A)^{-1}`` of every chunk.

    Args:
        A (Tensor): ``[B, T, H, BT]``, fla's layout: the rows of each chunk of BT consecutive positions, per head,
            with the chunk's BT columns. Only the strictly lower triangle of each chunk is read (the diagonal and
            above may hold anything, NaN included). float32, float64, bfloat16 or float16; any BT (fla: 16, 32, 64).
        cu_seqlens (Tensor, optional): ``[N + 1]`` integer offsets of N packed sequences (then B must be 1),
            from 0 to T, non-decreasing. Chunks start at each sequence's start; a sequence whose length is not a
            multiple of BT ends with a partial chunk of fewer rows. Without it, each of the B rows of length T is
            one sequence.
        chunk_indices (Tensor, optional): ``[NT, 2]`` (sequence, chunk within it) of every chunk, as fla's
            ``prepare_chunk_indices(cu_seqlens, BT)`` gives them (rows with a negative sequence are skipped, as
            fla's static indices pad them); computed from cu_seqlens when None (one host synchronisation).
        output_dtype (torch.dtype, optional): the result's dtype; default float32 (as fla), None: A's.

    Returns:
        Tensor: ``[B, T, H, BT]``: row r of a chunk holds row r of that chunk's inverse in its first BT columns;
        in a partial chunk of R rows, columns R and above are zero, as are positions no chunk covers.

    Raises:
        TypeError: A or cu_seqlens not a tensor, output_dtype not a dtype, a dtype without a kernel.
        ValueError: A not 4-D, cu_seqlens not 1-D integer offsets from 0 to T, B > 1 with cu_seqlens.

    Example::

        >>> A = torch.zeros(1, 6, 1, 4)              # [B, T, H, BT]: one head, chunks of 4, a partial last one
        >>> A[0, 1, 0, 0] = 2.0                       # chunk 0: (I + A)[1, 0] = 2
        >>> X = hsma_trsm.solve_tril(A)
        >>> X[0, :2, 0, :2]
        tensor([[ 1.,  0.],
                [-2.,  1.]])

    Method: the chunks are gathered into a batch of BT x BT unit lower triangles (a partial chunk's missing rows
    as identity rows) and inverted by :func:`inverse_triangular` (on CUDA one launch of the small inverse kernel
    for BT <= 64), then scattered back; differentiable through it. Where there are no sequences and T is a
    multiple of BT, the chunks are read in place as a strided view.
    """
    try:
        B, T, H, BT = _check(A, cu_seqlens, chunk_indices, output_dtype)
        out_dtype = A.dtype if output_dtype is None else output_dtype
        if cu_seqlens is None and chunk_indices is None and T % BT == 0:
            view = A.view(B, T // BT, BT, H, BT).permute(0, 1, 3, 2, 4)  # (B, NT, H, BT, BT), in place
            X = inverse_triangular(view, upper=False, unitriangular=True, out_dtype=out_dtype)
            return X.permute(0, 1, 3, 2, 4).reshape(B, T, H, BT)
        start, rows = _chunks(B, T, BT, cu_seqlens, chunk_indices, A.device)
        pos = torch.arange(BT, device=A.device)
        index = start[:, None] + pos  # (NT, BT) rows of the flattened [B * T, H, BT]
        valid = pos < rows[:, None]
        flat = A.reshape(B * T, H, BT)
        G = flat[index.clamp(0, max(B * T - 1, 0))].permute(0, 2, 1, 3)  # (NT, H, BT, BT)
        G = torch.where(valid[:, None, :, None], G, torch.zeros((), dtype=G.dtype, device=G.device))
        X = inverse_triangular(G, upper=False, unitriangular=True, out_dtype=out_dtype).permute(0, 2, 1, 3)
        out = torch.zeros(B * T, H, BT, dtype=X.dtype, device=A.device)
        out = out.index_put((index[valid],), X[valid])
        return out.view(B, T, H, BT)
    except _OP_ERRORS as e:
        raise _renamed(e, _FN) from None


def _check(A, cu_seqlens, chunk_indices, output_dtype):
    """(B, T, H, BT) of valid arguments; torch's error types naming the argument otherwise."""
    _check_tensor(_FN, "A", 1, A)
    if A.dtype not in _TRSM_DTYPES:
        raise _unsupported(_FN, A.dtype)
    if A.dim() != 4:
        raise ValueError(f"{_FN}(): A must be [B, T, H, BT] (4-D), got shape {tuple(A.shape)}")
    if output_dtype is not None and not isinstance(output_dtype, torch.dtype):
        raise TypeError(f"{_FN}(): argument 'output_dtype' must be torch.dtype, not {_typename(output_dtype)}")
    B, T, H, BT = A.shape
    for position, name, t in ((2, "cu_seqlens", cu_seqlens), (3, "chunk_indices", chunk_indices)):
        if t is None:
            continue
        _check_tensor(_FN, name, position, t)
        if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
            raise TypeError(f"{_FN}(): {name} must hold integers, got {t.dtype}")
        if t.device != A.device:
            raise ValueError(f"{_FN}(): {name} is on {t.device}, A on {A.device}")
    if chunk_indices is not None and cu_seqlens is None:
        raise ValueError(f"{_FN}(): chunk_indices needs cu_seqlens")
    if chunk_indices is not None and (chunk_indices.dim() != 2 or chunk_indices.shape[1] != 2):
        raise ValueError(f"{_FN}(): chunk_indices must be [NT, 2], got shape {tuple(chunk_indices.shape)}")
    if cu_seqlens is not None:
        if B != 1:
            raise ValueError(f"{_FN}(): with cu_seqlens the sequences are packed in one row: B must be 1, got {B}")
        if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 1:
            raise ValueError(f"{_FN}(): cu_seqlens must be 1-D [N + 1], got shape {tuple(cu_seqlens.shape)}")
        c = cu_seqlens.tolist() if chunk_indices is None else None  # (checked here when read anyway)
        if c is not None and (c[0] != 0 or c[-1] != T or any(b < a for a, b in zip(c, c[1:]))):
            raise ValueError(f"{_FN}(): cu_seqlens must rise from 0 to T = {T}, got {c}")
    return B, T, H, BT


def _chunks(B, T, BT, cu_seqlens, chunk_indices, device):
    """(first row in [B * T], rows) of every chunk, as int64 tensors on `device`."""
    if cu_seqlens is None:
        per = -(-T // BT)
        start = (torch.arange(B, device=device)[:, None] * T + torch.arange(per, device=device) * BT).reshape(-1)
        end = (start // T + 1) * T if T > 0 else start
        return start, (end - start).clamp(max=BT)
    cu = cu_seqlens.to(device=device, dtype=torch.int64)
    if chunk_indices is None:
        lens = cu.diff().tolist()
        seq = torch.tensor([s for s, n in enumerate(lens) for _ in range(-(-n // BT))], dtype=torch.int64,
                           device=device)
        within = torch.tensor([i for n in lens for i in range(-(-n // BT))], dtype=torch.int64, device=device)
    else:
        idx = chunk_indices.to(device=device, dtype=torch.int64)
        keep = idx[:, 0] >= 0
        seq, within = idx[keep, 0], idx[keep, 1]
    start = cu[seq] + within * BT
    return start, (cu[seq + 1] - start).clamp(min=0, max=BT)
