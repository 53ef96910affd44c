"""Persistent preferences (QSettings): recent files, last folders, window layout, backend.

Tests point QSettings at a temporary folder (``QSettings.setPath``) before any window
exists, so they never read or write the user's real settings.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6 import QtCore

ORGANISATION = "lbi"
APPLICATION = "lbi-gui"
MAX_RECENT = 10
#: Where the solver runs: "process" (a child process; the GUI's painting cannot slow it) or
#: "thread" (a thread of the GUI process: no second interpreter; sees an in-process engine).
ENGINE_BACKENDS = ("process", "thread")
DEFAULT_ENGINE_BACKEND = "process"


def settings() -> QtCore.QSettings:
    return QtCore.QSettings(QtCore.QSettings.Format.IniFormat, QtCore.QSettings.Scope.UserScope,
                            ORGANISATION, APPLICATION)


def last_dir(kind: str) -> str:
    """The folder last used for ``kind`` (network, data, session, export), else the last
    folder used for anything (a photo is often beside the network), else home."""
    for key in (f"last_dir/{kind}", "last_dir/any"):
        value = settings().value(key, "")
        if value and Path(str(value)).is_dir():
            return str(value)
    return str(Path.home())


def remember_dir(kind: str, path: str | Path) -> None:
    p = Path(path)
    folder = str(p if p.is_dir() else p.parent)
    settings().setValue(f"last_dir/{kind}", folder)
    settings().setValue("last_dir/any", folder)


def recent_files(kind: str = "sessions") -> list[str]:
    value = settings().value(f"recent/{kind}", [])
    if isinstance(value, str):
        value = [value]
    return [str(v) for v in value if v] if isinstance(value, (list, tuple)) else []


def add_recent(path: str | Path, kind: str = "sessions") -> list[str]:
    p = str(Path(path).resolve())
    items = [p] + [r for r in recent_files(kind) if r != p]
    settings().setValue(f"recent/{kind}", items[:MAX_RECENT])
    return items[:MAX_RECENT]


def clear_recent(kind: str = "sessions") -> None:
    settings().setValue(f"recent/{kind}", [])


def engine_backend() -> str:
    """The solver backend: ``$LBI_ENGINE_BACKEND``, else the setting ``engine/backend``, else
    :data:`DEFAULT_ENGINE_BACKEND`. An unknown value falls back to the default (it is only a
    performance choice; both backends give the same results)."""
    for value in (os.environ.get("LBI_ENGINE_BACKEND"), settings().value("engine/backend", "")):
        if value and str(value).strip().lower() in ENGINE_BACKENDS:
            return str(value).strip().lower()
    return DEFAULT_ENGINE_BACKEND
