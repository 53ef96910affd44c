"""The export dialog plans the files: every format, the preview of what is already there."""

from __future__ import annotations


def test_export_dialog_plans_the_files(qtbot, tmp_path) -> None:
    from lbi_gui.dialogs.export_dialog import ExportDialog
    from lbi_gui.export import FORMATS

    dialog = ExportDialog(None, str(tmp_path), "digit", "#1 joint")
    qtbot.addWidget(dialog)
    assert set(dialog.paths()) == set(FORMATS)
    assert dialog.paths()["png16"] == tmp_path / "digit_16bit.png"
    dialog.boxes["plots_svg"].setChecked(False)
    assert "plots_svg" not in dialog.formats()
    assert dialog.buttons_ok().isEnabled()
    (tmp_path / "digit.npy").write_bytes(b"x")
    dialog.stem.setText("digi")
    dialog.stem.setText("digit")  # typing refreshes the preview
    assert "Already there" in dialog.preview.text() and "digit.npy" in dialog.preview.text()
    dialog.folder.setText(str(tmp_path / "missing"))
    assert not dialog.buttons_ok().isEnabled()
