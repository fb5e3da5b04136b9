"""The deltanet suite's e2e group: fla's ``chunk_gated_delta_rule``, forward (and backward), with its inverse done by
hsma (patched inside the benchmark only).

At chunk size 64 fla-core 0.6.0 never calls ``solve_tril``: ``chunk_gated_delta_rule_fwd_intra`` runs one fused
kernel for beta K K^T and (I + A)^-1, then ``recompute_w_u_fwd``; the backward reuses the saved inverse. A solve of
hsma's can therefore only enter through fla's unfused form of that step, which fla itself runs at chunk sizes 16
and 32: ``chunk_scaled_dot_kkt_fwd`` (A, float32), ``solve_tril`` (bfloat16, fla's output dtype), then
``recompute_w_u_fwd``. Three contenders, same inputs, each one call of forward (and backward):

    fla          stock fla (the fused kernel);
    fla_unfused  fla with its unfused step (fla's own solve_tril): what the swap alone changes;
    hsma         fla with the unfused step and ``hsma_trsm.solve_tril``.

Each is checked against stock fla's output and gradients (forward-only rows: the output), not against float64
(fla's bfloat16 pipeline is the reference a user compares with), each tensor scaled by its own largest entry in
stock fla's.
"""
from __future__ import annotations

import contextlib
import importlib
from typing import Callable

import torch

BF16 = torch.bfloat16


def unfused_intra(solve_tril: Callable) -> Callable:
    """fla's ``chunk_gated_delta_rule_fwd_intra`` in its unfused form with ``solve_tril`` swapped in: (w, u, A) of
    the same arguments, A the bfloat16 inverse the backward reads."""
    kkt = importlib.import_module("fla.ops.common.chunk_scaled_dot_kkt").chunk_scaled_dot_kkt_fwd
    wy = importlib.import_module("fla.ops.gated_delta_rule.wy_fast").recompute_w_u_fwd
    prepare = importlib.import_module("fla.ops.utils.index").prepare_chunk_indices

    def intra(k, v, g=None, beta=None, cu_seqlens=None, chunk_size=64, chunk_indices=None):
        if chunk_indices is None and cu_seqlens is not None:
            chunk_indices = prepare(cu_seqlens, chunk_size)
        A = kkt(k=k, g=g, beta=beta, cu_seqlens=cu_seqlens, chunk_indices=chunk_indices, chunk_size=chunk_size,
                output_dtype=torch.float32)
        A = solve_tril(A=A, cu_seqlens=cu_seqlens, chunk_indices=chunk_indices, output_dtype=k.dtype)
        w, u = wy(k=k, v=v, beta=beta, A=A, g=g, cu_seqlens=cu_seqlens, chunk_indices=chunk_indices)
        return w, u, A

    return intra


@contextlib.contextmanager
def intra_replaced(intra: Callable):
    """fla's chunk_gated_delta_rule runs `intra` for its intra-chunk step while inside."""
    chunk = importlib.import_module("fla.ops.gated_delta_rule.chunk")
    stock = chunk.chunk_gated_delta_rule_fwd_intra
    chunk.chunk_gated_delta_rule_fwd_intra = intra
    try:
        yield
    finally:
        chunk.chunk_gated_delta_rule_fwd_intra = stock


def gdn_inputs(B: int, T: int, H: int, K: int, V: int, device, generator) -> dict:
    """Training-shaped bfloat16 q, k, v, beta (sigmoid), float32 log-decay g (logsigmoid), each requiring grad, and
    the output's cotangent do."""
    def randn(*shape, dtype=BF16):
        return torch.randn(*shape, device=device, generator=generator).to(dtype)

    q, v, do = randn(B, T, H, K), randn(B, T, H, V), randn(B, T, H, V)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K, device=device, generator=generator), dim=-1).to(BF16)
    g = torch.nn.functional.logsigmoid(randn(B, T, H, dtype=torch.float32))
    beta = torch.sigmoid(randn(B, T, H, dtype=torch.float32)).to(BF16)
    leaves = dict(q=q, k=k, v=v, g=g, beta=beta)
    return {name: t.requires_grad_() for name, t in leaves.items()} | {"do": do}


def step_flops(B: int, T: int, H: int, BT: int, K: int, V: int, backward: bool = True) -> float:
    """A rough count of fla's forward (2 (3 BT K + 2 BT V + 3 K V) per position and head) and backward (2.5x)."""
    return (3.5 if backward else 1.0) * 2 * (3 * BT * K + 2 * BT * V + 3 * K * V) * B * T * H


def gdn_step(inputs: dict, intra: Callable | None = None, backward: bool = True, sample: int = 1 << 18) -> Callable:
    """One forward (and with `backward` one backward) of fla's chunk_gated_delta_rule on the inputs (with `intra`
    for its intra-chunk step, stock where None); the call returns, for the output and each of the five gradients,
    about `sample` entries in float32 at an odd step (so that every column of the head dimension is visited).
    (Without the backward: the output alone.) Forward-only rows also run where fla refuses its gated backward (fla
    0.6.0 on Hopper with Triton >= 3.4.0 and < 3.7.1 and without tilelang: its issue 640)."""
    gdr = importlib.import_module("fla.ops.gated_delta_rule").chunk_gated_delta_rule
    names = ("q", "k", "v", "g", "beta")

    def step():
        with intra_replaced(intra) if intra is not None else contextlib.nullcontext():
            o, _ = gdr(*(inputs[n] for n in names))
            grads = torch.autograd.grad(o, [inputs[n] for n in names], inputs["do"]) if backward else ()
        flat = [t.detach().reshape(-1) for t in (o, *grads)]
        return tuple(f[:: max(1, f.numel() // sample) | 1].float() for f in flat)

    return step
