"""Regression tests for the cases a code review found (conj views and in-place solves past the
kernels' four merged batch dims, alpha's place in the solve, A and B sharing memory)."""
import pytest
import torch

import hsma_trsm
from conftest import DEVICES, call_and_check, check_solution, make_rhs, make_triangular

# Five batch dims that cannot be merged into four (alternating broadcast of A).
A_BATCH = (2, 1, 2, 1, 2)
B_BATCH = (2, 2, 2, 2, 2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [8, 40])
@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
def test_conj_view_many_batch_dims(device, k, upper, gen):
    A = make_triangular(k, batch=A_BATCH, dtype=torch.complex128, upper=upper, device=device, gen=gen)
    B = make_rhs((*B_BATCH, k, 3), dtype=torch.complex128, device=device, gen=gen)
    Ac = A.conj()  # a conj view, non-contiguous once expanded over the batch
    assert Ac.is_conj()
    call_and_check(Ac, B, upper=upper, alpha=0.5 - 0.25j)
    call_and_check(Ac.mH, B, upper=not upper, trans="T")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [8, 40])
def test_inplace_strided_many_batch_dims(device, k, gen):
    A = make_triangular(k, dtype=torch.float64, device=device, gen=gen)
    B = make_rhs((k, 3, 2, 2, 2, 2, 2), dtype=torch.float64, device=device, gen=gen).permute(6, 5, 4, 3, 2, 0, 1)
    assert not B.is_contiguous()
    B0 = B.clone()
    hsma_trsm.trsm_(A, B)
    check_solution(B.contiguous(), A, B0)


@pytest.mark.parametrize("device", DEVICES)
def test_alpha_scales_b_before_the_solve(device):
    # alpha * B is finite (1e36) while B alone would overflow in the solve: BLAS scales B first.
    A = 0.1 * torch.eye(3, dtype=torch.float32, device=device)
    B = torch.full((3, 2), 1e38, dtype=torch.float32, device=device)
    X = hsma_trsm.trsm(A, B, alpha=1e-3)
    assert torch.isfinite(X).all()
    torch.testing.assert_close(X.cpu(), torch.full((3, 2), 1e36), rtol=1e-5, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_refuses_b_sharing_memory_with_a(device, gen):
    LU = make_triangular(6, dtype=torch.float64, device=device, gen=gen, fill=0.0)
    with pytest.raises(RuntimeError, match=r"^hsma_trsm\.trsm_\(\): A and B share memory"):
        hsma_trsm.trsm_(LU, LU)
    with pytest.raises(RuntimeError, match=r"^hsma_trsm\.trsm_\(\): A and B share memory"):
        hsma_trsm.trsm_(LU, LU[:, :3])
