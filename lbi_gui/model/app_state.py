"""The window's whole application state in one Qt-free object.

:class:`AppModel` is what a session file saves and restores (the selection, the runs, which
of them are saved) without any widget: the window writes its widget-only settings (levels,
the α slider's range) beside it in ``SessionState.gui`` and the controller adds the curves
and the iterate on screen.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from lbi_gui.model.run_list import RunList
from lbi_gui.model.runs import CurveStore
from lbi_gui.model.selection import Selection
from lbi_gui.model.session import SessionState, load_session, save_session


class AppModel:
    """The selection (current request), the finished runs and the session file they are in."""

    def __init__(self, request: Mapping[str, Any] | None = None,
                 runs: RunList | None = None) -> None:
        self.selection = Selection(request)
        self.runs = runs if runs is not None else RunList()
        self.session_path: str | None = None

    def session_state(self, *, request: Mapping[str, Any] | None = None,
                      gui: Mapping[str, Any] | None = None, curves: CurveStore | None = None,
                      shown: np.ndarray | None = None) -> SessionState:
        """What a session file holds: this model (``request``: what the panels show now, when
        it is newer than the selection) plus the window's ``gui`` settings, the curves and
        the iterate on screen (None: nothing shown)."""
        request = self.selection.request if request is None else request
        return SessionState(request=dict(request), gui=dict(gui or {}),
                            runs=self.runs.runs,
                            curves=curves if curves is not None and len(curves) else None,
                            shown=shown)

    def restore(self, state: SessionState, path: str | Path | None = None) -> None:
        """Take over a session's request (its fields replace the selection's) and runs (all
        of them count as saved)."""
        self.selection.update(state.request)
        self.runs.replace_all(state.runs, saved=True)
        self.session_path = None if path is None else str(path)

    def save(self, path: str | Path, **window: Any) -> Path:
        """Write the session (atomically; the caller has confirmed any overwrite); every run
        is saved afterwards. ``window``: :meth:`session_state`'s keywords."""
        written = save_session(path, self.session_state(**window))
        self.runs.mark_saved()
        self.session_path = str(path)
        return written

    def open(self, path: str | Path) -> SessionState:
        """Read and validate a session, then restore it; raises an LbiError (the model is
        unchanged then). Returns the state, for the window's own settings."""
        state = load_session(path)
        self.restore(state, path)
        return state
