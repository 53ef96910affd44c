"""ATen op -> torch.nn modules for the ``.pt2`` importer (the allow-list itself).

A room of :mod:`lbi_engine.models.pt2_import` (the graph walk is in ``_pt2_ops``). Each entry of
``_OPS`` reads the node's literal arguments (already decoded: constants are tensors from the
archive, the chain's tensor is ``("tensor", name)``) and appends modules lbi constructs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, Protocol

import torch
from torch import nn

from lbi_engine.models.importers import _load
from lbi_engine.operators import Reshape, ScaleShift


class _Translator(Protocol):
    """What the handlers use of ``_pt2_ops.GraphTranslator`` (which imports this module)."""

    shape: tuple[int, ...]

    def add(self, *modules: nn.Module) -> None: ...

    def refuse(self, why: str) -> NoReturn: ...

    def reshape_targets(self, size: list[Any]) -> list[list[int]]: ...


#: One op's translation: adds the module(s) doing what the op does, or refuses.
_Handler = Callable[[_Translator, dict[str, Any]], None]


def _pair(v: Any, default: int) -> tuple[int, int]:
    if v is None or v == []:
        return (default, default)
    if isinstance(v, int):
        return (v, v)
    v = list(v)
    return (int(v[0]), int(v[-1])) if len(v) in (1, 2) else (int(v[0]), int(v[1]))


def _opt(tr: _Translator, a: dict[str, Any], key: str) -> torch.Tensor | None:
    """An optional weight argument (a bias may be None)."""
    return None if a.get(key) is None else _const(tr, a, key)


def _const(tr: _Translator, a: dict[str, Any], key: str) -> torch.Tensor:
    v = a.get(key)
    if not isinstance(v, torch.Tensor):
        tr.refuse(f"its argument {key!r} must be a weight stored in the archive, but it is "
                  "computed in the graph")
    return v


def _linear(tr: _Translator, a: dict[str, Any]) -> None:
    w, b = _const(tr, a, "weight"), _opt(tr, a, "bias")
    if len(tr.shape) != 1:
        tr.refuse("nn.Linear on samples with more than one dim is not supported; flatten first")
    tr.add(_load(nn.Linear(w.shape[1], w.shape[0], bias=b is not None), weight=w, bias=b))


def _addmm(tr: _Translator, a: dict[str, Any]) -> None:  # bias + x @ W^T (decomposed nn.Linear)
    w, b = _const(tr, a, "mat2"), _const(tr, a, "self")
    alpha, beta = float(a.get("alpha", 1)), float(a.get("beta", 1))
    lin = nn.Linear(w.shape[0], w.shape[1])
    tr.add(_load(lin, weight=alpha * w.t(), bias=beta * b.reshape(-1)))


def _mm(tr: _Translator, a: dict[str, Any]) -> None:
    w = _const(tr, a, "mat2" if "mat2" in a else "other")
    if w.dim() != 2:
        tr.refuse("only x @ W with a constant 2-D W is affine here; use nn.Linear")
    tr.add(_load(nn.Linear(w.shape[0], w.shape[1], bias=False), weight=w.t()))


def _conv(tr: _Translator, a: dict[str, Any], transposed: bool) -> None:
    w, b = _const(tr, a, "weight"), _opt(tr, a, "bias")
    if w.dim() != 4 or len(tr.shape) != 3:
        tr.refuse("only 2-D convolutions on (C, H, W) samples are supported; use nn.Conv2d")
    groups = int(a.get("groups", 1))
    stride, dilation = _pair(a.get("stride"), 1), _pair(a.get("dilation"), 1)
    pad = a.get("padding")
    m: nn.Module
    if transposed:
        m = nn.ConvTranspose2d(w.shape[0], w.shape[1] * groups, (w.shape[2], w.shape[3]), stride,
                               _pair(pad, 0), _pair(a.get("output_padding"), 0), groups,
                               bias=b is not None, dilation=dilation)
    else:
        padding: Any = pad if isinstance(pad, str) else _pair(pad, 0)
        m = nn.Conv2d(w.shape[1] * groups, w.shape[0], (w.shape[2], w.shape[3]), stride, padding,
                      dilation, groups, bias=b is not None)
    tr.add(_load(m, weight=w, bias=b))


def _convolution(tr: _Translator, a: dict[str, Any]) -> None:
    _conv(tr, a, bool(a.get("transposed", False)))


def _batch_norm(tr: _Translator, a: dict[str, Any]) -> None:
    if a.get("training"):
        tr.refuse("BatchNorm in training mode uses batch statistics; call model.eval() before "
                  "torch.export.export")
    mean, var = _const(tr, a, "running_mean"), _const(tr, a, "running_var")
    w, b = _opt(tr, a, "weight"), _opt(tr, a, "bias")
    cls = nn.BatchNorm2d if len(tr.shape) == 3 else nn.BatchNorm1d
    bn = cls(mean.shape[0], eps=float(a.get("eps", 1e-5)), affine=w is not None)
    tr.add(_load(bn, weight=w, bias=b, running_mean=mean, running_var=var))


def _avg_pool(tr: _Translator, a: dict[str, Any]) -> None:
    k = _pair(a["kernel_size"], 1)
    s = _pair(a.get("stride"), 0)
    tr.add(nn.AvgPool2d(k, s if s != (0, 0) else k, _pair(a.get("padding"), 0),
                        bool(a.get("ceil_mode", False)), bool(a.get("count_include_pad", True)),
                        a.get("divisor_override")))


def _mean(tr: _Translator, a: dict[str, Any]) -> None:
    dims: list[int] = list(a.get("dim") or [])
    rank = len(tr.shape) + 1
    if rank != 4 or sorted(int(d) % rank for d in dims) != [2, 3]:
        tr.refuse(f"mean over dims {dims}: only the mean over H and W of (N, C, H, W) (global "
                  "average pooling) is supported; use nn.AdaptiveAvgPool2d(1)")
    tr.add(nn.AdaptiveAvgPool2d(1))
    if not a.get("keepdim", False):
        tr.add(nn.Flatten())


def _reshape(tr: _Translator, a: dict[str, Any]) -> None:
    size = a.get("size") if "size" in a else a.get("shape")
    if not isinstance(size, (list, tuple)):
        tr.refuse("its target shape is not a list of sizes")
    outs = []
    targets = tr.reshape_targets(list(size))
    for batch, target in zip((2, 3), targets, strict=True):
        try:
            outs.append(torch.empty((batch, *tr.shape), device="meta").reshape(target).shape)
        except RuntimeError as exc:
            tr.refuse(f"shape {list(size)} does not fit samples of shape {tr.shape}: {exc}")
    if outs[0][0] != 2 or outs[1][0] != 3 or outs[0][1:] != outs[1][1:]:
        tr.refuse(f"view/reshape to {list(size)} does not keep the batch dimension first; use "
                  "x.reshape(x.size(0), ...) or nn.Flatten()")
    tr.add(Reshape(tuple(outs[0][1:])))


def _squeeze_like(tr: _Translator, a: dict[str, Any], unsqueeze: bool) -> None:
    raw = a.get("dim")
    dims: list[int] = [raw] if isinstance(raw, int) else list(raw or [])
    rank = len(tr.shape) + 1 + (len(dims) if unsqueeze else 0)
    if not dims or any(d % rank == 0 for d in dims):
        tr.refuse(f"(un)squeezing dim {dims} touches the batch dimension; use dims >= 1")
    y = torch.empty((2, *tr.shape), device="meta")
    for d in sorted(d % rank for d in dims):
        y = y.unsqueeze(d) if unsqueeze else y.squeeze(d)
    tr.add(Reshape(tuple(y.shape[1:])))


def _arith(op: str) -> _Handler:
    def build(tr: _Translator, a: dict[str, Any]) -> None:
        other = a.get("other")
        if isinstance(other, tuple):
            tr.refuse("it combines two computed tensors (a residual or branch)")
        c = torch.as_tensor(other, dtype=torch.float64) * float(a.get("alpha", 1))
        one, zero = torch.ones(()), torch.zeros(())
        mods = {"add": ScaleShift(one, c), "sub": ScaleShift(one, -c),
                "mul": ScaleShift(c, zero), "div": ScaleShift(1.0 / c, zero)}
        tr.add(mods[op])
    return build


def _act(factory: Callable[[dict[str, Any]], nn.Module]) -> _Handler:
    def build(tr: _Translator, a: dict[str, Any]) -> None:
        tr.add(factory(a))
    return build


def _clamp(tr: _Translator, a: dict[str, Any]) -> None:
    """clamp(min, max) (also a decomposed relu6/hardsigmoid): a one- or two-sided clip."""
    from lbi_engine.activations import activation_from_onnx
    from lbi_engine.models.layer_lifting import LiftedActivation

    lo, hi = a.get("min"), a.get("max")
    if isinstance(lo, tuple) or isinstance(hi, tuple) or isinstance(lo, torch.Tensor) or \
            isinstance(hi, torch.Tensor):
        tr.refuse("clamp with tensor bounds is not one proximal activation; use scalar bounds")
    act = activation_from_onnx("Clip", {"min": None if lo is None else float(lo),
                                        "max": None if hi is None else float(hi)})
    tr.add(LiftedActivation(act))


def _prelu(a: dict[str, Any]) -> nn.Module:
    w = a["weight"]
    m = nn.PReLU(w.numel())
    return _load(m, weight=w.reshape(-1))


def _elu(a: dict[str, Any]) -> nn.Module:
    if float(a.get("scale", 1)) != 1 or float(a.get("input_scale", 1)) != 1:
        return nn.SELU()  # refused by the lifting room with its reason
    return nn.ELU(float(a.get("alpha", 1.0)))


def _max_pool(a: dict[str, Any]) -> nn.Module:
    k = _pair(a["kernel_size"], 1)
    s = _pair(a.get("stride"), 0)
    return nn.MaxPool2d(k, s if s != (0, 0) else k, _pair(a.get("padding"), 0),
                        _pair(a.get("dilation"), 1), ceil_mode=bool(a.get("ceil_mode", False)))


def _layer_norm(a: dict[str, Any]) -> nn.Module:
    """Built so that the lifting room refuses it; its size comes from the file and is
    checked first: a LayerNorm normalises part of one sample, so it is no larger than one."""
    from lbi_engine.limits import _check_shape

    return nn.LayerNorm(list(_check_shape(a["normalized_shape"], "LayerNorm normalized_shape")))


_ACTS: dict[str, Callable[[dict[str, Any]], nn.Module]] = {
    "relu": lambda a: nn.ReLU(), "relu_": lambda a: nn.ReLU(), "sigmoid": lambda a: nn.Sigmoid(),
    "tanh": lambda a: nn.Tanh(), "hardsigmoid": lambda a: nn.Hardsigmoid(),
    "relu6": lambda a: nn.ReLU6(),
    "leaky_relu": lambda a: nn.LeakyReLU(float(a.get("negative_slope", 0.01))),
    "leaky_relu_": lambda a: nn.LeakyReLU(float(a.get("negative_slope", 0.01))),
    "hardtanh": lambda a: nn.Hardtanh(float(a.get("min_val", -1)), float(a.get("max_val", 1))),
    "hardtanh_": lambda a: nn.Hardtanh(float(a.get("min_val", -1)), float(a.get("max_val", 1))),
    "elu": _elu, "celu": lambda a: nn.CELU(float(a.get("alpha", 1.0))),
    "softplus": lambda a: nn.Softplus(float(a.get("beta", 1)), float(a.get("threshold", 20))),
    "softshrink": lambda a: nn.Softshrink(float(a.get("lambd", 0.5))),
    "softmax": lambda a: nn.Softmax(int(a["dim"])),
    "_softmax": lambda a: nn.Softmax(int(a["dim"])),
    "prelu": _prelu, "_prelu_kernel": _prelu,
    # not liftable: built as the nn module so the lifting room refuses it with the maths
    "gelu": lambda a: nn.GELU(approximate=str(a.get("approximate") or "none")),
    "silu": lambda a: nn.SiLU(), "mish": lambda a: nn.Mish(),
    "hardswish": lambda a: nn.Hardswish(), "log_softmax": lambda a: nn.LogSoftmax(int(a["dim"])),
    "_log_softmax": lambda a: nn.LogSoftmax(int(a["dim"])),
    "max_pool2d": _max_pool, "max_pool2d_with_indices": _max_pool,
    "adaptive_max_pool2d": lambda a: nn.AdaptiveMaxPool2d(tuple(a["output_size"])),
    "layer_norm": lambda a: _layer_norm(a), "native_layer_norm": lambda a: _layer_norm(a),
}

_OPS: dict[str, _Handler] = {
    "aten.linear.default": _linear, "aten.addmm.default": _addmm, "aten.mm.default": _mm,
    "aten.matmul.default": _mm,
    "aten.conv2d.default": lambda tr, a: _conv(tr, a, False),
    "aten.conv2d.padding": lambda tr, a: _conv(tr, a, False),
    "aten.conv_transpose2d.input": lambda tr, a: _conv(tr, a, True),
    "aten.convolution.default": _convolution,
    "aten.batch_norm.default": _batch_norm,
    "aten._native_batch_norm_legit_no_training.default": _batch_norm,
    "aten.avg_pool2d.default": _avg_pool,
    "aten.adaptive_avg_pool2d.default": lambda tr, a: tr.add(
        nn.AdaptiveAvgPool2d(tuple(a["output_size"]))),
    "aten._adaptive_avg_pool2d.default": lambda tr, a: tr.add(
        nn.AdaptiveAvgPool2d(tuple(a["output_size"]))),
    "aten.mean.dim": _mean,
    "aten.flatten.using_ints": lambda tr, a: tr.add(
        nn.Flatten(int(a.get("start_dim", 0)), int(a.get("end_dim", -1)))),
    "aten.unflatten.int": lambda tr, a: tr.add(nn.Unflatten(int(a["dim"]), tuple(a["sizes"]))),
    "aten.view.default": _reshape, "aten.reshape.default": _reshape,
    "aten._unsafe_view.default": _reshape,
    "aten.squeeze.dim": lambda tr, a: _squeeze_like(tr, a, False),
    "aten.squeeze.dims": lambda tr, a: _squeeze_like(tr, a, False),
    "aten.unsqueeze.default": lambda tr, a: _squeeze_like(tr, a, True),
    "aten.add.Tensor": _arith("add"), "aten.add.Scalar": _arith("add"),
    "aten.sub.Tensor": _arith("sub"), "aten.sub.Scalar": _arith("sub"),
    "aten.mul.Tensor": _arith("mul"), "aten.mul.Scalar": _arith("mul"),
    "aten.div.Tensor": _arith("div"), "aten.div.Scalar": _arith("div"),
    "_operator.getitem": lambda tr, a: None,
    "aten.clamp.default": _clamp,
    "aten.clamp_min.default": lambda tr, a: _clamp(tr, {"min": a.get("min")}),
    "aten.clamp_max.default": lambda tr, a: _clamp(tr, {"max": a.get("max")}),
}
for _name, _factory in _ACTS.items():
    _OPS[f"aten.{_name}.default"] = _act(_factory)
_OPS["aten.softmax.int"] = _act(_ACTS["softmax"])
_OPS["aten.log_softmax.int"] = _act(_ACTS["log_softmax"])


def translate(tr: _Translator, target: str, a: dict[str, Any]) -> None:
    """Append the modules of one node, or refuse it naming the op and an alternative."""
    if target in ("aten.dropout.default", "aten.feature_dropout.default") and a.get("train"):
        tr.refuse("dropout in training mode is random; call model.eval() before "
                  "torch.export.export")
    handler = _OPS.get(target)
    if handler is None:
        tr.refuse(f"the op is not in lbi's allow-list of ATen ops (linear, conv2d, "
                  "conv_transpose2d, batch_norm (eval), avg_pool2d, adaptive_avg_pool2d, "
                  "flatten, view/reshape, unflatten, add/sub/mul/div by a constant, dropout "
                  "(eval) and the proximal activations relu, leaky_relu, sigmoid, tanh, "
                  f"hardtanh, softplus, elu, softshrink, softmax, ...). Nearest alternative: "
                  f"{alternative_for(target)}")
    handler(tr, a)


_ALTERNATIVES = {
    "cat": "concatenation joins branches; a lifted chain has one path. Export only the chain",
    "matmul": "only x @ W with a constant 2-D W is affine; use nn.Linear",
    "bmm": "batched products of activations are not affine; use nn.Linear",
    "embedding": "it takes integer indices; feed one-hot vectors into nn.Linear",
    "upsample_nearest2d": "resampling is not implemented as an affine map; use "
                          "nn.ConvTranspose2d with stride equal to the scale factor",
    "upsample_bilinear2d": "resampling is not implemented as an affine map; use "
                           "nn.ConvTranspose2d with stride equal to the scale factor",
    "conv1d": "only 2-D convolutions are implemented; use nn.Conv2d on (C, H, W) samples",
    "conv3d": "only 2-D convolutions are implemented; use nn.Conv2d on (C, H, W) samples",
    "group_norm": "it normalises with per-sample statistics (not affine); use BatchNorm in "
                  "eval mode (model.eval()), which folds into W and b",
    "native_group_norm": "it normalises with per-sample statistics (not affine); use "
                         "BatchNorm in eval mode (model.eval()), which folds into W and b",
    "permute": "permuting sample axes is not implemented; keep (C, H, W) order",
    "transpose": "transposing sample axes is not implemented; keep (C, H, W) order",
}


def alternative_for(target: str) -> str:
    base = target.split(".")[1] if target.count(".") >= 1 else target
    return _ALTERNATIVES.get(base.rstrip("_"), "write the network as an nn.Sequential of "
                             "supported layers (see docs/own-network.md), or export it to ONNX")
