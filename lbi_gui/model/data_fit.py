"""The data follows the network: a request's sample made to fit the network's input shape.

Why: opening a network must never strand the data the window shows. A bundled dataset whose
images do not fit the network is replaced by one whose images do; a photograph of another
size is resized to the network's input (said in a one-line note). What cannot be adapted
(a .npy array or a measured code of the wrong shape, a network no bundled dataset fits) is
a shape error, which the window turns into a choice (open an image, use a dataset sample,
keep the previous network). Qt-free and torch-free: it runs in the solver's
thread or process before :func:`lbi_engine.prepare`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Request keys this module may change (the window shows what it changed).
FOLLOW_KEYS = ("dataset", "split", "index", "resize")


@dataclass(frozen=True)
class Fitted:
    """The request to prepare and, when it differs from the one asked for, why (one line)."""

    request: dict[str, Any]
    note: str | None = None


def shape_text(shape: tuple[int, ...]) -> str:
    return "×".join(str(int(s)) for s in shape)


def dataset_fits(dataset_shape: tuple[int, ...], input_shape: tuple[int, ...]) -> bool:
    """A dataset's (C, H, W) samples fit an input of ``input_shape``: the same shape, or a
    flat input taking the pixels in order."""
    if len(input_shape) == 1:
        return math.prod(dataset_shape) == int(input_shape[0])
    return tuple(dataset_shape) == tuple(int(s) for s in input_shape)


def fitting_dataset(input_shape: tuple[int, ...], current: str | None = None) -> str | None:
    """A bundled dataset whose samples fit ``input_shape`` (``current`` first); None if none."""
    from lbi_engine.models.zoo_data import DATASET_SHAPES

    names = ([current] if current in DATASET_SHAPES else []) + list(DATASET_SHAPES)
    for name in names:
        if dataset_fits(DATASET_SHAPES[str(name)], input_shape):
            return name
    return None


def input_size(input_shape: tuple[int, ...]) -> tuple[int, int] | None:
    """(H, W) an image is read at for ``input_shape`` (a flat input: its square side)."""
    if len(input_shape) >= 2:
        return int(input_shape[-2]), int(input_shape[-1])
    side = math.isqrt(int(input_shape[0]))
    return (side, side) if side * side == int(input_shape[0]) else None


def image_size(path: str) -> tuple[int, int] | None:
    """(H, W) of a raster image from its header (nothing decoded); None if unreadable."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            width, height = img.size
    except Exception:  # the engine's reader names the file's problem
        return None
    return int(height), int(width)


def degenerate_image(path: str) -> str | None:
    """Why the raster image ``path`` holds no picture to invert (a side under 2 pixels: a
    1×1 image resized to the network's input is a flat square), else None."""
    size = image_size(path)
    if size is None or min(size) >= 2:
        return None
    return (f"{Path(path).name} is {size[1]}×{size[0]} pixels: no picture to invert. Open "
            "an image at least 2 pixels on each side (best: the network's input size).")


def fit_to_network(request: dict[str, Any], input_shape: tuple[int, ...] | None) -> Fitted:
    """``request`` with its sample made to fit a network taking ``input_shape`` (None: the
    shape is not known before loading: unchanged). Raises ShapeMismatchError when the
    request's dataset does not fit and no bundled one does."""
    from lbi_engine.models.zoo_data import DATASET_SHAPES, FIRST_SPLIT

    if input_shape is None or request.get("data") or request.get("truth"):
        return Fitted(dict(request))
    shape = tuple(int(s) for s in input_shape)
    name = Path(str(request.get("network") or "the network")).name
    image = request.get("image")
    if image:
        want, got = input_size(shape), image_size(str(image))
        if request.get("resize") or want is None or got is None or got == want:
            return Fitted(dict(request))
        return Fitted({**request, "resize": True},
                      f"{Path(str(image)).name} is {got[1]}×{got[0]}: resized to "
                      f"{want[1]}×{want[0]}, the input of {name}.")
    dataset = str(request.get("dataset") or "")
    own = DATASET_SHAPES.get(dataset)
    if own is None or dataset_fits(own, shape):
        return Fitted(dict(request))
    other = fitting_dataset(shape)
    if other is None:  # the window offers a choice: open an image, or keep what was before
        from lbi_engine.errors import ShapeMismatchError

        raise ShapeMismatchError(
            f"{dataset} images are {shape_text(own)}, and no bundled dataset has the "
            f"{shape_text(shape)} inputs {name} takes; open an image of your own (it is "
            "resized to fit).")
    return Fitted({**request, "dataset": other, "split": FIRST_SPLIT.get(other), "index": 0},
                  f"{dataset} images are {shape_text(own)}; {name} takes {shape_text(shape)}: "
                  f"switched the data to {other}.")


def follow_changes(shown: dict[str, Any], prepared: dict[str, Any]) -> dict[str, Any]:
    """What the window must take from a prepared request so its panels show the data that
    was prepared: the fields :func:`fit_to_network` may change, when the network and the
    files are the ones on screen (otherwise the prepare is not for what is shown)."""
    if any(shown.get(k) != prepared.get(k) for k in ("network", "image", "truth", "data")):
        return {}
    return {k: prepared[k] for k in FOLLOW_KEYS
            if k in prepared and prepared[k] != shown.get(k)}
