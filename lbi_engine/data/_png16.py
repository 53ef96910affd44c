"""PNG chunks walked from the file, and 16-bit colour PNGs (RGB / RGBA) read at full depth.

Why a walk of our own before Pillow: Pillow reads every chunk it does not know into memory
and parses each one it knows, so a 1 GiB private chunk before the image data cost 2.5 GiB
before any check. :func:`check_png_chunks` reads only the 8-byte chunk headers (seeking past
the data) and refuses an ancillary chunk, or all of them together, beyond a bound; the image
data itself is bounded by the header's size.

Why a decoder: Pillow decodes 16-bit colour to 8 bits per channel, losing what the window's
own 16-bit PNG export (lbi_gui/export.py) and scientific cameras write (Pillow 13 still
does). This decoder handles only that case (non-interlaced, the five standard row filters);
every other PNG goes to Pillow. numpy and zlib only: no torch, nothing run from the file.
The image data is inflated as it is read, in pieces, and capped at what the header's size
needs (no zip bomb, no whole-file read). Rows with the Average or Paeth filter depend on the
pixel to their left and the row above: they are undone along anti-diagonals (every pixel of
one depends only on earlier ones), H + W numpy steps instead of a Python step per pixel.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from lbi_engine.errors import DataFileError

if TYPE_CHECKING:
    import numpy as np

#: Largest single ancillary chunk (text, ICC profile, EXIF, private) and all of them
#: together: real files hold a few kilobytes (an ICC profile is at most a few hundred).
MAX_ANCILLARY_CHUNK = 8 * 2**20
MAX_ANCILLARY_TOTAL = 32 * 2**20
#: Most chunks a PNG may have (encoders write image data in 8-64 KiB chunks).
MAX_CHUNKS = 2**20
_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PIECE = 2**20


def _chunks(fh: IO[bytes], size: int) -> Iterator[tuple[bytes, int, int]]:
    """(type, data offset, length) of each chunk up to IEND, from the headers alone;
    DataFileError for a chunk that does not fit in the file or too many chunks."""
    pos, count = len(_SIGNATURE), 0
    while pos + 8 <= size:
        fh.seek(pos)
        head = fh.read(8)
        length, tag = int.from_bytes(head[:4], "big"), head[4:8]
        if length > 2**31 - 1 or pos + 12 + length > size:
            raise DataFileError(f"its chunk {tag!r} at byte {pos:,} claims {length:,} bytes, "
                                "more than the file holds: it is truncated or corrupt; save "
                                "it again")
        count += 1
        if count > MAX_CHUNKS:
            raise DataFileError(f"it has more than {MAX_CHUNKS:,} chunks (a PNG has a few "
                                "hundred); save it again")
        yield tag, pos + 8, length
        if tag == b"IEND":
            return
        pos += 12 + length


def check_png_chunks(p: Path) -> None:
    """Refuse, before Pillow parses it, a PNG whose ancillary chunks (anything but the image
    data) are larger than :data:`MAX_ANCILLARY_CHUNK` each or :data:`MAX_ANCILLARY_TOTAL`
    in all. Only the chunk headers are read."""
    total = 0
    with open(p, "rb") as fh:
        for tag, _start, length in _chunks(fh, os.fstat(fh.fileno()).st_size):
            if tag == b"IDAT":
                continue
            total += length
            if length > MAX_ANCILLARY_CHUNK or total > MAX_ANCILLARY_TOTAL:
                raise DataFileError(
                    f"its chunk {tag.decode('latin-1')!r} holds {length:,} bytes of data other "
                    f"than the image ({total:,} so far; lbi reads at most "
                    f"{MAX_ANCILLARY_CHUNK:,} a chunk and {MAX_ANCILLARY_TOTAL:,} in all): "
                    "save the image again without the extra data")


def deep_colour_png(p: Path) -> np.ndarray | None:
    """``(H, W, C)`` float64 in [0, 1] (C = 3, or 4 with alpha) for a 16-bit colour PNG;
    None for any other PNG (Pillow reads those exactly)."""
    import numpy as np

    with open(p, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(33)
        if len(head) < 33 or head[12:16] != b"IHDR":
            return None
        width, height, depth, colour, _comp, _filter, interlace = struct.unpack(
            ">IIBBBBB", head[16:29])
        if depth != 16 or colour not in (2, 6) or interlace != 0:
            return None
        channels = 3 if colour == 2 else 4
        stride = width * channels * 2
        need = height * (stride + 1)
        raw = bytearray()
        inflate = zlib.decompressobj()
        try:
            for tag, start, length in _chunks(fh, size):
                if tag != b"IDAT":
                    continue
                fh.seek(start)
                for offset in range(0, length, _PIECE):
                    piece = fh.read(min(_PIECE, length - offset))
                    raw += inflate.decompress(piece, need - len(raw))
                    if len(raw) >= need:
                        break
                if len(raw) >= need:
                    break
        except zlib.error as exc:
            raise DataFileError(f"its pixel data is corrupt ({exc}); save it again") from exc
    if len(raw) != need:
        raise DataFileError("its pixel data is truncated; save it again")
    rows = np.frombuffer(bytes(raw), np.uint8).reshape(height, stride + 1)
    pixels = unfilter(rows, channels * 2)
    values = pixels.reshape(height, width, channels, 2).astype(np.uint16)
    return ((values[..., 0] << 8) | values[..., 1]) / 65535.0


def unfilter(rows: np.ndarray, bpp: int) -> np.ndarray:
    """The image bytes ``(H, stride)`` of filtered rows ``(H, 1 + stride)`` (each led by
    its filter type), with every row's filter undone (PNG spec, section 9)."""
    import numpy as np

    kinds, data = rows[:, 0], rows[:, 1:]
    if kinds.size and int(kinds.max()) > 4:
        raise DataFileError(f"a row uses the unknown PNG filter {int(kinds.max())}; save it "
                            "again")
    if not np.isin(kinds, (3, 4)).any():
        out = np.empty(data.shape, np.uint8)
        previous = np.zeros(data.shape[1], np.int64)
        for r in range(data.shape[0]):
            line = data[r].astype(np.int64)
            if kinds[r] == 1:  # Sub: a running sum per byte position within a pixel
                line = np.cumsum(line.reshape(-1, bpp), axis=0).reshape(-1)
            elif kinds[r] == 2:  # Up
                line = line + previous
            previous = line & 255
            out[r] = previous
        return out
    return _unfilter_diagonals(kinds, data, bpp)


def _unfilter_diagonals(kinds: np.ndarray, data: np.ndarray, bpp: int) -> np.ndarray:
    """:func:`unfilter` along anti-diagonals r + c = d of the pixel grid: pixel (r, c) needs
    (r, c - 1), (r - 1, c) and (r - 1, c - 1), all on earlier diagonals."""
    import numpy as np

    height, width = data.shape[0], data.shape[1] // bpp
    line = data.reshape(height, width, bpp)
    out = np.zeros((height + 1, width + 1, bpp), np.uint8)  # a zero row above, column left
    for d in range(height + width - 1):
        r = np.arange(max(0, d - width + 1), min(height - 1, d) + 1)
        c = d - r
        left = out[r + 1, c].astype(np.int16)
        up = out[r, c + 1].astype(np.int16)
        upper_left = out[r, c].astype(np.int16)
        pa, pb = np.abs(up - upper_left), np.abs(left - upper_left)
        pc = np.abs(left + up - 2 * upper_left)
        paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, upper_left))
        kind = kinds[r][:, None]
        pred = np.select([kind == 1, kind == 2, kind == 3, kind == 4],
                         [left, up, (left + up) >> 1, paeth], 0)
        out[r + 1, c + 1] = (line[r, c] + pred) & 255
    return out[1:, 1:].reshape(height, width * bpp)
