"""FISTA's momentum with the gradient restart: the one rule every accelerated method uses.

    t_{k+1} = (1 + sqrt(1 + 4 t_k^2)) / 2,   y_{k+1} = x_{k+1} + coef (x_{k+1} - x_k),
    coef = (t_k - 1) / t_{k+1},

restarted per sample (O'Donoghue & Candès 2015, gradient scheme) where the step points
uphill, <y_k - x_{k+1}, x_{k+1} - x_k> > 0: then coef = 0 and t_{k+1} = 1, so the next
coefficient is 0 too and momentum builds up again from scratch. The restart keeps the
iteration close to monotone and gives the linear rate near a solution.

Two forms of the same rule: :class:`Momentum` holds per-sample tensors (a batch, any device),
updated in place so that views of ``coef`` stay valid; :class:`ScalarMomentum` holds Python
floats rounded to the iterate's dtype for one sample on the CPU, where each tiny tensor
operation would cost as much as a 784-entry one. Both take t_{k+1} from :func:`next_t`.
The plain t-sequence without restart (:func:`next_t` alone) is FGP's, in the TV prox
(``regularisers._tv_prox`` and its compiled twin ``regularisers._fgp_kernel``); the Gaussian
prior's box prox (``regularisers._gaussian``) is FISTA with this restart. Lives below the
regularisers and the solvers, which both use it.
Used by the accelerated one-layer method (``one_layer.accelerated``), the joint method
(``joint.fista``, and its compiled step ``joint.compiled_step``) and the layer-wise method's
feature stages (``_feature_stage``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import TypeVar

import torch
from torch import Tensor

_T = TypeVar("_T", float, Tensor)


def next_t(t: _T, sqrt: Callable[[_T], _T] = math.sqrt) -> _T:  # type: ignore[assignment]
    """t_{k+1} = (1 + sqrt(1 + 4 t_k^2)) / 2 (``sqrt``: math.sqrt for a float, torch.sqrt for
    a tensor). Compiled as it stands where a numba kernel needs it (``backend.jit()(next_t)``,
    called with one argument: the FGP kernel of ``regularisers._fgp_kernel``)."""
    return 0.5 * (1.0 + sqrt(1.0 + 4.0 * t * t))


class Momentum:
    """t_k and the last coefficient per sample, ``(B,)`` tensors updated in place."""

    def __init__(self, batch: int, like: Tensor, state: Tensor | None = None) -> None:
        """``state``: ``[t; coef]`` (2, B) from :attr:`state` of an earlier run (a warm
        start continues the same sequence)."""
        self.t = torch.ones(batch, dtype=like.dtype, device=like.device)
        self.coef = torch.zeros_like(self.t)
        if state is not None:
            self.t.copy_(state[0])
            self.coef.copy_(state[1])
        self._restarts = torch.zeros(batch, dtype=torch.int64, device=like.device)

    @property
    def state(self) -> Tensor:
        """``[t; coef]``, shape (2, B): with the previous iterate the whole momentum."""
        return torch.stack((self.t, self.coef))

    @property
    def restarts(self) -> int:
        """Restarts so far, summed over the samples."""
        return int(self._restarts.sum())

    def advance(self, restart: Tensor) -> Tensor:
        """The next coefficient per sample (also left in :attr:`coef`); ``restart``: (B,)
        bool, True where the step pointed uphill."""
        t_next = next_t(self.t, torch.sqrt)
        torch.div(self.t - 1.0, t_next, out=self.coef)
        self.coef.masked_fill_(restart, 0.0)
        torch.where(restart, torch.ones_like(t_next), t_next, out=self.t)
        self._restarts += restart
        return self.coef


class ScalarMomentum:
    """The same rule for one sample on Python floats, rounded to ``dtype`` after each
    operation so that :attr:`state` continues a run exactly."""

    def __init__(self, dtype: torch.dtype, t: float = 1.0, coef: float = 0.0) -> None:
        self.round: Callable[[float], float] = float if dtype == torch.float64 else _round32
        self.t, self.coef = t, coef
        self.restarts = 0

    def state_on(self, like: Tensor) -> Tensor:
        """``[t; coef]``, shape (2, 1), in ``like``'s dtype and device."""
        return torch.tensor([[self.t], [self.coef]], dtype=like.dtype, device=like.device)

    def advance(self, restart: bool) -> float:
        """The next coefficient (also left in :attr:`coef`)."""
        t_next = self.round(next_t(self.t, math.sqrt))
        if restart:
            self.restarts += 1
            coef, t_next = 0.0, 1.0
        else:
            coef = self.round((self.t - 1.0) / t_next)
        self.t, self.coef = t_next, coef
        return coef


_FLOAT32 = struct.Struct("f")


def _round32(v: float) -> float:
    return float(_FLOAT32.unpack(_FLOAT32.pack(v))[0])
