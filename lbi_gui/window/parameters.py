"""The window's parameters: the model's selection is the request, the panels show it.

Why a collaborator: the request lives in :class:`~lbi_gui.model.Selection` (napari's evented
model, in small). A user's edit in a panel is written to the selection at once; any change
of the selection (a session opened, a run's parameters loaded, a method the network cannot
use replaced) is an event the panels re-render from. Edits reach the solver after a debounce
(slider drags), as one change from the request before the first of them.
"""

from __future__ import annotations

from typing import Any

from PySide6 import QtCore, QtWidgets

from lbi_gui.model.events import Events
from lbi_gui.model.selection import Selection
from lbi_gui.params import DEFAULT_REQUEST, describe_change
from lbi_gui.window.controller import RunController
from lbi_gui.window.data import DataInputs
from lbi_gui.window.parts import Panels

#: Milliseconds a parameter must stay unchanged before it restarts a run (slider drags).
CHANGE_DEBOUNCE_MS = 150


class Parameters:
    """Keeps the panels and the model's selection in agreement; applies edits to runs."""

    def __init__(self, selection: Selection, panels: Panels, inputs: DataInputs,
                 controller: RunController, status_bar: QtWidgets.QStatusBar) -> None:
        self.selection = selection
        self.panels = panels
        self.inputs = inputs
        self.controller = controller
        self.status_bar = status_bar
        #: ``applied()``: edits reached the solver (the result on screen may be stale now).
        self.events = Events("applied")
        #: The request before the edits not applied yet (None: nothing pending).
        self.pending_old: dict[str, Any] | None = None
        self._timer = QtCore.QTimer(status_bar, singleShot=True, interval=CHANGE_DEBOUNCE_MS)
        self._timer.timeout.connect(self.apply_change)
        # The panels show the model in full once; from then on they follow its events (a
        # partial re-render assumes they showed the model already).
        self._show(self.selection.request)
        self.selection.events.changed.connect(self._selection_changed)
        for panel in panels:
            panel.changed.connect(self.panel_changed)

    def current_request(self) -> dict[str, Any]:
        """The request on screen (InversionRequest fields): the model's selection, which the
        panels write to as they are edited."""
        return dict(self.selection.request)

    def sync_request(self) -> None:
        """The selection takes what the panels show now: after a user's edit, and after a
        panel normalised what it was given (a value it rounds, a file it cannot hold)."""
        request = dict(self.selection.request)
        for panel in self.panels:
            request.update(panel.values())
        self.selection.replace(request)

    def _show(self, request: dict[str, Any], keys: set[str] | None = None) -> None:
        """Each panel shows the fields of ``request`` it owns that it does not show yet (all
        of them, or those in ``keys``); then the selection takes what they show."""
        for panel in self.panels:
            shown = panel.values()
            changes = {k: request.get(k) for k in shown if (keys is None or k in keys)
                       and shown[k] != request.get(k) and k in request}
            if changes:
                panel.set_values(changes)
        self.panels.reg.set_method(self.panels.solver.values()["method"])
        self.panels.solver.set_network(str(self.selection.request.get("network") or ""))
        self.panels.noise.set_measured(bool(request.get("data")))
        self.sync_request()

    def _selection_changed(self, _old: dict[str, Any], new: dict[str, Any],
                           keys: set[str]) -> None:
        self._show(new, keys)  # the model is the source: the panels follow it

    def set_request(self, request: dict[str, Any]) -> None:
        """Put ``request`` on screen without triggering runs: its fields replace the
        selection's (fields without a widget, e.g. time_budget, are kept there too)."""
        self.selection.update({k: v for k, v in request.items() if k in DEFAULT_REQUEST})
        self._show(self.selection.request)

    def panel_changed(self, key: str) -> None:
        """A user edit in a panel: the selection follows now, the run after the debounce."""
        selection = self.selection
        if self.pending_old is None:
            self.pending_old = dict(selection.request)
        self.sync_request()
        if key in ("network", "dataset"):
            self.inputs.match_network_and_data(key, self.pending_old)
            self.sync_request()
        if key in ("network", "input_shape"):
            # consent is for one file only; a feature prior is fitted for one network only
            selection.update({"allow_pickle": False, "feature_prior": None})
        self._timer.start()

    def apply_change(self) -> None:
        """Apply the edits made since the last one: a warm restart, a new problem, or
        nothing (what changed decides; the run controller knows which)."""
        old, self.pending_old = self.pending_old, None
        if old is None:
            return
        new = self.current_request()
        if self.controller.engine_info is None:
            self.inputs.preview_truth()  # the booted handler prepares what is on screen then
            return
        outcome = self.controller.change(old, new)
        self.events.applied.emit()
        if outcome == "restart":
            self.status_bar.showMessage(f"Warm restart: {describe_change(old, new)}", 4000)
        elif outcome == "stopped":
            self.status_bar.showMessage("Network or data changed: run stopped", 4000)

    def apply_request(self, request: dict[str, Any]) -> None:
        """Show ``request`` and apply it at once, as an edit of what was on screen."""
        old = dict(self.selection.request)
        self.set_request(request)
        self.pending_old = old
        self.apply_change()

    def flush_changes(self) -> None:
        """Apply pending (debounced) parameter edits now."""
        if self._timer.isActive():
            self._timer.stop()
            self.apply_change()

    def stop(self) -> None:
        """No pending edit is applied any more (the window closes)."""
        self._timer.stop()
