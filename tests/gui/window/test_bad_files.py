"""Bad files of every kind give a dialog with cause and fix; the window stays usable."""

from __future__ import annotations

import json

import pytest
import torch
from PySide6 import QtWidgets
from torch import nn

from lbi_gui.dialogs import messages
from tests.gui.conftest import wait_idle


def _wait_error(qtbot, n_before: int) -> QtWidgets.QMessageBox:
    qtbot.waitUntil(lambda: len(messages.OPEN_ERRORS) > n_before, timeout=30000)
    return messages.OPEN_ERRORS[-1]


@pytest.fixture
def files(tmp_path):
    torch.manual_seed(0)
    good = nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.ReLU())
    ts = tmp_path / "good_ts.pt"
    torch.jit.trace(good, torch.zeros(1, 1, 28, 28)).save(str(ts))
    out = {"empty": tmp_path / "empty.pt", "truncated": tmp_path / "truncated.pt",
           "wrong": tmp_path / "wrong.onnx", "gelu": tmp_path / "gelu.pt",
           "pickle": tmp_path / "whole_model.pt"}
    out["empty"].write_bytes(b"")
    out["truncated"].write_bytes(ts.read_bytes()[: ts.stat().st_size // 2])
    out["wrong"].write_text("this is not an ONNX model\n")
    gelu = nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.GELU(), nn.Linear(32, 8))
    torch.save(gelu.state_dict(), out["gelu"])  # weights + card: opening it runs no code
    layers = [{"type": "Flatten"}, {"type": "Linear", "in_features": 784, "out_features": 32},
              {"type": "GELU"}, {"type": "Linear", "in_features": 32, "out_features": 8}]
    (tmp_path / "gelu.json").write_text(json.dumps(
        {"name": "gelu", "format_version": 1, "input_shape": [1, 28, 28],
         "architecture": {"layers": layers, "encoder_layers": 4}}), encoding="utf-8")
    torch.save(good, out["pickle"])
    return out


def test_bad_network_files(qtbot, make_window, files, monkeypatch) -> None:
    win = make_window({"max_iter": 20})
    asked = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "question",
                        lambda parent, title, text, *a, **k: asked.append(text)
                        or QtWidgets.QMessageBox.StandardButton.No)
    for name in ("empty", "truncated", "wrong", "gelu"):
        n = len(messages.OPEN_ERRORS)
        win.network_panel.set_values({"input_shape": (1, 28, 28)})
        win.files.open_network(str(files[name]))
        box = _wait_error(qtbot, n)
        text = box.informativeText()
        assert files[name].name in text or name == "gelu", (name, text)
        box.close()
        # the last network that worked is selected again, the reason stays visible
        assert win.params.current_request()["network"] == "mnist-cnn-ae", name
        assert not win.network_panel.problem.isHidden(), name
        if name == "gelu":
            assert "GELU" in text or "gelu" in text.lower()
            assert "GELU" in win.network_panel.problem.text() or \
                "gelu" in win.network_panel.problem.text().lower()
    # a pickled whole model: explained, consent asked, declined -> not loaded, no dialog spam
    n = len(messages.OPEN_ERRORS)
    win.files.open_network(str(files["pickle"]))
    qtbot.waitUntil(lambda: bool(asked), timeout=30000)
    assert "runs code" in asked[0] or "run its code" in asked[0]
    qtbot.waitUntil(lambda: win.params.current_request()["network"] == "mnist-cnn-ae",
                    timeout=10000)
    assert not win.params.current_request()["allow_pickle"]
    assert len(messages.OPEN_ERRORS) == n
    # still usable: a run on the bundled network works
    win.runner.run()
    wait_idle(qtbot, win, timeout=120000)
    assert win.run_table.runs[-1].request["network"] == "mnist-cnn-ae"


def test_pickle_loads_after_consent(qtbot, make_window, files, monkeypatch) -> None:
    win = make_window()
    monkeypatch.setattr(QtWidgets.QMessageBox, "question",
                        lambda *a, **k: QtWidgets.QMessageBox.StandardButton.Yes)
    win.network_panel.set_values({"input_shape": (1, 28, 28)})
    win.files.open_network(str(files["pickle"]))
    qtbot.waitUntil(lambda: win.view.info.request["network"] == str(files["pickle"]), timeout=30000)
    assert win.view.info.request["allow_pickle"] is True
    assert win.network_panel.table.rowCount() == 1


def test_bad_image_files(qtbot, make_window, tmp_path) -> None:
    win = make_window()
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 20)
    for path in (empty, broken):
        n = len(messages.OPEN_ERRORS)
        win.files.open_data_file("image", str(path))
        box = _wait_error(qtbot, n)
        assert path.name in box.informativeText()
        box.close()
        assert win.params.current_request()["image"] is None  # back to the dataset sample
    win.files.open_path(str(tmp_path / "strange.xyz"))
    assert "strange.xyz" in messages.OPEN_ERRORS[-1].informativeText()
    messages.OPEN_ERRORS[-1].close()
