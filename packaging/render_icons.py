"""Render resources/icons/lbi.svg to the PNG sizes desktops and PyInstaller need.

Run from anywhere: ``python packaging/render_icons.py``. It uses Qt's own SVG renderer
(QtSvg ships in PySide6-Essentials), so no extra tool (inkscape, cairosvg) is needed and the
PNGs look the same as the SVG does inside the app. The PNGs are committed; re-run this only
after editing the SVG.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ICON_DIR = Path(__file__).resolve().parent.parent / "resources" / "icons"
SVG = ICON_DIR / "lbi.svg"
# 256 is the main icon (lbi.png); 64 and 32 are rendered from the vector, not downscaled,
# so strokes stay crisp at small sizes.
SIZES = {256: "lbi.png", 128: "lbi-128.png", 64: "lbi-64.png", 48: "lbi-48.png",
         32: "lbi-32.png", 16: "lbi-16.png"}


def render(svg: Path, size: int, out: Path) -> None:
    """Rasterise ``svg`` to a transparent ``size``x``size`` PNG at ``out``."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"{svg}: Qt could not parse this SVG; fix the file and re-run.")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter)
    painter.end()
    if not image.save(str(out), "PNG"):
        raise SystemExit(f"{out}: could not write the PNG; check the folder is writable.")


def main() -> int:
    """Render every size in SIZES next to the SVG."""
    # Rendering needs a QGuiApplication for fonts/paint engines but no screen.
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    for size, name in SIZES.items():
        render(SVG, size, ICON_DIR / name)
        print(f"wrote {ICON_DIR / name} ({size}x{size})")
    del app
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
