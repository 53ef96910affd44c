"""A session comes back as the user saw it: the iterate's header (k and dB), the colour map,
the whole image in view (not a zoom), the shown run's reason; the window title is not
"lbi — … — lbi"."""

from __future__ import annotations

from tests.gui.conftest import wait_idle, wait_ready


def test_a_session_restores_header_colour_map_fit_and_reason(qtbot, fake_engine, make_window,
                                                              tmp_path) -> None:
    fake_engine()
    win = make_window({"network": "fake-net", "max_iter": 20, "alpha": 0.01})
    win.runner.run()
    wait_idle(qtbot, win)
    qtbot.waitUntil(lambda: len(win.run_table.runs) == 1)
    win.image_grid.tools.set_lut("viridis")
    path = tmp_path / "s.lbis"
    assert win.files.save_session_to(str(path))
    assert win.windowTitle() == "s.lbis"  # Qt adds " — lbi" (the display name) itself
    again = make_window({"network": "fake-net"})
    again.image_grid.plots["iterate"].vb.scaleBy((4.0, 4.0))  # zoomed out before opening
    assert again.files.open_session(str(path))
    wait_ready(qtbot, again)
    qtbot.wait(50)
    grid = again.image_grid
    title = grid.plots["iterate"].titleLabel.text  # short or long form, by the width
    assert "x (k = 20)<br>" in title and title.endswith(" dB")
    assert grid.tools.lut.currentData() == "viridis"
    assert again.status.reason.text().startswith("run #1: max_iterations")
    (x0, x1), _y = grid.plots["truth"].vb.viewRange()
    assert x1 - x0 <= 16 * 1.05  # the 16-pixel image fills the view again
