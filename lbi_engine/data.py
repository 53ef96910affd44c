"""Ground-truth images: the bundled MNIST subset, synthetic cartoons, and the user's own files.

Conventions (the engine's, see docs/CONTRACTS.md): every loader returns **torch** tensors,
float32, values in the display range [0, 1], with a leading batch dimension and a channel
dimension, i.e. ``(B, C, H, W)``. Labels are int64 tensors ``(B,)``. A network that expects a
different value range (e.g. centred MNIST) declares it with :class:`Preprocessing`; PSNR and
display always use [0, 1] with data range 1.

Bundled files are found by :func:`resources_dir` (lbi_engine/resource_files.py): the checkout's
``resources/`` folder, installed as the package ``lbi_resources`` and located with
importlib.resources, so wheels and non-editable installs find them too. Nothing is downloaded,
ever.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

# User-file readers live in their own room; re-exported so `lbi_engine.data` is the one API.
from lbi_engine.datafiles import load_array, load_idx, load_image, load_torchvision_folder
from lbi_engine.errors import DataFileError, InputError, ShapeMismatchError
from lbi_engine.resource_files import resources_dir

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor

__all__ = [
    "Preprocessing", "resources_dir", "list_datasets", "list_splits", "dataset_size",
    "load_mnist", "get_sample", "load_image", "load_array", "load_idx",
    "load_torchvision_folder", "as_batch", "MNIST_FILE",
]

MNIST_FILE = "mnist_5k.npz"
_MNIST_SPLITS = ("train", "val", "all")


@dataclass(frozen=True)
class Preprocessing:
    """How display images in [0, 1] become network inputs: ``(x01 - offset) / scale``.

    This is torchvision's ``Normalize(mean=offset, std=scale)`` with scalars. The zoo's
    perceptron autoencoder uses ``offset`` = the mean pixel of the bundled training split
    (MATH.md §9.2, "centred" images); PSNR is always measured after :meth:`undo`, with data
    range 1.
    """

    offset: float = 0.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.offset) and math.isfinite(self.scale) and self.scale > 0):
            raise InputError(f"Preprocessing(offset={self.offset}, scale={self.scale}) is "
                             "invalid; offset must be finite and scale finite and > 0")

    @property
    def is_identity(self) -> bool:
        """True when network inputs are the display images themselves."""
        return self.offset == 0.0 and self.scale == 1.0

    def apply(self, x01: Any) -> Any:
        """Display space [0, 1] -> network input space (tensor or array, any shape)."""
        return x01 if self.is_identity else (x01 - self.offset) / self.scale

    def undo(self, x: Any) -> Any:
        """Network input space -> display space (inverse of :meth:`apply`)."""
        return x if self.is_identity else x * self.scale + self.offset

    def to_dict(self) -> dict[str, float]:
        """JSON-ready form, as stored in model cards."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Preprocessing:
        """Inverse of :meth:`to_dict`; ``None`` means identity."""
        d = d or {}
        return cls(offset=float(d.get("offset", 0.0)), scale=float(d.get("scale", 1.0)))


# ---------------------------------------------------------------------------------------------
# bundled datasets


def list_datasets() -> list[str]:
    """Names accepted by :func:`get_sample`."""
    return ["mnist", "cartoon"]


def list_splits(dataset: str) -> list[str]:
    """Splits of a dataset; for ``"cartoon"`` the split is the shape family."""
    from lbi_engine.shapes import CARTOON_KINDS

    if dataset == "mnist":
        return list(_MNIST_SPLITS)
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


def load_mnist(split: str = "train") -> tuple[Tensor, Tensor]:
    """The bundled real-MNIST subset: images ``(N, 1, 28, 28)`` float32 in [0, 1], labels int64.

    ``split``: ``"train"`` (4000, 400 per class), ``"val"`` (1000, 100 per class) or ``"all"``
    (5000, in source order: sorted by label). The split is fixed (seeded, stratified) and
    stored in the npz; see resources/datasets/PROVENANCE.md.
    """
    import torch

    if split not in _MNIST_SPLITS:
        raise InputError(f"MNIST split {split!r} is unknown; choose one of {list(_MNIST_SPLITS)}")
    arr = _mnist_arrays()
    idx = arr[f"{split}_idx"]
    images = torch.from_numpy(arr["images"][idx]).to(torch.float32).div_(255.0).unsqueeze(1)
    labels = torch.from_numpy(arr["labels"][idx].astype("int64"))
    return images, labels


def get_sample(dataset: str, split: str, index: int, *, size: int | None = None) -> Tensor:
    """One ground-truth image ``(1, C, H, W)`` float32 in [0, 1].

    ``dataset="mnist"``: ``split`` in train/val/all, ``index`` into that split (28x28; ``size``
    must be None or 28). ``dataset="cartoon"``: ``split`` is the family (disc, squares,
    rectangles, mixtures), ``index`` is the seed, ``size`` the side length (default 64).
    """
    import torch

    if dataset == "mnist":
        if size not in (None, 28):
            raise InputError(f"MNIST digits are 28x28; size={size} is not available")
        n = dataset_size("mnist", split) or 0
        if not 0 <= int(index) < n:
            raise InputError(f"MNIST {split} index {index} is out of range; use 0..{n - 1}")
        arr = _mnist_arrays()
        img = arr["images"][arr[f"{split}_idx"][int(index)]]
        return torch.from_numpy(img.astype("float32") / 255.0)[None, None]
    if dataset == "cartoon":
        from lbi_engine.shapes import cartoon

        return torch.from_numpy(cartoon(split, int(index), 64 if size is None else int(size)))[
            None, None]
    raise InputError(f"dataset {dataset!r} is unknown; choose one of {list_datasets()}")


def as_batch(x: Tensor, input_shape: tuple[int, ...]) -> Tensor:
    """Reshape loaded data to ``(B, *input_shape)`` when the element counts allow it.

    Accepts one sample of any shape with the right number of elements (e.g. (28, 28) for
    (1, 28, 28)) or a batch whose trailing elements match. Why: files store images as (H, W),
    (C, H, W) or flat vectors, and the network only cares about the count and order.
    """
    per = math.prod(input_shape)
    if tuple(x.shape) == tuple(input_shape) or x.numel() == per:
        return x.reshape(1, *input_shape)
    if x.dim() >= 2 and math.prod(x.shape[1:]) == per:
        return x.reshape(x.shape[0], *input_shape)
    raise ShapeMismatchError(f"data of shape {tuple(x.shape)} does not fit the network input "
                             f"{tuple(input_shape)} ({per} values per sample); resize or "
                             "reshape the data, or choose a matching network")
