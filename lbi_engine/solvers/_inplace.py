"""In-place versions of the per-iteration maps of PDHG, bound to fixed buffers ("plans").

Why: on the paper's problems (a few thousand pixels) one torch call costs about as much as
its arithmetic, and a fresh tensor per call costs an allocation (page faults for a batch).
Each plan is built once for a buffer, keeps the views it needs, and then updates that buffer
in place. Every plan is exactly the out-of-place method it replaces (same formula, same order
of floating-point operations up to summation order); unknown regularisers and activations
fall back to the out-of-place method plus a copy, so nothing is ever lost, only speed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from lbi_engine.operators import ComposedMap, LinearMap, ReshapeMap
from lbi_engine.regularisers import GradientTikhonov, Regulariser, TotalVariation

Plan = Callable[[float, float], None]


# -- regulariser: prox of the dual part h* --------------------------------------------------------
def dual_prox_plan(reg: object, p: Tensor) -> Plan:
    """``p <- prox_{step h*}(p)`` in place for a fixed dual buffer p ``(B, 2, *image_shape)``."""
    if isinstance(reg, TotalVariation) and not reg.isotropic:

        def box(step: float, alpha: float) -> None:
            p.clamp_(-1.0, 1.0)

        return box
    if isinstance(reg, TotalVariation):
        return _pixel_ball_plan(p)
    if isinstance(reg, GradientTikhonov):

        def shrink(step: float, alpha: float) -> None:
            p.div_(1.0 + step * alpha)

        return shrink

    def generic(step: float, alpha: float) -> None:
        p.copy_(reg.prox_dual(p, step, alpha))

    return generic


def _pixel_ball_plan(p: Tensor) -> Plan:
    """Projection onto the pixelwise unit ball over the 2*C components (isotropic TV)."""
    batch, pixels = p.shape[0], p.shape[-2] * p.shape[-1]
    comps = p.view(batch, -1, pixels)  # (B, 2*C, H*W)
    parts = comps.unbind(1)
    scale = torch.empty(batch, pixels, dtype=p.dtype, device=p.device)
    scale_b = scale.unsqueeze(1)

    def project(step: float, alpha: float) -> None:
        torch.mul(parts[0], parts[0], out=scale)
        for part in parts[1:]:
            scale.addcmul_(part, part)
        scale.sqrt_().clamp_min_(1.0)
        comps.div_(scale_b)

    return project


# -- regulariser: prox of the primal part (g and the box) -----------------------------------------
def primal_prox_plan(reg: object, x: Tensor) -> Plan | None:
    """``x <- prox_{step alpha g}(x)`` in place; None when it is the identity (nothing to do).

    ``x`` is viewed with the regulariser's image shape by the caller when that matters (only
    the generic fallback cares: the box and the shrinkages are elementwise).
    """
    # TV, gradient-Tikhonov and the constraints (none/nonneg/box) have g = 0: only the box
    if isinstance(reg, Regulariser) and type(reg)._prox_g is Regulariser._prox_g:
        if not reg.constrained:
            return None
        lo = reg.lo if reg.lo > -math.inf else None
        hi = reg.hi if reg.hi < math.inf else None

        def clip(step: float, alpha: float) -> None:
            x.clamp_(min=lo, max=hi)

        return clip

    def generic(step: float, alpha: float) -> None:
        x.copy_(reg.prox_primal(x, step, alpha))

    return generic


def box_plan(reg: object, x: Tensor) -> Plan | None:
    """``x <- clip(x, lo, hi)`` in place for the regulariser's interval constraint, or None."""
    if not getattr(reg, "constrained", False):
        return None
    lo = reg.lo if reg.lo > -math.inf else None
    hi = reg.hi if reg.hi < math.inf else None

    def clip(step: float, alpha: float) -> None:
        x.clamp_(min=lo, max=hi)

    return clip


# -- activation ----------------------------------------------------------------------------------
def sigma_inplace(activation: object) -> Callable[[Tensor], object]:
    """``a <- sigma(a)`` in place for the common activations, else sigma plus a copy."""
    name = getattr(activation, "name", "")
    if name == "relu":
        return lambda a: a.clamp_min_(0)
    if name == "identity":
        return lambda a: None
    if name == "clip":
        lo, hi = activation.lo, activation.hi
        return lambda a: a.clamp_(min=lo, max=hi)
    return lambda a: a.copy_(activation.sigma(a))


# -- affine map ----------------------------------------------------------------------------------
def dense_matrix(affine: object) -> tuple[Tensor, Tensor | None] | None:
    """(W, b) when the map is one matrix on flattened samples: a Linear on flat input, possibly
    between reshapes. Then W x + b and W^T r are one GEMM each (addmm fuses the bias and,
    for the gradient step, the update x - tau W^T r)."""
    maps = affine.maps if isinstance(affine, ComposedMap) else [affine]
    linears = [m for m in maps if isinstance(m, LinearMap)]
    if len(linears) != 1 or any(not isinstance(m, (LinearMap, ReshapeMap)) for m in maps):
        return None
    lin = linears[0]
    if len(lin.in_shape) != 1 or lin.weight.dim() != 2:
        return None
    bias = lin.bias
    if bias is not None and tuple(bias.shape) != (lin.weight.shape[0],):
        return None
    return lin.weight, bias
