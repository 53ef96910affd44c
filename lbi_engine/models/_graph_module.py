"""The torch module lbi builds for a file whose graph adds or concatenates tensors.

The ONNX and ``.pt2`` importers translate a file op by op into modules lbi constructs itself;
a chain becomes an ``nn.Sequential``, a graph a :class:`SegmentGraph`: chains (segments)
joined by sums and channel concatenations. Its forward is plain torch on those modules (never
the file's code), so it can be traced by torch.fx (:mod:`lbi_engine.models.graph_lifting`)
and serves as the reference the lifted network is verified against.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn


class SegmentGraph(nn.Module):
    """Node 0 is the input; node k >= 1 is ``plan[k - 1]`` = (kind, inputs, segment):
    ``("seq", (i,), s)`` runs ``segments[s]`` on node i, ``("add", (i, j, ..), -1)`` sums,
    ``("cat", (i, j, ..), -1)`` concatenates channels (dim 1). The last node is the output."""

    def __init__(self, segments: Sequence[nn.Sequential],
                 plan: Sequence[tuple[str, tuple[int, ...], int]]) -> None:
        super().__init__()
        self.segments = nn.ModuleList(segments)
        self.plan = [(kind, tuple(inputs), seg) for kind, inputs, seg in plan]
        for k, (kind, inputs, seg) in enumerate(self.plan, start=1):
            if kind not in ("seq", "add", "cat") or not inputs or \
                    any(not 0 <= i < k for i in inputs) or \
                    (kind == "seq") != (0 <= seg < len(self.segments)):
                raise ValueError(f"graph node {k} {(kind, inputs, seg)} is malformed")

    def forward(self, x: Tensor) -> Tensor:
        values = [x]
        for kind, inputs, seg in self.plan:
            if kind == "seq":
                values.append(self.segments[seg](values[inputs[0]]))
            elif kind == "add":
                out = values[inputs[0]]
                for i in inputs[1:]:
                    out = out + values[i]
                values.append(out)
            else:
                values.append(torch.cat([values[i] for i in inputs], dim=1))
        return values[-1]


class SegmentGraphBuilder:
    """Collects segments while an importer walks a graph: ``seq`` is the open segment (the
    importer appends modules to it), ``current`` the tensor it ends in."""

    def __init__(self, input_name: str) -> None:
        self.segments: list[nn.Sequential] = []
        self.plan: list[tuple[str, tuple[int, ...], int]] = []
        self.node_of: dict[str, int] = {input_name: 0}
        self.seq = nn.Sequential()
        self.open_input = 0
        self.current = input_name

    def close(self) -> None:
        """End the open segment at ``current`` (a tensor several nodes use, or a merge's
        input) and open an empty one after it."""
        if len(self.seq):
            self.segments.append(self.seq)
            self.plan.append(("seq", (self.open_input,), len(self.segments) - 1))
            self.node_of[self.current] = len(self.plan)
        elif self.current not in self.node_of:
            self.node_of[self.current] = self.open_input
        self.seq = nn.Sequential()
        self.open_input = self.node_of[self.current]

    def switch_to(self, tensor: str) -> bool:
        """Continue from an earlier segment end (a branch); False if it is not one."""
        if tensor not in self.node_of:
            return False
        self.close()
        self.current, self.open_input = tensor, self.node_of[tensor]
        return True

    def merge(self, kind: str, inputs: Sequence[str], out: str) -> bool:
        """A sum or concatenation of segment ends; False if an input is not one."""
        if self.current in inputs:
            self.close()
        if any(t not in self.node_of for t in inputs):
            return False
        self.plan.append((kind, tuple(self.node_of[t] for t in inputs), -1))
        self.node_of[out] = len(self.plan)
        self.current, self.seq, self.open_input = out, nn.Sequential(), len(self.plan)
        return True

    def module(self) -> nn.Module:
        """The open segment alone for a chain (exactly what the chain importer built), else
        the SegmentGraph ending in ``current``."""
        if not self.plan:
            return self.seq
        self.close()
        if self.node_of[self.current] != len(self.plan):
            raise ValueError("the output is not the graph's last node")
        return SegmentGraph(self.segments, self.plan)


class SegmentedWalk:
    """What both importers' walkers share: ``seq`` (the open segment, where translators
    append modules) and ``current`` (the tensor it ends in) live in ``graph_parts``."""

    graph_parts: SegmentGraphBuilder

    @property
    def seq(self) -> nn.Sequential:
        """The open segment (the whole chain, for a chain)."""
        return self.graph_parts.seq

    @seq.setter
    def seq(self, seq: nn.Sequential) -> None:
        self.graph_parts.seq = seq

    @property
    def current(self) -> str:
        """The tensor the open segment ends in."""
        return self.graph_parts.current

    @current.setter
    def current(self, name: str) -> None:
        self.graph_parts.current = name


def concat_shape(shapes: Sequence[tuple[int, ...] | None],
                 axis: int) -> tuple[int, ...] | None:
    """The sample shape of a concatenation of channels (``axis`` counts the batch dim), or
    None when it is not one lbi lifts (another axis, unequal or unknown map sizes)."""
    known = [s for s in shapes if s is not None]
    if len(known) != len(shapes) or not known or axis % (len(known[0]) + 1) != 1 or \
            any(s[1:] != known[0][1:] for s in known):
        return None
    return (sum(s[0] for s in known), *known[0][1:])


class Residual(nn.Module):
    """``body(x) + shortcut(x)``: the residual block a model card describes as
    ``{"type": "Residual", "body": [...], "shortcut": [...]}`` (an empty shortcut is the
    identity). Both parts are ``nn.Sequential`` of card layers; the forward is plain torch on
    lbi's own modules, so torch.fx traces it and :mod:`lbi_engine.models.graph_lifting` lifts
    the sum (an activation after the block becomes one lifted layer with two inputs)."""

    def __init__(self, body: nn.Sequential, shortcut: nn.Sequential) -> None:
        super().__init__()
        self.body = body
        self.shortcut = shortcut

    def forward(self, x: Tensor) -> Tensor:
        return self.body(x) + self.shortcut(x)
