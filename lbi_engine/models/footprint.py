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
from lbi_engine.limits import check_bytes
from lbi_engine.models._chain_shapes import chain_output_sizes

__all__ = ["Footprint", "ITERATE_COPIES", "ChainBudget", "check_network_memory",
           "check_onnx_external_data", "meta_footprint"]

ITERATE_COPIES = 12
_WEIGHT_COPIES = 3


@dataclass(frozen=True)
class Footprint:
    weights: int  # number of parameter and buffer values
    activations: int  # values of all leaf outputs for ONE sample
    itemsize: int

    def bytes(self, batch: int = 1) -> int:
        return (_WEIGHT_COPIES * self.weights * self.itemsize
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
    if sizes is not None:
        return Footprint(weights=weights, activations=sum(sizes) + math.prod(input_shape),
                         itemsize=itemsize)
    names = {id(m): n for n, m in module.named_modules()}
    outputs: list[int] = []

    def hook(m: nn.Module, _inp: Any, out: Any) -> None:
        if isinstance(out, torch.Tensor) and out.dim() >= 1:
            outputs.append(math.prod(out.shape[1:]))

    state = {k: torch.empty_like(v, device="meta")
             for k, v in (*module.named_parameters(), *module.named_buffers())}
    handles = [m.register_forward_hook(hook) for m in _leaves(module)]
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
            return Footprint(weights=weights, itemsize=itemsize,
                             activations=sum(outputs) + math.prod(input_shape))
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else \
            type(exc).__name__
        raise ShapeMismatchError(
            f"{where}: layer '{current[0]}' cannot work on samples of shape "
            f"{tuple(input_shape)} ({first}); check the layer's parameters (stride, padding, "
            "kernel size must fit the input) and the input shape.") from exc
    finally:
        for h in handles:
            h.remove()
    return Footprint(weights=weights, activations=sum(outputs) + math.prod(input_shape),
                     itemsize=itemsize)


def check_network_memory(module: nn.Module, input_shape: Sequence[int], where: str,
                         batch: int = 1, shape_errors: bool = True) -> Footprint:
    """:func:`meta_footprint`, then refuse (MemoryLimitError) above the memory limit."""
    fp = meta_footprint(module, input_shape, where, shape_errors)
    check_bytes(fp.bytes(batch), f"{where} ({fp.weights:,} weights, {fp.activations:,} "
                f"activation values per sample)",
                "check the layer sizes, padding and strides, or use a smaller input")
    return fp


class ChainBudget:
    """For importers that build a chain layer by layer (ONNX): before each layer's dry run,
    its output shape is found on the meta device and the activations so far are checked
    against the memory limit, so a padding of 30000 is refused instead of allocated."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.values = 0

    def check(self, module: nn.Module, in_shape: Sequence[int]) -> None:
        try:
            fp = meta_footprint(module, tuple(in_shape), self.where, shape_errors=True)
        except ShapeMismatchError:
            return  # the caller's real dry run reports it in its own words
        self.values += fp.activations
        check_bytes(ITERATE_COPIES * fp.itemsize * self.values + _WEIGHT_COPIES * fp.itemsize
                    * fp.weights, f"{self.where} (at least {self.values:,} activation values "
                    "per sample)", "check the paddings, strides and sizes in the file, or "
                    "export it again")


def check_onnx_external_data(path: Any) -> None:
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
    if total:
        check_bytes(2 * total, f"ONNX file {p} (its external tensor data)",
                    "the data file is damaged or far larger than a network lbi can invert")
