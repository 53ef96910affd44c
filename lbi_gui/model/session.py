"""Session files: the whole GUI state in one versioned file.

Format (``.lbisession``): a zip archive holding ``session.json`` (``format_version``, the
request — network reference, data and parameters —, GUI settings, the run table's parameters
and metrics, and the user's notes) and ``arrays.npz`` (reconstructions and curves, no
pickles). Reading checks the version and the structure completely before the window applies
anything, so a bad file changes nothing; writing is atomic. Fields added later (a run's
``notes``) are optional, so older sessions open unchanged and the format version stays 1.

A session is a file someone may have sent along with a model: it never grants consent to run
code from that model (``allow_pickle``/``allow_code`` are dropped with a warning in
``SessionState.warnings``), and its sizes are checked against the memory limit before
anything is decompressed (a zip bomb is refused, not inflated).
"""

from __future__ import annotations

import io
import json
import math
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from lbi_engine.errors import DataFileError, FormatVersionError, LbiError
from lbi_engine.io import atomic_write_bytes
from lbi_engine.limits import check_bytes, json_byte_limit, open_regular
from lbi_gui.model.runs import CurveStore, RunResult
from lbi_gui.params import DEFAULT_REQUEST, request_problems

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
    warnings: list[str] = field(default_factory=list)  # for the window to show (not saved)

#: Largest session.json read (a GUI state is a few kB; anything huge is damaged or hostile).
MAX_JSON_BYTES = 32 * 2**20


def save_session(path: str | Path, state: SessionState) -> Path:
    """Write ``state`` to ``path`` atomically (the caller has confirmed any overwrite)."""
    path = Path(path)
    # Any, not np.ndarray: numpy's stub would let the ** below reach allow_pickle (a bool)
    arrays: dict[str, Any] = {}
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
    # a regular file of at most the memory limit, checked on the descriptor that is read (a
    # FIFO or a device swapped in after is_file() is refused, not read without end)
    fh = open_regular(path, "session file", error=DataFileError)
    try:
        with fh, zipfile.ZipFile(fh) as zf:
            names = set(zf.namelist())
            if "session.json" not in names:
                raise _bad(path, "it has no session.json inside")
            _check_sizes(path, zf)
            meta = json.loads(zf.read("session.json").decode("utf-8"))
            npz_bytes = zf.read("arrays.npz") if "arrays.npz" in names else None
    except zipfile.BadZipFile as exc:
        raise _bad(path, "it is not a zip archive (empty, truncated or another format)") from exc
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
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
        with zipfile.ZipFile(io.BytesIO(npz_bytes)) as inner:
            _check_sizes(path, inner)
        with np.load(io.BytesIO(npz_bytes), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except LbiError:
        raise
    except Exception as exc:  # numpy raises many types for damaged data
        raise _bad(path, f"arrays.npz is damaged ({exc})") from exc
    request = meta.get("request")
    if not isinstance(request, dict):
        raise _bad(path, "its request is missing or not an object")
    from lbi_engine.request import strip_file_consent

    request, consent_warning = strip_file_consent(request, f"session {path}")
    problems = request_problems(request)
    if problems:
        raise _bad(path, "its request has wrong value(s): " + "; ".join(problems))
    try:
        state = _state({**meta, "request": request}, arrays)
        _check_state(state)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
        raise _bad(path, _why(exc)) from exc
    if consent_warning:
        state.warnings.append(consent_warning)
    return state


def _check_sizes(path: Path, zf: zipfile.ZipFile) -> None:
    """Refuse before decompressing: declared sizes against the limits (zip bombs)."""
    total = 0
    most = min(MAX_JSON_BYTES, json_byte_limit())  # parsing makes up to 24x the bytes
    for info in zf.infolist():
        if info.filename == "session.json" and info.file_size > most:
            raise _bad(path, f"its session.json declares {info.file_size:,} bytes, more than "
                             f"the {most:,} lbi parses (a GUI state is a few kB)")
        total += info.file_size
    check_bytes(total, f"session {path} (its contents unpacked)",
                "it is damaged or not a session saved by lbi; choose another file")


def _check_state(state: SessionState) -> None:
    """Everything the window will apply has the type it needs (ValueError otherwise), so
    applying a session cannot fail half-way."""
    gui = state.gui
    if "alpha_c" in gui and not (isinstance(gui["alpha_c"], (int, float))
                                 and not isinstance(gui["alpha_c"], bool)
                                 and math.isfinite(gui["alpha_c"]) and gui["alpha_c"] > 0):
        raise ValueError(f"gui.alpha_c={gui['alpha_c']!r} is not a number > 0")
    levels = gui.get("levels")
    if levels is not None and not (
            isinstance(levels, list) and len(levels) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                    and math.isfinite(v) for v in levels) and levels[0] < levels[1]):
        raise ValueError(f"gui.levels={levels!r} is not [low, high] with low < high")
    shown = state.shown
    if shown is not None and not (isinstance(shown, np.ndarray) and 1 <= shown.ndim <= 3
                                  and shown.size > 0 and np.issubdtype(shown.dtype, np.number)):
        raise ValueError("the image on screen (current__shown) is not a numeric 1-3 d array")


def _no_consent(request: dict[str, Any]) -> dict[str, Any]:
    from lbi_engine.request import CONSENT_FIELDS

    clean = {k: v for k, v in request.items() if k not in CONSENT_FIELDS}
    if "allow_pickle" in request:
        clean["allow_pickle"] = False
    return clean


class _FieldError(ValueError):
    """A session field of the wrong shape, named by its path (``runs[2].elapsed``)."""


def _why(exc: Exception) -> str:
    if isinstance(exc, _FieldError):
        return str(exc)
    if isinstance(exc, KeyError):
        return f"the entry {exc.args[0]!r} is missing"
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    return f"an entry is malformed ({text})"


def _field(where: str, value: Any, kind: type, what: str) -> Any:
    """``value`` if it is a ``kind``; else a _FieldError naming ``where`` and the value."""
    if not isinstance(value, kind):
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise _FieldError(f"{where}={shown} is not {what}")
    return value


def _part(where: str, build: Callable[[], Any]) -> Any:
    """``build()``, with any error it raises named by the field ``where``."""
    try:
        return build()
    except _FieldError:
        raise
    except KeyError as exc:
        raise _FieldError(f"{where}: the entry {exc.args[0]!r} is missing (in session.json, "
                          "or its arrays in arrays.npz)") from exc
    except (TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else \
            type(exc).__name__
        raise _FieldError(f"{where} is malformed ({text})") from exc


def _number(where: str, value: Any, low: float, high: float, whole: bool) -> None:
    """A _FieldError naming ``where`` unless ``value`` is a finite number in [low, high]
    (a whole one if ``whole``): JSON's Infinity and NaN, 1e400 and booleans included."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value) and low <= value <= high and (not whole or float(value).is_integer())
    if not ok:
        shown = repr(value)[:40]
        raise _FieldError(f"{where}={shown} is not a {'whole ' if whole else ''}number from "
                          f"{low:g} to {high:g}")


def _state(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> SessionState:
    _field("runs", meta.get("runs", []), list, "a list of runs")
    current = _field("current", meta.get("current", {}), dict, "an object")
    for key in ("has_curves", "has_shown"):
        _field(f"current.{key}", current.get(key, False), bool, "true or false")
    notes = _field("current.restart_notes", current.get("restart_notes", []), list,
                   "a list of texts")
    for i, note in enumerate(notes):
        _field(f"current.restart_notes[{i}]", note, str, "text")
    request = dict(DEFAULT_REQUEST)
    request.update({k: v for k, v in dict(meta["request"]).items() if k in DEFAULT_REQUEST})
    if request.get("input_shape") is not None:
        shape = _field("request.input_shape", request["input_shape"], list, "a list of sizes")
        for k, size in enumerate(shape):
            _number(f"request.input_shape[{k}]", size, 1, 2**31, whole=True)
        request["input_shape"] = tuple(int(s) for s in shape)
    runs = []
    for i, run_meta in enumerate(meta.get("runs", [])):
        prefix = f"run{i}__"
        _field(f"runs[{i}]", run_meta, dict, "an object")
        for key, high, whole in (("run_id", 2**53, True), ("iterations", 2**53, True),
                                 ("elapsed", 1e12, False)):
            if key in run_meta:
                _number(f"runs[{i}].{key}", run_meta[key], 0, high, whole)
        run_arrays = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
        run = _part(f"runs[{i}]", partial(RunResult.from_parts, run_meta, run_arrays))
        # a run's parameters can be loaded back into the panels: never with a file's consent
        run.request = _no_consent(run.request)
        run.segments = [(k, _no_consent(req)) for k, req in run.segments]
        runs.append(run)
    curves = None
    if current.get("has_curves"):
        cur = {k[len("current__"):]: v for k, v in arrays.items() if k.startswith("current__")}
        curves = _part("current (the curves on screen)",
                       lambda: CurveStore.from_arrays(cur, notes))
    shown = arrays.get("current__shown") if current.get("has_shown") else None
    gui = meta.get("gui", {})
    if not isinstance(gui, dict):
        raise ValueError(f"gui={gui!r} is not an object")
    return SessionState(request=request, gui=dict(gui), runs=runs,
                        curves=curves, shown=shown)
