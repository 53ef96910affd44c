"""File → Import network…: convert a model file once into NAME.safetensors + NAME.json.

The dialog asks for the model file, the output folder and name (and, only where the file does
not record it, the input shape); the conversion (:func:`lbi_engine.models.convert.convert_model`,
which imports torch and reads the file) runs in a QThread so the window keeps painting. On
success the dialog emits ``converted(card_path)`` and the window opens the converted network.
A network that adds or concatenates tensors (a graph) has no card form: it is opened from its
own file, exactly as File → Open network opens it, and ``note`` says so.
Errors are shown in the dialog itself, one line saying what is wrong and what to do. Running
code from a pickled model needs the box "Allow running code from this file", unticked by
default and reset for every file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtWidgets

from lbi_gui.dialogs._background import JobDialog, failure_text

MODEL_FILTER = ("Models (*.onnx *.pt2 *.pt *.pth *.safetensors *.json *.ts *.bin *.ckpt);;"
                "All files (*)")


class _Converter(QtCore.QObject):
    """Lives in the worker thread; ``run`` converts and reports through queued signals."""

    done = QtCore.Signal(object)  # lbi_engine.models.convert.ConvertResult
    failed = QtCore.Signal(str)
    graph = QtCore.Signal(str)  # a graph network: not converted, opened from its file

    @QtCore.Slot(object)
    def run(self, job: dict[str, Any]) -> None:
        from lbi_engine.errors import UnsafeFileError
        from lbi_engine.models.convert import GraphNetworkError, convert_model

        try:
            self.done.emit(convert_model(**job))
        except GraphNetworkError:  # File → Open network reads it: so does Import
            self.graph.emit(str(job["source"]))
        except UnsafeFileError:
            self.failed.emit(f"{Path(job['source']).name} is loaded by running code stored in "
                             "it (a pickled module or TorchScript). Tick \u201cAllow running code "
                             "from this file\u201d only if you made it or fully trust its "
                             "source; better, export the model to ONNX (torch.onnx.export) or "
                             ".pt2 (torch.export.save), which lbi reads without running code.")
        except Exception as exc:  # a bug too: still tell the user, keep the window
            self.failed.emit(failure_text(exc, "conversion"))


class ImportNetworkDialog(JobDialog):
    """Model file + output folder + name -> converted pair; emits ``converted(card_path)``."""

    converted = QtCore.Signal(str)
    note = QtCore.Signal(str)  # what happened, for the window's status bar

    def __init__(self, parent: QtWidgets.QWidget | None = None, source: str = "",
                 out_dir: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Import network")
        self.source = QtWidgets.QLineEdit(source)
        self.out_dir = QtWidgets.QLineEdit(out_dir)
        self.name = QtWidgets.QLineEdit()
        self.shape = QtWidgets.QLineEdit()
        self.shape.setPlaceholderText("only if the file does not say it, e.g. 1,28,28")
        self.allow_code = QtWidgets.QCheckBox("Allow running code from this file (pickled "
                                              "whole models only; trusted files only)")
        self.force = QtWidgets.QCheckBox("Replace existing files")
        self.status = QtWidgets.QLabel("Converts the file once into NAME.safetensors + "
                                       "NAME.json (the zoo's format), then opens it.")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        form = QtWidgets.QFormLayout()
        form.addRow("Model file", self._with_browse(self.source, self._browse_source))
        form.addRow("Output folder", self._with_browse(self.out_dir, self._browse_out))
        form.addRow("Name", self.name)
        form.addRow("Input shape", self.shape)
        buttons = QtWidgets.QDialogButtonBox()
        self.convert_button = buttons.addButton("Convert and open",
                                                QtWidgets.QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.start)
        buttons.rejected.connect(self.reject)
        layout = QtWidgets.QVBoxLayout(self)
        for item in (form, self.allow_code, self.force, self.status, buttons):
            layout.addLayout(item) if isinstance(item, QtWidgets.QLayout) else \
                layout.addWidget(item)
        self.source.textChanged.connect(self._source_changed)
        self._source_changed(source)
        worker = _Converter()
        self.attach(worker, self._done)
        worker.graph.connect(self._open_graph)  # a method of a GUI-thread object: queued

    def _with_browse(self, edit: QtWidgets.QLineEdit, slot: Any) -> QtWidgets.QWidget:
        box = QtWidgets.QWidget()
        row = QtWidgets.QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(edit)
        button = QtWidgets.QPushButton("Browse…")
        button.clicked.connect(slot)
        row.addWidget(button)
        return box

    def _browse_source(self) -> None:
        from lbi_gui.settings import last_dir, remember_dir

        start = self.source.text().strip() or last_dir("network")
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Model file to import", start,
                                                        MODEL_FILTER)
        if path:
            remember_dir("network", path)
            self.source.setText(path)

    def _browse_out(self) -> None:
        from lbi_gui.settings import last_dir, remember_dir

        start = self.out_dir.text().strip() or last_dir("import")
        path = QtWidgets.QFileDialog.getExistingDirectory(self, "Output folder", start)
        if path:
            remember_dir("import", path)
            self.out_dir.setText(path)

    def _source_changed(self, text: str) -> None:
        p = Path(text)
        self.allow_code.setChecked(False)  # consent is per file
        if text:
            self.name.setText(p.stem)
            if not self.out_dir.text():
                self.out_dir.setText(str(p.parent / "lbi-networks"))

    def job(self) -> dict[str, Any]:
        """The convert_model arguments from the fields; ValueError names a bad field."""
        source, out = self.source.text().strip(), self.out_dir.text().strip()
        if not source:
            raise ValueError("Choose the model file to import.")
        if not out:
            raise ValueError("Choose an output folder.")
        shape = None
        if self.shape.text().strip():
            parts = self.shape.text().replace("x", ",").split(",")
            try:
                shape = tuple(int(v) for v in parts if v.strip())
            except ValueError:
                raise ValueError(f"Input shape {self.shape.text()!r} is not like 1,28,28.") \
                    from None
        return {"source": source, "out_dir": out, "name": self.name.text().strip() or None,
                "input_shape": shape, "allow_pickle": self.allow_code.isChecked(),
                "force": self.force.isChecked()}

    def job_started(self, job: dict[str, Any]) -> None:
        self.convert_button.setEnabled(False)
        self.status.setText(f"Converting {Path(job['source']).name}…")

    def job_ended(self) -> None:
        super().job_ended()
        self.convert_button.setEnabled(True)

    def _done(self, result: Any) -> None:
        self.succeed(str(result.card_path), f"Wrote {result.weights.name} and "
                     f"{result.card_path.name} (checked: max relative error "
                     f"{result.max_rel_error:.1e}).", self.converted)

    def _open_graph(self, source: str) -> None:
        """A network with residual additions or concatenations: a card holds only a chain of
        layers, so the file is opened and lifted as it is, as File → Open network does."""
        text = (f"{Path(source).name} adds or concatenates tensors (a graph), which a card "
                "cannot hold: it is opened from the file itself, as File → Open network does.")
        self.succeed(source, text, self.converted)
        self.note.emit(text)

    def done(self, code: int) -> None:  # accept/reject/close: let a conversion finish first
        self.stop_thread()
        super().done(code)


def open_import_dialog(window: Any) -> ImportNetworkDialog:
    """Show the dialog for ``window``; a converted network is opened (its file commands)."""
    from lbi_gui.settings import last_dir

    dialog = ImportNetworkDialog(window, out_dir="")
    dialog.source.setText("")
    dialog.out_dir.setPlaceholderText(last_dir("network"))
    dialog.converted.connect(window.files.open_network)
    dialog.note.connect(lambda text: window.statusBar().showMessage(text, 15000))
    dialog.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    return dialog
