"""Odd inputs through the window: a session with mistyped request values is refused, measured
data clipped to the activation's range is said to be, and a network file whose name is not
UTF-8 opens."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.reliability.conftest import wait_idle
from tests.reliability.test_format_versions import _good_meta, _session_bytes


@pytest.mark.parametrize("change", [{"alpha": "abc"}, {"index": "x"}, {"noise_std": None}],
                         ids=["alpha-text", "index-text", "noise-null"])
def test_session_with_mistyped_request_values_is_refused(qtbot, window, dialogs, kit,
                                                         tmp_path: Path, change) -> None:
    from lbi_gui.params import default_request

    win = window(kit.base_request(max_iter=10))
    before = win.params.current_request()
    bad = tmp_path / "typo.lbisession"
    request = {**default_request(), **kit.base_request(), **change}
    bad.write_bytes(_session_bytes(_good_meta(request=request)))
    assert not win.files.open_session(str(bad))
    assert dialogs and "typo.lbisession" in dialogs[-1]["text"]
    assert win.params.current_request() == before


def test_window_tells_that_negative_measured_data_was_clipped(qtbot, window, dialogs, kit,
                                                              tmp_path: Path) -> None:
    win = window(kit.base_request(max_iter=10))
    y = tmp_path / "y_negative.npy"
    np.save(y, np.linspace(-1, 1, 32, dtype=np.float32))
    win.files.open_data_file("data", str(y))
    wait_idle(qtbot, win)
    qtbot.waitUntil(lambda: win.view.info is not None and bool(win.view.info.request.get("data")),
                    timeout=30000)
    shown = " ".join([win.statusBar().currentMessage(), win.data_panel.preprocessing.text(),
                      *(d["text"] for d in dialogs)])
    assert "clipped" in shown.lower(), shown


def test_window_opens_a_network_whose_file_name_is_not_utf8(qtbot, window, dialogs, kit,
                                                            tmp_path: Path) -> None:
    import os

    win = window(kit.base_request(max_iter=10))
    path = os.fsdecode(os.fsencode(str(tmp_path)) + b"/r\xe9seau.onnx")
    Path(path).write_bytes(kit.onnx.read_bytes())
    win.network_panel.set_values({"input_shape": (1, 28, 28)})
    win.files.open_network(path)
    qtbot.waitUntil(lambda: bool(dialogs) or (win.view.info is not None and
                                             win.view.info.request["network"] == path),
                    timeout=30000)
    assert not dialogs, dialogs
