"""Export every format, read each file back, compare with memory; never overwrite silently."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import tifffile
from PIL import Image
from PySide6 import QtWidgets

from lbi_gui.export import FORMATS, planned_paths
from lbi_gui.imaging import to_uint8, to_uint16
from tests.gui.conftest import wait_idle


@pytest.fixture
def finished(qtbot, make_window):
    win = make_window({"max_iter": 100, "noise_std": 0.05})
    win.runner.run()
    wait_idle(qtbot, win, timeout=120000)
    win.image_grid.set_levels((0.1, 0.9))  # exports use the levels on screen
    return win, win.run_table.runs[-1]


def test_export_every_format_and_read_it_back(finished, tmp_path, monkeypatch) -> None:
    win, run = finished
    paths = planned_paths(tmp_path, "digit", list(FORMATS))
    written = win.exports.export_result(run, paths)
    assert sorted(written) == sorted(paths.values())
    levels = win.image_grid.levels()
    assert levels == pytest.approx((0.1, 0.9))
    with Image.open(paths["png8"]) as im:
        assert im.mode == "L"
        np.testing.assert_array_equal(np.asarray(im), to_uint8(run.x_display, levels))
    with Image.open(paths["png16"]) as im:
        np.testing.assert_array_equal(np.asarray(im).astype(np.uint16),
                                      to_uint16(run.x_display, levels))
    tiff = tifffile.imread(paths["tiff"])
    assert tiff.dtype == np.float32
    np.testing.assert_array_equal(tiff, run.x_display.astype(np.float32))
    raw = np.load(paths["npy"], allow_pickle=False)
    # the CLI's reconstruction.npy: this network has no preprocessing, so the raw iterate
    np.testing.assert_array_equal(raw, run.x_raw.reshape(raw.shape))
    rows = list(csv.DictReader(paths["csv"].open()))
    arr = run.curves.arrays()
    # like `lbi invert`'s curves.csv: the final iterate, reported twice, is written once
    keep = np.r_[np.diff(arr["iteration"]) != 0, True]
    np.testing.assert_array_equal([float(r["iteration"]) for r in rows], arr["iteration"][keep])
    np.testing.assert_allclose([float(r["objective"]) for r in rows], arr["objective"][keep],
                               rtol=1e-15)
    with Image.open(paths["plots_png"]) as im:
        assert im.size[0] >= 1000 and im.size[1] > 200
    svg = ET.parse(paths["plots_svg"]).getroot()
    assert svg.tag.endswith("svg")
    assert len(list(svg.iter("{http://www.w3.org/2000/svg}path"))) + \
        len(list(svg.iter("{http://www.w3.org/2000/svg}polyline"))) > 6  # vector curves
    record = json.loads(paths["record"].read_text())
    assert record["results"]["metrics"]["psnr"] == pytest.approx(run.metrics.psnr)
    # `lbi invert --record` reads this file and rebuilds the same request
    from lbi_engine.api import InversionRequest
    from lbi_engine.cli.invert import load_record

    data, _folder = load_record(str(paths["record"]))
    assert InversionRequest.from_dict(data).to_dict() == run.request


def test_export_refuses_to_overwrite_without_confirmation(finished, tmp_path,
                                                          monkeypatch) -> None:
    win, run = finished
    paths = planned_paths(tmp_path, "digit", ["png8", "npy", "record"])
    win.exports.export_result(run, paths)
    before = {k: p.read_bytes() for k, p in paths.items()}
    paths["npy"].write_bytes(b"not the export")  # so a rewrite is detectable
    asked = []

    def answer(result):
        def question(parent, title, text, *a, **kw):
            asked.append(text)
            return result
        return question

    no, yes = QtWidgets.QMessageBox.StandardButton.No, QtWidgets.QMessageBox.StandardButton.Yes
    monkeypatch.setattr(QtWidgets.QMessageBox, "question", answer(no))
    assert win.exports.export_result(run, paths) == []
    assert "digit.png" in asked[0] and "digit.npy" in asked[0]
    assert paths["npy"].read_bytes() == b"not the export"  # untouched
    assert paths["png8"].read_bytes() == before["png8"]
    monkeypatch.setattr(QtWidgets.QMessageBox, "question", answer(yes))
    assert len(win.exports.export_result(run, paths)) == 3
    assert paths["npy"].read_bytes() == before["npy"]
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporaries
