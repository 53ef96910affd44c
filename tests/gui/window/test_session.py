"""Save a session, open it in a fresh window, get the same state; bad files change nothing."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from lbi_gui.dialogs import messages
from tests.gui.conftest import wait_idle, wait_ready


def _state(win):
    return {"request": win.params.current_request(),
            "rows": [r.table_row() for r in win.run_table.runs],
            "curves": win.controller.curves.arrays(),
            "restarts": win.controller.curves.restarts,
            "shown": win.image_grid.iterate, "levels": win.image_grid.levels(),
            "c": win.reg_panel.c_factor.value()}


def test_session_round_trip_in_a_fresh_window(qtbot, make_window, tmp_path) -> None:
    win = make_window({"max_iter": 80, "index": 5, "noise_std": 0.08, "seed": 4})
    win.reg_panel.c_factor.setValue(0.3)
    win.runner.run()
    wait_idle(qtbot, win, timeout=120000)
    win.solver_panel.switch.click()
    win.params.flush_changes()
    win.runner.run()
    wait_idle(qtbot, win, timeout=120000)
    win.image_grid.set_levels((0.05, 0.95))
    path = tmp_path / "study.lbisession"
    assert win.files.save_session_to(str(path))
    before = _state(win)

    fresh = make_window()
    assert fresh.files.open_session(str(path))
    wait_ready(qtbot, fresh)
    after = _state(fresh)
    assert after["request"] == before["request"]
    assert after["rows"] == before["rows"] and len(after["rows"]) == 2
    for key, value in before["curves"].items():
        np.testing.assert_array_equal(after["curves"][key], value)
    assert after["restarts"] == before["restarts"]
    np.testing.assert_array_equal(after["shown"], before["shown"])
    assert after["levels"] == pytest.approx(before["levels"])
    assert after["c"] == pytest.approx(0.3)
    assert fresh.view.info.request["index"] == 5  # the data was prepared again from the session
    for a, b in zip(win.run_table.runs, fresh.run_table.runs, strict=True):
        np.testing.assert_array_equal(a.x_raw, b.x_raw)
    # a new run continues the numbering instead of clashing with loaded runs
    fresh.runner.run()
    wait_idle(qtbot, fresh, timeout=120000)
    assert fresh.run_table.runs[-1].run_id == 3


def _bad_files(tmp_path, good):
    empty = tmp_path / "empty.lbisession"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.lbisession"
    truncated.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    text = tmp_path / "notes.lbisession"
    text.write_text("hello")
    newer = tmp_path / "newer.lbisession"
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(newer, "w") as zout:
        meta = json.loads(zin.read("session.json"))
        meta["format_version"] = 99
        zout.writestr("session.json", json.dumps(meta))
        zout.writestr("arrays.npz", zin.read("arrays.npz"))
    return {"empty": empty, "truncated": truncated, "text": text, "newer": newer}


def test_bad_session_files_are_refused_and_change_nothing(qtbot, make_window, tmp_path) -> None:
    win = make_window({"max_iter": 30, "alpha": 0.02})
    win.runner.run()
    wait_idle(qtbot, win, timeout=120000)
    good = tmp_path / "good.lbisession"
    assert win.files.save_session_to(str(good))
    win.reg_panel.alpha.setValue(0.05)
    before = _state(win)
    for name, path in _bad_files(tmp_path, good).items():
        n = len(messages.OPEN_ERRORS)
        assert not win.files.open_session(str(path)), name
        assert len(messages.OPEN_ERRORS) == n + 1, name
        box = messages.OPEN_ERRORS[-1]
        text = box.informativeText()
        assert str(path.name) in text, (name, text)
        if name == "newer":
            assert "newer" in text and "Update lbi" in text
        box.close()
        assert _state(win)["request"] == before["request"]
        assert len(win.run_table.runs) == 1
    assert good.exists()  # nothing was overwritten
    win.runner.run()  # still usable
    wait_idle(qtbot, win, timeout=120000)
    assert len(win.run_table.runs) == 2


def test_saving_over_an_existing_session_asks(qtbot, make_window, tmp_path,
                                              monkeypatch) -> None:
    from PySide6 import QtWidgets

    win = make_window()
    path = tmp_path / "s.lbisession"
    path.write_bytes(b"keep me")
    monkeypatch.setattr(QtWidgets.QMessageBox, "question",
                        lambda *a, **k: QtWidgets.QMessageBox.StandardButton.No)
    assert not win.files.save_session_to(str(path))
    assert path.read_bytes() == b"keep me"
