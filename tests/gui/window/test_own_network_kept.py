"""A user's own network is never replaced by a zoo network when bundled data does not fit it:
the data change is refused with a dialog, and the dataset, split, index and thumbnails shown
agree with what is kept."""

from __future__ import annotations

import json

import torch
from torch import nn

from lbi_gui.dialogs import messages
from tests.gui.conftest import wait_ready


def _own_network(tmp_path) -> str:
    """A 64×64-input ReLU perceptron as weights + card (opening it runs no code)."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(64 * 64, 16), nn.ReLU())
    path = tmp_path / "mine.pt"
    torch.save(net.state_dict(), path)
    layers = [{"type": "Flatten"}, {"type": "Linear", "in_features": 4096, "out_features": 16},
              {"type": "ReLU"}]
    (tmp_path / "mine.json").write_text(json.dumps(
        {"name": "mine", "format_version": 1, "input_shape": [1, 64, 64],
         "architecture": {"layers": layers, "encoder_layers": 3}}), encoding="utf-8")
    return str(path)


def _choose(combo, data) -> None:
    combo.setCurrentIndex(combo.findData(data))
    combo.activated.emit(combo.currentIndex())


def test_refused_dataset_keeps_the_users_network(qtbot, make_window, tmp_path) -> None:
    win = make_window({"network": "circle-perceptron", "dataset": "cartoon", "split": "squares",
                       "index": 3, "max_iter": 5})
    path = _own_network(tmp_path)
    win.files.open_network(path)
    qtbot.waitUntil(lambda: win.view.info.request.get("network") == path, timeout=60000)
    wait_ready(qtbot, win)
    panel = win.data_panel
    splits_before = [panel.split.itemData(i) for i in range(panel.split.count())]
    errors = len(messages.OPEN_ERRORS)
    _choose(panel.dataset, "mnist")  # 28×28 digits into a 64×64 network
    win.params.flush_changes()
    qtbot.waitUntil(lambda: len(messages.OPEN_ERRORS) > errors, timeout=10000)
    box = messages.OPEN_ERRORS[-1]
    assert "do not fit" in box.text() and "64×64" in box.informativeText(), box.informativeText()
    box.close()
    req = win.params.current_request()
    assert req["network"] == path  # was replaced by circle-perceptron's zoo sibling
    assert win.network_panel.values()["network"] == path
    assert (req["dataset"], req["split"], req["index"]) == ("cartoon", "squares", 3)
    assert [panel.split.itemData(i) for i in range(panel.split.count())] == splits_before
    indices = [int(panel.thumbs.item(r).text()) for r in range(panel.thumbs.count())]
    assert 3 in indices  # the thumbnails are the kept split's page
    selected = [it.text() for it in panel.thumbs.selectedItems()]
    assert selected == ["3"]
    wait_ready(qtbot, win)
    assert win.view.info.request["network"] == path
