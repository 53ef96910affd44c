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

Rows, then columns: where the windows overlap vertically (a 3x3 pool with stride 2, as in
resnet's stem) the maximum over each row's part of the window, then over the window's rows,
shares the row maxima between neighbouring windows: two trees of the same kind, ``(1, kw)``
windows then ``(kh, 1)``, the first one's combination merged into the second one's first
convolution. The rewrite takes that form when it has fewer lifted units
(``separable_units`` < ``tree_units``, which needs the input size): for resnet18's stem
pool at 128x128, 25,088 instead of 30,720 per channel, the same number of ReLU levels
(2 + 2 = ceil(log2 9)). A non-overlapping pool (2x2, stride 2) keeps the tree over each
window, which is then the same lifted model. The same map either way; a different lifted
model where the form changes (benchmarks' graph slices compare them).

Geometry: any kernel, stride and dilation (the first convolution reads the dilated window).
Padding and ceil_mode are exact only when the pool's input is known to be non-negative (it
follows a ReLU, or another activation whose range is [0, ...)): torch pads max-pooling with
-inf, a convolution with 0, and the two agree exactly when every window holds at least one
real value (torch guarantees that) and the real values are >= 0. Partial windows of
ceil_mode are zero-padded windows in the same way. Without that knowledge both settings are
refused with this reason; return_indices always is (it returns integers).

Lifting rewrites every MaxPool2d by default (``REWRITE_MAXPOOL``); each rewrite adds
``relu_levels(kernel)`` lifted layers (the tree) or those of its two one-dimensional trees
(rows, then columns) and is listed in ``LiftedNetwork.rewrites``.
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


def why_not_rewritable(m: nn.MaxPool2d, nonneg_input: bool = False) -> str | None:
    """Why the exact rewrite does not apply to this layer, or None if it does.

    ``nonneg_input``: the pool's input is known to be >= 0 (it follows a ReLU), which makes
    zero padding and ceil_mode's partial windows exact (see the module docstring)."""
    if m.return_indices:
        return "return_indices=True returns integer indices, not a tensor of values"
    if nonneg_input:
        return None
    if _pair(m.padding) != (0, 0):
        return (f"padding={m.padding} pads with -inf, which a zero-padded convolution equals "
                "only for non-negative input, and this pool does not follow a ReLU")
    if m.ceil_mode:
        return ("ceil_mode=True makes partial windows, which zero-padded windows equal only for "
                "non-negative input, and this pool does not follow a ReLU")
    return None


def _border_pads(m: nn.MaxPool2d, in_hw: tuple[int, int] | None) -> tuple[int, int, int, int]:
    """(left, right, top, bottom) zero padding that makes every window of ``m`` (padding and
    ceil_mode's partial windows included) a full window of a padding-free convolution."""
    (kh, kw), (ph, pw), (dh, dw) = _pair(m.kernel_size), _pair(m.padding), _pair(m.dilation)
    sh, sw = _pair(m.stride if m.stride else m.kernel_size)
    if not m.ceil_mode:
        return pw, pw, ph, ph
    if in_hw is None:
        raise UnsupportedLayerError("MaxPool2d with ceil_mode=True: the rewrite needs the input "
                                    "size; pass in_hw")
    ends = []
    for size, k, s, p, d in ((in_hw[0], kh, sh, ph, dh), (in_hw[1], kw, sw, pw, dw)):
        span = d * (k - 1) + 1
        out = -(-(size + 2 * p - span) // s) + 1  # ceil, as torch
        if (out - 1) * s >= size + p:  # torch drops a window that starts in the right padding
            out -= 1
        ends.append(max((out - 1) * s + span - size - p, 0))
    return pw, ends[1], ph, ends[0]


def _level_sizes(n: int) -> list[int]:
    """Units per ReLU level of the tree over n values, without building it: m values make
    3 units per pair and 2 for an odd one out, and leave ceil(m / 2) values."""
    sizes, m = [], n
    while m > 1:
        sizes.append(3 * (m // 2) + 2 * (m % 2))
        m = (m + 1) // 2
    return sizes


def _levels(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(U, V) per ReLU level: units = U @ (previous ReLU outputs, or the window at level 1),
    values = V @ relu(units); the next level's U is built from V's rows. Every row has at
    most three non-zeros, so each matrix is filled by index (never from an n x n identity)."""
    out: list[tuple[torch.Tensor, torch.Tensor]] = []
    # the values as sparse rows {column: coefficient}; at level 1 the features themselves
    values: list[dict[int, float]] = [{j: 1.0} for j in range(n)]
    width = n
    while len(values) > 1:
        m = len(values)
        rows: list[dict[int, float]] = []
        nxt: list[tuple[int, tuple[float, ...]]] = []
        for j in range(0, m - 1, 2):
            a, b = values[j], values[j + 1]
            minus_b = {k: -v for k, v in b.items()}
            a_minus_b = dict(a)
            for k, v in minus_b.items():
                a_minus_b[k] = a_minus_b.get(k, 0.0) + v
            nxt.append((len(rows), (1.0, 1.0, -1.0)))
            rows += [a_minus_b, b, minus_b]
        if m % 2:
            c = values[m - 1]
            nxt.append((len(rows), (1.0, -1.0)))
            rows += [c, {k: -v for k, v in c.items()}]
        units = torch.zeros(len(rows), width, dtype=torch.float64)
        for i, row in enumerate(rows):
            for k, v in row.items():
                units[i, k] = v
        combine = torch.zeros(len(nxt), len(rows), dtype=torch.float64)
        for i, (base, coef) in enumerate(nxt):
            combine[i, base:base + len(coef)] = torch.tensor(coef, dtype=torch.float64)
        out.append((units, combine))
        # the next level's values are combinations of this level's units
        values = [{base + t: c for t, c in enumerate(coef)} for base, coef in nxt]
        width = len(rows)
    return out


def rewrite_size(m: nn.MaxPool2d, in_shape: Sequence[int]) -> tuple[int, int]:
    """(lifted units, weight values) that the rewrite of ``m`` on a (C, H, W) input adds,
    from its geometry alone (nothing is built): what the load budget charges before the
    rewrite's convolutions and ReLU layers exist."""
    channels, hw = int(in_shape[0]), (int(in_shape[1]), int(in_shape[2]))
    kh, kw = _pair(m.kernel_size)
    if kh * kw == 1:
        return 0, channels
    kernel, dilation = (kh, kw), _pair(m.dilation)
    stride = _pair(m.stride if m.stride else m.kernel_size)
    left, right, top, bottom = _border_pads(m, hw)
    padded = (hw[0] + top + bottom, hw[1] + left + right)
    if _rows_first(m, hw):
        units = separable_units(padded, kernel, stride, dilation)
        rows, columns = _level_sizes(kw), _level_sizes(kh)
        weights = _tree_weights(rows, kw, 1) - rows[-1] + _tree_weights(columns, kh, rows[-1])
    else:
        units = tree_units(padded, kernel, stride, dilation)
        levels = _level_sizes(kh * kw)
        weights = _tree_weights(levels, kh * kw, 1)
    return channels * units, channels * weights


def _tree_weights(levels: list[int], window: int, in_per_group: int) -> int:
    """Weight values per channel of one tree's convolutions and its final combination (the
    rows' combination is merged into the columns' first convolution instead)."""
    rest = sum(a * b for a, b in zip(levels[1:], levels[:-1], strict=True))
    return levels[0] * in_per_group * window + rest + levels[-1]


def maxpool_as_relu(m: nn.MaxPool2d, channels: int, *, nonneg_input: bool = False,
                    in_hw: tuple[int, int] | None = None) -> nn.Sequential:
    """The exact ReLU form of ``m`` on ``channels`` channels (see the module docstring).

    ``nonneg_input``: the pool's input is >= 0, so padding and ceil_mode are allowed (zero
    padding, a leading ZeroPad2d); ``in_hw``: the input's (H, W), needed for ceil_mode. Its
    cost is :func:`rewrite_size`, which the memory checks charge before this is called."""
    why = why_not_rewritable(m, nonneg_input)
    if why is not None:
        raise UnsupportedLayerError(f"MaxPool2d cannot be rewritten exactly: {why}. Put it "
                                    "after a ReLU, or use padding=0, ceil_mode=False, or "
                                    "nn.AvgPool2d.")
    kh, kw = _pair(m.kernel_size)
    stride = _pair(m.stride if m.stride else m.kernel_size)
    dilation = _pair(m.dilation)
    pads = _border_pads(m, in_hw)
    lead: list[nn.Module] = [nn.ZeroPad2d(pads)] if any(pads) else []
    if kh * kw == 1:
        conv = nn.Conv2d(channels, channels, 1, stride, groups=channels, bias=False)
        conv.weight.data.fill_(1.0)
        return nn.Sequential(*lead, conv)
    if _rows_first(m, in_hw):
        # rows first, then columns: vertically overlapping windows share their rows' maxima
        rows, carried = _tree(channels, (1, kw), (1, stride[1]), (1, dilation[1]))
        columns, carried = _tree(channels, (kh, 1), (stride[0], 1), (dilation[0], 1), carried)
        return nn.Sequential(*lead, *rows, *columns, _combination(channels, carried))
    levels, carried = _tree(channels, (kh, kw), stride, dilation)
    return nn.Sequential(*lead, *levels, _combination(channels, carried))


def _rows_first(m: nn.MaxPool2d, in_hw: tuple[int, int] | None) -> bool:
    """Whether the rewrite of ``m`` on an (H, W) input takes the rows-then-columns form: it
    has fewer lifted units than the tree over each window (unknown without the size)."""
    if in_hw is None:
        return False
    kernel, dilation = _pair(m.kernel_size), _pair(m.dilation)
    stride = _pair(m.stride if m.stride else m.kernel_size)
    left, right, top, bottom = _border_pads(m, in_hw)
    padded = (in_hw[0] + top + bottom, in_hw[1] + left + right)
    return separable_units(padded, kernel, stride, dilation) < \
        tree_units(padded, kernel, stride, dilation)


def _units(n: int) -> int:
    """Lifted units per window of n values (all levels of the tree)."""
    return sum(_level_sizes(n))


def _out(size: int, k: int, s: int, d: int) -> int:
    return (size - d * (k - 1) - 1) // s + 1


def tree_units(padded: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int],
               dilation: tuple[int, int]) -> int:
    """Lifted units per channel of the tree over whole windows, on a padded (H, W) input."""
    oh = _out(padded[0], kernel[0], stride[0], dilation[0])
    ow = _out(padded[1], kernel[1], stride[1], dilation[1])
    return oh * ow * _units(kernel[0] * kernel[1])


def separable_units(padded: tuple[int, int], kernel: tuple[int, int],
                    stride: tuple[int, int], dilation: tuple[int, int]) -> int:
    """The same for the maximum over each row's part of the window, then over the rows."""
    ow = _out(padded[1], kernel[1], stride[1], dilation[1])
    oh = _out(padded[0], kernel[0], stride[0], dilation[0])
    return padded[0] * ow * _units(kernel[1]) + oh * ow * _units(kernel[0])


def _tree(channels: int, kernel: tuple[int, int], stride: tuple[int, int],
          dilation: tuple[int, int], carried: tuple[torch.Tensor, int] | None = None,
          ) -> tuple[list[nn.Module], tuple[torch.Tensor, int]]:
    """The ReLU levels of the tree of pairs over windows of ``kernel`` (grouped convolutions
    and ReLUs), and what they leave: (the combination of the last ReLUs that is each window's
    maximum, the ReLUs per channel). ``carried``: the same of a tree before this one (rows,
    then columns), whose combination the first convolution here applies to its window's
    values, instead of a layer of its own."""
    kh, kw = kernel
    prev_combine, in_per_group = carried if carried is not None else (None, 1)
    mods: list[nn.Module] = []
    for units, combine in _levels(kh * kw):
        u = units.shape[0]
        if not mods:  # read the window: weight (u, in, kh, kw) per channel, the window's
            # values being the features themselves or the carried combination
            w = units.reshape(u, 1, kh, kw) if prev_combine is None else \
                units.reshape(u, 1, kh, kw) * prev_combine.reshape(1, in_per_group, 1, 1)
            conv = nn.Conv2d(channels * in_per_group, channels * u, (kh, kw), stride,
                             groups=channels, bias=False, dilation=dilation)
        else:
            w = units.reshape(u, in_per_group, 1, 1)  # rows: combinations of the last ReLUs
            conv = nn.Conv2d(channels * in_per_group, channels * u, 1, groups=channels,
                             bias=False)
        with torch.no_grad():
            conv.weight.copy_(w.repeat(channels, 1, 1, 1))
        mods += [conv, nn.ReLU()]
        prev_combine, in_per_group = combine, u
    assert prev_combine is not None  # a window of two or more values: at least one level
    return mods, (prev_combine, in_per_group)


def _combination(channels: int, carried: tuple[torch.Tensor, int]) -> nn.Conv2d:
    """The last layer: each window's maximum as the combination of the last ReLUs (affine:
    the lifted network merges it into the next layer's W)."""
    combine, in_per_group = carried
    last = nn.Conv2d(channels * in_per_group, channels, 1, groups=channels, bias=False)
    with torch.no_grad():
        last.weight.copy_(combine.reshape(1, in_per_group, 1, 1).repeat(channels, 1, 1, 1))
    return last


def rewrite_maxpool(module: nn.Module, input_shape: Sequence[int]) -> nn.Module:
    """``module`` with every nn.MaxPool2d replaced in place by its exact ReLU form.

    ``input_shape`` (one sample, e.g. (1, 28, 28)) is needed to know each pool's channels; a
    zero batch is run through the module once with hooks that record them. Returns the module.
    """
    channels: dict[int, tuple[int, int, int]] = {}
    hooks = [sub.register_forward_pre_hook(
        lambda mod, args: channels.__setitem__(
            id(mod), (int(args[0].shape[1]), int(args[0].shape[2]), int(args[0].shape[3]))))
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
                chans, height, width = channels[id(child)]
                setattr(parent, cname,
                        maxpool_as_relu(child, chans, in_hw=(height, width)).to(dtype))
    return module


#: Whether lifting rewrites MaxPool2d layers. On by default: the rewrite is the same forward
#: map, and without it a network with max-pooling cannot be lifted at all. Off only inside
#: :func:`keep_maxpool` (tests of the refusal itself).
REWRITE_MAXPOOL: ContextVar[bool] = ContextVar("lbi_rewrite_maxpool", default=True)


@contextlib.contextmanager
def keep_maxpool() -> Iterator[None]:
    """Within this block, lifting refuses MaxPool2d instead of rewriting it."""
    token = REWRITE_MAXPOOL.set(False)
    try:
        yield
    finally:
        REWRITE_MAXPOOL.reset(token)


@contextlib.contextmanager
def lift_maxpool_as_relu() -> Iterator[None]:
    """Within this block, lifting (any loader) replaces MaxPool2d by its exact ReLU form:
    what lifting does by default now; kept for callers written when it was opt-in
    (``lbi convert --maxpool-relu``)."""
    token = REWRITE_MAXPOOL.set(True)
    try:
        yield
    finally:
        REWRITE_MAXPOOL.reset(token)


def as_max_pool(m: nn.Module, in_hw: tuple[int, int]) -> nn.Module:
    """An adaptive (or global) max-pool whose output size divides its input size is the
    max-pool with window and stride H/oh x W/ow: the same windows, so the same values; it is
    then rewritten exactly like any MaxPool2d. Other modules come back as they are (an
    adaptive pool whose windows overlap or differ in size stays refused)."""
    if not isinstance(m, nn.AdaptiveMaxPool2d) or m.return_indices:
        return m
    size = m.output_size if isinstance(m.output_size, tuple) else (m.output_size,) * 2
    out = tuple(in_hw[i] if v is None else int(v) for i, v in enumerate(size))
    if any(o <= 0 or h % o for h, o in zip(in_hw, out, strict=True)):
        return m
    kernel = (in_hw[0] // out[0], in_hw[1] // out[1])
    return nn.MaxPool2d(kernel, kernel)


def rewrite_record(m: nn.MaxPool2d, label: str, in_shape: Sequence[int]) -> dict:
    """What result.json and the network panel say of one rewritten pool (``in_shape``:
    its input's (C, H, W)), with the form the rewrite took and the lifted ReLU layers it
    adds."""
    hw = (int(in_shape[-2]), int(in_shape[-1])) if len(in_shape) >= 2 else None
    rows_first = _rows_first(m, hw)
    kh, kw = _pair(m.kernel_size)
    added = relu_levels((1, kw)) + relu_levels((kh, 1)) if rows_first else \
        relu_levels((kh, kw))
    return {"layer": label, "kernel_size": list(_pair(m.kernel_size)),
            "stride": list(_pair(m.stride or m.kernel_size)), "padding": list(_pair(m.padding)),
            "dilation": list(_pair(m.dilation)), "ceil_mode": bool(m.ceil_mode),
            "in_shape": list(in_shape),
            "form": "rows, then columns" if rows_first else "tree over each window",
            "lifted_layers_added": added}


def relu_levels(kernel_size: int | Sequence[int]) -> int:
    """How many lifted ReLU layers the tree over whole windows of this kernel adds (the
    rows-then-columns form adds those of its two one-dimensional trees)."""
    kh, kw = _pair(kernel_size)
    return math.ceil(math.log2(kh * kw)) if kh * kw > 1 else 0
