"""Overwriting a whole result folder is all-or-nothing (lbi_engine/folder_swap.py).

An export that dies at any file leaves the previous result folder byte-for-byte intact and
complete; a finished overwrite leaves exactly the new run's files (plus entries that were
never part of a result); a crash between the two renames of the fallback swap is repaired
by the next export; the GUI's file-set export stages too, and still asks first.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lbi_engine.results import exports, folder_swap
from lbi_engine.results.run_metrics import RunMetrics
from tests.reliability.conftest import leftover_files
from tests.reliability.kit import Kit


@pytest.fixture(scope="module")
def runs(kit: Kit) -> tuple[Any, Any, Any, list]:
    """(prepared, final, other, records): ``other`` is the same run with another x, so an
    overwrite changes the bytes of every image and array."""
    from lbi_engine import api

    request = api.InversionRequest.from_dict({"format_version": 1, **kit.base_request()})
    prepared, final, records = api.run_to_end(request)
    other = type(final)(**{**final.__dict__, "x": final.x + 0.25})
    return prepared, final, other, records


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _assert_complete(folder: Path) -> None:
    """result.json lists exactly the run files present, and each of them loads."""
    from PIL import Image

    document = json.loads((folder / "result.json").read_text())
    present = sorted(n for n in os.listdir(folder) if n in exports.RUN_FILES)
    assert document["files"] == present
    for name in present:
        if name.endswith(".npy"):
            assert np.load(folder / name, allow_pickle=False).size > 0
        elif name.endswith(".png"):
            Image.open(folder / name).load()


def _no_swap_leftovers(out: Path) -> None:
    assert folder_swap.leftovers(out) == []
    assert leftover_files(out.parent) == [] and leftover_files(out) == []


def _first_export(tmp_path: Path, runs: tuple) -> tuple[Path, dict[str, bytes]]:
    """The previous result every test overwrites: ``tmp_path/run`` and its snapshot."""
    prepared, final, _other, records = runs
    out = tmp_path / "run"
    exports.export_run(prepared, final, records, out)
    return out, _snapshot(out)


def _die_after(monkeypatch: pytest.MonkeyPatch, n_ok: int) -> list[str]:
    """Every exports writer works for the first ``n_ok`` files, then raises (disk full)."""
    written: list[str] = []

    def wrap(real: Any) -> Any:
        def writer(*args: Any, **kwargs: Any) -> Any:
            if len(written) >= n_ok:
                raise OSError(28, "No space left on device")
            written.append(next(Path(a).name for a in args if isinstance(a, (str, Path))))
            return real(*args, **kwargs)
        return writer

    for name in ("save_npy", "save_png", "write_curves_csv", "write_json"):
        monkeypatch.setattr(exports, name, wrap(getattr(exports, name)))
    return written


@pytest.mark.parametrize("n_ok", [1, 2, 3])  # dies at the 2nd, 3rd, 4th file
def test_an_export_dying_midway_leaves_the_old_folder_intact_and_complete(
        tmp_path: Path, runs, monkeypatch, n_ok: int) -> None:
    prepared, _final, other, records = runs
    out, before = _first_export(tmp_path, runs)
    written = _die_after(monkeypatch, n_ok)
    with pytest.raises(OSError, match="No space"):
        exports.export_run(prepared, other, records, out, overwrite=True)
    monkeypatch.undo()
    assert len(written) == n_ok  # the new files did exist somewhere before the crash ...
    assert _snapshot(out) == before  # ... but never in the result folder
    _assert_complete(out)
    _no_swap_leftovers(out)
    assert sorted(os.listdir(tmp_path)) == ["run"]


def test_a_finished_overwrite_leaves_only_the_new_files(tmp_path: Path, runs) -> None:
    prepared, _final, other, records = runs
    out, _before = _first_export(tmp_path, runs)
    fresh = tmp_path / "fresh"
    # a previous result with files this run does not write, and things that are not results
    (out / "decoder.png").write_bytes(b"stale decoder image of the earlier run")
    (out / "notes.txt").write_text("my notes\n")
    (out / "older").mkdir()
    (out / "older" / "result.json").write_text("{}\n")
    exports.export_run(prepared, other, None, out, overwrite=True)  # no curves this time
    exports.export_run(prepared, other, None, fresh)
    got = _snapshot(out)
    assert "decoder.png" not in got and "curves.csv" not in got
    assert got.pop("notes.txt") == b"my notes\n" and got.pop("older/result.json") == b"{}\n"
    want = _snapshot(fresh)
    assert sorted(got) == sorted(want)
    assert {"reconstruction.npy", "reconstruction.png", "README.txt", "result.json"} <= set(
        want) <= set(exports.RUN_FILES) - {"curves.csv", "decoder.npy", "decoder.png"}
    for name in ("reconstruction.npy", "reconstruction.png"):
        assert got[name] == want[name]
    np.testing.assert_array_equal(np.load(out / "reconstruction.npy"),
                                  np.load(fresh / "reconstruction.npy"))
    _assert_complete(out)
    _no_swap_leftovers(out)


def test_the_target_is_old_or_new_at_the_moment_of_the_swap(tmp_path: Path, runs,
                                                            monkeypatch) -> None:
    prepared, _final, other, records = runs
    out, old = _first_export(tmp_path, runs)
    seen: list[dict[str, bytes]] = []
    real = folder_swap._exchange

    def exchange(a: Path, b: Path) -> bool:
        seen.append(_snapshot(out))
        done = real(a, b)
        seen.append(_snapshot(out))
        return done

    monkeypatch.setattr(folder_swap, "_exchange", exchange)
    exports.export_run(prepared, other, records, out, overwrite=True)
    new = _snapshot(out)
    assert new != old and seen[0] == old
    if os.uname().sysname == "Linux":  # renameat2 swaps in one step: no instant without it
        assert seen[1] == new
    _assert_complete(out)


def test_fallback_swap_restores_the_old_folder_when_the_second_rename_fails(
        tmp_path: Path, runs, monkeypatch) -> None:
    prepared, _final, other, records = runs
    out, before = _first_export(tmp_path, runs)
    monkeypatch.setattr(folder_swap, "_exchange", lambda a, b: False)  # no renameat2
    real, calls = os.rename, []

    def rename(src: Any, dst: Any) -> None:
        calls.append(Path(dst).name)
        if len(calls) == 2:  # old aside worked; the new folder cannot be moved in
            raise OSError(5, "Input/output error")
        real(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="Input/output"):
        exports.export_run(prepared, other, records, out, overwrite=True)
    monkeypatch.setattr(os, "rename", real)
    assert calls[0].startswith(".run.lbi-old-") and calls[1] == "run"
    assert _snapshot(out) == before
    _no_swap_leftovers(out)
    exports.export_run(prepared, other, records, out, overwrite=True)  # and works without
    assert _snapshot(out)["reconstruction.npy"] != before["reconstruction.npy"]
    _assert_complete(out)
    _no_swap_leftovers(out)


def test_a_crash_between_the_renames_is_repaired_by_the_next_export(tmp_path: Path,
                                                                    runs) -> None:
    """The state a killed process leaves: no target, the old result as lbi-old, a half new
    one as lbi-new. The next export restores the old folder first, then replaces it."""
    prepared, _final, other, records = runs
    out, before = _first_export(tmp_path, runs)
    backup = tmp_path / ".run.lbi-old-0123abcd"
    os.rename(out, backup)
    half = tmp_path / ".run.lbi-new-89abcdef"
    half.mkdir()
    (half / "reconstruction.npy").write_bytes(b"\x93NUMPY half")
    folder_swap.recover_folder(out)
    assert _snapshot(out) == before
    _no_swap_leftovers(out)
    os.rename(out, backup)  # crash again; this time the next export repairs it by itself
    with pytest.raises(exports.OutputExistsError):  # the restored result is protected ...
        exports.export_run(prepared, other, records, out)
    assert _snapshot(out) == before
    exports.export_run(prepared, other, records, out, overwrite=True)  # ... until allowed
    _assert_complete(out)
    _no_swap_leftovers(out)


def test_overwriting_the_working_directory_commits_file_by_file(tmp_path: Path, runs,
                                                                monkeypatch) -> None:
    """`lbi invert --out .`: the folder cannot be renamed away from under the shell."""
    prepared, _final, other, records = runs
    out, _before = _first_export(tmp_path, runs)
    (out / "decoder.npy").write_bytes(b"stale")
    before = _snapshot(out)
    monkeypatch.chdir(out)
    written = _die_after(monkeypatch, 2)
    with pytest.raises(OSError, match="No space"):
        exports.export_run(prepared, other, records, Path("."), overwrite=True)
    assert len(written) == 2 and _snapshot(out) == before
    monkeypatch.undo()  # the writers work again (and the working directory is restored)
    monkeypatch.chdir(out)
    exports.export_run(prepared, other, records, Path("."), overwrite=True)
    assert Path.cwd() == out and out.is_dir()
    assert "decoder.npy" not in os.listdir(out)
    assert _snapshot(out)["reconstruction.npy"] != before["reconstruction.npy"]
    _assert_complete(out)
    assert leftover_files(out) == [] and sorted(os.listdir(tmp_path)) == ["run"]


# ---- the GUI's export of a file set into a user's folder ------------------------------------
def _result(value: float) -> Any:
    from lbi_gui.model.runs import CurveStore, RunResult
    from lbi_gui.params import default_request

    curves = CurveStore()
    curves.extend([{"iteration": k, "objective": 1.0 / (k + 1), "elapsed": 0.01 * k}
                   for k in range(4)])
    return RunResult(run_id=1, request=default_request(), stop_reason="max_iterations",
                     iterations=3, elapsed=0.03, metrics=RunMetrics(objective=0.25),
                     x_raw=np.full((1, 28, 28), value, np.float32),
                     x_display=np.full((28, 28), value, np.float32), curves=curves)


def test_gui_export_asks_first_and_replaces_nothing_when_a_writer_fails(
        qtbot, window, dialogs, tmp_path: Path, monkeypatch) -> None:
    from PySide6 import QtWidgets

    from lbi_gui import export

    win = window()
    paths = export.planned_paths(tmp_path, "digit", ["png8", "png16", "npy", "csv", "record"])
    (tmp_path / "unrelated.txt").write_text("keep me\n")
    assert len(win.exports.export_result(_result(0.25), paths)) == 5
    before = _snapshot(tmp_path)
    assert win.exports.export_result(_result(0.75), paths) == []  # asked; `dialogs` answers No
    assert [d["kind"] for d in dialogs] == ["question"] and "digit.npy" in dialogs[0]["text"]
    assert _snapshot(tmp_path) == before
    yes = QtWidgets.QMessageBox.StandardButton.Yes
    monkeypatch.setattr(QtWidgets.QMessageBox, "question", lambda *a, **k: yes)
    real_csv = export.atomic_write_text

    def csv_dies(path: Path, text: str) -> None:  # png8, png16 and npy are already staged
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "atomic_write_text", csv_dies)
    assert win.exports.export_result(_result(0.75), paths) == []
    assert dialogs[-1]["kind"] == "error" and "space" in dialogs[-1]["text"].lower()
    assert _snapshot(tmp_path) == before and leftover_files(tmp_path) == []
    monkeypatch.setattr(export, "atomic_write_text", real_csv)
    assert len(win.exports.export_result(_result(0.75), paths)) == 5
    np.testing.assert_array_equal(np.load(paths["npy"]), np.full((1, 28, 28), 0.75))
    assert (tmp_path / "unrelated.txt").read_text() == "keep me\n"
    assert leftover_files(tmp_path) == []
