"""Controls: every regulariser the CLI knows, α from 0 over a wide range, a refused typed
number flagged (red + message) instead of silently reverted, Export says why it is off, and
the stale banner reads like a person wrote it."""

from __future__ import annotations

import pytest
from PySide6 import QtCore

from lbi_engine.cli._common import REGULARISER_NAMES
from lbi_engine.request import InversionRequest
from lbi_gui.params import REGULARISERS, describe_change
from lbi_gui.widgets.number_inputs import INVALID_STYLE
from lbi_gui.widgets.regularisation_panel import RegularisationPanel


def test_every_cli_regulariser_and_its_constraints_are_offered(qtbot) -> None:
    names = [name for name, _label in REGULARISERS]
    assert set(REGULARISER_NAMES) <= set(names)
    assert {"tv+box", "tv+nonneg", "tikhonov+box", "l1+nonneg", "gaussian+tv",
            "gaussian+tv+box"} <= set(names)
    assert len(names) == len(set(names))
    for name in names:  # each one is a request the engine accepts
        InversionRequest(regulariser=name).validate(check_device=False)
    panel = RegularisationPanel()
    qtbot.addWidget(panel)
    panel.regulariser.setCurrentIndex(panel.regulariser.findData("tv+box"))
    assert panel.values()["regulariser"] == "tv+box"
    panel.set_values({"regulariser": "tv_iso"})  # a spelling the engine accepts, kept
    assert panel.values()["regulariser"] == "tv_iso"


def _type(qtbot, box, text: str) -> None:
    box.lineEdit().selectAll()
    qtbot.keyClicks(box.lineEdit(), text)
    qtbot.keyClick(box.lineEdit(), QtCore.Qt.Key.Key_Return)


def test_alpha_takes_zero_and_a_wide_range(qtbot) -> None:
    panel = RegularisationPanel()
    qtbot.addWidget(panel)
    panel.show()
    spin = panel.alpha.spin
    for text, value in (("0", 0.0), ("5e-9", 5e-9), ("2500", 2500.0)):
        _type(qtbot, spin, text)
        assert panel.values()["alpha"] == pytest.approx(value)
        assert not panel.auto_alpha.isChecked()
        assert spin.invalid_message is None and spin.styleSheet() == ""


def test_a_refused_typed_number_is_flagged_not_silently_reverted(qtbot) -> None:
    panel = RegularisationPanel()
    qtbot.addWidget(panel)
    panel.show()
    spin = panel.alpha.spin
    _type(qtbot, spin, "0.02")
    messages: list[str] = []
    spin.rejected.connect(messages.append)
    _type(qtbot, spin, "5e7")  # above the largest alpha (1e6)
    assert panel.values()["alpha"] == pytest.approx(0.02)  # unchanged ...
    assert spin.styleSheet() == INVALID_STYLE  # ... but said so: red
    assert messages and "5e7" in messages[-1] and "range" in messages[-1]
    assert "5e7" in spin.toolTip()
    _type(qtbot, spin, "0.03")  # a valid value clears the mark
    assert spin.styleSheet() == "" and spin.invalid_message is None
    assert "5e7" not in spin.toolTip()


def test_the_window_shows_the_refusal_and_why_export_is_off(qtbot, fake_engine,
                                                            make_window) -> None:
    fake_engine()
    win = make_window({"network": "fake-net", "max_iter": 10})
    export = win.actions_.export
    assert not export.isEnabled() and "finish a run" in export.toolTip()
    spin = win.solver_panel.tol
    _type(qtbot, spin, "7")  # a tolerance is at most 1
    assert "Not accepted" in win.statusBar().currentMessage()
    assert "7" in win.statusBar().currentMessage()
    win.runner.run()
    qtbot.waitUntil(lambda: bool(win.run_table.runs), timeout=20000)
    assert export.isEnabled() and "Export a finished run" in export.toolTip()


def test_changes_read_like_a_person_wrote_them() -> None:
    old = {"alpha": 0.010700778208423, "noise_std": None, "resize": False,
           "network": "/home/me/nets/mine.onnx", "layer_alphas": None}
    new = {"alpha": 0.02, "noise_std": 0.05, "resize": True, "network": "mnist-cnn-ae",
           "layer_alphas": [0.001, 0.0025]}
    text = describe_change(old, new)
    assert "α 0.0107→0.02" in text and "noise none→0.05" in text
    assert "resize off→on" in text and "network mine.onnx→mnist-cnn-ae" in text
    assert "α per layer none→[0.001, 0.0025]" in text
    assert "None" not in text and "False" not in text and "True" not in text


def test_colour_maps_and_typed_contrast_limits(qtbot, image_grid) -> None:
    import numpy as np

    from lbi_gui.widgets.image_tools import INVALID_EDIT, LUTS

    grid = image_grid
    tools = grid.tools
    assert len(LUTS) >= 8 and tools.lut.count() == len(LUTS)
    grid.set_truth(np.linspace(0, 1, 64).reshape(8, 8))
    tools.set_lut("CET-L1-r")  # grey inverted: the lowest level is white
    table = grid.items["truth"].lut
    assert tuple(table[0][:3]) > tuple(table[-1][:3])
    tools.low.setText("0.2")
    tools.high.setText("0.6")
    assert tools.apply_typed_levels()
    assert grid.levels() == pytest.approx((0.2, 0.6))
    assert grid.items["truth"].levels == pytest.approx([0.2, 0.6])
    tools.low.setText("0.9")  # above the highest: refused, said, levels kept
    assert not tools.apply_typed_levels()
    assert tools.low.styleSheet() == INVALID_EDIT and "below" in tools.low.toolTip()
    assert grid.levels() == pytest.approx((0.2, 0.6))
    grid.set_levels((0.1, 0.7))  # a drag of the bar (or Auto) shows in the fields
    assert (tools.low.text(), tools.high.text()) == ("0.1", "0.7")
    assert tools.low.styleSheet() == ""


def test_the_auxiliary_variable_under_the_mouse_reads_out(qtbot, fake_engine,
                                                          make_window) -> None:
    import numpy as np

    fake_engine()
    win = make_window({"network": "fake-net", "max_iter": 10})
    tiles = np.arange(8, dtype=np.float32).reshape(2, 4) / 10
    win.aux_strip.set_aux([tiles])
    win.aux_strip.resize(400, 200)
    qtbot.wait(50)
    plot = win.aux_strip.plots[0]
    win.aux_strip._hover(plot.vb.mapViewToScene(QtCore.QPointF(2.5, 1.5)))  # col 2, row 1
    assert win.image_grid.readout.text() == f"x_1  row 1, col 2: {tiles[1, 2]:.4g}"
    win.aux_strip._hover(QtCore.QPointF(-99, -99))
    assert win.image_grid.readout.text().strip() == ""
