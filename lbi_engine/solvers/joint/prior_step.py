"""The joint step's image block under the learned Gaussian input prior (MATH.md §4.3).

The prior is smooth, so it joins f: its gradient alpha Sigma^{-1} (x_0 - mu) is added to the
x_0 block's, with per-pixel steps, and the box is a clip. With its TV term (R = G + gamma TV)
the x_0 step is the prox of alpha gamma TV + box in that per-pixel metric diag(1/tau): TV's
FGP with the primal map clip(v + w lam div p), w = tau / max tau.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from lbi_engine.regularisers import GaussianPrior, TVProx


def smooth_prior_gradient(inner: GaussianPrior, alpha: float, bound: float, step_scale: float,
                          tau0: Tensor, like: Tensor) -> Callable[[Tensor], Tensor]:
    """alpha Sigma^{-1} (x_0 - mu) as a map (B, n0) -> (B, n0), after setting the x_0 block's
    step per pixel (``tau0``, in place) to step_scale / (m_0 + alpha / d_i).

    Why the gradient and not the prox: the prior is smooth, and Sigma^{-1} <= diag(d)^{-1}
    (Sigma = U U^T + diag(d)), so m_0 I + alpha diag(d)^{-1} majorises the x_0 block's
    Hessian (block diagonal dominance as for m_0; ``bound`` is m_0) and the step is FISTA in
    that diagonal metric, whose projection onto a box is the clip: one product with
    Sigma^{-1} per step, where the box-constrained prox needs an inner loop of them."""
    prior = inner.prior
    tau0.copy_(step_scale / (bound + alpha * prior.inverse_diag_on(like)))
    mean = prior.mean_on(like)

    def gradient(y0: Tensor) -> Tensor:
        return prior.precision_apply(y0 - mean).mul_(alpha)

    return gradient


def metric_tv_prox(inner: GaussianPrior, alpha: float, tau0: Tensor, batch: int,
                   image_shape: tuple[int, ...], like: Tensor) -> tuple[TVProx, float]:
    """The x_0 step's prox for the Gaussian prior + gamma TV and its weight lam: with the
    per-pixel steps ``tau0`` of :func:`smooth_prior_gradient` (the metric M = diag(1/tau) of
    the smooth part's FISTA step), argmin_u 1/2 ||u - v||^2_M + alpha gamma TV(u) + box.
    Scaled by tau_max it is 1/2 sum (u_i - v_i)^2 / w_i + lam TV(u) + box, w = tau / tau_max
    in (0, 1] and lam = alpha gamma tau_max: phi = the weighted distance + box is 1-strongly
    convex (w <= 1), so TV's FGP runs with the primal map u(p) = clip(v + w lam div p), the
    1-dimensional minimiser of each pixel's convex piece on its interval (``_tv_prox``'s
    weight: compiled on the CPU, torch elsewhere). (The compiled one-sample step is TV's
    only: it knows no Gaussian gradient.)"""
    top = float(tau0.max())
    lam = alpha * inner.tv * top
    prox = TVProx(True, float(inner.lo), float(inner.hi), batch, image_shape, like.dtype,
                  like.device, weight=tau0 / top)
    return prox, lam
