"""Output sizes of a plain ``nn.Sequential`` from its layers' hyper-parameters alone.

Why: :func:`lbi_engine.models.footprint.meta_footprint` pushes a batch through the network
on torch's ``meta`` device. The first meta operation of a process imports sympy (~1 s on
the 2-core machines lbi is measured on) and several (``linear`` with a bias, ``relu``,
``tanh``, batch norm) run Python decompositions that import ``torch._dynamo`` and
``torch._inductor`` (another 2–4 s). That was the largest part of loading a network, and so
of the GUI's time to its first curve. The standard layers' output shapes follow
from their documented formulas, so they are computed here in plain Python. Anything this
module is not sure about (another layer type, a subclass, a container that is not
``nn.Sequential``, a shape that does not fit) returns None, and the caller falls back to the
meta pass, which also words the error. A test checks agreement with the meta pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from torch import nn

Shape = tuple[int, ...]

#: Layers whose output has the input's shape (elementwise, or a per-channel affine map).
_SAME_SHAPE: tuple[type[nn.Module], ...] = (
    nn.Identity, nn.ReLU, nn.Sigmoid, nn.Tanh, nn.Softsign, nn.Hardsigmoid, nn.ReLU6,
    nn.LeakyReLU, nn.ELU, nn.Hardtanh, nn.Softplus, nn.Softshrink, nn.Dropout, nn.GELU,
    nn.SiLU, nn.CELU)


def _pair(v: Any) -> tuple[int, int] | None:
    if isinstance(v, int):
        return (v, v)
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(i, int) for i in v):
        return (int(v[0]), int(v[1]))
    return None  # a string padding ("same"), or anything unexpected


def _conv(m: nn.Conv2d, s: Shape) -> Shape | None:
    k, st, p, d = (_pair(getattr(m, a)) for a in ("kernel_size", "stride", "padding",
                                                    "dilation"))
    if len(s) != 4 or s[1] != m.in_channels or None in (k, st, p, d):
        return None
    assert k and st and p and d
    hw = [(s[2 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // st[i] + 1 for i in range(2)]
    return (s[0], m.out_channels, *hw) if min(hw) >= 1 else None


def _conv_t(m: nn.ConvTranspose2d, s: Shape) -> Shape | None:
    k, st, p, d, op = (_pair(getattr(m, a)) for a in ("kernel_size", "stride", "padding",
                                                        "dilation", "output_padding"))
    if len(s) != 4 or s[1] != m.in_channels or None in (k, st, p, d, op):
        return None
    assert k and st and p and d and op
    hw = [(s[2 + i] - 1) * st[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1 for i in range(2)]
    return (s[0], m.out_channels, *hw) if min(hw) >= 1 else None


def _pool(m: nn.AvgPool2d | nn.MaxPool2d, s: Shape) -> Shape | None:
    k = _pair(m.kernel_size)
    st = _pair(m.stride if m.stride is not None else m.kernel_size)
    p = _pair(m.padding)
    d = _pair(getattr(m, "dilation", 1))
    if len(s) != 4 or None in (k, st, p, d) or getattr(m, "return_indices", False):
        return None
    assert k and st and p and d
    if any(2 * p[i] > k[i] for i in range(2)):
        return None  # torch refuses; the meta pass says so in its words
    hw = []
    for i in range(2):
        span = s[2 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1
        out = (math.ceil if m.ceil_mode else math.floor)(span / st[i]) + 1
        if m.ceil_mode and (out - 1) * st[i] >= s[2 + i] + p[i]:
            out -= 1  # the last window must start inside the input or its left padding
        hw.append(out)
    return (s[0], s[1], *hw) if min(hw) >= 1 else None


def _flatten(m: nn.Flatten, s: Shape) -> Shape | None:
    n = len(s)
    a, b = m.start_dim % n if n else 0, m.end_dim % n if n else 0
    if not n or a > b:
        return None
    return (*s[:a], math.prod(s[a:b + 1]), *s[b + 1:])


def _unflatten(m: nn.Unflatten, s: Shape) -> Shape | None:
    sizes = tuple(m.unflattened_size) if isinstance(m.dim, int) else ()
    if not sizes or not all(isinstance(v, int) and v >= 1 for v in sizes):
        return None  # named dims or an inferred -1: left to the meta pass
    dim = m.dim % len(s) if s else 0
    if not s or math.prod(sizes) != s[dim]:
        return None
    return (*s[:dim], *sizes, *s[dim + 1:])


def _linear(m: nn.Linear, s: Shape) -> Shape | None:
    return (*s[:-1], m.out_features) if len(s) >= 1 and s[-1] == m.in_features else None


def _zero_pad(m: nn.ZeroPad2d, s: Shape) -> Shape | None:
    pad = tuple(m.padding)
    if len(s) != 4 or len(pad) != 4:
        return None
    h, w = s[2] + pad[2] + pad[3], s[3] + pad[0] + pad[1]
    return (*s[:2], h, w) if min(h, w) >= 1 else None


def _adaptive(m: nn.AdaptiveAvgPool2d, s: Shape) -> Shape | None:
    size: Any = m.output_size  # int, or a pair whose entries may be None (keep that size)
    hw = (size, size) if isinstance(size, int) else tuple(size or ())
    if len(s) != 4 or len(hw) != 2:
        return None
    out = tuple(s[2 + i] if v is None else v for i, v in enumerate(hw))
    return (*s[:2], *out) if all(isinstance(v, int) and v >= 1 for v in out) else None


def _batch_norm(m: nn.BatchNorm1d | nn.BatchNorm2d, s: Shape) -> Shape | None:
    dims = (4,) if isinstance(m, nn.BatchNorm2d) else (2, 3)
    return s if len(s) in dims and s[1] == m.num_features else None


def _prelu(m: nn.PReLU, s: Shape) -> Shape | None:
    n = m.num_parameters
    return s if n == 1 or (len(s) >= 2 and s[1] == n) else None


def _softmax(m: nn.Softmax, s: Shape) -> Shape | None:
    return s if m.dim is not None and -len(s) <= m.dim < len(s) else None


#: Exact types only: a subclass may override ``forward``.
_RULES: dict[type[nn.Module], Callable[[Any, Shape], Shape | None]] = {
    nn.Linear: _linear, nn.Conv2d: _conv, nn.ConvTranspose2d: _conv_t,
    nn.AvgPool2d: _pool, nn.MaxPool2d: _pool, nn.Flatten: _flatten,
    nn.Unflatten: _unflatten, nn.ZeroPad2d: _zero_pad, nn.AdaptiveAvgPool2d: _adaptive,
    nn.BatchNorm1d: _batch_norm, nn.BatchNorm2d: _batch_norm, nn.PReLU: _prelu,
    nn.Softmax: _softmax,
    **{cls: (lambda _m, s: s) for cls in _SAME_SHAPE},
}


def leaf_output_shape(leaf: nn.Module, sample_shape: Sequence[int]) -> Shape | None:
    """One sample's output shape of a known layer (exact type), or None (then run it).

    The importers track the sample shape while they build a chain; running each layer on a
    zero sample costs as much as a forward pass (seconds for a large convolutional network),
    only to learn a shape these formulas give."""
    rule = _RULES.get(type(leaf))
    if rule is None or (leaf.training and isinstance(leaf, (nn.BatchNorm1d, nn.BatchNorm2d))):
        return None
    new = rule(leaf, (2, *(int(v) for v in sample_shape)))
    return None if new is None or len(new) < 1 or new[0] != 2 else tuple(new[1:])


def _leaves_in_order(module: nn.Module) -> list[nn.Module] | None:
    """The leaves of nested ``nn.Sequential`` containers in execution order, else None."""
    if type(module) is not nn.Sequential:
        return [module] if type(module) in _RULES else None
    out: list[nn.Module] = []
    for child in module:
        leaves = _leaves_in_order(child)
        if leaves is None:
            return None
        out += leaves
    return out


def chain_output_sizes(module: nn.Module, input_shape: Sequence[int],
                       batch: int = 2) -> list[int] | None:
    """Values per sample of every leaf's output, in order, for a batch of ``batch`` samples of
    ``input_shape``; None when the module is not a chain of layers this module knows, or a
    layer would not accept its input (the meta pass then explains)."""
    walked = _chain_walk(module, (batch, *(int(v) for v in input_shape)))
    return None if walked is None else walked[0]


def _chain_walk(module: nn.Module, shape: Shape) -> tuple[list[int], Shape] | None:
    """(values per sample of every leaf's output, the chain's output shape) for a batch of
    ``shape``; None as for :func:`chain_output_sizes`."""
    leaves = _leaves_in_order(module)
    if leaves is None:
        return None
    batch = shape[0]
    sizes: list[int] = []
    for leaf in leaves:
        if leaf.training and isinstance(leaf, (nn.BatchNorm1d, nn.BatchNorm2d)):
            return None  # training-mode batch statistics: torch's own checks apply
        new = _RULES[type(leaf)](leaf, shape)
        if new is None or len(new) < 1 or new[0] != batch:
            return None
        shape = new
        sizes.append(math.prod(shape[1:]))
    return sizes, shape


def graph_output_sizes(module: nn.Module, input_shape: Sequence[int], batch: int = 2,
                       segment_inputs: list[tuple[int, Shape]] | None = None,
                       ) -> list[int] | None:
    """:func:`chain_output_sizes` for an importer's ``SegmentGraph`` (chains joined by sums
    and channel concatenations): the leaves' outputs of every segment in the plan's order;
    None when a segment is not a known chain or a merge's inputs do not fit (the meta pass
    then explains). ``segment_inputs``, when given, receives (segment index, its input's
    sample shape) for every chain segment."""
    from lbi_engine.models._graph_module import SegmentGraph

    if type(module) is not SegmentGraph:
        return None
    shapes: list[Shape] = [(batch, *(int(v) for v in input_shape))]
    sizes: list[int] = []
    for kind, inputs, seg in module.plan:
        ins = [shapes[i] for i in inputs]
        if kind == "seq":
            if segment_inputs is not None:
                segment_inputs.append((seg, ins[0][1:]))
            walked = _chain_walk(module.segments[seg], ins[0])
            if walked is None:
                return None
            sizes += walked[0]
            shape = walked[1]
        elif kind == "add":
            if any(s != ins[0] for s in ins):
                return None
            shape = ins[0]
        else:  # "cat" on channels
            if len({len(s) for s in ins}) != 1 or len(ins[0]) < 2 or \
                    any(s[:1] + s[2:] != ins[0][:1] + ins[0][2:] for s in ins):
                return None
            shape = (ins[0][0], sum(s[1] for s in ins), *ins[0][2:])
        shapes.append(shape)
    return sizes

