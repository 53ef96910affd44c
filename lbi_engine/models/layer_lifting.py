"""From torch modules to lifted pieces: an AffineMap, a ProximalActivation, or a clear refusal.

A network can be lifted when it is a chain x -> sigma_L(W_L ... sigma_1(W_1 x + b_1) ... + b_L)
whose sigmas are proximal maps (MATH.md §2). This room decides, module by module, which of
the two a layer is, and otherwise says why it cannot be lifted and what to use instead. It
also walks a module into a flat list of layers: nested nn.Sequential directly, any other
module through torch.fx (:mod:`lbi_engine.models.fx_chain`), running a zero batch alongside so every
layer's input/output shape is known.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import torch
from torch import Tensor, nn

from lbi_engine.errors import ShapeMismatchError, UnsupportedLayerError
from lbi_engine.models._leaf_modules import LiftedActivation, is_leaf
from lbi_engine.models.fx_chain import walk_fx
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

_MAXPOOL_HINT = ("MaxPool2d itself is lifted by its exact rewrite with ReLUs, max(a, b) = "
                 "ReLU(a - b) + ReLU(b) - ReLU(-b) (MATH.md §2.5); nearest alternatives: "
                 "nn.MaxPool2d, or nn.AvgPool2d with the same kernel and stride (affine, merged "
                 "into W).")

# (module types, why it cannot be lifted, nearest supported alternative)
_REFUSALS: list[tuple[tuple[type, ...], str, str]] = [
    ((nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d,
      nn.AdaptiveMaxPool3d, nn.FractionalMaxPool2d, nn.FractionalMaxPool3d, nn.MaxUnpool2d),
     "max-pooling keeps the largest value of each window; it is neither affine nor a proximal "
     "map (it does not even map R^n to itself)"
     " (an adaptive max-pool is lifted when its output size divides its input size)",
     _MAXPOOL_HINT),
    ((nn.LPPool1d, nn.LPPool2d),
     "power-average pooling is nonlinear and not a proximal map",
     "Nearest alternative: nn.AvgPool2d."),
    ((nn.RNNBase, nn.RNNCellBase),
     "recurrent layers feed their state back into themselves, so the network is not a "
     "feed-forward chain of affine maps and proximal activations",
     "Nearest alternative: unroll a fixed number of steps into Linear + Tanh/Sigmoid layers."),
    ((nn.MultiheadAttention, nn.Transformer, nn.TransformerEncoder, nn.TransformerDecoder,
      nn.TransformerEncoderLayer, nn.TransformerDecoderLayer),
     "attention multiplies activations with each other (softmax(Q K^T) V), which is not affine, "
     "and has residual branches",
     "Nearest alternative: Linear layers with proximal activations (e.g. ReLU, Softmax)."),
    ((nn.LayerNorm, nn.GroupNorm, nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d,
      nn.LocalResponseNorm, nn.RMSNorm),
     "it normalises with statistics of each input sample, so it is not an affine map",
     "Nearest alternative: BatchNorm in eval mode (model.eval()), which folds into W and b."),
    ((nn.Embedding, nn.EmbeddingBag),
     "it takes integer indices, not real vectors", "Feed one-hot vectors into nn.Linear instead."),
    ((nn.Bilinear,), "it multiplies two inputs with each other, which is not affine",
     "Nearest alternative: nn.Linear on the concatenated input."),
    ((nn.Upsample, nn.UpsamplingNearest2d, nn.UpsamplingBilinear2d, nn.PixelShuffle,
      nn.PixelUnshuffle),
     "resampling layers are not implemented as affine maps in lbi",
     "Nearest alternative: nn.ConvTranspose2d with stride equal to the scale factor."),
    ((nn.Conv1d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose3d, nn.AvgPool1d, nn.AvgPool3d,
      nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool3d),
     "only 2-D convolutions and poolings are implemented",
     "Nearest alternative: the 2-D layer (Conv2d/AvgPool2d) on (C, H, W) samples, or "
     "nn.Linear on flattened samples."),
    ((nn.ModuleList, nn.ModuleDict, nn.ParameterList, nn.ParameterDict),
     "a container without a forward cannot be called as a layer",
     "Put the layers in an nn.Sequential."),
]


def layer_label(name: str, module: nn.Module, position: int) -> str:
    """``Layer 'features.3' (MaxPool2d, position 3)``: how every message names a layer."""
    return f"Layer '{name}' ({type(module).__name__}, position {position})"


def refuse(name: str, module: nn.Module, position: int, why: str,
           alternative: str) -> NoReturn:
    raise UnsupportedLayerError(f"{layer_label(name, module, position)} cannot be lifted: "
                                f"{why}. {alternative}")


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


def refusal_for_type(cls: type) -> tuple[str, str] | None:
    """(why, alternative) when modules of this class are refused outright, else None."""
    for types, why, alternative in _REFUSALS:
        if issubclass(cls, types):
            return why, alternative
    return None


def lift_module(m: nn.Module, in_shape: Sequence[int], name: str, position: int) -> Any:
    """AffineMap or ProximalActivation for one leaf module; UnsupportedLayerError otherwise."""
    from lbi_engine.activations import activation_from_module

    if isinstance(m, LiftedActivation):
        return m.activation
    amap = affine_map_of_module(m, in_shape, name, position)
    if amap is not None:
        return amap
    found = refusal_for_type(type(m))
    if found is not None:
        refuse(name, m, position, *found)
    try:
        act = activation_from_module(m)
    except UnsupportedLayerError as exc:
        raise UnsupportedLayerError(f"{layer_label(name, m, position)}: {exc}") from exc
    if act is None:
        refuse(name, m, position, "it is neither a known affine layer nor a proximal "
               "activation", "Supported: Linear, Conv2d, ConvTranspose2d, AvgPool2d, "
               "AdaptiveAvgPool2d, BatchNorm (eval), Flatten/Unflatten, Dropout (eval), "
               "Identity, and the activations of lbi_engine.activations (ReLU, LeakyReLU, "
               "Sigmoid, Tanh, Softplus, Hardtanh, ELU, Softmax, ...). If its forward is a chain "
               "of such layers, write it as an nn.Sequential")
    return act


@dataclass
class LayerEntry:
    """One leaf layer of the walked module, with its lifted form and sample shapes."""

    name: str
    module: nn.Module
    position: int
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    lifted: Any  # AffineMap | ProximalActivation


class ModuleWalker:
    """Flattens a module into LayerEntry objects, pushing a zero batch of 2 through it.

    Every leaf is checked (and refused if needed) *before* it runs, so a training-mode
    BatchNorm never updates its running statistics here.
    """

    def __init__(self, example: Tensor) -> None:
        self.entries: list[LayerEntry] = []
        self.x = example
        #: the MaxPool2d layers written as ReLU layers: name, geometry, lifted layers added
        self.rewrites: list[dict[str, Any]] = []
        self._nonneg = False  # the current output is known to be >= 0

    def add(self, name: str, module: nn.Module) -> Tensor:
        from lbi_engine.models.maxpool_relu import REWRITE_MAXPOOL

        if isinstance(module, nn.AdaptiveMaxPool2d) and self.x.dim() == 4:
            from lbi_engine.models.maxpool_relu import as_max_pool

            module = as_max_pool(module, (int(self.x.shape[2]), int(self.x.shape[3])))
        if isinstance(module, nn.MaxPool2d) and REWRITE_MAXPOOL.get():
            return self._add_maxpool(module, name)
        pos = len(self.entries)
        in_shape = tuple(self.x.shape[1:])
        try:
            lifted = lift_module(module, in_shape, name, pos)
        except ShapeMismatchError as exc:
            if str(exc).startswith("Layer '"):
                raise
            raise ShapeMismatchError(f"{layer_label(name, module, pos)}: {exc}") from exc
        try:
            with torch.no_grad():
                y = module(self.x)
        except Exception as exc:  # any failure here is a shape/config problem
            raise ShapeMismatchError(f"{layer_label(name, module, pos)} fails on samples of shape "
                                     f"{in_shape}: {exc}. Check input_shape.") from exc
        if not isinstance(y, Tensor) or y.shape[0] != self.x.shape[0]:
            refuse(name, module, pos, "its output is not one tensor with the batch dimension "
                   "first", "Use layers that map (B, ...) to (B, ...).")
        if isinstance(lifted, AffineMap) and lifted.dtype not in (None, self.x.dtype):
            lifted = lifted.to(dtype=self.x.dtype)  # e.g. ScaleShift(2.0) in a float64 network
        expected = lifted.out_shape if isinstance(lifted, AffineMap) else in_shape
        if tuple(y.shape[1:]) != tuple(expected):
            refuse(name, module, pos, f"its output shape {tuple(y.shape[1:])} differs from the "
                   f"lifted form's {tuple(expected)}", "Report this layer configuration.")
        self.entries.append(LayerEntry(name, module, pos, in_shape, tuple(y.shape[1:]), lifted))
        self.x = y
        # an activation whose range starts at 0 or above (ReLU, Sigmoid, Softmax, ...): its
        # output is >= 0, which makes a following max-pool's zero padding exact
        lower = getattr(lifted, "lower", None)
        self._nonneg = not isinstance(lifted, AffineMap) and lower is not None and lower >= 0
        return y

    def walk(self, module: nn.Module, name: str = "") -> None:
        if not name and not self.entries:
            refuse_early(module)
        # a Sequential subclass with its own forward is traced like any user module
        if isinstance(module, nn.Sequential) and type(module).forward is nn.Sequential.forward:
            for cname, child in module.named_children():
                self.walk(child, f"{name}.{cname}" if name else cname)
        elif is_leaf(module):
            self.add(name or type(module).__name__, module)
        else:
            walk_fx(self, module, name)

    def _add_maxpool(self, module: nn.MaxPool2d, name: str) -> Tensor:
        """MaxPool2d as its exact ReLU layers (lbi_engine.models.maxpool_relu), by default."""
        from lbi_engine.models.maxpool_relu import (
            maxpool_as_relu,
            rewrite_record,
            why_not_rewritable,
        )

        label = name or "MaxPool2d"
        nonneg = self._nonneg
        why = why_not_rewritable(module, nonneg)
        if why is not None or self.x.dim() != 4:
            refuse(label, module, len(self.entries), "its exact ReLU rewrite does not apply: "
                   f"{why or 'it needs (C, H, W) samples'}", "Put it after a ReLU, or use "
                   "padding=0 and ceil_mode=False, or nn.AvgPool2d (affine).")
        with torch.no_grad():
            want = module(self.x)
        in_shape = tuple(self.x.shape[1:])
        relu = maxpool_as_relu(module, int(self.x.shape[1]), nonneg_input=nonneg,
                               in_hw=(int(self.x.shape[2]), int(self.x.shape[3])))
        relu = relu.to(self.x.dtype)
        for cname, child in relu.named_children():
            self.add(f"{label}.relu{cname}", child)
        if tuple(self.x.shape) != tuple(want.shape):  # a geometry the rewrite gets wrong
            refuse(label, module, len(self.entries), f"its ReLU rewrite gives shape "
                   f"{tuple(self.x.shape[1:])}, not {tuple(want.shape[1:])}",
                   "Report this pool configuration; use nn.AvgPool2d meanwhile.")
        self.rewrites.append(rewrite_record(module, label, in_shape))
        self._nonneg = nonneg  # max of non-negative values
        return self.x


def _plain_leaves(module: nn.Module, name: str = "") -> Any:
    """(name, leaf) of a plain (nested) nn.Sequential in walking order; stops at the first
    module the walker would trace with torch.fx (its layers are known only by tracing)."""
    if isinstance(module, nn.Sequential) and type(module).forward is nn.Sequential.forward:
        for cname, child in module.named_children():
            if not (yield from _plain_leaves(child, f"{name}.{cname}" if name else cname)):
                return False
        return True
    if not is_leaf(module):
        return False
    yield name or type(module).__name__, module
    return True


def refuse_early(module: nn.Module) -> None:
    """Name the first parameter-free layer that cannot be lifted (GELU, LayerNorm, an
    upsampling, ...) before any layer is lifted: the walk itself lifts and runs every layer
    before it, which takes seconds for a large network. Stops at the first MaxPool2d (its
    rewrite adds layers, so later positions would differ from the walker's)."""
    from lbi_engine.activations import activation_from_module

    for position, (name, leaf) in enumerate(_plain_leaves(module)):
        if isinstance(leaf, (nn.MaxPool2d, nn.AdaptiveMaxPool2d)):  # decided on its input size
            return
        if isinstance(leaf, LiftedActivation) or next(leaf.parameters(False), None) is not None:
            continue
        found = refusal_for_type(type(leaf))
        if found is not None:
            refuse(name, leaf, position, *found)
        try:
            activation_from_module(leaf)
        except UnsupportedLayerError as exc:
            raise UnsupportedLayerError(f"{layer_label(name, leaf, position)}: {exc}") from exc


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
