"""The window's view state (lbi_gui.model.view_state) without a window: one event per
field, emitted on a real change only, with the new value."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np

from lbi_gui.model import ViewState
from lbi_gui.model.view_state import EventedModel


def _record(state: ViewState[Any]) -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []
    for event in state.events:
        event.connect(lambda value, name=event.name: seen.append((name, value)))
    return seen


def test_every_field_has_its_own_event_and_only_its_own_fires() -> None:
    state: ViewState[Any] = ViewState()
    names = [f.name for f in fields(state)]
    assert [e.name for e in state.events] == names
    assert {"info", "good_request", "shown_result", "autorun", "restoring"} <= set(names)
    seen = _record(state)
    state.autorun = True
    state.queue_text = "Run all 1/3: joint"
    assert seen == [("autorun", True), ("queue_text", "Run all 1/3: joint")]


def test_an_assignment_that_changes_nothing_is_not_announced() -> None:
    state: ViewState[Any] = ViewState(good_request={"alpha": 0.1})
    seen = _record(state)
    state.autorun = False  # the default
    state.good_request = {"alpha": 0.1}  # an equal dict
    assert seen == []
    state.good_request = {"alpha": 0.2}
    assert seen == [("good_request", {"alpha": 0.2})]
    assert state.good_request == {"alpha": 0.2}


def test_values_holding_arrays_are_compared_by_identity() -> None:
    """A prepared problem holds arrays (``==`` has no truth value): the same object is no
    change, an equal-looking new one is."""

    class Info:
        def __init__(self) -> None:
            self.truth = np.zeros(3)

        def __eq__(self, other: object) -> bool:
            return bool(isinstance(other, Info) and self.truth == other.truth)  # raises

    state: ViewState[Info] = ViewState()
    seen = _record(state)
    first = Info()
    state.info = first
    state.info = first
    state.info = Info()
    assert [name for name, _ in seen] == ["info", "info"]
    assert seen[0][1] is first


def test_construction_announces_nothing_and_subscribers_may_leave() -> None:
    calls: list[bool] = []
    state: ViewState[Any] = ViewState(autorun=True, boot_failed=True)
    assert state.autorun and state.boot_failed and state.info is None

    def once(value: bool) -> None:
        calls.append(value)
        state.events.restoring.disconnect(once)

    state.events.restoring.connect(once)
    state.restoring = True
    state.restoring = False
    assert calls == [True]
    assert isinstance(state, EventedModel)
