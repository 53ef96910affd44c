"""The import and fit-prior dialogs' Browse buttons start in the folder last used for their
kind (QSettings), not in the home folder, and remember the folder chosen."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtWidgets

from lbi_gui.dialogs.fit_prior import FitPriorDialog
from lbi_gui.dialogs.import_network import ImportNetworkDialog
from lbi_gui.settings import last_dir, remember_dir


def test_import_browse_starts_in_the_last_network_folder(qtbot, tmp_path, monkeypatch):
    nets, out = tmp_path / "nets", tmp_path / "converted"
    nets.mkdir()
    out.mkdir()
    remember_dir("network", nets / "old.onnx")
    remember_dir("import", out)
    started: list[str] = []

    def pick_file(_parent, _title, start, _filter):
        started.append(start)
        return str(nets / "new.onnx"), ""

    def pick_folder(_parent, _title, start):
        started.append(start)
        return str(out)

    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName", staticmethod(pick_file))
    monkeypatch.setattr(QtWidgets.QFileDialog, "getExistingDirectory",
                        staticmethod(pick_folder))
    dialog = ImportNetworkDialog(None)
    qtbot.addWidget(dialog)
    dialog._browse_source()
    dialog.out_dir.setText("")
    dialog._browse_out()
    assert started == [str(nets), str(out)]
    assert dialog.source.text() == str(nets / "new.onnx") and dialog.out_dir.text() == str(out)


def test_fit_prior_browse_remembers_the_samples_folder(qtbot, tmp_path, monkeypatch):
    photos = tmp_path / "photos"
    photos.mkdir()
    started: list[str] = []

    def pick_folder(_parent, _title, start):
        started.append(start)
        return str(photos)

    monkeypatch.setattr(QtWidgets.QFileDialog, "getExistingDirectory",
                        staticmethod(pick_folder))
    dialog = FitPriorDialog(None, str(tmp_path / "net.onnx"))
    qtbot.addWidget(dialog)
    dialog._browse_folder()
    assert dialog.samples.text() == str(photos) and last_dir("samples") == str(photos)
    dialog._browse_folder()
    assert started[-1] == str(photos)  # the second time it starts where the first ended
    assert Path(dialog.out.text()) == tmp_path / "net.prior"
