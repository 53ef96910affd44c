"""A tiny photo (3×3) opened for a 28×28 network is refused with one dialog naming its size
and the minimum, instead of becoming a blurred truth; the sample before stays."""

from __future__ import annotations

import numpy as np
from PIL import Image

from lbi_gui.dialogs import messages


def test_a_three_pixel_image_is_refused_in_one_dialog(qtbot, make_window, tmp_path) -> None:
    win = make_window({"network": "mnist-perceptron-ae", "dataset": "mnist", "max_iter": 3})
    tiny = tmp_path / "tiny.png"
    Image.fromarray(np.full((3, 3, 3), 200, dtype=np.uint8), "RGB").save(tiny)
    errors = len(messages.OPEN_ERRORS)
    win.files.open_data_file("image", str(tiny))
    qtbot.waitUntil(lambda: len(messages.OPEN_ERRORS) > errors, timeout=60000)
    assert len(messages.OPEN_ERRORS) == errors + 1
    box = messages.OPEN_ERRORS[-1]
    text = box.informativeText()
    assert "tiny.png" in text and "3 x 3 pixels" in text and "at least 8 pixels" in text
    box.close()
    qtbot.waitUntil(lambda: win.controller.state == "idle", timeout=60000)
    assert win.params.current_request()["image"] is None
    assert win.view.info.request["dataset"] == "mnist"
