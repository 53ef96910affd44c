"""Readers for the user's own ground-truth files: images, .npy arrays, IDX, torchvision folders.

numpy in, numpy out (no torch, so the GUI process may read them): float arrays with values in
[0, 1] and a leading batch dimension, the conventions of :mod:`lbi_engine.data`, which also
offers them as torch tensors (``load_image`` etc., lbi_engine/data/tensors.py). Every problem
with a file raises :class:`~lbi_engine.errors.DataFileError` naming the file and what to do
about it. What a file is, and the header checks made before decoding, are in ``_file_checks``.
"""

from __future__ import annotations

import gzip
import math
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lbi_engine.data._file_checks import (
    IMAGE_FORMATS,
    MAX_ARRAY_BYTES,
    MAX_IMAGE_PIXELS,
    MAX_JPEG_SCANS,
    _check_jpeg_scans,
    _check_npy_header,
    _check_pixels,
    _image_kind,
    _require_file,
    _tiff_tile_bytes,
    check_upscale,
)
from lbi_engine.errors import DataFileError, InputError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["read_image", "read_array", "read_idx", "read_torchvision_folder",
           "resize_channels", "MAX_IMAGE_PIXELS", "MAX_ARRAY_BYTES", "IMAGE_FORMATS",
           "MAX_JPEG_SCANS"]


def read_image(path: str | os.PathLike[str], size: int | tuple[int, int] | None = None,
               grayscale: bool = True, channels: int | None = None) -> np.ndarray:
    """Read PNG/JPEG/TIFF/BMP (via Pillow) into ``(1, C, H, W)`` float32 in [0, 1].

    Integer images are divided by their type's maximum (8-bit: 255, 16-bit: 65535). Float
    images already in [0, 1] are kept; other float images are min-max scaled into [0, 1]
    because they carry no natural range. Alpha is dropped. The image is resized (antialiased
    bilinear) only when ``size`` (int side or (H, W)) is given.

    ``channels``: the channel count the network takes, which decides C: 1 gives grey (ITU-R
    601 luma for colour images, with a warning), 3 gives RGB (a grey picture's value in all
    three), any other count is refused naming both counts (a .npy array must have it
    already). Without ``channels``: ``grayscale=True`` gives C = 1, otherwise the file's own
    C (3 for colour, 1 for grey).
    """
    if channels is not None:
        grayscale = channels == 1
    import numpy as np
    from PIL import Image, ImageOps, UnidentifiedImageError

    from lbi_engine.limits import MemoryLimitError, check_bytes

    p = _require_file(path, "image file")
    kind = _image_kind(p)
    if kind == "NPY":
        return _npy_as_image(p, size, grayscale, channels)
    if kind == "JPEG":
        _check_jpeg_scans(p)
    if kind == "PNG":
        _check_png(p)
    _limit_pillow()
    if channels is not None:
        _check_channel_request(p, channels)
    try:
        # formats=: Pillow may only use the decoder the content was recognised as
        with Image.open(p, formats=[kind]) as im:
            _check_pixels(im.size)  # from the header, before decoding allocates anything
            if size is not None:
                check_upscale(im.size, size)
            bands = len(im.getbands())
            # decoded pixels, float64 copies for conversion and scaling, a resized copy; and
            # a TIFF's tile buffer, whose size the file chooses apart from the image's
            tile = _tiff_tile_bytes(im) if kind == "TIFF" else 0
            check_bytes(im.size[0] * im.size[1] * bands * 8 * 4 + tile, f"image file {p} "
                        f"({im.size[0]} x {im.size[1]} pixels, {bands} channel(s)"
                        + (f", a tile buffer of {tile:,} bytes)" if tile else ")"),
                        "downscale the image to about the network's input size first")
            im.load()
            arr = _pil_to_float(ImageOps.exif_transpose(im))  # the orientation a viewer shows
            if kind == "PNG" and im.mode in ("RGB", "RGBA") and \
                    im.getexif().get(0x0112, 1) == 1:  # Pillow reads 16-bit colour as 8-bit
                from lbi_engine.data._png16 import deep_colour_png

                deep = deep_colour_png(p)
                arr = arr if deep is None else deep
    except Image.DecompressionBombError as exc:
        raise DataFileError(f"image file {p} is too large to read ({exc}); lbi reads images of "
                            f"at most {MAX_IMAGE_PIXELS:,} pixels: downscale it first") from exc
    except UnidentifiedImageError as exc:
        raise DataFileError(f"{p} is not an image Pillow can read; use PNG, JPEG, TIFF or BMP, "
                            "or a .npy array") from exc
    except DataFileError as exc:  # the pixels were read but are unusable: say which file
        raise DataFileError(f"image file {p}: {exc}") from exc
    except MemoryLimitError:  # (a ValueError too) names the file and the limit itself
        raise
    except (OSError, ValueError, SyntaxError) as exc:
        raise DataFileError(f"image file {p} is truncated or corrupt ({exc}); save it "
                            "again") from exc
    if arr.ndim == 3 and grayscale:
        if arr.shape[2] >= 3 and not (np.array_equal(arr[..., 0], arr[..., 1])
                                      and np.array_equal(arr[..., 1], arr[..., 2])):
            warnings.warn(f"{p}: a colour image was converted to grey (ITU-R 601 luma "
                          "0.299 R + 0.587 G + 0.114 B), because the network takes one "
                          "channel; convert it yourself to choose another mapping.",
                          stacklevel=2)
        arr = arr[..., :3] @ np.array([0.299, 0.587, 0.114]) if arr.shape[2] >= 3 else arr[..., 0]
    elif arr.ndim == 3:
        arr = arr[..., :3] if arr.shape[2] >= 3 else arr[..., 0]
    chans = np.stack([arr] if arr.ndim == 2 else [arr[..., c] for c in range(arr.shape[2])])
    if channels == 3 and chans.shape[0] == 1:  # a grey picture for a colour network
        chans = np.repeat(chans, 3, axis=0)
    if size is not None:
        chans = resize_channels(chans, size, str(p))
    return np.clip(chans, 0.0, 1.0).astype(np.float32)[None]


#: Most pixels a folder of images (``lbi prior``'s samples) may hold in all: each file is
#: decoded at full size before it is resized. 2^28, e.g. 4,096 images of 256 x 256.
MAX_FOLDER_PIXELS = 2**28


def check_image_folder(folder: Path, files: list[Path], sample_shape: tuple[int, ...]) -> None:
    """Refuse, from the files' headers alone, a folder of images that would not fit the
    memory limit once resized to ``sample_shape`` (the stacked batch and a copy) or that
    holds more than MAX_FOLDER_PIXELS pixels to decode. A file that is not an image is left
    to the reader, which names what is wrong with it."""
    import math

    from PIL import Image

    from lbi_engine.limits import check_bytes

    check_bytes(2 * 4 * len(files) * math.prod(sample_shape), f"the {len(files):,} images "
                f"in {folder} at size {tuple(sample_shape)}", "use fewer images")
    total = 0
    for f in files:
        try:
            kind = _image_kind(f)
            if kind == "NPY":
                continue
            with Image.open(f, formats=[kind]) as im:  # the header only: nothing decoded
                total += im.size[0] * im.size[1]
        except (OSError, ValueError, SyntaxError, DataFileError, Image.DecompressionBombError):
            continue  # the reader refuses it, naming the file
        if total > MAX_FOLDER_PIXELS:
            raise DataFileError(f"the images in {folder} hold more than "
                                f"{MAX_FOLDER_PIXELS:,} pixels in all (at {f.name}); each is "
                                "decoded at full size: use fewer or smaller images (resize "
                                "them to the network's input first)")


def _check_png(p: Path) -> None:
    """The PNG's chunk headers walked (never its data) before Pillow parses any chunk."""
    from lbi_engine.data._png16 import check_png_chunks

    try:
        check_png_chunks(p)
    except DataFileError as exc:
        raise DataFileError(f"image file {p}: {exc}") from None


def _limit_pillow() -> None:
    """Pillow's own bounds at lbi's: its decompression-bomb check at the pixels lbi reads
    (it refuses at twice this; its warning below that is lbi's one-line refusal instead),
    its text chunks at the ancillary bound of the PNG walk."""
    from PIL import Image, PngImagePlugin

    from lbi_engine.data._png16 import MAX_ANCILLARY_CHUNK, MAX_ANCILLARY_TOTAL

    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
    PngImagePlugin.MAX_TEXT_CHUNK = MAX_ANCILLARY_CHUNK
    PngImagePlugin.MAX_TEXT_MEMORY = MAX_ANCILLARY_TOTAL


def resize_channels(chans: np.ndarray, size: int | tuple[int, int], source: str) -> np.ndarray:
    """``(C, H, W)`` resized to ``size`` (int side or (H, W)), channel by channel, bilinear with
    Pillow's antialiasing (what torchvision's ``Resize`` does; torch's
    ``interpolate(..., antialias=True)`` agrees to float32 rounding). Warns when the aspect
    ratio changes."""
    import numpy as np
    from PIL import Image

    hw = (int(size), int(size)) if isinstance(size, int) else (int(size[0]), int(size[1]))
    if min(hw) < 1:
        raise InputError(f"image size {size} must be positive")
    h0, w0 = chans.shape[-2:]
    if abs(h0 * hw[1] - w0 * hw[0]) > 0.01 * max(h0 * hw[1], w0 * hw[0]):
        warnings.warn(f"{source}: the {w0} x {h0} image was resized to {hw[1]} x {hw[0]}, which "
                      "changes its aspect ratio (it is stretched); crop it to that aspect "
                      "ratio first to avoid this.", stacklevel=3)
    return np.stack([np.asarray(Image.fromarray(c.astype(np.float32)).resize(
        (hw[1], hw[0]), Image.Resampling.BILINEAR)) for c in chans])


def _check_channel_request(path: str | os.PathLike[str], channels: int) -> None:
    """A picture has 1 (grey) or 3 (colour) channels: refuse other network channel counts."""
    if channels not in (1, 3):
        raise DataFileError(f"{path}: the network takes {channels} input channels, but an image "
                            "file gives 1 (grey) or 3 (colour); give a .npy array of shape "
                            f"({channels}, H, W) instead")


def _npy_as_image(p: Path, size: Any, grayscale: bool,
                  channels: int | None = None) -> np.ndarray:
    """A .npy given as an image: read without pickles (read_array); (H, W) or (C, H, W)."""
    import numpy as np

    arr = read_array(p)  # header checked, no pickles, finite, float
    a = arr[0] if arr.ndim >= 3 and arr.shape[0] == 1 else arr
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3:
        raise DataFileError(f"{p} has shape {tuple(arr.shape)}; an image array is (H, W) or "
                            "(C, H, W)")
    if channels is not None and a.shape[0] != channels:
        raise DataFileError(f"{p} has {a.shape[0]} channel(s) but the network takes {channels}; "
                            f"give an array of shape ({channels}, H, W)")
    if grayscale and a.shape[0] > 1:
        raise DataFileError(f"{p} has {a.shape[0]} channels; give a one-channel (H, W) array")
    if size is not None:
        a = resize_channels(a, size, str(p))
    return np.clip(a, 0.0, 1.0).astype(np.float32)[None]


def _pil_to_float(im: Any) -> np.ndarray:
    """Pillow image -> float64 (H, W) or (H, W, C) in [0, 1]."""
    import numpy as np

    if im.mode in ("P", "PA", "1", "CMYK", "YCbCr", "LAB", "HSV", "LA"):
        im = im.convert("RGBA" if im.mode in ("P", "PA") else
                        "L" if im.mode in ("1", "LA") else "RGB")
    arr = np.asarray(im)
    if arr.dtype == np.uint8:
        return arr / 255.0
    if arr.dtype.kind in "ui":
        if im.mode.startswith("I;16") or arr.max(initial=0) <= 65535:
            return np.clip(arr.astype(np.float64), 0, 65535) / 65535.0
        return arr.astype(np.float64) / float(np.iinfo(arr.dtype).max)
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise DataFileError("the float image contains NaN or infinite pixel values; replace "
                            "them (e.g. np.nan_to_num) and save it again")
    lo, hi = float(arr.min()), float(arr.max())
    if lo >= 0.0 and hi <= 1.0:
        return arr
    return (arr - lo) / (hi - lo) if hi > lo else np.zeros_like(arr)


def read_array(path: str | os.PathLike[str]) -> np.ndarray:
    """Read a ``.npy`` array (never unpickling) as a float array with the file's shape.

    uint8 is divided by 255 and uint16 by 65535 (image conventions); bool becomes 0/1; other
    numbers are converted to float32 (float64 stays float64). Use :func:`as_batch` to fit
    the result to a network's input shape.
    """
    import numpy as np

    p = _require_file(path, "array file")
    _check_npy_header(p)
    try:
        arr = np.load(p, allow_pickle=False)
    except ValueError as exc:
        msg = ("it holds Python objects (a pickle), which lbi does not load; save a numeric "
               "array with np.save(path, array)") if "pickle" in str(exc) else \
              f"it is not a valid .npy file ({exc}); save it with np.save"
        raise DataFileError(f"{p}: {msg}") from exc
    except (OSError, EOFError) as exc:
        raise DataFileError(f"{p} is truncated or not a .npy file ({exc}); save it with "
                            "np.save") from exc
    if not isinstance(arr, np.ndarray):
        raise DataFileError(f"{p} is an .npz archive; give a single .npy array")
    if arr.dtype.kind not in "biuf":
        raise DataFileError(f"{p} holds {arr.dtype} data; a numeric array is needed")
    if arr.dtype == np.uint8:
        arr = arr / np.float32(255)
    elif arr.dtype == np.uint16:
        arr = arr / np.float32(65535)
    elif arr.dtype != np.float64:
        arr = arr.astype(np.float32)
    if not np.isfinite(arr).all():
        raise DataFileError(f"{p} contains NaN or infinite values; clean the data first")
    return np.ascontiguousarray(arr)


_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | os.PathLike[str], *, raw: bool = False) -> np.ndarray:
    """Read an IDX file (the original MNIST format; ``.gz`` is detected by its magic bytes).

    Default: 3-d uint8 files (images) become ``(N, 1, H, W)`` float32 in [0, 1], 1-d files
    (labels) int64 ``(N,)``, anything else float32. ``raw=True``: the values as stored.
    """
    import numpy as np

    p = _require_file(path, "IDX file")
    data = p.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise DataFileError(f"{p} is a truncated or corrupt gzip file ({exc}); "
                                "download or copy it again") from exc
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] not in _IDX_TYPES:
        raise DataFileError(f"{p} is not an IDX file (bad magic number); expected MNIST-style "
                            "*-idx3-ubyte / *-idx1-ubyte files")
    ndim = data[3]
    header = 4 + 4 * ndim
    if ndim == 0 or len(data) < header:
        raise DataFileError(f"{p}: IDX header is truncated; download or copy the file again")
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    dtype = np.dtype(_IDX_TYPES[data[2]])
    need = math.prod(dims) * dtype.itemsize
    if len(data) - header != need:
        raise DataFileError(f"{p}: IDX header says {dims} ({need} bytes of data) but the file has "
                            f"{len(data) - header}; it is truncated or corrupt")
    arr = np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)
    arr = arr.astype(dtype.newbyteorder("="))  # native byte order, and a writable copy
    if raw:
        return arr
    if ndim == 1:
        return arr.astype(np.int64)
    if ndim == 3 and dtype.itemsize == 1 and dtype.kind == "u":
        return (arr.astype(np.float32) / np.float32(255.0))[:, None]
    return arr.astype(np.float32)


def read_torchvision_folder(root: str | os.PathLike[str], name: str = "MNIST",
                            train: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Images ``(N, 1, 28, 28)`` in [0, 1] and labels from a torchvision MNIST/FashionMNIST
    folder that already exists on disk (torchvision's ``download=False``: nothing is fetched).

    The raw IDX files in torchvision's layout ``ROOT/NAME/raw/{train,t10k}-*-ubyte[.gz]`` are
    read directly; that is the same data torchvision uses, without its 5-second import.
    ``root`` may also point at ``ROOT/NAME`` or ``ROOT/NAME/raw``.
    """
    if name not in ("MNIST", "FashionMNIST"):
        raise InputError(f"dataset name {name!r} is not supported; use 'MNIST' or "
                         "'FashionMNIST'")
    base = Path(root).expanduser()
    prefix = "train" if train else "t10k"
    for raw in (base / name / "raw", base / "raw", base):
        imgs = [raw / f"{prefix}-images-idx3-ubyte{ext}" for ext in ("", ".gz")]
        labs = [raw / f"{prefix}-labels-idx1-ubyte{ext}" for ext in ("", ".gz")]
        img = next((f for f in imgs if f.exists()), None)
        lab = next((f for f in labs if f.exists()), None)
        if img is not None and lab is not None:
            images, labels = read_idx(img), read_idx(lab)
            if images.shape[0] != labels.shape[0]:
                raise DataFileError(f"{img} has {images.shape[0]} images but {lab} has "
                                    f"{labels.shape[0]} labels; the folder is inconsistent")
            return images, labels
    raise DataFileError(
        f"no {name} {'training' if train else 'test'} files under {base} (looked for "
        f"{name}/raw/{prefix}-images-idx3-ubyte[.gz] and {prefix}-labels-idx1-ubyte[.gz]); lbi "
        "never downloads: copy an existing torchvision data folder here, or use the bundled "
        "MNIST subset (dataset 'mnist')")
