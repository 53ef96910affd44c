"""A graph network (residual additions, channel concatenation) in the network panel: one line
per lifted node saying what it merges, read from the lifted network of an ONNX export."""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from lbi_engine.models.network import LiftedNetwork
from lbi_gui.engine.run_driver import layer_rows
from lbi_gui.widgets.network_panel import NetworkPanel, describe_node
from tests.gui.conftest import wait_ready

pytest.importorskip("onnx")


class Residual(nn.Module):
    """A stem and two residual blocks: an identity shortcut, then a 1x1-conv shortcut."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 2, 3, padding=1)
        self.a1, self.a2 = nn.Conv2d(2, 2, 3, padding=1), nn.Conv2d(2, 2, 3, padding=1)
        self.b1, self.b2 = nn.Conv2d(2, 3, 3, padding=1), nn.Conv2d(3, 3, 3, padding=1)
        self.shortcut = nn.Conv2d(2, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        x = torch.relu(self.a2(torch.relu(self.a1(x))) + x)
        return torch.relu(self.b2(torch.relu(self.b1(x))) + self.shortcut(x))


class Concat(nn.Module):
    """Two branches joined along the channels (a Fire module's expand step)."""

    def __init__(self) -> None:
        super().__init__()
        self.left, self.right = nn.Conv2d(1, 2, 3, padding=1), nn.Conv2d(1, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.relu(self.left(x)), torch.relu(self.right(x))], dim=1)


def _onnx(module: nn.Module, path: Path, side: int = 6) -> Path:
    torch.manual_seed(0)
    module = module.eval()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(1, 1, side, side),), str(path))
    return path


def _panel_lines(qtbot, net: LiftedNetwork) -> tuple[NetworkPanel, list[str]]:
    panel = NetworkPanel()
    qtbot.addWidget(panel)
    panel.show()
    rows = layer_rows(net)
    panel.show_network(net.name, rows, {}, net.input_shape, net.output_shape)
    return panel, [panel.nodes.item(i).text() for i in range(panel.nodes.count())]


def test_residual_network_lists_each_node_with_what_it_adds(qtbot, tmp_path):
    torch.manual_seed(0)
    module = Residual()
    net = LiftedNetwork.from_onnx(_onnx(module, tmp_path / "res.onnx"))
    x = torch.randn(2, 1, 6, 6)
    with torch.no_grad():  # the lifted network is the exported one
        assert torch.allclose(net(x), module(x), atol=1e-5)
    panel, lines = _panel_lines(qtbot, net)
    assert panel.nodes.isVisible()
    # five lifted nodes: the stem, each block's first conv, each block's addition + ReLU
    assert len(lines) == 5 == len(net.layers)
    assert lines[0] == "x1 = relu(Conv2d(x0))"
    assert lines[1] == "x2 = relu(Conv2d(x1))"
    # the identity shortcut adds the block's input x1 itself to conv(x2)
    assert lines[2] == "x3 = relu(add: Conv2d(x2) + x1)"
    assert lines[3] == "x4 = relu(Conv2d(x3))"
    # the 1x1-conv shortcut is a second convolution of the block's input x3
    assert lines[4] == "x5 = relu(add: Conv2d(x4) + Conv2d(x3))"
    assert "2 of them merge" in panel.summary.text()
    # each line's inputs are the states the lifted network itself names
    for i, line in enumerate(lines):
        states = {f"x{j}" for j, _ in net.terms(i)}
        named = {w.strip("()+|:,") for w in line.split("=", 1)[1].replace("(", " ").split()}
        assert states <= named, (line, states)


def test_concatenation_is_listed_as_a_concat_of_both_branches(qtbot, tmp_path):
    net = LiftedNetwork.from_onnx(_onnx(Concat(), tmp_path / "cat.onnx"))
    panel, lines = _panel_lines(qtbot, net)
    assert lines == ["x1 = relu(Conv2d(x0))", "x2 = relu(Conv2d(x0))",
                     "x3 = identity(concat: x1 | x2)"]


def test_a_chain_shows_no_node_list(qtbot, tmp_path):
    chain = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Conv2d(2, 2, 3), nn.ReLU())
    panel, lines = _panel_lines(qtbot, LiftedNetwork.from_onnx(_onnx(chain, tmp_path / "c.onnx")))
    assert lines == [] and not panel.nodes.isVisible()
    assert "merge" not in panel.summary.text()
    # a chain row still reads as one node of one input
    assert describe_node(0, {"kind": "Conv2d", "activation": "relu"}) == "x1 = relu(Conv2d(x0))"


def test_window_opens_a_residual_onnx_and_lists_its_nodes(qtbot, make_window, tmp_path):
    path = _onnx(Residual(), tmp_path / "res28.onnx", side=28)
    win = make_window({"network": "mnist-cnn-ae", "dataset": "mnist", "max_iter": 5})
    win.files.open_network(str(path))
    qtbot.waitUntil(lambda: win.view.info is not None
                    and win.view.info.request.get("network") == str(path), timeout=120_000)
    wait_ready(qtbot, win)
    nodes = win.network_panel.nodes
    lines = [nodes.item(i).text() for i in range(nodes.count())]
    assert lines[2] == "x3 = relu(add: Conv2d(x2) + x1)", lines
    assert lines[4] == "x5 = relu(add: Conv2d(x4) + Conv2d(x3))", lines


def test_window_runs_layerwise_on_a_residual_onnx_with_a_fitted_prior(qtbot, make_window,
                                                                      tmp_path):
    """Layer-wise chosen for a graph network in the window: the run goes through the engine
    child with the feature prior, every stage of both sweeps reports, the result is drawn."""
    import numpy as np

    from lbi_engine.data import mnist_split
    from lbi_engine.priors import feature as fp

    path = _onnx(Residual(), tmp_path / "res28.onnx", side=28)
    images, _ = mnist_split("train")
    priors = fp.fit_feature_priors(LiftedNetwork.from_onnx(path),
                                   torch.from_numpy(images[:200]), rank=8)
    fp.save_feature_priors(priors, tmp_path / "res28.prior")
    win = make_window({"network": "mnist-cnn-ae", "dataset": "mnist", "max_iter": 5})
    win.files.open_network(str(path))
    qtbot.waitUntil(lambda: win.view.info is not None
                    and win.view.info.request.get("network") == str(path), timeout=120_000)
    wait_ready(qtbot, win)
    win.params.set_request({**win.params.current_request(), "method": "layerwise", "max_iter": 300,
                     "noise_std": 0.05, "feature_prior": str(tmp_path / "res28.prior")})
    win.params.flush_changes()
    win.runner.run()
    qtbot.waitUntil(lambda: not win.controller.running and len(win.run_table.runs) == 1,
                    timeout=120_000)
    run = win.run_table.runs[-1]
    assert run.request["method"] == "layerwise"
    assert np.isfinite(run.metrics.psnr)
    stages = [s["stage"] for s in run.metrics.stages]
    assert stages[-1] == "layer 1/5" and "layer 2/5 (sweep 2/2)" in stages
