"""ONNX model -> equivalent nn.Sequential -> LiftedNetwork, with the ``onnx`` package only.

The graph goes from its one input to its one output; weights come from initializers or
Constant nodes. A chain becomes one nn.Sequential; a graph whose tensors are added (``Add`` of
two computed tensors: residual blocks) or concatenated along channels (``Concat``, axis 1)
becomes a ``_graph_module.SegmentGraph`` of such chains, lifted as a DAG (MATH.md §5.6).
Affine ops become torch.nn layers (asymmetric pads become a ZeroPad2d in front); activation
ops go through ``activation_from_onnx`` so that refusals (Gelu, LogSoftmax, ...) say why in
the same words as for torch modules. An op that cannot be lifted is refused naming the node,
its op type, its index in the graph and an alternative.

This module walks the graph (chain checks, constants, activations, refusals); the affine op
translators live in ``_onnx_translators``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from lbi_engine.errors import (
    InputError,
    InputShapeNeededError,
    LbiError,
    ModelFileError,
    UnsupportedLayerError,
)
from lbi_engine.limits import LoadBudget, _check_shape, bound_from_env
from lbi_engine.models._decomposed_activations import PRODUCT_FIX, product_why
from lbi_engine.models._graph_module import SegmentedWalk, SegmentGraphBuilder, concat_shape
from lbi_engine.models._onnx_channels import channel_permutation, split_node
from lbi_engine.models._onnx_graph import (
    BATCHES,
    ELEMENTWISE,
    FOLD_OPS,
    check_layer_count,
    fold,
    fold_bytes,
    match_activation,
)
from lbi_engine.models._onnx_translators import _OpTranslators
from lbi_engine.models.importers import check_model_file

_ACT_OPS = {"Relu", "LeakyRelu", "PRelu", "Sigmoid", "Tanh", "Clip", "Softplus", "Softsign",
            "Elu", "Celu", "HardSigmoid", "Shrink", "Softmax", "Gelu", "Swish", "Mish",
            "HardSwish", "Selu", "ThresholdedRelu", "LogSoftmax", "Hardmax", "Abs"}
_ALTERNATIVES = {
    "GlobalMaxPool": "global max-pooling is neither affine nor a proximal map (and its window, "
                     "the whole image, makes the exact ReLU rewrite of MaxPool too deep); use "
                     "GlobalAveragePool, or MaxPool with a small kernel",
    "LSTM": "recurrent layers are not feed-forward chains; unroll into Gemm + Tanh/Sigmoid",
    "GRU": "recurrent layers are not feed-forward chains; unroll into Gemm + Tanh/Sigmoid",
    "RNN": "recurrent layers are not feed-forward chains; unroll into Gemm + Tanh/Sigmoid",
    "LayerNormalization": "it normalises with per-sample statistics (not affine); use "
                          "BatchNormalization in inference mode",
    "InstanceNormalization": "it normalises with per-sample statistics (not affine); use "
                             "BatchNormalization in inference mode",
}
_SUPPORTED = ("Gemm, MatMul(+Add), Conv, ConvTranspose, AveragePool, GlobalAveragePool, "
              "MaxPool and GlobalMaxPool (as their exact ReLU rewrite), "
              "BatchNormalization, Flatten, Reshape, Squeeze/Unsqueeze, ReduceMean/ReduceMax "
              "over H and W, Identity, Dropout, Add/Sub/Mul/Div by a constant, shape "
              "arithmetic (Shape, Gather, Concat, Slice, ...), and the activations Relu, "
              "LeakyRelu, Sigmoid, Tanh, Clip, Softmax, Softplus, Softsign, Elu, HardSigmoid")

class _Builder(SegmentedWalk, _OpTranslators):
    """Walks the graph once, appending torch modules and tracking the sample shape.

    The per-op translators (``_op_*``) and node helpers come from ``_onnx_translators``.
    """

    def __init__(self, model: Any, path: Path, input_shape: Sequence[int] | None,
                 budget: LoadBudget | None = None) -> None:
        from onnx import numpy_helper

        self.path, self.graph = path, model.graph
        self.load_budget = budget if budget is not None else _onnx_budget(path)
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          13)
        self.consts: dict[str, np.ndarray] = {}
        for t in self.graph.initializer:  # each a numpy copy of the protobuf's bytes
            self.load_budget.charge(_tensor_bytes(t), f"initializer '{t.name}'")
            self.consts[t.name] = numpy_helper.to_array(t)
        inputs = [i for i in self.graph.input if i.name not in self.consts]
        if len(inputs) != 1:
            raise UnsupportedLayerError(f"ONNX model {path.name!r} has {len(inputs)} data inputs "
                                        f"({[i.name for i in inputs]}); only single-input chains "
                                        "can be lifted.")
        # the segments of a graph (residual additions, concatenation) and the open one
        self.graph_parts = SegmentGraphBuilder(inputs[0].name)
        self.shape = self._input_shape(inputs[0], input_shape)
        dim0 = inputs[0].type.tensor_type.shape.dim
        # the batch size the exporter traced with (torch.onnx.export(dynamo=True) writes it
        # into every Reshape target: [1, 784] means "the batch, 784")
        self.static_batch = dim0[0].dim_value if dim0 and dim0[0].HasField("dim_value") \
            and dim0[0].dim_value > 0 else None
        self.shape_vals: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.node: Any = None
        self.index = 0

    def _input_shape(self, inp: Any, given: Sequence[int] | None) -> tuple[int, ...]:
        dims = [d.dim_value if d.HasField("dim_value") else None
                for d in inp.type.tensor_type.shape.dim][1:]
        if given is not None:
            shape = tuple(int(s) for s in given)
            if len(shape) != len(dims) or any(d is not None and d != s
                                              for d, s in zip(dims, shape, strict=False)):
                raise InputError(f"input_shape {shape} does not match the ONNX input "
                                         f"'{inp.name}' of {self.path.name!r}, which is (batch, "
                                         f"{', '.join(str(d or '?') for d in dims)}).")
            return _check_shape(shape)
        if not dims or any(d is None or d < 1 for d in dims):
            raise InputShapeNeededError(f"ONNX input '{inp.name}' of {self.path.name!r} has "
                                        "dynamic sample dims; pass input_shape (one sample, "
                                        "e.g. (1, 28, 28)).")
        # the file's own dims are checked too: a damaged header must not allocate petabytes
        return _check_shape(tuple(int(d) for d in dims if d is not None),  # none is (above)
                            f"ONNX input shape of {self.path.name!r}")

    # --- the walk --------------------------------------------------------------------------
    def build(self) -> tuple[nn.Module, tuple[int, ...]]:
        from onnx import numpy_helper

        nodes = list(self.graph.node)
        for n in nodes:  # Constant nodes have no inputs: their values are known up front
            if n.op_type == "Constant":
                self.node = n
                a = self.attrs()
                value: Any = a.get("value", a.get("value_float", a.get("value_floats",
                              a.get("value_int", a.get("value_ints")))))
                if hasattr(value, "dims"):  # a tensor: a numpy copy, charged like initializers
                    self.load_budget.charge(_tensor_bytes(value),
                                            f"Constant node '{n.name or n.output[0]}'")
                    self.consts[n.output[0]] = numpy_helper.to_array(value)
                else:
                    self.consts[n.output[0]] = np.array(value)
        self.outputs = {o.name for o in self.graph.output}
        self.consumers: dict[str, list[int]] = {}
        for index, n in enumerate(nodes):
            for name in n.input:
                self.consumers.setdefault(name, []).append(index)
        start_shape = self.shape
        self.shapes[self.current] = self.shape
        index = 0
        while index < len(nodes):
            n = nodes[index]
            self.index, self.node = index, n
            index += 1
            if n.op_type == "Constant" or self._fold(n):
                continue
            data = [i for i in n.input if i and i not in self.consts and i not in self.shape_vals]
            if len(data) > 1:
                if self.current in data:
                    end = self._activation_region(nodes, index - 1)
                    if end is not None:
                        index = end + 1
                        continue
                if self._merge(n, data):
                    continue
                if n.op_type == "Mul":
                    self.refuse(f"{product_why(data)}. {PRODUCT_FIX}")
                self.refuse(f"it combines the tensors {data} in a way lbi does not lift (a sum "
                            "of two tensors and a concatenation of channels are lifted as a "
                            "graph; MATH.md §5.6); write the combination as an addition or "
                            "torch.cat(.., dim=1)")
            if data and data[0] != self.current and self.graph_parts.switch_to(data[0]):
                self.shape = self.shapes[data[0]]  # a branch from an earlier tensor
            if not data or data[0] != self.current:
                self.refuse(f"it does not take the previous node's output '{self.current}' nor "
                            "a tensor that several nodes use (a branch); check the graph")
            if self._chain_uses(self.current, index - 1) > 1:
                end = self._activation_region(nodes, index - 1)
                if end is not None:
                    index = end + 1
                    continue
                self.graph_parts.close()  # several nodes use it: a branch point
            if n.op_type == "Split":  # of channels: a branch per piece (_channel_ops)
                split_node(self)
                continue
            end = channel_permutation(self, nodes, index - 1) if n.op_type == "Reshape" else None
            if end is not None:  # a channel shuffle
                index = end + 1
                continue
            self._translate(n.op_type)
            self.current = n.output[0]
            self.shapes[self.current] = self.shape
        if not self.outputs or self.outputs != {self.current} or len(self.graph.output) != 1:
            outs = [o.name for o in self.graph.output]
            raise UnsupportedLayerError(f"ONNX model {self.path.name!r}: the graph outputs {outs} "
                                        f"are not the end of the chain '{self.current}'; only "
                                        "single-output chains can be lifted.")
        return self.graph_parts.module(), start_shape

    def _merge(self, n: Any, data: list[str]) -> bool:
        """Add of two tensors or Concat of channels: a node of the graph (MATH.md §5.6)."""
        if n.op_type == "Add" and len(data) == 2 == len(n.input):
            shapes = [self.shapes.get(t) for t in data]
            if shapes[0] is None or shapes[0] != shapes[1]:
                self.refuse(f"it adds tensors of shapes {shapes}; lbi lifts sums of tensors of "
                            "one shape (no broadcasting between computed tensors)")
            shape = shapes[0]
            kind = "add"
        elif n.op_type == "Concat" and len(data) == len(n.input):
            shapes = [self.shapes.get(t) for t in data]
            cat = concat_shape(shapes, int(self.attrs()["axis"]))
            if cat is None:
                self.refuse(f"it concatenates {shapes} along axis {self.attrs()['axis']}; lbi "
                            "lifts the concatenation of channels (axis 1) of equal-sized maps")
            shape, kind = cat, "cat"
        else:
            return False
        if not self.graph_parts.merge(kind, data, n.output[0]):
            self.refuse(f"one of its inputs {data} is neither the previous node's output nor a "
                        "tensor that several nodes use; check the graph")
        self.shape = shape
        self.shapes[n.output[0]] = shape
        return True

    def _chain_uses(self, name: str, after: int) -> int:
        """How many later nodes (Shape excluded: it only reads the shape) or outputs use it."""
        nodes = self.graph.node
        return sum(1 for j in self.consumers.get(name, []) if j >= after and
                   nodes[j].op_type != "Shape") + (name in self.outputs)

    def _fold(self, n: Any) -> bool:
        """Evaluate shape arithmetic and constant subgraphs (see ``_onnx_graph``)."""
        if n.op_type == "Shape" and n.input[0] in self.shapes:
            a = self.attrs()
            start, end = a.get("start", 0), a.get("end")
            vals = [np.array([b, *self.shapes[n.input[0]]], dtype=np.int64)[start:end]
                    for b in BATCHES]
            self._store(n.output[0], vals)
            return True
        ins = [i for i in n.input if i]
        if n.op_type not in FOLD_OPS or not ins or any(
                i not in self.consts and i not in self.shape_vals for i in ins):
            return False
        vals = []
        for k in range(len(BATCHES)):
            args = [None if not i else self.consts[i] if i in self.consts
                    else self.shape_vals[i][k] for i in n.input]
            # every folded constant is kept: their total, not only each one, is bounded
            self.load_budget.charge(fold_bytes(n.op_type, args),
                                    f"the constant folded by node '{n.name or n.op_type}'")
            vals.append(fold(n, args, self.opset))
            if all(i in self.consts for i in ins):
                vals.append(vals[0])
                break
        self._store(n.output[0], vals)
        return True

    def _store(self, name: str, vals: list[np.ndarray]) -> None:
        if vals[0].shape == vals[1].shape and np.array_equal(vals[0], vals[1]):
            self.consts[name] = vals[0]
        else:
            self.shape_vals[name] = (vals[0], vals[1])

    def _activation_region(self, nodes: list[Any], first: int) -> int | None:
        """Index of the last node of an elementwise region that starts at the chain's tensor
        and computes a recognised activation (appended to the chain), else None."""
        produced, region = {self.current}, []
        for j in range(first, min(first + 16, len(nodes))):
            n = nodes[j]
            if n.op_type == "Constant":
                continue
            if n.op_type not in ELEMENTWISE or any(
                    i and i not in produced and not (i in self.consts and
                                                     np.asarray(self.consts[i]).size == 1)
                    for i in n.input):
                return None
            region.append(n)
            produced.update(o for o in n.output if o)
            live = {t for t in produced if t in self.outputs or
                    any(k > j for k in self.consumers.get(t, []))}
            if len(live) == 1 and self.current not in live:
                out = live.pop()
                module = match_activation(region, self.current, out, self.consts, where=(
                    f"ONNX nodes '{region[0].name}' to '{region[-1].name}' in {self.path.name!r}"))
                if module is None:
                    return None
                self.add(module)
                self.current = out
                self.shapes[out] = self.shape
                return j
        return None

    def _translate(self, op: str) -> None:
        from lbi_engine.activations import activation_from_onnx
        from lbi_engine.models.layer_lifting import LiftedActivation

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


#: Most nodes of an ONNX graph lbi lifts (the environment variable raises it).
def _onnx_budget(path: Path) -> LoadBudget:
    """The one budget of loading ``path``: file, external data, initializers, folded
    constants, layers and their activations (SECURITY.md, "The budget model")."""
    return LoadBudget(f"ONNX file {str(path)!r}", "check that it is the right file, or "
                      "simplify the graph (e.g. with onnxsim) and export it again")


def _tensor_bytes(t: Any) -> int:
    """Bytes of an initializer as a numpy array, from its dims and data type alone."""
    import math

    from onnx import helper

    try:
        item = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    except Exception:  # an unknown data type: numpy_helper refuses it with its own words
        item = 8
    return math.prod(int(d) for d in t.dims) * max(1, item)


MAX_NODES = 5000
MAX_NODES_ENV = "LBI_MAX_GRAPH_NODES"


def _max_graph_nodes() -> int:
    return bound_from_env(MAX_NODES_ENV, MAX_NODES, "nodes", ModelFileError)


def onnx_sequential(path: str | Path, input_shape: Sequence[int] | None = None,
                    ) -> tuple[nn.Module, tuple[int, ...]]:
    """The nn.Sequential lbi builds from an ONNX file (a ``SegmentGraph`` of them where the
    file adds or concatenates tensors), and the sample shape it takes."""
    import onnx

    p = check_model_file(path, "ONNX")
    from lbi_engine.models.footprint import check_onnx_external_data

    budget = _onnx_budget(p)
    # onnx.load (here and in the external-data check) reads the file whole, then parses it
    # into a second copy
    budget.charge(2 * p.stat().st_size, f"the file read and parsed ({p.stat().st_size:,} "
                  "bytes)")
    check_onnx_external_data(p, budget)  # memory-estimate hook: sizes before anything is read
    try:
        model = onnx.load(str(p))  # external weights, if any, next to the file
    except Exception as exc:  # protobuf raises DecodeError and friends
        raise ModelFileError(f"ONNX file {str(p)!r} could not be parsed ({type(exc).__name__}: "
                             f"{exc}); it is truncated or corrupt, or not an ONNX model. Export "
                             "it again (torch.onnx.export).") from exc
    if not model.graph.node or not model.graph.input:
        raise ModelFileError(f"{str(p)!r} holds no ONNX graph (no nodes or inputs); it is not an "
                             "ONNX model, or it is truncated. Export it again.")
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # ValidationError and C++ errors
        raise ModelFileError(f"ONNX file {str(p)!r} is not a valid model: "
                             f"{str(exc).strip().splitlines()[0][:300]}. Export it again.") from exc
    nodes, most = len(model.graph.node), _max_graph_nodes()
    if nodes > most:  # lifting walks every node (docs/developer/calibration.md): refuse before
        raise ModelFileError(f"ONNX file {str(p)!r} has {nodes:,} nodes; lbi lifts graphs of at "
                             f"most {most:,} (simplify it, e.g. with onnxsim, or raise the bound "
                             f"with {MAX_NODES_ENV}={nodes})")
    check_layer_count(model, p)
    newest = onnx.defs.onnx_opset_version()
    for entry in model.opset_import:  # an opset of 10^9 is a damaged or hostile file
        if entry.domain in ("", "ai.onnx") and not 1 <= entry.version <= newest:
            raise ModelFileError(f"ONNX file {str(p)!r} declares opset {entry.version}; this "
                                 f"lbi reads opsets 1 to {newest}: export it again with a "
                                 "released opset (torch.onnx.export(..., opset_version=17)).")
    try:
        return _Builder(model, p, input_shape, budget).build()
    except LbiError:
        raise
    except Exception as exc:  # malformed attributes, tensors, external data
        raise ModelFileError(f"ONNX file {str(p)!r} is inconsistent ({type(exc).__name__}: "
                             f"{exc}); export it again.") from exc
