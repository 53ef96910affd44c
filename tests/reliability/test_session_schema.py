"""A session file someone sent: refused whole, in one line that names the field, before any
of it is applied; only a regular file is opened and its JSON is bounded by the memory limit.

``load_session`` is the gate (the window shows its error in a dialog), so no window is
needed here.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbi_engine.errors import DataFileError, LbiError
from lbi_engine.limits import MemoryLimitError
from lbi_gui.model.session import load_session
from tests.reliability import hostile_files as hf

# (name, session.json changes, words the one line must hold: the field's path)
CASES = [
    ("runs-text", {"runs": "abc"}, ["runs='abc'", "a list of runs"]),
    ("run-number", {"runs": [7]}, ["runs[0]=7", "an object"]),
    ("run-missing", {"runs": [{"run_id": 1}]}, ["runs[0]", "is missing"]),
    ("current-list", {"current": []}, ["current=[]", "an object"]),
    ("has-curves-text", {"current": {"has_curves": "yes"}}, ["current.has_curves='yes'"]),
    ("restart-notes", {"current": {"has_curves": False, "restart_notes": [1]}},
     ["current.restart_notes[0]=1", "text"]),
    ("curves-missing", {"current": {"has_curves": True, "has_shown": False}},
     ["current (the curves on screen)", "is missing"]),
]


@pytest.mark.parametrize(("name", "meta", "words"), CASES, ids=[c[0] for c in CASES])
def test_a_malformed_session_names_the_field_in_one_line(name: str, meta: dict,
                                                         words: list[str],
                                                         tmp_path: Path) -> None:
    path = hf.session(tmp_path, f"{name}.lbisession", meta)
    with pytest.raises(DataFileError) as info:
        load_session(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    for word in words:
        assert word in message, message


def test_a_good_session_still_loads(tmp_path: Path) -> None:
    path = hf.session(tmp_path, "good.lbisession", {"gui": {"alpha_c": 0.5}})
    assert load_session(path).gui == {"alpha_c": 0.5}


def test_a_session_that_is_a_fifo_or_too_large_is_refused_unread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = tmp_path / "pipe.lbisession"
    os.mkfifo(fifo)
    with pytest.raises(DataFileError, match="pipe.lbisession"):
        load_session(fifo)  # would block in open() if it were opened for reading
    big = tmp_path / "big.lbisession"
    with open(big, "wb") as fh:
        fh.truncate(400 * 2**20)  # sparse: no disk, and nothing may read it
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "300M")
    with pytest.raises(DataFileError, match="big.lbisession is 400.0 MiB, more than the "
                                            "300.0 MiB"):
        load_session(big)


def test_a_session_json_is_bounded_by_the_memory_limit(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """12 MB of valid JSON would parse into up to ~290 MB of Python objects: under a limit
    of 300M only limit/32 (9.4 MiB) is parsed."""
    path = hf.session(tmp_path, "wide.lbisession", {"gui": {"pad": [{}] * 3_000_000}})
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo("session.json").file_size > 9_830_400
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "300M")
    with pytest.raises((DataFileError, MemoryLimitError), match="session.json declares"):
        load_session(path)
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "8G")
    assert len(load_session(path).gui["pad"]) == 3_000_000


def test_session_arrays_are_still_checked(tmp_path: Path) -> None:
    path = hf.session(tmp_path, "shown.lbisession",
                      {"current": {"has_curves": False, "has_shown": True}},
                      arrays={"current__shown": np.array(["a", "b"])})
    with pytest.raises(DataFileError, match="current__shown"):
        load_session(path)


# ---- fuzzing: any value at any field --------------------------------------------------------
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats()
                    | st.text(max_size=6),
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.text(max_size=6), kids, max_size=3), max_leaves=8)
TOP = ["kind", "format_version", "request", "gui", "runs", "current"]
RUN_KEYS = ["run_id", "request", "stop_reason", "iterations", "elapsed", "metrics", "notes",
            "segments", "restart_notes", "network", "preprocessing", "decoder_psnr"]
CURRENT_KEYS = ["has_curves", "has_shown", "restart_notes"]
GUI_KEYS = ["alpha_c", "levels", "pad"]
SESSION_CHANGES = (st.dictionaries(st.sampled_from(TOP), JSON, max_size=2),
                   st.lists(st.dictionaries(st.sampled_from(RUN_KEYS), JSON, max_size=4),
                            max_size=2),
                   st.dictionaries(st.sampled_from(CURRENT_KEYS), JSON, max_size=2),
                   st.dictionaries(st.sampled_from(GUI_KEYS), JSON, max_size=2))
FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def _check_session(folder: Path, top: dict, runs: list, current: dict, gui: dict) -> None:
    meta = {"runs": runs, "current": {"has_curves": False, "has_shown": False, **current},
            "gui": gui, **top}
    path = hf.session(folder, "fuzz.lbisession", meta)
    try:
        load_session(path)
    except LbiError as exc:
        assert "\n" not in str(exc).strip(), str(exc)


@FUZZ
@given(*SESSION_CHANGES)
def test_a_mutated_session_loads_or_is_one_lbi_error(tmp_path: Path, top: dict, runs: list,
                                                     current: dict, gui: dict) -> None:
    _check_session(tmp_path, top, runs, current, gui)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(*SESSION_CHANGES)
def test_long_fuzz_of_sessions(tmp_path: Path, top: dict, runs: list, current: dict,
                               gui: dict) -> None:
    _check_session(tmp_path, top, runs, current, gui)
