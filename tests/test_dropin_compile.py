"""torch.compile(fullgraph=True) of code calling the op and the drop-in -- static and dynamic
shapes, forward and backward, aot_eager and inductor -- against eager; and torch.library.opcheck
on a broad sample (every variant and dtype, batch shapes, strides, views, empty shapes).

Inductor on the CPU compiles C++; its cases are kept few (the compile cache makes reruns quick)."""
import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch.func import jvp, vmap

import hsma_trsm
from conftest import (
    DEVICES,
    DTYPES,
    TRANS,
    b_shape,
    check_solution,
    default_alpha,
    dtype_id,
    make_rhs,
    make_triangular,
)

BOOL = [False, True]


def _step(A, B, C):
    """A little 'training' computation: the drop-in (left and right), the op with every keyword,
    pointwise work around them, a scalar loss."""
    X = hsma_trsm.solve_triangular(A, B, upper=False)
    Y = torch.ops.hsma.trsm(A, torch.tanh(X), left=True, upper=False, trans="C", unitriangular=True, alpha=0.5)
    Z = hsma_trsm.solve_triangular(A, C, upper=False, left=False)
    return (Y.abs() ** 2).sum() + Z.sin().real.sum() + 0.1 * X.sum().real


def _problem(k, batch, n, dtype, device, gen):
    A = make_triangular(k, batch=batch, dtype=dtype, device=device, gen=gen, fill=0.0)
    B = make_rhs((*batch, k, n), dtype=dtype, device=device, gen=gen)
    C = make_rhs((n + 1, k), dtype=dtype, device=device, gen=gen)  # broadcast over A's batch
    return A.requires_grad_(), B.requires_grad_(), C.requires_grad_()


def _eager(A, B, C):
    A2, B2, C2 = (t.detach().clone().requires_grad_() for t in (A, B, C))
    loss = _step(A2, B2, C2)
    return loss.detach(), torch.autograd.grad(loss, (A2, B2, C2))


# Shapes the compiled function sees in turn; with dynamic=True, one compile serves them all.
SHAPES = [(5, (2,), 3), (9, (3,), 2), (12, (4,), 5)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compile_fullgraph_forward_backward(device, backend, dynamic, fresh_dynamo, gen):
    dtype = torch.float64
    counter = CompileCounterWithBackend(backend)
    cf = torch.compile(_step, backend=counter, fullgraph=True, dynamic=dynamic)
    shapes = SHAPES if dynamic else SHAPES[:1] * 2
    for k, batch, n in shapes:
        A, B, C = _problem(k, batch, n, dtype, device, gen)
        loss = cf(A, B, C)
        grads = torch.autograd.grad(loss, (A, B, C))
        loss_ref, grads_ref = _eager(A, B, C)
        torch.testing.assert_close(loss.detach(), loss_ref, rtol=1e-12, atol=1e-12)
        for g, g_ref in zip(grads, grads_ref):
            assert g.shape == g_ref.shape
            torch.testing.assert_close(g, g_ref, rtol=1e-10, atol=1e-12)
    # One graph, compiled once: no graph break (fullgraph would raise), no recompilation.
    assert counter.frame_count == 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=dtype_id)
def test_compile_complex_dynamic_marked(device, dtype, fresh_dynamo, gen):
    """Complex data, every dim marked dynamic by hand (mark_dynamic raises if anything in the op,
    the drop-in or the fake kernel specialises a size), backward through aot_eager."""
    counter = CompileCounterWithBackend("aot_eager")
    cf = torch.compile(_step, backend=counter, fullgraph=True)
    for k, batch, n in SHAPES:
        A, B, C = _problem(k, batch, n, dtype, device, gen)
        for t in (A, B, C):  # every dim: k, n and the batch size are all symbols
            for d in range(t.dim()):
                torch._dynamo.mark_dynamic(t, d)
        loss = cf(A, B, C)
        grads = torch.autograd.grad(loss, (A, B, C))
        loss_ref, grads_ref = _eager(A, B, C)
        tol = 1e-4 if dtype == torch.complex64 else 1e-10
        torch.testing.assert_close(loss.detach(), loss_ref, rtol=tol, atol=tol)
        for g, g_ref in zip(grads, grads_ref):
            torch.testing.assert_close(g, g_ref, rtol=tol, atol=tol * g_ref.abs().max().item())
    assert counter.frame_count == 1


@pytest.mark.parametrize("device", DEVICES)
def test_compile_out_vmap_jvp(device, fresh_dynamo, gen):
    """The drop-in with out= (of the right shape), vmap and jvp inside a compiled function."""
    dtype = torch.float64
    A = make_triangular(6, batch=(3,), dtype=dtype, upper=True, device=device, gen=gen)
    B = make_rhs((3, 6, 2), dtype=dtype, device=device, gen=gen)

    def with_out(A, B, out):
        hsma_trsm.solve_triangular(A, B, upper=True, out=out)
        return out + 1

    out = torch.empty(3, 6, 2, dtype=dtype, device=device)
    got = torch.compile(with_out, backend="aot_eager", fullgraph=True)(A, B, out)
    ref = torch.linalg.solve_triangular(A.nan_to_num(0).triu(), B, upper=True)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got, ref + 1, rtol=1e-12, atol=1e-12)

    def vmapped(A, B):
        return vmap(lambda a, b: hsma_trsm.solve_triangular(a, b, upper=True), in_dims=(0, 2))(A, B)

    Bv = B.permute(1, 2, 0).contiguous()  # vmapped dim last
    torch.testing.assert_close(torch.compile(vmapped, backend="aot_eager", fullgraph=True)(A, Bv), ref,
                               rtol=1e-12, atol=1e-12)

    Af = A.nan_to_num(0)
    dA = torch.randn(A.shape, dtype=dtype, generator=gen).to(device).triu()

    def tangent(A, B, dA):
        return jvp(lambda a: hsma_trsm.solve_triangular(a, B, upper=True), (A,), (dA,))[1]

    torch.testing.assert_close(torch.compile(tangent, backend="aot_eager", fullgraph=True)(Af, B, dA),
                               tangent(Af, B, dA), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_compiled_autograd(device, fresh_dynamo, gen):
    """torch._dynamo's compiled autograd (the backward graph traced at backward time) through the
    op's autograd node gives eager's gradients."""
    dtype = torch.float64
    A, B, C = _problem(6, (2,), 3, dtype, device, gen)

    ca = torch._dynamo.compiled_autograd
    enable = getattr(ca, "_enable", None) or ca.enable
    torch._dynamo.utils.counters.clear()
    with enable(torch.compile(backend="aot_eager", fullgraph=True)):
        loss = _step(A, B, C)
        loss.backward()
    loss = loss.detach()
    assert torch._dynamo.utils.counters["compiled_autograd"]["captures"] == 1
    loss_ref, grads_ref = _eager(A, B, C)
    torch.testing.assert_close(loss, loss_ref, rtol=1e-12, atol=1e-12)
    for t, g_ref in zip((A, B, C), grads_ref):
        torch.testing.assert_close(t.grad, g_ref, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# opcheck: every (left, upper, trans, unit) variant in every dtype, with the layout, batch shape
# and alpha cycling through the list below. The quick checks (schema, autograd registration,
# fake tensor) run on all of them, the AOT ones on a rotating subset.

LAYOUTS = ["contiguous", "A.mT-B.mT", "step", "A-expanded", "conj", "neg", "batch0", "k0", "n0"]
FAST_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor")

OPCHECK_PARAMS = [
    pytest.param(dtype, left, upper, trans, unit, LAYOUTS[i % len(LAYOUTS)], i,
                 id=f"{dtype_id(dtype)}-{'L' if left else 'R'}{'U' if upper else 'L'}{trans}{'u' if unit else 'n'}"
                    f"-{LAYOUTS[i % len(LAYOUTS)]}")
    for i, (dtype, left, upper, trans, unit) in enumerate(
        (d, le, up, tr, un) for d in DTYPES for le in BOOL for up in BOOL for tr in TRANS for un in BOOL)
]


def _opcheck_inputs(dtype, left, upper, unit, layout, device, gen):
    k = 0 if layout == "k0" else 5
    other = 0 if layout == "n0" else 3
    a_batch = {"A-expanded": (), "batch0": (0,)}.get(layout, (2,))
    b_batch = (0,) if layout == "batch0" else (2,)
    A = make_triangular(k, batch=a_batch, dtype=dtype, upper=upper, unit=unit, device=device, gen=gen)
    B = make_rhs(b_shape(k, other, left=left, batch=b_batch), dtype=dtype, device=device, gen=gen)
    if layout == "A.mT-B.mT":
        A, B = A.mT.contiguous().mT, B.mT.contiguous().mT
    elif layout == "step":
        A = A.repeat_interleave(2, -1)[..., ::2]
        B = B.repeat_interleave(3, -2)[..., ::3, :]
    elif layout == "A-expanded":
        A = A.expand(2, k, k)
    elif layout == "conj" and dtype.is_complex:
        A, B = A.conj(), B.conj()
    elif layout == "neg":
        A, B = torch._neg_view(A), torch._neg_view(B)
    return A, B


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,left,upper,trans,unit,layout,i", OPCHECK_PARAMS)
def test_opcheck_broad(device, dtype, left, upper, trans, unit, layout, i, gen):
    A, B = _opcheck_inputs(dtype, left, upper, unit, layout, device, gen)
    kwargs = dict(left=left, upper=upper, trans=trans, unitriangular=unit,
                  alpha=default_alpha(dtype) if i % 2 else 1)
    utils = FAST_UTILS + (("test_aot_dispatch_static",) if i % 4 == 0 else ())
    result = torch.library.opcheck(torch.ops.hsma.trsm.default, (A, B), kwargs, test_utils=utils)
    assert all(v == "SUCCESS" for v in result.values()), result
    check_solution(torch.ops.hsma.trsm(A, B, **kwargs), A, B, **kwargs)
    if i % 6 == 0 and A.numel() and B.numel():  # the in-place form into a fresh, result-shaped B
        Bi = B.expand(torch.broadcast_shapes(A.shape[:-2], B.shape[:-2]) + B.shape[-2:]).clone()
        result = torch.library.opcheck(torch.ops.hsma.trsm_.default, (A, Bi), kwargs, test_utils=FAST_UTILS)
        assert all(v == "SUCCESS" for v in result.values()), result


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,left,upper,trans,unit", [
    (torch.float64, True, False, "N", True), (torch.complex128, False, True, "C", False),
    (torch.float64, False, True, "T", False), (torch.complex128, True, False, "T", True)])
def test_opcheck_dynamic_with_grad(device, dtype, left, upper, trans, unit, gen):
    """AOT autograd with dynamic shapes (symbolic sizes through the C++ backward's sum_to)."""
    A = make_triangular(4, batch=(2, 1), dtype=dtype, upper=upper, unit=unit, device=device, gen=gen, fill=0.0)
    B = make_rhs(b_shape(4, 3, left=left, batch=(3,)), dtype=dtype, device=device, gen=gen)
    kwargs = dict(left=left, upper=upper, trans=trans, unitriangular=unit, alpha=default_alpha(dtype))
    result = torch.library.opcheck(torch.ops.hsma.trsm.default, (A.requires_grad_(), B.requires_grad_()), kwargs,
                                   test_utils=("test_aot_dispatch_dynamic",))
    assert all(v == "SUCCESS" for v in result.values()), result
