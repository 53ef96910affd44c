"""The curves' run list: a checkbox and colour per finished run, exactly the checked runs
drawn (and named), overlays gone when the problem changes, stage labels thinned instead of
piled up, and a plot export showing the exported run's own curves."""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore

from lbi_gui.model.runs import CurveStore
from lbi_gui.widgets.curve_overlay import OVERLAY_COLOURS
from lbi_gui.widgets.curves import CurvesPanel
from tests.gui.conftest import wait_ready


def _rows(run_list) -> list[tuple[str, bool]]:
    return [(run_list.item(i).text(),
             run_list.item(i).checkState() == QtCore.Qt.CheckState.Checked)
            for i in range(1, run_list.count())]


def test_checked_runs_are_exactly_the_runs_drawn_in_their_colours(qtbot, two_runs) -> None:
    win = two_runs
    listed, overlay = win.curves.run_list, win.curves.overlay
    first, second = win.run_table.runs
    assert _rows(listed) == [(first.label, False), (second.label, False)]
    assert overlay.runs == []
    listed.item(1).setCheckState(QtCore.Qt.CheckState.Checked)  # the user ticks run #1
    assert [r.run_id for r in overlay.runs] == [first.run_id]
    colour = listed.item(1).icon().pixmap(14, 8).toImage().pixelColor(7, 4).name()
    assert colour == OVERLAY_COLOURS[0] == overlay.colour_of(first.run_id)
    assert listed.item(2).icon().pixmap(14, 8).toImage().pixelColor(7, 4).alpha() == 0
    assert [label for _s, label in [(s, lab.text) for s, lab in overlay.legend.items]] == [
        first.label]
    win.run_table.select_ids([first.run_id, second.run_id])  # two selected: both drawn
    assert [r.run_id for r in overlay.runs] == [first.run_id, second.run_id]
    assert _rows(listed) == [(first.label, True), (second.label, True)]
    # another sample: a new problem
    win.params.apply_request({**win.params.current_request(), "index": 5})
    qtbot.waitUntil(lambda: win.view.info.request["index"] == 5, timeout=10000)
    wait_ready(qtbot, win)
    assert overlay.runs == [] and not any(on for _t, on in _rows(listed))


def test_stage_labels_are_thinned_never_piled_up(qtbot) -> None:
    panel = CurvesPanel()
    qtbot.addWidget(panel)
    panel.resize(500, 500)
    panel.show()
    store = CurveStore()
    names = [f"layer {9 - i}/9 (sweep)" for i in range(9)]
    store.extend([{"iteration": k, "elapsed": k * 0.01, "stage": names[min(8, k // 3)]}
                  for k in range(400)])  # nine stages in the first 27 of 400 iterations
    panel.set_run(store)
    qtbot.wait(50)
    plot = panel.plots["objective"]
    shown = [line.label for owner, line in panel.stage_lines
             if owner is plot and line.label is not None and line.label.isVisible()]
    boxes = [label.mapRectToScene(label.boundingRect()) for label in shown]
    assert 1 <= len(shown) < 9
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].intersects(boxes[j]), (i, j)
    hidden = [line for owner, line in panel.stage_lines
              if owner is plot and line.label is not None and not line.label.isVisible()]
    assert hidden and all("layer" in line.toolTip() for line in hidden)


def test_a_plot_export_shows_the_exported_runs_curves(qtbot, two_runs, tmp_path) -> None:
    win = two_runs
    first, second = win.run_table.runs
    assert win.curves.store is not first.curves  # the panel shows the last run
    written = win.exports.export_result(first, {"plots_png": tmp_path / "curves.png"})
    assert written == [tmp_path / "curves.png"] and win.curves.store is first.curves
    x, _y = win.curves.lines["objective"].getData()
    assert np.array_equal(x, first.curves.arrays()["iteration"])
