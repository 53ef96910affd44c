"""Channel splits and channel shuffles in a ``.pt2`` graph (a room of ``_pt2_ops``): the
ATen nodes that ``_channel_ops`` turns into 1x1 selection convolutions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, Protocol

import torch
from torch import nn

from lbi_engine.models._channel_ops import (
    MAX_RUN,
    append_permutation,
    branch_pieces,
    permute_step,
    sections,
    split_pieces,
    transpose_step,
)
from lbi_engine.models._graph_module import SegmentGraphBuilder

SPLIT = {"aten.chunk.default", "aten.split.Tensor", "aten.split_with_sizes.default"}
RESHAPE = {"aten.view.default", "aten.reshape.default", "aten._unsafe_view.default"}
_PERMUTE = {"aten.transpose.int", "aten.permute.default"}
_IDENTITY = {"aten.alias.default", "aten.clone.default", "aten.contiguous.default"}
BATCH = "batch"  # the symbolic batch size (aten.sym_size.int(x, 0))


def node_target(node: dict[str, Any]) -> str:
    t = str(node.get("target", ""))
    return t[len("torch.ops."):] if t.startswith("torch.ops.") else t


class _Walker(Protocol):
    """What the handlers use of ``_pt2_ops.GraphTranslator`` (which imports this module)."""

    graph_parts: SegmentGraphBuilder
    shape: tuple[int, ...]
    shapes: dict[str, tuple[int, ...]]
    current: str
    static_batch: int | None
    index: int
    node: dict[str, Any]

    def add(self, *modules: nn.Module) -> None: ...

    def args(self) -> dict[str, Any]: ...

    def refuse(self, why: str) -> NoReturn: ...

    def uses(self, name: str, after: int) -> int: ...

    def output_name(self) -> str: ...

def split_node(walk: _Walker, args: dict[str, Any]) -> None:
    """torch.chunk / torch.split along the channels: a branch per piece (``_channel_ops``)."""
    src = args.get("self")
    shape = walk.shapes.get(src[1]) if isinstance(src, tuple) else None
    if src is None or shape is None or len(shape) != 3 or int(args.get("dim", 0)) % 4 != 1:
        walk.refuse("it splits a tensor along another axis than the channels of a "
                    "(N, C, H, W) map; lbi lifts channel splits")
    outs = walk.node.get("outputs", [{}])[0].get("as_tensors") or []
    sizes = sections(shape[0], args.get("split_size", args.get("split_sizes")),
                     args.get("chunks"))
    pieces = split_pieces(shape[0], sizes, [t["name"] for t in outs])
    if pieces is None:
        walk.refuse(f"its pieces {sizes} do not split the {shape[0]} channels")
    after = walk.index
    branch_pieces(walk, src[1], pieces, lambda n: walk.uses(n, after) > 0)


def channel_permutation(walk: _Walker, nodes: list[dict[str, Any]], first: int) -> int | None:
    """The last node of a reshape-transpose-reshape run from the chain's tensor that
    permutes its channels (a channel shuffle), appended as a 1x1 convolution; else None
    (and the walk's node as it was)."""
    steps: list[Callable[[torch.Tensor], torch.Tensor]] = []
    name, where = walk.current, (walk.index, walk.node)

    def batch_first(size: list[Any]) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda x: x.reshape([x.shape[0] if v == BATCH or (k == 0 and v == walk.static_batch)
                                    else v for k, v in enumerate(size)])

    for j in range(first, min(first + MAX_RUN, len(nodes))):
        target = node_target(nodes[j])
        walk.index, walk.node = j, nodes[j]
        a = walk.args()
        if a.get("self") != ("tensor", name) or (j > first and walk.uses(name, j) > 1):
            break
        if target in RESHAPE:
            steps.append(batch_first(list(a.get("size", a.get("shape")) or [])))
        elif target == "aten.transpose.int":
            steps.append(transpose_step(int(a["dim0"]), int(a["dim1"])))
        elif target == "aten.permute.default":
            steps.append(permute_step(list(a["dims"])))
        elif target not in _IDENTITY:
            break
        name = walk.output_name()
        permuted = any(node_target(nodes[k]) in _PERMUTE for k in range(first, j))
        if target in RESHAPE and permuted and append_permutation(walk, steps, name):
            return j
    walk.index, walk.node = where
    return None
