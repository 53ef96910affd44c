"""Ground-truth images: the bundled MNIST subset, synthetic cartoons, and the user's own files.

Importable without torch, so the window shows samples before the engine has
loaded torch. Two faces of the same values (float32, display range [0, 1], ``(B, C, H, W)``;
labels int64 ``(B,)``; conventions in docs/developer/contracts.md):

- numpy, torch-free: :func:`sample_array`, :func:`mnist_split` (``datasets.py``, the bundled
  data) and :func:`read_image`, :func:`read_array`, :func:`read_idx`,
  :func:`read_torchvision_folder` (``files.py``, the user's files, read by allow-listed
  decoders only);
- torch, for the engine: :func:`get_sample`, :func:`load_mnist`, :func:`load_image`,
  :func:`load_array`, :func:`load_idx`, :func:`load_torchvision_folder`, :func:`as_batch`
  (``tensors.py``). They are imported on first use, so asking for one imports torch and
  ``import lbi_engine.data`` does not.

A network that expects a different value range (e.g. centred MNIST) declares it with
:class:`Preprocessing`; PSNR and display always use [0, 1] with data range 1. Bundled files are
found by :func:`resources_dir` (importlib.resources, lbi_engine/data/resource_files.py). Nothing is
downloaded, ever.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lbi_engine.data.datasets import (
    MNIST_FILE,
    NATURAL_FILE,
    dataset_size,
    list_datasets,
    list_splits,
    mnist_split,
    natural_split,
    sample_array,
)
from lbi_engine.data.files import read_array, read_idx, read_image, read_torchvision_folder
from lbi_engine.data.preprocessing import Preprocessing
from lbi_engine.data.resource_files import resources_dir

if TYPE_CHECKING:
    from lbi_engine.data.tensors import (
        as_batch,
        get_sample,
        load_array,
        load_idx,
        load_image,
        load_mnist,
        load_torchvision_folder,
    )

#: The torch-returning names, served from ``tensors.py`` on first use (PEP 562).
_TENSOR_API = ("as_batch", "get_sample", "load_array", "load_idx", "load_image", "load_mnist",
               "load_torchvision_folder")

__all__ = [
    "MNIST_FILE", "NATURAL_FILE", "Preprocessing", "dataset_size", "list_datasets",
    "list_splits", "mnist_split", "natural_split", "read_array", "read_idx", "read_image",
    "read_torchvision_folder", "resources_dir", "sample_array",
    # torch (_TENSOR_API)
    "as_batch", "get_sample", "load_array", "load_idx", "load_image", "load_mnist",
    "load_torchvision_folder",
]


def __getattr__(name: str) -> Any:
    if name in _TENSOR_API:
        return getattr(importlib.import_module("lbi_engine.data.tensors"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
