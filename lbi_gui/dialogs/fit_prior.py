"""File → Fit a feature prior…: fit the learned prior layer-wise inversion needs, from a folder
of the user's clean images (or a .npy array), without the command line.

The fit (:func:`lbi_engine.feature_prior_fit.fit_feature_prior_files`, the same function
``lbi feature-prior`` runs) loads the network, reads the samples and fits; it runs in a
QThread so the window keeps painting, and reports its stage in the dialog. A problem (no
images in the folder, images of another size that cannot be resized, too little memory,
files that exist) is shown in the dialog in one line, and nothing is written. On success the
dialog emits ``fitted(card_path)`` and the window chooses the prior for the network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtWidgets

from lbi_gui.dialogs._background import JobDialog, failure_text

SAMPLES_FILTER = "Arrays (*.npy);;All files (*)"


class _Fitter(QtCore.QObject):
    """Lives in the worker thread; ``run`` fits and reports through queued signals."""

    stage = QtCore.Signal(str)
    done = QtCore.Signal(object)  # lbi_engine.feature_prior_fit.FittedPriorFiles
    failed = QtCore.Signal(str)

    @QtCore.Slot(object)
    def run(self, job: dict[str, Any]) -> None:
        try:
            from lbi_engine.feature_prior_fit import fit_feature_prior_files

            self.done.emit(fit_feature_prior_files(**job, stage=self.stage.emit))
        except Exception as exc:  # a bug too: still tell the user, keep the window
            self.failed.emit(failure_text(exc, "the fit"))


def default_output(network: str, folder: str) -> str:
    """BASE of the prior: beside a network file (NET.prior), else in ``folder``."""
    path = Path(network)
    if path.suffix:
        return str(path.with_suffix("")) + ".prior"
    return str(Path(folder) / f"{network}.prior")


class FitPriorDialog(JobDialog):
    """Samples + output -> BASE.safetensors + BASE.json; emits ``fitted(card_path)``."""

    fitted = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None, network: str, *,
                 input_shape: tuple[int, ...] | None = None, allow_code: bool = False,
                 zoo: bool = False, folder: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Fit a feature prior")
        self.network, self.input_shape, self.allow_code, self.zoo = (
            network, input_shape, allow_code, zoo)
        self.samples = QtWidgets.QLineEdit()
        self.samples.setPlaceholderText("the bundled training images" if zoo else
                                        "a folder of clean images like the ones you invert")
        self.out = QtWidgets.QLineEdit(default_output(network, folder))
        self.rank = QtWidgets.QSpinBox()
        self.rank.setRange(1, 1024)
        self.rank.setValue(96)
        self.rank.setToolTip("Rank of the covariance's low-rank part (the CLI's --rank)")
        self.force = QtWidgets.QCheckBox("Replace existing files")
        self.status = QtWidgets.QLabel(
            f"Layer-wise inversion of {Path(network).name} needs a prior on its hidden "
            "features: it is fitted on clean examples of your images (a few hundred are "
            "plenty; each is resized to the network's input), then chosen for this network.")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.busy = QtWidgets.QProgressBar()
        self.busy.setRange(0, 0)  # the fit reports stages, not a fraction
        self.busy.hide()
        browse = QtWidgets.QHBoxLayout()
        browse.addWidget(self.samples, 1)
        for text, slot in (("Folder…", self._browse_folder), ("Array…", self._browse_array)):
            button = QtWidgets.QPushButton(text)
            button.clicked.connect(slot)
            browse.addWidget(button)
        form = QtWidgets.QFormLayout()
        form.addRow("Network", QtWidgets.QLabel(Path(network).name))
        form.addRow("Samples", browse)
        form.addRow("Save as", self.out)
        form.addRow("Rank", self.rank)
        buttons = QtWidgets.QDialogButtonBox()
        self.fit_button = buttons.addButton("Fit and use",
                                            QtWidgets.QDialogButtonBox.ButtonRole.AcceptRole)
        self.close_button = buttons.addButton(QtWidgets.QDialogButtonBox.StandardButton.Close)
        buttons.accepted.connect(self.start)
        buttons.rejected.connect(self.reject)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(form)
        for widget in (self.force, self.status, self.busy, buttons):
            layout.addWidget(widget)
        worker = _Fitter()
        self.attach(worker, self._done)
        worker.stage.connect(self._stage)  # a method of a GUI-thread object: queued

    def _browse_folder(self) -> None:
        from lbi_gui.settings import last_dir, remember_dir

        path = QtWidgets.QFileDialog.getExistingDirectory(self, "Folder of clean images",
                                                          last_dir("samples"))
        if path:
            remember_dir("samples", path)
            self.samples.setText(path)

    def _browse_array(self) -> None:
        from lbi_gui.settings import last_dir, remember_dir

        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Array of clean inputs (N, …)",
                                                        last_dir("samples"), SAMPLES_FILTER)
        if path:
            remember_dir("samples", path)
            self.samples.setText(path)

    def job(self) -> dict[str, Any]:
        """The fit's arguments from the fields; ValueError says what to fill in."""
        samples, out = self.samples.text().strip(), self.out.text().strip()
        if not samples and not self.zoo:
            raise ValueError("Choose a folder of clean images (or a .npy array) to fit on.")
        if samples and not Path(samples).exists():
            raise ValueError(f"{samples} does not exist; choose a folder of images or a .npy "
                             "array.")
        if not out:
            raise ValueError("Choose where to save the prior (Save as).")
        return {"network": self.network, "out": out, "samples": samples or None,
                "input_shape": self.input_shape, "allow_code": self.allow_code,
                "rank": self.rank.value(), "overwrite": self.force.isChecked()}

    def job_started(self, job: dict[str, Any]) -> None:
        for button in (self.fit_button, self.close_button):
            button.setEnabled(False)  # the fit runs to its end (seconds to a few minutes)
        self.busy.show()
        self.status.setText(f"Fitting the feature prior of {Path(self.network).name}…")

    def _stage(self, text: str) -> None:
        self.status.setText(f"Fitting the feature prior of {Path(self.network).name}: "
                            f"{text}…")

    def job_ended(self) -> None:
        super().job_ended()
        self.busy.hide()
        for button in (self.fit_button, self.close_button):
            button.setEnabled(True)

    def _done(self, result: Any) -> None:
        self.succeed(str(result.card), f"Wrote {result.tensors.name} and {result.card.name}: "
                     f"{len(result.sizes)} feature prior(s), rank {result.rank}.", self.fitted)

    def reject(self) -> None:  # Esc / the window's close box: not while the fit runs
        if not self.running:
            super().reject()

    def done(self, code: int) -> None:
        if self.running:
            return
        super().done(code)


def open_fit_prior_dialog(window: Any) -> FitPriorDialog:
    """Show the dialog for the network on ``window``; a fitted prior is chosen for it."""
    from lbi_gui.settings import last_dir

    request = window.params.current_request()
    network = str(request.get("network") or "")
    shape = request.get("input_shape")
    dialog = FitPriorDialog(window, network, input_shape=tuple(shape) if shape else None,
                            allow_code=bool(request.get("allow_pickle")),
                            zoo=not window.network_panel.is_file(network),
                            folder=last_dir("prior"))
    dialog.fitted.connect(window.files.choose_feature_prior)
    dialog.fitted.connect(lambda card: window.statusBar().showMessage(
        f"Feature prior {Path(card).name} fitted and chosen for layer-wise inversion", 10000))
    dialog.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    return dialog
