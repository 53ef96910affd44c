"""The data term's gradient step through one dense layer in one pass over its matrix (numba).

    out = scale * W^T (clip(W x + b, lo, hi) - data)        (scale = -tau, per sample)

Why: with W of a few MB and a few samples, ``W x`` and ``W^T r`` are two streams of W through
the caches, each bound by the bandwidth of the cache that holds W. Row i of the residual
depends on row i of W alone, so both products can share one stream: a block of four rows is
read, dotted with x, and the four residuals are then added back through the same rows while
they are still in L1/L2. W then crosses from the outer cache once per step instead of twice.

``clip(., lo, hi)`` covers the activations whose in-place step the Condat–Vũ block knows:
ReLU (0, inf), identity (-inf, inf) and a clip. Arithmetic: the dot products and the sum
over rows are reassociated (vectorised, fused multiply-adds), so the result equals the two
BLAS products to the rounding of the dtype, not bit for bit; a NaN or inf propagates as it
would through them. A block of four rows whose scaled residuals are all exactly 0 (inactive
ReLU units whose data are 0) adds nothing and is skipped.

This module imports numba and compiles on first call (see :func:`warm_up`); import it only
when the kernel is about to be used.
"""

from __future__ import annotations

import time
import warnings

import numba
import numpy as np
from numpy.typing import DTypeLike

from lbi_engine.operators.backend import jit

# the scalars travel in one array of W's dtype, so float32 is computed in float32
_SCALE, _LO, _HI, _ZERO = range(4)


def constants(dtype: DTypeLike, scale: float, lo: float, hi: float) -> np.ndarray:
    """The kernel's scalars (scale, lo, hi, 0) as an array of W's dtype."""
    return np.array([scale, lo, hi, 0.0], dtype=dtype)


@jit(fastmath=True)
def gradient_step(w, bias, x, data, out, k):
    """out[s] = k[scale] W^T (clip(W x[s] + bias, lo, hi) - data[s]) for every sample s.

    w (m, n), bias (m,), x (B, n), data (B, m), out (B, n), k from :func:`constants`; all
    C-contiguous, one dtype. ``out`` must not overlap the others. Returns nothing."""
    m, n = w.shape
    batch = x.shape[0]
    scale, lo, hi, zero = k[_SCALE], k[_LO], k[_HI], k[_ZERO]
    for s in range(batch):
        g = out[s]
        for j in range(n):
            g[j] = zero
    full = m - m % 4
    for i in range(0, full, 4):
        w0, w1, w2, w3 = w[i], w[i + 1], w[i + 2], w[i + 3]
        for s in range(batch):
            xs, d, g = x[s], data[s], out[s]
            s0 = zero
            s1 = zero
            s2 = zero
            s3 = zero
            for j in range(n):
                xj = xs[j]
                s0 += w0[j] * xj
                s1 += w1[j] * xj
                s2 += w2[j] * xj
                s3 += w3[j] * xj
            c0 = scale * (_clip(s0 + bias[i], lo, hi) - d[i])
            c1 = scale * (_clip(s1 + bias[i + 1], lo, hi) - d[i + 1])
            c2 = scale * (_clip(s2 + bias[i + 2], lo, hi) - d[i + 2])
            c3 = scale * (_clip(s3 + bias[i + 3], lo, hi) - d[i + 3])
            if c0 != zero or c1 != zero or c2 != zero or c3 != zero:
                for j in range(n):
                    g[j] += c0 * w0[j] + c1 * w1[j] + c2 * w2[j] + c3 * w3[j]
    for i in range(full, m):  # the last m % 4 rows, one at a time
        wi = w[i]
        for s in range(batch):
            xs, g = x[s], out[s]
            acc = zero
            for j in range(n):
                acc += wi[j] * xs[j]
            c = scale * (_clip(acc + bias[i], lo, hi) - data[s, i])
            if c != zero:
                for j in range(n):
                    g[j] += c * wi[j]


@jit(fastmath=True)
def _clip(v, lo, hi):
    """clip(v, lo, hi), NaN kept (both tests are false for NaN)."""
    if v < lo:
        v = lo
    if v > hi:
        v = hi
    return v


def check(w: np.ndarray, bias: np.ndarray, x: np.ndarray, data: np.ndarray,
          out: np.ndarray) -> None:
    """Raises ValueError unless the arrays fit :func:`gradient_step` (shapes, one float
    dtype, C order), so that a wrong binding fails once, at construction, not in the loop."""
    m, n = w.shape
    batch = x.shape[0]
    want = {"w": (w, (m, n)), "bias": (bias, (m,)), "x": (x, (batch, n)),
            "data": (data, (batch, m)), "out": (out, (batch, n))}
    if w.dtype not in (np.float32, np.float64):
        raise ValueError(f"dense gradient: W is {w.dtype}; the kernel takes float32/float64")
    for name, (array, shape) in want.items():
        if array.shape != shape or array.dtype != w.dtype or not array.flags.c_contiguous:
            raise ValueError(f"dense gradient: {name} {array.shape} {array.dtype} does not "
                             f"match W {w.shape} {w.dtype} (C-contiguous {shape} expected)")


def warm_up(dtype: DTypeLike) -> float:
    """Compiles (or loads from numba's cache) the kernel for ``dtype`` on tiny arrays, numba's
    warnings silenced; returns the seconds it took."""
    start = time.perf_counter()
    w, x = np.zeros((5, 3), dtype=dtype), np.zeros((1, 3), dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numba.NumbaWarning)
        gradient_step(w, np.zeros(5, dtype=dtype), x, np.zeros((1, 5), dtype=dtype),
                      np.zeros((1, 3), dtype=dtype), constants(dtype, -1.0, 0.0, np.inf))
    return time.perf_counter() - start
