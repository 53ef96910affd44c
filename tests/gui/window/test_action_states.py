"""Which actions are enabled, driven by the view state alone (no window, no engine): the
actions' states are a rendering of the controller's state and of ``ViewState``, redrawn on
each of its events."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from PySide6 import QtWidgets

from lbi_gui.model import ViewState
from lbi_gui.window.actions import ActionStates, build_actions


def _states(host: QtWidgets.QMainWindow
            ) -> tuple[ActionStates, Any, ViewState[Any], QtWidgets.QLabel]:
    slots = {name: (lambda: None) for name in (
        "run", "pause", "stop", "finish", "reset", "switch", "run_all", "open_network",
        "import_network", "fit_prior", "open_image", "open_data", "open_session",
        "save_session", "save_session_as", "export", "quit", "about", "guide",
        "reset_layout", "fit_view")}
    actions = build_actions(host, slots, QtWidgets.QMenu(host), [])
    # the controller and the runs table as far as the actions read them
    controller = SimpleNamespace(engine_info=None, running=False, paused=False,
                                 state="booting", queue_active=False)
    view: ViewState[Any] = ViewState()
    label, switch = QtWidgets.QLabel(), QtWidgets.QPushButton()
    states = ActionStates(actions, controller, view, switch,  # type: ignore[arg-type]
                          SimpleNamespace(runs=[]), label)  # type: ignore[arg-type]
    return states, controller, view, label


def test_each_view_event_redraws_the_actions(qtbot: Any) -> None:
    host = QtWidgets.QMainWindow()  # the actions' owner (their shortcuts' scope)
    qtbot.addWidget(host)
    states, controller, view, label = _states(host)
    a = states.actions
    states.update()
    assert label.text() == "Starting engine…"
    assert a.run.isEnabled() and not a.run_all.isEnabled() and not a.export.isEnabled()
    view.autorun = True  # Run pressed while the engine starts: said, without an update call
    assert label.text() == "Starting engine… (the run begins by itself)"
    view.shown_result = SimpleNamespace(run_id=1)  # a run on screen can be exported
    assert a.export.isEnabled()
    view.boot_failed = True
    assert not a.run.isEnabled()


def test_run_all_progress_and_a_prepared_problem(qtbot: Any) -> None:
    host = QtWidgets.QMainWindow()  # the actions' owner (their shortcuts' scope)
    qtbot.addWidget(host)
    states, controller, view, label = _states(host)
    a = states.actions
    controller.engine_info, controller.state = {}, "idle"
    view.info = SimpleNamespace(request={})
    assert a.run_all.isEnabled() and label.text() == "Ready"
    controller.state, controller.running, controller.queue_active = "running", True, True
    view.queue_text = "Run all 1/3: Joint"
    assert label.text() == "Running — Run all 1/3: Joint"
    assert a.pause.isEnabled() and a.stop.isEnabled() and not a.run_all.isEnabled()
    controller.paused = True
    states.update()  # the controller's own changes arrive through its signals
    assert a.pause.text() == "Resume"
