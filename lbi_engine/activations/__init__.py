"""Activation functions that are proximal maps, sigma = prox_Psi (MATH.md §1-§2).

Public interface (docs/developer/contracts.md): ``ProximalActivation`` and its kinds, the registry
``make_activation``, and the mappings ``activation_from_module`` (torch.nn) and
``activation_from_onnx`` (ONNX ops). Activations that are not proximal maps (GELU, SiLU, ...)
are refused with UnsupportedLayerError saying why (MATH.md §2.5) and what to use instead.

Implementation rooms: ``_base`` (base class, domain and root-solver numerics),
``_kinds`` (elementwise kinds), ``_softmax``, ``_dilog`` (Li2) and
``_refusals`` (the refusal messages).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from lbi_engine.activations._base import (
    DOMAIN_ATOL_FLOOR,
    ProximalActivation,
    RootProxActivation,
    domain_atol,
)
from lbi_engine.activations._dilog import li2
from lbi_engine.activations._kinds import (
    ELU,
    Clip,
    HardSigmoid,
    Identity,
    LeakyReLU,
    ReLU,
    Sigmoid,
    Softplus,
    SoftShrink,
    Softsign,
    Tanh,
)
from lbi_engine.activations._refusals import refuse
from lbi_engine.activations._softmax import Softmax
from lbi_engine.errors import InputError

__all__ = [
    "DOMAIN_ATOL_FLOOR",
    "ELU",
    "REGISTRY",
    "Clip",
    "HardSigmoid",
    "Identity",
    "LeakyReLU",
    "ProximalActivation",
    "ReLU",
    "RootProxActivation",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "SoftShrink",
    "Softsign",
    "Tanh",
    "activation_from_module",
    "activation_from_onnx",
    "domain_atol",
    "li2",
    "make_activation",
]

REGISTRY: dict[str, type[ProximalActivation]] = {
    cls.name: cls
    for cls in (Identity, ReLU, LeakyReLU, Clip, SoftShrink, Sigmoid, Tanh, Softplus, ELU,
                Softsign, HardSigmoid, Softmax)
}

# Other spellings accepted by make_activation: alias -> (registry name, fixed params).
_ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "linear": ("identity", {}),
    "none": ("identity", {}),
    "leakyrelu": ("leaky_relu", {}),
    "hardtanh": ("clip", {"lo": -1.0, "hi": 1.0}),
    "hard_tanh": ("clip", {"lo": -1.0, "hi": 1.0}),
    "relu6": ("clip", {"lo": 0.0, "hi": 6.0}),
    "softshrink": ("soft_shrink", {}),
    "hardsigmoid": ("hard_sigmoid", {}),
}

_PARAMS: dict[str, tuple[str, ...]] = {
    "leaky_relu": ("a",), "clip": ("lo", "hi"), "soft_shrink": ("lam",),
    "softplus": ("beta",), "elu": ("alpha",), "softmax": ("dim",),
}


def make_activation(spec: str | dict[str, Any] | ProximalActivation) -> ProximalActivation:
    """Build an activation from a registry name or a ``{"name": ..., **params}`` dict.

    Names (case-insensitive, '-' = '_'): identity, relu, leaky_relu(a), clip(lo, hi),
    soft_shrink(lam), sigmoid, tanh, softplus(beta), elu(alpha), softsign, hard_sigmoid,
    softmax(dim); aliases hardtanh = clip(-1, 1), relu6 = clip(0, 6), leakyrelu, softshrink,
    hardsigmoid, linear/none = identity. ``make_activation(a.spec()) == a``. An activation
    instance is returned unchanged.
    """
    if isinstance(spec, ProximalActivation):
        return spec
    if isinstance(spec, str):
        raw_name, params = spec, {}
    elif isinstance(spec, dict):
        if "name" not in spec:
            raise InputError(f"activation spec {spec!r} has no 'name'; e.g. "
                             "{'name': 'leaky_relu', 'a': 0.1}.")
        raw_name = spec["name"]
        params = {k: v for k, v in spec.items() if k != "name"}
    else:
        raise InputError(f"activation spec: expected a name or a dict, got "
                         f"{type(spec).__name__}.")
    if not isinstance(raw_name, str):
        raise InputError(f"activation name {raw_name!r} must be a string.")
    key = raw_name.strip().lower().replace("-", "_")
    if key in _ALIASES:
        key, fixed = _ALIASES[key]
        params = {**fixed, **params}
    cls = REGISTRY.get(key)
    if cls is None:
        raise InputError(f"unknown activation {raw_name!r}; choose one of "
                         f"{', '.join(sorted(REGISTRY))} (or hardtanh, relu6).")
    allowed = _PARAMS.get(key, ())
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        takes = f"takes only {', '.join(allowed)}" if allowed else "takes no parameters"
        raise InputError(f"activation {key!r} {takes}; remove {', '.join(unknown)}.")
    return cls(**params)


# Exporters write "no bound" as +-float32 max (torch.onnx, Keras); treat those as unbounded.
_NO_BOUND = 3.4e38


def _clip_or_simpler(lo: Any, hi: Any) -> ProximalActivation:
    """clip(lo, hi), or identity / relu when that is what the bounds describe."""
    lo = None if lo is None or float(lo) <= -_NO_BOUND else float(lo)
    hi = None if hi is None or float(hi) >= _NO_BOUND else float(hi)
    if lo is None and hi is None:
        return Identity()
    if lo == 0.0 and hi is None:
        return ReLU()
    return Clip(lo, hi)


def _slope_activation(a: float, what: str) -> ProximalActivation:
    """relu (a = 0) or leaky_relu(a) (0 < a <= 1); refuses other slopes."""
    if a == 0.0:
        return ReLU()
    if 0.0 < a <= 1.0:
        return LeakyReLU(a)
    refuse(what, "leaky_slope_high" if a > 1 else "leaky_slope_negative", a=a)


def activation_from_module(m: nn.Module) -> ProximalActivation | None:
    """The proximal activation a torch module computes, or None if m is not an activation.

    Raises UnsupportedLayerError for activation modules that are not proximal maps (GELU,
    SiLU, Mish, Hardswish, SELU, ELU(alpha > 1), LeakyReLU(a > 1 or a < 0), Hardshrink,
    per-channel PReLU, ...), naming the reason and the nearest supported alternative.
    Modules are read in eval semantics (RReLU uses its mean slope).
    """
    what = repr(m)
    if isinstance(m, nn.Identity):
        return Identity()
    if isinstance(m, nn.ReLU):
        return ReLU()
    if isinstance(m, nn.LeakyReLU):
        return _slope_activation(float(m.negative_slope), what)
    if isinstance(m, nn.Hardtanh):  # ReLU6 is a Hardtanh(0, 6)
        return _clip_or_simpler(float(m.min_val), float(m.max_val))
    if isinstance(m, nn.Softshrink):
        return Identity() if m.lambd == 0 else SoftShrink(m.lambd)
    if isinstance(m, nn.Sigmoid):
        return Sigmoid()
    if isinstance(m, nn.Tanh):
        return Tanh()
    if isinstance(m, nn.Softplus):
        if m.beta <= 0:
            refuse(what, "softplus_beta", beta=m.beta)
        return Softplus(m.beta)
    if isinstance(m, nn.ELU):
        if m.alpha == 0:
            return ReLU()
        if 0 < m.alpha <= 1:
            return ELU(m.alpha)
        refuse(what, "elu_alpha_high" if m.alpha > 1 else "elu_alpha_negative", alpha=m.alpha)
    if isinstance(m, nn.CELU):
        if m.alpha == 1:
            return ELU(1.0)
        refuse(what, "celu", alpha=m.alpha)
    if isinstance(m, nn.Softsign):
        return Softsign()
    if isinstance(m, nn.Hardsigmoid):
        return HardSigmoid()
    if isinstance(m, nn.Softmax2d):
        return Softmax(dim=-3)
    if isinstance(m, nn.Softmax):
        if m.dim is None:
            refuse(what, "softmax_implicit_dim")
        if m.dim == 0:
            refuse(what, "softmax_batch_dim")
        return Softmax(dim=int(m.dim))
    if isinstance(m, nn.Threshold):
        if m.value == m.threshold:
            return _clip_or_simpler(float(m.threshold), None)
        refuse(what, "threshold", threshold=m.threshold, value=m.value)
    if isinstance(m, nn.PReLU):
        if m.weight.numel() != 1:
            refuse(what, "prelu_channels", n=m.weight.numel())
        return _slope_activation(float(m.weight.detach().reshape(())), what)
    if isinstance(m, nn.RReLU):
        return _slope_activation(0.5 * (m.lower + m.upper), what)
    for cls, key in _REFUSED_MODULES:
        if isinstance(m, cls):
            refuse(what, key)
    return None


_REFUSED_MODULES: tuple[tuple[type[nn.Module], str], ...] = (
    (nn.GELU, "gelu"), (nn.SiLU, "silu"), (nn.Mish, "mish"), (nn.Hardswish, "hardswish"),
    (nn.SELU, "selu"), (nn.Hardshrink, "hardshrink"), (nn.Tanhshrink, "tanhshrink"),
    (nn.LogSigmoid, "logsigmoid"), (nn.LogSoftmax, "logsoftmax"), (nn.Softmin, "softmin"),
    (nn.GLU, "glu"),
)

# ONNX ops refused outright (op_type -> refusal key); parametrised ones are handled inline.
_REFUSED_ONNX = {
    "Gelu": "gelu", "Swish": "silu", "Mish": "mish", "HardSwish": "hardswish", "Selu": "selu",
    "ThresholdedRelu": "thresholded_relu", "LogSoftmax": "logsoftmax", "Hardmax": "hardmax",
    "Abs": "abs",
}

_HARD_SIGMOID_ALPHA = 1.0 / 6.0


def activation_from_onnx(
    op_type: str,
    attrs: dict[str, Any],
    *,
    opset: int | None = None,
    input_rank: int | None = None,
) -> ProximalActivation | None:
    """The proximal activation of an ONNX node, or None if the op is not an activation.

    ``attrs`` holds the decoded attributes; for Clip (opset >= 11) the caller passes the
    constant ``min``/``max`` inputs there too (missing = unbounded), for PRelu a scalar
    ``slope``. Softmax: ``axis`` defaults to -1 from opset 13 on and to 1 before; before
    opset 13 ONNX flattens dims [axis:] into one, which only equals a softmax over ``axis``
    when axis is the last dim, so pass ``input_rank`` to have other cases refused.
    """
    what = f"ONNX {op_type} node (attributes {attrs!r})"
    a = dict(attrs)
    if op_type == "Identity":
        return Identity()
    if op_type == "Relu":
        return ReLU()
    if op_type == "LeakyRelu":
        return _slope_activation(float(a.get("alpha", 0.01)), what)
    if op_type == "PRelu":
        if "slope" not in a:
            refuse(what, "prelu_channels", n="unknown")
        return _slope_activation(float(a["slope"]), what)
    if op_type == "Sigmoid":
        return Sigmoid()
    if op_type == "Tanh":
        return Tanh()
    if op_type == "Clip":
        return _clip_or_simpler(a.get("min"), a.get("max"))
    if op_type == "Softplus":
        return Softplus()
    if op_type == "Softsign":
        return Softsign()
    if op_type == "Elu":
        alpha = float(a.get("alpha", 1.0))
        if alpha == 0:
            return ReLU()
        if 0 < alpha <= 1:
            return ELU(alpha)
        refuse(what, "elu_alpha_high" if alpha > 1 else "elu_alpha_negative", alpha=alpha)
    if op_type == "Celu":
        if float(a.get("alpha", 1.0)) == 1.0:
            return ELU(1.0)
        refuse(what, "celu", alpha=a.get("alpha"))
    if op_type == "HardSigmoid":
        alpha, beta = float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
        # float32 attributes: 1/6 is stored as 0.16666667.
        if abs(alpha - _HARD_SIGMOID_ALPHA) <= 1e-6 and abs(beta - 0.5) <= 1e-6:
            return HardSigmoid()
        refuse(what, "onnx_hard_sigmoid", alpha=alpha, beta=beta)
    if op_type == "Shrink":
        bias, lambd = float(a.get("bias", 0.0)), float(a.get("lambd", 0.5))
        if bias == lambd:
            return Identity() if lambd == 0 else SoftShrink(lambd)
        refuse(what, "onnx_shrink", bias=bias, lambd=lambd)
    if op_type == "Softmax":
        new = opset is None or opset >= 13
        axis = int(a.get("axis", -1 if new else 1))
        if axis == 0 or (input_rank is not None and axis == -input_rank):
            refuse(what, "softmax_batch_dim")
        if not new and input_rank is not None and axis not in (-1, input_rank - 1):
            refuse(what, "onnx_softmax_coerced", axis=axis, opset=opset)
        return Softmax(dim=axis)
    if op_type in _REFUSED_ONNX:
        refuse(what, _REFUSED_ONNX[op_type])
    return None
