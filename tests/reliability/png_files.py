"""PNG files written byte by byte (no encoder): any filter per row, any chunk, any depth.

The row filters are applied forwards here (PNG spec, section 9): each prediction from the
original bytes, an independent computation from the reader's unfiltering (which must
rebuild every byte from those before it).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(
        ">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def filter_rows(pixels: bytes, height: int, stride: int, bpp: int,
                kinds: list[int]) -> bytes:
    """Each row led by its filter type and filtered with it (the encoder's direction: every
    prediction from the original bytes, known in full, so no recursion)."""
    x = np.frombuffer(pixels, np.uint8).reshape(height, stride).astype(np.int32)
    a = np.zeros_like(x)
    a[:, bpp:] = x[:, :-bpp]  # left
    b = np.zeros_like(x)
    b[1:] = x[:-1]  # above
    c = np.zeros_like(x)
    c[1:, bpp:] = x[:-1, :-bpp]  # upper left
    p = a + b - c
    pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
    paeth = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
    preds = np.stack([np.zeros_like(x), a, b, (a + b) // 2, paeth])
    k = np.asarray(kinds)
    filtered = (x - preds[k, np.arange(height)]) & 255
    return np.concatenate([k[:, None], filtered], axis=1).astype(np.uint8).tobytes()


def png16(path: Path, image: np.ndarray, kinds: list[int] | None = None,
          before: list[tuple[bytes, bytes]] = (), idat_parts: int = 1,
          trailing: int = 0) -> Path:
    """A 16-bit RGB (3 channels) or RGBA (4) PNG of ``image`` (H, W, C) uint16, rows filtered
    with ``kinds`` (default all Paeth), chunks ``before`` the image data, the data split in
    ``idat_parts`` chunks, and ``trailing`` bytes after IEND (sparse)."""
    height, width, channels = image.shape
    stride = width * channels * 2
    kinds = kinds if kinds is not None else [4] * height
    data = zlib.compress(filter_rows(image.astype(">u2").tobytes(), height, stride,
                                     channels * 2, kinds), 9)
    step = -(-len(data) // idat_parts)
    body = (SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 16,
                                                   2 if channels == 3 else 6, 0, 0, 0))
            + b"".join(chunk(t, d) for t, d in before)
            + b"".join(chunk(b"IDAT", data[i:i + step]) for i in range(0, len(data), step))
            + chunk(b"IEND", b""))
    with open(path, "wb") as fh:
        fh.write(body)
        if trailing:
            fh.truncate(len(body) + trailing)  # a hole: no disk space
    return path


def sparse_private_chunk_png(path: Path, megabytes: int) -> Path:
    """An 8-bit grey 16 x 16 PNG with a private chunk of ``megabytes`` before its data,
    written sparse (the chunk's bytes are a hole: no disk space)."""
    raw = b"".join(b"\x00" + bytes(16) for _ in range(16))
    length = megabytes * 2**20
    with open(path, "wb") as fh:
        fh.write(SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", 16, 16, 8, 0, 0, 0, 0)))
        fh.write(struct.pack(">I", length) + b"prVt")
        fh.seek(length + 4, 1)  # the data and its CRC: a hole
        fh.write(chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return path
