"""Every message box of the application goes through here.

Why one place: errors must always say cause and fix, never show a bare traceback up front
(it goes into "Show Details…"), and must never block the event loop (error boxes are
window-modal and opened with ``open()``, so a solver keeps being drawn behind them). Questions
that need an answer use ``QMessageBox.question`` (tests monkeypatch it).
"""

from __future__ import annotations

import sys
import traceback
from types import TracebackType

from PySide6 import QtCore, QtWidgets

#: Open error boxes, newest last (tests and the status bar read this).
OPEN_ERRORS: list[QtWidgets.QMessageBox] = []


def show_error(parent: QtWidgets.QWidget | None, title: str, message: str,
               detail: str | None = None, fix: str | None = None) -> QtWidgets.QMessageBox:
    """Show an error (cause, then what to do) without blocking; returns the box."""
    box = QtWidgets.QMessageBox(parent)
    box.setIcon(QtWidgets.QMessageBox.Icon.Warning)
    box.setWindowTitle(title)
    box.setText(f"<b>{_escape(title)}</b>")
    box.setInformativeText(_escape(message) + (f"<br><br>{_escape(fix)}" if fix else ""))
    if detail:
        box.setDetailedText(detail)
    box.setStandardButtons(QtWidgets.QMessageBox.StandardButton.Ok)
    box.setWindowModality(QtCore.Qt.WindowModality.WindowModal)
    box.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
    box.setObjectName("lbiErrorBox")
    OPEN_ERRORS.append(box)
    box.destroyed.connect(lambda *_: _forget(box))
    box.finished.connect(lambda *_: _forget(box))
    box.open()
    return box


def _forget(box: QtWidgets.QMessageBox) -> None:
    if box in OPEN_ERRORS:
        OPEN_ERRORS.remove(box)


def _escape(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", "<br>"))


def confirm(parent: QtWidgets.QWidget | None, title: str, text: str,
            yes: str = "Yes", default_no: bool = True) -> bool:
    """Ask a yes/no question; True only for an explicit yes."""
    buttons = QtWidgets.QMessageBox.StandardButton
    answer = QtWidgets.QMessageBox.question(parent, title, text, buttons.Yes | buttons.No,
                                            buttons.No if default_no else buttons.Yes)
    return answer == buttons.Yes


def ask_choice(parent: QtWidgets.QWidget | None, title: str, text: str,
               choices: list[tuple[str, str]]) -> str:
    """Ask which of ``choices`` ([(key, button label)], the last one the default and the
    answer to Esc) to take; returns its key."""
    box = QtWidgets.QMessageBox(parent)
    box.setIcon(QtWidgets.QMessageBox.Icon.Question)
    box.setWindowTitle(title)
    box.setText(f"<b>{_escape(title)}</b>")
    box.setInformativeText(_escape(text))
    buttons: list[tuple[QtWidgets.QPushButton, str]] = []
    for key, label in choices:
        role = QtWidgets.QMessageBox.ButtonRole.AcceptRole
        buttons.append((box.addButton(label, role), key))
    last = buttons[-1][0]
    box.setDefaultButton(last)
    box.setEscapeButton(last)
    box.exec()
    clicked = box.clickedButton()
    return next((key for button, key in buttons if button is clicked), choices[-1][0])


def ask_unsaved_runs(parent: QtWidgets.QWidget | None, count: int, running: bool = False,
                     action: str = "quitting") -> str:
    """Before ``action`` (quitting, opening a session) that would lose ``count`` finished
    runs not in a saved session and/or a live run: "save", "discard" or "cancel"."""
    buttons = QtWidgets.QMessageBox.StandardButton
    box = QtWidgets.QMessageBox(parent)
    box.setIcon(QtWidgets.QMessageBox.Icon.Question)
    box.setWindowTitle("Unsaved runs" if count else "A run is going")
    lines = []
    if count:
        lines.append(f"{count} finished run{'s are' if count != 1 else ' is'} not saved in "
                     "a session.")
    if running:
        lines.append("A run is going: it will be stopped and its result lost.")
    box.setText(" ".join(lines))
    if count:
        box.setInformativeText(f"Save the runs before {action}?")
        box.setStandardButtons(buttons.Save | buttons.Discard | buttons.Cancel)
        box.setDefaultButton(buttons.Save)
    else:
        box.setInformativeText(f"Stop the run and go on {action}?")
        box.setStandardButtons(buttons.Discard | buttons.Cancel)
        box.button(buttons.Discard).setText("Stop the run")
        box.setDefaultButton(buttons.Cancel)
    answer = box.exec()
    return {buttons.Save: "save", buttons.Discard: "discard"}.get(
        buttons(answer), "cancel")


def confirm_overwrite(parent: QtWidgets.QWidget | None, paths: list[str]) -> bool:
    """Ask before replacing existing files (lists them)."""
    names = "\n".join(f"  • {p}" for p in paths[:12])
    more = f"\n  … and {len(paths) - 12} more" if len(paths) > 12 else ""
    return confirm(parent, "Replace existing files?",
                   f"These files already exist:\n{names}{more}\n\nReplace them?")


def confirm_pickle(parent: QtWidgets.QWidget | None, path: str, message: str) -> bool:
    """Explain why a code-running model file (pickle, TorchScript) is dangerous; ask consent.

    The answer holds for this file in this window only; sessions never store it.
    """
    text = (f"{path}\n\nOpening this file runs code stored inside it (a pickled Python "
            "object, or a TorchScript program whose loading code runs while it is read). "
            "That code can do anything your user account can do: read, change or delete "
            "files, install programs.\n\nOnly continue if you made this file yourself or "
            "fully trust where it came from. Safe formats that never run code: safetensors "
            "or a state dict with a model card, ONNX, torch.export (.pt2); File → Import "
            f"network… (or `lbi convert`) turns a trusted file into one.\n\nDetails: {message}\n\n"
            "Load it anyway and run its code?")
    return confirm(parent, "Run code from this model file?", text)


def install_excepthook(window_getter: object) -> None:
    """Show unexpected exceptions in a dialog instead of killing the window.

    ``window_getter`` returns the parent widget (or None). The previous hook still runs, so
    the traceback also reaches stderr for bug reports.
    """
    previous = sys.excepthook

    def hook(etype: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        try:
            previous(etype, value, tb)
        except Exception:  # a broken previous hook must not hide the dialog
            pass
        if issubclass(etype, KeyboardInterrupt):
            app = QtWidgets.QApplication.instance()
            if app is not None:
                app.quit()
            return
        parent = window_getter() if callable(window_getter) else None
        detail = "".join(traceback.format_exception(etype, value, tb))
        show_error(parent, "Unexpected error", f"{etype.__name__}: {value}", detail=detail,
                   fix="The window is still usable. If this keeps happening, please report "
                       "it with the details below.")

    sys.excepthook = hook
