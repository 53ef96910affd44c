"""The model's selection is the window's request: panels write to it as they are edited and
re-render from its events; ``current_request`` reads the model, never the widgets."""

from __future__ import annotations

from PySide6 import QtCore


def test_a_model_change_is_shown_by_the_panels(qtbot, fake_engine, make_window) -> None:
    fake_engine()
    win = make_window({"network": "fake-net", "max_iter": 10})
    win.model.selection.update({"noise_std": 0.2, "seed": 7, "method": "layerwise"})
    assert win.noise_panel.std.value() == 0.2 and win.noise_panel.seed.value() == 7
    assert win.solver_panel.method.currentData() == "layerwise"
    # what depends on the method follows too: per-layer α is offered to layer-wise only
    assert win.reg_panel.per_layer.isEnabled()
    win.model.selection.update({"method": "joint"})
    assert not win.reg_panel.per_layer.isEnabled()
    request = win.params.current_request()
    assert request["seed"] == 7 and request["method"] == "joint"


def test_an_edit_reaches_the_model_at_once_and_the_widgets_are_not_read(
        qtbot, fake_engine, make_window) -> None:
    fake_engine()
    win = make_window({"network": "fake-net", "max_iter": 10})
    events: list[set[str]] = []
    win.model.selection.events.changed.connect(lambda _old, _new, keys: events.append(keys))
    win.noise_panel.seed.setValue(9)  # as a user's edit: the panel emits changed("seed")
    assert win.model.selection.request["seed"] == 9  # before the debounce has run
    assert events == [{"seed"}]
    # a widget changed behind the model's back is not the request: the model is
    with QtCore.QSignalBlocker(win.noise_panel.seed):
        win.noise_panel.seed.setValue(11)
    assert win.params.current_request()["seed"] == 9


def test_what_a_panel_normalises_flows_back_into_the_model(qtbot, fake_engine,
                                                           make_window) -> None:
    fake_engine()
    win = make_window({"network": "fake-net", "max_iter": 10})
    # a session's JSON gives a list; the panel holds a shape, and the model takes its tuple
    win.model.selection.update({"input_shape": [1, 8, 8]})
    assert win.network_panel.shape_edit.text() == "1,8,8"
    assert win.params.current_request()["input_shape"] == (1, 8, 8)
    # a field without a widget stays in the model through panel edits
    win.params.set_request({"time_budget": 12.5})
    win.noise_panel.seed.setValue(3)
    assert win.params.current_request()["time_budget"] == 12.5
