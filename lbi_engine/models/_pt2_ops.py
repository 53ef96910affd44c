"""The ATen allow-list of the ``.pt2`` importer: one exported graph -> an ``nn.Sequential``
(a ``_graph_module.SegmentGraph`` of them where tensors are added or concatenated).

A room of :mod:`lbi_engine.models.pt2_import`. The graph JSON (``torch.export`` schema) is walked
node by node; each node's ``target`` (e.g. ``torch.ops.aten.conv2d.default``) must be in
``_OPS`` and becomes torch.nn modules that lbi constructs itself with the node's literal
arguments and the archive's tensors. Ops outside the allow-list are refused naming the node,
the op, the reason and the nearest supported alternative; non-liftable layers that have an
nn equivalent (max_pool2d, gelu, layer_norm, ...) are built as that module so that the
lifting room refuses them with the same maths as for a torch module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import torch
from torch import nn

from lbi_engine.errors import (
    InputError,
    InputShapeNeededError,
    UnsupportedLayerError,
)
from lbi_engine.limits import LoadBudget, _check_shape
from lbi_engine.models._decomposed_activations import (
    PRODUCT_FIX,
    product_why,
    refuse_decomposed,
)
from lbi_engine.models._graph_module import SegmentedWalk, SegmentGraphBuilder, concat_shape
from lbi_engine.models._onnx_graph import BATCHES, PROBE, match_values
from lbi_engine.models._pt2_channels import (
    BATCH,
    RESHAPE,
    SPLIT,
    channel_permutation,
    node_target,
    split_node,
)
from lbi_engine.models._pt2_translate import translate
from lbi_engine.models.footprint import ChainBudget

_ADD = {"aten.add.Tensor", "aten.add_.Tensor"}
_CAT = {"aten.cat.default", "aten.concat.default"}
_BATCH = BATCH  # the symbolic batch size (aten.sym_size.int(x, 0))
_PASS = {"aten.alias.default", "aten.clone.default", "aten.contiguous.default",
         "aten.detach.default", "aten.lift_fresh_copy.default", "aten.dropout.default",
         "aten.feature_dropout.default", "aten._assert_tensor_metadata.default"}

# elementwise ops evaluated (on lbi's own probe values) to recognise decomposed activations
_ELEMENTWISE: dict[str, Callable[..., Any]] = {
    "aten.abs.default": torch.abs, "aten.add.Tensor": torch.add, "aten.sub.Tensor": torch.sub,
    "aten.mul.Tensor": torch.mul, "aten.div.Tensor": torch.div, "aten.neg.default": torch.neg,
    "aten.sign.default": torch.sign, "aten.gt.Scalar": torch.gt, "aten.lt.Scalar": torch.lt,
    "aten.gt.Tensor": torch.gt, "aten.lt.Tensor": torch.lt, "aten.where.self": torch.where,
    "aten.exp.default": torch.exp, "aten.log1p.default": torch.log1p,
    "aten.relu.default": torch.relu, "aten.tanh.default": torch.tanh,
    "aten.sigmoid.default": torch.sigmoid, "aten.softplus.default": nn.functional.softplus,
    "aten.add.Scalar": torch.add, "aten.mul.Scalar": torch.mul,
    "aten.erf.default": torch.erf, "aten.pow.Tensor_Scalar": torch.pow,
}



_target = node_target


class GraphTranslator(SegmentedWalk):
    """Walks one exported graph (a chain from the user input to the output)."""

    def __init__(self, program: dict[str, Any], tensors: dict[str, torch.Tensor], path: Path,
                 input_shape: Sequence[int] | None, budget: LoadBudget | None = None) -> None:
        self.path = path
        # each layer's output shape without a dry run, its weights and activations charged
        # to the load's budget (with the archive's members and tensors)
        self.chain_budget = ChainBudget(f"network of .pt2 file {str(path)!r}", budget)
        gm = program["graph_module"]
        self.graph, sig = gm["graph"], gm["signature"]
        self.consts: dict[str, Any] = {}
        user: list[str] = []
        for spec in sig["input_specs"]:
            kind, body = next(iter(spec.items()))
            if kind == "user_input":
                user.append(body["arg"]["as_tensor"]["name"])
            elif kind in ("parameter", "buffer", "tensor_constant", "constant_input"):
                fqn = body.get(f"{kind}_name") or body.get("parameter_name") or \
                    body.get("buffer_name") or body.get("tensor_constant_name")
                if fqn not in tensors:
                    raise UnsupportedLayerError(f"{path.name!r}: the graph needs the {kind} "
                                                f"{fqn!r}, which the archive does not hold.")
                self.consts[body["arg"]["name"]] = tensors[fqn]
            else:
                raise UnsupportedLayerError(f"{path.name!r}: graph input of kind {kind!r} "
                                            "(custom objects, tokens) cannot be lifted; export a "
                                            "plain nn.Module whose forward takes one tensor.")
        outs = sig["output_specs"]
        if len(user) != 1 or len(outs) != 1 or "user_output" not in outs[0]:
            kinds = [next(iter(o)) for o in outs]
            mutation = " (a buffer mutation: the model was in training mode; call model.eval() "\
                       "before torch.export.export)" if any("mutation" in k for k in kinds) \
                else ""
            raise UnsupportedLayerError(f"{path.name!r} has {len(user)} tensor inputs and the "
                                        f"outputs {kinds}{mutation}; only single-input, "
                                        "single-output chains can be lifted.")
        # the segments of a graph (residual additions, concatenation) and the open one
        self.graph_parts = SegmentGraphBuilder(user[0])
        self.out_name = outs[0]["user_output"]["arg"]["as_tensor"]["name"]
        sizes = self.graph["tensor_values"][self.current]["sizes"]
        dims = [s.get("as_int") for s in sizes]
        self.static_batch = dims[0] if dims and dims[0] is not None else None
        self.shape = self._input_shape(dims[1:], input_shape)
        self.shapes = {self.current: self.shape}
        self.node: dict[str, Any] = {}
        self.index = 0

    def _input_shape(self, dims: list[int | None], given: Sequence[int] | None) -> tuple[int, ...]:

        if given is not None:
            shape = _check_shape(tuple(int(s) for s in given))
            if len(shape) != len(dims) or any(d is not None and d != s
                                              for d, s in zip(dims, shape, strict=True)):
                raise InputError(f"input_shape {shape} does not match the exported input "
                                         f"of {self.path.name!r}, (batch, {dims}).")
            return shape
        if any(d is None for d in dims):
            raise InputShapeNeededError(f"the exported input of {self.path.name!r} has dynamic "
                                        "sample dims; pass input_shape (one sample, e.g. "
                                        "1,28,28).")
        return _check_shape(tuple(int(d) for d in dims if d is not None),  # none is (above)
                            f"input shape of {self.path.name!r}")

    # --- helpers ---------------------------------------------------------------------------
    def label(self) -> str:
        return (f"node '{self.node.get('name', '?')}' (ATen op {_target(self.node)}, position "
                f"{self.index}) in {self.path.name!r}")

    def refuse(self, why: str) -> NoReturn:
        raise UnsupportedLayerError(f"{self.label()} cannot be lifted: {why}.")

    def value(self, arg: dict[str, Any]) -> Any:
        """A node argument as a Python value (tensors: the constant or the tensor's name)."""
        kind, v = next(iter(arg.items()))
        if kind == "as_tensor":
            return self.consts.get(v["name"], ("tensor", v["name"]))
        if kind == "as_tensors":  # torch.cat's list
            return [self.consts.get(t["name"], ("tensor", t["name"])) for t in v]
        if kind == "as_none":
            return None
        if kind == "as_sym_int":
            return self._sym(v)
        if kind == "as_sym_ints":
            return [self._sym(s) for s in v]
        if kind in ("as_int", "as_float", "as_bool", "as_string", "as_ints", "as_floats",
                    "as_bools"):
            return v
        if kind == "as_scalar_type":
            return None
        self.refuse(f"it has an argument of kind {kind!r}, which lbi does not read")

    def _sym(self, s: dict[str, Any]) -> Any:
        if "as_int" in s:
            return int(s["as_int"])
        value = self.consts.get(s.get("as_name", ""))
        if value is None:
            self.refuse(f"it uses the symbolic size {s.get('as_name')!r}, which is not the batch "
                        "size; export with static sample dims")
        return value

    def args(self) -> dict[str, Any]:
        return {i["name"]: self.value(i["arg"]) for i in self.node.get("inputs", [])}

    def add(self, *modules: nn.Module) -> None:
        for k, m in enumerate(modules):
            base = str(self.node.get("name", "node")).replace(".", "_") or "node"
            key = base if not hasattr(self.seq, base) else f"{base}_{k}"
            self.seq.add_module(key, m.eval())  # eval: a probe must not touch BN statistics
            self.shape = self.chain_budget.check(m, self.shape, key)

    # --- the walk --------------------------------------------------------------------------
    def build(self) -> tuple[nn.Module, tuple[int, ...]]:
        nodes = list(self.graph["nodes"])
        consumers: dict[str, list[int]] = {}
        for j, n in enumerate(nodes):
            for i in n.get("inputs", []):
                # a tensor, or torch.cat's list of them
                for t in [i["arg"].get("as_tensor"), *(i["arg"].get("as_tensors") or [])]:
                    if t:
                        consumers.setdefault(t["name"], []).append(j)
        self.consumers = consumers
        start = self.shape
        index = 0
        while index < len(nodes):
            self.index, self.node = index, nodes[index]
            index += 1
            target = _target(self.node)
            args = self.args()
            tensors = [v[1] for v in args.values() if isinstance(v, tuple) and v[:1] == ("tensor",)]
            if target == "aten.sym_size.int":
                self._sym_size(args)
                continue
            if target in _CAT:
                self._merge_cat(args)
                continue
            if target in SPLIT:
                split_node(self, args)
                continue
            if not tensors:  # weight-only ops (t, permute of a weight) are folded
                self._fold(target, args)
                continue
            if len(tensors) > 1:
                if target not in _ADD or len(tensors) != 2 or float(args.get("alpha", 1)) != 1:
                    self._refuse_branch(tensors)
                self._merge("add", tensors, self.shapes.get(tensors[0]))
                continue
            if tensors[0] != self.current and self.graph_parts.switch_to(tensors[0]):
                self.shape = self.shapes[tensors[0]]  # a branch from an earlier tensor
            if tensors[0] != self.current:
                self._refuse_branch(tensors)
            if self.uses(self.current, index - 1) > 1:
                end = self._activation_region(nodes, index - 1)
                if end is not None:
                    index = end + 1
                    continue
                self.graph_parts.close()  # several nodes use it: a branch point
            if target in RESHAPE:  # a channel shuffle: reshape-transpose-reshape
                end = channel_permutation(self, nodes, index - 1)
                if end is not None:
                    index = end + 1
                    continue
            if target not in _PASS or args.get("train"):
                translate(self, target, args)
            self._advance()
        if self.current != self.out_name:
            raise UnsupportedLayerError(f"{self.path.name!r}: the output '{self.out_name}' is not "
                                        f"the end of the chain '{self.current}'.")
        return self.graph_parts.module(), start

    def _refuse_branch(self, tensors: list[str]) -> NoReturn:
        if _target(self.node) in ("aten.mul.Tensor", "aten.mul_.Tensor") and len(tensors) == 2:
            self.refuse(f"{product_why(tensors)}. {PRODUCT_FIX}")
        self.refuse(f"it combines or uses the tensors {tensors} while the chain is at "
                    f"'{self.current}' in a way lbi does not lift (sums of two tensors and "
                    "concatenation of channels are lifted as a graph, MATH.md §5.6; other "
                    "combinations, e.g. products, are not affine)")

    def _merge(self, kind: str, tensors: list[str], shape: tuple[int, ...] | None) -> None:
        """A sum or channel concatenation of computed tensors: a node of the graph."""
        if kind == "add" and (shape is None or self.shapes.get(tensors[1]) != shape):
            self.refuse(f"it adds tensors of shapes {[self.shapes.get(t) for t in tensors]}; "
                        "lbi lifts sums of tensors of one shape")
        if not self.graph_parts.merge(kind, tensors, self.output_name()):
            self._refuse_branch(tensors)
        assert shape is not None  # checked above for sums, computed for concatenations
        self.shape = shape
        self.shapes[self.current] = shape

    def _merge_cat(self, args: dict[str, Any]) -> None:
        items = args.get("tensors")
        if not isinstance(items, list) or not all(isinstance(v, tuple) for v in items):
            self.refuse("it concatenates constants; lbi lifts concatenations of computed "
                        "tensors along channels")
        names = [v[1] for v in items]
        shapes = [self.shapes.get(t) for t in names]
        cat = concat_shape(shapes, int(args.get("dim", 0)))
        if cat is None:
            self.refuse(f"it concatenates {shapes} along dim {args.get('dim', 0)}; lbi lifts "
                        "the concatenation of channels (dim 1) of equal-sized maps")
        self._merge("cat", names, cat)

    def output_name(self) -> str:
        outs = self.node.get("outputs", [])
        t = outs[0].get("as_tensor") if outs else None
        if t is None:
            self.refuse("it does not produce one tensor")
        return str(t["name"])

    def _advance(self) -> None:
        outs = self.node.get("outputs", [])
        t = outs[0].get("as_tensor") if outs else None
        if t is None and outs and "as_tensors" in outs[0]:
            t = outs[0]["as_tensors"][0]  # (output, mean, invstd) of batch-norm variants
        if t is None:
            self.refuse("it does not produce one tensor")
        self.current = t["name"]
        self.shapes[self.current] = self.shape

    def uses(self, name: str, after: int) -> int:
        later = sum(1 for j in self.consumers.get(name, []) if j >= after and
                    _target(self.graph["nodes"][j]) != "aten.sym_size.int")
        return later + (name == self.out_name)

    def _sym_size(self, args: dict[str, Any]) -> None:
        src = args.get("self")
        dim = int(args.get("dim", 0))
        name = self.node["outputs"][0]["as_sym_int"]["as_name"]
        if not isinstance(src, tuple) or src[1] not in self.shapes:
            self.refuse("it reads the size of a tensor that is not on the chain")
        shape = self.shapes[src[1]]
        rank = len(shape) + 1
        self.consts[name] = _BATCH if dim % rank == 0 else shape[dim % rank - 1]

    def _fold(self, target: str, args: dict[str, Any]) -> None:
        out = self.node["outputs"][0].get("as_tensor", {}).get("name")
        x = args.get("self")
        if not isinstance(x, torch.Tensor) or out is None:
            self.refuse("it computes a value lbi cannot fold (no tensor input)")
        if target.split(".")[1].endswith("_"):
            self.refuse("it updates a buffer in place, which happens when the model is in "
                        "training mode (BatchNorm counting batches); call model.eval() before "
                        "torch.export.export")
        if target in ("aten.t.default", "aten.numpy_T.default"):
            self.consts[out] = x.t()
        elif target == "aten.permute.default":
            self.consts[out] = x.permute(*args["dims"])
        elif target == "aten.transpose.int":
            self.consts[out] = x.transpose(args["dim0"], args["dim1"])
        elif target in _PASS:
            self.consts[out] = x
        else:
            self.refuse("it computes a constant with an op outside lbi's allow-list")

    def reshape_targets(self, size: list[Any]) -> list[list[int]]:
        """The view/reshape target for batches 2 and 3 (see ``_onnx_graph.BATCHES``)."""
        out = []
        for b in BATCHES:
            t = [b if v == _BATCH else int(v) for v in size]
            if self.static_batch is not None and _BATCH not in size and t and \
                    t[0] == self.static_batch:
                t[0] = b  # exported with a fixed batch: its leading entry is the batch
            out.append(t)
        return out

    def _activation_region(self, nodes: list[dict[str, Any]], first: int) -> int | None:
        """Decomposed activations (softsign = x / (|x| + 1), ...): see ``_onnx_graph``."""
        env: dict[str, torch.Tensor] = {self.current: torch.from_numpy(PROBE)}
        scalars: list[float] = []
        for j in range(first, min(first + 16, len(nodes))):
            self.index, self.node = j, nodes[j]
            fn = _ELEMENTWISE.get(_target(self.node))
            if fn is None:
                return None
            vals: list[Any] = []
            for i in self.node.get("inputs", []):
                kind, v = next(iter(i["arg"].items()))
                if kind == "as_tensor" and v["name"] in env:
                    vals.append(env[v["name"]])
                elif kind in ("as_int", "as_float"):
                    vals.append(float(v))
                    scalars.append(float(v))
                elif kind == "as_tensor" and v["name"] in self.consts and \
                        self.consts[v["name"]].numel() == 1:
                    vals.append(float(self.consts[v["name"]]))
                    scalars.append(vals[-1])
                else:
                    return None
            with torch.no_grad():
                res = fn(*vals)
            out = self.node["outputs"][0]["as_tensor"]["name"]
            env[out] = res
            live = [t for t in env if t == self.out_name or
                    any(k > j for k in self.consumers.get(t, []))]
            if len(live) == 1 and live[0] != self.current:
                y = env[live[0]].double().numpy()
                module = match_values(y, scalars)
                if module is None:  # SiLU as x * sigmoid(x), ...: refused as what it is
                    refuse_decomposed(PROBE, y, f"nodes '{nodes[first].get('name', '?')}' to "
                                      f"'{self.node.get('name', '?')}' in {self.path.name!r}")
                    return None
                self.add(module)
                self.current = live[0]
                self.shapes[self.current] = self.shape
                return j
        return None
