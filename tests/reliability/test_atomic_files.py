"""Interrupted writes (a failing rename, a writer that dies halfway, Ctrl+C) never damage the
previous file and never leave temporary or partial files behind."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lbi_engine import io as lbi_io
from lbi_engine.results.run_metrics import RunMetrics
from tests.reliability.conftest import leftover_files

FAILURES = [OSError(28, "No space left on device"), KeyboardInterrupt()]


def _fail_replace(monkeypatch: pytest.MonkeyPatch, exc: BaseException, after: int = 0) -> list:
    """os.replace succeeds ``after`` times, then raises ``exc`` (the rename is the commit)."""
    calls: list[tuple[str, str]] = []
    real = os.replace

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        calls.append((os.fspath(src), os.fspath(dst)))
        if len(calls) > after:
            raise exc
        real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    return calls


@pytest.mark.parametrize("exc", FAILURES, ids=["disk-full", "ctrl-c"])
def test_atomic_writer_keeps_the_old_file_when_the_rename_fails(tmp_path: Path, exc,
                                                                monkeypatch) -> None:
    target = tmp_path / "result.json"
    target.write_text('{"old": true}\n')
    calls = _fail_replace(monkeypatch, exc)
    with pytest.raises(type(exc)):
        lbi_io.atomic_write_text(target, '{"new": true}\n' * 1000)
    assert calls, "the writer must commit with os.replace"
    assert target.read_text() == '{"old": true}\n'
    assert leftover_files(tmp_path) == [] and sorted(os.listdir(tmp_path)) == ["result.json"]


@pytest.mark.parametrize("exc", FAILURES, ids=["disk-full", "ctrl-c"])
def test_atomic_writer_keeps_the_old_file_when_the_writer_dies_halfway(tmp_path: Path,
                                                                       exc) -> None:
    target = tmp_path / "reconstruction.npy"
    np.save(target, np.arange(10.0))
    with pytest.raises(type(exc)), lbi_io.atomic_writer(target, "wb") as fh:
        fh.write(b"\x93NUMPY" + b"\x00" * 5000)  # half a file ...
        raise exc  # ... then the process is interrupted
    np.testing.assert_array_equal(np.load(target), np.arange(10.0))
    assert sorted(os.listdir(tmp_path)) == ["reconstruction.npy"]


def test_a_new_file_is_not_created_when_the_write_fails(tmp_path: Path, monkeypatch) -> None:
    _fail_replace(monkeypatch, OSError(5, "Input/output error"))
    with pytest.raises(OSError):
        lbi_io.atomic_write_bytes(tmp_path / "fresh.png", b"x" * 100)
    assert os.listdir(tmp_path) == []


# ---- a whole `lbi invert` export ------------------------------------------------------------
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, list]:
    from lbi_engine import api
    from tests.reliability.kit import build_kit

    kit = build_kit(tmp_path_factory.mktemp("kit_atomic"))
    request = api.InversionRequest.from_dict({"format_version": 1, **kit.base_request()})
    return api.run_to_end(request)


@pytest.mark.parametrize("fail_at", [0, 1, 2, 3])
def test_interrupted_run_export_leaves_every_previous_file_intact(tmp_path: Path, fail_at: int,
                                                                  finished_run, monkeypatch):
    from lbi_engine.results import exports

    prepared, final, records = finished_run
    out = tmp_path / "run"
    exports.export_run(prepared, final, records, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert "result.json" in before and len(before) >= 4
    # a second export over it (another run: other numbers) dies at its fail_at-th file
    other = type(final)(**{**final.__dict__, "x": final.x + 0.25})
    _fail_replace(monkeypatch, OSError(28, "No space left on device"), after=fail_at)
    with pytest.raises(OSError):
        exports.export_run(prepared, other, records[:2], out, overwrite=True)
    monkeypatch.undo()
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(after) == set(before) and leftover_files(out) == []
    # the new result is staged beside the folder and swapped in only when complete, so no
    # file of the previous run changed (tests/reliability/test_export_folder_atomic.py)
    assert after["result.json"] == before["result.json"]
    changed = [n for n in after if after[n] != before[n]]
    assert changed == []
    for name in after:  # and every file is whole: old or new, never half
        if name.endswith(".npy"):
            assert np.load(out / name, allow_pickle=False).size > 0
        elif name.endswith(".json"):
            json.loads(after[name])
        elif name.endswith(".png"):
            from PIL import Image

            Image.open(out / name).load()


def test_run_export_refuses_to_replace_without_permission(tmp_path: Path, finished_run) -> None:
    from lbi_engine.io import OutputExistsError
    from lbi_engine.results import exports

    prepared, final, records = finished_run
    exports.export_run(prepared, final, records, tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(OutputExistsError, match="already exists"):
        exports.export_run(prepared, final, records, tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


# ---- GUI session files and exports ------------------------------------------------------------
def _result(run_id: int = 1, value: float = 0.5) -> Any:
    from lbi_gui.model.runs import CurveStore, RunResult
    from lbi_gui.params import default_request

    curves = CurveStore()
    curves.extend([{"iteration": k, "objective": 1.0 / (k + 1), "elapsed": 0.01 * k,
                    "bregman": [0.1, 0.2]} for k in range(5)])
    return RunResult(run_id=run_id, request=default_request(), stop_reason="max_iterations",
                     iterations=4, elapsed=0.04,
                     metrics=RunMetrics(objective=0.2, psnr=20.0),
                     x_raw=np.full((1, 28, 28), value, np.float32),
                     x_display=np.full((28, 28), value, np.float32), curves=curves)


def _state(value: float) -> Any:
    from lbi_gui.model.session import SessionState
    from lbi_gui.params import default_request

    return SessionState(request=default_request(alpha=value), runs=[_result(1, value)],
                        curves=_result(1, value).curves, shown=np.full((28, 28), value))


@pytest.mark.parametrize("exc", FAILURES, ids=["disk-full", "ctrl-c"])
def test_interrupted_session_save_keeps_the_previous_session(tmp_path: Path, exc,
                                                             monkeypatch) -> None:
    from lbi_gui.model import session

    path = tmp_path / "work.lbisession"
    session.save_session(path, _state(0.25))
    before = path.read_bytes()
    _fail_replace(monkeypatch, exc)
    with pytest.raises(type(exc)):
        session.save_session(path, _state(0.75))
    monkeypatch.undo()
    assert path.read_bytes() == before and leftover_files(tmp_path) == []
    assert session.load_session(path).request["alpha"] == 0.25


def test_session_writer_dying_halfway_keeps_the_previous_session(tmp_path: Path,
                                                                 monkeypatch) -> None:
    import zipfile

    from lbi_gui.model import session

    path = tmp_path / "work.lbisession"
    session.save_session(path, _state(0.25))
    before = path.read_bytes()
    real = zipfile.ZipFile.writestr
    calls = []

    def writestr(self: Any, name: Any, data: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(name)
        if len(calls) == 2:  # session.json is in, arrays.npz is not
            raise MemoryError("simulated crash while writing the arrays")
        real(self, name, data, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "writestr", writestr)
    with pytest.raises(MemoryError):
        session.save_session(path, _state(0.75))
    assert path.read_bytes() == before and leftover_files(tmp_path) == []


def test_interrupted_gui_export_keeps_previous_files(tmp_path: Path, monkeypatch) -> None:
    from lbi_gui import export

    result = _result(1, 0.25)
    paths = export.planned_paths(tmp_path, "run1", ["png8", "npy", "csv", "record"])
    export.export_files(paths, result, levels=(0.0, 1.0))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def dies_halfway(path: Path, raw: np.ndarray) -> None:
        with lbi_io.atomic_writer(path, "wb") as fh:
            fh.write(b"\x93NUMPY\x01\x00" + b"\x00" * 64)
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "write_npy", dies_halfway)
    with pytest.raises(OSError):
        export.export_files(paths, _result(1, 0.75), levels=(0.0, 1.0), overwrite=True)
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert set(after) == set(before) and leftover_files(tmp_path) == []
    assert after["run1.npy"] == before["run1.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "run1.npy"), np.full((1, 28, 28), 0.25))


def test_window_reports_a_failed_session_save_and_keeps_the_old_file(
        qtbot, window, dialogs, tmp_path: Path, monkeypatch) -> None:
    win = window()
    path = tmp_path / "mine.lbisession"
    assert win.files.save_session_to(str(path), confirmed=True)
    before = path.read_bytes()
    _fail_replace(monkeypatch, OSError(28, "No space left on device"))
    assert not win.files.save_session_to(str(path), confirmed=True)
    monkeypatch.undo()
    assert path.read_bytes() == before and leftover_files(tmp_path) == []
    assert len(dialogs) == 1 and "mine.lbisession" in dialogs[0]["text"]
    assert "space" in dialogs[0]["text"].lower()
    assert win.files.open_session(str(path))  # the old session still opens
