"""Modules that are not nn.Sequential: trace the forward with torch.fx and accept a plain chain.

Only a linear chain can be lifted: every operation must consume exactly the output of the
previous one. Functional calls (F.relu, torch.flatten, x.view(x.size(0), -1), x * 2 + 1, ...)
are translated into equivalent modules and then handled like any other layer; a node that
combines two tensors (residual additions, concatenations) or reuses an earlier output
(skip connections) is refused with its node name.
"""

from __future__ import annotations

import operator
from typing import Any, NoReturn

import torch
import torch.nn.functional as F
from torch import Tensor, fx, nn

from lbi_engine.errors import UnsupportedLayerError
from lbi_engine.models._leaf_modules import LiftedActivation, is_leaf
from lbi_engine.operators import Reshape, ScaleShift

# functions/methods that become one activation module; value: (module factory, arg names after x)
_ACTS: dict[Any, tuple[Any, tuple[tuple[str, Any], ...]]] = {}


def _register(targets: tuple[Any, ...], factory: Any,
              params: tuple[tuple[str, Any], ...] = ()) -> None:
    for t in targets:
        _ACTS[t] = (factory, params)


_register((F.relu, torch.relu, torch.relu_, "relu", "relu_"), nn.ReLU)
_register((torch.sigmoid, F.sigmoid, "sigmoid", "sigmoid_"), nn.Sigmoid)
_register((torch.tanh, F.tanh, "tanh", "tanh_"), nn.Tanh)
_register((F.leaky_relu,), nn.LeakyReLU, (("negative_slope", 0.01),))
_register((F.hardtanh,), nn.Hardtanh, (("min_val", -1.0), ("max_val", 1.0)))
_register((F.relu6,), nn.ReLU6)
_register((F.elu,), nn.ELU, (("alpha", 1.0),))
_register((F.softplus,), nn.Softplus, (("beta", 1.0), ("threshold", 20.0)))
_register((F.softsign,), nn.Softsign)
_register((F.softshrink,), nn.Softshrink, (("lambd", 0.5),))
_register((F.hardsigmoid,), nn.Hardsigmoid)
_register((F.softmax, torch.softmax, "softmax"), nn.Softmax, (("dim", None),))
_register((F.gelu,), nn.GELU)
_register((F.silu,), nn.SiLU)
_register((F.mish,), nn.Mish)
_register((F.hardswish,), nn.Hardswish)
_register((F.selu, torch.selu), nn.SELU)
_register((F.logsigmoid,), nn.LogSigmoid)
_register((F.hardshrink,), nn.Hardshrink, (("lambd", 0.5),))
_register((F.max_pool2d, torch.max_pool2d), nn.MaxPool2d,
          (("kernel_size", None), ("stride", None), ("padding", 0)))
_register((F.avg_pool2d, torch._C._nn.avg_pool2d), nn.AvgPool2d,
          (("kernel_size", None), ("stride", None), ("padding", 0), ("ceil_mode", False),
           ("count_include_pad", True), ("divisor_override", None)))
_register((F.adaptive_avg_pool2d,), nn.AdaptiveAvgPool2d, (("output_size", None),))

_SHAPE_OPS = {"view", "reshape", "flatten", "unsqueeze", "squeeze", "unflatten", "contiguous",
              torch.reshape, torch.flatten, torch.unsqueeze, torch.squeeze}
_ARITH = {operator.add: "add", operator.iadd: "add", torch.add: "add", "add": "add",
          operator.sub: "sub", operator.isub: "sub", torch.sub: "sub", "sub": "sub",
          operator.mul: "mul", operator.imul: "mul", torch.mul: "mul", "mul": "mul",
          operator.truediv: "div", operator.itruediv: "div", torch.div: "div", "div": "div",
          operator.neg: "neg", torch.neg: "neg", "neg": "neg"}
_HELPER_METHODS = {"size", "dim"}


def _name(node: fx.Node) -> str:
    t = node.target
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


class NotAChain(UnsupportedLayerError):
    """A node combines or reuses tensors: the module is a graph, not a chain (the cue for
    :mod:`lbi_engine.models.graph_lifting`)."""


def _refuse(node: fx.Node, where: str, position: int, why: str,
            alternative: str, error: type[UnsupportedLayerError] = UnsupportedLayerError
            ) -> NoReturn:
    raise error(f"Node '{node.name}' ({node.op} {_name(node)}, position "
                                f"{position}) in '{where}' cannot be lifted: {why}. {alternative}")


def _params(node: fx.Node, env: dict[fx.Node, Any], spec: tuple[tuple[str, Any], ...]) -> dict:
    args = fx.node.map_arg(node.args, lambda n: env[n])[1:]
    kwargs = fx.node.map_arg(node.kwargs, lambda n: env[n])
    out = {}
    for i, (key, default) in enumerate(spec):
        value = args[i] if i < len(args) else kwargs.get(key, default)
        if value is not None or default is not None:
            out[key] = value
    return out


def _arith_module(node: fx.Node, env: dict[fx.Node, Any], chain: fx.Node, example: Tensor,
                  where: str, position: int) -> nn.Module:
    """x + c, x - c, c - x, x * c, x / c, -x with c a number or a constant tensor."""
    kind = _ARITH[node.target]
    if node.kwargs.get("rounding_mode") is not None:
        _refuse(node, where, position, "rounded division is not affine",
                "Use true division x / c.")
    if kind == "neg":
        return ScaleShift(-1.0, 0.0)
    a, b = node.args[0], node.args[1] if len(node.args) > 1 else node.kwargs.get("other")
    x_first = a is chain
    if (a is chain) == (b is chain):
        _refuse(node, where, position, "it multiplies/adds the input with itself, which is not "
                "affine", "Write the operation as a layer with fixed weights.")
    const = b if x_first else a
    other: Any = env[const] if isinstance(const, fx.Node) else const
    if node.kwargs.get("alpha", 1) != 1:
        other = other * node.kwargs["alpha"]
    c = torch.as_tensor(other, dtype=example.dtype, device=example.device)
    if isinstance(other, Tensor) and other.dim() >= example.dim():
        if other.dim() > example.dim() or other.shape[0] != 1:
            _refuse(node, where, position, "the constant has a batch dimension of its own",
                    "Use a constant shaped like one sample.")
        c = c[0]
    one, zero = torch.ones_like(c), torch.zeros_like(c)
    if kind == "add":
        return ScaleShift(one, c)
    if kind == "sub":
        return ScaleShift(one, -c) if x_first else ScaleShift(-one, c)
    if kind == "mul":
        return ScaleShift(c, zero)
    if not x_first:
        _refuse(node, where, position, "dividing by the input is not affine",
                "Only division of the input by a constant can be lifted.")
    return ScaleShift(1.0 / c, zero)


def _module_for(node: fx.Node, gm: fx.GraphModule, env: dict[fx.Node, Any], chain: fx.Node,
                where: str, position: int) -> nn.Module:
    """An nn.Module doing what the node does to the chain tensor (refusing what cannot)."""
    x = env[chain]
    if node.op == "call_module":
        return gm.get_submodule(str(node.target))
    target = node.target
    if target in _ACTS:
        factory, spec = _ACTS[target]
        module = factory(**_params(node, env, spec))
        if factory is nn.Softmax and getattr(module, "dim", None) is None:
            module.dim = 1
        return module
    if target in _ARITH:
        return _arith_module(node, env, chain, x, where, position)
    if target in (F.dropout, torch.dropout, "dropout"):
        p = _params(node, env, (("p", 0.5), ("training", True)))
        m = nn.Dropout(p["p"])
        return m.train(bool(p["training"]))
    if target in (torch.clamp, torch.clip, "clamp", "clip"):
        p = _params(node, env, (("min", None), ("max", None)))
        from lbi_engine.activations import activation_from_onnx

        return LiftedActivation(activation_from_onnx("Clip", {"min": p.get("min"),
                                                              "max": p.get("max")}))
    if target is F.pad:
        p = _params(node, env, (("pad", None), ("mode", "constant"), ("value", None)))
        if p.get("mode", "constant") != "constant" or (p.get("value") or 0) != 0 \
                or len(p["pad"]) != 4:
            _refuse(node, where, position, "only zero padding of the last two dims is supported",
                    "Use F.pad(x, (l, r, t, b)) or nn.ZeroPad2d.")
        return nn.ZeroPad2d(tuple(p["pad"]))
    if target in _SHAPE_OPS:
        args = fx.node.map_arg(node.args, lambda n: env[n])
        kwargs = fx.node.map_arg(node.kwargs, lambda n: env[n])
        with torch.no_grad():
            y = getattr(x, target)(*args[1:], **kwargs) if isinstance(target, str) \
                else target(*args, **kwargs)
        if y.dim() == 0 or y.shape[0] != x.shape[0]:
            _refuse(node, where, position, "the reshape does not keep the batch dimension first",
                    "Use x.reshape(x.size(0), ...) or torch.flatten(x, 1).")
        return Reshape(tuple(y.shape[1:]))
    if target in (F.linear, F.conv2d, torch.conv2d, torch.matmul, F.conv_transpose2d):
        _refuse(node, where, position, "a functional layer with explicit weights is not "
                "translated", "Hold the weights in nn.Linear/nn.Conv2d modules instead.")
    _refuse(node, where, position, "this operation is neither a known affine map nor a proximal "
            "activation", "Use the modules of torch.nn listed in the documentation of "
            "LiftedNetwork.from_module, in an nn.Sequential.")


def _is_helper(node: fx.Node, env: dict[fx.Node, Any]) -> bool:
    """size/shape arithmetic that feeds reshape arguments rather than the data path."""
    if node.op == "call_method" and node.target in _HELPER_METHODS:
        return True
    if node.op == "call_function" and node.target is getattr:
        return node.args[1] in ("shape", "ndim", "dtype", "device")
    if node.op == "call_function" and node.target in (operator.getitem, operator.mul,
                                                         operator.floordiv, operator.add,
                                                         operator.sub):
        values = [env.get(n) for n in node.all_input_nodes]
        return all(n in env and not isinstance(v, Tensor) for n, v in
                   zip(node.all_input_nodes, values, strict=True))
    return False


class _LeafTracer(fx.Tracer):
    """Stops at the same leaves as the Sequential walk (so a user subclass of nn.Conv2d that
    keeps torch's forward stays one layer instead of an untranslatable F.conv2d call)."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return is_leaf(m)


def walk_fx(walker: Any, module: nn.Module, name: str) -> None:
    """Append the layers of a traced, chain-shaped ``module`` to ``walker`` (a ModuleWalker)."""
    where = name or type(module).__name__
    try:
        tracer = _LeafTracer()
        gm = fx.GraphModule(module, tracer.trace(module))
    except Exception as exc:  # fx raises many types for untraceable code
        raise UnsupportedLayerError(
            f"Module '{where}' ({type(module).__name__}) is not an nn.Sequential and torch.fx "
            f"cannot trace its forward ({type(exc).__name__}: {exc}). Write it as an "
            "nn.Sequential of supported layers.") from exc
    env: dict[fx.Node, Any] = {}
    chain: fx.Node | None = None
    prefix = f"{name}." if name else ""
    for node in gm.graph.nodes:
        position = len(walker.entries)
        if node.op == "placeholder":
            if chain is not None:
                _refuse(node, where, position, "the module takes more than one input",
                        "Only single-input chains can be lifted.")
            chain, env[node] = node, walker.x
            continue
        if node.op == "get_attr":
            env[node] = _fetch_attr(gm, node.target)
            continue
        if node.op == "output":
            if node.args[0] is not chain:
                _refuse(node, where, position, "the module does not return the output of its "
                        "last layer as one tensor", "Return a single tensor.")
            return
        if _is_helper(node, env):
            args = fx.node.map_arg(node.args, lambda n: env[n])
            kwargs = fx.node.map_arg(node.kwargs, lambda n: env[n])
            env[node] = getattr(args[0], node.target)(*args[1:], **kwargs) \
                if node.op == "call_method" else node.target(*args, **kwargs)
            continue
        tensors = [n for n in node.all_input_nodes if isinstance(env.get(n), Tensor)
                   and n.op != "get_attr"]
        if len(tensors) > 1:
            _refuse(node, where, position, f"it combines several tensors "
                    f"({', '.join(repr(n.name) for n in tensors)}): a residual addition or a "
                    "branch, which a lifted chain cannot represent",
                    "Remove the skip connection, or invert only the chain part of the network.",
                    NotAChain)
        if not tensors or tensors[0] is not chain:
            used = repr(tensors[0].name) if tensors else "no tensor"
            previous = repr(chain.name) if chain is not None else "(none)"
            _refuse(node, where, position, f"it uses {used} instead of the previous layer's "
                    f"output {previous} (a skip connection or branch)",
                    "Only plain chains of layers can be lifted.", NotAChain)
        sub = _module_for(node, gm, env, chain, where, position)
        label = prefix + (str(node.target) if node.op == "call_module" else node.name)
        env[node] = walker.add(label, sub)
        chain = node


def _fetch_attr(gm: fx.GraphModule, target: Any) -> Any:
    obj: Any = gm
    for part in str(target).split("."):
        obj = getattr(obj, part)
    return obj
