"""CUDA graphs and host synchronisation (CUDA only).

- A training step (forward and backward through the op and the drop-in) captured into a CUDA graph
  on the current stream and replayed with new inputs gives eager's results. Capture runs in
  torch's default "global" error mode, so a cudaMalloc outside torch's caching allocator, a launch
  on another stream or a synchronising call inside the op would make the capture fail.
- With torch.cuda.set_sync_debug_mode("error"), eager forward and backward raise on any
  host-device synchronisation torch performs.
- torch.compile(mode="reduce-overhead") (inductor + CUDA-graph trees) of the same step.
- Small solves that depend on each other back to back (each small kernel family), eager and
  replayed from a graph: on sm_90+ each kernel is a programmatic dependent launch that may start
  while the previous one ends, and must still read its inputs after they are written and write its
  output after the previous kernel has read it."""
import pytest
import torch

import hsma_trsm
from conftest import (CUDA_DEVICES, dtype_id, forward_tolerance, make_generator, make_rhs, make_triangular,
                      reference_trsm, relative_error, set_small_kernel)

# (k, batch, dtype): the small path, the direct-leaf blocked path, the inverted-block path.
CASES = [
    pytest.param(16, (64,), torch.float32, id="small-k16-batch64"),
    pytest.param(100, (2,), torch.float64, id="blocked-k100"),
    pytest.param(300, (), torch.complex64, id="inverted-blocks-k300"),
]


def _step(W, B, C):
    """Loss and gradients of a step that uses the drop-in (left, right) and the op."""
    X = hsma_trsm.solve_triangular(W, B, upper=False)
    Y = torch.ops.hsma.trsm(W, X, upper=False, trans="C", alpha=0.5)
    Z = hsma_trsm.solve_triangular(W, C, upper=False, left=False, unitriangular=True)
    loss = (Y.abs() ** 2).sum() + (Z.abs() ** 2).sum()
    gW, gB, gC = torch.autograd.grad(loss, (W, B, C))
    return loss.detach(), gW, gB, gC


def _inputs(k, batch, dtype, device, seed):
    gen = make_generator(seed)
    W = make_triangular(k, batch=batch, dtype=dtype, device=device, gen=gen, fill=0.0).requires_grad_()
    B = make_rhs((*batch, k, 3), dtype=dtype, device=device, gen=gen).requires_grad_()
    C = make_rhs((*batch, 2, k), dtype=dtype, device=device, gen=gen).requires_grad_()
    return W, B, C


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype in (torch.float32, torch.complex64) else dict(rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("k,batch,dtype", CASES)
def test_cuda_graph_training_step(device, k, batch, dtype):
    static = _inputs(k, batch, dtype, device, seed=1)
    # Warm up on a side stream (first calls set up cuBLAS handles, read the block-size table).
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            _step(*static)
    torch.cuda.current_stream().wait_stream(s)

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # captures on its own stream, which is the current stream inside
        static_out = _step(*static)

    for seed in (2, 3):
        fresh = _inputs(k, batch, dtype, device, seed=seed)
        with torch.no_grad():
            for dst, src in zip(static, fresh):
                dst.copy_(src)
        g.replay()
        torch.cuda.synchronize()
        eager = _step(*fresh)
        for got, want in zip(static_out, eager):
            torch.testing.assert_close(got, want, **_tol(dtype))


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("k,batch,dtype", CASES)
def test_no_host_sync_in_forward_or_backward(device, k, batch, dtype):
    inputs = _inputs(k, batch, dtype, device, seed=4)
    _step(*inputs)  # first call outside the check: one-time setup (table lookup, handles)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = _step(*inputs)
        Bi = inputs[1].detach().clone()
        torch.ops.hsma.trsm_(inputs[0].detach(), Bi, upper=False)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    assert all(torch.isfinite(t).all() for t in out)


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
# inductor advises TF32 matmuls; this test compares with eager at full float32 precision on purpose.
@pytest.mark.filterwarnings("ignore:TensorFloat32 tensor cores:UserWarning")
def test_compile_reduce_overhead(device, dtype):
    """inductor with CUDA-graph trees: forward and backward replayed from graphs equal eager."""
    torch._dynamo.reset()
    try:
        def loss_fn(W, B):
            X = hsma_trsm.solve_triangular(W, B, upper=False)
            return (torch.tanh(X) ** 2).sum()

        cf = torch.compile(loss_fn, mode="reduce-overhead", fullgraph=True)
        for seed in (1, 2, 3):  # several calls: warm-up, record, replay
            W, B, _ = _inputs(40, (8,), dtype, device, seed=seed)
            loss = cf(W, B)
            gW, gB = torch.autograd.grad(loss, (W, B))
            W2, B2 = W.detach().clone().requires_grad_(), B.detach().clone().requires_grad_()
            loss2 = loss_fn(W2, B2)
            gW2, gB2 = torch.autograd.grad(loss2, (W2, B2))
            torch.testing.assert_close(loss.detach().clone(), loss2.detach(), **_tol(dtype))
            torch.testing.assert_close(gW.clone(), gW2, **_tol(dtype))
            torch.testing.assert_close(gB.clone(), gB2, **_tol(dtype))
    finally:
        torch._dynamo.reset()


# (kernel spec, k, batch, n, dtype): a shape each small kernel family takes (see set_small_kernel).
CHAIN_CASES = [
    pytest.param("auto", 64, (), 64, torch.complex128, id="segments-blocked-single-64"),
    pytest.param("auto+plain-launch", 64, (), 64, torch.float32, id="plain-launch-single-64"),
    pytest.param("auto+pdl-at-end", 64, (), 64, torch.complex64, id="pdl-at-end-single-64"),
    pytest.param("columns", 8, (10000,), 8, torch.complex64, id="columns-batch10000-8"),
    pytest.param("columns+pdl-at-start", 8, (10000,), 8, torch.complex64, id="pdl-at-start-columns-batch10000-8"),
    pytest.param("columns", 32, (300,), 32, torch.float32, id="columns-batch300-32"),
    pytest.param("columns", 32, (300,), 32, torch.complex128, id="columns-capped-batch300-32"),
    pytest.param("auto", 64, (64,), 64, torch.float64, id="columns-split-batch64-64"),
    pytest.param("segments:8", 64, (64,), 64, torch.complex64, id="segments-8-lanes-batch64-64"),
    pytest.param("warps", 32, (500,), 1, torch.float64, id="warp-tasks-batch500-32"),
    pytest.param("tiles", 64, (20,), 64, torch.complex128, id="tiles-batch20-64"),
    pytest.param("mma", 64, (20,), 64, torch.float64, id="mma-batch20-64"),
    pytest.param("mma", 64, (), 256, torch.complex128, id="mma-fold-single-64x256"),
    pytest.param("mma+pdl-at-start", 64, (), 256, torch.complex128, id="pdl-at-start-mma-fold-single-64x256"),
]


def _chain(A, B):
    """Four small solves in a row (the op, left lower): X1 = A^-1 B; X2 = A^-1 X1, reading what the
    kernel before wrote; X1 solved in place (X1 <- A^-1 X1), writing what the kernel before read;
    X3 = A^-1 (X1 + X2), after a torch kernel. X1 and X2 end equal to A^-2 B."""
    X1 = torch.ops.hsma.trsm(A, B, upper=False)
    X2 = torch.ops.hsma.trsm(A, X1, upper=False)
    torch.ops.hsma.trsm_(A, X1, upper=False)
    X3 = torch.ops.hsma.trsm(A, X1 + X2, upper=False)
    return X1, X2, X3


def _check_chain(A, B, X1, X2, X3):
    """X1 and X2 against A^-2 B (two reference solves: twice the one-solve tolerance, which is two
    orders of magnitude above a correct solve's error), X3 against the reference of its input."""
    tol = forward_tolerance(B.dtype, A.shape[-1])
    twice = reference_trsm(A, torch.from_numpy(reference_trsm(A, B)))
    steps = {"X1 in place": (X1, twice, 2 * tol), "X2": (X2, twice, 2 * tol),
             "X3": (X3, reference_trsm(A, X1 + X2), tol)}
    for name, (X, ref, bound) in steps.items():
        err = relative_error(X, ref)
        assert err <= bound, f"{name}: forward relative error {err:.3e} > {bound:.3e}"


@pytest.mark.parametrize("device", CUDA_DEVICES)
@pytest.mark.parametrize("spec,k,batch,n,dtype", CHAIN_CASES)
def test_dependent_small_solves(device, spec, k, batch, n, dtype, hsma_overrides):
    """Each solve of _chain right after the one it depends on, eager and replayed from a graph (new
    inputs copied in), against the float64/complex128 reference of each step's actual input. The
    graph's replay is where a kernel starts while the one before it ends (sm_90+; where the next
    launch is released only at completion, or on older GPUs with plain launches, the same checks
    hold but a missing wait would hardly show)."""
    set_small_kernel(hsma_overrides, spec)
    gen = make_generator(7)

    def inputs():
        A = make_triangular(k, batch=batch, dtype=dtype, device=device, gen=gen)
        B = make_rhs((*batch, k, n), dtype=dtype, device=device, gen=gen)
        return A, B

    A, B = inputs()
    _check_chain(A, B, *_chain(A, B))

    static = inputs()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        _chain(*static)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = _chain(*static)
    for _ in range(2):
        for dst, src in zip(static, inputs()):
            dst.copy_(src)
        g.replay()
        torch.cuda.synchronize()
        _check_chain(static[0], static[1], *static_out)
