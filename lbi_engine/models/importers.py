"""Model files -> LiftedNetwork: checks shared by all formats, and the TorchScript importer.

TorchScript archives (``torch.jit.save``) hold a *program*: ``torch.jit.load`` runs the
archive's scripted ``__setstate__`` methods while reading it, and those can read and write
any file the user can (``torch.from_file(..., shared=True)``). So a TorchScript file is only
opened after the person consented for this run (``allow_code=True``; CLI ``--allow-code``;
GUI: a dialog), exactly like a pickle. Safe alternatives: safetensors + card, ONNX, ``.pt2``.

After consent, the archive's module tree is rebuilt as plain torch.nn modules from an
allow-list of layer types: scripted modules keep their hyper-parameters as attributes
(stride, padding, ...); traced modules do not, so those are read from the constants of the
module's straight-line graph. Every container's graph is read (never run) to check that its
forward only calls its children in order. The lifted network is then verified against that
rebuilt module, which lbi constructed itself: the file's own ``forward`` is never executed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from lbi_engine.errors import (
    InputShapeNeededError,
    LbiError,
    ModelFileError,
    UnsupportedLayerError,
)
from lbi_engine.models.model_files import refuse_code_format


def check_model_file(path: str | Path, fmt: str) -> Path:
    """The path as a Path if it names a non-empty file; ModelFileError otherwise."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelFileError(f"{fmt} model file {str(p)!r} does not exist; check the path.")
    if not p.is_file():
        raise ModelFileError(f"{fmt} model file {str(p)!r} is a directory, not a file; give the "
                             "path of the model file itself.")
    if p.stat().st_size == 0:
        raise ModelFileError(f"{fmt} model file {str(p)!r} is empty (0 bytes); it was not saved "
                             "completely. Save or copy it again.")
    try:
        with open(p, "rb"):
            pass
    except OSError as exc:  # e.g. permission denied: say so, not "corrupt" later on
        raise ModelFileError(f"{fmt} model file {str(p)!r} cannot be read ({exc.strerror or exc}); "
                             "check its permissions (e.g. chmod u+r).") from exc
    return p


def jit_load(path: Path) -> Any:
    """``torch.jit.load`` of a file, from an open file object and without torch's notice.

    A file object, because torch's C++ loader only takes UTF-8 path strings (Linux names are
    bytes). The FutureWarning ("torch.jit.load is deprecated") is about torch's roadmap, not
    the user's file; the CLI would print it as "lbi: warning: ..." on every TorchScript load.
    """
    import warnings

    with open(path, "rb") as fh, warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*torch.jit")
        return torch.jit.load(fh, map_location="cpu")


def first_shape_hint(module: nn.Module) -> tuple[int, ...] | None:
    """(in_features,) when the first layer is Linear; None when the shape cannot be known."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            return (m.in_features,)
        if not isinstance(m, (nn.Sequential, nn.Identity, nn.Flatten)) and \
                not list(m.children()):
            return None
    return None


# --- TorchScript ---------------------------------------------------------------------------
def _const(value: Any) -> Any:
    node = value.node()
    kind = node.kind()
    if kind == "prim::Constant":
        return value.toIValue()
    if kind == "prim::ListConstruct":
        return [_const(v) for v in node.inputs()]
    raise KeyError(kind)


class _Leaf:
    """Hyper-parameter access on one scripted/traced leaf: attribute first, graph second."""

    def __init__(self, sm: Any, qual: str) -> None:
        self.sm, self.qual = sm, qual

    def get(self, attr: str, ops: dict[str, int], default: Any = None) -> Any:
        try:
            return getattr(self.sm, attr)
        except AttributeError:
            pass
        try:
            for node in self.sm.graph.nodes():
                if node.kind() in ops:
                    return _const(list(node.inputs())[ops[node.kind()]])
        except (KeyError, IndexError, RuntimeError):
            pass
        if default is not None:
            return default
        raise ModelFileError(f"TorchScript submodule '{self.qual}' ({self.sm.original_name}) "
                             f"does not record '{attr}'; save the model with torch.jit.script "
                             "instead of torch.jit.trace, or export it to ONNX.")

    def tensor(self, name: str) -> torch.Tensor | None:
        t = getattr(self.sm, name, None)
        return None if t is None else t.detach().clone()

    def required(self, name: str) -> torch.Tensor:
        t = self.tensor(name)
        if t is None:
            raise ModelFileError(f"TorchScript submodule '{self.qual}' ({self.sm.original_name}) "
                                 f"has no '{name}' tensor; the file is damaged or was not "
                                 "written by torch.jit.script/trace of a torch layer.")
        return t


_CONV = {"aten::_convolution": 0, "aten::conv2d": 0, "aten::_convolution_mode": 0}


def _kernel(leaf: _Leaf, w: torch.Tensor) -> tuple[int, int]:
    """The kernel size of a 2-D (transposed) convolution from its 4-D weight."""
    if w.dim() != 4:
        raise ModelFileError(f"TorchScript submodule '{leaf.qual}' ({leaf.sm.original_name}) is a "
                             f"2-D convolution with a weight of shape {tuple(w.shape)}, not 4-D; "
                             "the file is damaged.")
    return (w.shape[2], w.shape[3])


def _conv2d(leaf: _Leaf) -> nn.Module:
    w, b = leaf.required("weight"), leaf.tensor("bias")
    args = {"stride": (3, 3, 3), "padding": (4, 4, 4), "dilation": (5, 5, 5), "groups": (8, 6, 6)}
    kw = {k: leaf.get(k, dict(zip(_CONV, v, strict=True))) for k, v in args.items()}
    pad_mode = leaf.get("padding_mode", {}, default="zeros")
    m = nn.Conv2d(w.shape[1] * kw["groups"], w.shape[0], _kernel(leaf, w), bias=b is not None,
                  padding_mode=pad_mode, **kw)
    return _load(m, weight=w, bias=b)


def _conv_transpose2d(leaf: _Leaf) -> nn.Module:
    w, b = leaf.required("weight"), leaf.tensor("bias")
    ops = {"aten::_convolution": 0, "aten::conv_transpose2d": 0}
    pos = {"stride": (3, 3), "padding": (4, 4), "output_padding": (7, 5), "groups": (8, 6),
           "dilation": (5, 7)}
    kw = {k: leaf.get(k, dict(zip(ops, v, strict=True))) for k, v in pos.items()}
    m = nn.ConvTranspose2d(w.shape[0], w.shape[1] * kw["groups"], _kernel(leaf, w),
                           bias=b is not None, **kw)
    return _load(m, weight=w, bias=b)


def _batchnorm(cls: type) -> Callable[[_Leaf], nn.Module]:
    def build(leaf: _Leaf) -> nn.Module:
        mean, var = leaf.tensor("running_mean"), leaf.tensor("running_var")
        w, b = leaf.tensor("weight"), leaf.tensor("bias")
        if mean is None:
            m = cls(1, track_running_stats=False)
        else:
            eps = leaf.get("eps", {"aten::batch_norm": 7})
            m = cls(mean.shape[0], eps=eps, affine=w is not None)
            _load(m, weight=w, bias=b, running_mean=mean, running_var=var)
        return m.train(bool(leaf.sm.training))
    return build


def _load(m: nn.Module, **tensors: torch.Tensor | None) -> nn.Module:
    with torch.no_grad():
        for k, t in tensors.items():
            if t is not None:
                getattr(m, k).copy_(t)
    return m


def _simple(cls: type, **params: tuple[str, dict[str, int]]) -> Callable[[_Leaf], nn.Module]:
    def build(leaf: _Leaf) -> nn.Module:
        return cls(**{k: leaf.get(k, ops) for k, (_, ops) in params.items()})
    return build


def _p(op: str, idx: int) -> tuple[str, dict[str, int]]:
    return ("", {op: idx})


def _linear(leaf: _Leaf) -> nn.Module:
    w, b = leaf.required("weight"), leaf.tensor("bias")
    return _load(nn.Linear(w.shape[1], w.shape[0], bias=b is not None), weight=w, bias=b)


def _dropout(cls: type) -> Callable[[_Leaf], nn.Module]:
    def build(leaf: _Leaf) -> nn.Module:
        p = leaf.get("p", {"aten::dropout": 1, "aten::feature_dropout": 1}, default=0.5)
        return cls(p).train(bool(leaf.sm.training))
    return build


_BUILDERS: dict[str, Callable[[_Leaf], nn.Module]] = {
    "Linear": _linear,
    "Conv2d": _conv2d,
    "ConvTranspose2d": _conv_transpose2d,
    "BatchNorm1d": _batchnorm(nn.BatchNorm1d),
    "BatchNorm2d": _batchnorm(nn.BatchNorm2d),
    "AvgPool2d": _simple(nn.AvgPool2d, kernel_size=_p("aten::avg_pool2d", 1),
                         stride=_p("aten::avg_pool2d", 2), padding=_p("aten::avg_pool2d", 3),
                         ceil_mode=_p("aten::avg_pool2d", 4),
                         count_include_pad=_p("aten::avg_pool2d", 5),
                         divisor_override=_p("aten::avg_pool2d", 6)),
    "AdaptiveAvgPool2d": _simple(nn.AdaptiveAvgPool2d,
                                 output_size=_p("aten::adaptive_avg_pool2d", 1)),
    "Flatten": _simple(nn.Flatten, start_dim=_p("aten::flatten", 1),
                       end_dim=_p("aten::flatten", 2)),
    "Unflatten": _simple(nn.Unflatten, dim=_p("aten::unflatten", 1),
                         unflattened_size=_p("aten::unflatten", 2)),
    "Identity": lambda leaf: nn.Identity(),
    "Dropout": _dropout(nn.Dropout),
    "Dropout2d": _dropout(nn.Dropout2d),
    "ReLU": lambda leaf: nn.ReLU(),
    "Sigmoid": lambda leaf: nn.Sigmoid(),
    "Tanh": lambda leaf: nn.Tanh(),
    "Softsign": lambda leaf: nn.Softsign(),
    "ReLU6": lambda leaf: nn.ReLU6(),
    "Hardsigmoid": lambda leaf: nn.Hardsigmoid(),
    "LeakyReLU": _simple(nn.LeakyReLU, negative_slope=_p("aten::leaky_relu", 1)),
    "Hardtanh": _simple(nn.Hardtanh, min_val=_p("aten::hardtanh", 1),
                        max_val=_p("aten::hardtanh", 2)),
    "ELU": _simple(nn.ELU, alpha=_p("aten::elu", 1)),
    "Softplus": _simple(nn.Softplus, beta=_p("aten::softplus", 1),
                        threshold=_p("aten::softplus", 2)),
    "Softshrink": _simple(nn.Softshrink, lambd=_p("aten::softshrink", 1)),
    "Softmax": _simple(nn.Softmax, dim=_p("aten::softmax", 1)),
}


def _refuse_unknown(sm: Any, qual: str, position: int) -> None:
    """Refuse a module type the importer does not rebuild, with the lifting room's reason."""
    from lbi_engine.models.layer_lifting import lift_module, refusal_for_type

    kind = sm.original_name
    label = f"Layer '{qual}' ({kind}, position {position}) cannot be lifted"
    cls = getattr(nn, kind, None)
    if isinstance(cls, type) and issubclass(cls, nn.Module):
        found = refusal_for_type(cls)
        if found is not None:
            raise UnsupportedLayerError(f"{label}: {found[0]}. {found[1]}")
        try:  # activations (GELU, SiLU, ...) build without arguments; their refusal says why
            instance = cls()
        except Exception:  # needs constructor arguments: not an activation
            instance = None
        if instance is not None:
            lift_module(instance.eval(), (1, 4, 4), qual, position)
    raise UnsupportedLayerError(
        f"{label}: the TorchScript importer does not know this module type. Save an "
        "nn.Sequential of supported layers (Linear, Conv2d, ConvTranspose2d, AvgPool2d, "
        "BatchNorm (eval), Flatten, activations) or export to ONNX.")


def _chain_calls(sm: Any, qual: str) -> list[str]:
    """The child names a container's forward calls, in order, read from its graph (not run).

    Only a straight chain ``x -> child_1 -> child_2 -> ... -> return`` is accepted: anything
    else (a skip connection, arithmetic, control flow) would make the rebuilt chain differ
    from what the file's forward computes, and that forward is never executed to compare.
    """
    kind = getattr(sm, "original_name", type(sm).__name__)
    why = (f"TorchScript container '{qual or kind}' ({kind}) does more in its forward than "
           "call its layers one after the other (e.g. a skip connection or arithmetic); "
           "write it as an nn.Sequential of supported layers, or export it to ONNX.")
    try:
        graph = sm.graph
    except (AttributeError, RuntimeError) as exc:
        raise UnsupportedLayerError(why) from exc
    inputs = list(graph.inputs())
    if len(inputs) != 2:
        raise UnsupportedLayerError(why)
    this, current = inputs
    attrs: dict[Any, str] = {}
    calls: list[str] = []
    for node in graph.nodes():
        kind_n = node.kind()
        ins = list(node.inputs())
        if kind_n == "prim::GetAttr" and ins == [this]:
            attrs[node.output()] = node.s("name")
        elif kind_n == "prim::Constant":  # harmless; where it is used is checked there
            continue
        elif (kind_n == "prim::CallMethod" and node.s("name") == "forward" and len(ins) >= 2
              and ins[0] in attrs and ins[1] == current and all(map(_is_none, ins[2:]))):
            calls.append(attrs[ins[0]])
            current = node.output()
        else:
            raise UnsupportedLayerError(why)
    if list(graph.outputs()) != [current]:
        raise UnsupportedLayerError(why)
    return calls


def _is_none(value: Any) -> bool:
    """A graph value that is the constant None (e.g. ConvTranspose2d's output_size)."""
    node = value.node()
    return node.kind() == "prim::Constant" and value.toIValue() is None


def rebuild_torchscript(sm: Any, qual: str = "", counter: list[int] | None = None) -> nn.Module:
    """An nn.Sequential (nested as in the archive) equivalent to the scripted module tree.

    Containers are rebuilt as the chain of the children their forward calls, after
    :func:`_chain_calls` has read from the graph that the forward is exactly that chain.
    """
    counter = [0] if counter is None else counter
    kind = getattr(sm, "original_name", type(sm).__name__)
    children = list(sm.named_children())
    if kind in _BUILDERS:
        module = _BUILDERS[kind](_Leaf(sm, qual or kind))
        counter[0] += 1
        return module
    if not children:
        _refuse_unknown(sm, qual or kind, counter[0])
    # children first, so an unsupported layer is named precisely; then the call order
    built = {name: rebuild_torchscript(child, f"{qual}.{name}" if qual else name, counter)
             for name, child in children}
    seq = nn.Sequential()
    for name in _chain_calls(sm, qual):
        seq.add_module(name, built[name])
    return seq


def torchscript_sequential(path: str | Path, input_shape: Sequence[int] | None = None, *,
                           allow_code: bool = False) -> tuple[nn.Module, Sequence[int]]:
    """(the nn.Sequential lbi rebuilt, the sample shape) from a TorchScript archive.

    Without ``allow_code`` the file is refused (:class:`UnsafeFileError`) before torch reads
    it; the check of the zip's magic bytes is all that touches it. Lifting the result is
    :func:`lbi_engine.models.network.load_torchscript_module`'s job (so this module stays below
    :mod:`lbi_engine.models.network`).
    """
    p = check_model_file(path, "TorchScript")
    with open(p, "rb") as f:
        head = f.read(4)
    if head[:2] != b"PK":
        raise ModelFileError(f"{str(p)!r} is not a TorchScript archive (a zip file written by "
                             f"torch.jit.save; this file starts with {head!r}). For ONNX files "
                             "use LiftedNetwork.from_onnx.")
    if not allow_code:
        refuse_code_format(p, "TorchScript")
    try:
        sm = jit_load(p)
    except Exception as exc:  # torch raises RuntimeError/ValueError/... here
        msg = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise ModelFileError(f"TorchScript file {str(p)!r} could not be loaded ({msg}); it is "
                             "truncated or corrupt, or was not written by torch.jit.save. "
                             "Save it again.") from exc
    try:
        module = rebuild_torchscript(sm)
    except LbiError:
        raise
    except Exception as exc:  # inconsistent archive contents
        raise ModelFileError(f"TorchScript file {str(p)!r} holds modules that could not be "
                             f"rebuilt ({type(exc).__name__}: {exc}); save it again with "
                             "torch.jit.script, or export to ONNX.") from exc
    del sm  # nothing of the file's program is used from here on
    module.requires_grad_(False)  # train/eval flags stay as saved: a training Dropout is refused
    if input_shape is None:
        input_shape = first_shape_hint(module)
        if input_shape is None:
            raise InputShapeNeededError(f"TorchScript file {str(p)!r} does not record its input "
                                        "shape; pass input_shape (one sample, e.g. (1, 28, 28)).")
    return module, input_shape
