"""The activation registry and the torch.nn / ONNX mappings, with their refusal messages.

Each mapped module is checked against the module's own forward and autograd derivative;
each refusal message must give the reason (with the numbers of MATH.md §2.5) and the nearest
supported alternative.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from lbi_engine.activations import (
    ProximalActivation,
    activation_from_module,
    activation_from_onnx,
    make_activation,
)
from lbi_engine.errors import InputError, UnsupportedLayerError
from tests.engine.activations.test_activations import CASES, IDS

F64 = torch.float64


# ----- registry -----------------------------------------------------------------------------
@pytest.mark.parametrize("spec", [c[0] for c in CASES] + [{"name": "softmax", "dim": -1}],
                         ids=IDS + ["softmax--1"])
def test_spec_round_trip(spec):
    act = make_activation(spec)
    assert isinstance(act, ProximalActivation)
    assert act.spec()["name"] == spec["name"]
    again = make_activation(act.spec())
    assert again == act and again.spec() == act.spec() and hash(again) == hash(act)
    assert make_activation(act) is act


def test_names_aliases_and_defaults():
    assert make_activation("relu6").spec() == {"name": "clip", "lo": 0.0, "hi": 6.0}
    assert make_activation("HardTanh").spec() == {"name": "clip", "lo": -1.0, "hi": 1.0}
    assert make_activation("leaky-relu").spec() == {"name": "leaky_relu", "a": 0.01}
    assert make_activation({"name": "softshrink", "lam": 0.3}).spec() == {
        "name": "soft_shrink", "lam": 0.3}
    assert make_activation("softmax").spec() == {"name": "softmax", "dim": 1}
    assert make_activation("elu").lower == -1.0 and make_activation("clip").upper == 1.0
    assert make_activation("sigmoid") != make_activation("tanh")


@pytest.mark.parametrize("spec, pattern", [
    ({"name": "leaky_relu", "a": 1.5}, r"0 < a <= 1"),
    ({"name": "leaky_relu", "a": -0.1}, r"non-monotone"),
    ({"name": "leaky_relu", "a": 0.0}, r"'relu'"),
    ({"name": "elu", "alpha": 1.5}, r"0 < alpha <= 1"),
    ({"name": "clip", "lo": 2.0, "hi": 1.0}, r"lo=2.0 must be < hi=1.0"),
    ({"name": "soft_shrink", "lam": 0.0}, r"lam=0.0 must be > 0"),
    ({"name": "softplus", "beta": -1}, r"beta=-1.0 must be > 0"),
    ({"name": "softmax", "dim": 0}, r"batch"),
    ({"name": "leaky_relu", "a": "x"}, r"not a number"),
    ({"name": "relu", "a": 1}, r"takes no parameters; remove a"),
    ({"name": "clip", "low": 1}, r"takes only lo, hi; remove low"),
    ({"name": "gelu"}, r"unknown activation 'gelu'; choose one of"),
    ({"a": 1}, r"no 'name'"),
    (3, r"expected a name or a dict"),
])
def test_make_activation_rejects_bad_specs(spec, pattern):
    with pytest.raises(InputError, match=pattern):
        make_activation(spec)


# ----- torch modules and ONNX ops -----------------------------------------------------------
@pytest.mark.parametrize("module, spec", [
    (nn.Identity(), {"name": "identity"}),
    (nn.ReLU(), {"name": "relu"}),
    (nn.LeakyReLU(0.2), {"name": "leaky_relu", "a": 0.2}),
    (nn.LeakyReLU(0.0), {"name": "relu"}),
    (nn.Hardtanh(), {"name": "clip", "lo": -1.0, "hi": 1.0}),
    (nn.Hardtanh(-2.0, 0.5), {"name": "clip", "lo": -2.0, "hi": 0.5}),
    (nn.ReLU6(), {"name": "clip", "lo": 0.0, "hi": 6.0}),
    (nn.Softshrink(0.3), {"name": "soft_shrink", "lam": 0.3}),
    (nn.Sigmoid(), {"name": "sigmoid"}),
    (nn.Tanh(), {"name": "tanh"}),
    (nn.Softplus(), {"name": "softplus", "beta": 1.0}),
    (nn.Softplus(beta=2.0), {"name": "softplus", "beta": 2.0}),
    (nn.ELU(0.5), {"name": "elu", "alpha": 0.5}),
    (nn.ELU(), {"name": "elu", "alpha": 1.0}),
    (nn.CELU(1.0), {"name": "elu", "alpha": 1.0}),
    (nn.Softsign(), {"name": "softsign"}),
    (nn.Hardsigmoid(), {"name": "hard_sigmoid"}),
    (nn.Softmax(dim=1), {"name": "softmax", "dim": 1}),
    (nn.Softmax(dim=-1), {"name": "softmax", "dim": -1}),
    (nn.Threshold(0.5, 0.5), {"name": "clip", "lo": 0.5, "hi": None}),
    (nn.Threshold(0.0, 0.0), {"name": "relu"}),
    (nn.PReLU(init=0.3), {"name": "leaky_relu", "a": pytest.approx(0.3)}),
    (nn.RReLU(0.1, 0.3).eval(), {"name": "leaky_relu", "a": pytest.approx(0.2)}),
])
def test_activation_from_module_maps_and_computes_the_same(module, spec):
    act = activation_from_module(module)
    assert act.spec() == spec
    z = torch.linspace(-10, 10, 2001, dtype=F64).reshape(1, -1)
    with torch.no_grad():
        want = module.double()(z)
    assert (act.sigma(z) - want).abs().max() < 1e-12
    # autograd through sigma (Landweber/backprop solvers) gives the module's derivative, on a
    # grid off the kinks (0, 6, +-3, +-lambda, ...): there any subgradient is right, and torch
    # changed its pick between releases (ReLU6 at 6, Hardsigmoid at +-3: 2.6 vs 2.15).
    z = z + 1e-3 * math.pi
    w = torch.cos(3 * z)
    za, zb = z.clone().requires_grad_(), z.clone().requires_grad_()
    (act.sigma(za) * w).sum().backward()
    (module(zb) * w).sum().backward()
    # (torch's Hardsigmoid backward uses 1/6 rounded to float32: 5e-9 off)
    assert (za.grad - zb.grad).abs().max() < 1e-8


def test_softmax2d_maps_to_channel_softmax():
    act = activation_from_module(nn.Softmax2d())
    z = torch.randn(2, 3, 4, 5, dtype=F64)
    assert (act.sigma(z) - nn.Softmax2d()(z)).abs().max() < 1e-15


@pytest.mark.parametrize("module", [nn.Linear(3, 2), nn.Conv2d(1, 2, 3), nn.Flatten(),
                                    nn.Dropout(), nn.MaxPool2d(2), nn.BatchNorm1d(3)])
def test_activation_from_module_returns_none_for_other_layers(module):
    assert activation_from_module(module) is None


@pytest.mark.parametrize("module, needles", [
    (nn.GELU(), ["not monotone", "-0.170", "1.129", "ReLU, softplus or ELU"]),
    (nn.SiLU(), ["not monotone", "-0.278", "1.0998", "ReLU or softplus"]),
    (nn.Mish(), ["not monotone", "-0.309", "1.089", "softplus"]),
    (nn.Hardswish(), ["not monotone", "1.5", "ReLU6"]),
    (nn.SELU(), ["1.0507", "1.758", "not 1-Lipschitz", "ELU with alpha <= 1"]),
    (nn.ELU(alpha=2.0), ["alpha = 2.0 > 1", "not 1-Lipschitz", "0 < alpha <= 1"]),
    (nn.ELU(alpha=-0.5), ["not monotone", "0 < alpha <= 1"]),
    (nn.LeakyReLU(1.5), ["a = 1.5 > 1", "not 1-Lipschitz", "0 < a <= 1"]),
    (nn.LeakyReLU(-0.2), ["a = -0.2 < 0", "not monotone", "0 < a <= 1"]),
    (nn.Hardshrink(), ["discontinuous", "nonconvex", "Softshrink"]),
    (nn.PReLU(num_parameters=3), ["3 learnable slopes", "LeakyReLU"]),
    (nn.PReLU(init=1.5), ["a = 1.5 > 1", "LeakyReLU"]),
    (nn.Threshold(0.5, 0.0), ["discontinuous", "value != threshold", "ReLU"]),
    (nn.CELU(alpha=2.0), ["is a proximal map", "does not implement", "ELU"]),
    (nn.Tanhshrink(), ["not elementary", "softsign"]),
    (nn.LogSigmoid(), ["does not implement", "softplus"]),
    (nn.LogSoftmax(dim=1), ["Softmax"]),
    (nn.Softmin(dim=1), ["decreasing", "Softmax"]),
    (nn.GLU(), ["halves", "ReLU or sigmoid"]),
    (nn.Softmax(dim=None), ["dim", "nn.Softmax(dim=1)"]),
    (nn.Softmax(dim=0), ["batch", "dim=1"]),
])
def test_activation_from_module_refusals_explain_and_suggest(module, needles):
    with pytest.raises(UnsupportedLayerError) as info:
        activation_from_module(module)
    msg = str(info.value)
    assert "cannot be lifted" in msg and "Nearest supported alternative" in msg
    assert type(module).__name__ in msg
    for needle in needles:
        assert needle in msg, (needle, msg)


@pytest.mark.parametrize("op, attrs, spec", [
    ("Identity", {}, {"name": "identity"}),
    ("Relu", {}, {"name": "relu"}),
    ("LeakyRelu", {}, {"name": "leaky_relu", "a": 0.01}),
    ("LeakyRelu", {"alpha": 0.25}, {"name": "leaky_relu", "a": 0.25}),
    ("Sigmoid", {}, {"name": "sigmoid"}),
    ("Tanh", {}, {"name": "tanh"}),
    ("Clip", {"min": 0.0, "max": 6.0}, {"name": "clip", "lo": 0.0, "hi": 6.0}),
    ("Clip", {"min": -1.0}, {"name": "clip", "lo": -1.0, "hi": None}),
    ("Clip", {"min": 0.0}, {"name": "relu"}),
    ("Clip", {}, {"name": "identity"}),
    ("Clip", {"min": np.float32(0), "max": np.finfo(np.float32).max}, {"name": "relu"}),
    ("Clip", {"min": -np.finfo(np.float32).max, "max": 1.0}, {"name": "clip", "lo": None,
                                                              "hi": 1.0}),
    ("Softmax", {"axis": 1}, {"name": "softmax", "dim": 1}),
    ("Softmax", {}, {"name": "softmax", "dim": -1}),
    ("Softplus", {}, {"name": "softplus", "beta": 1.0}),
    ("Elu", {}, {"name": "elu", "alpha": 1.0}),
    ("Elu", {"alpha": 0.4}, {"name": "elu", "alpha": 0.4}),
    ("Softsign", {}, {"name": "softsign"}),
    ("HardSigmoid", {"alpha": float(np.float32(1 / 6)), "beta": 0.5}, {"name": "hard_sigmoid"}),
    ("Shrink", {"bias": 0.5, "lambd": 0.5}, {"name": "soft_shrink", "lam": 0.5}),
])
def test_activation_from_onnx_maps(op, attrs, spec):
    assert activation_from_onnx(op, attrs).spec() == spec


def test_activation_from_onnx_softmax_opset_and_none():
    assert activation_from_onnx("Softmax", {}, opset=11).spec() == {"name": "softmax", "dim": 1}
    assert activation_from_onnx("Softmax", {"axis": 1}, opset=11, input_rank=2) is not None
    with pytest.raises(UnsupportedLayerError, match="opset 11 < 13"):
        activation_from_onnx("Softmax", {"axis": 1}, opset=11, input_rank=4)
    for op in ("Gemm", "Conv", "Flatten", "MaxPool", "Add"):
        assert activation_from_onnx(op, {}) is None


@pytest.mark.parametrize("op, attrs, needles", [
    ("Gelu", {}, ["not monotone", "1.129"]),
    ("Selu", {}, ["1.758", "ELU"]),
    ("HardSwish", {}, ["1.5"]),
    ("Elu", {"alpha": 1.7}, ["1.7 > 1", "0 < alpha <= 1"]),
    ("LeakyRelu", {"alpha": 2.0}, ["2.0 > 1"]),
    ("HardSigmoid", {}, ["alpha=0.2", "1/6", "torch.nn.Hardsigmoid"]),
    ("Shrink", {"bias": 0.0, "lambd": 0.5}, ["discontinuous", "hard shrinkage"]),
    ("ThresholdedRelu", {"alpha": 1.0}, ["discontinuous", "Relu"]),
    ("Softmax", {"axis": 0}, ["batch"]),
])
def test_activation_from_onnx_refusals(op, attrs, needles):
    with pytest.raises(UnsupportedLayerError) as info:
        activation_from_onnx(op, attrs)
    msg = str(info.value)
    assert f"ONNX {op}" in msg and "Nearest supported alternative" in msg
    for needle in needles:
        assert needle in msg, (needle, msg)
