"""Max-pooling written exactly as ReLU layers, so that a network with MaxPool2d can be lifted.

Max-pooling is not a proximal map (MATH.md §2.5), but it is a composition of affine maps and
ReLUs. For two values,

    max(a, b) = b + ReLU(a - b) = ReLU(a - b) + ReLU(b) - ReLU(-b),

where b is carried through the ReLU layer as ReLU(b) - ReLU(-b) (a lifted layer applies its
activation to every unit). A window of n values is reduced by a tree of such pairs: level 1
forms the units [a-b, b, -b] for each pair (and [c, -c] for an odd one out), applies ReLU,
and the next level's values are the combinations u0 + u1 - u2 (resp. u0 - u1) of those
units. After ceil(log2 n) ReLU levels one value per window remains, an affine combination
that the lifted network merges into the next layer's W and b.

Per channel every level is a grouped convolution (groups = channels): the first one reads the
window (kernel = pool kernel, stride = pool stride), the others are 1x1. So
``MaxPool2d(2)`` on C channels becomes Conv2d(C, 6C, 2, stride 2) -> ReLU -> Conv2d(6C, 3C, 1)
-> ReLU -> Conv2d(3C, C, 1): identical outputs (to rounding), two lifted ReLU layers of
6C·H'W' and 3C·H'W' units. The inversion then estimates those extra states too: it is the
same forward map, lifted with more auxiliary variables.

Supported: padding 0, dilation 1, ceil_mode False (zero padding would change the max of
negative values; lbi refuses the other settings with this reason).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from contextvars import ContextVar

import torch
from torch import nn

from lbi_engine.errors import UnsupportedLayerError


def _pair(v: int | Sequence[int]) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def why_not_rewritable(m: nn.MaxPool2d) -> str | None:
    """Why the exact rewrite does not apply to this layer, or None if it does."""
    if _pair(m.padding) != (0, 0):
        return (f"padding={m.padding} pads with -inf, which zero-padded convolutions cannot "
                "represent")
    if _pair(m.dilation) != (1, 1):
        return f"dilation={m.dilation} is not implemented in the rewrite"
    if m.ceil_mode:
        return "ceil_mode=True makes partial windows, which the rewrite does not implement"
    if m.return_indices:
        return "return_indices=True returns integer indices, not a tensor of values"
    return None


def _levels(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(U, V) per ReLU level: units = U @ (previous ReLU outputs, or the window at level 1),
    values = V @ relu(units); the next level's U is built from V's rows."""
    values = torch.eye(n, dtype=torch.float64)  # values as combinations of the features
    out = []
    while values.shape[0] > 1:
        m = values.shape[0]
        rows: list[torch.Tensor] = []
        nxt: list[tuple[int, tuple[float, ...]]] = []
        for j in range(0, m - 1, 2):
            a, b = values[j], values[j + 1]
            base = len(rows)
            rows += [a - b, b, -b]
            nxt.append((base, (1.0, 1.0, -1.0)))
        if m % 2:
            c = values[m - 1]
            base = len(rows)
            rows += [c, -c]
            nxt.append((base, (1.0, -1.0)))
        units = torch.stack(rows)
        combine = torch.zeros(len(nxt), len(rows), dtype=torch.float64)
        for i, (base, coef) in enumerate(nxt):
            combine[i, base:base + len(coef)] = torch.tensor(coef, dtype=torch.float64)
        out.append((units, combine))
        values = combine  # values of the next level, as combinations of this level's units
    return out


def maxpool_as_relu(m: nn.MaxPool2d, channels: int) -> nn.Sequential:
    """The exact ReLU form of ``m`` on ``channels`` channels (see the module docstring)."""
    why = why_not_rewritable(m)
    if why is not None:
        raise UnsupportedLayerError(f"MaxPool2d cannot be rewritten exactly: {why}. Use "
                                    "nn.AvgPool2d, or padding=0, dilation=1, ceil_mode=False.")
    kh, kw = _pair(m.kernel_size)
    stride = _pair(m.stride if m.stride else m.kernel_size)
    n = kh * kw
    if n == 1:
        conv = nn.Conv2d(channels, channels, 1, stride, groups=channels, bias=False)
        conv.weight.data.fill_(1.0)
        return nn.Sequential(conv)
    mods: list[nn.Module] = []
    prev_combine: torch.Tensor | None = None  # None: the features are the window's values
    in_per_group = 1
    for units, combine in _levels(n):
        u = units.shape[0]
        if prev_combine is None:  # read the window: weight (u, kh, kw) per channel
            w = units.reshape(u, 1, kh, kw)
            conv = nn.Conv2d(channels, channels * u, (kh, kw), stride, groups=channels,
                             bias=False)
        else:
            w = units.reshape(u, in_per_group, 1, 1)  # rows: combinations of the last ReLUs
            conv = nn.Conv2d(channels * in_per_group, channels * u, 1, groups=channels,
                             bias=False)
        with torch.no_grad():
            conv.weight.copy_(w.repeat(channels, 1, 1, 1))
        mods += [conv, nn.ReLU()]
        prev_combine, in_per_group = combine, u
    assert prev_combine is not None  # n > 1: at least one level
    last = nn.Conv2d(channels * in_per_group, channels, 1, groups=channels, bias=False)
    with torch.no_grad():
        last.weight.copy_(prev_combine.reshape(1, in_per_group, 1, 1).repeat(channels, 1, 1, 1))
    mods.append(last)
    return nn.Sequential(*mods)


def rewrite_maxpool(module: nn.Module, input_shape: Sequence[int]) -> nn.Module:
    """``module`` with every nn.MaxPool2d replaced in place by its exact ReLU form.

    ``input_shape`` (one sample, e.g. (1, 28, 28)) is needed to know each pool's channels; a
    zero batch is run through the module once with hooks that record them. Returns the module.
    """
    channels: dict[int, int] = {}
    hooks = [sub.register_forward_pre_hook(
        lambda mod, args: channels.__setitem__(id(mod), int(args[0].shape[1])))
        for sub in module.modules() if isinstance(sub, nn.MaxPool2d)]
    try:
        ref = next(iter(module.parameters()), None)
        dtype = ref.dtype if ref is not None and ref.is_floating_point() else torch.float32
        with torch.no_grad():
            module.eval()(torch.zeros(1, *input_shape, dtype=dtype))
    finally:
        for h in hooks:
            h.remove()
    for parent in list(module.modules()):
        for cname, child in list(parent.named_children()):
            if isinstance(child, nn.MaxPool2d) and id(child) in channels:
                setattr(parent, cname, maxpool_as_relu(child, channels[id(child)]).to(dtype))
    return module


#: Whether lifting rewrites MaxPool2d layers (set with :func:`lift_maxpool_as_relu`).
REWRITE_MAXPOOL: ContextVar[bool] = ContextVar("lbi_rewrite_maxpool", default=False)


@contextlib.contextmanager
def lift_maxpool_as_relu() -> Iterator[None]:
    """Within this block, lifting (any loader) replaces MaxPool2d by its exact ReLU form.

    Opt-in because it changes the lifted problem (more layers and auxiliary states) while
    keeping the forward map; ``lbi convert --maxpool-relu`` uses it.
    """
    token = REWRITE_MAXPOOL.set(True)
    try:
        yield
    finally:
        REWRITE_MAXPOOL.reset(token)


def relu_levels(kernel_size: int | Sequence[int]) -> int:
    """How many lifted ReLU layers the rewrite of a pool with this kernel adds."""
    kh, kw = _pair(kernel_size)
    return math.ceil(math.log2(kh * kw)) if kh * kw > 1 else 0
