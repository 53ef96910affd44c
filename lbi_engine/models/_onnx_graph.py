"""Graph-level helpers of the ONNX importer: shape arithmetic and multi-node activations.

A room of ``lbi_engine.models.onnx_import``. Exporters do not always write a plain chain of layers:

* **Shape arithmetic.** ``x.view(x.size(0), -1)`` exported with a dynamic batch becomes
  ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``; ``nn.Unflatten`` becomes a dozen
  integer ops. These are evaluated here with numpy for two batch sizes (2 and 3), so a
  Reshape learns its target for each batch and the importer can check that it keeps the batch
  dimension first. Constant subgraphs (a Transpose of a weight, a Cast, an Identity of an
  initializer) are folded the same way. Only an allow-list of small ops is evaluated, each
  with a size bound, so a hostile file cannot make lbi allocate without limit.
* **Multi-node activations.** The dynamo exporter writes ``nn.Softplus`` as
  ``Where(x*beta > threshold, x, Softplus(x*beta)/beta)``, ``nn.Softsign`` as
  ``x / (|x| + 1)`` and ``nn.Softshrink`` as a Where of Abs/Sign/Mul/Sub. A region of
  elementwise nodes that starts at the chain's tensor and ends in one tensor is evaluated on
  a probe grid and matched against the torch activations built from the region's scalar
  constants; the match must be exact (float64) or the region is refused.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from lbi_engine.errors import ModelFileError
from lbi_engine.limits import LAYERS_ENV, max_layers
from lbi_engine.models._decomposed_activations import refuse_decomposed

#: Batch sizes that batch-dependent shape values are evaluated for.
BATCHES = (2, 3)
#: Largest tensor a folded op may produce (64 M values): weight transposes fit, bombs do not.
MAX_FOLD_VALUES = 2**26

FOLD_OPS = {"Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Cast", "Add", "Sub", "Mul",
            "Div", "Mod", "Neg", "Abs", "Floor", "Ceil", "Max", "Min", "Equal", "Where",
            "Identity", "Reshape", "Transpose", "ReduceProd", "Sqrt"}


def _attr(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _axes(node: Any, args: list[np.ndarray | None], a: dict[str, Any]) -> list[int] | None:
    if "axes" in a:
        return [int(v) for v in a["axes"]]
    if len(args) > 1 and args[1] is not None:
        return [int(v) for v in np.asarray(args[1]).reshape(-1)]
    return None


def _bound(op: str, args: list[np.ndarray | None]) -> int:
    """An upper bound on the size of the op's output, checked before it is computed."""
    arrays = [np.asarray(x) for x in args if x is not None]
    if op in ("Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Equal", "Where"):
        shape = np.broadcast_shapes(*(x.shape for x in arrays))
        return math.prod(shape)
    if op == "Concat":
        return sum(x.size for x in arrays)
    if op == "Gather":
        return arrays[0].size * max(1, arrays[1].size)
    return max((x.size for x in arrays), default=0)


def fold_bytes(op: str, args: list[np.ndarray | None]) -> int:
    """An upper bound on the bytes of the op's output (what a folded constant keeps)."""
    arrays = [np.asarray(x) for x in args if x is not None]
    try:
        values = _bound(op, args)
    except ValueError:  # shapes that do not broadcast: fold refuses them
        return 0
    return values * max([8, *(x.dtype.itemsize for x in arrays)])


def fold(node: Any, args: list[np.ndarray | None], opset: int) -> np.ndarray:
    """The output of one allow-listed op on numpy inputs (ONNX semantics, all opsets used)."""
    op, a = node.op_type, _attr(node)
    if _bound(op, args) > MAX_FOLD_VALUES:
        raise ValueError(f"{op} would produce more than {MAX_FOLD_VALUES:,} values")
    if not args or args[0] is None:  # every allow-listed op has a first input
        raise ValueError(f"{op} has no first input")
    x = np.asarray(args[0])
    if op == "Identity":
        return x
    if op == "Gather":
        return np.take(x, np.asarray(args[1]).astype(np.int64), axis=int(a.get("axis", 0)))
    if op == "Unsqueeze":
        axes = _axes(node, args, a) or []
        rank = x.ndim + len(axes)
        out = x
        for ax in sorted(v % rank for v in axes):
            out = np.expand_dims(out, ax)
        return out
    if op == "Squeeze":
        sq_axes = _axes(node, args, a)
        return np.squeeze(x) if sq_axes is None else np.squeeze(x, axis=tuple(sq_axes))
    if op == "Concat":
        return np.concatenate([np.asarray(v) for v in args], axis=int(a["axis"]))
    if op == "Slice":
        return _slice(x, args, a, opset)
    if op == "Cast":
        from onnx import helper

        return x.astype(helper.tensor_dtype_to_np_dtype(int(a["to"])))
    if op == "Reshape":
        shape = [int(v) for v in np.asarray(args[1]).reshape(-1)]
        if not a.get("allowzero", 0):
            shape = [x.shape[i] if v == 0 else v for i, v in enumerate(shape)]
        return x.reshape(shape)
    if op == "Transpose":
        perm = a.get("perm")
        return np.transpose(x, perm if perm is None else list(perm))
    if op == "ReduceProd":
        return np.prod(x, keepdims=bool(a.get("keepdims", 1)))
    unary = {"Neg": np.negative, "Abs": np.abs, "Floor": np.floor, "Ceil": np.ceil,
             "Sqrt": np.sqrt}
    if op in unary:
        return unary[op](x)
    y = np.asarray(args[1])
    if op == "Where":
        return np.where(x.astype(bool), y, np.asarray(args[2]))
    if op == "Div" and np.issubdtype(np.result_type(x, y), np.integer):
        return np.trunc(x / y).astype(np.result_type(x, y))  # ONNX integer Div truncates
    if op == "Mod" and not a.get("fmod", 0):
        return np.mod(x, y)
    binary = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
              "Mod": np.fmod, "Max": np.maximum, "Min": np.minimum, "Equal": np.equal}
    return binary[op](x, y).astype(np.result_type(x, y), copy=False) if op != "Equal" \
        else binary[op](x, y)


def _slice(x: np.ndarray, args: list[np.ndarray | None], a: dict[str, Any],
           opset: int) -> np.ndarray:
    if opset < 10 or "starts" in a:
        starts, ends = list(a["starts"]), list(a["ends"])
        axes, steps = list(a.get("axes", range(len(starts)))), [1] * len(starts)
    else:
        def vals(i: int) -> list[int] | None:
            return None if len(args) <= i or args[i] is None else \
                [int(v) for v in np.asarray(args[i]).reshape(-1)]
        starts, ends = vals(1) or [], vals(2) or []
        axes = vals(3) or list(range(len(starts)))
        steps = vals(4) or [1] * len(starts)
    index: list[slice] = [slice(None)] * x.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps, strict=True):
        n = x.shape[ax]
        e = max(-n - 1, min(n, e))  # INT64_MAX/MIN sentinels
        s = max(-n, min(n, s))
        index[ax] = slice(s, e, st)
    return x[tuple(index)]


# --- multi-node activations ----------------------------------------------------------------
ELEMENTWISE = {"Abs", "Add", "Sub", "Mul", "Div", "Greater", "Less", "GreaterOrEqual",
               "LessOrEqual", "Where", "Sign", "Softplus", "Neg", "Relu", "Exp", "Log",
               "Tanh", "Sigmoid", "Max", "Min", "Clip", "Identity", "Cast", "Erf", "Pow"}

_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Abs": np.abs, "Sign": np.sign, "Neg": np.negative, "Exp": np.exp, "Log": np.log,
    "Tanh": np.tanh, "Relu": lambda v: np.maximum(v, 0.0), "Identity": lambda v: v,
    "Softplus": lambda v: np.logaddexp(0.0, v),
    "Sigmoid": lambda v: 0.5 * (1 + np.tanh(v / 2)),
    "Erf": lambda v: torch.special.erf(torch.from_numpy(np.asarray(v, np.float64))).numpy()}
_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
           "Greater": np.greater, "Less": np.less, "GreaterOrEqual": np.greater_equal,
           "LessOrEqual": np.less_equal, "Max": np.maximum, "Min": np.minimum, "Pow": np.power}

#: The probe grid a region is compared on (float64): both tails and fine steps near 0.
PROBE = np.concatenate([np.linspace(-60.0, 60.0, 2401), np.linspace(-2.0, 2.0, 4001)])


def eval_region(nodes: list[Any], x_name: str, consts: dict[str, np.ndarray],
                probe: np.ndarray) -> dict[str, np.ndarray]:
    """Values of every tensor of an elementwise region for x = probe (float64, with numpy)."""
    env: dict[str, np.ndarray] = {x_name: probe}
    with np.errstate(all="ignore"):
        for n in nodes:
            # None for an omitted optional input (Clip's bounds)
            args: list[Any] = [env[i] if i in env else np.asarray(consts[i], dtype=np.float64)
                               if i else None for i in n.input]
            op = n.op_type
            if op in _UNARY or op == "Cast":
                out = args[0] if op == "Cast" else _UNARY[op](args[0])
            elif op == "Where":
                out = np.where(args[0].astype(bool), args[1], args[2])
            elif op == "Clip":
                a = _attr(n)
                lo = args[1] if len(args) > 1 and args[1] is not None else a.get("min", -np.inf)
                hi = args[2] if len(args) > 2 and args[2] is not None else a.get("max", np.inf)
                out = np.clip(args[0], lo, hi)
            else:
                out = _BINARY[op](args[0], args[1])
            env[n.output[0]] = np.asarray(out, dtype=np.float64) if op not in (
                "Greater", "Less", "GreaterOrEqual", "LessOrEqual") else np.asarray(out)
    return env


def _candidates(scalars: list[float]) -> list[nn.Module]:
    """Torch activations whose parameters are among the region's scalar constants."""
    vals = sorted(set(scalars) | {1.0, 20.0})
    out: list[nn.Module] = [nn.Softsign(), nn.ReLU(), nn.Sigmoid(), nn.Tanh(), nn.Hardsigmoid()]
    out += [nn.Softshrink(v) for v in vals if v > 0]
    out += [nn.Softplus(b, t) for b, t in itertools.product(vals, vals) if b > 0]
    out += [nn.LeakyReLU(v) for v in vals] + [nn.ELU(v) for v in vals if v > 0]
    out += [nn.Hardtanh(lo, hi) for lo, hi in itertools.product(vals + [-v for v in vals],
                                                                vals) if lo < hi]
    return out


def match_activation(nodes: list[Any], x_name: str, out_name: str,
                     consts: dict[str, np.ndarray], where: str = "") -> nn.Module | None:
    """The torch activation the region computes exactly (on the probe grid), else None; a
    region computing an activation that is not a proximal map (SiLU as x * sigmoid(x), ...)
    is refused as that activation, named by ``where``."""
    y = eval_region(nodes, x_name, consts, PROBE)[out_name]
    scalars = [float(np.asarray(consts[i]).reshape(-1)[0]) for n in nodes for i in n.input
               if i in consts and np.asarray(consts[i]).size == 1]
    module = match_values(y, scalars)
    if module is None and where:
        refuse_decomposed(PROBE, y, where)
    return module


def match_values(y: np.ndarray, scalars: list[float]) -> nn.Module | None:
    """The torch activation whose values on ``PROBE`` are ``y`` (float64), else None.

    Candidates take their parameters from ``scalars`` (the region's constants)."""
    if y.shape != PROBE.shape or not np.isfinite(y).all():
        return None
    t = torch.from_numpy(PROBE)
    scale = max(1.0, float(np.abs(y).max()))
    for m in _candidates(scalars):
        with torch.no_grad():
            want = m(t).numpy()
        # float32 constants (0.3 is 0.30000001) are used as they are, so agreement is to
        # rounding: 1e-9 relative separates the candidates (they differ by >= 1e-3 somewhere).
        if float(np.abs(want - y).max()) <= 1e-9 * scale:
            return m
    return None


_NONNEG_OPS = {"Relu", "Sigmoid", "Softmax", "HardSigmoid", "Softplus"}


def produced_nonneg(nodes: Any, name: str, consts: dict[str, np.ndarray],
                    depth: int = 0) -> bool:
    """Whether the graph's tensor ``name`` is >= 0 by how it is made: an activation with range
    [0, ..), Clip with min >= 0, a max-pool of such values, or a concatenation of them (a
    max-pool at a branch point reads the tensor an earlier segment ended in)."""
    node = next((n for n in nodes if name in n.output), None)
    if node is None or depth > 16:
        return False
    if node.op_type in _NONNEG_OPS:
        return True
    if node.op_type == "Clip":
        low = consts.get(node.input[1]) if len(node.input) > 1 and node.input[1] else None
        return low is not None and float(np.asarray(low).reshape(-1)[0]) >= 0
    if node.op_type in ("MaxPool", "GlobalMaxPool", "Identity", "Concat"):
        return all(produced_nonneg(nodes, i, consts, depth + 1) for i in node.input if i)
    return False


#: ONNX operators each of which becomes (at least) one lifted layer.
_LAYER_OPS = frozenset("Relu LeakyRelu PRelu Elu Selu Celu Sigmoid HardSigmoid HardSwish Tanh "
                       "Softplus Softsign Clip Gelu Mish Softmax LogSoftmax MaxPool".split())


def check_layer_count(model: Any, p: Path) -> None:
    """Refuse, before the walk, a graph whose activations alone would lift to more layers
    than :func:`lbi_engine.limits.max_layers` (each costs a match and a lifted layer)."""
    layers = sum(node.op_type in _LAYER_OPS for node in model.graph.node)
    if layers > max_layers():
        raise ModelFileError(f"ONNX file {str(p)!r} has {layers:,} activation and pooling "
                             f"nodes, each a lifted layer; lbi lifts at most {max_layers():,} "
                             f"layers (raise the bound with {LAYERS_ENV}={layers} if it is yours)")
