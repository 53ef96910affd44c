"""The 16-bit PNG encoder of the exports, read back by an independent decoder and by PIL."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
from PIL import Image

from lbi_gui.export import png16_bytes


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
