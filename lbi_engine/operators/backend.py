"""The engine's compiled backend: the one numba switch and the one ``jit`` decorator.

It lives below the regularisers and the solvers (both import it; the regularisers may not
import the solvers). Every numba path asks :func:`numba_enabled` before it is taken: the
compiled TV prox that TV regularisers build at construction (``regularisers._fgp_kernel``,
used by the accelerated one-layer and joint methods), and every module of
``solvers.kernels``: the joint method's compiled step, convolutions and Bregman sums, and the
fused TV kernels of the Condat–Vũ step. ``LBI_NO_NUMBA=1`` turns all of
them off, and so does a numba that does not import: the torch paths then compute the same
iterates to rounding (tests, and machines where numba misbehaves). ``LBI_FUSED_TV``
(:func:`fused_tv_mode`, read here beside it) chooses, among numba paths, whether the
Condat–Vũ step is fused (``one_layer.inplace``).

This module does not import numba itself (about 0.3-1 s): ``jit`` imports it when a kernel
module is decorated, and kernel modules are imported only when about to be used.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:  # generic only in numba's stubs, not at run time
    from numba.core.dispatcher import Dispatcher

_F = TypeVar("_F", bound=Callable[..., Any])

NO_NUMBA_ENV = "LBI_NO_NUMBA"
FUSED_TV_ENV = "LBI_FUSED_TV"

#: ``fastmath=True`` of :func:`jit`: numba's fast-math flags without "nnan"/"ninf", so a
#: diverging run still produces NaN/inf for the divergence test and comparisons see them.
FAST = frozenset({"reassoc", "nsz", "arcp", "contract", "afn"})


def numba_enabled() -> bool:
    """Whether the solvers may use their numba kernels: ``LBI_NO_NUMBA`` unset (or "0") and
    numba importable. Read on every call, so a test or a caller can switch it per run."""
    if os.environ.get(NO_NUMBA_ENV, "").strip() not in ("", "0"):
        return False
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def fused_tv_mode() -> str:
    """``LBI_FUSED_TV``, which of the numba paths the Condat–Vũ step takes: "0" never the
    fused TV kernels, "1" whenever they apply (any size), unset or anything else: "auto"
    (from ``one_layer.inplace.FUSED_TV_MIN_PIXELS`` pixels per step)."""
    value = os.environ.get(FUSED_TV_ENV, "").strip()
    return {"0": "off", "1": "on"}.get(value, "auto")


def jit(fastmath: bool | set[str] | frozenset[str] = False,
        error_model: Literal["python", "numpy"] = "python") -> Callable[[_F], Dispatcher[_F]]:
    """``numba.njit(nogil=True)`` with numba's on-disk cache where a cache directory is
    usable, without it otherwise (a read-only install, a frozen app: numba raises at
    decoration when no cache locator works).

    ``fastmath``: False (float rounding as the torch path), True (:data:`FAST`) or a set of
    flags. ``error_model="numpy"``: IEEE division (x / 0 = inf, as torch) instead of Python's
    ZeroDivisionError check, whose branch can keep division loops from vectorising.

    The kernels are left unannotated on purpose: numba types them from each call's arguments
    (float32 or float64 arrays), and mypy does not check unannotated bodies."""
    import numba

    flags: bool | set[str] = set(FAST) if fastmath is True else \
        (set(fastmath) if fastmath else False)

    def decorate(func: _F) -> Dispatcher[_F]:
        try:
            return numba.njit(cache=True, nogil=True, fastmath=flags,
                              error_model=error_model)(func)
        except RuntimeError:
            return numba.njit(cache=False, nogil=True, fastmath=flags,
                              error_model=error_model)(func)

    return decorate
