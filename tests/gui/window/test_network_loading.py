"""Choosing another network: the panel says at once that it is loading (the engine lifts it
off the GUI thread) instead of describing the network before, and describes the new one
when it arrives; a network that cannot be lifted leaves the one before described, with the
reason (a SiLU network: SiLU named as not liftable) in the panel."""

from __future__ import annotations

import contextlib
import io
import warnings

import pytest
import torch
from torch import nn


def _choose(win, name: str) -> None:
    combo = win.network_panel.combo
    combo.setCurrentIndex(combo.findData(name))
    combo.activated.emit(combo.currentIndex())
    win.params.flush_changes()


def test_the_panel_says_loading_at_once_then_describes_the_new_network(qtbot, make_window):
    win = make_window({"network": "mnist-cnn-ae", "max_iter": 3})
    panel = win.network_panel
    assert "mnist-cnn-ae" in panel.summary.text() and panel.table.rowCount() > 0
    _choose(win, "natural-cnn-ae")
    # before the engine answers: no description of mnist-cnn-ae any more
    assert "Loading <b>natural-cnn-ae</b>" in panel.summary.text()
    assert panel.table.rowCount() == 0 and "mnist-cnn-ae" not in panel.summary.text()
    assert win.view.info.request["network"] == "mnist-cnn-ae"  # the GUI thread did not load it
    qtbot.waitUntil(lambda: win.view.info.request["network"] == "natural-cnn-ae"
                    and win.controller.state == "idle", timeout=60000)
    assert "<b>natural-cnn-ae</b>" in panel.summary.text() and "Loading" not in \
        panel.summary.text()
    assert panel.table.rowCount() == len(win.view.info.layers) > 0 and not panel.loading


def test_a_network_that_cannot_be_lifted_leaves_the_one_before_described(
        qtbot, make_window, tmp_path, monkeypatch):
    pytest.importorskip("onnx")
    from lbi_gui.window import files

    shown: list[str] = []
    monkeypatch.setattr(files, "show_error", lambda _p, _t, text, **_k: shown.append(text))
    path = tmp_path / "silu.onnx"
    module = nn.Sequential(nn.Flatten(), nn.Linear(784, 16), nn.SiLU()).eval()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.zeros(1, 1, 28, 28),), str(path), dynamo=False)
    win = make_window({"network": "mnist-cnn-ae", "max_iter": 3})
    panel = win.network_panel
    win.files.open_network(str(path))
    assert "Loading <b>silu.onnx</b>" in panel.summary.text()
    qtbot.waitUntil(lambda: bool(shown), timeout=60000)
    assert "computing SiLU (Swish)" in shown[-1] and "torch.cat" not in shown[-1]
    assert "computing SiLU (Swish)" in panel.problem.text()
    assert "<b>mnist-cnn-ae</b>" in panel.summary.text() and not panel.loading
    assert panel.table.rowCount() == len(win.view.info.layers)


def test_a_network_no_data_fits_that_cannot_be_lifted_asks_no_data_question(
        qtbot, make_window, tmp_path, monkeypatch):
    """No bundled dataset fits a 3×8×8 SiLU network: the user is told SiLU cannot be
    lifted, not asked to pick an image for a network that would then be refused anyway."""
    pytest.importorskip("onnx")
    from lbi_gui.dialogs import messages
    from lbi_gui.window import files

    asked: list[str] = []
    shown: list[str] = []
    monkeypatch.setattr(messages, "ask_choice", lambda _p, title, *_a: asked.append(title))
    monkeypatch.setattr(files, "show_error", lambda _p, _t, text, **_k: shown.append(text))
    path = tmp_path / "silu8.onnx"
    module = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.SiLU()).eval()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.zeros(1, 3, 8, 8),), str(path), dynamo=False)
    win = make_window({"network": "mnist-cnn-ae", "max_iter": 3})
    win.files.open_network(str(path))
    qtbot.waitUntil(lambda: bool(shown), timeout=60000)
    assert not asked, asked
    assert "computing SiLU (Swish)" in shown[-1]
    assert win.view.info.request["network"] == "mnist-cnn-ae"
