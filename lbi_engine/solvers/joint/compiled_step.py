"""The joint method's compiled step for one sample: everything after the gradient.

``steps.OneSampleStep`` without the torch operations after the gradient, as two compiled
calls (``kernels.joint_prox_gradient``): the gradient step, the TV prox of the image block,
the projection of the auxiliary blocks, the restart test, and the extrapolation. The
momentum rule itself runs between the two kernel calls in Python
(``operators.momentum.ScalarMomentum``, as the torch strategies do), so the two paths agree
to rounding. The gradient comes from the pre-activations at y, formed from those of the last
two iterates (z is affine in x), so the products with W are taken once per step, at the new
iterate, and the records reuse them. Imports numba: import only when about to be used.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from lbi_engine.operators.momentum import ScalarMomentum
from lbi_engine.solvers.joint.state import FistaState
from lbi_engine.solvers.joint.steps import OneSampleStep
from lbi_engine.solvers.kernels.joint_prox_gradient import extrapolate, prox_gradient_step


class CompiledStep(OneSampleStep):
    """The kernels on numpy views of a ``JointFista``'s buffers (one sample, made once),
    and the pre-activations of each slot's iterate."""

    def __init__(self, state: FistaState) -> None:
        super().__init__(state)
        one, prox, momentum = state.one, state.tv_prox, state.momentum
        assert one is not None and prox is not None  # steps.choose makes it only then
        assert isinstance(momentum, ScalarMomentum)  # one sample (made once, in JointFista)
        self.one = one
        # the pre-activations W_l x_l + b_l of each slot's iterate, and of y: one flat
        # buffer each, with per-layer views
        sizes = [int(z.numel()) for z in one.z]
        dtype = state.y.dtype
        self.zx = [torch.empty(sum(sizes), dtype=dtype) for _ in state.slots]
        self.zy = torch.empty(sum(sizes), dtype=dtype)
        self.zx_views = [list(z.split(sizes)) for z in self.zx]
        self.zy_views = list(self.zy.split(sizes))
        for slot in (state.slot_x, state.slot_prev):
            one.forward_into(state.slot_flat[slot], self.zx_views[slot])
        self._slots = [slot[0].numpy() for slot in state.slots]
        self._y, self._grad = state.y[0].numpy(), state.grad[0].numpy()
        self._tau = state.tau.numpy()
        self._prox, self._momentum = prox, momentum
        self._lam = state.lam  # the prox's kernel arguments for it, made once
        self._args = (*prox.arrays, *prox.kernel_arguments(state.lam))
        self._scratch = np.zeros(1, dtype=self._y.dtype)
        # compile (or load from numba's cache) the kernels for this dtype on a 2x2 image
        tiny, img = np.zeros(5, dtype=self._y.dtype), np.zeros((1, 1, 2, 2), self._y.dtype)
        prox_gradient_step(tiny, tiny.copy(), tiny.copy(), 4, tiny.copy(), tiny.copy(), img,
                           img.copy(), np.zeros((1, 2, 1, 2, 2), dtype=self._y.dtype),
                           img.copy(), np.ones(1, dtype=bool), 1.0, 1.0, prox.isotropic,
                           prox.theta, 0.0, 1, prox.check_every, -math.inf, math.inf, None)
        # a warm start's first extrapolation as the kernel makes every later one (torch's
        # addcmul may round differently), so that a continued run repeats a straight one
        extrapolate(self._slots[state.slot_x], self._slots[state.slot_prev], momentum.coef,
                    self._scratch, self._y)

    def advance(self, state: FistaState) -> bool:
        """The step (gradient on buffers, the rest compiled); False, keeping the current
        iterate, where the new one is not finite."""
        one = self.one
        # z at y = x + c (x - x_prev) from those of the iterates, all layers in one
        # operation on the flat buffers
        coef = self._momentum.coef
        if coef == 0.0:
            self.zy.copy_(self.zx[state.slot_x])
        else:
            torch.lerp(self.zx[state.slot_prev], self.zx[state.slot_x], 1.0 + coef, out=self.zy)
        one.from_pre_activations(state.y_flat, self.zy_views, state.grad_flat)
        dot = self._after_gradient(state)
        if not math.isfinite(dot):
            return False
        one.forward_into(state.slot_flat[state.slot_new], self.zx_views[state.slot_new])
        state.rotate()
        return True

    def _after_gradient(self, state: FistaState) -> float:
        """The step after the gradient (in ``state.grad``) and the momentum: writes x+ into
        the state's free slot and the next y, advances the momentum; returns the restart
        test's dot product (not finite: nothing but the slot was written)."""
        new, x = self._slots[state.slot_new], self._slots[state.slot_x]
        if state.lam != self._lam:
            self._lam = state.lam
            self._args = (*self._prox.arrays, *self._prox.kernel_arguments(state.lam))
        inner, dot = prox_gradient_step(self._y, self._grad, self._tau, state.n0, new, x,
                                        *self._args)
        state.inner_steps += int(inner)
        if math.isfinite(dot):
            coef = self._momentum.advance(dot > 0.0)
            extrapolate(new, x, coef, self._scratch, self._y)
        return float(dot)

    def pre_activations(self, state: FistaState) -> list[Tensor] | None:
        return self.zx_views[state.slot_x]
