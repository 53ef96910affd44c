"""Fixtures of the reliability tests: good files to corrupt, the CLI in-process, Qt offscreen.

QT_QPA_PLATFORM must be set before Qt loads, so it is set at import of this conftest.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.bounded_cli import BoundedCli
from tests.reliability.kit import Kit, build_kit


@pytest.fixture(scope="module")
def bounded() -> Iterator[BoundedCli]:
    """The CLI in a worker process under an address-space limit (one per test module)."""
    worker = BoundedCli()
    yield worker
    worker.close()


@pytest.fixture(scope="session")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Kit:
    """Good network files of every format (built once per test session)."""
    return build_kit(tmp_path_factory.mktemp("kit"))


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """cli("invert", ...) -> (exit code, stdout, stderr), in-process (no torch import each)."""
    from lbi_engine.cli import main

    def run(*args: object) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def qsettings_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every QSettings lives in a temporary folder, never the user's."""
    from PySide6 import QtCore

    folder = tmp_path_factory.mktemp("qsettings")
    for fmt in (QtCore.QSettings.Format.IniFormat, QtCore.QSettings.Format.NativeFormat):
        QtCore.QSettings.setPath(fmt, QtCore.QSettings.Scope.UserScope, str(folder))
    yield


@pytest.fixture
def dialogs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    """Captures every message box: error boxes (opened non-modally) and questions.

    Each entry: {"kind": "error"|"question"|"choice", "title", "text"}. Questions answer
    "No", so a pickled model is never loaded unless a test says otherwise; choices (modal
    boxes with buttons of their own) take their default.
    """
    from PySide6 import QtGui, QtWidgets

    shown: list[dict[str, str]] = []

    def plain(rich: str) -> str:  # what the user reads: rich text rendered to plain text
        return QtGui.QTextDocumentFragment.fromHtml(rich).toPlainText()

    def fake_open(box: QtWidgets.QMessageBox) -> None:
        shown.append({"kind": "error", "title": box.windowTitle(),
                      "text": f"{plain(box.text())}\n{plain(box.informativeText())}"})
        box.done(0)

    def fake_question(parent: Any, title: str, text: str, *args: Any, **kwargs: Any) -> Any:
        shown.append({"kind": "question", "title": title, "text": text})
        return QtWidgets.QMessageBox.StandardButton.No

    def fake_exec(box: QtWidgets.QMessageBox) -> int:
        # a modal choice (data that does not fit the network: open an image, a dataset
        # sample, or keep what was there); no button clicked takes its default, "keep"
        shown.append({"kind": "choice", "title": box.windowTitle(),
                      "text": f"{plain(box.text())}\n{plain(box.informativeText())}"})
        return 0

    monkeypatch.setattr(QtWidgets.QMessageBox, "open", fake_open)
    monkeypatch.setattr(QtWidgets.QMessageBox, "question", fake_question)
    monkeypatch.setattr(QtWidgets.QMessageBox, "exec", fake_exec)
    return shown


@pytest.fixture
def window(qtbot: Any, qsettings_tmp: None, kit: Kit) -> Iterator[Callable[..., Any]]:
    """make(request) -> a shown MainWindow on the tiny network, booted and prepared.

    Every window is closed at the end and its solver thread must have finished.
    """
    from lbi_gui.window.main_window import MainWindow

    made: list[Any] = []

    def make(request: dict[str, Any] | None = None, wait: bool = True) -> Any:
        win = MainWindow(request or kit.base_request(max_iter=20), restore_layout=False)
        qtbot.addWidget(win)
        win.show()
        made.append(win)
        if wait:
            wait_ready(qtbot, win)
        return win

    yield make
    for win in made:
        win.close()
        assert win.controller.thread.wait(10000)
        assert win.controller.thread.isFinished()


def wait_ready(qtbot: Any, win: Any, timeout: int = 60000) -> None:
    """Until the engine is loaded and the problem on screen is prepared."""
    qtbot.waitUntil(lambda: win.view.info is not None and win.controller.state == "idle",
                    timeout=timeout)


def wait_idle(qtbot: Any, win: Any, timeout: int = 60000) -> None:
    qtbot.waitUntil(lambda: not win.controller.running and win.controller.state == "idle",
                    timeout=timeout)


def os_threads() -> int:
    """Threads of this process as the kernel sees them (Qt, torch and Python threads)."""
    return len(os.listdir("/proc/self/task"))


def leftover_files(folder: Path) -> list[str]:
    """Temporary or partial files an atomic writer might leave behind."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or
                  p.suffix in (".tmp", ".part"))
