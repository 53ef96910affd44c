"""Run records and session files carry a format version; older, newer or damaged files are
refused with a clear message and nothing is overwritten."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lbi_engine.api import FORMAT_VERSION, InversionRequest
from lbi_engine.errors import DataFileError, FormatVersionError, InputError, LbiError
from lbi_engine.results.run_metrics import RunMetrics
from tests.reliability import corpus
from tests.reliability.kit import Kit

GOOD = InversionRequest().to_dict()

RECORD_CASES = [
    ("newer", {**GOOD, "format_version": FORMAT_VERSION + 1}, FormatVersionError,
     ("newer", "update lbi")),
    ("missing-version", {k: v for k, v in GOOD.items() if k != "format_version"},
     FormatVersionError, ("format_version",)),
    ("version-zero", {**GOOD, "format_version": 0}, FormatVersionError, ("format_version 0",)),
    ("version-bool", {**GOOD, "format_version": True}, FormatVersionError, ("format_version",)),
    ("version-string", {**GOOD, "format_version": "1"}, FormatVersionError, ("'1'",)),
    ("not-an-object", [GOOD], FormatVersionError, ("json object",)),
    ("unknown-field", {**GOOD, "learning_rate": 3}, InputError, ("learning_rate",)),
    ("wrong-type-int", {**GOOD, "max_iter": "1500"}, InputError, ("max_iter", "int")),
    ("wrong-type-null", {**GOOD, "alpha": None}, InputError, ("alpha", "float")),
    ("wrong-type-shape", {**GOOD, "input_shape": "1x28x28"}, InputError, ("input_shape",)),
    ("wrong-type-options", {**GOOD, "options": ["n_inner", 3]}, InputError, ("options",)),
    ("bad-value", {**GOOD, "alpha": -1.0}, InputError, ("alpha",)),
]


def test_the_current_record_round_trips() -> None:
    request = InversionRequest(alpha=3e-3, input_shape=(1, 28, 28), layer_alphas=[1e-3, 2e-3])
    data = json.loads(json.dumps(request.to_dict()))
    assert data["format_version"] == FORMAT_VERSION and data["kind"] == "lbi-run-record"
    assert InversionRequest.from_dict(data) == request


@pytest.mark.parametrize(("data", "error", "words"), [c[1:] for c in RECORD_CASES],
                         ids=[c[0] for c in RECORD_CASES])
def test_bad_run_records_are_refused_clearly(data: Any, error: type, words: tuple) -> None:
    with pytest.raises(error) as info:
        InversionRequest.from_dict(data)
    assert isinstance(info.value, LbiError)
    assert not corpus.message_ok(str(info.value), words), str(info.value)


@pytest.mark.parametrize("content", [
    json.dumps({**GOOD, "format_version": 99}),
    json.dumps({"kind": "lbi-result", "request": {**GOOD, "format_version": 99}}),
    json.dumps({**GOOD, "max_iter": "many"}),
    json.dumps(GOOD)[: len(json.dumps(GOOD)) // 2],  # truncated
    "\xff\xfe not json",
    "",
], ids=["newer", "newer-in-result", "wrong-type", "truncated", "garbage", "empty"])
def test_cli_refuses_bad_records_and_overwrites_nothing(content: str, kit: Kit, tmp_path: Path,
                                                        cli) -> None:
    out = tmp_path / "previous"
    code, _, err = cli(*corpus.to_argv(kit.base_request(max_iter=2), out))
    assert code == 0, err
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    record = tmp_path / "run.json"
    record.write_bytes(content.encode("utf-8", "surrogateescape"))
    code, _, err = cli("invert", "--record", record, "--out", out, "--overwrite")
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "run.json" in err or "record" in err.lower(), err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_gui_run_record_is_repeatable_by_the_cli(kit: Kit, tmp_path: Path, cli) -> None:
    """The GUI's exported run record (versioned, kind lbi-run-record) opens in `lbi invert`."""
    from lbi_gui.export import run_record
    from lbi_gui.model.runs import RunResult

    request = InversionRequest.from_dict({"format_version": 1, **kit.base_request(max_iter=3)})
    result = RunResult(run_id=1, request=request.to_dict(), stop_reason="max_iterations",
                       iterations=3, elapsed=0.1, metrics=RunMetrics(),
                       x_raw=np.zeros((1, 28, 28)),
                       x_display=np.zeros((28, 28)))
    record = run_record(result)
    assert record["format_version"] >= 1
    path = tmp_path / "run.json"
    path.write_text(json.dumps(record))
    code, _, err = cli("invert", "--record", path, "--out", tmp_path / "again", "--quiet")
    assert code == 0, err
    redone = json.loads((tmp_path / "again" / "result.json").read_text())
    assert redone["request"]["max_iter"] == 3


# ---- sessions -------------------------------------------------------------------------------
def _session_bytes(meta: dict[str, Any] | None, arrays: bytes | None = b"") -> bytes:
    blob = io.BytesIO()
    with zipfile.ZipFile(blob, "w") as zf:
        if meta is not None:
            zf.writestr("session.json", json.dumps(meta))
        if arrays is not None:
            if arrays == b"":
                npz = io.BytesIO()
                np.savez(npz)
                arrays = npz.getvalue()
            zf.writestr("arrays.npz", arrays)
    return blob.getvalue()


def _good_meta(**changes: Any) -> dict[str, Any]:
    from lbi_gui.params import default_request

    meta = {"kind": "lbi-session", "format_version": 1, "request": default_request(),
            "gui": {}, "runs": [], "current": {"has_curves": False, "has_shown": False}}
    meta.update(changes)
    return meta


SESSION_CASES = [
    ("newer", lambda: _session_bytes(_good_meta(format_version=2)), FormatVersionError,
     ("newer", "update lbi")),
    ("version-zero", lambda: _session_bytes(_good_meta(format_version=0)), DataFileError,
     ("format_version",)),
    ("no-version", lambda: _session_bytes({k: v for k, v in _good_meta().items()
                                          if k != "format_version"}),
     DataFileError, ("format_version",)),
    ("other-kind", lambda: _session_bytes(_good_meta(kind="something-else")), DataFileError,
     ("not describe an lbi session",)),
    ("not-a-zip", lambda: b"PNG? no, just bytes" * 10, DataFileError, ("not a zip",)),
    ("empty", lambda: b"", DataFileError, ("session",)),
    ("truncated", lambda: _session_bytes(_good_meta())[:60], DataFileError, ("session",)),
    ("no-json", lambda: _session_bytes(None), DataFileError, ("no session.json",)),
    ("bad-json", lambda: _raw_zip({"session.json": b"{oops", "arrays.npz": b""}),
     DataFileError, ("damaged",)),
    ("no-arrays", lambda: _session_bytes(_good_meta(), arrays=None), DataFileError,
     ("arrays.npz",)),
    ("bad-arrays", lambda: _session_bytes(_good_meta(), arrays=b"\x00" * 50), DataFileError,
     ("arrays.npz",)),
    ("pickled-arrays", lambda: _session_bytes(_good_meta(), arrays=_pickled_npz()),
     DataFileError, ("arrays.npz",)),
    ("runs-malformed", lambda: _session_bytes(_good_meta(runs=[{"run_id": "x"}])),
     DataFileError, ("runs[0]",)),  # the field is named
]


def _raw_zip(entries: dict[str, bytes]) -> bytes:
    blob = io.BytesIO()
    with zipfile.ZipFile(blob, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return blob.getvalue()


def _pickled_npz() -> bytes:
    """An npz whose array is an object array: loading it would unpickle."""
    buf = io.BytesIO()
    np.savez(buf, current__shown=np.array([{"a": 1}], dtype=object))
    return buf.getvalue()


@pytest.mark.parametrize(("make", "error", "words"), [c[1:] for c in SESSION_CASES],
                         ids=[c[0] for c in SESSION_CASES])
def test_bad_session_files_are_refused_clearly(make: Any, error: type, words: tuple,
                                               tmp_path: Path) -> None:
    from lbi_gui.model.session import load_session

    path = tmp_path / "bad.lbisession"
    path.write_bytes(make())
    with pytest.raises(error) as info:
        load_session(path)
    message = str(info.value)
    assert "bad.lbisession" in message and not corpus.message_ok(message, words), message


def test_window_keeps_its_session_when_a_bad_one_is_opened(qtbot, window, dialogs, kit: Kit,
                                                           tmp_path: Path) -> None:
    base = kit.base_request(max_iter=10, alpha=2e-2)
    win = window(base)
    good = tmp_path / "good.lbisession"
    assert win.files.save_session_to(str(good), confirmed=True)
    state_before = win.params.current_request()
    for case_id, make, *_ in SESSION_CASES:
        bad = tmp_path / f"{case_id}.lbisession"
        content = make()
        bad.write_bytes(content)
        n = len(dialogs)
        assert not win.files.open_session(str(bad)), case_id
        assert len(dialogs) == n + 1 and bad.name in dialogs[-1]["text"], case_id
        assert "unchanged" in dialogs[-1]["text"] or "update" in dialogs[-1]["text"], case_id
        assert bad.read_bytes() == content, case_id  # the bad file is not touched ...
        assert win.model.session_path == str(good), case_id  # ... and Ctrl+S will not hit it
        assert win.params.current_request() == state_before, case_id
    assert win.files.save_session()  # saves to the good file, as before
    assert win.files.open_session(str(good))
