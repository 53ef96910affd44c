"""The bad-input corpus through the GUI: a dialog with the reason, and the window keeps working.

Files go through the window's own Open paths (``open_network``, ``open_data_file``).
Parameter cases the widgets cannot produce (NaN alpha, unknown options, ...) arrive as a run
request, as they would from a session file or the command line, and must end in a dialog
too. Dialogs are captured by monkeypatching QMessageBox (see the ``dialogs`` fixture).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from lbi_engine.errors import UnsafeFileError
from tests.reliability import corpus
from tests.reliability.conftest import wait_idle
from tests.reliability.kit import Kit

GUI_CASES = [c for c in corpus.CASES if c.gui and c.error is not None]


def _apply(win: Any, case: corpus.Case, request: dict[str, Any], base: dict[str, Any]) -> None:
    """Feed the bad input to the window the way a user (or a session/command line) would."""
    if case.gui == "param":
        changed = {k: v for k, v in request.items() if base.get(k) != v}
        win.controller.start({**win.params.current_request(), **changed})
        return
    if request["network"] != base["network"]:
        win.network_panel.set_values({"input_shape": request.get("input_shape")})
        win.files.open_network(request["network"])
        return
    for key in ("image", "truth", "data"):
        if request.get(key):
            win.files.open_data_file(key, request[key])
            return
    raise AssertionError(f"{case.id}: no GUI route")


def test_every_bad_input_gives_a_dialog_and_the_window_keeps_working(
        qtbot: Any, window: Any, dialogs: list[dict[str, str]], kit: Kit, tmp_path: Path) -> None:
    base = kit.base_request(max_iter=20)
    win = window(base)
    assert not dialogs
    problems = []
    for case in GUI_CASES:
        n = len(dialogs)
        patch = pytest.MonkeyPatch()  # the case's own patches (e.g. an unreadable file)
        try:
            request = corpus.build(case, tmp_path / case.id, kit, patch)
            _apply(win, case, request, base)
            qtbot.waitUntil(lambda n=n: len(dialogs) > n, timeout=30000)
            wait_idle(qtbot, win)
        finally:
            patch.undo()
        shown = dialogs[n:]
        # data of a shape no resize fits: the window may name the problem and offer other
        # data (a choice whose default keeps what was there) instead of an error box
        kinds = ("question",) if case.error is UnsafeFileError else ("error", "choice")
        text = " ".join(d["text"] for d in shown)
        if len(shown) != 1 or shown[0]["kind"] not in kinds:
            problems.append(f"{case.id}: expected one {' or '.join(kinds)} dialog, got {shown}")
        missing = corpus.message_ok(text, case.gui_words or case.words)
        if case.error is UnsafeFileError:
            missing += corpus.message_ok(text, ("pickle", "code"))
        if missing:
            problems.append(f"{case.id}: dialog lacks {missing}: {text[:300]}")
        if "Traceback" in text:
            problems.append(f"{case.id}: traceback in the dialog text")
        if (tmp_path / case.id / corpus.MARKER).exists():
            problems.append(f"{case.id}: a pickle ran code without consent")
        if win.params.current_request()["network"] != base["network"]:
            problems.append(f"{case.id}: the window did not go back to the working network")
            win.params.set_request(base)
    assert not problems, "\n".join(problems)
    # the window still runs an inversion on the good problem
    runs = len(win.run_table.runs)
    win.params.set_request(base)
    win.runner.run()
    qtbot.waitUntil(lambda: len(win.run_table.runs) > runs, timeout=60000)
    result = win.run_table.runs[-1]
    assert result.iterations == 20
    assert result.metrics.objective is not None and math.isfinite(result.metrics.objective)
    assert result.request["network"] == base["network"]
    assert len(dialogs) == len(GUI_CASES)  # and nothing else went wrong on the way


def test_window_reads_data_files_whose_names_are_not_utf8(qtbot, window, dialogs, kit: Kit,
                                                          tmp_path: Path) -> None:
    import os

    import numpy as np

    win = window(kit.base_request(max_iter=10))
    path = os.fsdecode(os.fsencode(str(tmp_path)) + b"/v\xe9rit\xe9.npy")
    np.save(path, np.linspace(0, 1, 784, dtype=np.float32).reshape(28, 28))
    win.files.open_data_file("image", path)  # an .npy "image" is a ground-truth array
    qtbot.waitUntil(lambda: win.view.info is not None
                    and win.view.info.request.get("truth") == path,
                    timeout=30000)
    win.runner.run()
    qtbot.waitUntil(lambda: len(win.run_table.runs) == 1, timeout=60000)
    assert win.run_table.runs[0].request["truth"] == path
    assert win.files.save_session_to(str(tmp_path / "s.lbisession"), confirmed=True)
    assert not dialogs
