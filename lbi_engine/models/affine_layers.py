"""From affine torch modules to AffineMaps: Linear, Conv2d, ConvTranspose2d, the average
poolings, BatchNorm (eval), reshapes, paddings, Dropout (eval), Identity and ScaleShift, each
into its map (MATH.md §2), or a refusal naming the layer when its state cannot be lifted.
:mod:`lbi_engine.models.layer_lifting` calls this for every leaf before it tries an activation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from lbi_engine.errors import ShapeMismatchError
from lbi_engine.models._layer_refusals import layer_label, refuse
from lbi_engine.operators import (
    AffineMap,
    IdentityMap,
    LinearMap,
    PadMap,
    Reshape,
    ReshapeMap,
    ScaleShift,
    ScaleShiftMap,
)
from lbi_engine.operators._base import _shape
from lbi_engine.operators.compose import compose
from lbi_engine.operators.conv import (
    AdaptiveAvgPool2dMap,
    AvgPool2dMap,
    Conv2dMap,
    ConvTranspose2dMap,
)


def _detach(t: Tensor | None) -> Tensor | None:
    return None if t is None else t.detach().clone()


def _meta_shape(in_shape: tuple[int, ...], fn: Any) -> tuple[int, ...]:
    """Shape of fn(batch of 2) computed on the meta device (no data touched)."""
    return tuple(fn(torch.empty((2, *in_shape), device="meta")).shape)


def _broadcasts_to(small: Sequence[int], shape: tuple[int, ...]) -> bool:
    """Whether a tensor of shape ``small`` broadcasts to ``shape`` without changing it
    (torch.broadcast_shapes costs 0.5 s on its first call: it imports the symbolic-shape code)."""
    return len(small) <= len(shape) and all(
        a in (1, b) for a, b in zip(reversed(tuple(small)), reversed(shape), strict=False))


def _batchnorm_map(m: nn.modules.batchnorm._BatchNorm, in_shape: tuple[int, ...], name: str,
                   position: int) -> AffineMap:
    if m.training:
        refuse(name, m, position, "in training mode BatchNorm normalises with the statistics of "
               "the current batch, which is not an affine map of one sample",
               "Call model.eval() before lifting; in eval mode it folds into W and b.")
    if m.running_mean is None or m.running_var is None:
        refuse(name, m, position, "it was built with track_running_stats=False, so it uses batch "
               "statistics even in eval mode", "Re-create it with track_running_stats=True and "
               "retrain, or replace it by a fixed ScaleShift.")
    c = m.num_features
    if not in_shape or in_shape[0] != c:
        raise ShapeMismatchError(f"{layer_label(name, m, position)} expects {c} channels in the "
                                 f"first sample dim but receives samples of shape {in_shape}.")
    var, mean = m.running_var.detach(), m.running_mean.detach()
    scale = torch.rsqrt(var + m.eps)
    if m.weight is not None:
        scale = scale * m.weight.detach()
    shift = -mean * scale
    if m.bias is not None:
        shift = shift + m.bias.detach()
    view = (c,) + (1,) * (len(in_shape) - 1)
    return ScaleShiftMap(in_shape, scale.reshape(view).clone(), shift.reshape(view).clone(),
                         kind="BatchNorm", channel_wise=True)


def _conv2d_map(m: nn.Conv2d, in_shape: tuple[int, ...], name: str, position: int) -> AffineMap:
    if m.padding_mode != "zeros":
        refuse(name, m, position, f"padding_mode='{m.padding_mode}' is not implemented (only "
               "zero padding is)", "Use padding_mode='zeros' (the default) and retrain, or pad "
               "the input yourself before inversion.")
    if len(in_shape) != 3:
        raise ShapeMismatchError(f"{layer_label(name, m, position)} needs (C, H, W) samples; it "
                                 f"receives samples of shape {in_shape}.")
    (kh, kw), (dh, dw) = m.kernel_size, m.dilation
    if m.padding == "valid":
        pads: tuple[int, ...] = (0, 0, 0, 0)
    elif m.padding == "same":  # torch puts the odd extra pixel at the bottom/right
        th, tw = dh * (kh - 1), dw * (kw - 1)
        pads = (th // 2, th - th // 2, tw // 2, tw - tw // 2)
    else:
        assert not isinstance(m.padding, str)  # torch accepts no other padding strings
        ph, pw = m.padding
        pads = (ph, ph, pw, pw)
    return Conv2dMap(m.weight.detach().clone(), _detach(m.bias), in_shape, m.stride, pads,
                     m.dilation, m.groups)


def affine_map_of_module(m: nn.Module, in_shape: Sequence[int], name: str = "",
                         position: int = 0, require: bool = False) -> AffineMap | None:
    """The AffineMap of an affine layer; None for a non-affine one (unless ``require``).

    Raises UnsupportedLayerError for affine layers in a state that cannot be lifted
    (training-mode Dropout/BatchNorm, padding_mode != 'zeros') and, with ``require``, for
    every non-affine module.
    """
    shape = tuple(int(s) for s in in_shape)
    name = name or type(m).__name__
    if isinstance(m, nn.Linear):
        return LinearMap(m.weight.detach().clone(), _detach(m.bias), shape)
    if isinstance(m, nn.Conv2d):
        return _conv2d_map(m, shape, name, position)
    if isinstance(m, nn.ConvTranspose2d):
        if m.padding_mode != "zeros":
            refuse(name, m, position, f"padding_mode='{m.padding_mode}' is not implemented",
                   "Use padding_mode='zeros'.")
        assert not isinstance(m.padding, str)  # ConvTranspose2d takes no padding strings
        return ConvTranspose2dMap(m.weight.detach().clone(), _detach(m.bias), shape, m.stride,
                                  m.padding, m.output_padding, m.dilation, m.groups)
    if isinstance(m, nn.AvgPool2d):
        if len(shape) != 3:
            raise ShapeMismatchError(f"{layer_label(name, m, position)} needs (C, H, W) samples; "
                                     f"it receives samples of shape {shape}.")
        return AvgPool2dMap(shape, m.kernel_size, m.stride, m.padding, m.ceil_mode,
                            m.count_include_pad, m.divisor_override)
    if isinstance(m, nn.AdaptiveAvgPool2d):
        if len(shape) != 3:
            raise ShapeMismatchError(f"{layer_label(name, m, position)} needs (C, H, W) samples; "
                                     f"it receives samples of shape {shape}.")
        # None: keep the input size (torch's meaning of a None entry)
        size = (None, None) if m.output_size is None else m.output_size
        return AdaptiveAvgPool2dMap(shape, size)
    if isinstance(m, nn.modules.batchnorm._BatchNorm):
        return _batchnorm_map(m, shape, name, position)
    if isinstance(m, (nn.Flatten, nn.Unflatten, Reshape)):
        out = _meta_shape(shape, m)
        if out[0] != 2:
            refuse(name, m, position, "it merges the batch dimension into the sample",
                   "Use nn.Flatten() (start_dim=1), which keeps the batch dimension.")
        return ReshapeMap(shape, out[1:], kind=type(m).__name__)
    if isinstance(m, nn.Identity):
        return IdentityMap(shape)
    if isinstance(m, nn.modules.dropout._DropoutNd):
        if m.training and m.p > 0:
            refuse(name, m, position, "in training mode dropout zeroes random entries, which is "
                   "not a fixed map", "Call model.eval() before lifting; in eval mode dropout is "
                   "the identity.")
        return IdentityMap(shape)
    if isinstance(m, (nn.ZeroPad2d, nn.ConstantPad2d)):
        if isinstance(m, nn.ConstantPad2d) and m.value != 0:
            refuse(name, m, position, f"constant padding with value {m.value} is not implemented",
                   "Use nn.ZeroPad2d.")
        return PadMap(shape, m.padding)
    if isinstance(m, ScaleShift):
        scale, shift = m.scale.detach().clone(), m.shift.detach().clone()
        if not (_broadcasts_to(scale.shape, shape) and _broadcasts_to(shift.shape, shape)):
            raise ShapeMismatchError(f"{layer_label(name, m, position)}: scale {tuple(scale.shape)}"
                                     f" / shift {tuple(shift.shape)} do not broadcast to the "
                                     f"sample shape {shape}.")
        return ScaleShiftMap(shape, scale, shift)
    if require:
        refuse(name, m, position, "it is not an affine layer", "Affine layers are Linear, Conv2d, "
               "ConvTranspose2d, AvgPool2d, AdaptiveAvgPool2d, BatchNorm (eval), Flatten, "
               "Unflatten, ZeroPad2d, Dropout (eval) and Identity.")
    return None


def affine_from_modules(modules: Sequence[nn.Module], in_shape: Sequence[int]) -> AffineMap:
    """Compose consecutive affine layers (Linear, Conv2d, BatchNorm (eval), ...) into one map.

    Raises UnsupportedLayerError for a module that is not affine (with the reason and the
    nearest supported alternative).
    """
    shape = _shape(in_shape)
    maps: list[AffineMap] = []
    for i, m in enumerate(modules):
        amap = affine_map_of_module(m, shape, name=str(i), position=i, require=True)
        assert amap is not None  # require=True refuses instead of returning None
        maps.append(amap)
        shape = amap.out_shape
    return compose(maps) if maps else IdentityMap(shape)
