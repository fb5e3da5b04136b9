"""The sweep (csrc/kernels/sweep.cu): orders above 64 against panels of at most 16 columns, forced
with every row block, panel width and task length, against the float64/complex128 reference; and the
blocked path on the same shapes (the override sweep=0), so that both paths stay tested whichever the
plan picks."""
import pytest
import torch

from conftest import (
    CUDA_DEVICES,
    DTYPES,
    b_shape,
    call_and_check,
    default_alpha,
    dtype_id,
    make_rhs,
    make_triangular,
)

VARIANTS = [(True, False, "N", False), (True, True, "T", True), (False, False, "C", False), (False, True, "N", True)]


def _vid(v):
    left, upper, trans, unit = v
    return f"{'L' if left else 'R'}{'U' if upper else 'L'}{trans}{'u' if unit else 'n'}"


# (rows R, task length G, grid cap): one task per row block and several; a grid of one block of
# threads takes every task in order.
PLANS = {
    "R64-G4": dict(sweep_rows=64, sweep_segment=4),
    "R64-G1": dict(sweep_rows=64, sweep_segment=1),
    "R64-G2-grid1": dict(sweep_rows=64, sweep_segment=2, max_blocks=1),
    "R128-G2": dict(sweep_rows=128, sweep_segment=2),
}


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("variant", VARIANTS, ids=[_vid(v) for v in VARIANTS])
@pytest.mark.parametrize("plan", list(PLANS))
@pytest.mark.parametrize("k,n", [(65, 1), (128, 3), (129, 16), (300, 17), (700, 2)])
def test_sweep_forced(device, dtype, variant, plan, k, n, gen, hsma_overrides):
    left, upper, trans, unit = variant
    overrides = dict(PLANS[plan])
    if overrides["sweep_rows"] == 128 and dtype != torch.float32:
        overrides["sweep_rows"] = 64  # (the plan takes 64 for other dtypes too)
    hsma_overrides(sweep=1, **overrides)
    A = make_triangular(k, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, n, left=left), dtype=dtype, device=device, gen=gen)
    call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=2)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("cols", [1, 2, 4, 8, 16])
def test_sweep_panel_widths(device, dtype, cols, gen, hsma_overrides):
    """Every panel width against 37 columns: panels past n are partly empty."""
    hsma_overrides(sweep=1, sweep_cols=cols)
    A = make_triangular(200, dtype=dtype, device=device, gen=gen)
    B = make_rhs((200, 37), dtype=dtype, device=device, gen=gen)
    call_and_check(A, B)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64], ids=dtype_id)
@pytest.mark.parametrize("a_batch,b_batch", [((), (3,)), ((2, 1), (1, 3)), ((4,), (4,))])
def test_sweep_batches(device, dtype, a_batch, b_batch, gen, hsma_overrides):
    """Broadcast and batched triangles (the inverses per triangle), one matrix of B per chain."""
    hsma_overrides(sweep=1)
    A = make_triangular(150, batch=a_batch, dtype=dtype, device=device, gen=gen)
    B = make_rhs(b_batch + (150, 5), dtype=dtype, device=device, gen=gen)
    call_and_check(A, B, alpha=-1)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("layout", ["column-major A", "strided B", "conj A"])
def test_sweep_layouts(device, layout, gen, hsma_overrides):
    hsma_overrides(sweep=1)
    dtype = torch.complex64
    A = make_triangular(260, dtype=dtype, device=device, gen=gen)
    B = make_rhs((260, 6), dtype=dtype, device=device, gen=gen)
    if layout == "column-major A":
        A = A.mT.contiguous().mT
    elif layout == "strided B":
        B = torch.nn.functional.pad(B, (0, 3))[:, ::2]
    else:
        A = A.conj()
    call_and_check(A, B)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("sweep", [0, 1], ids=["blocked", "sweep"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128], ids=dtype_id)
def test_inplace_large(device, sweep, dtype, gen, hsma_overrides):
    hsma_overrides(sweep=sweep)
    A = make_triangular(333, dtype=dtype, upper=True, device=device, gen=gen)
    B = make_rhs((4, 333), dtype=dtype, device=device, gen=gen)
    ref = torch.ops.hsma.trsm(A, B, left=False, upper=True)
    out = B.clone()
    torch.ops.hsma.trsm_(A, out, left=False, upper=True)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("variant", VARIANTS, ids=[_vid(v) for v in VARIANTS])
@pytest.mark.parametrize("k,n", [(100, 1), (520, 3), (300, 40)])
def test_blocked_forced(device, dtype, variant, k, n, gen, hsma_overrides):
    """The blocked path where the plan now takes the sweep (narrow right-hand sides, medium orders)."""
    left, upper, trans, unit = variant
    hsma_overrides(sweep=0)
    A = make_triangular(k, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, n, left=left), dtype=dtype, device=device, gen=gen)
    call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=-1)


@pytest.mark.parametrize("device", CUDA_DEVICES)
def test_sweep_is_deterministic(device, gen, hsma_overrides):
    """Partial sums are added in task order, whatever the timing: bitwise the same result."""
    hsma_overrides(sweep=1, sweep_segment=1)
    A = make_triangular(1500, dtype=torch.float32, device=device, gen=gen)
    B = make_rhs((1500, 2), dtype=torch.float32, device=device, gen=gen)
    X = torch.ops.hsma.trsm(A, B)
    for _ in range(5):
        assert torch.equal(torch.ops.hsma.trsm(A, B), X)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
@pytest.mark.parametrize("k", [127, 128, 129, 255, 256, 257, 511, 512, 513, 1025])
@pytest.mark.parametrize("n", [1, 2, 5, 9, 17])
def test_sweep_block_edges(device, dtype, k, n, gen, hsma_overrides):
    """Orders around the row blocks (64, 128) and the task boundaries (8 row blocks: 512, 1024), and every
    panel width (n = 17: a full panel of 16 and one of 1); the unused triangle is NaN (make_triangular)."""
    hsma_overrides(sweep=1)
    upper = k % 2 == 1
    A = make_triangular(k, dtype=dtype, upper=upper, device=device, gen=gen)
    B = make_rhs((k, n), dtype=dtype, device=device, gen=gen)
    call_and_check(A, B, upper=upper)


# One column at order 400 (complex, float64): ATen's solve (cuBLAS trsm) for one matrix, the sweep for a batch;
# the plan's choice here, pinned in test_block_plan.py.
@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64, torch.complex128], ids=dtype_id)
@pytest.mark.parametrize("variant", VARIANTS, ids=[_vid(v) for v in VARIANTS])
@pytest.mark.parametrize("view", ["plain", "conj A", "column-major A"])
def test_complex_single_column_by_aten(device, dtype, variant, view, gen):
    left, upper, trans, unit = variant
    A = make_triangular(400, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    if view == "conj A":
        A = A.conj()
    elif view == "column-major A":
        A = A.mT.contiguous().mT
    B = make_rhs(b_shape(400, 1, left=left), dtype=dtype, device=device, gen=gen)
    assert torch.ops.hsma._block_plan(dtype, 400, 1, True, "NVIDIA H200", "9.0")[4] == "aten"
    call_and_check(A, B, left=left, upper=upper, trans=trans, unitriangular=unit, alpha=default_alpha(dtype))
