"""The bundled datasets: real MNIST digits, colour photograph patches and synthetic cartoons.

numpy out, no torch: the GUI process shows samples and thumbnails from here before (or
without) the engine loading torch; :mod:`lbi_engine.data.tensors` wraps the same values as
tensors for the engine. Images are float32 ``(B, C, H, W)`` in the display range [0, 1];
labels int64 ``(B,)``.

The npz is found by :func:`resources_dir` (lbi_engine/data/resource_files.py): the checkout's
``resources/`` folder, installed as the package ``lbi_resources`` and located with
importlib.resources, so wheels and non-editable installs find them too. Nothing is downloaded,
ever.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from lbi_engine.data.resource_files import resources_dir
from lbi_engine.errors import DataFileError, InputError

__all__ = ["MNIST_FILE", "NATURAL_FILE", "list_datasets", "list_splits", "dataset_size",
           "mnist_split", "natural_split", "sample_array"]

if TYPE_CHECKING:
    import numpy as np

MNIST_FILE = "mnist_5k.npz"
_MNIST_SPLITS = ("train", "val", "all")
NATURAL_FILE = "natural_rgb.npz"
_NATURAL_SPLITS = ("train", "val")
_NATURAL_SIZES = (32, 64, 128)


def list_datasets() -> list[str]:
    """Names accepted by :func:`sample_array` (and ``get_sample``)."""
    return ["mnist", "natural", "cartoon"]


def list_splits(dataset: str) -> list[str]:
    """Splits of a dataset; for ``"cartoon"`` the split is the shape family."""
    from lbi_engine.data.cartoons import CARTOON_KINDS

    if dataset == "mnist":
        return list(_MNIST_SPLITS)
    if dataset == "natural":
        return list(_NATURAL_SPLITS)
    if dataset == "cartoon":
        return list(CARTOON_KINDS)
    raise InputError(f"dataset {dataset!r} is unknown; choose one of {list_datasets()}")


def dataset_size(dataset: str, split: str) -> int | None:
    """Number of samples, or ``None`` for generated families without an end (cartoons)."""
    if split not in list_splits(dataset):
        raise InputError(f"split {split!r} of {dataset!r} is unknown; choose one of "
                         f"{list_splits(dataset)}")
    if dataset == "mnist":
        return int(_mnist_arrays()[f"{split}_idx"].size)
    if dataset == "natural":
        return int(_natural_arrays()[f"{split}_patches"].shape[0])
    return 1 if split == "disc" else None


@functools.lru_cache(maxsize=1)
def _mnist_arrays() -> dict[str, np.ndarray]:
    """Read the bundled npz once (about 5 ms); cached because every sample view uses it."""
    import numpy as np

    path = resources_dir() / "datasets" / MNIST_FILE
    try:
        with np.load(path, allow_pickle=False) as z:
            out = {k: z[k] for k in ("images", "labels", "train_idx", "val_idx")}
    except FileNotFoundError as exc:
        raise DataFileError(f"{path} is missing; rebuild it with "
                            "`python scripts/make_mnist_npz.py`") from exc
    except (OSError, ValueError, KeyError) as exc:
        raise DataFileError(f"{path} is unreadable ({exc}); rebuild it with "
                            "`python scripts/make_mnist_npz.py`") from exc
    out["all_idx"] = np.arange(out["labels"].size)
    return out


@functools.lru_cache(maxsize=1)
def _natural_arrays() -> dict[str, np.ndarray]:
    """Read the bundled photographs and patch positions once (about 30 ms)."""
    import numpy as np

    path = resources_dir() / "datasets" / NATURAL_FILE
    rebuild = "rebuild it with `python scripts/make_natural_npz.py`"
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError as exc:
        raise DataFileError(f"{path} is missing; {rebuild}") from exc
    except (OSError, ValueError) as exc:
        raise DataFileError(f"{path} is unreadable ({exc}); {rebuild}") from exc


def _natural_patch(split: str, index: int, size: int) -> np.ndarray:
    """Patch ``index`` of ``split`` as uint8 ``(size, size, 3)``: the stored 32-px patch, or a
    ``size``-px window centred on it (moved inside the photograph where it would leave it)."""
    arr = _natural_arrays()
    image, scale, top, left = (int(v) for v in arr[f"{split}_patches"][index])
    img = arr[f"image_{image}_{scale}"]
    patch = int(arr["patch"].reshape(-1)[0])
    if size > min(img.shape[:2]):  # a 128-px window at the small scale: the same place at 256
        big = arr[f"image_{image}_0"]
        ratio = big.shape[0] / img.shape[0]
        top, left, patch = round(top * ratio), round(left * ratio), round(patch * ratio)
        img = big
    half = (size - patch) // 2
    top = min(max(top - half, 0), img.shape[0] - size)
    left = min(max(left - half, 0), img.shape[1] - size)
    return img[top:top + size, left:left + size]


def natural_split(split: str = "train") -> np.ndarray:
    """The bundled colour patches: ``(N, 3, 32, 32)`` float32 in [0, 1].

    ``split``: ``"train"`` (6000 patches of five photographs) or ``"val"`` (600 patches of two
    other photographs: astronaut and chelsea); the split is by photograph, see
    resources/datasets/PROVENANCE.md.
    """
    import numpy as np

    if split not in _NATURAL_SPLITS:
        raise InputError(f"natural split {split!r} is unknown; choose one of "
                         f"{list(_NATURAL_SPLITS)}")
    n = dataset_size("natural", split) or 0
    patches = np.stack([_natural_patch(split, i, 32) for i in range(n)])
    return (patches.astype(np.float32) / np.float32(255.0)).transpose(0, 3, 1, 2).copy()


def mnist_split(split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """The bundled real-MNIST subset: images ``(N, 1, 28, 28)`` float32 in [0, 1], labels int64.

    ``split``: ``"train"`` (4000, 400 per class), ``"val"`` (1000, 100 per class) or ``"all"``
    (5000, in source order: sorted by label). The split is fixed (seeded, stratified) and
    stored in the npz; see resources/datasets/PROVENANCE.md.
    """
    import numpy as np

    if split not in _MNIST_SPLITS:
        raise InputError(f"MNIST split {split!r} is unknown; choose one of {list(_MNIST_SPLITS)}")
    arr = _mnist_arrays()
    idx = arr[f"{split}_idx"]
    images = (arr["images"][idx].astype(np.float32) / np.float32(255.0))[:, None]
    return images, arr["labels"][idx].astype(np.int64)


def sample_array(dataset: str, split: str, index: int, *, size: int | None = None) -> np.ndarray:
    """One ground-truth image ``(1, C, H, W)`` float32 in [0, 1].

    ``dataset="mnist"``: ``split`` in train/val/all, ``index`` into that split (28x28; ``size``
    must be None or 28). ``dataset="natural"``: colour patches ``(1, 3, size, size)`` of the
    bundled photographs, ``size`` 32 (default), 64 or 128 (a larger window around the same
    place). ``dataset="cartoon"``: ``split`` is the family (disc, squares,
    rectangles, mixtures), ``index`` is the seed, ``size`` the side length (default 64).
    """
    import numpy as np

    if dataset == "mnist":
        if size not in (None, 28):
            raise InputError(f"MNIST digits are 28x28; size={size} is not available")
        n = dataset_size("mnist", split) or 0
        if not 0 <= int(index) < n:
            raise InputError(f"MNIST {split} index {index} is out of range; use 0..{n - 1}")
        arr = _mnist_arrays()
        img = arr["images"][arr[f"{split}_idx"][int(index)]]
        return (img.astype(np.float32) / np.float32(255.0))[None, None]
    if dataset == "natural":
        side = 32 if size is None else int(size)
        if side not in _NATURAL_SIZES:
            raise InputError(f"natural patches come in sizes {list(_NATURAL_SIZES)}; "
                             f"size={size} is not available")
        if split not in _NATURAL_SPLITS:
            raise InputError(f"natural split {split!r} is unknown; choose one of "
                             f"{list(_NATURAL_SPLITS)}")
        n = dataset_size("natural", split) or 0
        if not 0 <= int(index) < n:
            raise InputError(f"natural {split} index {index} is out of range; use 0..{n - 1}")
        patch = _natural_patch(split, int(index), side)
        return (patch.astype(np.float32) / np.float32(255.0)).transpose(2, 0, 1)[None].copy()
    if dataset == "cartoon":
        from lbi_engine.data.cartoons import cartoon

        image = cartoon(split, int(index), 64 if size is None else int(size))
        return np.asarray(image, dtype=np.float32)[None, None]
    raise InputError(f"dataset {dataset!r} is unknown; choose one of {list_datasets()}")
