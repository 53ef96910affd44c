"""scaled(): the map u -> g W u + beta b of an affine map u -> W u + b.

Used to rescale a lifted network's hidden states exactly (lbi_engine/models/rescale.py,
MATH.md §5.7): a state multiplied by c needs the maps that read it divided by c and the maps
that write it (weights and biases) multiplied by c. Where a map has weights (Linear, Conv2d,
ConvTranspose2d, a ScaleShift) the gain goes into them, so the solvers' fast paths still see
the same kinds of maps at the same cost; a weightless map (pooling, reshape, a channel slot)
gets a scalar ScaleShift after it instead.
"""

from __future__ import annotations

import copy

import torch

from lbi_engine.operators import AffineMap, ComposedMap, LinearMap, ScaleShiftMap
from lbi_engine.operators.conv import Conv2dMap, ConvTranspose2dMap

__all__ = ["scaled"]

_WEIGHTED = (LinearMap, Conv2dMap, ConvTranspose2dMap)


def _carry_norm(new: AffineMap, old: AffineMap, gain: float) -> AffineMap:
    """||g W|| = |g| ||W||: keep a computed norm instead of computing it again."""
    known = old.known_norm
    new.keep_norm(None if known is None else abs(gain) * known,
                  old.norm_method if known is not None else None)
    return new


def scaled(amap: AffineMap, gain: float, bias_gain: float) -> AffineMap:
    """A map u -> gain * W u + bias_gain * b equal to ``amap`` = (W, b) up to rounding.

    Returns ``amap`` itself when nothing changes (gain 1 and no bias, or both gains 1).
    """
    gain, bias_gain = float(gain), float(bias_gain)
    if gain == 1.0 and (bias_gain == 1.0 or amap.bias is None):
        return amap
    bias = None if amap.bias is None else amap.bias * bias_gain
    if isinstance(amap, _WEIGHTED):
        weighted = copy.copy(amap)
        weighted.weight = amap.weight * gain
        weighted.bias = bias
        return _carry_norm(weighted, amap, gain)
    if isinstance(amap, ScaleShiftMap):
        diagonal = copy.copy(amap)
        diagonal.scale = amap.scale * gain
        diagonal.bias = bias
        return _carry_norm(diagonal, amap, gain)
    if isinstance(amap, ComposedMap):
        maps = amap.maps
        k = next((i for i, m in enumerate(maps) if isinstance(m, (*_WEIGHTED, ScaleShiftMap))),
                 None)
        # W = W_n .. W_k .. W_1: the gain goes into W_k, the bias gain into every bias from
        # W_k on (the maps before W_k carry no bias, so g W_k ... applies to all of them)
        if k is not None and all(m.bias is None for m in maps[:k]):
            parts = [*maps[:k], scaled(maps[k], gain, bias_gain),
                     *(scaled(m, 1.0, bias_gain) for m in maps[k + 1:])]
            return _carry_norm(ComposedMap(parts), amap, gain)
    # g (W u + b) + (beta - g) b = g W u + beta b: a scalar ScaleShift after the map
    dtype = amap.dtype or torch.float64  # a 0-d tensor: float32 maps stay float32
    device = amap.device or torch.device("cpu")
    shift = None if amap.bias is None or bias_gain == gain else amap.bias * (bias_gain - gain)
    after = ScaleShiftMap(amap.out_shape, torch.tensor(gain, dtype=dtype, device=device), shift)
    return _carry_norm(ComposedMap([amap, after]), amap, gain)
