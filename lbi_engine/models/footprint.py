"""Memory footprint of a network before it exists: shapes propagated on torch's meta device.

Why: a few bytes of card or ONNX (40 x Linear(16384, 16384), a padding of 30000, a transposed
convolution with stride 5000) describe a network that needs tens of gigabytes. The layers
are built on the ``meta`` device (shapes only, no memory, no random numbers), a batch is
pushed through them on ``meta`` too, and the bytes of weights and activations are counted.
:func:`check_network_memory` refuses, naming the estimate and the limit, before anything real
is allocated.

The estimate (bytes, ``s`` = bytes per value):
  weights:      3 x (#weights) x s      (the module, the lifted copy, transposes/norm probes)
  activations:  ITERATE_COPIES x batch x (#values of all layer outputs per sample) x s
where ITERATE_COPIES covers what a solver keeps per layer state (x_l, duals, pre-activations,
previous iterates, extrapolations).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from lbi_engine.errors import ShapeMismatchError
from lbi_engine.limits import LoadBudget, check_bytes
from lbi_engine.models._chain_shapes import chain_output_sizes, graph_output_sizes

__all__ = ["ITERATE_COPIES", "WEIGHT_COPIES", "ChainBudget", "Footprint", "check_network_memory",
           "check_onnx_external_data", "check_rewrite_memory", "meta_footprint",
           "probe_output_shape"]

ITERATE_COPIES = 12
WEIGHT_COPIES = 3


@dataclass(frozen=True)
class Footprint:
    weights: int  # number of parameter and buffer values
    activations: int  # values of all leaf outputs for ONE sample
    itemsize: int
    pool_units: int = 0  # of the activations: lifted units of the max-pools' ReLU rewrites
    pool_weights: int = 0  # of the weights: those rewrites' selection weights

    def bytes(self, batch: int = 1) -> int:
        return (WEIGHT_COPIES * self.weights * self.itemsize
                + ITERATE_COPIES * max(1, batch) * self.activations * self.itemsize)


def _leaves(module: nn.Module) -> list[nn.Module]:
    return [m for m in module.modules() if not list(m.children())]


def meta_footprint(module: nn.Module, input_shape: Sequence[int], where: str,
                   shape_errors: bool = True) -> Footprint:
    """Count weights and per-sample activation values of ``module`` on the meta device.

    ``module`` may live anywhere (its tensors are replaced by meta stand-ins for the count);
    its forward is called once on a meta batch of 2, which allocates nothing. A layer whose
    parameters cannot work on that shape (stride 0, a kernel larger than the input, ...)
    raises ShapeMismatchError naming the layer; with ``shape_errors=False`` the layers before
    it are counted and the caller's own walk reports the layer (with its own wording).
    """
    ref = next((t for t in (*module.parameters(), *module.buffers())
                if t.is_floating_point()), None)
    itemsize = ref.element_size() if ref is not None else 4
    weights = sum(t.numel() for t in (*module.parameters(), *module.buffers()))
    # Plain chains of standard layers: the same counts from the layers' formulas, without
    # the meta pass's imports of sympy and torch._dynamo (seconds; see _chain_shapes).
    sizes = chain_output_sizes(module, input_shape)
    segments: list[tuple[int, tuple[int, ...]]] = []
    if sizes is None:  # an importer's graph of such chains: the same formulas per segment
        sizes = graph_output_sizes(module, input_shape, segment_inputs=segments)
    if sizes is not None:
        chains = getattr(module, "segments", None)  # a SegmentGraph's ModuleList
        parts = [_chain_rewrites(chains[i], shape) for i, shape in segments] \
            if segments and isinstance(chains, nn.ModuleList) \
            else [_chain_rewrites(module, input_shape)]
        units, added = sum(u for u, _ in parts), sum(w for _, w in parts)
        return Footprint(weights=weights + added, itemsize=itemsize,
                         activations=sum(sizes) + math.prod(input_shape) + units,
                         pool_units=units, pool_weights=added)
    names = {id(m): n for n, m in module.named_modules()}
    outputs: list[int] = []

    def hook(m: nn.Module, _inp: Any, out: Any) -> None:
        if isinstance(out, torch.Tensor) and out.dim() >= 1:
            outputs.append(math.prod(out.shape[1:]))

    state = {k: torch.empty_like(v, device="meta")
             for k, v in (*module.named_parameters(), *module.named_buffers())}
    rewrites = [0, 0]  # what the max-pools' exact ReLU rewrites add: units, weights

    def pool(m: nn.Module, inp: Any) -> None:
        if isinstance(m, nn.MaxPool2d) and inp and getattr(inp[0], "dim", lambda: 0)() == 4:
            from lbi_engine.models.maxpool_relu import rewrite_size

            units, added = rewrite_size(m, tuple(inp[0].shape[1:]))
            rewrites[0] += units
            rewrites[1] += added

    handles = [m.register_forward_hook(hook) for m in _leaves(module)]
    handles += [m.register_forward_pre_hook(pool) for m in _leaves(module)
                if isinstance(m, nn.MaxPool2d)]
    x = torch.empty(2, *input_shape, device="meta",
                    dtype=ref.dtype if ref is not None else torch.float32)
    current = [""]

    def pre(m: nn.Module, _inp: Any) -> None:
        current[0] = names.get(id(m), type(m).__name__)

    handles += [m.register_forward_pre_hook(pre) for m in _leaves(module)]
    try:
        with torch.no_grad():
            torch.func.functional_call(module, state, (x,), strict=False)
    except (RuntimeError, ValueError, TypeError, ZeroDivisionError, IndexError,
            NotImplementedError) as exc:
        if not shape_errors:
            return Footprint(weights + rewrites[1], sum(outputs) + math.prod(input_shape)
                             + rewrites[0], itemsize, *rewrites)
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else \
            type(exc).__name__
        raise ShapeMismatchError(
            f"{where}: layer '{current[0]}' cannot work on samples of shape "
            f"{tuple(input_shape)} ({first}); check the layer's parameters (stride, padding, "
            "kernel size must fit the input) and the input shape.") from exc
    finally:
        for h in handles:
            h.remove()
    return Footprint(weights + rewrites[1], sum(outputs) + math.prod(input_shape) + rewrites[0],
                     itemsize, *rewrites)


def _chain_rewrites(module: nn.Module, input_shape: Sequence[int]) -> tuple[int, int]:
    """(lifted units, weight values) the exact ReLU rewrites of a chain's max-pools add
    (:func:`lbi_engine.models.maxpool_relu.rewrite_size`), from the layers' formulas."""
    from lbi_engine.models._chain_shapes import _leaves_in_order, leaf_output_shape
    from lbi_engine.models.maxpool_relu import rewrite_size

    leaves = _leaves_in_order(module) or []
    shape: tuple[int, ...] | None = tuple(int(v) for v in input_shape)
    units = added = 0
    for leaf in leaves:
        if shape is None:
            break
        if isinstance(leaf, nn.MaxPool2d) and len(shape) == 3:
            u, w = rewrite_size(leaf, shape)
            units, added = units + u, added + w
        shape = leaf_output_shape(leaf, shape)
    return units, added


def check_network_memory(module: nn.Module, input_shape: Sequence[int], where: str,
                         batch: int = 1, shape_errors: bool = True) -> Footprint:
    """:func:`meta_footprint`, then refuse (MemoryLimitError) above the memory limit."""
    fp = meta_footprint(module, input_shape, where, shape_errors)
    pools = (f"; the exact ReLU rewrites of its max-pools: {fp.pool_units:,} lifted units and "
             f"{fp.pool_weights:,} weights of them" if fp.pool_units or fp.pool_weights else "")
    check_bytes(fp.bytes(batch), f"{where} ({fp.weights:,} weights, {fp.activations:,} "
                f"activation values per sample{pools})",
                "check the layer sizes, padding and strides, or use a smaller input")
    return fp


def check_rewrite_memory(m: nn.MaxPool2d, in_shape: Sequence[int], label: str,
                         itemsize: int = 4) -> None:
    """Refuse (MemoryLimitError) a pool whose rewrite alone would not fit the memory limit:
    its weights (three copies, as the network's) and the solver's copies of its lifted
    units (:data:`ITERATE_COPIES`), before anything is built."""
    from lbi_engine.models.maxpool_relu import _pair, rewrite_size

    units, weights = rewrite_size(m, in_shape)
    check_bytes((WEIGHT_COPIES * weights + ITERATE_COPIES * units) * itemsize,
                f"the exact ReLU rewrite of max-pool '{label}' (kernel "
                f"{_pair(m.kernel_size)}, input {tuple(int(v) for v in in_shape)}: {units:,} "
                f"lifted units, {weights:,} weights)",
                "use a smaller pooling window or input, or an nn.AvgPool2d (affine, no "
                "rewrite)")


def probe_output_shape(module: nn.Module, sample_shape: Sequence[int]) -> tuple[int, ...]:
    """One sample's output shape of ``module`` (a layer an importer just built), found without
    allocating: the layer's formula where it is known, else a batch of 2 on the meta device.

    Why not a real dry run: a layer read from a file may output 20000 x 20000 maps (an
    adaptive pool's output size, a transposed convolution's stride); a zero batch pushed
    through it would allocate gigabytes and compute for minutes only to learn a shape.
    Errors are torch's own (RuntimeError and friends): the importer words them.
    """
    from lbi_engine.models._chain_shapes import leaf_output_shape
    from lbi_engine.models._leaf_modules import LiftedActivation
    from lbi_engine.operators import Reshape, ScaleShift

    shape = tuple(int(v) for v in sample_shape)
    known = leaf_output_shape(module, shape)
    if known is not None:
        return known
    # lbi's own elementwise and reshaping modules: their shapes without the meta pass (its
    # first use imports sympy and torch._dynamo, seconds)
    if type(module) in (LiftedActivation, nn.LayerNorm, nn.LogSoftmax, nn.Mish, nn.Hardswish,
                        nn.SELU, nn.Softsign):  # elementwise or per sample: same shape
        return shape
    if type(module) is Reshape and math.prod(module.shape) == math.prod(shape):
        return tuple(module.shape)
    if type(module) is ScaleShift:
        full = torch.broadcast_shapes((2, *shape), module.scale.shape, module.shift.shape)
        if full[0] == 2:
            return tuple(full[1:])
    state = {k: torch.empty_like(v, device="meta")
             for k, v in (*module.named_parameters(), *module.named_buffers())}
    with torch.no_grad():
        out = torch.func.functional_call(module, state, (torch.empty(2, *shape, device="meta"),),
                                         strict=False)
    return tuple(out.shape[1:])


class ChainBudget:
    """For importers that build a chain layer by layer (ONNX, ``.pt2``): each layer's output
    shape is found without allocating (:func:`probe_output_shape`), and the layer's weights
    and the activations a solver will keep of its output are charged to the load's
    :class:`~lbi_engine.limits.LoadBudget` (with the bytes already read from the file), so a
    padding of 30000 or an adaptive pool to 20000 x 20000 is refused, not allocated."""

    def __init__(self, where: str, budget: LoadBudget | None = None) -> None:
        self.where = where
        self.budget = budget if budget is not None else LoadBudget(
            where, "check the paddings, strides and sizes in the file, or export it again")
        self.values = 0

    def check(self, module: nn.Module, in_shape: Sequence[int], name: str = "") -> tuple[int, ...]:
        """Charge ``module`` (its weights and its output's activations); its output shape."""
        out = probe_output_shape(module, in_shape)
        tensors = (*module.parameters(), *module.buffers())
        ref = next((t for t in tensors if t.is_floating_point()), None)
        itemsize = ref.element_size() if ref is not None else 4
        label = f"layer '{name}'" if name else f"a {type(module).__name__} layer"
        self.budget.charge(sum(t.numel() * t.element_size() for t in tensors
                               if t.device.type != "meta"), f"the weights of {label}")
        values = math.prod(out)
        if isinstance(module, nn.MaxPool2d) and len(in_shape) == 3:
            from lbi_engine.models.maxpool_relu import rewrite_size

            units, added = rewrite_size(module, in_shape)  # its exact ReLU rewrite
            self.budget.charge(WEIGHT_COPIES * added * itemsize, f"the {added:,} weights "
                               f"of the ReLU rewrite of max-pool {label}")
            values += units
        self.values += values
        self.budget.charge(ITERATE_COPIES * itemsize * values,
                           f"{label}: {values:,} activation values per sample, "
                           f"{self.values:,} so far")
        return out


def check_onnx_external_data(path: Any, budget: LoadBudget | None = None) -> None:
    """Refuse an ONNX file whose external tensor data would not fit, before onnx.load reads it.

    The graph is parsed without its external data; each external tensor's ``length`` (or the
    rest of its data file from ``offset``) is added up. A sparse 100 GB data file takes no
    disk space but would take 100 GB of memory to load.
    """
    import os
    from pathlib import Path

    import onnx

    p = Path(path)
    try:
        model = onnx.load(str(p), load_external_data=False)
    except Exception:  # the real load reports a damaged file in its own words
        return
    total = 0
    sizes: dict[str, int] = {}
    for t in model.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        location = info.get("location", "")
        if location not in sizes:
            try:
                sizes[location] = os.stat(p.parent / location).st_size
            except OSError:
                sizes[location] = 0  # missing: onnx.load says so
        try:
            offset = int(info.get("offset", 0) or 0)
            length = int(info["length"]) if info.get("length") else sizes[location] - offset
        except ValueError:
            continue
        total += max(0, length)
    if total and budget is not None:
        budget.charge(2 * total, "its external tensor data")
    elif total:
        check_bytes(2 * total, f"ONNX file {p} (its external tensor data)",
                    "the data file is damaged or far larger than a network lbi can invert")
