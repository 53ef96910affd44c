"""What a user's file is, and whether it may be decoded: the format recognised from its first
bytes (never its name), the sizes its header claims checked before anything is allocated
(image pixels, a TIFF's tiles, a JPEG's scans, a .npy array's bytes). Torch-free, like
:mod:`lbi_engine.data.files`, whose readers call these first; every refusal is a
:class:`~lbi_engine.errors.DataFileError` naming the file and what to do about it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from lbi_engine.errors import DataFileError

#: Largest image (pixels) and array (bytes) lbi reads: far above any network input, far below
#: what exhausts memory. Both are checked from the file's header, before anything is allocated.
MAX_IMAGE_PIXELS = 2**24
MAX_ARRAY_BYTES = 2**31

#: Raster formats lbi opens, recognised by their first bytes (never by the file name): only
#: decoders inside Pillow. Formats Pillow hands to external programs (EPS/PostScript ->
#: Ghostscript) or that can hold scripts are never opened, whatever the extension says.
_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG"), (b"\xff\xd8\xff", "JPEG"), (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"), (b"BM", "BMP"),
    *((f"P{k}".encode(), "PPM") for k in range(1, 7)),  # Netpbm: PBM/PGM/PPM
)
_NPY_MAGIC = b"\x93NUMPY"
IMAGE_FORMATS = "PNG, JPEG, TIFF, BMP, PGM/PPM or a .npy array"


def _image_kind(p: Path) -> str:
    """'PNG', 'JPEG', ..., or 'NPY' from the file's first bytes; DataFileError otherwise."""
    with open(p, "rb") as fh:
        head = fh.read(16)
    if head.startswith(_NPY_MAGIC):
        return "NPY"
    for magic, kind in _IMAGE_MAGIC:
        if head.startswith(magic) and (kind != "PPM" or head[2:3].isspace()):
            return kind
    what = ("PostScript/EPS, which lbi never opens (reading it would start an external "
            "interpreter)" if head.lstrip().startswith((b"%!", b"\xc5\xd0\xd3\xc6"))
            else "not an image format lbi reads")
    raise DataFileError(f"{p} is {what}; give {IMAGE_FORMATS} (the format is recognised from "
                        "the file's content, not its name)")


def _require_file(path: str | os.PathLike[str], what: str) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise DataFileError(f"{what} {p} does not exist; check the path")
    if p.is_dir():
        raise DataFileError(f"{p} is a directory; give the {what} itself")
    from lbi_engine.limits import open_regular

    # a FIFO, a device or /proc is refused here (the readers after this would block on it
    # or read it without end); the size bound is each reader's, from the file's header
    with open_regular(p, what, 2**62, DataFileError) as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            raise DataFileError(f"{what} {p} is empty (0 bytes); save or copy it again")
    return p


def _check_pixels(size: tuple[int, int]) -> None:
    """Refuse an image whose header claims more pixels than lbi reads (before decoding)."""
    width, height = size
    if width * height > MAX_IMAGE_PIXELS:
        raise DataFileError(f"its header claims {width} x {height} = {width * height:,} "
                            f"pixels; lbi reads images of at most {MAX_IMAGE_PIXELS:,} pixels "
                            "(4096 x 4096, far more than a network input; or the header is "
                            "corrupt): downscale it first")


#: The smallest side an image may have to be resized up to a network's input: a 3 x 3 image
#: enlarged to 64 x 64 is a blur of nine values (a 1 x 1 one a flat square), no picture to
#: invert, which a result would only seem to be.
MIN_UPSCALED_SIDE = 8


def check_upscale(size: tuple[int, int], target: int | tuple[int, int]) -> None:
    """Refuse enlarging an image (``size`` = (width, height)) with a side under
    :data:`MIN_UPSCALED_SIDE` to ``target`` (side or (H, W)); same-size use is fine."""
    width, height = size
    want_h, want_w = (target, target) if isinstance(target, int) else target
    if min(width, height) < MIN_UPSCALED_SIDE and (want_h > height or want_w > width):
        raise DataFileError(f"it is {width} x {height} pixels: enlarged to {want_w} x "
                            f"{want_h} it would be a blur, not a picture to invert; open an "
                            f"image at least {MIN_UPSCALED_SIDE} pixels on each side (best: "
                            f"{want_w} x {want_h}, the network's input)")


#: Most scans a JPEG may have: a progressive JPEG has about 10; each scan makes the decoder
#: pass over the whole image again, so 100,000 empty scans in 1 MB decoded for minutes.
MAX_JPEG_SCANS = 1000


def _check_jpeg_scans(p: Path) -> None:
    """Count the start-of-scan markers (FF DA) before decoding; refuse more than
    MAX_JPEG_SCANS. Entropy-coded data never holds FF DA (an FF there is stuffed as FF 00),
    so the count is exact up to scans of an embedded thumbnail."""
    scans, tail = 0, b""
    with open(p, "rb") as fh:
        while chunk := fh.read(1 << 20):
            block = tail + chunk
            scans += block.count(b"\xff\xda")
            tail = block[-1:] if block.endswith(b"\xff") else b""
            if scans > MAX_JPEG_SCANS:
                raise DataFileError(f"image file {p} is a JPEG with more than "
                                    f"{MAX_JPEG_SCANS:,} scans (a normal progressive JPEG has "
                                    "about 10; decoding every scan would take minutes): save "
                                    "it again as a baseline JPEG or PNG")


def _tiff_tile_bytes(im: Any) -> int:
    """Bytes of the buffer libtiff allocates to decode one tile of a tiled TIFF (0 for a
    striped one, whose strips are clamped to the image). The tile size is the file's own
    (TileWidth x TileLength tags), independent of the declared image size: a 16 x 16 image
    may declare one 40000 x 40000 tile, which libtiff allocates and inflates whole."""
    tags = getattr(im, "tag_v2", None)
    if tags is None or 322 not in tags or 323 not in tags:
        return 0
    try:
        width, length = int(tags[322]), int(tags[323])
        bits = tags.get(258, 8)
        bits = max(int(b) for b in bits) if isinstance(bits, (tuple, list)) else int(bits)
        samples = int(tags.get(277, len(im.getbands())))
    except (TypeError, ValueError):
        return 0  # a damaged tag: Pillow's decoder reports it
    if width * length > MAX_IMAGE_PIXELS:
        raise DataFileError(f"its tiles are {width} x {length} = {width * length:,} pixels "
                            f"(for an image of {im.size[0]} x {im.size[1]}); lbi decodes tiles "
                            f"of at most {MAX_IMAGE_PIXELS:,} pixels (a normal tile is 256 x "
                            "256; or the header is corrupt): save it again untiled or as PNG")
    return width * length * max(1, samples) * max(1, (bits + 7) // 8)


def _check_npy_header(p: Path) -> None:
    """Read only the .npy header and refuse what np.load would choke on or over-allocate.

    Why: np.load allocates the array its header describes before reading the data, so a
    damaged or malicious header (shape (100000, 100000, 100000)) would exhaust memory.
    """
    from tokenize import TokenError

    import numpy as np

    fmt = np.lib.format
    size = p.stat().st_size
    with open(p, "rb") as fh:
        magic = fh.read(len(fmt.MAGIC_PREFIX))
        if magic[:2] == b"PK":
            raise DataFileError(f"{p} is an .npz archive; give a single .npy array")
        if magic != fmt.MAGIC_PREFIX:
            raise DataFileError(f"{p} is not a .npy file (it does not start with the NumPy "
                                "magic bytes); save the array with np.save(path, array)")
        fh.seek(0)
        readers = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
        try:
            version = fmt.read_magic(fh)
            if version not in readers:
                raise ValueError(f"unsupported .npy format version {version}")
            shape, _fortran, dtype = readers[version](fh)
        except (ValueError, EOFError, SyntaxError, TokenError, RecursionError,
                MemoryError) as exc:  # numpy parses the header text as a Python literal
            raise DataFileError(f"{p} has a damaged .npy header ({exc}); save the array again "
                                "with np.save(path, array)") from exc
        data_bytes = size - fh.tell()
    if any(not 0 <= int(d) < 2**62 for d in shape):  # numpy's own reader overflows on them
        raise DataFileError(f"{p} has a damaged .npy header (shape {tuple(shape)}: every "
                            "size must be a whole number >= 0); save the array again with "
                            "np.save(path, array)")
    if dtype.hasobject:
        raise DataFileError(f"{p}: it holds Python objects (a pickle), which lbi does not load; "
                            "save a numeric array with np.save(path, array)")
    if dtype.kind == "c":
        raise DataFileError(f"{p} holds complex ({dtype}) data; lbi needs real numbers: save "
                            "the real part or the magnitude (np.abs(a)) instead")
    need = math.prod(shape) * dtype.itemsize
    if need > data_bytes:
        raise DataFileError(f"{p}: its header says shape {tuple(shape)} of {dtype} ({need:,} "
                            f"bytes) but the file holds only {data_bytes:,} bytes of data; it is "
                            "truncated or its header is damaged: save it again with np.save")
    if need > MAX_ARRAY_BYTES:
        raise DataFileError(f"{p} holds {need / 2**30:.1f} GiB (shape {tuple(shape)}); lbi reads "
                            f"arrays of at most {MAX_ARRAY_BYTES / 2**30:g} GiB: give one sample "
                            "or a smaller batch")
    from lbi_engine.limits import check_bytes

    # the array as read, its float copy (up to 8 bytes a value) and the finite-check mask
    check_bytes(need + math.prod(shape) * 9, f"array file {p} (shape {tuple(shape)}, {dtype})",
                "give one sample or a smaller batch")
