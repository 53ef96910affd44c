"""The ONNX op translators: one ONNX node -> torch modules appended to the chain.

A room of ``lbi_engine.models.onnx_import`` (which walks the graph and is the public entry point).
``_NodeContext`` is the state one node is translated in (the node, its constants, the sample
shape, the nn.Sequential built so far) with the helpers every translator needs;
``_OpTranslators`` holds one ``_op_<OpType>`` method per supported affine op, looked up by
name, so adding an op is adding a method here and its name to ``_SUPPORTED``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, NoReturn, overload

import numpy as np
import torch
from torch import nn

from lbi_engine.errors import UnsupportedLayerError
from lbi_engine.models._onnx_graph import BATCHES, produced_nonneg
from lbi_engine.operators import Reshape, ScaleShift


class _NodeContext:
    """Where the walk stands: set by the graph walker before each translator is called."""

    path: Path
    consts: dict[str, np.ndarray]
    current: str  # the name of the chain's tensor so far (the node's data input)
    shape: tuple[int, ...]  # one sample's shape after the modules built so far
    seq: nn.Sequential
    node: Any
    index: int
    static_batch: int | None  # the graph input's fixed batch size, if it has one
    graph: Any  # the ONNX GraphProto
    shape_vals: dict[str, tuple[np.ndarray, np.ndarray]]  # batch-dependent shape tensors

    def label(self) -> str:
        """Names the node three ways (name, op type, index) so a user can find it in any viewer."""
        n = self.node
        return (f"ONNX node '{n.name or '(unnamed)'}' ({n.op_type}, index {self.index}) in "
                f"{self.path.name!r}")

    def refuse(self, why: str) -> NoReturn:
        """Raise UnsupportedLayerError for the current node with the reason ``why``."""
        raise UnsupportedLayerError(f"{self.label()} cannot be lifted: {why}.")

    def attrs(self) -> dict[str, Any]:
        """The node's attributes as plain Python values (onnx is imported lazily: optional)."""
        from onnx import helper

        return {a.name: helper.get_attribute_value(a) for a in self.node.attribute}

    @overload
    def const(self, i: int, required: Literal[True] = True) -> np.ndarray: ...

    @overload
    def const(self, i: int, required: bool) -> np.ndarray | None: ...

    def const(self, i: int, required: bool = True) -> np.ndarray | None:
        """Input ``i`` as a constant array: weights computed in the graph cannot be lifted."""
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
        """float32 copy (ONNX files may hold float64 or views of read-only buffers)."""
        return torch.from_numpy(np.array(a, dtype=np.float32))

    def add(self, *modules: nn.Module) -> None:
        """Append modules under unique names and track the sample shape by a dry run."""
        for k, m in enumerate(modules):
            base = (self.node.name or self.node.op_type).replace(".", "_") or "node"
            key = base if not hasattr(self.seq, base) else f"{base}_{self.index}_{k}"
            self.seq.add_module(key, m)
            # the output shape without a dry run, charged to the load's budget
            self.shape = self.budget().check(m, self.shape, key)

    def budget(self) -> Any:
        """The activations' budget of this import (lbi_engine.models.footprint.ChainBudget,
        charging the load's LoadBudget), made once."""
        if getattr(self, "_budget", None) is None:
            from lbi_engine.models.footprint import ChainBudget

            self._budget = ChainBudget(f"network of ONNX file {self.path}",
                                       getattr(self, "load_budget", None))
        return self._budget


class _OpTranslators(_NodeContext):
    """``_op_<OpType>(attributes)`` for each affine ONNX op (activations are handled by the
    walker through ``activation_from_onnx``)."""

    def _op_Identity(self, a: dict) -> None:  # ONNX op names
        return None

    def _op_Dropout(self, a: dict) -> None:
        training = self.const(2, required=False)
        if (training is not None and bool(training)) or not a.get("is_test", 1):
            self.refuse("dropout in training mode is random; export the model in eval mode")
        if len(self.node.output) > 1 and self.node.output[1]:
            self.refuse("its mask output is used elsewhere")

    def _op_Gemm(self, a: dict) -> None:
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

    def _op_MatMul(self, a: dict) -> None:
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

    def _op_Add(self, a: dict) -> None:
        self._scale_shift("Add")

    def _op_Sub(self, a: dict) -> None:
        self._scale_shift("Sub")

    def _op_Mul(self, a: dict) -> None:
        self._scale_shift("Mul")

    def _op_Div(self, a: dict) -> None:
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

    def _conv_common(self, w: np.ndarray, a: dict) -> tuple[tuple[int, int], tuple[int, int],
                                                            list[int]]:
        """(strides, dilations, kernel shape); a 2-D convolution has two of each."""
        if w.ndim != 4 or len(self.shape) != 3:
            self.refuse("only 2-D convolutions on (C, H, W) samples are supported")
        k = a.get("kernel_shape", list(w.shape[2:]))
        return tuple(a.get("strides", [1, 1])), tuple(a.get("dilations", [1, 1])), list(k)

    def _op_Conv(self, a: dict) -> None:
        w, b = self.const(1), self.const(2, required=False)
        s, d, k = self._conv_common(w, a)
        pt, pl, pb, pr = self._pads(a, k, s, d)
        g = a.get("group", 1)
        symmetric = pt == pb and pl == pr
        conv = nn.Conv2d(w.shape[1] * g, w.shape[0], tuple(w.shape[2:]), s,
                         (pt, pl) if symmetric else 0, d, g, bias=b is not None)
        conv.weight.data = self.tensor(w)
        if b is not None and conv.bias is not None:  # conv has a bias exactly when b is given
            conv.bias.data = self.tensor(b)
        self.add(conv) if symmetric else self.add(nn.ZeroPad2d((pl, pr, pt, pb)), conv)

    def _op_ConvTranspose(self, a: dict) -> None:
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
                                      tuple(op), g, bias=b is not None, dilation=d)
            conv.weight.data = self.tensor(w)
            if b is not None and conv.bias is not None:
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

    def _op_AveragePool(self, a: dict) -> None:
        k = list(a["kernel_shape"])
        s, d = list(a.get("strides", [1, 1])), list(a.get("dilations", [1, 1]))
        if len(k) != 2 or len(self.shape) != 3 or d != [1, 1]:
            self.refuse("only 2-D average pooling without dilation is supported")
        pt, pl, pb, pr = self._pads(a, k, s, d)
        ceil, include = bool(a.get("ceil_mode", 0)), bool(a.get("count_include_pad", 0))
        if pt == pb and pl == pr:
            return self.add(nn.AvgPool2d(tuple(k), tuple(s), (pt, pl), ceil, include))
        if not include or ceil:
            self.refuse("asymmetric pads are only supported with count_include_pad=1 and "
                        "ceil_mode=0")
        self.add(nn.ZeroPad2d((pl, pr, pt, pb)), nn.AvgPool2d(tuple(k), tuple(s), 0, False, True))

    def _op_MaxPool(self, a: dict) -> None:
        """nn.MaxPool2d, which lifting writes exactly as ReLU layers (models/maxpool_relu.py)."""
        k = list(a["kernel_shape"])
        s, d = list(a.get("strides", [1] * len(k))), list(a.get("dilations", [1] * len(k)))
        if len(k) != 2 or len(self.shape) != 3:
            self.refuse("only 2-D max-pooling on (C, H, W) samples is supported")
        if len(self.node.output) > 1 and self.node.output[1]:
            self.refuse("its second output (the indices of the maxima) is used; lbi lifts "
                        "values only")
        if int(a.get("storage_order", 0)):
            self.refuse("storage_order=1 only changes the indices output, which lbi does not "
                        "lift; export without it")
        pt, pl, pb, pr = self._pads(a, k, s, d)
        if (pt, pl) != (pb, pr):
            self.refuse(f"asymmetric pads {[pt, pl, pb, pr]} are not supported for MaxPool; "
                        "pad symmetrically (torch's MaxPool2d padding=)")
        ceil = bool(a.get("ceil_mode", 0))
        if (pt or pl or ceil) and not self._follows_nonneg():  # the lifting's rule, said here
            self.refuse("its padding or ceil_mode pads with -inf, which the exact ReLU rewrite "
                        "(zero padding) equals only for non-negative input, and this MaxPool "
                        "does not follow a Relu; put it after a Relu, or use pads 0 and "
                        "ceil_mode 0, or AveragePool")
        self.add(nn.MaxPool2d(tuple(k), tuple(s), (pt, pl), tuple(d),
                              ceil_mode=ceil))

    def _follows_nonneg(self) -> bool:
        """Whether the input is >= 0 (the module added last, or the node that made it)."""
        last = list(self.seq.children())[-1] if len(self.seq) else None
        if last is None:  # a segment's start: a tensor that several nodes use
            return produced_nonneg(self.graph.node, self.current, self.consts)
        lower = getattr(getattr(last, "activation", None), "lower", None)
        return isinstance(last, (nn.ReLU, nn.ReLU6, nn.Sigmoid, nn.Softmax, nn.Hardsigmoid,
                                 nn.MaxPool2d, nn.AdaptiveMaxPool2d)) or \
            (lower is not None and lower >= 0)

    def _op_GlobalAveragePool(self, a: dict) -> None:
        self.add(nn.AdaptiveAvgPool2d(1))

    def _op_GlobalMaxPool(self, a: dict) -> None:
        """The maximum over H and W: a max-pool whose window is the whole image, which
        lifting writes exactly as ReLU layers."""
        if len(self.shape) != 3:
            self.refuse("only 2-D global max-pooling on (C, H, W) samples is supported")
        self.add(nn.AdaptiveMaxPool2d(1))

    def _op_BatchNormalization(self, a: dict) -> None:
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

    def _op_Flatten(self, a: dict) -> None:
        axis = a.get("axis", 1)
        if axis < 0:
            axis += len(self.shape) + 1
        if axis != 1:
            self.refuse(f"Flatten with axis={a.get('axis')} merges the batch dimension with "
                        "sample dims; only axis=1 keeps samples apart")
        self.add(nn.Flatten())

    def reshape_targets(self) -> list[list[int]]:
        """The Reshape target for a batch of 2 and of 3 (see ``_onnx_graph.BATCHES``)."""
        name = self.node.input[1] if len(self.node.input) > 1 else ""
        if name in self.shape_vals:  # computed from Shape(x): batch-dependent
            return [[int(v) for v in t.reshape(-1)] for t in self.shape_vals[name]]
        target = [int(v) for v in self.const(1).reshape(-1)]
        if self.static_batch is not None and target and target[0] == self.static_batch:
            # exported with a fixed batch (torch.onnx.export(dynamo=True) writes the traced
            # batch into every view): the leading entry is the batch dimension
            return [[b, *target[1:]] for b in BATCHES]
        return [target, target]

    def _op_Reshape(self, a: dict) -> None:
        outs = []
        targets = self.reshape_targets()
        for batch, target in zip(BATCHES, targets, strict=True):
            full = (batch, *self.shape)
            shape = [full[i] if v == 0 and not a.get("allowzero", 0) else v
                     for i, v in enumerate(target)]
            try:
                outs.append(torch.empty(full, device="meta").reshape(shape).shape)
            except RuntimeError as exc:
                self.refuse(f"shape {targets[0]} does not fit the input {full}: {exc}")
        if outs[0][0] != BATCHES[0] or outs[1][0] != BATCHES[1] or outs[0][1:] != outs[1][1:]:
            self.refuse(f"Reshape to {targets[0]} does not keep the batch dimension first; use "
                        "shape [-1, ...] or [0, ...]")
        self.add(Reshape(tuple(outs[0][1:])))

    def _axes_arg(self, a: dict) -> list[int] | None:
        """``axes`` from the attribute (old opsets) or the second input (newer ones)."""
        if "axes" in a:
            return [int(v) for v in a["axes"]]
        c = self.const(1, required=False)
        return None if c is None else [int(v) for v in np.asarray(c).reshape(-1)]

    def _squeeze_like(self, op: str, axes: list[int] | None) -> None:
        if op == "Unsqueeze":
            rank = len(self.shape) + 1 + len(axes or [])
        else:
            rank = len(self.shape) + 1
        norm = [v % rank for v in (axes or [])]
        if 0 in norm or (op == "Squeeze" and axes is None):
            self.refuse(f"{op} over the batch axis (axes={axes}) mixes samples; give explicit "
                        "axes >= 1")
        x = np.zeros((1, *self.shape))
        y = np.squeeze(x, axis=tuple(norm)) if op == "Squeeze" else x
        if op == "Unsqueeze":
            for ax in sorted(norm):
                y = np.expand_dims(y, ax)
        self.add(Reshape(tuple(y.shape[1:])))

    def _op_Squeeze(self, a: dict) -> None:
        self._squeeze_like("Squeeze", self._axes_arg(a))

    def _op_Unsqueeze(self, a: dict) -> None:
        self._squeeze_like("Unsqueeze", self._axes_arg(a))

    def _op_ReduceMean(self, a: dict) -> None:
        """The mean over H and W (AdaptiveAvgPool2d(1) as the dynamo exporter writes it)."""
        self._reduce_hw(a, "ReduceMean", "mean", "average", nn.AdaptiveAvgPool2d)

    def _op_ReduceMax(self, a: dict) -> None:
        """The maximum over H and W (AdaptiveMaxPool2d(1) as the dynamo exporter writes it):
        global max-pooling, lifted by its exact ReLU rewrite."""
        self._reduce_hw(a, "ReduceMax", "maximum", "max", nn.AdaptiveMaxPool2d)

    def _reduce_hw(self, a: dict, op: str, what: str, kind: str, pool: type[nn.Module]) -> None:
        """A reduction over H and W of (N, C, H, W) as global pooling; other axes refused."""
        axes = self._axes_arg(a)
        rank = len(self.shape) + 1
        if rank != 4 or axes is None or sorted(v % rank for v in axes) != [2, 3]:
            self.refuse(f"{op} over axes {axes} of a rank-{rank} tensor; only the {what} "
                        f"over H and W of (N, C, H, W) (global {kind} pooling) is supported. "
                        f"Use nn.{pool.__name__}(1) or nn.{pool.__name__[8:]}")
        self.add(pool(1))
        if not a.get("keepdims", 1):
            self.add(nn.Flatten())
