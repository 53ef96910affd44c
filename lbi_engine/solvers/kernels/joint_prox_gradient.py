"""The joint method's step for one sample after its gradient, as compiled loops.

``prox_gradient_step``: the gradient step on every block, the TV prox of the image block (the
FGP kernel of ``regularisers._fgp_kernel``, the same warm-started FGP and stopping test as
the state's ``TVProx``), the projection of the auxiliary blocks onto x >= 0 (ReLU) and the
restart test; ``extrapolate``: the momentum extrapolation. As torch calls this is ~13
operations of ~2-5 us each on ~3000 entries, a third of a step's time beside its six
products with W; here it is one loop nest. ``joint.compiled_step.CompiledStep`` runs them on a
``JointFista``'s buffers. Imports numba: import only when about to be used.
"""

from __future__ import annotations

from lbi_engine.operators.backend import jit as _jit
from lbi_engine.regularisers._fgp_kernel import fgp_prox


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
