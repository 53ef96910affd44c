"""The model-card format: layer specs <-> ``nn.Module``, weight hashes, reading and checking.

A card is JSON. ``architecture.layers`` lists layer specs such as ``{"type": "Conv2d",
"in_channels": 1, "out_channels": 8, "kernel_size": [4, 4], ...}``; only allow-listed
``torch.nn`` classes are ever constructed, so a card is data and never runs code. Since
format_version 2 a layer may be a residual block ``{"type": "Residual", "body": [specs],
"shortcut": [specs]}`` (body(x) + shortcut(x); an empty shortcut is the identity), built
into lbi's own :class:`lbi_engine.models._graph_module.Residual` and lifted as a graph.
``architecture.encoder_layers`` (default: all) says how many layers form the encoder.
See resources/models/README.md for every field. The layer specs' parameter checks are in
``_layer_spec_checks``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lbi_engine.errors import FormatVersionError, ModelFileError, UnsupportedLayerError
from lbi_engine.models._layer_spec_checks import (
    MAX_LAYER_VALUES,
    _check_layer_params,
    _check_layer_size,
    _show,
)

if TYPE_CHECKING:
    from torch import Tensor, nn

__all__ = ["CARD_FORMAT_VERSION", "LAYER_PARAMS", "LBI_LAYERS", "file_sha256", "tensor_sha256",
           "describe_module", "build_module", "read_card", "check_state", "format_version_for",
           "check_residual_shapes"]

#: The newest card format this lbi reads: 1 = a chain of layers, 2 = layers may also be
#: ``Residual`` blocks. Writers record the lowest version a card needs
#: (:func:`format_version_for`), so a chain stays readable by an lbi that knows only 1.
CARD_FORMAT_VERSION = 2

#: The block type a card uses for a residual connection, its fields, and how deep blocks may
#: nest (a card is data from someone else: a thousand nested blocks must end in a message,
#: not in Python's recursion limit).
RESIDUAL = "Residual"
RESIDUAL_FIELDS = ("type", "body", "shortcut")
MAX_BLOCK_DEPTH = 8

# torch.nn classes a card may name, with the constructor arguments describe_module records.
# Non-liftable layers (MaxPool2d, GELU, ...) are buildable on purpose: lifting them then gives
# the network room's UnsupportedLayerError, which explains why and what to use instead.
LAYER_PARAMS: dict[str, tuple[str, ...]] = {
    "Linear": ("in_features", "out_features", "bias"),
    "Conv2d": ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation",
               "groups", "bias"),
    "ConvTranspose2d": ("in_channels", "out_channels", "kernel_size", "stride", "padding",
                        "output_padding", "groups", "bias", "dilation"),
    "Flatten": ("start_dim", "end_dim"), "Unflatten": ("dim", "unflattened_size"),
    "AvgPool2d": ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                  "divisor_override"),
    "AdaptiveAvgPool2d": ("output_size",), "ZeroPad2d": ("padding",),
    "PReLU": ("num_parameters",), "CELU": ("alpha",),
    "BatchNorm1d": ("num_features", "eps", "momentum", "affine", "track_running_stats"),
    "BatchNorm2d": ("num_features", "eps", "momentum", "affine", "track_running_stats"),
    "Identity": (), "ReLU": (), "Sigmoid": (), "Tanh": (), "Softsign": (), "Hardsigmoid": (),
    "ReLU6": (), "LeakyReLU": ("negative_slope",), "ELU": ("alpha",),
    "Hardtanh": ("min_val", "max_val"), "Softplus": ("beta", "threshold"),
    "Softshrink": ("lambd",), "Softmax": ("dim",), "Dropout": ("p",),
    "MaxPool2d": ("kernel_size", "stride", "padding"), "GELU": (), "SiLU": (),
}


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tensor_sha256(state: dict[str, Tensor]) -> str:
    """sha256 over (name, dtype, shape, raw bytes) of each tensor, in sorted name order.

    Independent of any file format, so regenerated weights can be compared with a card.
    """
    h = hashlib.sha256()
    for k in sorted(state):
        t = state[k].detach().to("cpu").contiguous()
        h.update(f"{k}|{str(t.dtype)}|{tuple(t.shape)}|".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


#: lbi's own small layers (what importers build for views, constant arithmetic and ONNX
#: activations): ``Reshape`` {"shape"}, ``ScaleShift`` {"scale_shape", "shift_shape"} (the
#: tensors are in the weights file), ``Activation`` {"spec": a ProximalActivation spec}.
LBI_LAYERS = ("Reshape", "ScaleShift", "Activation")


def _describe_lbi(m: nn.Module) -> dict[str, Any] | None:
    from lbi_engine.models.layer_lifting import LiftedActivation
    from lbi_engine.operators import Reshape, ScaleShift

    if type(m) is Reshape:
        return {"type": "Reshape", "shape": list(m.shape)}
    if type(m) is ScaleShift:
        return {"type": "ScaleShift", "scale_shape": list(m.scale.shape),
                "shift_shape": list(m.shift.shape)}
    if type(m) is LiftedActivation:
        return {"type": "Activation", "spec": m.activation.spec()}
    return None


def _build_lbi(kind: str, spec: dict[str, Any], where: str) -> nn.Module:
    import math

    import torch

    from lbi_engine.activations import make_activation
    from lbi_engine.errors import LbiError
    from lbi_engine.models.layer_lifting import LiftedActivation
    from lbi_engine.operators import Reshape, ScaleShift

    try:
        if kind == "Reshape":
            return Reshape([int(v) for v in spec["shape"]])
        if kind == "ScaleShift":
            shapes = [[int(v) for v in spec[k]] for k in ("scale_shape", "shift_shape")]
            if any(math.prod(sh) > MAX_LAYER_VALUES or min(sh, default=1) < 0 for sh in shapes):
                raise ModelFileError(f"{where} has sizes {shapes}; fix the card")
            return ScaleShift(torch.zeros(shapes[0]), torch.zeros(shapes[1]))
        return LiftedActivation(make_activation(spec["spec"]))
    except (KeyError, TypeError, ValueError, LbiError) as exc:
        if isinstance(exc, ModelFileError):
            raise
        raise ModelFileError(f"{where} has bad parameters {spec} ({exc})") from exc


def describe_module(module: nn.Module) -> list[dict[str, Any]]:
    """Layer specs of a flat ``nn.Sequential`` (inverse of :func:`build_module`)."""
    from torch import nn

    from lbi_engine.models._graph_module import Residual

    specs = []
    for i, m in enumerate(module.children() if isinstance(module, nn.Sequential) else [module]):
        if type(m) is Residual:
            specs.append({"type": RESIDUAL, "body": describe_module(m.body),
                          "shortcut": describe_module(m.shortcut) if len(m.shortcut) else []})
            continue
        own = _describe_lbi(m)
        if own is not None:
            specs.append(own)
            continue
        kind = type(m).__name__
        if kind not in LAYER_PARAMS or type(m) is not getattr(nn, kind):
            raise UnsupportedLayerError(f"layer {i} ({kind}) cannot be described in a card; "
                                        f"use one of {sorted(LAYER_PARAMS) + list(LBI_LAYERS)}")
        spec: dict[str, Any] = {"type": kind}
        for name in LAYER_PARAMS[kind]:
            value = getattr(m, name)
            if name == "bias":
                value = value is not None if not isinstance(value, bool) else value
            elif name == "affine" or name == "track_running_stats":
                value = bool(value)
            elif isinstance(value, tuple):
                value = list(value)
            spec[name] = value
        specs.append(spec)
    return specs


def build_module(layers: list[dict[str, Any]], where: str = "card",
                 field: str = "architecture.layers", depth: int = 0) -> nn.Sequential:
    """``nn.Sequential`` from layer specs; only allow-listed ``torch.nn`` classes and lbi's
    own modules (``Residual`` blocks among them) are built."""
    from torch import nn

    if not isinstance(layers, list) or not layers:
        raise ModelFileError(f"{where}: '{field}' must be a non-empty list of layer "
                             "specs like {\"type\": \"Linear\", \"in_features\": 784, ...}")
    if depth == 0:
        _check_layer_count(layers, where, field)
    mods = []
    for i, spec in enumerate(layers):
        kind = spec.get("type") if isinstance(spec, dict) else None
        if not isinstance(kind, str):  # a list or number is not a type name (nor hashable)
            kind = None if kind is None else repr(kind)
        # a top-level layer keeps its old name; one inside a block is named by its field
        label = f"layer {i}" if depth == 0 else f"{field}[{i}]"
        if kind == RESIDUAL:
            mods.append(_build_residual(spec, where, f"{field}[{i}]", depth))
            continue
        if kind in LBI_LAYERS:
            mods.append(_build_lbi(kind, spec, f"{where}: {label} ({kind})"))
            continue
        if kind not in LAYER_PARAMS:
            raise ModelFileError(f"{where}: {label} has unknown type {kind!r}; supported: "
                                 f"{', '.join(sorted(LAYER_PARAMS) + list(LBI_LAYERS))}, "
                                 f"{RESIDUAL}")
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in spec.items()
                  if k != "type"}
        try:
            _check_layer_params(kwargs, f"{where}: {label} ({kind})")
            _check_layer_size(getattr(nn, kind), kwargs, f"{where}: {label} ({kind})")
            mods.append(getattr(nn, kind)(**kwargs))
        except (TypeError, ValueError, RuntimeError, AssertionError, OverflowError) as exc:
            if isinstance(exc, ModelFileError):
                raise
            raise ModelFileError(f"{where}: {label} ({kind}) has bad parameters {kwargs} "
                                 f"({exc})") from exc
    return nn.Sequential(*mods)


def _check_layer_count(layers: list[Any], where: str, field: str) -> None:
    """Refuse a card of more layers (those inside residual blocks too) than
    :func:`lbi_engine.limits.max_layers`, before any is built."""
    from lbi_engine.limits import LAYERS_ENV, max_layers

    bound, count, stack = max_layers(), 0, [layers]
    while stack and count <= bound:
        specs = stack.pop()
        count += len(specs)
        stack += [v for spec in specs if isinstance(spec, dict) for k, v in spec.items()
                  if k in ("body", "shortcut") and isinstance(v, list)]
    if count > bound:
        raise ModelFileError(f"{where}: '{field}' has more than {bound:,} layers; lbi lifts at "
                             f"most {bound:,} (set {LAYERS_ENV} to allow more if it is yours)")


def _build_residual(spec: dict[str, Any], where: str, field: str, depth: int) -> nn.Module:
    """A ``Residual`` block from its spec; every malformed field is named."""
    from torch import nn

    from lbi_engine.models._graph_module import Residual

    odd = [k for k in spec if k not in RESIDUAL_FIELDS]
    if odd:
        raise ModelFileError(f"{where}: {field}.{odd[0]} is not a field of a {RESIDUAL} block "
                             f"(its fields: {', '.join(RESIDUAL_FIELDS)}); fix the card")
    if depth >= MAX_BLOCK_DEPTH:
        raise ModelFileError(f"{where}: {field} nests {RESIDUAL} blocks more than "
                             f"{MAX_BLOCK_DEPTH} deep; fix the card")
    if "body" not in spec:
        raise ModelFileError(f"{where}: {field}.body is missing: a {RESIDUAL} block needs the "
                             "list of layers of its main path; fix the card")
    body = build_module(spec["body"], where, f"{field}.body", depth + 1)
    shortcut = spec.get("shortcut", [])
    if not isinstance(shortcut, list):
        raise ModelFileError(f"{where}: {field}.shortcut={_show(shortcut)[:40]} must be a list "
                             "of layer specs ([] for the identity); fix the card")
    return Residual(body, build_module(shortcut, where, f"{field}.shortcut", depth + 1)
                    if shortcut else nn.Sequential())


def format_version_for(layers: list[dict[str, Any]]) -> int:
    """The lowest card format that can hold ``layers``: 2 with a ``Residual`` block, else 1."""
    def has_block(specs: Any) -> bool:
        return isinstance(specs, list) and any(
            isinstance(s, dict) and (s.get("type") == RESIDUAL or has_block(s.get("body"))
                                     or has_block(s.get("shortcut"))) for s in specs)

    return 2 if has_block(layers) else 1


def check_residual_shapes(module: nn.Module, input_shape: tuple[int, ...], where: str,
                          field: str = "architecture.layers") -> None:
    """Every ``Residual`` block's body and shortcut give outputs of one shape on samples of
    ``input_shape`` (computed on the meta device: no memory, no weights); ModelFileError
    naming the block otherwise. A layer that does not fit its input at all is left to the
    memory estimate, which names it."""
    from torch import nn

    from lbi_engine.models._graph_module import Residual
    from lbi_engine.models.footprint import probe_output_shape

    if not any(type(m) is Residual for m in module.modules()):
        return  # a chain: nothing is added, nothing to check here

    # shapes by the layers' formulas (a meta pass only where none is known): a card's
    # network is built before any real tensor
    def walk(seq: nn.Module, x: tuple[int, ...] | None,
             path: str) -> tuple[int, ...] | None:
        for i, m in enumerate(seq.children() if isinstance(seq, nn.Sequential) else [seq]):
            if x is None:
                return None
            if type(m) is Residual:
                a = walk(m.body, x, f"{path}[{i}].body")
                b = walk(m.shortcut, x, f"{path}[{i}].shortcut")
                if a is None or b is None:
                    return None
                if a != b:
                    raise ModelFileError(
                        f"{where}: {path}[{i}] ({RESIDUAL}) adds a body output of shape "
                        f"{a} to a shortcut output of shape {b} on inputs of shape {x}; give "
                        "the shortcut a 1x1 Conv2d with the body's channels and stride")
                x = a
                continue
            try:
                x = probe_output_shape(m, x)
            except Exception:  # the memory estimate names a layer that does not fit
                return None
        return x

    walk(module, tuple(int(v) for v in input_shape), field)


def _strided() -> Any:
    import torch

    return torch.strided


def read_card(path: Path) -> dict[str, Any]:
    from lbi_engine.limits import read_json

    card = read_json(path, "model card", "fix or regenerate it", ModelFileError)
    if not isinstance(card, dict) or not isinstance(card.get("architecture"), dict):
        raise ModelFileError(f"model card {path} has no 'architecture' object; see "
                             "resources/models/*.json for the format")
    check_card_fields(card, f"model card {path}")
    if int(card.get("format_version", 1)) > CARD_FORMAT_VERSION:
        raise FormatVersionError(f"model card {path} has format_version "
                                 f"{card['format_version']}, newer than this lbi understands "
                                 f"({CARD_FORMAT_VERSION}); update lbi")
    return card


def check_card_fields(card: dict[str, Any], where: str) -> None:
    """The card's own fields have the types and ranges lbi uses; ModelFileError naming the
    field otherwise (a card is data from someone else: "abc" as a version, 2^70 as a seed or
    a list as weights ended in tracebacks deep inside the loader)."""
    import math

    def whole(value: Any, low: int, high: int) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high

    def bad(field: str, value: Any, want: str) -> ModelFileError:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        return ModelFileError(f"{where}: {field}={shown} must be {want}; fix the card")

    version = card.get("format_version", 1)
    if not whole(version, 1, 2**31):
        raise bad("format_version", version, "a whole number such as 1")
    arch = card["architecture"]
    if "encoder_layers" in arch and not whole(arch["encoder_layers"], 1, 2**31):
        raise bad("architecture.encoder_layers", arch["encoder_layers"],
                  "a whole number of layers, at least 1")
    for field in ("name",):
        if card.get(field) is not None and not isinstance(card[field], str):
            raise bad(field, card[field], "a string")
    shape = card.get("input_shape")
    if shape is not None and not (isinstance(shape, list) and shape
                                  and all(whole(v, 1, 2**31) for v in shape)):
        raise bad("input_shape", shape, "a list of positive whole numbers such as [1, 28, 28]")
    weights = card.get("weights")
    if weights is not None:
        if not isinstance(weights, dict):
            raise bad("weights", weights, 'an object such as {"source": "file", "file": '
                                          '"NAME.safetensors"}')
        for field in ("source", "file", "sha256", "tensor_sha256"):
            if weights.get(field) is not None and not isinstance(weights[field], str):
                raise bad(f"weights.{field}", weights[field], "a string")
        if "seed" in weights and not whole(weights["seed"], 0, 2**63 - 1):
            raise bad("weights.seed", weights["seed"], "a whole number between 0 and 2^63-1")
        if weights.get("source") == "seeded-init" and "seed" not in weights:
            raise ModelFileError(f"{where}: weights.source is 'seeded-init' but no weights.seed "
                                 "is given; add the seed the weights were drawn with")
    pre = card.get("preprocessing")
    if pre is not None:
        if not isinstance(pre, dict):
            raise bad("preprocessing", pre, 'an object such as {"offset": 0.1307, '
                                            '"scale": 0.3081}')
        for field in ("offset", "scale"):
            value = pre.get(field, 1.0)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or (field == "scale" and value == 0):
                raise bad(f"preprocessing.{field}", value,
                          "a finite number" + (" other than 0" if field == "scale" else ""))


def check_state(module: nn.Module, state: dict[str, Tensor], weights: str, card: Path) -> None:
    """Name every missing, unexpected or mis-shaped tensor before load_state_dict does."""
    odd = [f"{k} ({v.device.type}, {str(v.dtype).replace('torch.', '')})"
           for k, v in state.items()
           if v.device.type == "meta" or v.layout != _strided()]
    if odd:
        raise ModelFileError(f"weights {weights}: tensor(s) {', '.join(odd[:6])} hold no usable "
                             "numbers (meta-device or sparse tensors); save the real "
                             "weights with torch.save(model.state_dict(), path) or safetensors.")
    want = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
    problems = [f"missing {k} {s}" for k, s in want.items() if k not in got]
    problems += [f"unexpected {k} {s}" for k, s in got.items() if k not in want]
    problems += [f"{k}: file has {got[k]}, card needs {s}" for k, s in want.items()
                 if k in got and got[k] != s]
    if problems:
        shown = "; ".join(problems[:8]) + ("; ..." if len(problems) > 8 else "")
        raise ModelFileError(f"weights {weights} do not match the architecture in card {card}: "
                             f"{shown}. Use the card written for these weights.")
