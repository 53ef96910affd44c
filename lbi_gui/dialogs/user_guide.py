"""Help → User guide: docs/USER_GUIDE.md shown in the app (Markdown, no browser needed)."""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

GUIDE_NAME = "USER_GUIDE.md"


def guide_path() -> Path | None:
    """docs/USER_GUIDE.md of a source checkout or editable install, of a frozen bundle, or
    of an installed wheel (copied into ``lbi_resources/docs/`` at build time: setup.py)."""
    roots = [Path(__file__).resolve().parents[2]]
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle:
        roots.insert(0, Path(bundle))
    try:
        from lbi_engine.data.resource_files import resources_dir

        roots.append(resources_dir())
    except Exception:
        pass
    for root in roots:
        path = root / "docs" / GUIDE_NAME
        if path.is_file():
            return path
    return None


class UserGuide(QtWidgets.QDialog):
    """A non-modal window with the guide; links to web pages open in the browser."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("User guide")
        self.browser = QtWidgets.QTextBrowser()
        self.browser.setOpenExternalLinks(True)
        path = guide_path()
        if path is None:
            self.browser.setPlainText("The user guide (docs/USER_GUIDE.md) is not installed "
                                      "with this copy of lbi; it is in the project's "
                                      "repository.")
        else:
            self.browser.setMarkdown(path.read_text(encoding="utf-8"))
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        lay = QtWidgets.QVBoxLayout(self)
        lay.addWidget(self.browser)
        lay.addWidget(buttons)
        screen = (parent.screen() if parent is not None else None) or \
            QtGui.QGuiApplication.primaryScreen()
        avail = screen.availableGeometry() if screen else QtCore.QRect(0, 0, 1024, 700)
        self.resize(min(760, avail.width() - 40), min(900, avail.height() - 80))

    def text(self) -> str:
        return self.browser.toPlainText()


def show_user_guide(parent: QtWidgets.QWidget, guide: UserGuide | None = None) -> UserGuide:
    """Show ``guide`` (the one opened before: one window, raised again on the next F1) or a
    new one; returns it for the caller to keep."""
    if guide is None:
        guide = UserGuide(parent)
    guide.show()
    guide.raise_()
    guide.activateWindow()
    return guide
