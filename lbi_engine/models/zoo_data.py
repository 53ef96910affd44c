"""Which bundled dataset fits which zoo network (Qt-free, torch-free).

Why: the circle perceptron takes 64×64 images and the MNIST networks 28×28; a person who
picks a network by clicking or types ``lbi invert --network
circle-perceptron --sample 0`` must get a sample it can invert, never a shape error. Shapes
come from the zoo's model cards (JSON) and the datasets' fixed image sizes, so this works
before the engine (torch) has loaded.
"""

from __future__ import annotations

#: Image shape (C, H, W) of each bundled dataset's samples and the split to offer first.
DATASET_SHAPES: dict[str, tuple[int, int, int]] = {"mnist": (1, 28, 28),
                                                   "natural": (3, 32, 32),
                                                   "cartoon": (1, 64, 64)}
FIRST_SPLIT = {"mnist": "val", "natural": "val", "cartoon": "disc"}


def zoo_input_shape(network: str) -> tuple[int, ...] | None:
    """The input shape a zoo network's card declares; None for files or unknown names."""
    from lbi_engine.models import zoo

    try:
        if network not in zoo.list_zoo():
            return None
        shape = zoo.zoo_card(network).get("input_shape")
    except Exception:  # an unreadable card: the engine reports it on prepare
        return None
    return tuple(int(s) for s in shape) if shape else None


def dataset_for(shape: tuple[int, ...] | None, current: str) -> str | None:
    """A bundled dataset whose samples fit ``shape`` (``current`` if it does); None if none."""
    if shape is None or DATASET_SHAPES.get(current) == tuple(shape):
        return current
    for name, ds_shape in DATASET_SHAPES.items():
        if ds_shape == tuple(shape):
            return name
    return None


def network_for(dataset: str, current: str, zoo_names: list[str]) -> str | None:
    """A zoo network that takes ``dataset``'s images (``current`` if it does, or if it is a
    file whose shape the card cannot tell); None when no zoo network fits."""
    want = DATASET_SHAPES.get(dataset)
    shape = zoo_input_shape(current)
    if want is None or shape is None or shape == want:
        return current
    for name in zoo_names:
        if zoo_input_shape(name) == want:
            return name
    return None
