"""Session files: the whole GUI state in one versioned file.

Format (``.lbisession``): a zip archive holding ``session.json`` (``format_version``, the
request — network reference, data and parameters —, GUI settings, the run table's parameters
and metrics) and ``arrays.npz`` (reconstructions and curves, no pickles). Reading checks the
version and the structure completely before the window applies anything, so a bad file
changes nothing; writing is atomic.
"""

from __future__ import annotations

import io
import json
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lbi_engine.errors import DataFileError, FormatVersionError
from lbi_engine.io import atomic_write_bytes
from lbi_gui.params import DEFAULT_REQUEST, request_problems
from lbi_gui.runs import CurveStore, RunResult

SESSION_FORMAT_VERSION = 1
SESSION_KIND = "lbi-session"


@dataclass
class SessionState:
    """What a session file holds."""

    request: dict[str, Any]
    gui: dict[str, Any] = field(default_factory=dict)
    runs: list[RunResult] = field(default_factory=list)
    curves: CurveStore | None = None  # the curves on screen (current or last run)
    shown: np.ndarray | None = None  # the iterate on screen (display space)


def save_session(path: str | Path, state: SessionState) -> Path:
    """Write ``state`` to ``path`` atomically (the caller has confirmed any overwrite)."""
    path = Path(path)
    arrays: dict[str, np.ndarray] = {}
    runs_meta = []
    for i, run in enumerate(state.runs):
        runs_meta.append(run.to_json())
        arrays.update({f"run{i}__{k}": v for k, v in run.arrays().items()})
    current: dict[str, Any] = {"has_curves": state.curves is not None,
                               "has_shown": state.shown is not None}
    if state.curves is not None:
        current["restart_notes"] = [note for _, note in state.curves.restarts]
        arrays.update({f"current__{k}": v for k, v in state.curves.to_arrays().items()})
    if state.shown is not None:
        arrays["current__shown"] = np.asarray(state.shown)
    meta = {"kind": SESSION_KIND, "format_version": SESSION_FORMAT_VERSION,
            "request": state.request, "gui": state.gui, "runs": runs_meta, "current": current}
    npz = io.BytesIO()
    np.savez_compressed(npz, **arrays)
    blob = io.BytesIO()
    with zipfile.ZipFile(blob, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("session.json", json.dumps(meta, indent=2, default=_json_default))
        zf.writestr("arrays.npz", npz.getvalue())
    atomic_write_bytes(path, blob.getvalue())
    return path


def _json_default(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (tuple, set)):
        return list(v)
    raise TypeError(f"cannot store {type(v).__name__} in a session file")


def _bad(path: Path, why: str) -> DataFileError:
    return DataFileError(f"{path} is not a readable lbi session: {why}. Choose a file saved "
                         "with File ▸ Save Session (Ctrl+S); the current session is unchanged.")


def load_session(path: str | Path) -> SessionState:
    """Read and fully validate a session file; raises an LbiError naming the problem."""
    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"{path} does not exist or is not a file; choose a session file.")
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            if "session.json" not in names:
                raise _bad(path, "it has no session.json inside")
            meta = json.loads(zf.read("session.json").decode("utf-8"))
            npz_bytes = zf.read("arrays.npz") if "arrays.npz" in names else None
    except zipfile.BadZipFile as exc:
        raise _bad(path, "it is not a zip archive (empty, truncated or another format)") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _bad(path, f"its session.json is damaged ({exc})") from exc
    except (OSError, EOFError, zlib.error) as exc:
        raise _bad(path, f"it could not be read ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("kind") != SESSION_KIND:
        raise _bad(path, "session.json does not describe an lbi session")
    version = meta.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise _bad(path, f"format_version {version!r} is missing or invalid")
    if version > SESSION_FORMAT_VERSION:
        raise FormatVersionError(
            f"{path} was written by a newer lbi (session format {version}); this version reads "
            f"format {SESSION_FORMAT_VERSION} and older. Update lbi to open it; the current "
            "session is unchanged.")
    if npz_bytes is None:
        raise _bad(path, "arrays.npz is missing")
    try:
        with np.load(io.BytesIO(npz_bytes), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except Exception as exc:  # noqa: BLE001 - numpy raises many types for damaged data
        raise _bad(path, f"arrays.npz is damaged ({exc})") from exc
    request = meta.get("request")
    if not isinstance(request, dict):
        raise _bad(path, "its request is missing or not an object")
    problems = request_problems(request)
    if problems:
        raise _bad(path, "its request has wrong value(s): " + "; ".join(problems))
    try:
        return _state(meta, arrays)
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad(path, f"an entry is missing or malformed ({exc!r})") from exc


def _state(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> SessionState:
    request = dict(DEFAULT_REQUEST)
    request.update({k: v for k, v in dict(meta["request"]).items() if k in DEFAULT_REQUEST})
    if request.get("input_shape") is not None:
        request["input_shape"] = tuple(int(s) for s in request["input_shape"])
    runs = []
    for i, run_meta in enumerate(meta.get("runs", [])):
        prefix = f"run{i}__"
        run_arrays = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
        runs.append(RunResult.from_parts(run_meta, run_arrays))
    current = meta.get("current", {})
    curves = None
    if current.get("has_curves"):
        cur = {k[len("current__"):]: v for k, v in arrays.items() if k.startswith("current__")}
        curves = CurveStore.from_arrays(cur, current.get("restart_notes", []))
    shown = arrays.get("current__shown") if current.get("has_shown") else None
    return SessionState(request=request, gui=dict(meta.get("gui", {})), runs=runs,
                        curves=curves, shown=shown)
