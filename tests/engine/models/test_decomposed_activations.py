"""Non-proximal activations written out as elementwise operations (SiLU as x * sigmoid(x),
GELU with erf, Mish) are refused as the activation they are, in every importer, with the
activations lbi lifts; a genuine product of two tensors is refused as a product."""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lbi_engine.errors import UnsupportedLayerError
from lbi_engine.models._decomposed_activations import refused_activation
from lbi_engine.models.zoo import bundle_from_module, load_model_file


class _Gated(nn.Module):
    """Linear, then a hand-written activation or product."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.lin, self.kind = nn.Linear(6, 6), kind

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        if self.kind == "silu":
            return h * torch.sigmoid(h)
        if self.kind == "mish":
            return h * F.softplus(h).tanh()
        if self.kind == "gelu":
            return F.gelu(h)
        return h * torch.relu(x)  # "product": a gate computed from another tensor


def _onnx(module: nn.Module, path: Path) -> Path:
    pytest.importorskip("onnx")
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        # opset 17: SiLU and GELU are written out as Sigmoid + Mul and Div/Erf/Add/Mul/Mul
        torch.onnx.export(module.eval(), (torch.randn(1, 6),), str(path), dynamo=False,
                          opset_version=17)
    return path


def _refusal(load) -> str:
    with pytest.raises(UnsupportedLayerError) as info:
        load()
    return str(info.value)


def _assert_named(msg: str, name: str) -> None:
    assert f"computing {name}" in msg and "cannot be lifted" in msg, msg
    assert "not the proximal map" in msg or "not monotone" in msg, msg
    assert "Activations lbi lifts: ReLU" in msg and "Softplus" in msg, msg
    assert "torch.cat" not in msg and "addition" not in msg, msg


def test_silu_module_exported_to_onnx_is_named_silu(tmp_path):
    module = nn.Sequential(nn.Linear(6, 6), nn.SiLU())
    msg = _refusal(lambda: load_model_file(_onnx(module, tmp_path / "silu.onnx")))
    _assert_named(msg, "SiLU")
    assert "silu.onnx" in msg and "Nearest supported alternative: ReLU or softplus" in msg


@pytest.mark.parametrize(("kind", "name"), [("silu", "SiLU"), ("mish", "Mish"),
                                            ("gelu", "2 * GELU")])
def test_written_out_activations_in_onnx_are_named(tmp_path, kind, name):
    # GELU is exported as x * (1 + erf(x / sqrt 2)) * 0.5: seen before the last factor
    msg = _refusal(lambda: load_model_file(_onnx(_Gated(kind), tmp_path / f"{kind}.onnx")))
    _assert_named(msg, name)


@pytest.mark.parametrize(("kind", "name"), [("silu", "SiLU"), ("mish", "Mish")])
def test_written_out_activations_in_pt2_are_named(tmp_path, kind, name):
    path = tmp_path / f"{kind}.pt2"
    torch.export.save(torch.export.export(_Gated(kind).eval(), (torch.randn(1, 6),)), str(path))
    _assert_named(_refusal(lambda: load_model_file(path)), name)


@pytest.mark.parametrize(("kind", "name"), [("silu", "SiLU"), ("mish", "Mish")])
def test_written_out_activations_in_a_torch_forward_are_named(kind, name):
    msg = _refusal(lambda: bundle_from_module(_Gated(kind).eval(), Path("net.pt"),
                                              input_shape=(6,)))
    _assert_named(msg, name)


@pytest.mark.parametrize("fmt", ["onnx", "pt2", "torch"])
def test_a_product_of_two_tensors_is_refused_as_a_product(tmp_path, fmt):
    module = _Gated("product").eval()
    if fmt == "onnx":
        path = _onnx(module, tmp_path / "p.onnx")
        msg = _refusal(lambda: load_model_file(path))
    elif fmt == "pt2":
        path = tmp_path / "p.pt2"
        torch.export.save(torch.export.export(module, (torch.randn(1, 6),)), str(path))
        msg = _refusal(lambda: load_model_file(path))
    else:
        msg = _refusal(lambda: bundle_from_module(module, Path("p.pt"), input_shape=(6,)))
    assert "multiplies two computed tensors" in msg and "neither affine" in msg
    assert "Replace the product by one of the activations lbi lifts: ReLU" in msg
    assert "computing" not in msg and "torch.cat" not in msg


def test_recognition_on_values_names_only_non_proximal_functions():
    x = np.linspace(-8, 8, 401)
    t = torch.from_numpy(x)
    assert refused_activation(x, F.silu(t).numpy()) == ("SiLU (Swish)", "silu")
    assert refused_activation(x, 0.5 * F.mish(t).numpy()) == ("0.5 * Mish", "mish")
    assert refused_activation(x, F.gelu(t, approximate="tanh").numpy())[1] == "gelu"
    for proximal in (torch.relu(t), torch.sigmoid(t), F.softplus(t), torch.tanh(t),
                     t * torch.relu(t), -F.silu(t)):  # -SiLU: a negative factor, not SiLU
        assert refused_activation(x, proximal.numpy()) is None
    # a handful of values cannot tell functions apart: no verdict
    assert refused_activation(x[:4], F.silu(t[:4]).numpy()) is None
