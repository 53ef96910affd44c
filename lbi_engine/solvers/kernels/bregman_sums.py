"""The records' Bregman sums for one sample in compiled loops (numba, CPU).

A record of the joint method's alpha search comes every 5 steps, and its Bregman terms as
torch calls on 300-1568 entries cost ~70 us in per-call overhead (a step costs ~200 us):
here each term is one loop, summed in float64 (also free of float32 cancellation).
Imports numba: import only when about to be used (``joint.one_sample``).
"""

from __future__ import annotations

from lbi_engine.operators.backend import jit as _jit


@_jit(fastmath=True)
def relu_bregman(x, z):
    """sum 1/2 (x - z_+)^2 + x z_- for x >= 0: ReLU's B_Psi(x, z) (``_piecewise.ReLU``)."""
    total = 0.0
    for i in range(x.shape[0]):
        zi = float(z[i])
        xi = float(x[i])
        if zi > 0.0:
            e = xi - zi
            total += 0.5 * e * e
        else:
            total += 0.5 * xi * xi - xi * zi
    return total


@_jit(fastmath=True)
def half_sq_dist(x, z):
    """sum 1/2 (x - z)^2: the identity's B_Psi(x, z), and half the squared residual."""
    total = 0.0
    for i in range(x.shape[0]):
        e = float(x[i]) - float(z[i])
        total += 0.5 * e * e
    return total
