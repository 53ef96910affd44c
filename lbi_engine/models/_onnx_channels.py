"""Channel splits and channel shuffles in an ONNX graph (a room of ``onnx_import``): the
nodes that ``_channel_ops`` turns into 1x1 selection convolutions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, Protocol

import numpy as np
import torch
from torch import nn

from lbi_engine.errors import UnsupportedLayerError
from lbi_engine.models._channel_ops import (
    MAX_RUN,
    append_permutation,
    branch_pieces,
    permute_step,
    reshape_step,
    sections,
    split_pieces,
)
from lbi_engine.models._graph_module import SegmentGraphBuilder


class _Walker(Protocol):
    """What the handlers use of ``onnx_import._Builder`` (which imports this module)."""

    graph_parts: SegmentGraphBuilder
    shape: tuple[int, ...]
    shapes: dict[str, tuple[int, ...]]
    current: str
    consts: dict[str, np.ndarray]
    consumers: dict[str, list[int]]
    outputs: set[str]
    opset: int
    index: int
    node: Any

    def add(self, *modules: nn.Module) -> None: ...

    def attrs(self) -> dict[str, Any]: ...

    def refuse(self, why: str) -> NoReturn: ...

    def reshape_targets(self) -> list[list[int]]: ...


def split_node(walk: _Walker) -> None:
    """Split along the channels: a branch per used output (``_channel_ops``)."""
    a, n = walk.attrs(), walk.node
    shape = walk.shapes.get(walk.current)
    if shape is None or len(shape) != 3 or int(a.get("axis", 0)) % 4 != 1:
        walk.refuse("it splits a tensor along another axis than the channels of a "
                    "(N, C, H, W) map; lbi lifts channel splits")
    given = list(n.input)[1] if len(n.input) > 1 else ""
    if given and given not in walk.consts:
        walk.refuse("its split sizes are computed in the graph; lbi needs them constant")
    if given:
        sizes = [int(v) for v in np.asarray(walk.consts[given]).reshape(-1)]
    elif "split" in a:
        sizes = [int(v) for v in a["split"]]
    else:  # equal parts, the last smaller (opset 18's num_outputs), as torch.chunk
        sizes = sections(shape[0], None, int(a.get("num_outputs", len(n.output))))
    pieces = split_pieces(shape[0], sizes, list(n.output))
    if pieces is None:
        walk.refuse(f"its pieces {sizes} do not split the {shape[0]} channels")
    branch_pieces(walk, walk.current, pieces,
                  lambda t: bool(walk.consumers.get(t)) or t in walk.outputs)


def channel_permutation(walk: _Walker, nodes: list[Any], first: int) -> int | None:
    """The last node of a Reshape-Transpose-Reshape run from the chain's tensor that
    permutes its channels (a channel shuffle), appended as a 1x1 convolution; else None
    (and the walk's node as it was)."""
    steps: list[Callable[[torch.Tensor], torch.Tensor]] = []
    name, where = walk.current, (walk.index, walk.node)
    for j in range(first, min(first + MAX_RUN, len(nodes))):
        n = walk.node = nodes[j]
        walk.index = j
        if not n.input or n.input[0] != name or \
                (j > first and len(walk.consumers.get(name, [])) + (name in walk.outputs) > 1):
            break
        if n.op_type == "Reshape":
            zero = not walk.attrs().get("allowzero", 0)
            try:
                target = walk.reshape_targets()[0]  # for a batch of 2, as permutation_of
            except UnsupportedLayerError:  # a target lbi cannot read: not a shuffle
                break
            steps.append(reshape_step(target, zero))
        elif n.op_type == "Transpose" and "perm" in walk.attrs():
            steps.append(permute_step(list(walk.attrs()["perm"])))
        elif n.op_type != "Identity":
            break
        name = n.output[0]
        if n.op_type != "Reshape" or not any(nodes[k].op_type == "Transpose"
                                             for k in range(first, j)):
            continue
        if append_permutation(walk, steps, name):
            return j
    walk.index, walk.node = where
    return None
