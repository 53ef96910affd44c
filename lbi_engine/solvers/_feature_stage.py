"""One intermediate stage of the layer-wise method with a learned Gaussian feature prior.

    minimise over h:  B_{Psi_l}(d, W_l h + b_l) + w/2 (h - mu)^T Sigma^{-1} (h - mu)
                      + beta/2 ||h||^2 + iota_{dom Psi_{l-1}}(h)

(docs/LAYERWISE.md). Smooth part + indicator: FISTA with step 1/L, L = ||W_l||^2 + w
||Sigma^{-1}|| + beta (grad of the Bregman term in h is W^T (sigma(W h + b) - d), 1-Lipschitz
in W h: MATH.md §1.2), projection onto dom Psi_{l-1}, and the gradient restart of
O'Donoghue–Candès per sample (``operators.momentum``; monotone enough in practice, no
extra product with W).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from lbi_engine.operators.momentum import Momentum
from lbi_engine.protocols import Activation, Layer, Operator, Problem

if TYPE_CHECKING:  # the solvers get priors from the problem, they never load them
    from lbi_engine.priors.feature import GaussianFeaturePrior


def _per_sample(v: Tensor, like: Tensor) -> Tensor:
    return v.reshape(-1, *([1] * (like.dim() - 1)))


class GaussianStage:
    """FISTA state for one stage; ``weight`` is per sample, (B,)."""

    def __init__(self, layer: Layer, below: Activation, prior: GaussianFeaturePrior, data: Tensor,
                 weight: Tensor, beta: float, step_scale: float, x0: Tensor) -> None:
        self.layer = layer
        self._start(float(layer.affine.norm()) ** 2, below, prior, data, weight, beta,
                    step_scale, x0)

    def _start(self, data_lipschitz: float, below: Activation, prior: GaussianFeaturePrior,
               data: Tensor, weight: Tensor, beta: float, step_scale: float, x0: Tensor) -> None:
        """The step 1/L from the data term's Lipschitz bound, and the FISTA state at x0."""
        self.below, self.prior = below, prior
        self.data, self.beta = data, float(beta)
        self.weight = weight.to(device=x0.device, dtype=x0.dtype)
        self._w = _per_sample(self.weight, x0)
        lipschitz = (data_lipschitz
                     + float(self.weight.max()) * prior.precision_norm() + self.beta)
        self.tau = step_scale / max(lipschitz, 1e-30)
        self.x = below.project(x0)
        self.y = self.x.clone()
        self.momentum = Momentum(x0.shape[0], x0)

    def gradient(self, h: Tensor) -> Tensor:
        affine = self.layer.affine
        g = affine.adjoint(self.layer.activation.sigma(affine.apply(h)) - self.data)
        g = g.reshape(h.shape) + self._w * self.prior.gradient(h)
        if self.beta > 0:
            g = g + self.beta * h
        return g

    def step(self) -> Tensor:
        """One FISTA step from the extrapolated point; returns the new x (not yet accepted)."""
        return self.below.project(self.y - self.tau * self.gradient(self.y))

    def accept(self, x_new: Tensor) -> None:
        """Momentum update with the gradient restart: a sample whose step points against its
        last move (<y - x+, x+ - x> > 0) restarts from x+ with t = 1."""
        batch = x_new.shape[0]
        uphill = ((self.y - x_new).reshape(batch, -1)
                  * (x_new - self.x).reshape(batch, -1)).sum(dim=1) > 0
        coef = self.momentum.advance(uphill)
        self.y = x_new + _per_sample(coef, x_new) * (x_new - self.x)
        self.x = x_new

    @property
    def restarts(self) -> int:
        """Momentum restarts so far, summed over the samples."""
        return self.momentum.restarts

    def objective(self, h: Tensor) -> dict[str, Tensor]:
        """Per-sample (bregman, prior part = w R + beta/2 ||h||^2, discrepancy)."""
        z = self.layer.affine.apply(h)
        bregman = self.layer.activation.bregman(self.data, z)
        reg = self.weight * self.prior.value(h)
        if self.beta > 0:
            reg = reg + 0.5 * self.beta * h.reshape(h.shape[0], -1).pow(2).sum(dim=1)
        discrepancy = (self.layer.activation.sigma(z) - self.data).reshape(h.shape[0], -1)
        return {"bregman": bregman, "reg": reg, "discrepancy": discrepancy.norm(dim=1)}


def noise_std_estimate(problem: Problem) -> Tensor | None:
    """Per-sample std of the code noise, ||y_delta - y|| / sqrt(m), from ``problem.delta``."""
    if problem.delta is None:
        return None
    m = math.prod(problem.y_delta.shape[1:])
    delta = torch.as_tensor(problem.delta, dtype=problem.dtype, device=problem.device)
    return delta.reshape(-1).expand(problem.batch) / math.sqrt(m)


# Weight floor relative to the codes' mean square: with exact data the MAP estimate is the
# limit w -> 0, whose stage is ill-conditioned; (1e-2 rms)^2 is below every noise level the
# app simulates on the zoo's networks and changes the exact-data result by < 0.1 dB (LAYERWISE.md).
RELATIVE_FLOOR = 1e-2


def stage_weights(problem: Problem) -> tuple[list[Tensor], str]:
    """The weight of the prior of every auxiliary variable x_1 .. x_{L-1}, per sample.

    ``problem.layer_alphas`` when given; else sigma^2 (Bayes: the negative log posterior
    ||.||^2 / (2 sigma^2) + R, times sigma^2) with sigma from the noise level.
    """
    depth, batch = problem.depth, problem.batch
    dtype, device = problem.dtype, problem.device
    if problem.layer_alphas is not None:
        return ([torch.full((batch,), float(a), dtype=dtype, device=device)
                 for a in problem.layer_alphas],
                "given (layer_alphas)")
    std = noise_std_estimate(problem)
    if std is None:
        from lbi_engine.errors import InputError

        raise InputError(
            "layer-wise inversion needs the noise level of the code (its stages weigh the "
            "feature prior by sigma^2) or explicit per-layer weights: simulate the data from a "
            "ground truth, or give layer_alphas (CLI: --layer-alphas)."
        )
    rms = problem.y_delta.reshape(batch, -1).pow(2).mean(dim=1).sqrt()
    var = torch.maximum(std, RELATIVE_FLOOR * rms).pow(2)
    return [var.clone() for _ in range(depth - 1)], "sigma^2 from the noise level"


class Consumer:
    """One term of a graph stage (MATH.md §5.6): node l's Bregman loss
    B_{Psi_l}(data, sum(maps) h + offset) in the unknown state h, with data = the estimate of
    node l's output and offset = sum_{k != j} A_{l,k} x_k (their biases included) from the
    current estimates of node l's other inputs. ``maps`` holds every term of node l that reads
    h (a node may read a state twice, x + x); their own biases are in their ``apply``."""

    def __init__(self, layer: int, maps: list[Operator], activation: Activation, data: Tensor,
                 offset: Tensor | None) -> None:
        self.layer, self.maps, self.activation = layer, maps, activation
        self.data, self.offset = data, offset
        # ||sum_k A_k|| <= sum_k ||A_k||: the Lipschitz bound of this term's gradient in h
        self.norm = sum(float(m.norm()) for m in maps)

    def pre_activation(self, h: Tensor) -> Tensor:
        z = self.maps[0].apply(h)
        for m in self.maps[1:]:
            z = z + m.apply(h)
        return z if self.offset is None else z + self.offset

    def adjoint(self, r: Tensor) -> Tensor:
        g = self.maps[0].adjoint(r)
        for m in self.maps[1:]:
            g = g + m.adjoint(r)
        return g


class ConsumerStage(GaussianStage):
    """A stage of the layer-wise method over a graph: the state h read by several nodes,

        minimise  sum_l B_{Psi_l}(d_l, A_{l,j} h + c_{l,j}) + w R(h) + beta/2 ||h||^2
                  + iota_{dom Psi_j}(h),

    by the same FISTA as :class:`GaussianStage` with L = sum_l ||A_{l,j}||^2 + w ||Sigma^{-1}||
    + beta (each Bregman term's gradient A^T (sigma(A h + c) - d) is ||A||^2-Lipschitz). With
    one consumer, one map and no offset every operation is the chain stage's, in its order."""

    def __init__(self, consumers: list[Consumer], below: Activation,
                 prior: GaussianFeaturePrior, weight: Tensor, beta: float, step_scale: float,
                 x0: Tensor) -> None:
        if not consumers:
            raise ValueError("a stage needs at least one consumer of its state")
        self.consumers = consumers
        self._start(sum(c.norm ** 2 for c in consumers), below, prior, consumers[0].data,
                    weight, beta, step_scale, x0)

    def gradient(self, h: Tensor) -> Tensor:
        g: Tensor | None = None
        for c in self.consumers:
            part = c.adjoint(c.activation.sigma(c.pre_activation(h)) - c.data)
            g = part if g is None else g + part
        assert g is not None
        g = g.reshape(h.shape) + self._w * self.prior.gradient(h)
        if self.beta > 0:
            g = g + self.beta * h
        return g

    def objective(self, h: Tensor) -> dict[str, Tensor]:
        """Per-sample (bregman: the sum over the consumers, terms: each one's, prior part,
        discrepancy: the norm of all the consumers' residuals together)."""
        terms, residuals = [], []
        for c in self.consumers:
            z = c.pre_activation(h)
            terms.append(c.activation.bregman(c.data, z))
            residuals.append((c.activation.sigma(z) - c.data).reshape(h.shape[0], -1))
        reg = self.weight * self.prior.value(h)
        if self.beta > 0:
            reg = reg + 0.5 * self.beta * h.reshape(h.shape[0], -1).pow(2).sum(dim=1)
        return {"bregman": torch.stack(terms).sum(dim=0), "terms": torch.stack(terms, dim=1),
                "reg": reg, "discrepancy": torch.cat(residuals, dim=1).norm(dim=1)}
