"""Convolution and average-pooling maps, with explicit adjoints (no autograd per call).

The adjoint of a strided convolution is the transposed convolution with the same weight; the
only subtlety is ``output_padding``, which picks the right input size among the ones that
give the same output size: op = (H_padded - d (k - 1) - 1) mod s (< s, as torch requires).
Average pooling is D * (window sums), D = 1 / divisor per output pixel, so its adjoint is a
transposed convolution with a ones kernel applied to D * r (MATH.md §5.4: "verify <Wx, r> =
<x, W^T r> numerically" — tests/engine/test_operators.py does, for many parameter sets).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from lbi_engine.errors import ShapeMismatchError
from lbi_engine.operators import LinearMap, PadMap, ScaleShiftMap
from lbi_engine.operators._base import AffineMap, exact_norm_of_matrix, operator_norm


def _pair(v: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    t = tuple(int(a) for a in v)
    return (t[0], t[0]) if len(t) == 1 else (t[0], t[1])


def _conv_out(size: int, pad_total: int, dil: int, k: int, s: int) -> int:
    return (size + pad_total - dil * (k - 1) - 1) // s + 1


def _phase_weight(weight: Tensor, sh: int, sw: int) -> Tensor:
    """The weight of Conv2dMap's polyphase adjoint: output phase (c, a, b) (rows a mod sh,
    columns b mod sw of the padded input) is a stride-1 correlation of r with the taps
    W[o, c, a + sh t, b + sw u], flipped (the adjoint of a correlation is a convolution).
    Shape (C_in sh sw, C_out, ceil(kh/sh), ceil(kw/sw)), channels in pixel_shuffle's order."""
    cout, cin, kh, kw = weight.shape
    th, tw = -(-kh // sh), -(-kw // sw)
    ext = weight.new_zeros(cout, cin, sh * th, sw * tw)
    ext[:, :, :kh, :kw] = weight
    taps = ext.reshape(cout, cin, th, sh, tw, sw).flip(2).flip(4)  # [o, c, t, a, u, b]
    return taps.permute(1, 3, 5, 0, 2, 4).reshape(cin * sh * sw, cout, th, tw).contiguous()


class Conv2dMap(AffineMap):
    """nn.Conv2d with zero padding. ``pads`` = (top, bottom, left, right), asymmetric allowed
    (padding='same' with an even effective kernel, or ONNX pads)."""

    kind = "Conv2d"

    def __init__(self, weight: Tensor, bias: Tensor | None, in_shape: Sequence[int],
                 stride: int | Sequence[int] = 1, pads: Sequence[int] | int = 0,
                 dilation: int | Sequence[int] = 1, groups: int = 1) -> None:
        self.weight = weight
        self.stride, self.dilation, self.groups = _pair(stride), _pair(dilation), int(groups)
        if isinstance(pads, int):
            pads = (pads, pads, pads, pads)
        elif len(pads) == 2:
            pads = (pads[0], pads[0], pads[1], pads[1])
        self.pads = tuple(int(p) for p in pads)
        c, h, w = (int(v) for v in in_shape)
        cout, cin_g, kh, kw = weight.shape
        if cin_g * self.groups != c:
            raise ShapeMismatchError(
                f"Conv2d expects {cin_g * self.groups} input channels but samples have shape "
                f"{tuple(in_shape)}.")
        (sh, sw), (dh, dw) = self.stride, self.dilation
        pt, pb, pl, pr = self.pads
        ho, wo = _conv_out(h, pt + pb, dh, kh, sh), _conv_out(w, pl + pr, dw, kw, sw)
        if ho < 1 or wo < 1:
            raise ShapeMismatchError(f"Conv2d kernel {kh}x{kw} is larger than the padded input "
                                     f"{h + pt + pb}x{w + pl + pr}; use a larger input.")
        super().__init__((c, h, w), (cout, ho, wo), bias)
        # output_padding that makes conv_transpose2d return the padded input size exactly
        self._out_pad = ((h + pt + pb - dh * (kh - 1) - 1) % sh,
                         (w + pl + pr - dw * (kw - 1) - 1) % sw)
        self._symmetric = pt == pb and pl == pr
        # one input channel per group and several outputs each (the max-pool rewrite's first
        # layer, MATH.md §5.6): conv_transpose2d takes a slow path there on the CPU, so the
        # adjoint is W^T per group followed by col2im (F.fold)
        self._fold_adjoint = self.groups > 1 and cin_g == 1 and cout > self.groups
        # a strided stem (few input channels, a kernel of 5 or more): conv_transpose2d is
        # slower there than its polyphase form, s^2 stride-1 convolutions in one
        # (``_adjoint_by_phases``); with 3x3 and 1x1 kernels it is the faster, so they keep it
        # (both rules: docs/developer/calibration.md, benchmarks.studies.conv_adjoints)
        self._by_phases = self.groups == 1 and max(sh, sw) > 1 and (dh, dw) == (1, 1) \
            and min(kh, kw) >= 5
        # (the weight it was made from, the phase weight): made on first use, and again when
        # the weight is replaced (``to``, ``scaled``)
        self._phase_cache: tuple[Tensor, Tensor] | None = None

    def _conv(self, x: Tensor, bias: Tensor | None) -> Tensor:
        pt, pb, pl, pr = self.pads
        if self._symmetric:
            return F.conv2d(x, self.weight, bias, self.stride, (pt, pl), self.dilation, self.groups)
        return F.conv2d(F.pad(x, (pl, pr, pt, pb)), self.weight, bias, self.stride, 0,
                        self.dilation, self.groups)

    def linear(self, x: Tensor) -> Tensor:
        return self._conv(x, None)

    def apply(self, x: Tensor) -> Tensor:
        return self._conv(x, self.bias)

    def adjoint(self, r: Tensor) -> Tensor:
        pt, pb, pl, pr = self.pads
        if self._fold_adjoint:
            return self._adjoint_by_fold(r)
        if self._by_phases:
            return self._adjoint_by_phases(r)
        if self._symmetric:
            return F.conv_transpose2d(r, self.weight, None, self.stride, (pt, pl), self._out_pad,
                                      self.groups, self.dilation)
        full = F.conv_transpose2d(r, self.weight, None, self.stride, 0, self._out_pad,
                                  self.groups, self.dilation)
        return full[..., pt:pt + self.in_shape[1], pl:pl + self.in_shape[2]]

    def _adjoint_by_fold(self, r: Tensor) -> Tensor:
        """W^T r for one input channel per group: per group the (taps x outputs) block of W^T,
        then the taps summed back onto the padded input (col2im), then the padding cropped."""
        g, (cout, _, kh, kw) = self.groups, self.weight.shape
        batch, (_, ho, wo) = r.shape[0], self.out_shape
        per_group = self.weight.reshape(g, cout // g, kh * kw)
        cols = torch.einsum("gmk,bgmp->bgkp", per_group, r.reshape(batch, g, cout // g, ho * wo))
        pt, pb, pl, pr = self.pads
        _, h, w = self.in_shape
        full = F.fold(cols.reshape(batch, g * kh * kw, ho * wo), (h + pt + pb, w + pl + pr),
                      (kh, kw), dilation=self.dilation, stride=self.stride)
        return full[..., pt:pt + h, pl:pl + w]

    def _adjoint_by_phases(self, r: Tensor) -> Tensor:
        """W^T r as s_h s_w stride-1 correlations (one per output phase, stacked as channels)
        interleaved by pixel_shuffle, then cropped (or zero-filled) to the unpadded input."""
        sh, sw = self.stride
        if self._phase_cache is None or self._phase_cache[0] is not self.weight:
            self._phase_cache = (self.weight, _phase_weight(self.weight, sh, sw))
        phases = self._phase_cache[1]
        taps_h, taps_w = phases.shape[-2:]
        out = F.conv2d(r, phases, None, 1, (taps_h - 1, taps_w - 1))
        if sh != sw:  # pixel_shuffle takes one factor: interleave by hand
            b, _, m, n = out.shape
            c = self.in_shape[0]
            full = out.reshape(b, c, sh, sw, m, n).permute(0, 1, 4, 2, 5, 3) \
                .reshape(b, c, m * sh, n * sw)
        else:
            full = F.pixel_shuffle(out, sh)
        pt, _, pl, _ = self.pads
        _, h, w = self.in_shape
        rows, cols = full.shape[-2:]
        return F.pad(full, (-pl, pl + w - cols, -pt, pt + h - rows))

    def _tensors(self) -> dict[str, Tensor | None]:
        return {"weight": self.weight, "bias": self.bias}

    def describe(self) -> str:
        cout, cin_g, kh, kw = self.weight.shape
        pt, pb, pl, pr = self.pads
        pad = str(pt) if len(set(self.pads)) == 1 else f"{self.pads}"
        k = str(kh) if kh == kw else f"{kh}x{kw}"
        s = str(self.stride[0]) if self.stride[0] == self.stride[1] else str(self.stride)
        extra = "" if self.dilation == (1, 1) else f", d={self.dilation}"
        extra += "" if self.groups == 1 else f", g={self.groups}"
        return f"Conv2d {cin_g * self.groups}->{cout}, k={k}, s={s}, p={pad}{extra}"


class ConvTranspose2dMap(AffineMap):
    """nn.ConvTranspose2d; its adjoint is conv2d with the same weight (cropped when
    output_padding >= stride, which torch allows if dilation > stride)."""

    kind = "ConvTranspose2d"

    def __init__(self, weight: Tensor, bias: Tensor | None, in_shape: Sequence[int],
                 stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
                 output_padding: int | Sequence[int] = 0, dilation: int | Sequence[int] = 1,
                 groups: int = 1) -> None:
        self.weight = weight
        self.stride, self.padding = _pair(stride), _pair(padding)
        self.output_padding, self.dilation = _pair(output_padding), _pair(dilation)
        self.groups = int(groups)
        c, h, w = (int(v) for v in in_shape)
        cin, cout_g, kh, kw = weight.shape
        if cin != c:
            raise ShapeMismatchError(f"ConvTranspose2d expects {cin} input channels but samples "
                                     f"have shape {tuple(in_shape)}.")
        (sh, sw), (ph, pw) = self.stride, self.padding
        (oph, opw), (dh, dw) = self.output_padding, self.dilation
        ho = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
        wo = (w - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
        if ho < 1 or wo < 1:
            raise ShapeMismatchError(f"ConvTranspose2d padding {self.padding} leaves no output "
                                     f"for input {h}x{w}; use less padding.")
        super().__init__((c, h, w), (cout_g * self.groups, ho, wo), bias)

    def _tensors(self) -> dict[str, Tensor | None]:
        return {"weight": self.weight, "bias": self.bias}

    def linear(self, x: Tensor) -> Tensor:
        return F.conv_transpose2d(x, self.weight, None, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)

    def apply(self, x: Tensor) -> Tensor:
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)

    def adjoint(self, r: Tensor) -> Tensor:
        y = F.conv2d(r, self.weight, None, self.stride, self.padding, self.dilation, self.groups)
        return y[..., : self.in_shape[1], : self.in_shape[2]]

    def describe(self) -> str:
        cin, cout_g, kh, kw = self.weight.shape
        k = str(kh) if kh == kw else f"{kh}x{kw}"
        s = str(self.stride[0]) if self.stride[0] == self.stride[1] else str(self.stride)
        p = str(self.padding[0]) if self.padding[0] == self.padding[1] else str(self.padding)
        extra = "" if self.output_padding == (0, 0) else f", op={self.output_padding}"
        extra += "" if self.dilation == (1, 1) else f", d={self.dilation}"
        extra += "" if self.groups == 1 else f", g={self.groups}"
        return f"ConvTranspose2d {cin}->{cout_g * self.groups}, k={k}, s={s}, p={p}{extra}"


class AvgPool2dMap(AffineMap):
    """nn.AvgPool2d with every option (padding, ceil_mode, count_include_pad,
    divisor_override): forward by F.avg_pool2d itself, adjoint via D and a ones kernel."""

    kind = "AvgPool2d"

    def __init__(self, in_shape: Sequence[int], kernel_size: int | Sequence[int],
                 stride: int | Sequence[int] | None = None, padding: int | Sequence[int] = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        self.kernel = _pair(kernel_size)
        self.stride = _pair(stride) if stride not in (None, [], ()) else self.kernel
        self.padding = _pair(padding)
        self.ceil_mode, self.count_include_pad = bool(ceil_mode), bool(count_include_pad)
        self.divisor_override = divisor_override
        c, h, w = (int(v) for v in in_shape)
        ones = torch.ones(1, 1, h, w, dtype=torch.float64)
        with torch.no_grad():
            avg1 = self._pool(ones)  # = count_valid / divisor per output pixel
        ho, wo = avg1.shape[-2:]
        super().__init__((c, h, w), (c, ho, wo), None)
        (kh, kw), (sh, sw), (ph, pw) = self.kernel, self.stride, self.padding
        # count_valid: window sums of ones over the zero-padded input, padded far enough on
        # the right/bottom to hold every window (ceil_mode windows may hang over the edge).
        eh, ew = max(0, (ho - 1) * sh + kh - ph - h), max(0, (wo - 1) * sw + kw - pw - w)
        padded = F.pad(ones, (pw, ew, ph, eh))
        count = F.conv2d(padded, torch.ones(1, 1, kh, kw, dtype=torch.float64), stride=self.stride)
        count = count[..., :ho, :wo]
        self._d = torch.where(count > 0, avg1 / count.clamp_min(1), torch.zeros_like(avg1))[0, 0]
        self._d_cache: dict[tuple[torch.device, torch.dtype], Tensor] = {}
        # windows that tile the input without overlap or padding (AvgPool2d(k) with floor
        # mode, the usual LeNet pooling): the adjoint spreads D r over each window, a copy
        # (expand + reshape) cheaper than the transposed convolution on the CPU
        # (docs/developer/calibration.md)
        self._tiles = (self.kernel == self.stride and self.padding == (0, 0)
                       and ho * kh <= h and wo * kw <= w)

    def _pool(self, x: Tensor) -> Tensor:
        return F.avg_pool2d(x, self.kernel, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def linear(self, x: Tensor) -> Tensor:
        return self._pool(x)

    def _d_like(self, r: Tensor) -> Tensor:
        key = (r.device, r.dtype)
        if key not in self._d_cache:
            self._d_cache[key] = self._d.to(device=r.device, dtype=r.dtype)
        return self._d_cache[key]

    def adjoint(self, r: Tensor) -> Tensor:
        b, c, ho, wo = r.shape
        _, h, w = self.in_shape
        (kh, kw), (ph, pw) = self.kernel, self.padding
        if self._tiles:
            spread = (r * self._d_like(r))[:, :, :, None, :, None].expand(b, c, ho, kh, wo, kw)
            spread = spread.reshape(b, c, ho * kh, wo * kw)
            if ho * kh == h and wo * kw == w:
                return spread
            return F.pad(spread, (0, w - wo * kw, 0, h - ho * kh))  # rows/cols no window reads
        ones = torch.ones(1, 1, kh, kw, dtype=r.dtype, device=r.device)
        t = F.conv_transpose2d((r * self._d_like(r)).reshape(b * c, 1, ho, wo), ones,
                               stride=self.stride)
        lt_h, lt_w = t.shape[-2:]  # covers padded coordinates [-p, -p + lt)
        t = F.pad(t, (-pw, pw + w - lt_w, -ph, ph + h - lt_h))
        return t.reshape(b, c, h, w)

    def _compute_norm(self) -> tuple[float, str]:
        # channels are independent copies of one single-channel map: norm of that map
        single = AvgPool2dMap((1, *self.in_shape[1:]), self.kernel, self.stride, self.padding,
                              self.ceil_mode, self.count_include_pad, self.divisor_override)
        return operator_norm(single)

    def describe(self) -> str:
        opts = [f"k={self.kernel[0] if self.kernel[0] == self.kernel[1] else self.kernel}",
                f"s={self.stride[0] if self.stride[0] == self.stride[1] else self.stride}"]
        if self.padding != (0, 0):
            opts.append(f"p={self.padding}")
        if self.ceil_mode:
            opts.append("ceil_mode")
        if not self.count_include_pad:
            opts.append("count_include_pad=False")
        if self.divisor_override:
            opts.append(f"divisor={self.divisor_override}")
        return "AvgPool2d " + ", ".join(opts)


def _adaptive_matrix(n_in: int, n_out: int) -> Tensor:
    """Rows average [floor(i n/o), ceil((i+1) n/o)): torch's adaptive pooling windows."""
    a = torch.zeros(n_out, n_in, dtype=torch.float64)
    for i in range(n_out):
        s, e = (i * n_in) // n_out, math.ceil((i + 1) * n_in / n_out)
        a[i, s:e] = 1.0 / (e - s)
    return a


class AdaptiveAvgPool2dMap(AffineMap):
    """nn.AdaptiveAvgPool2d for any sizes: separable, y = A_h x A_w^T per channel."""

    kind = "AdaptiveAvgPool2d"

    def __init__(self, in_shape: Sequence[int], output_size: int | Sequence[int | None]) -> None:
        c, h, w = (int(v) for v in in_shape)
        oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
        oh, ow = int(oh if oh is not None else h), int(ow if ow is not None else w)
        super().__init__((c, h, w), (c, oh, ow), None)
        self.a_h, self.a_w = _adaptive_matrix(h, oh), _adaptive_matrix(w, ow)

    def _tensors(self) -> dict[str, Tensor | None]:
        return {}  # a_h, a_w are float64 helpers cast to the data's dtype in adjoint()

    def linear(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(x, (self.out_shape[1], self.out_shape[2]))

    def adjoint(self, r: Tensor) -> Tensor:
        a_h, a_w = self.a_h.to(r), self.a_w.to(r)
        return a_h.T @ r @ a_w

    def _compute_norm(self) -> tuple[float, str]:
        return exact_norm_of_matrix(self.a_h) * exact_norm_of_matrix(self.a_w), "exact"

    def describe(self) -> str:
        return f"AdaptiveAvgPool2d {self.in_shape[1]}x{self.in_shape[2]}->" \
               f"{self.out_shape[1]}x{self.out_shape[2]}"


def fold_channel_affine(prev: AffineMap, ss: ScaleShiftMap) -> AffineMap | None:
    """prev followed by a per-output-channel scale/shift, as one layer of prev's kind.

    diag(s) (W x + b) + t = (diag(s) W) x + (s b + t). Returns None when prev is not a
    Linear/Conv2d/ConvTranspose2d whose output channels are ss's channels.
    """
    vec = ss.channel_vectors()
    if vec is None or prev.out_shape != ss.in_shape:
        return None
    s, t = vec
    bias = t if prev.bias is None else prev.bias * s + t
    if isinstance(prev, LinearMap) and len(prev.out_shape) == 1:
        return LinearMap(prev.weight * s[:, None], bias, prev.in_shape)
    if isinstance(prev, Conv2dMap):
        return Conv2dMap(prev.weight * s.reshape(-1, 1, 1, 1), bias, prev.in_shape, prev.stride,
                         prev.pads, prev.dilation, prev.groups)
    if isinstance(prev, ConvTranspose2dMap):
        g = prev.groups
        cin, cout_g, kh, kw = prev.weight.shape
        w = prev.weight.reshape(g, cin // g, cout_g, kh, kw) * s.reshape(g, 1, cout_g, 1, 1)
        return ConvTranspose2dMap(w.reshape(cin, cout_g, kh, kw), bias, prev.in_shape,
                                  prev.stride, prev.padding, prev.output_padding,
                                  prev.dilation, prev.groups)
    return None


def fold_pad_into_conv(pad: AffineMap, conv: AffineMap) -> AffineMap | None:
    """Zero padding followed by a convolution is one convolution with larger (possibly
    asymmetric) pads: ONNX exports of padding='same' arrive as Pad + Conv."""
    if not (isinstance(pad, PadMap) and isinstance(conv, Conv2dMap)) or len(pad.pads) != 4 \
            or min(pad.pads) < 0:
        return None
    left, right, top, bottom = pad.pads
    pt, pb, pl, pr = conv.pads
    return Conv2dMap(conv.weight, conv.bias, pad.in_shape, conv.stride,
                     (pt + top, pb + bottom, pl + left, pr + right), conv.dilation, conv.groups)
