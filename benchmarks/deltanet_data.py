"""Inputs of the deltanet suite (benchmarks/deltanet.py): fla's [B, T, H, C] layout viewed as chunks, A as fla's
chunk_scaled_dot_kkt builds it, the matrices each contender is checked on, and the float64 unit-lower triangle
of the reference."""
from __future__ import annotations

import math

import torch

CHECK_MATRICES = 8  # matrices per contender checked against the float64 reference


def chunk_view(X: torch.Tensor, BT: int) -> torch.Tensor:
    """fla's [B, T, H, C] as (B, T / BT, H, BT, C): row i of chunk n of head h is X[b, n BT + i, h, :]."""
    B, T, H, C = X.shape
    return X.view(B, T // BT, BT, H, C).transpose(2, 3)


def deltanet_A(B: int, T: int, H: int, BT: int, keys: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """fla's A [B, T, H, BT] float32 as chunk_scaled_dot_kkt builds it: A[b, t, h, j] = beta[b, t, h] <k_t, k_s>
    for s = BT (t // BT) + j < t, else 0 (the diagonal and above hold 0)."""
    kc = keys.float().view(B, T // BT, BT, H, -1)
    G = torch.einsum("bnihd,bnjhd->bnihj", kc, kc) * beta.float().view(B, T // BT, BT, H, 1)
    strict = torch.ones(BT, BT, dtype=torch.bool, device=keys.device).tril(-1).view(BT, 1, BT)
    return (G * strict).reshape(B, T, H, BT).contiguous()


def pick_index(batch_shape, device, count: int = CHECK_MATRICES) -> tuple:
    """Indices of ``count`` matrices spread over the batch dims (first and last included)."""
    total = math.prod(batch_shape)
    flat = torch.linspace(0, total - 1, min(count, total), device=device).round().long()
    return torch.unravel_index(flat, tuple(batch_shape))


def unit_lower(M: torch.Tensor) -> torch.Tensor:
    """I + the strict lower part of M (float64): what unitriangular=True solves with."""
    eye = torch.eye(M.shape[-1], dtype=torch.float64, device=M.device)
    return M.double().tril(-1) + eye
