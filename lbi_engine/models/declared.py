"""The input shape a network file declares, read without building or lifting the network.

Why: lifting a large network takes seconds to a minute; data of the wrong shape (a colour
picture for a grey network, the wrong size without resize) must be refused before that, and
the image must be read with the channel count the network takes. Every reader here only
parses the file's header-like part (a card's JSON, the ONNX graph's input, a .pt2 program's
signature); anything it cannot tell cheaply is None, and the full load then decides (and
reports any problem with the file itself).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lbi_engine.errors import InputError

__all__ = ["declared_input_shape"]


def declared_input_shape(name_or_path: str | os.PathLike[str],
                         input_shape: tuple[int, ...] | None = None) -> tuple[int, ...] | None:
    """One sample's shape as the network (zoo name or model file) declares it, or None.

    ``input_shape`` (what the person gave) is used for a network that does not fix its own;
    one that contradicts the shape the file or card fixes raises InputError, rather than one
    of the two being silently dropped. Never raises for a damaged or unusual file: None, and
    the loader reports it.
    """
    from lbi_engine.limits import _check_shape

    try:
        fixed = _declared(os.fspath(name_or_path))
    except Exception:  # the full load names the file's problem; this is only a shortcut
        fixed = None
    given = tuple(int(s) for s in input_shape) if input_shape is not None else None
    if given is not None and fixed is not None and given != fixed:
        name = Path(os.fspath(name_or_path)).name
        raise InputError(f"the input shape {_text(given)} contradicts the "
                         f"{_text(fixed)} that {name} fixes; leave the input shape out (the "
                         "network says it), or export the network for the size you want.")
    try:
        shape = given if given is not None else fixed
        # an absurd shape (too large, not positive) is for the full load to refuse: it names
        # the file and the field, which this shortcut cannot
        return None if shape is None else _check_shape(shape)
    except Exception:
        return None


def _text(shape: tuple[int, ...]) -> str:
    return ",".join(str(s) for s in shape)


def _declared(text: str) -> tuple[int, ...] | None:
    from lbi_engine.models.cards import read_card
    from lbi_engine.models.model_files import _card_for, sniff_model_format
    from lbi_engine.models.zoo import list_zoo, zoo_dir

    path = Path(text).expanduser()
    if text in list_zoo() and not path.exists():
        return _card_shape(read_card(zoo_dir() / f"{text}.json"))
    if not path.is_file():
        return None
    fmt = sniff_model_format(path)
    if fmt == "card":
        return _card_shape(read_card(path))
    if fmt in ("safetensors", "torch-zip", "torch-legacy"):
        return _card_shape(read_card(_card_for(path, None)))
    if fmt == "onnx":
        return _onnx_shape(path)
    if fmt == "pt2":
        return _pt2_shape(path)
    return None


def _card_shape(card: dict[str, Any]) -> tuple[int, ...] | None:
    shape = card.get("input_shape")
    return tuple(int(s) for s in shape) if shape else None


def _onnx_shape(path: Path) -> tuple[int, ...] | None:
    """The single data input's dims after the batch, when all are fixed numbers."""
    import onnx

    from lbi_engine.limits import check_bytes
    from lbi_engine.models.footprint import check_onnx_external_data

    # the importer's checks, before onnx.load reads the whole file and parses it
    size = path.stat().st_size
    check_bytes(2 * size, f"ONNX file {str(path)!r} ({size:,} bytes)", "use a smaller model")
    check_onnx_external_data(path)
    model = onnx.load(str(path), load_external_data=False)
    weights = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in weights]
    if len(inputs) != 1:
        return None
    dims = inputs[0].type.tensor_type.shape.dim[1:]
    if not dims or not all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
        return None
    return tuple(int(d.dim_value) for d in dims)


def _pt2_shape(path: Path) -> tuple[int, ...] | None:
    """The one user input's sizes after the batch, from the program's signature (JSON)."""
    from lbi_engine.models.pt2_import import Pt2Archive

    graph_module = Pt2Archive(path).program()["graph_module"]
    users = [spec["user_input"]["arg"]["as_tensor"]["name"]
             for spec in graph_module["signature"]["input_specs"] if "user_input" in spec]
    if len(users) != 1:
        return None
    sizes = [s.get("as_int") for s in graph_module["graph"]["tensor_values"][users[0]]["sizes"]]
    if len(sizes) < 2 or any(s is None or s < 1 for s in sizes[1:]):
        return None
    return tuple(int(s) for s in sizes[1:])
