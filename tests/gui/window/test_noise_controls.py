"""The noise controls are off whenever y is measured (a file given
at start-up or in a restored request, not only when chosen in the data panel): noise is
added to a network's output only, and measured data already has its own."""

from __future__ import annotations

import numpy as np

from lbi_gui.app import build_parser, request_from_args


def test_noise_controls_are_off_when_the_window_starts_with_measured_y(qtbot, fake_engine,
                                                                       make_window,
                                                                       tmp_path) -> None:
    fake_engine()
    y = tmp_path / "y.npy"
    np.save(y, np.zeros(8, dtype=np.float32))
    request = request_from_args(build_parser().parse_args(["--network", "fake-net",
                                                           "--data", str(y)]))
    win = make_window(request)
    panel = win.noise_panel
    assert not panel.std.isEnabled() and not panel.seed.isEnabled()
    assert not panel.resample.isEnabled()
    win.data_panel.use_dataset.click()  # back to a dataset sample: noise applies again
    assert panel.std.isEnabled() and panel.seed.isEnabled()


def test_noise_controls_disabled_for_measured_y(qtbot, fake_engine, make_window,
                                                tmp_path) -> None:
    fake_engine()
    win = make_window({"network": "fake-net"})
    assert win.noise_panel.std.isEnabled() and win.noise_panel.seed.isEnabled()
    y = tmp_path / "y.npy"
    np.save(y, np.zeros(8, dtype=np.float32))
    win.data_panel.set_file("data", str(y))
    assert not win.noise_panel.std.isEnabled() and not win.noise_panel.seed.isEnabled()
    assert not win.noise_panel.resample.isEnabled()
    win.data_panel.use_dataset.click()
    assert win.noise_panel.std.isEnabled()
