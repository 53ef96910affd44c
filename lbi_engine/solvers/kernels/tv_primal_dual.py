"""Fused CPU kernels (numba) for the gradient-field part of the Condat–Vũ iteration.

Why: for a batch, the work of PDHG besides the two products with W is about twenty
memory-bound torch passes over arrays of 1–2 MB (divergence, step, extrapolation, gradient,
dual ascent, pixelwise projection, changes, norms). These kernels do the same arithmetic one
sample at a time, so a sample's arrays (~150 KB for 64x64) stay in L2 between the passes,
and they release the GIL, so a GUI thread keeps running while a solver computes. Measured
(benchmarks/NOTES.md, "Fused TV kernels"): 0.7 ms instead of 1.85 ms per step for 64 images
of 64x64, the iteration 1.27x the floor of the two products instead of 1.66x.

Conventions (as ``operators.finite_differences``): images are ``(B, L, H, W)`` (L: channels
or any leading dims, flattened), gradient fields ``(B, 2, L, H, W)`` with forward differences
and Neumann boundary; the entries grad never writes (last row of component 0, last column of
component 1) must be 0 on input and are written as 0. All arrays C-contiguous, one dtype
(float32 or float64); ``norms`` is ``(B, 4)`` float64. Every kernel does the torch path's
floating-point operations in the torch path's order, so float64 iterates agree to rounding.
Norms: squares summed in the images' dtype over blocks of 256 (reassociated, vectorised),
blocks summed in float64.

Dual-ball kinds: ``KIND_ISO`` pixelwise projection onto the unit Euclidean ball over the 2L
components (isotropic TV), ``KIND_ANISO`` clip to [-1, 1] (anisotropic TV), ``KIND_SHRINK``
division by ``shrink`` (gradient-Tikhonov: prox of h* = v / (1 + tau alpha)).

Public API (numpy arrays in, results written in place; each call returns the sum of the norms
it wrote, a finite number iff every value it wrote is finite), for any loop that needs them:

* :func:`primal_step`  ``step += scale div z; x_new = clip(x_old + step)``, norms[:, 0:2];
* :func:`dual_step`    ``z_new = proj(z_old + scale grad(xa + theta xb))``, norms[:, 2:4];
* :class:`PrimalDualKernel` both, per sample, at ``xa, xb = x_new, step`` (the Condat–Vũ
  extrapolation 2 x+ - x = x+ + (x+ - x)), with its scalars bound once;
* :func:`warm_up` compile / load them before a loop starts (silencing numba's warnings).

This module imports numba (~0.3 s) and compiles on first call (see ``warm_up``); import it
only when a kernel is about to be used.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numba
import numpy as np
from numpy.typing import DTypeLike

from lbi_engine.operators.backend import jit

if TYPE_CHECKING:  # generic only in numba's stubs, not at run time
    from numba.core.dispatcher import Dispatcher

_F = TypeVar("_F", bound=Callable[..., Any])

KIND_ISO = 0
KIND_ANISO = 1
KIND_SHRINK = 2


def _jit(fastmath: bool | set[str] = False) -> Callable[[_F], Dispatcher[_F]]:
    """:func:`backend.jit` with ``error_model="numpy"``: IEEE division (x / 0 = inf, as
    torch), whose loops vectorise (Python's ZeroDivisionError branch kept them from it: 4x).
    ``fastmath=False`` (default): no reassociation or contraction, so float64 rounds as the
    torch path does."""
    return jit(fastmath, error_model="numpy")


# Scalars travel in one array of the images' dtype (``_consts``), so that float32 images are
# computed in float32 as torch does (a Python float would promote every operation to float64).
_SCALE_X, _SCALE_Z, _LO, _HI, _SHRINK, _THETA, _ZERO, _ONE = range(8)


def _consts(dtype: DTypeLike, primal_scale: float, dual_scale: float, lo: float, hi: float,
            shrink: float, theta: float) -> np.ndarray:
    """The kernels' scalars as an array of the images' dtype (see _SCALE_X ...)."""
    return np.array([primal_scale, dual_scale, lo, hi, shrink, theta, 0.0, 1.0], dtype=dtype)


# Only a norm's sum may be reassociated (its order is not part of the iterates): that lets the
# loop vectorise; every other kernel keeps IEEE order.
@_jit(fastmath={"reassoc"})
def _sumsq(a, zero):
    """sum_j a[j]^2 of a 1-D array: in a's dtype over blocks of 256 (float32: 8-lane vectors,
    no conversions; a few partial sums per lane, so the rounding stays ~1e-7 relative), the
    blocks summed in float64. ``zero``: 0 of a's dtype."""
    total = 0.0
    for start in range(0, a.shape[0], 256):
        block = a[start:start + 256]
        part = zero
        for j in range(block.shape[0]):
            part += block[j] * block[j]
        total += float(part)
    return total


@_jit()
def _primal_sample(x_old, step, x_new, z, b, k, clip, norms):
    """Sample b: step += scale div z, x_new = clip(x_old + step); squared norms of x_new and
    step added to norms[b, 0:2].

    Flat indexing as ``finite_differences.DivAdd`` and in its order (z[0], z[1], minus z[0]
    one row up, minus z[1] one to the left: across a row boundary that is the unused, zero
    z[1][r - 1, W - 1]), so float64 rounds as in the torch path. The loops run over shifted
    views with non-negative indices: numba's wrap-around of negative indices would stop
    LLVM from vectorising them."""
    lead, width = x_old.shape[1], x_old.shape[3]
    n = x_old.shape[2] * width
    m = n - width
    s, lo, hi = k[_SCALE_X], k[_LO], k[_HI]
    for c in range(lead):
        st, xo, xn = step[b, c].reshape(n), x_old[b, c].reshape(n), x_new[b, c].reshape(n)
        p0, p1 = z[b, 0, c].reshape(n), z[b, 1, c].reshape(n)
        d = st[0] + s * p0[0]
        st[0] = d + s * p1[0]
        xn[0] = xo[0] + st[0]
        first = min(width, n)  # first row: no z[0] above
        a, q0, q1, left, xo_, xn_ = st[1:first], p0[1:first], p1[1:first], p1[:first - 1], \
            xo[1:first], xn[1:first]
        for j in range(first - 1):
            d = a[j] + s * q0[j]
            d = d + s * q1[j]
            d = d - s * left[j]
            a[j] = d
            xn_[j] = xo_[j] + d
        a, q0, q1, up, left, xo_, xn_ = st[width:], p0[width:], p1[width:], p0[:m], \
            p1[width - 1:n - 1], xo[width:], xn[width:]
        for j in range(m):
            d = a[j] + s * q0[j]
            d = d + s * q1[j]
            d = d - s * up[j]
            d = d - s * left[j]
            a[j] = d
            xn_[j] = xo_[j] + d
        if clip:  # NaN fails both tests and stays NaN, as with torch.clamp
            for j in range(n):
                v = xn[j]
                v = lo if v < lo else v
                v = hi if v > hi else v
                xn[j] = v
                st[j] = v - xo[j]
        norms[b, 0] += _sumsq(xn, k[_ZERO])
        norms[b, 1] += _sumsq(st, k[_ZERO])


@_jit()
def _prox1(v, kind, one, shrink):
    """The componentwise dual proxes (anisotropic TV: clip to [-1, 1], NaN kept; gradient-
    Tikhonov: divide); isotropic TV couples components and is done by the caller."""
    if kind == KIND_ANISO:
        v = -one if v < -one else v
        return one if v > one else v
    if kind == KIND_SHRINK:
        return v / shrink
    return v


@_jit()
def _dual_sample(xa, xb, z_old, z_new, dz, b, k, kind, store_dz, norms, xbar, scratch,
                 inner):
    """Sample b: z_new = proj(z_old + scale grad(xa + theta xb)), dz = z_new - z_old (if
    store_dz); squared norms of z_new and dz added to norms[b, 2:4].

    Work space: ``xbar`` (L, H W + W), zero past H W (the shifted loads of the last row read
    there, their results are discarded); ``scratch`` (2, H W); ``inner`` (H W,) bool, False
    on the last column. The gradient is ``finite_differences.GradInto``'s (entries grad never
    writes are 0), the isotropic projection ``regularisers.dual_ball_projection``'s, same order."""
    lead, width = xa.shape[1], xa.shape[3]
    n = xa.shape[2] * width
    m = n - width
    s, theta, shrink, zero, one = k[_SCALE_Z], k[_THETA], k[_SHRINK], k[_ZERO], k[_ONE]
    for c in range(lead):
        u, ua, ub = xbar[c], xa[b, c].reshape(n), xb[b, c].reshape(n)
        for j in range(n):
            u[j] = ua[j] + theta * ub[j]
    if kind == KIND_ISO and lead == 1:  # the common case in one loop per pixel
        u, below, right = xbar[0], xbar[0, width:], xbar[0, 1:]
        zo0, zo1 = z_old[b, 0, 0].reshape(n), z_old[b, 1, 0].reshape(n)
        zn0, zn1 = z_new[b, 0, 0].reshape(n), z_new[b, 1, 0].reshape(n)
        d0, d1 = scratch[0], scratch[1]
        if store_dz:
            d0, d1 = dz[b, 0, 0].reshape(n), dz[b, 1, 0].reshape(n)
        for j in range(n):
            v0 = zo0[j] + s * (below[j] - u[j]) if j < m else zero
            v1 = zo1[j] + s * (right[j] - u[j]) if inner[j] else zero
            t = math.sqrt(v0 * v0 + v1 * v1)
            t = one if t < one else t  # clamp_min(1); NaN stays NaN
            v0 = v0 / t
            v1 = v1 / t
            zn0[j] = v0
            zn1[j] = v1
            d0[j] = v0 - zo0[j]
            d1[j] = v1 - zo1[j]
        norms[b, 2] += _sumsq(zn0, zero) + _sumsq(zn1, zero)
        norms[b, 3] += _sumsq(d0, zero) + _sumsq(d1, zero)
        return
    for c in range(lead):
        u, below, right = xbar[c], xbar[c, width:], xbar[c, 1:]
        zo, zn = z_old[b, 0, c].reshape(n), z_new[b, 0, c].reshape(n)
        for j in range(n):
            v = zo[j] + s * (below[j] - u[j]) if j < m else zero
            zn[j] = _prox1(v, kind, one, shrink)
        zo, zn = z_old[b, 1, c].reshape(n), z_new[b, 1, c].reshape(n)
        for j in range(n):
            v = zo[j] + s * (right[j] - u[j]) if inner[j] else zero
            zn[j] = _prox1(v, kind, one, shrink)
    if kind == KIND_ISO:  # pixel norms over the 2L components, in dual_ball_projection's order
        ssq = scratch[1]
        for comp in range(2):
            for c in range(lead):
                zn = z_new[b, comp, c].reshape(n)
                if comp == 0 and c == 0:
                    for j in range(n):
                        ssq[j] = zn[j] * zn[j]
                else:
                    for j in range(n):
                        ssq[j] = ssq[j] + zn[j] * zn[j]
        for j in range(n):
            t = math.sqrt(ssq[j])
            ssq[j] = one if t < one else t
        for comp in range(2):
            for c in range(lead):
                zn = z_new[b, comp, c].reshape(n)
                for j in range(n):
                    zn[j] = zn[j] / ssq[j]
    for comp in range(2):
        for c in range(lead):
            zo, zn = z_old[b, comp, c].reshape(n), z_new[b, comp, c].reshape(n)
            d = dz[b, comp, c].reshape(n) if store_dz else scratch[0]
            for j in range(n):
                d[j] = zn[j] - zo[j]
            norms[b, 2] += _sumsq(zn, zero)
            norms[b, 3] += _sumsq(d, zero)


@_jit()
def _work_space(x):
    """Scratch for _dual_sample: xbar (L, H W + W) zero-padded, scratch (2, H W), and the
    mask of pixels that have a right neighbour."""
    lead, width = x.shape[1], x.shape[3]
    n = x.shape[2] * width
    inner = np.ones(n, dtype=np.bool_)
    for j in range(width - 1, n, width):
        inner[j] = False
    xbar = np.zeros((lead, n + width), dtype=x.dtype)
    return xbar, np.empty((2, n), dtype=x.dtype), inner


@_jit()
def _finish(norms, b, first, last):
    """norms[b, k] = sqrt(norms[b, k]) for k in [first, last); returns their sum."""
    total = 0.0
    for k in range(first, last):
        norms[b, k] = math.sqrt(norms[b, k])
        total += norms[b, k]
    return total


@_jit()
def _primal_kernel(x_old, step, x_new, z, norms, k, clip):
    total = 0.0
    for b in range(x_old.shape[0]):
        norms[b, 0:2] = 0.0
        _primal_sample(x_old, step, x_new, z, b, k, clip, norms)
        total += _finish(norms, b, 0, 2)
    return total


@_jit()
def _dual_kernel(xa, xb, z_old, z_new, dz, norms, k, kind, store_dz):
    xbar, scratch, inner = _work_space(xa)
    total = 0.0
    for b in range(xa.shape[0]):
        norms[b, 2:4] = 0.0
        _dual_sample(xa, xb, z_old, z_new, dz, b, k, kind, store_dz, norms, xbar, scratch,
                     inner)
        total += _finish(norms, b, 2, 4)
    return total


@_jit()
def _fused_kernel(x_old, step, x_new, z_old, z_new, dz, norms, k, clip, kind,
                  store_dz):
    xbar, scratch, inner = _work_space(x_old)
    total = 0.0
    for b in range(x_old.shape[0]):  # one sample at a time: its arrays stay in L2
        norms[b, :] = 0.0
        _primal_sample(x_old, step, x_new, z_old, b, k, clip, norms)
        _dual_sample(x_new, step, z_old, z_new, dz, b, k, kind, store_dz, norms, xbar, scratch,
                     inner)
        total += _finish(norms, b, 0, 4)
    return total


def _check(images: tuple[np.ndarray, ...], fields: tuple[np.ndarray, ...],
           norms: np.ndarray) -> None:
    """Shapes, dtypes and layout the kernels assume (they index without bounds checks)."""
    first = images[0]
    if first.ndim != 4 or first.dtype not in (np.float32, np.float64):
        raise ValueError(f"images must be float32/float64 (B, L, H, W); got {first.dtype} "
                         f"{first.shape}")
    field_shape = (first.shape[0], 2, *first.shape[1:])
    for a in images + fields:
        want = first.shape if a.ndim == 4 else field_shape
        if a.shape != want or a.dtype != first.dtype or not a.flags.c_contiguous:
            raise ValueError(f"array {a.dtype} {a.shape} (contiguous: {a.flags.c_contiguous}) "
                             f"does not match images {first.dtype} {first.shape}")
    if norms.shape != (first.shape[0], 4) or norms.dtype != np.float64:
        raise ValueError(f"norms must be float64 (B, 4); got {norms.dtype} {norms.shape}")


def primal_step(x_old: np.ndarray, step: np.ndarray, x_new: np.ndarray, z: np.ndarray,
                norms: np.ndarray, scale: float, lo: float = -math.inf,
                hi: float = math.inf) -> float:
    """``step += scale * div z``; ``x_new = clip(x_old + step, lo, hi)`` and, when a bound is
    finite, ``step = x_new - x_old`` (the change actually made); without bounds the step keeps
    its exact low bits (Anderson mixing uses it). norms[:, 0] = ||x_new||, norms[:, 1] =
    ||step||; returns their sum. For PDHG, scale = tau_x alpha (K^T = -div)."""
    _check((x_old, step, x_new), (z,), norms)
    clip = lo > -math.inf or hi < math.inf
    k = _consts(x_old.dtype, scale, 0.0, lo, hi, 1.0, 1.0)
    return _primal_kernel(x_old, step, x_new, z, norms, k, clip)


def dual_step(xa: np.ndarray, xb: np.ndarray, theta: float, z_old: np.ndarray,
              z_new: np.ndarray, dz: np.ndarray | None, norms: np.ndarray, scale: float,
              kind: int = KIND_ISO, shrink: float = 1.0) -> float:
    """``z_new = proj(z_old + scale * grad(xa + theta * xb))`` (proj by ``kind``; ``shrink``
    for KIND_SHRINK) and ``dz = z_new - z_old`` unless dz is None. The extrapolated point
    (PDHG: xa = x+, xb = x+ - x, theta = 1) is formed one sample at a time in scratch (the
    caller needs no buffer for it). norms[:, 2] = ||z_new||, norms[:, 3] = ||z_new - z_old||;
    returns their sum."""
    _check((xa, xb), (z_old, z_new) + (() if dz is None else (dz,)), norms)
    k = _consts(xa.dtype, 0.0, scale, -math.inf, math.inf, shrink, theta)
    return _dual_kernel(xa, xb, z_old, z_new, z_new if dz is None else dz, norms, k, kind,
                        dz is not None)


class PrimalDualKernel:
    """:func:`primal_step` then :func:`dual_step` at x+ + (x+ - x) = 2 x+ - x, one sample at a
    time (the dual part reads the sample's x+ and step while they are still in L2). Bound
    once to the scalars; the arrays are not checked per call (one numba dispatch is the whole
    per-step overhead): check them once with :meth:`check`.

    ``__call__(x_old, step, x_new, z_old, z_new, dz, norms)`` writes all four norms and
    returns their sum; ``dz`` is written only if ``store_dz``."""

    def __init__(self, dtype: DTypeLike, primal_scale: float, dual_scale: float,
                 kind: int, shrink: float = 1.0, lo: float = -math.inf, hi: float = math.inf,
                 store_dz: bool = True) -> None:
        self._k = _consts(dtype, primal_scale, dual_scale, lo, hi, shrink, 1.0)
        self._flags = (lo > -math.inf or hi < math.inf, int(kind), bool(store_dz))

    def __call__(self, x_old: np.ndarray, step: np.ndarray, x_new: np.ndarray,
                 z_old: np.ndarray, z_new: np.ndarray, dz: np.ndarray,
                 norms: np.ndarray) -> float:
        clip, kind, store = self._flags
        return _fused_kernel(x_old, step, x_new, z_old, z_new, dz, norms, self._k, clip, kind,
                             store)

    @staticmethod
    def check(x_old: np.ndarray, step: np.ndarray, x_new: np.ndarray, z_old: np.ndarray,
              z_new: np.ndarray, dz: np.ndarray, norms: np.ndarray) -> None:
        """Raises ValueError unless the arrays fit the kernel (call once per buffer set)."""
        _check((x_old, step, x_new), (z_old, z_new, dz), norms)


def warm_up(dtype: DTypeLike, which: tuple[str, ...] = ("fused", "primal", "dual")) -> float:
    """Compiles (or loads from numba's cache) the kernels named in ``which`` for ``dtype`` on
    tiny arrays, with numba's warnings silenced (a cache it cannot write is not the user's
    concern); returns the seconds it took. Call it before a loop uses a kernel: later calls
    with the same argument types do not compile again. Cold: ~6-11 s per dtype for "fused"
    (2-core machine, loaded), ~1-2 s more for the others; from numba's cache: 0.3-0.8 s for
    the first kernel of a process (numba's own start-up), ~10 ms for each further one."""
    import time

    start = time.perf_counter()
    x0, x1, x2 = (np.zeros((1, 1, 2, 2), dtype=dtype) for _ in range(3))
    z0, z1, z2 = (np.zeros((1, 2, 1, 2, 2), dtype=dtype) for _ in range(3))
    norms = np.zeros((1, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numba.NumbaWarning)
        if "fused" in which:
            PrimalDualKernel(dtype, 1.0, 1.0, KIND_ISO)(x0, x1, x2, z0, z1, z2, norms)
        if "primal" in which:
            primal_step(x0, x1, x2, z0, norms, 1.0)
        if "dual" in which:
            dual_step(x0, x1, 1.0, z0, z1, z2, norms, 1.0)
    return time.perf_counter() - start
