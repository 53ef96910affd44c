"""From torch modules to lifted pieces: an AffineMap, a ProximalActivation, or a clear refusal.

A network can be lifted when it is a chain x -> sigma_L(W_L ... sigma_1(W_1 x + b_1) ... + b_L)
whose sigmas are proximal maps (MATH.md §2). This room decides, module by module, which of
the two a layer is, and otherwise says why it cannot be lifted and what to use instead. It
also walks a module into a flat list of layers: nested nn.Sequential directly, any other
module through torch.fx (:mod:`lbi_engine.models.fx_chain`), running a zero batch alongside so every
layer's input/output shape is known.

The affine layers' maps are in :mod:`lbi_engine.models.affine_layers`, the refused layer types
and the messages' wording in ``_layer_refusals``; both are re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from lbi_engine.errors import ShapeMismatchError, UnsupportedLayerError
from lbi_engine.models._layer_refusals import layer_label, refusal_for_type, refuse
from lbi_engine.models._leaf_modules import LiftedActivation, is_leaf
from lbi_engine.models.affine_layers import affine_from_modules as affine_from_modules  # re-export
from lbi_engine.models.affine_layers import affine_map_of_module
from lbi_engine.models.fx_chain import walk_fx
from lbi_engine.operators import AffineMap


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
