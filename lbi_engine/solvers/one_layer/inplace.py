"""In-place versions of the per-iteration maps of PDHG, bound to fixed buffers ("plans").

Why: on the paper's problems (a few thousand pixels) one torch call costs about as much as
its arithmetic, and a fresh tensor per call costs an allocation (page faults for a batch).
Each plan is built once for a buffer, keeps the views it needs, and then updates that buffer
in place. Every plan is exactly the out-of-place method it replaces (same formula, same order
of floating-point operations up to summation order); unknown regularisers and activations
fall back to the out-of-place method plus a copy, so nothing is ever lost, only speed.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from lbi_engine import protocols
from lbi_engine.activations import Clip
from lbi_engine.operators import ComposedMap, LinearMap, ReshapeMap
from lbi_engine.operators.backend import fused_tv_mode, numba_enabled
from lbi_engine.regularisers import (
    GradientTikhonov,
    Regulariser,
    TotalVariation,
    dual_ball_projection,
)

if TYPE_CHECKING:  # imported at run time only when a kernel is about to be used (numba)
    from lbi_engine.solvers.kernels.tv_primal_dual import PrimalDualKernel

Plan = Callable[[float, float], None]


# -- regulariser: prox of the dual part h* --------------------------------------------------------
def dual_prox_plan(reg: protocols.Regulariser, p: Tensor) -> Plan:
    """``p <- prox_{step h*}(p)`` in place for a fixed dual buffer p ``(B, 2, *image_shape)``."""
    if isinstance(reg, TotalVariation):  # h* the indicator of the ball: step, alpha unused
        project = dual_ball_projection(p, reg.isotropic)

        def ball(step: float, alpha: float) -> None:
            project()

        return ball
    if isinstance(reg, GradientTikhonov):

        def shrink(step: float, alpha: float) -> None:
            p.div_(1.0 + step * alpha)

        return shrink

    def generic(step: float, alpha: float) -> None:
        p.copy_(reg.prox_dual(p, step, alpha))

    return generic


# -- regulariser: prox of the primal part (g and the box) -----------------------------------------
def primal_prox_plan(reg: protocols.Regulariser, x: Tensor) -> Plan | None:
    """``x <- prox_{step alpha g}(x)`` in place; None when it is the identity (nothing to do).

    ``x`` is viewed with the regulariser's image shape by the caller when that matters (only
    the generic fallback cares: the box and the shrinkages are elementwise).
    """
    # TV, gradient-Tikhonov and the constraints (none/nonneg/box) have g = 0: only the box
    if isinstance(reg, Regulariser) and reg.g_is_zero:
        return box_plan(reg, x)

    def generic(step: float, alpha: float) -> None:
        x.copy_(reg.prox_primal(x, step, alpha))

    return generic


def box_plan(reg: protocols.Regulariser, x: Tensor) -> Plan | None:
    """``x <- clip(x, lo, hi)`` in place for the regulariser's interval constraint, or None."""
    if not getattr(reg, "constrained", False):
        return None
    lo = reg.lo if reg.lo > -math.inf else None
    hi = reg.hi if reg.hi < math.inf else None

    def clip(step: float, alpha: float) -> None:
        x.clamp_(min=lo, max=hi)

    return clip


# -- activation ----------------------------------------------------------------------------------
def sigma_inplace(activation: protocols.Activation) -> Callable[[Tensor], object]:
    """``a <- sigma(a)`` in place for the common activations, else sigma plus a copy."""
    name = getattr(activation, "name", "")
    if name == "relu":
        return lambda a: a.clamp_min_(0)
    if name == "identity":
        return lambda a: None
    if name == "clip" and isinstance(activation, Clip):  # (every "clip" is a Clip)
        lo, hi = activation.lo, activation.hi
        return lambda a: a.clamp_(min=lo, max=hi)
    return lambda a: a.copy_(activation.sigma(a))


# -- affine map ----------------------------------------------------------------------------------
def dense_matrix(affine: protocols.Operator) -> tuple[Tensor, Tensor | None] | None:
    """(W, b) when the map is one matrix on flattened samples: a Linear on flat input, possibly
    between reshapes. Then W x + b and W^T r are one GEMM each (addmm fuses the bias and,
    for the gradient step, the update x - tau W^T r)."""
    maps: Sequence[protocols.Operator] = (
        affine.maps if isinstance(affine, ComposedMap) else [affine])
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


# -- the fused numba path for the regulariser's part of a Condat–Vũ step -----------------------
#: "auto" uses the fused kernels from this many pixels per step (batch x image size) on: one
#: 64x64 image. Measured in one run (benchmarks/RESULTS.md, pdhg-iteration section, from
#: benchmarks/pdhg_paths.py; circle, steps="balanced", one thread): the 1-image step costs
#: 1.15-1.17x the floor fused against 1.43-1.49x on the torch path (50-200 us saved per
#: iteration, depending on load), the batch of 64 1.05-1.08x against 1.18-1.26x. The price is
#: a once-per-process start-up of ~0.7-0.9 s (importing numba, loading the cached kernels; the
#: first compile ever, ~6-11 s per dtype, is once per installation), repaid after ~4k-16k
#: iterations of one image (at once in the GUI or a sweep, which pay it once per process).
#: Smaller images stay on the torch path, where the start-up would dominate.
#: ``LBI_FUSED_TV=1`` uses the kernels at every size, ``LBI_FUSED_TV=0`` never.
FUSED_TV_MIN_PIXELS = 64 * 64


# x_old, step, x_new, z_old, z_new, dz, norms: the arguments of PrimalDualKernel.__call__
_KernelArgs = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                    np.ndarray]


class FusedTV:
    """Everything of one PDHG step past the products with W, for TV / gradient-Tikhonov on
    CPU: ``dx += tau_x alpha div z``, ``x+ = clip(x + dx)``,
    ``z+ = proj(z + tau_z alpha grad(2x+ - x))``, the change of z, and the four per-sample
    norms (``norms``: (B, 4) float64, columns ||x+||, ||x+ - x||, ||z+||, ||z+ - z||), in one
    numba kernel (``kernels.tv_primal_dual``).

    Bound to the block's two slot pairs ``xp[k]`` (2, B, *x_shape) and ``zp[k]``
    (2, B, 2, *image_shape): ``self(cur)`` reads slot cur and writes slot 1 - cur, as the torch
    path does; returns the sum of the norms (finite iff every value written is)."""

    def __init__(self, kernels: ModuleType, kernel: PrimalDualKernel, xp: list[Tensor],
                 zp: list[Tensor], image_shape: tuple[int, ...]) -> None:
        h, w = int(image_shape[-2]), int(image_shape[-1])
        batch = xp[0].shape[1]
        image, field = (batch, -1, h, w), (batch, 2, -1, h, w)
        self.norms = torch.zeros(batch, 4, dtype=torch.float64)
        norms = self.norms.numpy()
        self._args: list[_KernelArgs] = []
        for cur in (0, 1):
            old, new = xp[cur].numpy(), xp[1 - cur].numpy()
            z_old, z_new = zp[cur].numpy(), zp[1 - cur].numpy()
            args: _KernelArgs = (
                old[0].reshape(image), new[1].reshape(image), new[0].reshape(image),
                z_old[0].reshape(field), z_new[0].reshape(field), z_new[1].reshape(field), norms)
            kernels.PrimalDualKernel.check(*args)
            self._args.append(args)
        self._kernel = kernel

    def __call__(self, cur: int) -> float:
        return self._kernel(*self._args[cur])


def fused_tv_plan(reg: protocols.Regulariser, xp: list[Tensor], zp: list[Tensor],
                  image_shape: tuple[int, ...], tau_x: float, tau_z: float, alpha: float,
                  store_dz: bool) -> FusedTV | None:
    """The fused step for these buffers, or None where it does not apply or does not pay:
    another regulariser or a primal prox other than the box, not on the CPU, not
    float32/float64, numba missing, failing or off (``LBI_NO_NUMBA``), ``LBI_FUSED_TV=0``, or
    (auto) a small problem.
    ``store_dz``: also write z+ - z into zp[.][1] (Anderson mixing reads it; otherwise only
    its norm is needed). Compiles or loads the kernels here (see kernels.tv_primal_dual.warm_up)."""
    mode = fused_tv_mode()
    x = xp[0]
    if mode == "off" or x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64):
        return None
    if not isinstance(reg, (TotalVariation, GradientTikhonov)):
        return None
    if not reg.g_is_zero:  # g != 0: only the box is fused
        return None
    if mode == "auto" and x[0].numel() < FUSED_TV_MIN_PIXELS:
        return None
    if not numba_enabled():  # (imports numba: only once the kernels would be used)
        return None
    try:
        kernels = importlib.import_module("lbi_engine.solvers.kernels.tv_primal_dual")
        numpy_dtype = x.numpy().dtype
        kernels.warm_up(numpy_dtype, ("fused",))
    except Exception:  # no numba, or it fails here: the torch path is exact too
        return None
    if isinstance(reg, GradientTikhonov):
        kind, shrink = kernels.KIND_SHRINK, 1.0 + tau_z * alpha
    else:
        kind, shrink = (kernels.KIND_ISO if reg.isotropic else kernels.KIND_ANISO), 1.0
    kernel = kernels.PrimalDualKernel(numpy_dtype, tau_x * alpha, tau_z * alpha, kind, shrink,
                                      reg.lo, reg.hi, store_dz)
    return FusedTV(kernels, kernel, xp, zp, image_shape)


# -- the products with W in one pass (numba), beside the fused TV step ----------------------------
#: the one-pass gradient is used up to this many samples; above, the two BLAS products, whose
#: blocking reuses each piece of W across samples better than the kernel's loop over them
#: (the kernel rereads its four rows from L2 for every sample). Where it crosses over:
#: benchmarks/RESULTS.md, one-layer step cost.
ONE_PASS_MAX_BATCH = 8


def clip_bounds(activation: protocols.Activation) -> tuple[float, float] | None:
    """(lo, hi) with sigma = clip(., lo, hi) for ReLU, identity and clip; else None."""
    name = getattr(activation, "name", "")
    if name == "relu":
        return 0.0, math.inf
    if name == "identity":
        return -math.inf, math.inf
    if name == "clip" and isinstance(activation, Clip):
        return activation.lower, activation.upper  # (lo / hi with None as -inf / inf)
    return None


class OnePassGradient:
    """``dx = -tau_x W^T (sigma(W x + b) - data)`` for a dense layer in one pass over W
    (``kernels.dense_gradient``), bound to the block's flat iterate slots ``xf[k]`` and step
    slots ``dxf[k]`` (B, n): ``self(cur, data)`` reads x from slot cur and writes the step
    into slot 1 - cur, as the block's two BLAS products do."""

    def __init__(self, kernels: ModuleType, weight: Tensor, bias: Tensor | None,
                 bounds: tuple[float, float], xf: list[Tensor], dxf: list[Tensor],
                 tau_x: float) -> None:
        self._w = weight.detach().numpy()
        self._dtype = weight.dtype
        dtype = self._w.dtype
        self._b = (np.zeros(weight.shape[0], dtype=dtype) if bias is None
                   else bias.detach().numpy())
        self._x = [t.numpy() for t in xf]
        self._out = [dxf[1 - k].numpy() for k in (0, 1)]
        self._shape = (xf[0].shape[0], int(weight.shape[0]))
        self._data: Tensor | None = None
        self._d = np.zeros(self._shape, dtype=dtype)
        for k in (0, 1):
            kernels.check(self._w, self._b, self._x[k], self._d, self._out[k])
        self._k = kernels.constants(dtype, -tau_x, *bounds)
        self._kernel = kernels.gradient_step

    def __call__(self, cur: int, data: Tensor) -> None:
        if data is not self._data:  # the flat view of the data, made once per tensor
            # a view of contiguous data of W's dtype; other data is copied afresh each step
            # (it may change in place between steps, which a kept copy would miss)
            view = data.is_contiguous() and data.dtype == self._dtype
            self._data = data if view else None
            self._d = data.detach().reshape(self._shape).to(self._dtype).contiguous().numpy()
        self._kernel(self._w, self._b, self._x[cur], self._d, self._out[cur], self._k)


def one_pass_plan(activation: protocols.Activation, affine: protocols.Operator,
                  xf: list[Tensor], dxf: list[Tensor], tau_x: float) -> OnePassGradient | None:
    """The one-pass gradient for these slots, or None where it does not apply: not one dense
    matrix, an activation other than ReLU / identity / clip, not on the CPU, not
    float32/float64, more than :data:`ONE_PASS_MAX_BATCH` samples, numba missing or failing.
    The caller asks only where the step already runs compiled (the fused TV path): the same
    switches, and numba's start-up is paid already."""
    dense, bounds = dense_matrix(affine), clip_bounds(activation)
    x = xf[0]
    if dense is None or bounds is None or x.device.type != "cpu" \
            or x.dtype not in (torch.float32, torch.float64) or x.shape[0] > ONE_PASS_MAX_BATCH:
        return None
    weight, bias = dense
    if weight.dtype != x.dtype or weight.device != x.device or not weight.is_contiguous() \
            or (bias is not None and not bias.is_contiguous()) or not numba_enabled():
        return None
    try:
        kernels = importlib.import_module("lbi_engine.solvers.kernels.dense_gradient")
        kernels.warm_up(x.numpy().dtype)
        return OnePassGradient(kernels, weight, bias, bounds, xf, dxf, tau_x)
    except Exception:  # no numba, or it fails here: the BLAS products are exact too
        return None
