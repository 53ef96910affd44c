"""Qt signals for the Qt-free models of :mod:`lbi_gui.model` (the window layer's adapter).

Why: widgets connect to signals (``blockSignals``, queued delivery, pytest-qt's
``waitSignal``), while the models stay testable without Qt and announce changes through
plain callbacks. Each bridge is a GUI-thread QObject that re-emits its model's events (the
same thread, so at once); it keeps no state of its own, and a bridge whose QObject is gone
unsubscribes itself instead of raising in the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6 import QtCore

from lbi_gui.model import RunList
from lbi_gui.model.events import EventEmitter


class _Bridge(QtCore.QObject):
    def _forward(self, event: EventEmitter, signal: str) -> None:
        def forward(*args: Any) -> None:
            try:
                getattr(self, signal).emit(*args)
            except RuntimeError:  # the C++ object was deleted: stop listening
                event.disconnect(forward)

        self._forwards.append(forward)
        event.connect(forward)

    def __init__(self, parent: QtCore.QObject | None) -> None:
        super().__init__(parent)
        self._forwards: list[Callable[..., None]] = []


class RunListSignals(_Bridge):
    """:class:`~lbi_gui.model.RunList` events as signals of the same names."""

    added = QtCore.Signal(object)  # RunResult
    removed = QtCore.Signal(object)  # list[RunResult]
    reset = QtCore.Signal(object)  # list[RunResult]: everything replaced
    note_changed = QtCore.Signal(object)  # RunResult

    def __init__(self, runs: RunList, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.model = runs
        for event in runs.events:
            self._forward(event, event.name)

