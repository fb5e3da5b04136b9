"""torch.library.opcheck on torch.ops.hsma.trsm / trsm_ (schema, autograd registration, fake
kernel, AOT dispatch), and torch.compile(fullgraph=True) smoke tests whose results are checked
against the reference."""
import pytest
import torch

import hsma_trsm
from conftest import (
    DEVICES,
    DTYPES,
    b_shape,
    check_solution,
    default_alpha,
    dtype_id,
    forward_tolerance,
    make_rhs,
    make_triangular,
    reference_trsm,
    relative_error,
)

# (k, a_batch, b_batch, layout, left, upper, trans, unit, alpha)
OPCHECK_CASES = [
    pytest.param(5, (), (), "plain", True, False, "N", False, 1, id="k5-LLNn"),
    pytest.param(6, (2, 1), (3,), "plain", False, True, "T", True, "alpha", id="k6-bcast-RUTu-alpha"),
    pytest.param(7, (3,), (3,), "mT", True, True, "C", False, "alpha", id="k7-A.mT-B.mT-LUCn-alpha"),
    pytest.param(4, (), (2,), "step", False, False, "C", True, 2, id="k4-strided-RLCu"),
    pytest.param(70, (), (2,), "plain", True, True, "T", False, 1, id="k70-LUTn"),
    pytest.param(3, (0,), (), "plain", True, False, "N", False, 1, id="k3-batch0"),
]


def _inputs(k, a_batch, b_batch, layout, left, upper, unit, dtype, device, gen):
    A = make_triangular(k, batch=a_batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, 3, left=left, batch=b_batch), dtype=dtype, device=device, gen=gen)
    if layout == "mT":
        A, B = A.mT.contiguous().mT, B.mT.contiguous().mT
    elif layout == "step":
        A = torch.repeat_interleave(torch.repeat_interleave(A, 2, -1), 2, -2)[..., ::2, ::2]
        B = torch.repeat_interleave(B, 3, -1)[..., ::3]
        assert not A.is_contiguous() and not B.is_contiguous()
    return A, B


# Every case without grad; with inputs requiring grad (autograd registration + AOT backward) on
# the float64/complex128 small cases only, to keep the suite quick.
OPCHECK_PARAMS = [
    pytest.param(dtype, *case.values, rg, id=f"{dtype_id(dtype)}-{case.id}-{'grad' if rg else 'nograd'}")
    for dtype in DTYPES
    for case in OPCHECK_CASES
    for rg in (False, True)
    if not rg or (dtype in (torch.float64, torch.complex128) and case.values[0] <= 10)
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,k,a_batch,b_batch,layout,left,upper,trans,unit,alpha,requires_grad", OPCHECK_PARAMS)
def test_opcheck_trsm(device, dtype, k, a_batch, b_batch, layout, left, upper, trans, unit, alpha, requires_grad,
                      gen):
    alpha = default_alpha(dtype) if alpha == "alpha" else alpha
    A, B = _inputs(k, a_batch, b_batch, layout, left, upper, unit, dtype, device, gen)
    if requires_grad:
        A.requires_grad_()
        B.requires_grad_()
    kwargs = dict(left=left, upper=upper, trans=trans, unitriangular=unit, alpha=alpha)
    result = torch.library.opcheck(torch.ops.hsma.trsm.default, (A, B), kwargs)
    assert all(v == "SUCCESS" for v in result.values()), result
    check_solution(torch.ops.hsma.trsm(A, B, **kwargs).detach(), A, B, **kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64], ids=dtype_id)
@pytest.mark.parametrize("k,left,trans", [(5, True, "C"), (70, False, "T")])
def test_opcheck_trsm_inplace(device, dtype, k, left, trans, gen):
    """Schema (only B mutated), autograd registration, fake kernel and AOT dispatch
    (functionalization) of the in-place op."""
    A, B = _inputs(k, (2,), (2,), "plain", left, False, False, dtype, device, gen)
    B0 = B.clone()
    result = torch.library.opcheck(torch.ops.hsma.trsm_.default, (A, B), dict(left=left, trans=trans))
    assert all(v == "SUCCESS" for v in result.values()), result
    torch.ops.hsma.trsm_(A, B0, left=left, trans=trans)
    check_solution(B0, A, B, left=left, trans=trans)


# ---------------------------------------------------------------------------------------------
# torch.compile smoke tests (aot_eager: exercises dynamo, the fake kernel, functionalization and
# AOT autograd without inductor's compile time).


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_solve_triangular(device, backend, fresh_dynamo, gen):
    def f(A, B):
        X = hsma_trsm.solve_triangular(A, 2 * B, upper=True, left=False)
        return X - 1

    cf = torch.compile(f, backend=backend, fullgraph=True)
    for k, batch, dtype in [(6, (2,), torch.float64), (9, (3,), torch.float64), (70, (), torch.complex64)]:
        A = make_triangular(k, batch=batch, dtype=dtype, upper=True, device=device, gen=gen)
        B = make_rhs((*batch, 4, k), dtype=dtype, device=device, gen=gen)
        got = cf(A, B)
        ref = reference_trsm(A, B, left=False, upper=True, alpha=2) - 1
        assert got.shape == ref.shape
        assert relative_error(got, ref) <= forward_tolerance(dtype, k)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_trsm_kwargs_and_backward(device, fresh_dynamo, gen):
    """All keyword arguments through dynamo, plus a backward through the compiled graph."""
    dtype = torch.complex128
    alpha = 0.5 - 1j

    def f(A, B):
        return hsma_trsm.trsm(A, B, left=True, upper=False, trans="C", unitriangular=True, alpha=alpha).abs().sum()

    cf = torch.compile(f, backend="aot_eager", fullgraph=True)
    A = make_triangular(5, batch=(2,), dtype=dtype, unit=True, device=device, gen=gen, fill=0.0).requires_grad_()
    B = make_rhs((2, 5, 3), dtype=dtype, device=device, gen=gen).requires_grad_()
    loss = cf(A, B)
    gA, gB = torch.autograd.grad(loss, (A, B))
    A2, B2 = A.detach().clone().requires_grad_(), B.detach().clone().requires_grad_()
    loss2 = f(A2, B2)
    gA2, gB2 = torch.autograd.grad(loss2, (A2, B2))
    ref = torch.tensor(abs(reference_trsm(A, B, trans="C", unitriangular=True, alpha=alpha)).sum())
    torch.testing.assert_close(loss.detach().cpu(), ref, rtol=1e-12, atol=0)
    torch.testing.assert_close(gA, gA2, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gB, gB2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_inplace(device, backend, fresh_dynamo, gen):
    """hsma_trsm.trsm_ inside a compiled function (functionalized by aot_eager)."""

    def f(A, B):
        C = B * 3
        hsma_trsm.trsm_(A, C, upper=True, trans="C", left=False)
        return C + 1

    cf = torch.compile(f, backend=backend, fullgraph=True)
    for k in (5, 70):
        A = make_triangular(k, batch=(2,), dtype=torch.complex64, upper=True, device=device, gen=gen)
        B = make_rhs((2, 3, k), dtype=torch.complex64, device=device, gen=gen)
        B0 = B.clone()
        got = cf(A, B)
        torch.testing.assert_close(B, B0, rtol=0, atol=0)  # B itself untouched: the copy was solved
        ref = reference_trsm(A, B, left=False, upper=True, trans="C", alpha=3) + 1
        assert relative_error(got, ref) <= forward_tolerance(torch.complex64, k)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_dynamic_shapes(device, fresh_dynamo, gen):
    def f(A, B):
        return torch.ops.hsma.trsm(A, B, upper=True, trans="T")

    cf = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)
    for k, n, batch in [(4, 3, (2,)), (7, 5, (3,)), (11, 2, (1,))]:
        A = make_triangular(k, batch=batch, dtype=torch.float32, upper=True, device=device, gen=gen)
        B = make_rhs((*batch, k, n), dtype=torch.float32, device=device, gen=gen)
        check_solution(cf(A, B), A, B, upper=True, trans="T")
