"""File → Fit a feature prior…: the prior layer-wise inversion needs, fitted in the
background from a folder of the user's images and chosen for the network on screen; bad
input is said in the dialog in one line and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn

from lbi_gui.dialogs.fit_prior import open_fit_prior_dialog


def _own_network(folder: Path) -> str:
    """A two-layer colour ReLU network on 3×8×8 inputs, as weights + card (runs no code)."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(192, 12), nn.ReLU(), nn.Linear(12, 6),
                        nn.ReLU())
    path = folder / "two.pt"
    torch.save(net.state_dict(), path)
    layers = [{"type": "Flatten"}, {"type": "Linear", "in_features": 192, "out_features": 12},
              {"type": "ReLU"}, {"type": "Linear", "in_features": 12, "out_features": 6},
              {"type": "ReLU"}]
    (folder / "two.json").write_text(json.dumps(
        {"name": "two", "format_version": 1, "input_shape": [3, 8, 8],
         "architecture": {"layers": layers, "encoder_layers": 5}}), encoding="utf-8")
    return str(path)


def _photos(folder: Path, count: int) -> Path:
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(count):
        Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8), "RGB").save(
            folder / f"p{i:02d}.png")
    return folder


def test_a_prior_is_fitted_in_the_background_and_chosen(qtbot, make_window, tmp_path):
    own = _own_network(tmp_path)
    photos = _photos(tmp_path / "photos", 24)
    win = make_window({"network": own, "image": str(photos / "p00.png"), "resize": True,
                       "max_iter": 3})
    dialog = open_fit_prior_dialog(win)
    assert dialog.out.text() == str(tmp_path / "two.prior")  # beside the network
    dialog.samples.setText(str(photos))
    with qtbot.waitSignal(dialog.fitted, timeout=120000) as blocker:
        dialog.start()
        assert dialog.running and not dialog.fit_button.isEnabled()  # the GUI thread is free
        assert dialog.busy.isVisible()
    card = Path(blocker.args[0])
    assert card == tmp_path / "two.prior.json" and (tmp_path / "two.prior.safetensors").exists()
    written = json.loads(card.read_text())
    assert written["network"] == "two" and "24 samples" in written["samples_source"]
    assert len(written["layers"]) == 1  # one hidden feature, x_1 (12 values)
    qtbot.waitUntil(lambda: win.params.current_request().get("feature_prior") is not None,
                    timeout=10000)
    assert win.params.current_request()["feature_prior"] == str(tmp_path / "two.prior")


def test_bad_samples_are_said_in_the_dialog_and_nothing_is_written(qtbot, make_window,
                                                                    tmp_path):
    own = _own_network(tmp_path)
    photos = _photos(tmp_path / "photos", 2)
    win = make_window({"network": own, "image": str(photos / "p00.png"), "resize": True,
                       "max_iter": 3})
    dialog = open_fit_prior_dialog(win)
    dialog.start()  # no samples for an own network
    assert "Choose a folder of clean images" in dialog.status.text() and not dialog.running
    empty = tmp_path / "empty"
    empty.mkdir()
    dialog.samples.setText(str(empty))
    dialog.start()
    qtbot.waitUntil(lambda: not dialog.running and "holds no images" in dialog.status.text(),
                    timeout=60000)
    assert dialog.fit_button.isEnabled() and dialog.isVisible()
    assert "\n" not in dialog.status.text()
    assert not list(tmp_path.glob("two.prior*"))
    assert win.params.current_request().get("feature_prior") is None
