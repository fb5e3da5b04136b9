"""GPyTorch models whose training steps the suites gpytorch and switch time: an exact GP and an SVGP on a noisy
sine in [0, 1]^DIM (see :func:`make_step`)."""
from __future__ import annotations

import functools
import math

import torch

DIM = 4  # input dimensions


def _data(n: int, dtype, device, seed: int):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.rand(n, DIM, generator=g, dtype=torch.float64)
    y = torch.sin(2 * math.pi * x @ torch.linspace(0.5, 1.5, DIM, dtype=torch.float64))
    y += 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return x.to(device=device, dtype=dtype), y.to(device=device, dtype=dtype)


def make_step(gpytorch, kind: str, size: tuple, dtype, device, seed: int):
    """A training step of a fresh model (built under ``torch.manual_seed(seed)``): a callable returning the loss
    (a detached 0-dim tensor). ``size``: (n,) for exact, (inducing, batch) for svgp."""
    torch.manual_seed(seed)
    lik = gpytorch.likelihoods.GaussianLikelihood()
    if kind == "exact":
        x, y = _data(size[0], dtype, device, seed)

        class Exact(gpytorch.models.ExactGP):
            def __init__(self):
                super().__init__(x, y, lik)
                self.mean = gpytorch.means.ConstantMean()
                self.covar = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

            def forward(self, t):
                return gpytorch.distributions.MultivariateNormal(self.mean(t), self.covar(t))

        model = Exact()
        params = list(model.parameters())  # the likelihood is a submodule
        mll_cls = gpytorch.mlls.ExactMarginalLogLikelihood
    else:
        m, b = size
        x, y = _data(b, dtype, device, seed)

        class SVGP(gpytorch.models.ApproximateGP):
            def __init__(self):
                z = x[:m].clone()
                dist = gpytorch.variational.CholeskyVariationalDistribution(m)
                super().__init__(gpytorch.variational.VariationalStrategy(self, z, dist,
                                                                          learn_inducing_locations=True))
                self.mean = gpytorch.means.ConstantMean()
                self.covar = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

            def forward(self, t):
                return gpytorch.distributions.MultivariateNormal(self.mean(t), self.covar(t))

        model = SVGP()
        params = list(model.parameters()) + list(lik.parameters())
        mll_cls = functools.partial(gpytorch.mlls.VariationalELBO, num_data=10 * b)
    model.to(device=device, dtype=dtype)
    lik.to(device=device, dtype=dtype)
    model.train()
    lik.train()
    mll = mll_cls(lik, model)
    opt = torch.optim.Adam(params, lr=0.01)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = -mll(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step
