"""ONNX files written by torch.onnx.export itself, with both exporters, load and equal the module.

The networks are the small encoders a new user would write (issue 17): Linear/ReLU/LeakyReLU,
Conv2d + BatchNorm(eval) + AvgPool + Sigmoid, Conv2d + Tanh + ConvTranspose, and a few more
that make the dynamo exporter emit its less obvious forms (a static batch in every Reshape,
ReduceMean for global pooling, Softplus/Softsign/Softshrink as several elementwise nodes,
``x.view(x.size(0), -1)`` as Shape arithmetic when the batch is dynamic).

Tolerances: the lifted network holds the file's float32 weights exactly; it is cast to float64
and compared with the torch module in float64, so what remains is (a) float64 rounding (1e-13)
and (b) what the exporter changed in float32: the dynamo exporter folds BatchNorm into the
convolution's weights (one float32 rounding per weight, 2^-24 = 6e-8 relative), and lbi's
Softplus omits torch's `threshold` switch (|softplus(t) - t| <= e^-20 = 2e-9 at the switch);
ONNX stores LeakyRelu's alpha as float32 (0.1 -> 0.10000000149, 1.5e-8 relative).
"""

from __future__ import annotations

import contextlib
import io
import warnings

import pytest
import torch
from torch import nn

from lbi_engine.errors import UnsupportedLayerError
from lbi_engine.models.network import LiftedNetwork
from tests.engine._export_nets import Product, ViewNet

pytest.importorskip("onnxscript")  # the dynamo exporter needs it


def _with_bn_stats(m: nn.Module) -> nn.Module:
    """Non-trivial running statistics, so eval-mode BatchNorm is not the identity."""
    g = torch.Generator().manual_seed(1)
    for bn in m.modules():
        if isinstance(bn, nn.modules.batchnorm._BatchNorm):
            n = bn.num_features
            bn.running_mean.copy_(torch.randn(n, generator=g))
            bn.running_var.copy_(0.5 + torch.rand(n, generator=g))
            bn.weight.data.copy_(torch.randn(n, generator=g))
            bn.bias.data.copy_(torch.randn(n, generator=g))
    return m.eval()


def _net(name: str) -> tuple[nn.Module, tuple[int, ...], float]:
    """(module, sample shape, float64 tolerance) for each test network."""
    torch.manual_seed(0)
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(144, 32), nn.ReLU(), nn.Linear(32, 16),
                             nn.LeakyReLU(0.1)).eval(), (1, 12, 12), 1e-8
    if name == "cnn-bn-pool":
        return _with_bn_stats(nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4),
                                            nn.AvgPool2d(2), nn.Sigmoid(), nn.Flatten(),
                                            nn.Linear(4 * 6 * 6, 10))), (1, 12, 12), 1e-6
    if name == "conv-tanh-deconv":
        return nn.Sequential(nn.Conv2d(1, 4, 3, stride=2), nn.Tanh(),
                             nn.ConvTranspose2d(4, 2, 3, stride=2),
                             nn.Flatten()).eval(), (1, 11, 11), 1e-12
    if name == "bn1d-clip-smooth":
        return _with_bn_stats(nn.Sequential(
            nn.Linear(10, 8), nn.BatchNorm1d(8), nn.ReLU6(), nn.Linear(8, 8), nn.Softplus(2),
            nn.Linear(8, 8), nn.Softsign(), nn.Linear(8, 6), nn.Softshrink(0.3),
            nn.Hardtanh(-0.5, 0.5), nn.ELU(), nn.Softmax(dim=1))), (10,), 1e-6
    if name == "global-pool":
        return _with_bn_stats(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False),
                                            nn.BatchNorm2d(4), nn.ReLU(), nn.AvgPool2d(2),
                                            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                            nn.Dropout(0.3))), (3, 8, 8), 1e-6
    if name == "view":
        return ViewNet(12).eval(), (1, 12, 12), 1e-12
    if name == "unflatten-deconv":
        return nn.Sequential(nn.Linear(3, 16 * 2 * 2), nn.Unflatten(1, (16, 2, 2)),
                             nn.ConvTranspose2d(16, 4, 4, 2, 1), nn.Sigmoid()).eval(), (3,), 1e-12
    raise KeyError(name)


def export(module: nn.Module, shape: tuple[int, ...], path, *, dynamo: bool, batch: int = 1,
           dynamic_batch: bool = False, opset: int | None = None) -> None:
    """torch.onnx.export as a user calls it; its deprecation notices and progress lines are
    the exporter's, not lbi's, so they are silenced here (and only here)."""
    kwargs: dict = {}
    if dynamic_batch and dynamo:
        kwargs["dynamic_shapes"] = ({0: torch.export.Dim("batch")},)
    elif dynamic_batch:
        kwargs.update(input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    if opset is not None:
        kwargs["opset_version"] = opset
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(batch, *shape),), str(path), dynamo=dynamo,
                          verbose=False, **kwargs)


def _check_equal(net: LiftedNetwork, module: nn.Module, shape: tuple[int, ...],
                 tol: float) -> None:
    x = torch.randn(4, *shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    with torch.no_grad():
        want = module.double()(x)
        got = net.to(dtype=torch.float64).forward(x)
    assert got.shape == want.shape
    err = float((got - want).abs().max() / want.abs().max().clamp_min(1.0))
    assert err <= tol, err
    # and in float32, as loaded: the importer keeps the file's precision
    with torch.no_grad():
        err32 = float((net.forward(x.float()) - module.float()(x.float())).abs().max())
    assert err32 <= 1e-5


# (network, exporter options): today's defaults for the three encoders run always;
# the wider matrix (opsets, dynamic batch, more layer kinds) is slow (about 1 s per export).
_DEFAULTS = [(n, dyn) for n in ("mlp", "cnn-bn-pool", "conv-tanh-deconv") for dyn in (True, False)]


@pytest.mark.parametrize(("name", "dynamo"), _DEFAULTS)
def test_default_export_loads_and_equals_module(tmp_path, name, dynamo):
    module, shape, tol = _net(name)
    path = tmp_path / f"{name}.onnx"
    export(module, shape, path, dynamo=dynamo)  # batch 1, static: what users get by default
    net = LiftedNetwork.from_onnx(path)  # no input_shape: the file's own dims are used
    assert net.input_shape == shape
    _check_equal(net, module, shape, tol)


_MATRIX = [(n, dyn, batch, dynb, opset)
           for n in ("bn1d-clip-smooth", "global-pool", "view", "unflatten-deconv", "mlp")
           for dyn, batch, dynb, opset in ((True, 1, False, None), (True, 2, True, 18),
                                           (False, 2, True, 17), (False, 3, False, 13))]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "dynamo", "batch", "dynamic_batch", "opset"), _MATRIX)
def test_export_matrix_loads_and_equals_module(tmp_path, name, dynamo, batch, dynamic_batch,
                                               opset):
    module, shape, tol = _net(name)
    path = tmp_path / f"{name}.onnx"
    export(module, shape, path, dynamo=dynamo, batch=batch, dynamic_batch=dynamic_batch,
           opset=opset)
    _check_equal(LiftedNetwork.from_onnx(path, input_shape=shape), module, shape, tol)


@pytest.mark.parametrize("dynamo", [True, False])
def test_dynamo_specific_forms_load(tmp_path, dynamo):
    """Softplus/Softsign/Softshrink as elementwise subgraphs and view() via Shape ops."""
    for name, dynb in (("bn1d-clip-smooth", False), ("view", True)):
        module, shape, tol = _net(name)
        path = tmp_path / f"{name}-{dynamo}.onnx"
        export(module, shape, path, dynamo=dynamo, batch=2, dynamic_batch=dynb)
        _check_equal(LiftedNetwork.from_onnx(path, input_shape=shape), module, shape, tol)


@pytest.mark.parametrize(("module", "shape", "patterns"), [
    (Product(), (6,), ["Mul", "multiplies two computed tensors"]),
    (nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(2, padding=1)), (1, 8, 8),
     ["MaxPool", "padding", "ReLU"]),
    (nn.Sequential(nn.Linear(4, 4), nn.GELU()), (4,), ["Gelu", "ReLU"]),
    (nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4)), (4,), ["LayerNormalization",
                                                             "BatchNormalization"]),
])
def test_dynamo_export_refusals_name_node_reason_and_alternative(tmp_path, module, shape,
                                                                  patterns):
    path = tmp_path / "bad.onnx"
    export(module.eval(), shape, path, dynamo=True)
    with pytest.raises(UnsupportedLayerError) as info:
        LiftedNetwork.from_onnx(path)
    msg = str(info.value)
    assert "ONNX node '" in msg and "index" in msg and "bad.onnx" in msg
    for pat in patterns:
        assert pat in msg, f"{pat!r} not in {msg}"
