"""The joint method's step for one sample after its gradient, in one compiled call.

``JointFista.step`` + ``accept_one`` without the gradient: the gradient step on every block,
the TV prox of the image block (the compiled backend of the state's ``TVProx``, the same
warm-started FGP and stopping test), the projection of the auxiliary blocks onto x >= 0
(ReLU), the restart test and the momentum extrapolation. As torch calls this is ~13
operations of ~2-5 us each on ~3000 entries, a third of a step's time beside its six
products with W; here it is one loop nest. The momentum rule itself runs between the two
kernel calls in Python (``_momentum.ScalarMomentum``, as ``JointFista._accept_scalar``), so
the two paths agree to rounding. Imports numba: import only when about to be used.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lbi_engine.operators.backend import jit as _jit
from lbi_engine.regularisers._fgp_kernel import fgp_prox


class FusedStep:
    """The kernels on numpy views of a ``JointFista``'s buffers (one sample, made once)."""

    def __init__(self, state: Any) -> None:
        self._slots = [slot[0].numpy() for slot in state._slots]
        self._y, self._grad = state._y[0].numpy(), state._grad[0].numpy()
        self._tau = state._tau.numpy()
        self._prox = prox = state.tv_prox  # compiled: FusedStep is made only then
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
        extrapolate(self._slots[state._ix], self._slots[state._ip], state.momentum.coef,
                    self._scratch, self._y)

    def step(self, state: Any) -> float:
        """The step after the gradient (in ``state._grad``) and the momentum: writes x+ into
        the state's free slot and the next y, advances the momentum; returns the restart
        test's dot product (not finite: nothing but the slot was written)."""
        new, x = self._slots[state._in], self._slots[state._ix]
        if state.lam != self._lam:
            self._lam = state.lam
            self._args = (*self._prox.arrays, *self._prox.kernel_arguments(state.lam))
        inner, dot = prox_gradient_step(self._y, self._grad, self._tau, state._n0, new, x,
                                        *self._args)
        state.inner_steps += int(inner)
        if math.isfinite(dot):
            coef = state.momentum.advance(dot > 0.0)
            extrapolate(new, x, coef, self._scratch, self._y)
        return float(dot)


@_jit()
def prox_gradient_step(y, g, tau, n0, new, x, v_img, y_img, p, u_img, active, lam, step, iso,
                       theta, floor, max_steps, check_every, lo, hi, w):
    """new = prox(y - tau g): TV (+ box [lo, hi]) prox (FGP) on the first n0 entries, x >= 0
    on the rest.
    ``v_img``, ``y_img``, ``u_img`` are (1, lead, H, W) buffers of the image block, ``p`` its
    dual (warm start, updated). Returns the FGP steps taken and the restart test's
    <y - new, new - x> (float64; > 0 restarts, not finite iff new is not)."""
    n = y.shape[0]
    for i in range(n):
        new[i] = y[i] - tau[i] * g[i]
    v_flat = v_img.reshape(-1)
    y_flat = y_img.reshape(-1)
    for i in range(n0):
        v_flat[i] = new[i]
        y_flat[i] = y[i]
    inner = fgp_prox(v_img, y_img, p, u_img, active, lam, step, iso, theta, floor, max_steps,
                     check_every, lo, hi, w)
    u_flat = u_img.reshape(-1)
    for i in range(n0):
        new[i] = u_flat[i]
    for i in range(n0, n):
        if new[i] < 0.0:
            new[i] = 0.0
    dot = 0.0
    for i in range(n):
        dot += (float(y[i]) - float(new[i])) * (float(new[i]) - float(x[i]))
    return inner, dot


@_jit()
def extrapolate(new, x, coef, scratch, y):
    """y = x+ + coef (x+ - x) with coef rounded to the dtype (through ``scratch``): also
    the extrapolation of a warm start, so that a continued run repeats a straight one."""
    scratch[0] = coef
    c = scratch[0]
    for i in range(y.shape[0]):
        y[i] = new[i] + c * (new[i] - x[i])
