"""Exports of one result: images (8/16-bit PNG, float TIFF, NPY), curves (CSV), plots
(PNG/SVG) and a run record (JSON) that ``lbi invert`` can repeat.

Every write is atomic (``lbi_engine.io.atomic_writer``: temporary file + rename) and
:func:`export_files` refuses existing targets unless the caller has asked the user: either
all files are written or, on refusal or on an error in any writer, none.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lbi_engine.folder_swap import staged_files
from lbi_engine.io import OutputExistsError, atomic_write_bytes, atomic_write_text, atomic_writer
from lbi_gui.imaging import to_uint8, to_uint16, to_view
from lbi_gui.runs import RunResult

#: format key → (file suffix, label)
FORMATS: dict[str, tuple[str, str]] = {
    "png8": (".png", "Reconstruction, 8-bit PNG (current display levels)"),
    "png16": ("_16bit.png", "Reconstruction, 16-bit PNG (current display levels)"),
    "tiff": ("_float.tif", "Reconstruction, 32-bit float TIFF (display values)"),
    "npy": (".npy", "Reconstruction, NPY (raw network-space values)"),
    "csv": ("_curves.csv", "Curves, CSV"),
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
    from PySide6 import QtCore, QtGui, QtSvg

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
    painter = QtGui.QPainter(gen)
    try:
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        item.scene().render(painter, QtCore.QRectF(0, 0, width, height), rect)
    finally:
        painter.end()
    buf.close()
    if data.isEmpty():
        raise OSError(f"could not render the plots as SVG for {path}")
    atomic_write_bytes(path, bytes(data.data()))


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
    staged and moved in together (``lbi_engine.folder_swap.staged_files``), so an error in
    any writer leaves every previous file as it was.
    """
    existing = [str(p) for p in paths.values() if p.exists()]
    if existing and not overwrite:
        raise OutputExistsError(f"{existing[0]} already exists; choose another name or "
                                "confirm replacing it")
    writers: dict[str, Callable[[Path], None]] = {
        "png8": lambda p: write_png8(p, result.x_display, levels),
        "png16": lambda p: write_png16(p, result.x_display, levels),
        "tiff": lambda p: write_tiff(p, result.x_display),
        "npy": lambda p: write_npy(p, result.x_raw),
        "csv": lambda p: atomic_write_text(p, result.curves.to_csv()),
        "plots_png": lambda p: write_plot_png(p, plot_item),
        "plots_svg": lambda p: write_plot_svg(p, plot_item),
        "record": lambda p: atomic_write_text(p, json.dumps(run_record(result), indent=2,
                                                            allow_nan=False) + "\n"),
    }
    chosen = {fmt: path for fmt, path in paths.items()
              if not (fmt.startswith("plots") and plot_item is None)}
    # Every file is first written into a staging folder next to the targets and only moved
    # over them once all of them exist: a failure in any writer (a full disk, an encoder
    # error) then replaces nothing, instead of leaving new images beside an old run record.
    with staged_files(chosen.values()) as staged:
        for fmt, path in chosen.items():
            writers[fmt](staged[path])
    return list(chosen.values())
