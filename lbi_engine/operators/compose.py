"""compose(): one simplified AffineMap for a run of affine layers.

It lives apart from :mod:`lbi_engine.operators` because folding a BatchNorm or a zero padding
into a convolution needs the convolution maps (:mod:`lbi_engine.operators.conv`), which in
turn build on the basic maps; keeping compose here makes the direction one-way
(operators <- operators.conv <- operators.compose) instead of a circle.
"""

from __future__ import annotations

from collections.abc import Sequence

from lbi_engine.operators import (
    AffineMap,
    ComposedMap,
    IdentityMap,
    ReshapeMap,
    ScaleShiftMap,
)
from lbi_engine.operators.conv import fold_channel_affine, fold_pad_into_conv

__all__ = ["compose"]


def compose(maps: Sequence[AffineMap], fold: bool = True) -> AffineMap:
    """One map for a run of affine layers, simplified.

    Nested compositions are flattened, identities dropped, consecutive reshapes merged and,
    with ``fold``, a per-channel ScaleShift (eval BatchNorm) right after a Linear/Conv2d/
    ConvTranspose2d is folded into that layer's weights, and a zero padding right before a
    Conv2d into its pads (one kernel call fewer per apply).
    """
    if not maps:
        raise ValueError("compose() needs at least one map.")
    flat: list[AffineMap] = []
    for m in maps:
        flat.extend(m.maps if isinstance(m, ComposedMap) else [m])
    out: list[AffineMap] = []
    for m in flat:
        if isinstance(m, IdentityMap):
            continue
        prev = out[-1] if out else None
        if isinstance(m, ReshapeMap) and isinstance(prev, ReshapeMap):
            out[-1] = ReshapeMap(prev.in_shape, m.out_shape, kind=prev.kind)
            continue
        if fold and prev is not None:
            folded = fold_channel_affine(prev, m) if isinstance(m, ScaleShiftMap) else \
                fold_pad_into_conv(prev, m)
            if folded is not None:
                out[-1] = folded
                continue
        out.append(m)
    out = [m for m in out if not (isinstance(m, ReshapeMap) and m.in_shape == m.out_shape)]
    if not out:
        return IdentityMap(flat[0].in_shape)
    return out[0] if len(out) == 1 else ComposedMap(out)
