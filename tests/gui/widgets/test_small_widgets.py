"""Small widgets and pure helpers: number inputs, panels, image encoders, curve CSV."""

from __future__ import annotations

import csv
import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from lbi_gui.export import png16_bytes
from lbi_gui.imaging import error_map, to_uint8, to_view
from lbi_gui.model.runs import CurveStore
from lbi_gui.widgets.number_inputs import LogSlider, ScientificSpinBox
from lbi_gui.widgets.regularisation_panel import RegularisationPanel
from lbi_gui.widgets.solver_panel import SolverPanel


def test_log_slider_maps_decades_and_never_echoes(qtbot) -> None:
    w = LogSlider(1e-6, 10.0, 9e-3)
    qtbot.addWidget(w)
    seen: list[float] = []
    w.valueChanged.connect(seen.append)
    w.setValue(1e-3)  # programmatic: no signal
    assert seen == []
    # 1e-3 is 3 of 7 decades above 1e-6
    assert w.slider.value() == round(3 / 7 * LogSlider.STEPS)
    w.slider.setValue(LogSlider.STEPS)
    assert seen[-1] == pytest.approx(10.0)
    w.slider.setValue(0)
    assert seen[-1] == pytest.approx(1e-6)
    w.spin.setValue(0.02)
    assert seen[-1] == pytest.approx(0.02)
    assert w.spin.text() == "0.02"


def test_scientific_spin_box_shows_small_numbers_and_steps_by_factor(qtbot) -> None:
    box = ScientificSpinBox(1e-9, 1.0, 1e-5)
    qtbot.addWidget(box)
    assert box.text() == "1e-05"
    box.stepBy(10)  # ten steps of 10**0.1 = one decade
    assert box.value() == pytest.approx(1e-4, rel=1e-9)
    assert box.valueFromText("3.5e-7") == pytest.approx(3.5e-7)


def test_alpha_from_delta_uses_c_times_delta(qtbot) -> None:
    panel = RegularisationPanel()
    qtbot.addWidget(panel)
    assert not panel.from_delta.isEnabled()  # no δ known yet
    panel.set_delta(0.25)
    panel.c_factor.setValue(0.04)
    with qtbot.waitSignal(panel.changed) as sig:
        panel.from_delta.click()
    assert sig.args == ["alpha"]
    assert panel.values()["alpha"] == pytest.approx(0.01)


def test_per_layer_alphas_only_for_layerwise(qtbot) -> None:
    panel = RegularisationPanel()
    qtbot.addWidget(panel)
    panel.set_layer_count(3)
    panel.set_method("joint")
    assert not panel.per_layer.isEnabled()
    panel.set_method("layerwise")
    panel.per_layer.setChecked(True)
    panel.layer_table.item(1, 0).setText("0.5")
    assert panel.values()["layer_alphas"] == pytest.approx([9e-3, 0.5, 9e-3])
    panel.per_layer.setChecked(False)
    assert panel.values()["layer_alphas"] is None


def test_joint_layerwise_switch_is_one_click(qtbot) -> None:
    panel = SolverPanel()
    qtbot.addWidget(panel)
    panel.set_values({"method": "joint"})
    with qtbot.waitSignal(panel.changed):
        panel.switch.click()
    assert panel.values()["method"] == "layerwise"
    assert "Joint" in panel.switch.text()
    panel.switch.click()
    assert panel.values()["method"] == "joint"


def test_to_view_layouts() -> None:
    assert to_view(np.zeros((28, 28))).shape == (28, 28)
    assert to_view(np.zeros((1, 28, 28))).shape == (28, 28)
    assert to_view(np.zeros((1, 1, 28, 28))).shape == (28, 28)
    assert to_view(np.zeros((3, 8, 9))).shape == (8, 9, 3)
    assert to_view(np.zeros(10)).shape == (1, 10)
    assert error_map(np.ones((1, 4, 4)), np.zeros((4, 4))).sum() == 16
    assert error_map(np.ones((4, 4)), np.zeros((5, 5))) is None


def test_uint8_uses_levels() -> None:
    img = np.array([[-1.0, 0.0, 0.25, 0.5, 2.0]])
    assert to_uint8(img, (0.0, 0.5)).tolist() == [[0, 0, 128, 255, 255]]


def _decode_png16(data: bytes) -> np.ndarray:
    """Independent reader for filter-0 16-bit PNGs (checks the chunk CRCs too)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        tag, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert crc == zlib.crc32(tag + body) & 0xFFFFFFFF
        if tag == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif tag == b"IDAT":
            idat += body
        pos += 12 + length
    w, h, depth, colour = header[:4]
    assert depth == 16
    channels = {0: 1, 2: 3}[colour]
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * channels * 2)
    assert (raw[:, 0] == 0).all()
    out = raw[:, 1:].copy().view(">u2").astype(np.uint16)
    return out.reshape(h, w) if channels == 1 else out.reshape(h, w, 3)


def test_png16_grey_and_rgb_round_trip() -> None:
    rng = np.random.default_rng(0)
    grey = rng.integers(0, 65536, size=(7, 11), dtype=np.uint16)
    data = png16_bytes(grey)
    np.testing.assert_array_equal(_decode_png16(data), grey)
    with Image.open(io.BytesIO(data)) as im:  # and a reader we did not write
        np.testing.assert_array_equal(np.asarray(im).astype(np.uint16), grey)
    rgb = rng.integers(0, 65536, size=(5, 6, 3), dtype=np.uint16)
    np.testing.assert_array_equal(_decode_png16(png16_bytes(rgb)), rgb)


def test_curve_store_csv_and_arrays_round_trip() -> None:
    store = CurveStore()
    pts = [{"iteration": k, "objective": 1.0 / (k + 1), "reg_term": 0.1, "discrepancy": 2.0,
            "primal_residual": 1e-3, "dual_residual": None, "psnr": 20 + k, "ssim": 0.5,
            "elapsed": 0.01 * k, "bregman": [0.5, 0.25 * k]} for k in range(0, 30, 10)]
    store.extend(pts)
    store.mark_restart(10, "α 0.01→0.02")
    rows = list(csv.DictReader(io.StringIO(store.to_csv())))
    assert [int(r["iteration"]) for r in rows] == [0, 10, 20]
    assert float(rows[1]["objective"]) == 1.0 / 11
    assert rows[0]["dual_residual"] == ""
    assert float(rows[2]["bregman_2"]) == 5.0
    again = CurveStore.from_arrays(store.to_arrays(), ["α 0.01→0.02"])
    for key, value in store.arrays().items():
        np.testing.assert_array_equal(again.arrays()[key], value)
    assert again.restarts == [(10, "α 0.01→0.02")]


def test_excepthook_shows_a_dialog_and_keeps_going(qtbot, monkeypatch) -> None:
    import sys

    from lbi_gui.dialogs import messages

    monkeypatch.setattr(sys, "excepthook", lambda *a: None)
    messages.install_excepthook(lambda: None)
    n = len(messages.OPEN_ERRORS)
    try:
        raise RuntimeError("boom in a slot")
    except RuntimeError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    box = messages.OPEN_ERRORS[-1]
    assert len(messages.OPEN_ERRORS) == n + 1
    assert "boom in a slot" in box.informativeText()
    assert "Traceback" in box.detailedText()
    box.close()


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
