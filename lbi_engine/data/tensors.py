"""The data as torch tensors, for the engine: the numpy readers of this package, converted.

The one module of :mod:`lbi_engine.data` that imports torch. ``lbi_engine.data`` re-exports
these names lazily, so ``import lbi_engine.data`` stays torch-free and the GUI process reads
its samples with :func:`lbi_engine.data.sample_array` instead. The values are the numpy
readers' own (``torch.from_numpy``: no copy, no rounding): float32 ``(B, C, H, W)`` in [0, 1]
(``load_array``: the file's shape; float64 stays float64), labels int64 ``(B,)``.
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch
from torch import Tensor

from lbi_engine.data import datasets, files
from lbi_engine.errors import ShapeMismatchError

__all__ = ["as_batch", "get_sample", "load_array", "load_idx", "load_image", "load_mnist",
           "load_torchvision_folder"]


def get_sample(dataset: str, split: str, index: int, *, size: int | None = None) -> Tensor:
    """One ground-truth image ``(1, C, H, W)`` float32 in [0, 1]; see
    :func:`lbi_engine.data.datasets.sample_array` for the datasets and splits."""
    return torch.from_numpy(datasets.sample_array(dataset, split, index, size=size))


def load_mnist(split: str = "train") -> tuple[Tensor, Tensor]:
    """The bundled MNIST subset (images ``(N, 1, 28, 28)``, labels); see
    :func:`lbi_engine.data.datasets.mnist_split`."""
    images, labels = datasets.mnist_split(split)
    return torch.from_numpy(images), torch.from_numpy(labels)


def load_image(path: str | os.PathLike[str], size: int | tuple[int, int] | None = None,
               grayscale: bool = True, channels: int | None = None) -> Tensor:
    """An image file as ``(1, C, H, W)`` float32 in [0, 1]; see
    :func:`lbi_engine.data.files.read_image`."""
    return torch.from_numpy(files.read_image(path, size=size, grayscale=grayscale,
                                             channels=channels))


def load_array(path: str | os.PathLike[str]) -> Tensor:
    """A ``.npy`` file (never unpickled) as a float tensor; see
    :func:`lbi_engine.data.files.read_array`."""
    return torch.from_numpy(files.read_array(path))


def load_idx(path: str | os.PathLike[str], *, raw: bool = False) -> Any:
    """An IDX file as a tensor (``raw=True``: the numpy array as stored); see
    :func:`lbi_engine.data.files.read_idx`."""
    arr = files.read_idx(path, raw=raw)
    return arr if raw else torch.from_numpy(arr)


def load_torchvision_folder(root: str | os.PathLike[str], name: str = "MNIST",
                            train: bool = True) -> tuple[Tensor, Tensor]:
    """Images and labels of an existing torchvision MNIST/FashionMNIST folder; see
    :func:`lbi_engine.data.files.read_torchvision_folder`."""
    images, labels = files.read_torchvision_folder(root, name=name, train=train)
    return torch.from_numpy(images), torch.from_numpy(labels)


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
