"""Discrete gradient, divergence and total variation on images (MATH.md §4.1).

Forward differences with Neumann boundary on the last two dims of ``(B, H, W)`` or
``(B, C, H, W)`` (further leading dims are treated like channels). The gradient has shape
``(B, 2, *image_shape)``: direction first, so a pixel's vector (2 directions x C channels) is
everything between the batch dim and (H, W). Shared by the regularisers and the metrics.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F

from lbi_engine.errors import InputError


def check_image(x: Tensor, what: str = "x") -> None:
    """Raise InputError unless x is a tensor with a batch dim and two image dims."""
    if not isinstance(x, Tensor) or x.ndim < 3:
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise InputError(
            f"{what} has shape {shape}; image regularisers need (B, H, W) or (B, C, H, W). "
            "Reshape flat vectors to the image shape first (a 1-D signal as (B, 1, N))."
        )


def grad(x: Tensor) -> Tensor:
    """Forward differences with Neumann boundary: ``(B, *lead, H, W) -> (B, 2, *lead, H, W)``.

    The last row (column) difference is 0, which also covers H = 1 (W = 1): that component
    is identically 0. Built from diff + pad (no in-place writes) so autograd works through it.
    """
    gh = F.pad(torch.diff(x, dim=-2), (0, 0, 0, 1))
    gw = F.pad(torch.diff(x, dim=-1), (0, 1))
    return torch.stack((gh, gw), dim=1)


def div(p: Tensor) -> Tensor:
    """Divergence ``div = -grad^T``: ``(B, 2, *lead, H, W) -> (B, *lead, H, W)``.

    The unused entries p^1[H-1, :] and p^2[:, W-1] (those grad sets to 0) are ignored,
    exactly as in the adjoint.
    """
    ph = p[:, 0, ..., :-1, :]
    pw = p[:, 1, ..., :, :-1]
    return (F.pad(ph, (0, 0, 0, 1)) - F.pad(ph, (0, 0, 1, 0))
            + F.pad(pw, (0, 1)) - F.pad(pw, (1, 0)))


def grad_norm_sq(shape: tuple[int, ...]) -> float:
    """||grad||_2^2 = 4 sin^2(pi (H-1) / 2H) + 4 sin^2(pi (W-1) / 2W) for the last two dims.

    Channels do not change it (grad acts on each channel separately). H = 1 gives 0 for that
    term, matching the vanishing difference.
    """
    if len(shape) < 2:
        raise InputError(f"x_shape {tuple(shape)}: need at least (H, W) for the gradient norm.")
    h, w = int(shape[-2]), int(shape[-1])
    return 4.0 * math.sin(math.pi * (h - 1) / (2 * h)) ** 2 + \
        4.0 * math.sin(math.pi * (w - 1) / (2 * w)) ** 2


def _group_dims(g: Tensor) -> tuple[int, ...]:
    """Dims of a gradient tensor that form one pixel's vector: the 2 directions and channels."""
    return tuple(range(1, g.ndim - 2))


def _safe_sqrt(s: Tensor) -> Tensor:
    """sqrt with gradient 0 (not NaN) at 0, so autograd through TV is usable everywhere."""
    pos = s > 0
    return torch.where(pos, torch.where(pos, s, torch.ones_like(s)).sqrt(), torch.zeros_like(s))


def pixel_norm(g: Tensor, keepdim: bool = False) -> Tensor:
    """Pixelwise Euclidean norm of a gradient field over its 2*C components: ``(B, H, W)``
    (``keepdim``: ``(B, 1, ..., 1, H, W)``, broadcastable against g)."""
    return _safe_sqrt((g * g).sum(dim=_group_dims(g), keepdim=keepdim))


def tv_iso_value(x: Tensor) -> Tensor:
    """Isotropic TV (channels coupled), ``(B,)``."""
    check_image(x)
    return pixel_norm(grad(x)).flatten(1).sum(dim=1)


def tv_aniso_value(x: Tensor) -> Tensor:
    """Anisotropic TV ||grad x||_1, ``(B,)``."""
    check_image(x)
    return grad(x).abs().flatten(1).sum(dim=1)


# -- allocation-free grad/div for iterative solvers ----------------------------------------------
# PDHG applies grad and div once per iteration to arrays of a few thousand pixels, where the
# cost of a torch call and of creating view objects dominates the arithmetic
# (docs/developer/calibration.md). Working on the flattened image (H*W) turns both
# directions into differences of *contiguous* slices (offset W for rows, 1 for columns),
# and creating those slices once per buffer removes the view overhead. The column
# difference across a row boundary is wrong in flat indexing, so grad zeroes column W-1
# of its second component afterwards; div relies on the
# same entries (and the last row of the first component) being 0, which grad guarantees and
# :func:`zero_unused` restores for a dual variable from elsewhere.


def flat_image(t: Tensor, image_shape: tuple[int, ...]) -> Tensor:
    """View of a contiguous ``(B, *image_shape)`` tensor as ``(B, lead, H*W)``."""
    h, w = int(image_shape[-2]), int(image_shape[-1])
    return t.view(t.shape[0], -1, h * w)


def flat_field(p: Tensor, image_shape: tuple[int, ...]) -> Tensor:
    """View of a contiguous gradient field ``(B, 2, *image_shape)`` as ``(B, 2, lead, H*W)``."""
    h, w = int(image_shape[-2]), int(image_shape[-1])
    return p.view(p.shape[0], 2, -1, h * w)


def zero_unused(p: Tensor, image_shape: tuple[int, ...]) -> Tensor:
    """Sets the entries of a gradient field that grad never writes (and div ignores) to 0:
    the last row of the first component and the last column of the second. In place."""
    p[:, 0, ..., -1, :] = 0
    p[:, 1, ..., :, -1] = 0
    return p


class GradInto:
    """``out = grad(x)`` for two fixed contiguous buffers, without allocating.

    ``x``: ``(B, *image_shape)``; ``out``: ``(B, 2, *image_shape)``. Equal to :func:`grad`
    (including the zero last row / column), see tests/engine/test_regularisers.py.
    """

    def __init__(self, x: Tensor, out: Tensor, image_shape: tuple[int, ...]) -> None:
        w = int(image_shape[-1])
        xf, pf = flat_image(x, image_shape), flat_field(out, image_shape)
        self._rows = (xf[..., w:], xf[..., :-w], pf[:, 0, :, :-w])
        self._cols = (xf[..., 1:], xf[..., :-1], pf[:, 1, :, :-1])
        self._last_col = out[:, 1, ..., :, -1]
        out[:, 0, ..., -1, :] = 0  # never written below

    def __call__(self) -> None:
        hi, lo, dst = self._rows
        torch.sub(hi, lo, out=dst)
        hi, lo, dst = self._cols
        torch.sub(hi, lo, out=dst)
        self._last_col.zero_()


class DivAdd:
    """``x += scale * div(p)`` for two fixed contiguous buffers, without allocating.

    Requires the unused entries of ``p`` to be 0 (see :func:`zero_unused`); fields produced by
    :class:`GradInto` and scaled/projected pixelwise keep that property.
    """

    def __init__(self, p: Tensor, x: Tensor, image_shape: tuple[int, ...]) -> None:
        w = int(image_shape[-1])
        xf, pf = flat_image(x, image_shape), flat_field(p, image_shape)
        self._x = xf
        self._p = (pf[:, 0], pf[:, 1])
        self._shifted = ((xf[..., w:], pf[:, 0, :, :-w]), (xf[..., 1:], pf[:, 1, :, :-1]))

    def __call__(self, scale: float) -> None:
        x = self._x
        x.add_(self._p[0], alpha=scale)
        x.add_(self._p[1], alpha=scale)
        for dst, src in self._shifted:
            dst.sub_(src, alpha=scale)
