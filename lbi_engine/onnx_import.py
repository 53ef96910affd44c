"""ONNX model -> equivalent nn.Sequential -> LiftedNetwork, with the ``onnx`` package only.

The graph must be a chain from its one input to its one output; weights come from
initializers or Constant nodes. Affine ops become torch.nn layers (asymmetric pads become a
ZeroPad2d in front); activation ops go through ``activation_from_onnx`` so that refusals
(Gelu, LogSoftmax, ...) say why in the same words as for torch modules. An op that cannot be
lifted is refused naming the node, its op type, its index in the graph and an alternative.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch
from torch import nn

from lbi_engine.errors import (
    LbiError,
    ModelFileError,
    ShapeMismatchError,
    UnsupportedLayerError,
)
from lbi_engine.importers import check_model_file
from lbi_engine.network import _check_shape
from lbi_engine.operators import Reshape, ScaleShift

_ACT_OPS = {"Relu", "LeakyRelu", "PRelu", "Sigmoid", "Tanh", "Clip", "Softplus", "Softsign",
            "Elu", "Celu", "HardSigmoid", "Shrink", "Softmax", "Gelu", "Swish", "Mish",
            "HardSwish", "Selu", "ThresholdedRelu", "LogSoftmax", "Hardmax", "Abs"}
_ALTERNATIVES = {
    "MaxPool": "max-pooling is neither affine nor a proximal map; use AveragePool (affine), or "
               "the exact ReLU rewrite max(a, b) = ReLU(a - b) + ReLU(b) - ReLU(-b) "
               "(MATH.md §2.5)",
    "GlobalMaxPool": "max-pooling is neither affine nor a proximal map; use GlobalAveragePool",
    "LSTM": "recurrent layers are not feed-forward chains; unroll into Gemm + Tanh/Sigmoid",
    "GRU": "recurrent layers are not feed-forward chains; unroll into Gemm + Tanh/Sigmoid",
    "RNN": "recurrent layers are not feed-forward chains; unroll into Gemm + Tanh/Sigmoid",
    "LayerNormalization": "it normalises with per-sample statistics (not affine); use "
                          "BatchNormalization in inference mode",
    "InstanceNormalization": "it normalises with per-sample statistics (not affine); use "
                             "BatchNormalization in inference mode",
}
_SUPPORTED = ("Gemm, MatMul(+Add), Conv, ConvTranspose, AveragePool, GlobalAveragePool, "
              "BatchNormalization, Flatten, Reshape, Identity, Dropout, Add/Sub/Mul/Div by a "
              "constant, and the activations Relu, LeakyRelu, Sigmoid, Tanh, Clip, Softmax, "
              "Softplus, Softsign, Elu, HardSigmoid")


class _Builder:
    """Walks the graph once, appending torch modules and tracking the sample shape."""

    def __init__(self, model: Any, path: Path, input_shape: Sequence[int] | None) -> None:
        from onnx import numpy_helper

        self.path, self.graph = path, model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          13)
        self.consts: dict[str, np.ndarray] = {
            t.name: numpy_helper.to_array(t) for t in self.graph.initializer}
        inputs = [i for i in self.graph.input if i.name not in self.consts]
        if len(inputs) != 1:
            raise UnsupportedLayerError(f"ONNX model {path.name!r} has {len(inputs)} data inputs "
                                        f"({[i.name for i in inputs]}); only single-input chains "
                                        "can be lifted.")
        self.current = inputs[0].name
        self.shape = self._input_shape(inputs[0], input_shape)
        self.seq = nn.Sequential()
        self.node: Any = None
        self.index = 0

    def _input_shape(self, inp: Any, given: Sequence[int] | None) -> tuple[int, ...]:
        dims = [d.dim_value if d.HasField("dim_value") else None
                for d in inp.type.tensor_type.shape.dim][1:]
        if given is not None:
            shape = tuple(int(s) for s in given)
            if len(shape) != len(dims) or any(d is not None and d != s
                                              for d, s in zip(dims, shape, strict=False)):
                raise ShapeMismatchError(f"input_shape {shape} does not match the ONNX input "
                                         f"'{inp.name}' of {self.path.name!r}, which is (batch, "
                                         f"{', '.join(str(d or '?') for d in dims)}).")
            return _check_shape(shape)
        if not dims or any(d is None or d < 1 for d in dims):
            raise ShapeMismatchError(f"ONNX input '{inp.name}' of {self.path.name!r} has dynamic "
                                     "sample dims; pass input_shape (one sample, e.g. "
                                     "(1, 28, 28)).")
        # the file's own dims are checked too: a damaged header must not allocate petabytes
        return _check_shape(tuple(int(d) for d in dims), f"ONNX input shape of {self.path.name!r}")

    # --- helpers ---------------------------------------------------------------------------
    def label(self) -> str:
        n = self.node
        return (f"ONNX node '{n.name or '(unnamed)'}' ({n.op_type}, index {self.index}) in "
                f"{self.path.name!r}")

    def refuse(self, why: str) -> NoReturn:
        raise UnsupportedLayerError(f"{self.label()} cannot be lifted: {why}.")

    def attrs(self) -> dict[str, Any]:
        from onnx import helper

        return {a.name: helper.get_attribute_value(a) for a in self.node.attribute}

    def const(self, i: int, required: bool = True) -> np.ndarray | None:
        names = list(self.node.input)
        if i >= len(names) or not names[i]:
            if required:
                self.refuse(f"input {i} is missing")
            return None
        if names[i] not in self.consts:
            self.refuse(f"input '{names[i]}' must be a constant (initializer) but is computed "
                        "in the graph")
        return self.consts[names[i]]

    def tensor(self, a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.array(a, dtype=np.float32))

    def add(self, *modules: nn.Module) -> None:
        for k, m in enumerate(modules):
            base = (self.node.name or self.node.op_type).replace(".", "_") or "node"
            key = base if base not in self.seq._modules else f"{base}_{self.index}_{k}"
            self.seq.add_module(key, m)
            with torch.no_grad():
                self.shape = tuple(m(torch.zeros(1, *self.shape)).shape[1:])

    # --- the walk --------------------------------------------------------------------------
    def build(self) -> tuple[nn.Sequential, tuple[int, ...]]:
        from onnx import numpy_helper

        start_shape = self.shape
        for index, n in enumerate(self.graph.node):
            self.index, self.node = index, n
            if n.op_type == "Constant":
                a = self.attrs()
                value = a.get("value", a.get("value_float", a.get("value_floats",
                              a.get("value_int", a.get("value_ints")))))
                self.consts[n.output[0]] = numpy_helper.to_array(value) \
                    if hasattr(value, "dims") else np.array(value)
                continue
            data = [i for i in n.input if i and i not in self.consts]
            if len(data) > 1:
                self.refuse(f"it combines the tensors {data}: a residual addition or branch, "
                            "which a lifted chain cannot represent; remove the skip "
                            "connection, or export only the chain part of the network")
            if not data or data[0] != self.current:
                self.refuse(f"it does not take the previous node's output '{self.current}' (a "
                            "branch or skip connection); only plain chains can be lifted")
            self._translate(n.op_type)
            self.current = n.output[0]
        outs = [o.name for o in self.graph.output]
        if outs != [self.current]:
            raise UnsupportedLayerError(f"ONNX model {self.path.name!r}: the graph outputs {outs} "
                                        f"are not the end of the chain '{self.current}'; only "
                                        "single-output chains can be lifted.")
        return self.seq, start_shape

    def _translate(self, op: str) -> None:
        from lbi_engine.activations import activation_from_onnx
        from lbi_engine.layer_lifting import LiftedActivation

        a = self.attrs()
        if op in _ACT_OPS:
            if op == "Clip":
                lo, hi = (self.const(1, False), self.const(2, False)) if self.opset >= 11 \
                    else (a.get("min"), a.get("max"))
                a = {"min": None if lo is None else float(lo), "max": None if hi is None
                     else float(hi)}
            if op == "PRelu":
                slope = self.const(1)
                if slope.size != 1:
                    self.refuse("a per-channel PRelu slope is not one proximal activation; use "
                                "LeakyRelu")
                a = {"slope": float(slope.reshape(()))}
            try:
                act = activation_from_onnx(op, a, opset=self.opset, input_rank=len(self.shape) + 1)
            except UnsupportedLayerError as exc:
                raise UnsupportedLayerError(f"{self.label()}: {exc}") from exc
            return self.add(LiftedActivation(act))
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            why = _ALTERNATIVES.get(op, f"op type {op} is not supported by lbi's ONNX importer "
                                        f"(supported: {_SUPPORTED})")
            self.refuse(why)
        handler(a)

    def _op_Identity(self, a: dict) -> None:  # noqa: N802 - ONNX op names
        return None

    def _op_Dropout(self, a: dict) -> None:  # noqa: N802
        training = self.const(2, required=False)
        if (training is not None and bool(training)) or not a.get("is_test", 1):
            self.refuse("dropout in training mode is random; export the model in eval mode")
        if len(self.node.output) > 1 and self.node.output[1]:
            self.refuse("its mask output is used elsewhere")

    def _op_Gemm(self, a: dict) -> None:  # noqa: N802
        if a.get("transA", 0) or len(self.shape) != 1:
            self.refuse("Gemm must multiply a (batch, features) input from the left "
                        "(transA = 0); flatten the input first")
        b = self.const(1) * a.get("alpha", 1.0)
        w = b if a.get("transB", 0) else b.T
        c = self.const(2, required=False)
        lin = nn.Linear(w.shape[1], w.shape[0], bias=c is not None)
        lin.weight.data = self.tensor(w)
        if c is not None:
            c = np.asarray(c, np.float64) * a.get("beta", 1.0)
            if c.ndim == 2:
                if c.shape[0] != 1:
                    self.refuse("its bias C depends on the batch row")
                c = c[0]
            lin.bias.data = self.tensor(np.broadcast_to(c, (w.shape[0],)))
        self.add(lin)

    def _op_MatMul(self, a: dict) -> None:  # noqa: N802
        if list(self.node.input).index(self.current) != 0 or self.const(1).ndim != 2:
            self.refuse("only x @ W with a constant 2-D W is affine here")
        w = self.const(1).T
        lin = nn.Linear(w.shape[1], w.shape[0], bias=False)
        lin.weight.data = self.tensor(w)
        self.add(lin)

    def _scale_shift(self, op: str) -> None:
        first = list(self.node.input).index(self.current) == 0
        c = np.asarray(self.const(1 if first else 0), dtype=np.float64)
        while c.ndim > len(self.shape):
            if c.shape[0] != 1:
                self.refuse("the constant has a batch dimension of its own")
            c = c[0]
        last = self.seq[-1] if len(self.seq) else None
        if op == "Add" and isinstance(last, nn.Linear) and last.bias is None and \
                c.size == last.out_features and len(self.shape) == 1:
            last.bias = nn.Parameter(self.tensor(c.reshape(-1)))  # MatMul + Add = Linear
            return
        one, ct = torch.ones(()), self.tensor(c)
        if op == "Add":
            return self.add(ScaleShift(one, ct))
        if op == "Sub":
            return self.add(ScaleShift(one, -ct) if first else ScaleShift(-one, ct))
        if op == "Mul":
            return self.add(ScaleShift(ct, torch.zeros(())))
        if not first:
            self.refuse("dividing by the input is not affine")
        self.add(ScaleShift(1.0 / ct, torch.zeros(())))

    def _op_Add(self, a: dict) -> None:  # noqa: N802
        self._scale_shift("Add")

    def _op_Sub(self, a: dict) -> None:  # noqa: N802
        self._scale_shift("Sub")

    def _op_Mul(self, a: dict) -> None:  # noqa: N802
        self._scale_shift("Mul")

    def _op_Div(self, a: dict) -> None:  # noqa: N802
        self._scale_shift("Div")

    def _pads(self, a: dict, kernel: Sequence[int], strides: Sequence[int],
              dilations: Sequence[int]) -> list[int]:
        """ONNX pads (top, left, bottom, right) incl. auto_pad SAME_UPPER/SAME_LOWER/VALID."""
        auto = a.get("auto_pad", b"NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        if auto in ("NOTSET", ""):
            return list(a.get("pads", [0, 0, 0, 0]))
        if auto == "VALID":
            return [0, 0, 0, 0]
        begin, end = [], []
        for size, k, s, d in zip(self.shape[1:], kernel, strides, dilations, strict=True):
            total = max(0, (math.ceil(size / s) - 1) * s + d * (k - 1) + 1 - size)
            small, big = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else big)
            end.append(big if auto == "SAME_UPPER" else small)
        return begin + end

    def _conv_common(self, w: np.ndarray, a: dict) -> tuple[list, list, list]:
        if w.ndim != 4 or len(self.shape) != 3:
            self.refuse("only 2-D convolutions on (C, H, W) samples are supported")
        k = a.get("kernel_shape", list(w.shape[2:]))
        return list(a.get("strides", [1, 1])), list(a.get("dilations", [1, 1])), list(k)

    def _op_Conv(self, a: dict) -> None:  # noqa: N802
        w, b = self.const(1), self.const(2, required=False)
        s, d, k = self._conv_common(w, a)
        pt, pl, pb, pr = self._pads(a, k, s, d)
        g = a.get("group", 1)
        symmetric = pt == pb and pl == pr
        conv = nn.Conv2d(w.shape[1] * g, w.shape[0], tuple(w.shape[2:]), s,
                         (pt, pl) if symmetric else 0, d, g, bias=b is not None)
        conv.weight.data = self.tensor(w)
        if b is not None:
            conv.bias.data = self.tensor(b)
        self.add(conv) if symmetric else self.add(nn.ZeroPad2d((pl, pr, pt, pb)), conv)

    def _op_ConvTranspose(self, a: dict) -> None:  # noqa: N802
        w, b = self.const(1), self.const(2, required=False)
        s, d, k = self._conv_common(w, a)
        op = list(a.get("output_padding", [0, 0]))
        g = a.get("group", 1)
        if "output_shape" in a:
            begin, end = [], []
            for size, kk, ss, dd, oo, want in zip(self.shape[1:], k, s, d, op,
                                                  a["output_shape"][-2:], strict=True):
                total = ss * (size - 1) + oo + (kk - 1) * dd + 1 - want
                upper = a.get("auto_pad", b"") in (b"SAME_UPPER", "SAME_UPPER")
                begin.append(total // 2 if upper else total - total // 2)
                end.append(total - total // 2 if upper else total // 2)
            pt, pl, pb, pr = begin + end
        else:
            pt, pl, pb, pr = list(a.get("pads", [0, 0, 0, 0]))
        fits = all(o < max(ss, dd) for o, ss, dd in zip(op, s, d, strict=True))
        if pt == pb and pl == pr and fits:
            conv = nn.ConvTranspose2d(w.shape[0], w.shape[1] * g, tuple(w.shape[2:]), s, (pt, pl),
                                      op, g, bias=b is not None, dilation=d)
            conv.weight.data = self.tensor(w)
            if b is not None:
                conv.bias.data = self.tensor(b)
            return self.add(conv)
        # asymmetric: full transposed convolution, then crop/extend, then the bias everywhere
        conv = nn.ConvTranspose2d(w.shape[0], w.shape[1] * g, tuple(w.shape[2:]), s, 0, 0, g,
                                  bias=False, dilation=d)
        conv.weight.data = self.tensor(w)
        mods: list[nn.Module] = [conv, nn.ZeroPad2d((-pl, op[1] - pr, -pt, op[0] - pb))]
        if b is not None:
            mods.append(ScaleShift(torch.ones(()), self.tensor(b).reshape(-1, 1, 1)))
        self.add(*mods)

    def _op_AveragePool(self, a: dict) -> None:  # noqa: N802
        k = list(a["kernel_shape"])
        s, d = list(a.get("strides", [1, 1])), list(a.get("dilations", [1, 1]))
        if len(k) != 2 or len(self.shape) != 3 or d != [1, 1]:
            self.refuse("only 2-D average pooling without dilation is supported")
        pt, pl, pb, pr = self._pads(a, k, s, d)
        ceil, include = bool(a.get("ceil_mode", 0)), bool(a.get("count_include_pad", 0))
        if pt == pb and pl == pr:
            return self.add(nn.AvgPool2d(k, s, (pt, pl), ceil, include))
        if not include or ceil:
            self.refuse("asymmetric pads are only supported with count_include_pad=1 and "
                        "ceil_mode=0")
        self.add(nn.ZeroPad2d((pl, pr, pt, pb)), nn.AvgPool2d(k, s, 0, False, True))

    def _op_GlobalAveragePool(self, a: dict) -> None:  # noqa: N802
        self.add(nn.AdaptiveAvgPool2d(1))

    def _op_BatchNormalization(self, a: dict) -> None:  # noqa: N802
        if a.get("training_mode", 0) or any(o for o in list(self.node.output)[1:]):
            self.refuse("BatchNormalization in training mode uses batch statistics; export the "
                        "model in eval mode")
        scale, bias, mean, var = (self.const(i) for i in range(1, 5))
        cls = nn.BatchNorm2d if len(self.shape) == 3 else nn.BatchNorm1d
        bn = cls(scale.shape[0], eps=float(a.get("epsilon", 1e-5))).eval()
        for name, v in (("weight", scale), ("bias", bias), ("running_mean", mean),
                        ("running_var", var)):
            getattr(bn, name).data = self.tensor(v)
        self.add(bn)

    def _op_Flatten(self, a: dict) -> None:  # noqa: N802
        axis = a.get("axis", 1)
        if axis < 0:
            axis += len(self.shape) + 1
        if axis != 1:
            self.refuse(f"Flatten with axis={a.get('axis')} merges the batch dimension with "
                        "sample dims; only axis=1 keeps samples apart")
        self.add(nn.Flatten())

    def _op_Reshape(self, a: dict) -> None:  # noqa: N802
        target = [int(v) for v in self.const(1).reshape(-1)]
        outs = []
        for batch in (2, 3):  # the batch dim must follow the input's, whatever it is
            full = (batch, *self.shape)
            shape = [full[i] if v == 0 and not a.get("allowzero", 0) else v
                     for i, v in enumerate(target)]
            try:
                outs.append(torch.empty(full, device="meta").reshape(shape).shape)
            except RuntimeError as exc:
                self.refuse(f"shape {target} does not fit the input {full}: {exc}")
        if outs[0][0] != 2 or outs[1][0] != 3 or outs[0][1:] != outs[1][1:]:
            self.refuse(f"Reshape to {target} does not keep the batch dimension first; use "
                        "shape [-1, ...] or [0, ...]")
        self.add(Reshape(tuple(outs[0][1:])))


def load_onnx(path: str | Path, input_shape: Sequence[int] | None = None,
              name: str | None = None) -> Any:
    """LiftedNetwork from an ONNX file (see the module docstring)."""
    import onnx

    from lbi_engine.network import LiftedNetwork

    p = check_model_file(path, "ONNX")
    try:
        model = onnx.load(str(p))  # external weights, if any, next to the file
    except Exception as exc:  # noqa: BLE001 - protobuf raises DecodeError and friends
        raise ModelFileError(f"ONNX file {str(p)!r} could not be parsed ({type(exc).__name__}: "
                             f"{exc}); it is truncated or corrupt, or not an ONNX model. Export "
                             "it again (torch.onnx.export).") from exc
    if not model.graph.node or not model.graph.input:
        raise ModelFileError(f"{str(p)!r} holds no ONNX graph (no nodes or inputs); it is not an "
                             "ONNX model, or it is truncated. Export it again.")
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # noqa: BLE001 - ValidationError and C++ errors
        raise ModelFileError(f"ONNX file {str(p)!r} is not a valid model: "
                             f"{str(exc).strip().splitlines()[0][:300]}. Export it again.") from exc
    try:
        seq, shape = _Builder(model, p, input_shape).build()
    except LbiError:
        raise
    except Exception as exc:  # noqa: BLE001 - malformed attributes, tensors, external data
        raise ModelFileError(f"ONNX file {str(p)!r} is inconsistent ({type(exc).__name__}: "
                             f"{exc}); export it again.") from exc
    return LiftedNetwork.from_module(seq, shape, name=name or p.stem)
