"""prox_{t Psi} of the smooth bounded activations (tanh, sigmoid) in one compiled loop.

Why: the joint method takes this prox on every auxiliary block at every step. The generic
root solver (``activations._base.solve_increasing``) is vectorised torch: each of its 3-4
Newton rounds is ~20 tensor operations over the whole block, and on a 64x64 LeNet-like
encoder (32k auxiliary entries) the two tanh blocks' proxes were half of the step. Here the
same safeguarded Newton (rtsafe: Newton inside the bracket, bisection where it leaves it;
the same stopping tests; an a-priori bracket from sigma's range) runs per element in
registers, started at the previous step's roots, so it agrees with the torch prox to
rounding (tested) and costs 2-3 exponentials per entry.

    prox_{t Psi}(v) = sigma(zeta),  t zeta + (1 - t) sigma(zeta) = v   (MATH.md §2.4)

Imports numba: import only when about to be used (``compiled_prox`` checks).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lbi_engine.operators.backend import jit as _jit
from lbi_engine.operators.backend import numba_enabled

#: The generic root solver's cap on Newton/bisection rounds (``ROOT_MAX_ITER``).
MAX_ITER = 100
_KINDS = {"Tanh": 0, "Sigmoid": 1}


@_jit(fastmath=True)
def _sigma(kind, z):
    """tanh (kind 0) or the logistic sigmoid (1) through one exp of -|z| (no overflow; 3x
    cheaper than libm's tanh; absolute error a few ulps of 1, which is what the root test
    and the prox's range [-1, 1] / [0, 1] need)."""
    if kind == 0:
        e = math.exp(-2.0 * abs(z))
        r = (1.0 - e) / (1.0 + e)
        return r if z >= 0.0 else -r
    e = math.exp(-abs(z))
    return 1.0 / (1.0 + e) if z >= 0.0 else e / (1.0 + e)


@_jit(fastmath=True)
def root_prox(kind, v, t, out, eps, max_iter, zeta, warm):
    """out[b, i] = sigma(zeta), zeta the root of t zeta + (1 - t) sigma(zeta) = v[b, i],
    for a step t in (0, inf) (not 1: the caller returns sigma(v) there). ``v`` and ``out``
    (B, n), possibly the same array or strided views. ``zeta`` (B, n) receives the roots;
    with ``warm`` its entries on entry are the starting points (the last call's roots: the
    joint method's blocks move little per step, so Newton needs 1-2 rounds, not 3-4),
    else Newton starts at v. The bracket is a priori: sigma's range bounds (1 - t) sigma,
    so t zeta = v - (1 - t) sigma(zeta) lies in [v - b, v - a]."""
    if kind == 0:
        a, b_hi = -abs(1.0 - t), abs(1.0 - t)
    else:
        a, b_hi = min(0.0, 1.0 - t), max(0.0, 1.0 - t)
    root_eps = math.sqrt(eps)
    rows, n = v.shape
    for b in range(rows):
        for i in range(n):
            vi = v[b, i]
            lo, hi = (vi - b_hi) / t, (vi - a) / t
            x = min(max(zeta[b, i], lo), hi) if warm else vi
            s = _sigma(kind, x)
            for _ in range(max_iter):
                tz, rest = t * x, (1.0 - t) * s
                g = tz + rest - vi
                ds = 1.0 - s * s if kind == 0 else s * (1.0 - s)
                dg = t + (1.0 - t) * ds
                last = abs(g) <= 8.0 * eps * (abs(tz) + abs(rest) + abs(vi))
                if g > 0.0:
                    hi = x
                else:
                    lo = x
                newton = x - g / dg
                slack = 4.0 * eps * (1.0 + abs(newton))
                if newton >= lo - slack and newton <= hi + slack:
                    x_new = newton
                else:
                    x_new = 0.5 * (lo + hi)
                if last or abs(x_new - x) <= 4.0 * eps * (1.0 + abs(x_new)):
                    # sigma at the final root to first order from sigma(x) where the step
                    # is so small that its square is below rounding: saves a transcendental
                    if abs(x_new - x) <= root_eps:
                        s += ds * (x_new - x)
                    else:
                        s = _sigma(kind, x_new)
                    x = x_new
                    break
                x = x_new
                s = _sigma(kind, x)
            zeta[b, i] = x
            out[b, i] = s


def compiled_prox(activation: object, like: Tensor) -> Callable[[Tensor, float], None] | None:
    """An in-place ``v <- prox_{t Psi}(v)`` on a (B, n) CPU view for a tanh or sigmoid
    activation and a float32/float64 ``like``, compiled (or loaded) here, outside any
    stopwatch; None for other activations, devices or dtypes, or without numba. Each call
    starts Newton at the previous call's roots (one function per block: make one per
    block): any start gives the same root to rounding, a near one in fewer rounds."""
    kind = _KINDS.get(type(activation).__name__)
    if kind is None or like.device.type != "cpu" or like.dtype not in (torch.float32,
                                                                        torch.float64):
        return None
    if not numba_enabled():  # numba unusable (or LBI_NO_NUMBA)
        return None
    eps = float(torch.finfo(like.dtype).eps)
    probe = np.zeros((1, 1), dtype=np.float32 if like.dtype == torch.float32 else np.float64)
    root_prox(kind, probe, 0.5, probe, eps, MAX_ITER, np.zeros((1, 1)), False)
    # the last call's roots (float64), the next call's starting points for the same shape
    roots: dict[str, Any] = {"zeta": None}

    def prox(v: Tensor, t: float) -> None:
        if t == 1.0:  # prox_Psi = sigma
            v.copy_(torch.tanh(v) if kind == 0 else torch.sigmoid(v))
            return
        array: Any = v.numpy()
        zeta = roots["zeta"]
        warm = zeta is not None and zeta.shape == array.shape
        if not warm:
            zeta = roots["zeta"] = np.empty(array.shape)
        root_prox(kind, array, float(t), array, eps, MAX_ITER, zeta, warm)

    return prox
