"""Exports of one result: images (8/16-bit PNG, float TIFF, NPY), curves (CSV), plots
(PNG/SVG) and a run record (JSON) that ``lbi invert`` can repeat.

One writer: the result folder (result.json, reconstruction.npy/.png, curves.csv, decoder.*),
the NPY and the CSV are written by ``lbi_engine.results.exports`` — the functions ``lbi invert``
uses — from what the engine sent for the run, so the GUI's files for a run are the CLI's
files for the same request (same columns, same values; only timings and "created" differ).

Every write is atomic (``lbi_engine.io.atomic_writer``: temporary file + rename) and
:func:`export_files` refuses existing targets unless the caller has asked the user: either
all files are written or, on refusal or on an error in any writer, none.
"""

from __future__ import annotations

import io
import json
import re
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lbi_engine.io import OutputExistsError, atomic_write_bytes, atomic_write_text, atomic_writer
from lbi_engine.results.folder_swap import staged_files
from lbi_gui.imaging import to_uint8, to_uint16, to_view
from lbi_gui.model.runs import RunResult

#: format key → (file suffix, label)
FORMATS: dict[str, tuple[str, str]] = {
    "png8": (".png", "Reconstruction, 8-bit PNG (current display levels)"),
    "png16": ("_16bit.png", "Reconstruction, 16-bit PNG (current display levels)"),
    "tiff": ("_float.tif", "Reconstruction, 32-bit float TIFF (display values)"),
    "npy": (".npy", "Reconstruction, NPY (display-space values, as `lbi invert` writes)"),
    "csv": ("_curves.csv", "Curves, CSV (the columns of `lbi invert`'s curves.csv)"),
    "result": ("_result", "Result folder: result.json, reconstruction, curves.csv, decoder "
                          "(the files `lbi invert` writes)"),
    "plots_png": ("_curves.png", "Plots, PNG"),
    "plots_svg": ("_curves.svg", "Plots, SVG (vector)"),
    "record": ("_run.json", "Run record, JSON (repeat with `lbi invert`)"),
}
RECORD_FORMAT_VERSION = 1


def planned_paths(folder: str | Path, stem: str, formats: list[str]) -> dict[str, Path]:
    """Where each chosen format would be written."""
    folder = Path(folder)
    return {fmt: folder / f"{stem}{FORMATS[fmt][0]}" for fmt in formats}


def png16_bytes(img16: np.ndarray) -> bytes:
    """Encode a uint16 (H, W) or (H, W, 3) array as a PNG (Pillow cannot write 16-bit RGB)."""
    a = np.ascontiguousarray(img16, dtype=">u2")
    h, w = a.shape[:2]
    colour_type = 0 if a.ndim == 2 else 2
    rows = b"".join(b"\x00" + a[r].tobytes() for r in range(h))  # filter 0 on every row

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", w, h, 16, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b""))


def write_png8(path: Path, img: np.ndarray, levels: tuple[float, float]) -> None:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(to_uint8(img, levels)).save(buf, format="PNG")
    atomic_write_bytes(path, buf.getvalue())


def write_png16(path: Path, img: np.ndarray, levels: tuple[float, float]) -> None:
    atomic_write_bytes(path, png16_bytes(to_uint16(img, levels)))


def write_tiff(path: Path, img: np.ndarray) -> None:
    import tifffile

    view = to_view(img).astype(np.float32)
    buf = io.BytesIO()  # tifffile wants a named file or a buffer, not a bare descriptor
    tifffile.imwrite(buf, view, photometric="rgb" if view.ndim == 3 else "minisblack")
    atomic_write_bytes(path, buf.getvalue())


def write_npy(path: Path, raw: np.ndarray) -> None:
    with atomic_writer(path, "wb") as fh:
        np.save(fh, np.asarray(raw), allow_pickle=False)


def reconstruction(result: RunResult) -> np.ndarray:
    """What ``lbi invert`` saves as reconstruction.npy: the network-space iterate with the
    network's preprocessing undone (display space), float32, in the network's input shape."""
    from lbi_engine.data import Preprocessing

    pre = Preprocessing(**{k: float(v) for k, v in (result.preprocessing or {}).items()
                           if k in ("offset", "scale")})
    x = np.asarray(pre.undo(np.asarray(result.x_raw, dtype=np.float32)), dtype=np.float32)
    shape = (result.network or {}).get("input_shape")
    return x.reshape(tuple(shape)) if shape else x


def curve_records(result: RunResult) -> list[dict[str, Any]]:
    """The run's curve points as the records ``lbi_engine.results.exports.curve_rows`` reads."""
    arr = result.curves.arrays()
    names = ("objective", "reg_term", "psnr", "ssim", "discrepancy", "primal_residual",
             "dual_residual")
    records = []
    for i in range(len(result.curves)):
        rec: dict[str, Any] = {"iteration": int(arr["iteration"][i]),
                               "elapsed": float(arr["elapsed"][i])}
        for name in names:
            v = float(arr[name][i])
            rec[name] = None if np.isnan(v) else v
        if arr["bregman"].shape[1]:
            rec["bregman_terms"] = [float(v) for v in arr["bregman"][i]]
        records.append(rec)
    return records


def curves_csv(result: RunResult) -> str:
    from lbi_engine.results.exports import csv_text, curve_rows

    return csv_text(*curve_rows(curve_records(result)))


def write_result_folder(path: Path, result: RunResult, overwrite: bool) -> None:
    """The run's folder through the CLI's writer (``lbi_engine.results.exports``)."""
    from lbi_engine.results import exports

    document = exports.build_result_document(result.request, dict(result.network),
                                              result.metrics.to_dict())
    x = reconstruction(result)
    truth = None if result.truth is None else np.asarray(result.truth, np.float32).reshape(x.shape)
    exports.write_result_folder(path, reconstruction=x,
                                display=result.x_display, records=curve_records(result),
                                decoder=result.decoder, document=document,
                                overwrite=overwrite, truth=truth, truth_display=result.truth)


def write_plot_png(path: Path, item: Any, width: int = 1800) -> None:
    from pyqtgraph.exporters import ImageExporter
    from PySide6 import QtCore

    exporter = ImageExporter(item)
    exporter.parameters()["width"] = width
    qimage = exporter.export(toBytes=True)
    data = QtCore.QByteArray()
    buf = QtCore.QBuffer(data)
    buf.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    if not qimage.save(buf, "PNG"):
        raise OSError(f"could not encode the plots as PNG for {path}")
    buf.close()
    atomic_write_bytes(path, bytes(data.data()))


def write_plot_svg(path: Path, item: Any) -> None:
    """Vector SVG of the plots via QSvgGenerator.

    Why not pyqtgraph's SVGExporter: with Qt 6.11 it fails on closed paths ("... Z") that
    Qt now writes for view-box backgrounds ("not enough values to unpack").
    """
    from PySide6 import QtCore, QtGui, QtSvg, QtWidgets

    rect = item.sceneBoundingRect()
    width, height = max(1, round(rect.width())), max(1, round(rect.height()))
    data = QtCore.QByteArray()
    buf = QtCore.QBuffer(data)
    buf.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    gen = QtSvg.QSvgGenerator()
    gen.setOutputDevice(buf)
    gen.setSize(QtCore.QSize(width, height))
    gen.setViewBox(QtCore.QRect(0, 0, width, height))
    gen.setTitle("lbi convergence curves")
    # Axes are cached as pixmaps on screen (see widgets/curves.py); rendered from the cache
    # they would land in the SVG as embedded bitmaps, so the cache is off while exporting.
    no_cache = QtWidgets.QGraphicsItem.CacheMode.NoCache
    cached = [(it, it.cacheMode()) for it in item.scene().items() if it.cacheMode() != no_cache]
    painter = QtGui.QPainter(gen)
    try:
        for it, _mode in cached:
            it.setCacheMode(no_cache)
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        item.scene().render(painter, QtCore.QRectF(0, 0, width, height), rect)
    finally:
        painter.end()
        for it, mode in cached:
            it.setCacheMode(mode)
    buf.close()
    if data.isEmpty():
        raise OSError(f"could not render the plots as SVG for {path}")
    atomic_write_bytes(path, merge_split_text(bytes(data.data())))


#: Two <text> runs of one line: Qt starts a new run where the script changes (Latin → Greek),
#: so "αR" came out as "α" and "R" at fixed x positions.
_SPLIT_TEXT = re.compile(
    rb'(<text ([^>]*?) x="[-\d.e]+" y="([-\d.e]+)"([^>]*)>)([^<]*)</text>\s*'
    rb'<text \2 x="[-\d.e]+" y="\3"\4>([^<]*)</text>')


def merge_split_text(svg: bytes) -> bytes:
    """Join consecutive text runs of one line (same style and baseline) into one element, so
    labels such as "Bregman terms and αR" stay whole words in the SVG."""
    while True:
        merged = _SPLIT_TEXT.sub(rb"\1\5\6</text>", svg)
        if merged == svg:
            return svg
        svg = merged


def run_record(result: RunResult) -> dict[str, Any]:
    """The request (InversionRequest.to_dict) plus the results, as one JSON-able dict."""
    row = result.table_row()
    return {
        "kind": "lbi-run-record",
        "format_version": RECORD_FORMAT_VERSION,
        "request": result.request,
        "results": {
            "metrics": result.to_json()["metrics"],
            "stop_reason": result.stop_reason,
            "iterations": result.iterations,
            "elapsed_s": result.elapsed,
            "decoder_psnr": row["decoder PSNR"],
            "warm_restarts": [{"iteration": it, "change": what}
                              for it, what in result.curves.restarts],
        },
    }


def export_files(paths: dict[str, Path], result: RunResult, *, levels: tuple[float, float],
                 plot_item: Any = None, overwrite: bool = False) -> list[Path]:
    """Write ``paths`` (from :func:`planned_paths`); all-or-nothing on existing files.

    Raises ``OutputExistsError`` (writing nothing) when a target exists and ``overwrite`` is
    False; the window asks the user first and then passes ``overwrite=True``. The files are
    staged and moved in together (``lbi_engine.results.folder_swap.staged_files``), so an error in
    any writer leaves every previous file as it was.
    """
    from lbi_engine.results.exports import RUN_FILES

    existing = [str(p) for fmt, p in paths.items()
                if p.exists() and (fmt != "result" or not p.is_dir()
                                   or any((p / name).exists() for name in RUN_FILES))]
    if existing and not overwrite:
        raise OutputExistsError(f"{existing[0]} already exists; choose another name or "
                                "confirm replacing it")
    writers: dict[str, Callable[[Path], None]] = {
        "png8": lambda p: write_png8(p, result.x_display, levels),
        "png16": lambda p: write_png16(p, result.x_display, levels),
        "tiff": lambda p: write_tiff(p, result.x_display),
        "npy": lambda p: write_npy(p, reconstruction(result)),
        "csv": lambda p: atomic_write_text(p, curves_csv(result)),
        "plots_png": lambda p: write_plot_png(p, plot_item),
        "plots_svg": lambda p: write_plot_svg(p, plot_item),
        "record": lambda p: atomic_write_text(p, json.dumps(run_record(result), indent=2,
                                                            allow_nan=False) + "\n"),
    }
    chosen = {fmt: path for fmt, path in paths.items()
              if not (fmt.startswith("plots") and plot_item is None) and fmt != "result"}
    if "result" in paths:  # a folder, swapped in as a whole by the engine's writer
        write_result_folder(paths["result"], result, overwrite)
    # Every file is first written into a staging folder next to the targets and only moved
    # over them once all of them exist: a failure in any writer (a full disk, an encoder
    # error) then replaces nothing, instead of leaving new images beside an old run record.
    with staged_files(chosen.values()) as staged:
        for fmt, path in chosen.items():
            writers[fmt](staged[path])
    return list(chosen.values()) + ([paths["result"]] if "result" in paths else [])
