"""Channel permutations and channel slices of an exported graph, as 1x1 convolutions.

Both model-file importers meet them: ShuffleNet's channel shuffle is exported as
reshape (N, g, C/g, H, W) -> transpose(1, 2) -> reshape (N, C, H, W), and ``x.chunk(2, dim=1)``
as a Split of the channels. Each is linear in x: output channel o is input channel p(o). lbi
lifts them as a bias-free 1x1 convolution whose weight is the 0/1 matrix of p, so the lifted
network needs no operator of its own (the convolution's adjoint, norm and lifting are the
tested ones), and the forward is exact: every output is one input times 1 plus zeros.

Which channel each output takes is not derived from the op names but computed by running the
recognised ops on an index tensor (``permutation_of``): a sequence that is not a pure
permutation of channels (one that mixes pixels across channels) is rejected, so the
1x1 convolution can only be built where it equals the ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import torch
from torch import Tensor, nn

from lbi_engine.models._graph_module import SegmentGraphBuilder

#: the longest reshape-transpose-reshape run the importers look at
MAX_RUN = 4


def selection_conv(channels: int, picks: Sequence[int]) -> nn.Conv2d:
    """The 1x1 convolution whose output channel o is input channel ``picks[o]``."""
    conv = nn.Conv2d(channels, len(picks), 1, bias=False)
    weight = torch.zeros(len(picks), channels, 1, 1)
    weight[torch.arange(len(picks)), torch.as_tensor(list(picks), dtype=torch.long)] = 1.0
    with torch.no_grad():
        conv.weight.copy_(weight)
    return conv.requires_grad_(False).eval()


def permutation_of(shape: tuple[int, ...],
                   ops: Callable[[Tensor], Tensor]) -> list[int] | None:
    """p with ops(x)[:, o] == x[:, p[o]] for every x of sample ``shape`` (C, H, W), or None
    when ops is not such a permutation (a different output shape, values of one output
    channel taken from several input channels or places, or from another sample). ``ops``
    reads the batch size from its argument's first dim; it is run on a batch of two."""
    if len(shape) != 3:
        return None
    c, h, w = shape
    index = torch.arange(2 * c * h * w, dtype=torch.float64).reshape(2, c, h, w)
    try:
        out = ops(index)
    except (RuntimeError, ValueError, IndexError, TypeError):
        return None
    if tuple(out.shape) != (2, c, h, w):
        return None
    picks = (out[0, :, 0, 0] // (h * w)).long()
    if sorted(picks.tolist()) != list(range(c)):
        return None
    return picks.tolist() if torch.equal(out, index[:, picks]) else None


Step = Callable[[Tensor], Tensor]


def permute_step(dims: Sequence[int]) -> Step:
    return lambda x: x.permute(*dims)


def transpose_step(dim0: int, dim1: int) -> Step:
    return lambda x: x.transpose(dim0, dim1)


def reshape_step(size: Sequence[int], zero_copies: bool = False) -> Step:
    """x.reshape(size); with ``zero_copies`` an entry 0 keeps that dim of x (ONNX)."""
    return lambda x: x.reshape([x.shape[i] if v == 0 and zero_copies else v
                                for i, v in enumerate(size)])


def compose(steps: Sequence[Callable[[Tensor], Tensor]]) -> Callable[[Tensor], Tensor]:
    """The function running ``steps`` in order."""
    def run(x: Tensor) -> Tensor:
        for step in steps:
            x = step(x)
        return x

    return run


def sections(channels: int, split: int | Sequence[int] | None, chunks: int | None) -> list[int]:
    """The channel counts of a split: ``split`` an int (torch.split's size: pieces of that
    size, the last smaller) or a list of sizes; ``chunks`` torch.chunk's count (pieces of
    ceil(C / chunks))."""
    if chunks is not None:
        size = -(-channels // chunks)
        split = size
    if isinstance(split, int):
        if split <= 0:
            return []
        return [min(split, channels - s) for s in range(0, channels, split)]
    return [int(s) for s in split or []]


class ChannelWalk(Protocol):
    """What the importers' walkers provide to ``branch_pieces`` (both have these)."""

    graph_parts: SegmentGraphBuilder
    shape: tuple[int, ...]
    shapes: dict[str, tuple[int, ...]]

    def add(self, *modules: nn.Module) -> None: ...


def branch_pieces(walk: ChannelWalk, source: str, pieces: Sequence[tuple[str, list[int]]],
                  used: Callable[[str], bool]) -> None:
    """A split of ``source``'s channels: each used piece (its tensor name and the channels
    it takes) becomes a branch of the graph from ``source`` through a selection conv."""
    parts = walk.graph_parts
    channels, *rest = walk.shapes[source]
    if parts.current != source:
        parts.switch_to(source)
    parts.close()  # the split's input is a branch point
    for name, picks in pieces:
        if not used(name):
            continue
        parts.switch_to(source)
        walk.shape = walk.shapes[source]
        walk.add(selection_conv(channels, picks))
        parts.current = name
        walk.shapes[name] = walk.shape
        parts.close()


def append_permutation(walk: ChannelWalk, steps: Sequence[Callable[[Tensor], Tensor]],
                       name: str) -> bool:
    """Whether ``steps`` permute the channels of the walk's tensor; if so the selection conv
    is appended and the chain continues at ``name`` (the steps' output)."""
    picks = permutation_of(walk.shape, compose(steps))
    if picks is None:
        return False
    walk.add(selection_conv(walk.shape[0], picks))
    walk.graph_parts.current = name
    walk.shapes[name] = walk.shape
    return True


def split_pieces(channels: int, sizes: Sequence[int],
                 names: Sequence[str]) -> list[tuple[str, list[int]]] | None:
    """(name, channels) of each piece of a split along the channels, None if the sizes do not
    add up to ``channels`` or do not match the outputs."""
    if sum(sizes) != channels or len(sizes) != len(names) or any(s <= 0 for s in sizes):
        return None
    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    return [(n, list(range(s, s + k))) for n, s, k in zip(names, starts, sizes, strict=True)]
