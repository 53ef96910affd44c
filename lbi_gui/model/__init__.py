"""Qt-free application state of the window (napari's ``components``, in small).

Contract (.importlinter, tests/test_architecture.py): nothing here imports PySide6,
pyqtgraph or torch, so the state and its rules are tested without a window and without the
engine. Models announce changes through plain callbacks (:mod:`lbi_gui.model.events`); the
window layer bridges them to Qt signals (:mod:`lbi_gui.model_bridge`).

* :mod:`~lbi_gui.model.runs` — one run's record (:class:`RunResult`, :class:`CurveStore`).
* :mod:`~lbi_gui.model.run_list` — the finished runs: notes and tags, filter, sort, CSV.
* :mod:`~lbi_gui.model.selection` — the current request (network, sample, method, noise …).
* :mod:`~lbi_gui.model.run_control` — what an edit does to a run, the speed, "run all".
* :mod:`~lbi_gui.model.session` — session files (read, validate, write).
* :mod:`~lbi_gui.model.app_state` — all of it together (:class:`AppModel`).
* :mod:`~lbi_gui.model.view_state` — what the window shows besides (:class:`ViewState`).
"""

from __future__ import annotations

from lbi_gui.model.app_state import AppModel
from lbi_gui.model.events import EventEmitter, Events
from lbi_gui.model.run_list import RunList
from lbi_gui.model.runs import CurveStore, RunResult
from lbi_gui.model.selection import Selection
from lbi_gui.model.session import SessionState, load_session, save_session
from lbi_gui.model.view_state import ViewState

__all__ = ["AppModel", "CurveStore", "EventEmitter", "Events", "RunList", "RunResult",
           "Selection", "SessionState", "ViewState", "load_session", "save_session"]
