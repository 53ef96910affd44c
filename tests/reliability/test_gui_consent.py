"""The window asks before opening a model file whose loading runs code, and only then loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6 import QtWidgets

from tests.reliability import hostile_files as hf


def test_torchscript_is_asked_about_and_not_loaded_when_declined(qtbot, window, dialogs, kit,
                                                                  tmp_path: Path) -> None:
    net = hf.evil_torchscript(tmp_path)
    win = window(kit.base_request(max_iter=10))
    win.network_panel.set_values({"input_shape": (1, 28, 28)})
    win.files.open_network(str(net))
    qtbot.waitUntil(lambda: any(d["kind"] == "question" for d in dialogs), timeout=60000)
    question = next(d for d in dialogs if d["kind"] == "question")
    assert "run code" in question["title"].lower()
    assert "TorchScript" in question["text"] and "ONNX" in question["text"]
    qtbot.waitUntil(lambda: win.params.current_request()["network"] == str(kit.card), timeout=20000)
    assert (tmp_path / hf.SENTINEL).read_text() == hf.UNTOUCHED
    assert not win.params.current_request()["allow_pickle"]


def test_torchscript_loads_after_consent_without_running_its_forward(
        qtbot, window, kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    net = hf.evil_torchscript(tmp_path)
    monkeypatch.setattr(QtWidgets.QMessageBox, "question",
                        lambda *a, **k: QtWidgets.QMessageBox.StandardButton.Yes)
    win = window(kit.base_request(max_iter=10))
    win.network_panel.set_values({"input_shape": (1, 28, 28)})
    win.files.open_network(str(net))
    qtbot.waitUntil(lambda: win.view.info is not None
                    and win.view.info.request["network"] == str(net),
                    timeout=60000)
    assert win.view.info.request["allow_pickle"] is True
    text = (tmp_path / hf.SENTINEL).read_text()
    assert text.startswith(hf.LOAD_MARK) and hf.FORWARD_MARK not in text


def test_memory_hostile_network_gives_a_dialog_not_an_endless_prepare(qtbot, window, dialogs,
                                                                      kit, tmp_path: Path) -> None:
    """A card whose padding needs hundreds of GiB: refused from its estimate, with a dialog;
    the window goes back to the network that worked."""
    net = hf.card(tmp_path, "pad", hf.conv(padding=30000))
    win = window(kit.base_request(max_iter=10))
    win.files.open_network(str(net))
    qtbot.waitUntil(lambda: any(d["kind"] == "error" for d in dialogs), timeout=60000)
    text = next(d for d in dialogs if d["kind"] == "error")["text"]
    assert "pad.json" in text and "memory" in text and "limit" in text, text
    qtbot.waitUntil(lambda: win.controller.state == "idle", timeout=20000)
    assert win.params.current_request()["network"] == str(kit.card)
