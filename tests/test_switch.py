"""The switch (hsma_trsm/switch.py): enable / disable / enabled() route torch's own solves to hsma.

What runs where:
    - registration and its removal (the dispatcher's own table, before and after: identical), nesting;
    - routing end to end on the CPU, through the switch's private ``_enabled(keys=("CPU",))``: every test below that
      takes ``device`` routes the CPU key on the CPU and the CUDA key on a GPU. On the CPU, hsma's own
      kernel calls ATen's linalg_solve_triangular through its out= overload, which is never routed (tested
      below). On CUDA: the switch as users get it;
    - torch's functions with the switch on against the same calls with it off: values, output strides,
      gradients (not doubled), forward AD, vmap, torch.compile, a CUDA graph (GPU);
    - LinearOperator arguments and import order (linear_operator), GPyTorch exact GP and SVGP losses and
      gradients, a BoTorch fit and acquisition value with and without the switch (skipped when the package is
      missing).
"""
import contextlib
import math
import os
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest
import torch

import hsma_trsm
from hsma_trsm import solvers, switch
from conftest import CUDA_DEVICES, DEVICES, make_generator, make_triangular

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
F64 = torch.float64


@pytest.fixture(autouse=True)
def _switched_off():
    switch.disable()
    yield
    switch.disable()


def _dumps():
    return {op: torch._C._dispatch_dump(f"aten::{op}") for op in switch.ROUTED}


# ---------------------------------------------------------------------------------------------
# Registration, removal, nesting


def test_enable_registers_cuda_kernels_and_disable_restores_the_table():
    before = _dumps()
    hsma_trsm.enable()
    assert hsma_trsm.is_enabled()
    for op, text in _dumps().items():
        cuda = [line for line in text.splitlines() if line.startswith("CUDA:")]
        assert len(cuda) == 1 and "switch.cpp" in cuda[0], (op, cuda)
        cpu_before = [line for line in before[op].splitlines() if line.startswith("CPU:")]
        assert cpu_before == [line for line in text.splitlines() if line.startswith("CPU:")]  # CPU untouched
    hsma_trsm.enable()  # again: nothing changes
    hsma_trsm.disable()
    assert not hsma_trsm.is_enabled()
    assert _dumps() == before
    hsma_trsm.disable()  # again: a no-op
    assert _dumps() == before


def test_enabled_nests_and_restores_the_state_it_found():
    before = _dumps()
    with hsma_trsm.enabled():
        with hsma_trsm.enabled():
            assert hsma_trsm.is_enabled()
        assert hsma_trsm.is_enabled()  # the inner block found it on
        hsma_trsm.disable()
        with hsma_trsm.enabled():
            assert hsma_trsm.is_enabled()
        assert not hsma_trsm.is_enabled()  # ... and this one off
        hsma_trsm.enable()
    assert not hsma_trsm.is_enabled() and _dumps() == before
    hsma_trsm.enable()
    with pytest.raises(ZeroDivisionError):
        with hsma_trsm.enabled():
            1 / 0
    assert hsma_trsm.is_enabled()
    hsma_trsm.disable()
    with pytest.raises(ZeroDivisionError):
        with hsma_trsm.enabled():
            1 / 0
    assert not hsma_trsm.is_enabled() and _dumps() == before


def test_enabled_restores_another_configuration():
    with hsma_trsm.switch._enabled(keys=("CPU",), ops=("cholesky_solve",)):
        with hsma_trsm.enabled():
            assert "switch.cpp" in _cuda_line("cholesky_solve") and "switch.py" not in _cpu_line("cholesky_solve")
        assert "switch.cpp" in _cpu_line("cholesky_solve") and "switch.py" not in _cuda_line("cholesky_solve")
    assert not hsma_trsm.is_enabled()


def _cuda_line(op):
    return "".join(line for line in _dumps()[op].splitlines() if line.startswith("CUDA:"))


def _cpu_line(op):
    return "".join(line for line in _dumps()[op].splitlines() if line.startswith("CPU:"))


def test_refuses_what_does_not_exist():
    with pytest.raises(ValueError, match="hsma_trsm.enable: unknown operator 'linalg_solve'"):
        hsma_trsm.switch._enable(ops=("linalg_solve",))
    with pytest.raises(ValueError, match="hsma_trsm.enable: unknown dispatch key 'Meta'"):
        hsma_trsm.switch._enable(keys=("Meta",))
    with pytest.raises(ValueError, match="no dispatch key or no operator"):
        hsma_trsm.switch._enable(keys=())
    assert not hsma_trsm.is_enabled()


def test_enable_disable_from_threads():
    """The switch is process-wide: enable() / disable() from several threads at once never raise and leave torch's
    dispatcher table whole (one registration per operator, or none). Overlapping ``enabled()`` blocks in threads
    promise no final state (each restores what it found on entry): not tested here, see ``enabled()``."""
    before = _dumps()
    hsma_trsm.enable()
    on = _dumps()
    hsma_trsm.disable()
    n_threads = 4
    start, errors = threading.Barrier(n_threads), []

    def work():
        try:
            start.wait(timeout=30)
            for _ in range(20):
                hsma_trsm.enable()
                hsma_trsm.disable()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)
    assert _dumps() == (on if hsma_trsm.is_enabled() else before)  # a thread's enable() may come last
    hsma_trsm.disable()
    assert not hsma_trsm.is_enabled() and _dumps() == before


# ---------------------------------------------------------------------------------------------
# Routing, end to end


class _Route:
    """Counts the calls that hsma's kernels serve (``calls[op]``, from switch.routed_calls()); ``on()`` routes
    the device's key."""

    def __init__(self, device):
        self.device = torch.device(device).type
        self.ops = switch.ROUTED
        self._start = switch.routed_calls()

    @property
    def calls(self):
        now = switch.routed_calls()
        return {op: now[op] - self._start[op] for op in now}

    def on(self):
        return hsma_trsm.switch._enabled(keys=("CPU",) if self.device == "cpu" else ("CUDA",))

    def total(self):
        return sum(self.calls.values())


@pytest.fixture
def route():
    return _Route


def _spd_factor(k, batch, device, dtype=F64, upper=False, seed=0):
    """A Cholesky factor: triangular, a real positive diagonal (LAPACK's potri reads it as real)."""
    F = make_triangular(k, batch=batch, dtype=dtype, upper=upper, device=device, gen=make_generator(seed), fill=0.0)
    F.diagonal(dim1=-2, dim2=-1).copy_(F.diagonal(dim1=-2, dim2=-1).abs())
    return F


def _calls(device, dtype=F64):
    """(op name, zero-argument call of torch's function) for every routed operator."""
    g = make_generator(7)
    wide = torch.complex128 if dtype.is_complex else F64

    def rand(*shape):
        return torch.randn(shape, dtype=wide, generator=g).to(device=device, dtype=dtype)

    L = _spd_factor(6, (3,), device, dtype)
    U = _spd_factor(6, (2, 1), device, dtype, upper=True, seed=1)
    A = rand(2, 6, 6) + 4 * torch.eye(6, device=device, dtype=dtype)
    LU, piv = torch.linalg.lu_factor(A)
    B = rand(2, 1, 6, 3)
    Bt = rand(4, 6)
    return [
        ("linalg_solve_triangular", lambda: torch.linalg.solve_triangular(L, B, upper=False)),
        ("linalg_solve_triangular", lambda: torch.linalg.solve_triangular(U, Bt, upper=True, left=False)),
        ("linalg_solve_triangular", lambda: torch.linalg.solve_triangular(L.mT, B, upper=True, unitriangular=True)),
        ("triangular_solve", lambda: torch.triangular_solve(B, U, upper=True, transpose=True)),
        ("cholesky_solve", lambda: torch.cholesky_solve(B, L)),
        ("cholesky_solve", lambda: torch.cholesky_solve(B, U, upper=True)),
        ("cholesky_inverse", lambda: torch.cholesky_inverse(L)),
        ("cholesky_inverse", lambda: torch.cholesky_inverse(U, upper=True)),
        ("linalg_lu_solve", lambda: torch.linalg.lu_solve(LU, piv, B)),
        ("linalg_lu_solve", lambda: torch.linalg.lu_solve(LU, piv, Bt, left=False, adjoint=True)),
    ]


def _outputs(r):
    return r if isinstance(r, tuple) else (r,)


def _assert_like(X, R, tol):
    assert X.shape == R.shape and X.dtype == R.dtype and X.device == R.device
    assert [s for s, n in zip(X.stride(), X.shape) if n > 1] == [s for s, n in zip(R.stride(), R.shape) if n > 1]
    torch.testing.assert_close(X, R, rtol=tol, atol=tol)


@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128],
                         ids=lambda d: str(d)[6:])
def test_routed_calls_match_torch_and_disable_restores_it_exactly(device, dtype, route):
    r = route(device)
    calls = _calls(device, dtype)
    before = [_outputs(f()) for _, f in calls]
    tol = 1e-4 if dtype in (torch.float32, torch.complex64) else 1e-11
    with r.on():
        for (op, f), ref in zip(calls, before):
            n = r.calls[op]
            for X, R in zip(_outputs(f()), ref):
                _assert_like(X, R, tol)
            assert r.calls[op] == n + 1, op
    total = r.total()
    for (_, f), ref in zip(calls, before):
        for X, R in zip(_outputs(f()), ref):  # torch's kernels again: bit for bit
            assert torch.equal(X, R) and X.stride() == R.stride()
    assert r.total() == total


def test_one_call_served_per_routed_call(route):
    """On the CPU, hsma's trsm runs ATen's linalg_solve_triangular through its out= overload, which the switch does
    not route: one routed call, one call served, no recursion."""
    r = route("cpu")
    L, B = _spd_factor(5, (2,), "cpu"), torch.randn(2, 5, 3, dtype=F64)
    ref = torch.linalg.solve_triangular(L, B, upper=False)
    with r.on():
        X = torch.linalg.solve_triangular(L, B, upper=False)
        assert r.calls["linalg_solve_triangular"] == 1
        hsma_trsm.trsm(L, B)  # hsma's own function: nothing routed
    assert r.total() == 1
    _assert_like(X, ref, 1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_layouts_of_torch_for_conjugate_views_and_empty_operands(device, route):
    """torch returns a row-major X when A (broadcast) is a conjugate view whose transpose is contiguous, and empty
    results with strides of their own: the same with the switch on."""
    r = route(device)
    L = _spd_factor(5, (2,), device, dtype=torch.complex128)
    B = torch.randn(2, 5, 3, dtype=torch.complex128, device=device)
    cases = [
        lambda: torch.linalg.solve_triangular(L.mH, B, upper=True),
        lambda: torch.linalg.solve_triangular(L.mH, B.mT, upper=True, left=False),
        lambda: torch.linalg.solve_triangular(L.mH[:1], B, upper=True),  # broadcast: not contiguous
        lambda: torch.linalg.solve_triangular(L.conj(), B, upper=False),
        lambda: torch.linalg.solve_triangular(L[:, :0, :0], B[:, :0], upper=False),
        lambda: torch.linalg.solve_triangular(L[:0], B[:0], upper=False),
        lambda: torch.cholesky_solve(B[..., :0], L),
    ]
    refs = [f() for f in cases]
    with r.on():
        outs = [f() for f in cases]
    assert r.calls["linalg_solve_triangular"] == 4
    for X, R in zip(outs, refs):
        assert X.shape == R.shape and X.stride() == R.stride()
        torch.testing.assert_close(X, R, rtol=1e-12, atol=1e-12)


def _raised(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)
    return None


@pytest.mark.parametrize("device", DEVICES)
def test_what_hsma_does_not_take_goes_to_torch(device, route):
    """Arguments torch refuses, or that hsma does not serve (half dtypes, mixed dtypes or devices, sparse A, bad
    pivots): with the switch on, torch's own implementation runs, with torch's result or torch's error."""
    r = route(device)
    L = _spd_factor(4, (2,), device)
    B = torch.randn(2, 4, 3, dtype=F64, device=device)
    LU, piv = torch.linalg.lu_factor(L + 3 * torch.eye(4, dtype=F64, device=device))
    cases = [
        lambda: torch.linalg.solve_triangular(L, B.float(), upper=False),  # torch converts B
        lambda: torch.linalg.solve_triangular(L.half(), B.half(), upper=False),
        lambda: torch.linalg.solve_triangular(L[0, 0], B, upper=False),
        lambda: torch.linalg.solve_triangular(L, B[..., :2, :], upper=False),
        lambda: torch.cholesky_solve(B.float(), L),
        lambda: torch.cholesky_solve(B, L[..., :3]),
        lambda: torch.cholesky_solve(B.expand(3, 2, 4, 3), L.expand(5, 2, 4, 4)),
        lambda: torch.cholesky_inverse(L[..., :3]),
        lambda: torch.cholesky_inverse(L.to(torch.int64)),
        lambda: torch.linalg.lu_solve(LU, piv.long(), B),
        lambda: torch.linalg.lu_solve(LU, piv[..., :3], B),
        lambda: torch.linalg.lu_solve(LU.float(), piv, B),
        lambda: torch.linalg.lu_solve(LU, piv, B, left=False),
    ]
    if device == "cpu":
        cases.append(lambda: torch.triangular_solve(B, L.to_sparse_csr(), upper=False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = [_raised(f) for f in cases]
        with r.on():
            got = [_raised(f) for f in cases]
            assert r.total() == 0
        # the cases that torch does not refuse: its results, computed by torch while switched on
        with r.on():
            outs = [f() for f, e in zip(cases, ref) if e is None]
        assert r.total() == 0 and outs
        for out, R in zip(outs, [f() for f, e in zip(cases, ref) if e is None]):
            for a, b in zip(_outputs(out), _outputs(R)):
                torch.testing.assert_close(a.to_dense(), b.to_dense(), rtol=0, atol=0, equal_nan=True)
    assert got == ref


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_are_torch_formulas_not_doubled(device, route):
    """Backward runs torch's derivative formulas, whose solves are routed as well; the gradients equal the
    unrouted ones (hsma's own autograd does not record a second time)."""
    r = route(device)
    L0 = _spd_factor(5, (2,), device)
    A0 = torch.randn(2, 5, 5, dtype=F64, device=device) + 3 * torch.eye(5, dtype=F64, device=device)
    B0 = torch.randn(2, 5, 3, dtype=F64, device=device)

    def loss(L, A, B):
        LU, piv = torch.linalg.lu_factor(A)
        return (torch.cholesky_solve(B, L).square().sum() + torch.linalg.solve_triangular(L, B, upper=False).sum()
                + torch.cholesky_inverse(L).sum() + torch.linalg.lu_solve(LU, piv, B, adjoint=True).sum())

    def grads():
        leaves = [t.clone().requires_grad_() for t in (L0, A0, B0)]
        out = loss(*leaves)
        return out.detach(), torch.autograd.grad(out, leaves)

    ref_loss, ref_grads = grads()
    with r.on():
        n0 = r.total()
        out, g = grads()
        assert r.total() > n0 + 4  # the backward's solves too
    torch.testing.assert_close(out, ref_loss, rtol=1e-12, atol=1e-12)
    for a, b in zip(g, ref_grads):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_forward_ad_and_vmap(device, route):
    r = route(device)
    L = _spd_factor(4, (3,), device)
    B, dB = torch.randn(3, 4, 2, dtype=F64, device=device), torch.randn(3, 4, 2, dtype=F64, device=device)

    def f(b, lf):
        return torch.cholesky_solve(b, lf) + torch.linalg.solve_triangular(lf, b, upper=False)

    ref = torch.func.jvp(f, (B, L), (dB, L.tril()))
    ref_v = torch.vmap(f)(B, L)
    with r.on():
        out = torch.func.jvp(f, (B, L), (dB, L.tril()))
        out_v = torch.vmap(f)(B, L)
    assert r.calls["cholesky_solve"] > 0 and r.calls["linalg_solve_triangular"] > 0
    for a, b in zip((*out, out_v), (*ref, ref_v)):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_calls_the_routed_kernels_at_run_time(device, route):
    """A compiled function (fullgraph, inductor) runs hsma while the switch is on and torch once it is off,
    without recompiling; inductor's checks of the output strides pass."""
    r = route(device)
    L0 = _spd_factor(5, (3,), device)
    A = torch.randn(3, 5, 5, dtype=F64, device=device) + 3 * torch.eye(5, dtype=F64, device=device)
    LU, piv = torch.linalg.lu_factor(A)
    B0 = torch.randn(3, 5, 2, dtype=F64, device=device)

    def f(B, L):
        X = torch.cholesky_solve(B, L) * 2 + torch.linalg.solve_triangular(L, B, upper=False)
        return X.square().sum() + torch.linalg.lu_solve(LU, piv, B).sum() + torch.cholesky_inverse(L).sum()

    def run(fn):
        B, L = B0.clone().requires_grad_(), L0.clone().requires_grad_()
        out = fn(B, L)
        return (out.detach(), *torch.autograd.grad(out, (B, L)))

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    ref = run(f)
    with r.on():
        got = run(compiled)
        assert r.calls["cholesky_solve"] >= 2 and r.calls["linalg_lu_solve"] >= 1
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    n = r.total()
    for a, b in zip(run(compiled), ref):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert r.total() == n  # switched off: torch's kernels, same compiled code


@pytest.mark.parametrize("device", CUDA_DEVICES)
def test_cuda_graph_capture_of_routed_calls(device, route):
    r = route(device)
    L = _spd_factor(40, (8,), device)
    A = torch.randn(8, 40, 40, dtype=F64, device=device) + 6 * torch.eye(40, dtype=F64, device=device)
    LU, piv = torch.linalg.lu_factor(A)
    B = torch.randn(8, 40, 3, dtype=F64, device=device)

    def step():
        return torch.cholesky_solve(B, L) + torch.linalg.lu_solve(LU, piv, B) + torch.linalg.solve_triangular(
            L, B, upper=False)

    ref = step()
    with r.on():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            step()  # warm-up outside the capture
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = step()
        B.copy_(2 * B)
        g.replay()
        torch.cuda.synchronize()
    torch.testing.assert_close(out, 2 * ref, rtol=1e-10, atol=1e-10)
    assert r.calls["linalg_lu_solve"] >= 2


# ---------------------------------------------------------------------------------------------
# Real clients: linear_operator, GPyTorch, BoTorch


def test_linear_operator_arguments_keep_their_handlers():
    lo = pytest.importorskip("linear_operator")
    d = torch.tensor([2.0, 4.0, 8.0], dtype=F64)
    B = torch.ones(3, 2, dtype=F64)
    with hsma_trsm.enabled():
        X = torch.linalg.solve_triangular(lo.operators.DiagLinearOperator(d), B, upper=False)
    torch.testing.assert_close(X.to_dense() if hasattr(X, "to_dense") else X, B / d[:, None])


@pytest.mark.parametrize("order", ["enable-first", "import-first"])
def test_linear_operator_whatever_the_import_order(order):
    """The failure a Python-level patch has (linear_operator keys its handlers on the function object it sees
    at import): here, in a fresh interpreter, both orders work."""
    pytest.importorskip("linear_operator")
    lines = ["import torch, hsma_trsm", "hsma_trsm.enable()", "from linear_operator.operators import "
             "DiagLinearOperator, TriangularLinearOperator"]
    if order == "import-first":
        lines[1], lines[2] = lines[2], lines[1]
    code = "\n".join(lines) + textwrap.dedent("""
        d = torch.tensor([2.0, 4.0], dtype=torch.float64)
        B = torch.ones(2, 3, dtype=torch.float64)
        X = torch.linalg.solve_triangular(DiagLinearOperator(d), B, upper=False)
        X = X.to_dense() if hasattr(X, "to_dense") else X
        assert torch.allclose(X, B / d[:, None]), X
        T = TriangularLinearOperator(torch.tensor([[2.0, 0.0], [1.0, 4.0]], dtype=torch.float64))
        Y = torch.linalg.solve_triangular(T, B, upper=False)
        Y = Y.to_dense() if hasattr(Y, "to_dense") else Y
        assert torch.allclose(T.to_dense() @ Y, B), Y
        assert hsma_trsm.is_enabled()
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def _gp_data(n, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, dtype=F64, generator=g)
    y = torch.sin(6 * x.sum(-1)) + 0.05 * torch.randn(n, dtype=F64, generator=g)
    return x.to(device), y.to(device)


def _gpytorch_losses(gpytorch, kind, device, steps=3):
    """Losses, final parameters and a prediction of `steps` Adam steps of a small exact GP or SVGP."""
    torch.manual_seed(0)
    x, y = _gp_data(40, device)

    class Exact(gpytorch.models.ExactGP):
        def __init__(self, lik):
            super().__init__(x, y, lik)
            self.mean, self.covar = gpytorch.means.ConstantMean(), gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel())

        def forward(self, t):
            return gpytorch.distributions.MultivariateNormal(self.mean(t), self.covar(t))

    class SVGP(gpytorch.models.ApproximateGP):
        def __init__(self):
            dist = gpytorch.variational.CholeskyVariationalDistribution(12)
            super().__init__(gpytorch.variational.VariationalStrategy(self, x[:12].clone(), dist,
                                                                      learn_inducing_locations=True))
            self.mean, self.covar = gpytorch.means.ConstantMean(), gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel())

        def forward(self, t):
            return gpytorch.distributions.MultivariateNormal(self.mean(t), self.covar(t))

    lik = gpytorch.likelihoods.GaussianLikelihood()
    if kind == "exact":
        model = Exact(lik)
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    else:
        model = SVGP()
        mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=40)
    model.to(device=device, dtype=F64)
    lik.to(device=device, dtype=F64)
    params = list(model.parameters()) + ([] if kind == "exact" else list(lik.parameters()))
    opt = torch.optim.Adam(params, lr=0.05)
    losses, grads = [], []
    with gpytorch.settings.max_cholesky_size(10 ** 9), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.train(), lik.train()
        for _ in range(steps):
            opt.zero_grad()
            loss = -mll(model(x), y)
            loss.backward()
            losses.append(loss.detach())
            grads.append(torch.cat([p.grad.reshape(-1) for p in params]))
            opt.step()
        model.eval(), lik.eval()
        with torch.no_grad():
            pred = lik(model(torch.linspace(0, 1, 7, dtype=F64, device=device).unsqueeze(-1).expand(7, 2)))
            pred = torch.cat([pred.mean, pred.variance])
    return torch.stack(losses), torch.stack(grads), pred


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["exact", "svgp"])
def test_gpytorch_losses_and_gradients_unchanged(device, kind, route):
    gpytorch = pytest.importorskip("gpytorch")
    r = route(device)
    ref = _gpytorch_losses(gpytorch, kind, device)
    with r.on():
        got = _gpytorch_losses(gpytorch, kind, device)
    assert r.calls["linalg_solve_triangular"] > 0
    if kind == "exact":
        assert r.calls["cholesky_solve"] > 0  # the prediction's
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("device", DEVICES)
def test_botorch_fit_and_acquisition_unchanged(device, route):
    pytest.importorskip("botorch")
    from botorch.acquisition.logei import qLogExpectedImprovement
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.sampling import SobolQMCNormalSampler
    from gpytorch.mlls import ExactMarginalLogLikelihood

    r = route(device)
    X, y = _gp_data(16, device, seed=3)
    Y = y.unsqueeze(-1)
    Xq = torch.rand(4, 2, 2, dtype=F64, generator=torch.Generator().manual_seed(1)).to(device)

    def fit():
        torch.manual_seed(0)
        gp = SingleTaskGP(X, Y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
        acq = qLogExpectedImprovement(gp, best_f=Y.max(), sampler=SobolQMCNormalSampler(torch.Size([64]), seed=0))
        params = torch.cat([p.detach().reshape(-1) for p in gp.parameters()])
        return params, acq(Xq).detach(), gp.posterior(Xq[0]).mean.detach()

    ref = fit()
    with r.on():
        got = fit()
    assert r.calls["linalg_solve_triangular"] > 0
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-8)


def test_cpu_calls_are_not_routed_by_default():
    """Enabled as users enable it, CPU tensors keep torch's kernels (bit for bit)."""
    L = _spd_factor(5, (2,), "cpu")
    B = torch.randn(2, 5, 3, dtype=F64)
    ref = (torch.cholesky_solve(B, L), torch.linalg.solve_triangular(L, B, upper=False))
    with hsma_trsm.enabled():
        got = (torch.cholesky_solve(B, L), torch.linalg.solve_triangular(L, B, upper=False))
    assert all(torch.equal(a, b) for a, b in zip(got, ref))
    assert math.isfinite(got[0].sum().item())


def test_public_names():
    for name in ("cholesky_solve", "cholesky_inverse", "lu_solve", "enable", "disable", "enabled", "is_enabled"):
        assert name in hsma_trsm.__all__ and callable(getattr(hsma_trsm, name))
    assert hsma_trsm.cholesky_solve is solvers.cholesky_solve and hsma_trsm.enable is switch.enable
    assert isinstance(hsma_trsm.enabled(), contextlib.AbstractContextManager)
