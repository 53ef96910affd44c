"""Messages about one's own network file that lead somewhere: a network that does not fix
its input shape asks for it in the panel (and the typed shape prepares it), a typed shape
the file contradicts is refused in a dialog and taken back, and File → Import network opens
a graph network from its file exactly as File → Open network does. Real engine, files
written here."""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from PySide6 import QtWidgets
from torch import nn

from lbi_gui.dialogs import messages
from lbi_gui.window import files


def _onnx(path: Path, dynamic: bool) -> str:
    pytest.importorskip("onnx")
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()).eval()
    axes = {"x": {0: "b", 2: "h", 3: "w"}} if dynamic else None
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(1, 3, 8, 8),), str(path), dynamo=False,
                          input_names=["x"], dynamic_axes=axes)
    return str(path)


@pytest.fixture
def dialogs_seen(monkeypatch, tmp_path) -> list[tuple[str, str]]:
    """Errors and choices the window shows (title, text); a choice is answered with an
    8×8 colour photo, which every network here takes."""
    photo = tmp_path / "photo.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (8, 8, 3), dtype=np.uint8),
                    "RGB").save(photo)
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(messages, "ask_choice",
                        lambda _p, title, text, _c: seen.append((title, text)) or "image")
    monkeypatch.setattr(files, "show_error",
                        lambda _p, title, text, **_k: seen.append((title, text)))
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (str(photo), "")))
    return seen


def _idle_on(win, network: str) -> bool:
    return (win.view.info is not None and win.controller.state == "idle"
            and win.view.info.request["network"] == network)


def test_a_network_without_a_fixed_shape_asks_for_it_and_takes_it(qtbot, make_window, tmp_path,
                                                                  dialogs_seen):
    dyn = _onnx(tmp_path / "dyn.onnx", dynamic=True)
    win = make_window({"network": "mnist-cnn-ae", "max_iter": 3})
    notes: list[str] = []
    win.statusBar().messageChanged.connect(notes.append)
    win.files.open_network(dyn)
    panel = win.network_panel
    qtbot.waitUntil(lambda: panel.problem.isVisible(), timeout=60000)
    assert "dynamic sample dims" in panel.problem.text()
    assert "under Input shape and press Enter" in panel.problem.text()
    assert panel.values()["network"] == dyn  # still chosen: the shape typed next is for it
    assert not panel.visibleRegion().isEmpty()  # its tab is raised: the field is in view
    assert not dialogs_seen  # no dialog offering other data: data was not the problem
    assert any("dyn.onnx does not fix its input shape" in n for n in notes), notes
    panel.shape_edit.setText("3,8,8")
    panel.shape_edit.editingFinished.emit()
    win.params.flush_changes()
    qtbot.waitUntil(lambda: _idle_on(win, dyn), timeout=60000)
    assert tuple(win.view.info.input_shape) == (3, 8, 8) and not panel.problem.isVisible()


def test_a_typed_shape_the_file_contradicts_is_refused_and_taken_back(qtbot, make_window,
                                                                     tmp_path, dialogs_seen):
    fixed = _onnx(tmp_path / "fixed.onnx", dynamic=False)
    win = make_window({"network": "mnist-cnn-ae", "max_iter": 3})
    win.files.open_network(fixed)  # mnist digits do not fit 3×8×8: the photo is chosen
    qtbot.waitUntil(lambda: _idle_on(win, fixed), timeout=60000)
    dialogs_seen.clear()
    panel = win.network_panel
    panel.shape_edit.setText("3,16,16")
    panel.shape_edit.editingFinished.emit()
    win.params.flush_changes()
    qtbot.waitUntil(lambda: bool(dialogs_seen), timeout=60000)
    title, text = dialogs_seen[-1]
    assert title == "Could not prepare the inversion"
    assert "3,16,16 contradicts the 3,8,8 that fixed.onnx fixes" in text
    qtbot.waitUntil(lambda: panel.shape_edit.text() == "", timeout=10000)  # taken back
    info = win.view.info
    assert info.request["network"] == fixed and tuple(info.input_shape) == (3, 8, 8)


def test_import_opens_a_graph_network_as_open_does(qtbot, make_window, tmp_path):
    from lbi_gui.dialogs.import_network import ImportNetworkDialog

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(2, 2, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.conv(x) + x)

    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), Block()).eval()
    src = tmp_path / "res.pt2"
    torch.export.save(torch.export.export(module, (torch.zeros(1, 1, 28, 28),)), str(src))
    win = make_window({"network": "mnist-cnn-ae", "max_iter": 3})
    notes: list[str] = []
    win.statusBar().messageChanged.connect(notes.append)
    dialog = ImportNetworkDialog(win, source=str(src))
    dialog.converted.connect(win.files.open_network)
    dialog.note.connect(lambda text: win.statusBar().showMessage(text, 15000))
    with qtbot.waitSignal(dialog.converted, timeout=60000) as blocker:
        dialog.start()
    assert blocker.args == [str(src)]  # the file itself, not a card
    assert not (tmp_path / "lbi-networks" / "res.json").exists()
    qtbot.waitUntil(lambda: _idle_on(win, str(src)), timeout=60000)
    assert len(win.view.info.layers) >= 2  # lifted as a graph, as File → Open network lifts it
    assert any("opened from the file itself" in n for n in notes), notes
