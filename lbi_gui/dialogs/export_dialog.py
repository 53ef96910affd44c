"""The export dialog: which formats, which folder, which base name."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtWidgets

from lbi_gui.export import FORMATS, planned_paths


class ExportDialog(QtWidgets.QDialog):
    """Pick formats, a folder and a file stem; shows the files that will be written."""

    def __init__(self, parent: QtWidgets.QWidget | None, folder: str, stem: str,
                 run_label: str, chosen: list[str] | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export result")
        self.folder = QtWidgets.QLineEdit(folder)
        browse = QtWidgets.QPushButton("Browse…")
        self.stem = QtWidgets.QLineEdit(stem)
        self.boxes: dict[str, QtWidgets.QCheckBox] = {}
        group = QtWidgets.QGroupBox(f"Export {run_label}")
        g = QtWidgets.QVBoxLayout(group)
        for key, (_suffix, label) in FORMATS.items():
            box = QtWidgets.QCheckBox(label)
            box.setChecked(chosen is None or key in chosen)
            box.toggled.connect(self._preview)
            g.addWidget(box)
            self.boxes[key] = box
        self.preview = QtWidgets.QLabel()
        self.preview.setWordWrap(True)
        self.preview.setStyleSheet("color: #555;")
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Ok
                                             | QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QtWidgets.QDialogButtonBox.StandardButton.Ok).setText("Export")
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.folder, 1)
        row.addWidget(browse)
        form = QtWidgets.QFormLayout()
        form.addRow("Folder", row)
        form.addRow("File name", self.stem)
        lay = QtWidgets.QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(group)
        lay.addWidget(self.preview)
        lay.addWidget(buttons)
        browse.clicked.connect(self._browse)
        self.folder.textChanged.connect(self._preview)
        self.stem.textChanged.connect(self._preview)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self._preview()

    def formats(self) -> list[str]:
        return [k for k, box in self.boxes.items() if box.isChecked()]

    def paths(self) -> dict[str, Path]:
        return planned_paths(self.folder.text().strip(), self.stem.text().strip(),
                             self.formats())

    def _browse(self) -> None:
        folder = QtWidgets.QFileDialog.getExistingDirectory(self, "Export folder",
                                                            self.folder.text())
        if folder:
            self.folder.setText(folder)

    def _preview(self) -> None:
        names = [p.name for p in self.paths().values()]
        exists = [p.name for p in self.paths().values() if p.exists()]
        text = "Writes: " + ", ".join(names) if names else "Choose at least one format."
        if exists:
            text += f"<br><b>Already there (you will be asked): {', '.join(exists)}</b>"
        self.preview.setText(text)
        ok = self.buttons_ok()
        if ok is not None:
            ok.setEnabled(bool(names) and bool(self.stem.text().strip())
                          and Path(self.folder.text().strip()).is_dir())

    def buttons_ok(self) -> QtWidgets.QPushButton | None:
        box = self.findChild(QtWidgets.QDialogButtonBox)
        return None if box is None else box.button(QtWidgets.QDialogButtonBox.StandardButton.Ok)
