"""16-bit colour PNGs (RGB / RGBA, 16 bits per channel) read at full depth.

Why: Pillow decodes such files to 8 bits per channel, losing what the window's own 16-bit PNG
export (lbi_gui/export.py) and scientific cameras write. This decoder handles only that case
(non-interlaced, the five standard row filters); every other PNG goes to Pillow. numpy and
zlib only: no torch, nothing run from the file. The header's size was already checked by the
caller; the decompressed data is capped at what that size needs (no zip bomb).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from lbi_engine.errors import DataFileError

if TYPE_CHECKING:
    import numpy as np


def deep_colour_png(p: Path) -> np.ndarray | None:
    """``(H, W, C)`` float64 in [0, 1] (C = 3, or 4 with alpha) for a 16-bit colour PNG;
    None for any other PNG (Pillow reads those exactly)."""
    import numpy as np

    data = p.read_bytes()
    if len(data) < 33 or data[12:16] != b"IHDR":
        return None
    width, height, depth, colour, _comp, _filter, interlace = struct.unpack(">IIBBBBB",
                                                                          data[16:29])
    if depth != 16 or colour not in (2, 6) or interlace != 0:
        return None
    channels = 3 if colour == 2 else 4
    stride = width * channels * 2
    need = height * (stride + 1)
    chunks, pos = [], 8
    while pos + 8 <= len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        tag = data[pos + 4:pos + 8]
        if tag == b"IDAT":
            chunks.append(data[pos + 8:pos + 8 + length])
        elif tag == b"IEND":
            break
        pos += 12 + length
    try:
        raw = zlib.decompressobj().decompress(b"".join(chunks), need)
    except zlib.error as exc:
        raise DataFileError(f"its pixel data is corrupt ({exc}); save it again") from exc
    if len(raw) != need:
        raise DataFileError("its pixel data is truncated; save it again")
    rows = np.frombuffer(raw, np.uint8).reshape(height, stride + 1)
    pixels = np.empty((height, stride), np.uint8)
    previous = np.zeros(stride, np.int64)
    for r in range(height):
        previous = _unfilter(int(rows[r, 0]), rows[r, 1:].astype(np.int64), previous,
                             channels * 2)
        pixels[r] = previous
    values = pixels.reshape(height, width, channels, 2).astype(np.uint16)
    return ((values[..., 0] << 8) | values[..., 1]) / 65535.0


def _unfilter(kind: int, line: np.ndarray, above: np.ndarray, bpp: int) -> np.ndarray:
    """One row of bytes with the PNG filter ``kind`` undone (PNG spec, section 9)."""
    import numpy as np

    if kind == 0:
        return line
    if kind == 2:
        return (line + above) & 255
    if kind == 1:  # Sub: a running sum per byte position within a pixel
        return np.cumsum(line.reshape(-1, bpp), axis=0).reshape(-1) & 255
    if kind not in (3, 4):
        raise DataFileError(f"a row uses the unknown PNG filter {kind}; save it again")
    out = np.empty_like(line)
    left = np.zeros(bpp, np.int64)
    upper_left = np.zeros(bpp, np.int64)
    for start in range(0, line.size, bpp):  # each pixel depends on the one to its left
        up = above[start:start + bpp]
        if kind == 3:
            pred = (left + up) // 2
        else:  # Paeth
            base = left + up - upper_left
            pa, pb, pc = np.abs(base - left), np.abs(base - up), np.abs(base - upper_left)
            pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, upper_left))
        left = (line[start:start + bpp] + pred) & 255
        out[start:start + bpp] = left
        upper_left = up
    return out
