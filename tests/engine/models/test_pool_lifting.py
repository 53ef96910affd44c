"""Max-pooling lifted by default (its exact ReLU rewrite), average pooling as affine maps, from
ONNX files (both torch.onnx exporters) and torch.export archives alike.

Reference: torch's own forward of the module the file was exported from, in float64 (the
rewrite only adds and subtracts values with weights 0 and ±1: agreement to rounding).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lbi_engine.errors import UnsupportedLayerError
from lbi_engine.models.maxpool_relu import keep_maxpool, maxpool_as_relu, relu_levels
from lbi_engine.models.network import LiftedNetwork
from lbi_engine.models.zoo import load_model_file

# (kernel, stride, padding, dilation, ceil_mode), after a ReLU: every geometry torch allows
GEOMETRIES = [
    (2, 2, 0, 1, False),
    (3, 2, 1, 1, False),   # the ResNet stem's pool
    (3, 2, 0, 1, True),    # partial windows at the border
    (2, 1, 0, 2, False),   # dilated
    (3, 3, 1, 1, True),
    ((2, 3), (1, 2), (1, 1), 1, False),
]


def _chain(kernel, stride, padding, dilation, ceil) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(kernel, stride, padding, dilation, ceil_mode=ceil),
                         nn.Conv2d(4, 2, 3), nn.ReLU()).eval()


def _agrees(net: LiftedNetwork, module: nn.Module, shape) -> None:
    x = torch.randn(3, *shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        want = module.double()(x)
        got = net.to(dtype=torch.float64).forward(x)
    assert got.shape == want.shape
    assert float((got - want).abs().max()) <= 1e-12 * float(want.abs().max().clamp_min(1.0))


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
def test_maxpool_geometries_rewrite_exactly(geometry) -> None:
    module = _chain(*geometry)
    net = LiftedNetwork.from_module(module, (3, 11, 13))
    _agrees(net, module, (3, 11, 13))
    (rewrite,) = net.rewrites
    assert rewrite["layer"] == "2"
    assert rewrite["lifted_layers_added"] == relu_levels(geometry[0])
    assert len(net) == 2 + relu_levels(geometry[0])
    assert "1 lifted" in net.rewrite_note() or f"{relu_levels(geometry[0])} lifted" in \
        net.rewrite_note()


@pytest.mark.parametrize("dynamo", [False, True], ids=["onnx-torchscript", "onnx-dynamo"])
@pytest.mark.parametrize("geometry", GEOMETRIES[:3], ids=str)
def test_onnx_maxpool_lifts_by_default(tmp_path, dynamo, geometry) -> None:
    pytest.importorskip("onnx")
    if dynamo:
        pytest.importorskip("onnxscript")
    from tests.engine.models.test_onnx_exporters import export

    module = _chain(*geometry)
    path = tmp_path / "pool.onnx"
    export(module, (3, 11, 13), path, dynamo=dynamo)
    bundle = load_model_file(path)
    _agrees(bundle.encoder, module, (3, 11, 13))
    assert bundle.encoder.rewrites[0]["lifted_layers_added"] == relu_levels(geometry[0])


@pytest.mark.parametrize("geometry", GEOMETRIES[:3], ids=str)
def test_pt2_maxpool_lifts_by_default(tmp_path, geometry) -> None:
    from tests.engine.models.test_pt2_import import save_pt2

    module = _chain(*geometry)
    path = tmp_path / "pool.pt2"
    save_pt2(module, (3, 11, 13), path)
    bundle = load_model_file(path)
    _agrees(bundle.encoder, module, (3, 11, 13))
    assert len(bundle.encoder.rewrites) == 1


def _avg_chain(adaptive: tuple[int, int]) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
                         nn.AvgPool2d(2, 2, ceil_mode=True),  # partial windows: 11x15 -> 6x8
                         nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(),
                         nn.AvgPool2d(3, 1, 1, count_include_pad=False),
                         nn.AdaptiveAvgPool2d(adaptive),
                         nn.Conv2d(4, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(2, 2)).eval()


def _lifted(module: nn.Module, shape, how: str, tmp_path) -> LiftedNetwork:
    """The module lifted directly, or read back from the file the default exporter writes."""
    if how == "module":
        return LiftedNetwork.from_module(module, shape)
    if how == "pt2":
        from tests.engine.models.test_pt2_import import save_pt2

        save_pt2(module, shape, tmp_path / "net.pt2")
        return load_model_file(tmp_path / "net.pt2").encoder
    pytest.importorskip("onnx")
    if how == "onnx-dynamo":
        pytest.importorskip("onnxscript")
    from tests.engine.models.test_onnx_exporters import export

    export(module, shape, tmp_path / "net.onnx", dynamo=how == "onnx-dynamo")
    return load_model_file(tmp_path / "net.onnx").encoder


@pytest.mark.parametrize("how", ["module", "onnx-torchscript", "onnx-dynamo", "pt2"])
def test_average_pooling_lifts_as_affine_maps(tmp_path, how) -> None:
    # torch's ONNX exporters write adaptive pooling as an AveragePool where the sizes divide;
    # otherwise the TorchScript one refuses and the dynamo one writes a gather of windows,
    # which lbi does not read. torch itself and .pt2 take any sizes.
    module = _avg_chain((3, 4) if how.startswith("onnx") else (4, 3))
    shape = (3, 11, 15)
    net = _lifted(module, shape, how, tmp_path)
    _agrees(net, module, shape)
    assert len(net) == 4  # three ReLUs + the final Linear: every pool merged into an affine map
    assert not net.rewrites


def test_padding_without_a_relu_before_is_refused_by_name() -> None:
    """Zero padding equals torch's -inf padding only for non-negative input."""
    module = nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(2, padding=1)).eval()
    with pytest.raises(UnsupportedLayerError, match=r"Layer '1' \(MaxPool2d.*padding.*ReLU"):
        LiftedNetwork.from_module(module, (1, 8, 8))
    ceil = nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(2, ceil_mode=True)).eval()
    with pytest.raises(UnsupportedLayerError, match=r"ceil_mode"):
        LiftedNetwork.from_module(ceil, (1, 9, 9))


def test_a_pool_after_a_pool_keeps_the_non_negative_input() -> None:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                           nn.MaxPool2d(3, 2, 1)).eval()
    net = LiftedNetwork.from_module(module, (1, 12, 12))
    _agrees(net, module, (1, 12, 12))
    assert len(net.rewrites) == 2


def test_rewrite_of_negative_values_with_dilation() -> None:
    pool = nn.MaxPool2d(2, 1, dilation=2)
    x = -torch.rand(2, 3, 7, 6, dtype=torch.float64) - 1.0
    got = maxpool_as_relu(pool, 3).double()(x)
    torch.testing.assert_close(got, pool(x), rtol=0, atol=1e-14)


def test_the_refusal_is_still_available() -> None:
    module = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.MaxPool2d(2)).eval()
    with keep_maxpool(), pytest.raises(UnsupportedLayerError, match="MaxPool2d"):
        LiftedNetwork.from_module(module, (1, 8, 8))


def _global_max_chain(size: int | tuple[int, int]) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Tanh(),
                         nn.AdaptiveMaxPool2d(size), nn.Flatten(),
                         nn.Linear(4 * (1 if size == 1 else 6), 3)).eval()


@pytest.mark.parametrize("how", ["module", "onnx-torchscript", "onnx-dynamo", "pt2"])
@pytest.mark.parametrize("size", [1, (2, 3)], ids=["global", "adaptive-2x3"])
def test_global_and_adaptive_max_pooling_rewrite_exactly(tmp_path, how, size) -> None:
    """AdaptiveMaxPool2d whose output divides its input (global max-pooling included) is the
    max-pool with window H/oh x W/ow; after tanh its input can be negative, which the rewrite
    handles without padding. The lifted forward equals torch's, in float64."""
    module = _global_max_chain(size)
    shape = (3, 6, 9)
    net = _lifted(module, shape, how, tmp_path)
    _agrees(net, module, shape)
    window = (6, 9) if size == 1 else (3, 3)
    assert [r["lifted_layers_added"] for r in net.rewrites] == [relu_levels(window)]


def test_adaptive_max_pooling_with_uneven_windows_is_refused_by_name() -> None:
    module = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(4))
    with pytest.raises(UnsupportedLayerError, match="AdaptiveMaxPool2d"):
        LiftedNetwork.from_module(module, (3, 6, 9))
