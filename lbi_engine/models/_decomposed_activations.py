"""Activations that are not proximal maps, written out as a few elementwise operations.

Exporters and hand-written forwards spell SiLU as ``x * sigmoid(x)``, GELU as
``x * 0.5 * (1 + erf(x / sqrt 2))``, Mish as ``x * tanh(softplus(x))``. A graph walk sees a
product of two tensors there and would refuse it as "not a sum or a concatenation", which
sends the user to rewrite a combination that is not one. Recognised here by their values on
the probe grid, they get the activation's own refusal instead: its name, why it is not a
proximal map (MATH.md §2.5), the nearest alternative and the activations lbi lifts. One
message for the ONNX, ``.pt2`` and torch.fx walks, so the CLI and the window say the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch
from torch import fx, nn

from lbi_engine.activations._refusals import LIFTED_ACTIVATIONS, refusal_message
from lbi_engine.errors import UnsupportedLayerError
from lbi_engine.models.fx_chain import _fetch_attr

#: What to do about a product of two computed tensors (without its final full stop).
PRODUCT_FIX = f"Replace the product by one of the activations lbi lifts: {LIFTED_ACTIVATIONS}"


def product_why(tensors: object) -> str:
    """Why a product of two computed tensors (a gate, attention) is refused."""
    return (f"it multiplies two computed tensors ({tensors}), which is neither affine nor a "
            "proximal activation (a lifted network combines tensors only by sums a + b and "
            "channel concatenation, MATH.md §5.6)")


#: (what a user calls it, the torch module computing it, its refusal key in the table).
_REFUSED: tuple[tuple[str, nn.Module, str], ...] = (
    ("SiLU (Swish)", nn.SiLU(), "silu"),
    ("GELU", nn.GELU(), "gelu"),
    ("GELU (tanh approximation)", nn.GELU(approximate="tanh"), "gelu"),
    ("Mish", nn.Mish(), "mish"),
    ("Hardswish", nn.Hardswish(), "hardswish"),
    ("SELU", nn.SELU(), "selu"),
    ("Tanhshrink", nn.Tanhshrink(), "tanhshrink"),
    ("LogSigmoid", nn.LogSigmoid(), "logsigmoid"),
)


def refused_activation(x: torch.Tensor | np.ndarray, y: torch.Tensor | np.ndarray
                       ) -> tuple[str, str] | None:
    """(name, refusal key) of the non-proximal activation with y = c * act(x), c > 0, else
    None.

    Values are compared in float64 to 1e-6 of their scale: the candidates differ from each
    other (and from every proximal activation) by far more on any spread of inputs, while a
    float32 graph evaluated on the probe agrees with torch's float64 to its rounding."""
    xt = torch.as_tensor(np.asarray(x), dtype=torch.float64).reshape(-1)
    yt = torch.as_tensor(np.asarray(y), dtype=torch.float64).reshape(-1)
    if xt.numel() != yt.numel() or xt.numel() < 8 or not torch.isfinite(yt).all():
        return None
    if int(torch.unique(xt).numel()) < 8:  # a few values cannot tell the functions apart
        return None
    scale = max(1.0, float(yt.abs().max()))
    for name, module, key in _REFUSED:
        with torch.no_grad():
            want = module(xt)
        # up to a positive factor: exporters write GELU as x * (1 + erf(x / sqrt 2)) times
        # 0.5, and the walk sees the region before the last scaling (c * act is refused too)
        factor = float(want @ yt / (want @ want))
        if factor > 0 and float((factor * want - yt).abs().max()) <= 1e-6 * scale:
            return (name if abs(factor - 1) < 1e-6 else f"{factor:.4g} * {name}"), key
    return None


def refuse_decomposed(x: torch.Tensor | np.ndarray, y: torch.Tensor | np.ndarray,
                      where: str) -> None:
    """Raise the activation's own refusal when ``y = act(x)`` for a non-proximal ``act``;
    ``where`` names the nodes (e.g. "ONNX nodes 'a' to 'b' in 'net.onnx'")."""
    found = refused_activation(x, y)
    if found is not None:
        name, key = found
        raise UnsupportedLayerError(refusal_message(f"{where}, computing {name},", key))


def refuse_gated_product(gate: Callable[[torch.Tensor], torch.Tensor], where: str) -> None:
    """A product ``x * gate(x)`` of the data with an elementwise function of itself: refused
    as the activation it computes (SiLU for gate = sigmoid), tried on a spread of inputs."""
    probe = torch.linspace(-8.0, 8.0, 257, dtype=torch.float64)
    try:
        with torch.no_grad():
            y = probe * gate(probe)
    except (RuntimeError, TypeError, ValueError, IndexError, AttributeError):  # no verdict
        return
    refuse_decomposed(probe, y, where)


def fx_gate(x: fx.Node, gate: fx.Node, gm: fx.GraphModule
            ) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """``gate`` as a function of ``x`` when a few single-input nodes lead from one to the
    other (``torch.sigmoid(x)``, ``F.softplus(x).tanh()``), replayed on another tensor; else
    None (the gate depends on other tensors: a true product of two computed tensors)."""
    path: list[fx.Node] = []
    node = gate
    while node is not x:
        inputs = [n for n in node.all_input_nodes if n.op != "get_attr"]
        if len(inputs) != 1 or len(path) >= 8 or node.op in ("placeholder", "output"):
            return None
        path.append(node)
        node = inputs[0]

    def replay(t: torch.Tensor) -> torch.Tensor:
        env: dict[fx.Node, Any] = {x: t}

        def value(m: fx.Node) -> Any:
            return env[m] if m in env else _fetch_attr(gm, m.target)

        for n in reversed(path):
            args, kwargs = fx.node.map_arg(n.args, value), fx.node.map_arg(n.kwargs, value)
            if n.op == "call_module":
                env[n] = gm.get_submodule(str(n.target))(*args, **kwargs)
            elif n.op == "call_method":
                env[n] = getattr(args[0], str(n.target))(*args[1:], **kwargs)
            else:
                env[n] = cast(Callable[..., Any], n.target)(*args, **kwargs)
        return cast(torch.Tensor, env[gate])

    return replay
