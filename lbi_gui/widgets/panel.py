"""Shared shape of the parameter panels: ``values()``, ``set_values()`` and ``changed``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from PySide6 import QtCore, QtWidgets


class ParamPanel(QtWidgets.QWidget):
    """A panel that edits some fields of the request dict.

    ``changed(key)`` fires on user edits only: :meth:`set_values` runs inside :meth:`quiet`, so
    loading a session or applying command-line options never triggers runs or restarts.
    """

    changed = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self._quiet = 0

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1

    def _emit(self, key: str) -> None:
        if not self._quiet:
            self.changed.emit(key)

    def set_form(self, lay: QtWidgets.QFormLayout) -> None:
        """Use ``lay`` as the panel's content, top-aligned (spare height stays below)."""
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addLayout(lay)
        outer.addStretch(1)

    def values(self) -> dict[str, Any]:
        """The request fields this panel owns."""
        return {}

    def set_values(self, values: dict[str, Any]) -> None:
        """Show ``values`` (only the keys this panel owns are read) without emitting."""


def form() -> QtWidgets.QFormLayout:
    """A compact form layout with labels right-aligned, as in most scientific tools."""
    lay = QtWidgets.QFormLayout()
    lay.setLabelAlignment(QtCore.Qt.AlignmentFlag.AlignRight)
    lay.setFieldGrowthPolicy(QtWidgets.QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
    lay.setContentsMargins(6, 6, 6, 6)
    lay.setVerticalSpacing(4)
    return lay


def set_combo_data(combo: QtWidgets.QComboBox, data: Any) -> bool:
    """Select the item whose userData is ``data``; False if there is none."""
    idx = combo.findData(data)
    if idx >= 0:
        combo.setCurrentIndex(idx)
        return True
    return False


def info_label(text: str = "") -> QtWidgets.QLabel:
    """A selectable, word-wrapped label for read-only facts (δ, shapes, preprocessing)."""
    lab = QtWidgets.QLabel(text)
    lab.setWordWrap(True)
    lab.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
    return lab


def tool_button(text: str) -> QtWidgets.QToolButton:
    """A tool button showing ``text`` (PySide6 accepts ``text=`` as a keyword, but its type
    stubs do not declare Qt properties as keywords)."""
    button = QtWidgets.QToolButton()
    button.setText(text)
    return button
