"""``lbi convert``: any supported model file -> the zoo's safe pair NAME.safetensors + NAME.json.

Why: ONNX, ``.pt2`` and TorchScript files are parsed by importers on every load, and a
pickled module needs the person's consent on every load. Converting once gives the format
the zoo itself uses: raw tensors (safetensors, no code) plus a card whose architecture lists
only allow-listed layers (``lbi_engine.models.cards``). The card records where the network came from
(the source file's name, sha256 and format, the lbi and torch versions).

The network is taken apart into the flat list of layers lbi lifts (``ModuleWalker``: nested
containers and traced forwards become their leaf layers), written, read back with the card
reader, and its forward compared with the source's lifted forward before the call returns;
a mismatch removes the written files.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lbi_engine.errors import InputError, LbiError, UnsupportedLayerError

_CARD_FORMATS = ("card", "safetensors", "torch-zip", "torch-legacy")


class GraphNetworkError(UnsupportedLayerError):
    """The network adds or concatenates tensors (a graph): a card lists a chain of layers,
    so the file is not converted; lbi opens and lifts the file itself instead."""


@dataclass
class ConvertResult:
    """What ``convert_model`` wrote, and what it checked."""

    weights: Path
    card_path: Path
    card: dict[str, Any]
    max_rel_error: float  # converted vs source forward on a seeded batch


def _flat_layers(module: Any, shape: tuple[int, ...]) -> Any:
    """The leaf layers lbi lifts, in order, as a flat nn.Sequential (keys 0, 1, ...)."""
    import torch
    from torch import nn

    from lbi_engine.models.layer_lifting import ModuleWalker

    ref = next(iter(module.parameters()), None)
    dtype = ref.dtype if ref is not None and ref.is_floating_point() else torch.float32
    from lbi_engine.models.fx_chain import NotAChain

    walker = ModuleWalker(torch.zeros(2, *shape, dtype=dtype))
    try:
        walker.walk(module.eval())
    except NotAChain as exc:  # cards list layers in a chain; a graph's file is read directly
        raise GraphNetworkError(
            f"lbi convert writes a chain of layers, and this network adds or concatenates "
            f"tensors (a graph: {str(exc).split(':')[0]}); invert the ONNX/.pt2 file directly "
            "(lbi invert --network FILE), which lifts the graph.") from exc
    return nn.Sequential(*[e.module for e in walker.entries])


def _source_module(path: Path, fmt: str, bundle: Any, shape: tuple[int, ...]) -> Any:
    """The nn.Module lbi built (or, for a consented pickle, loaded) for the source file."""
    if fmt == "onnx":
        from lbi_engine.models.onnx_import import onnx_sequential

        return onnx_sequential(path, shape)[0]
    if fmt == "pt2":
        from lbi_engine.models.pt2_import import pt2_sequential

        return pt2_sequential(path, shape)[0]
    # TorchScript: the nn.Sequential lbi rebuilt; a pickled nn.Module: loaded only with consent
    return bundle.module


def _targets(out_dir: Path, name: str, force: bool) -> tuple[Path, Path]:
    from lbi_engine.io import OutputExistsError

    if not name or any(c in name for c in "/\\") or name in (".", ".."):
        raise InputError(f"--name {name!r} is not a file name; give a plain name like 'mynet'.")
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {str(out_dir)!r} is a file, not a folder; give a folder.")
    weights, card = out_dir / f"{name}.safetensors", out_dir / f"{name}.json"
    existing = [str(p) for p in (weights, card) if p.exists()]
    if existing and not force:
        raise OutputExistsError(f"{', '.join(existing)} already exist(s); choose another --name "
                                "or --out, or pass --force to replace them.")
    return weights, card


def convert_model(source: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                  name: str | None = None, *, input_shape: tuple[int, ...] | None = None,
                  allow_pickle: bool = False, card_path: str | os.PathLike[str] | None = None,
                  force: bool = False, maxpool_relu: bool = False) -> ConvertResult:
    """Convert ``source`` into ``out_dir/NAME.safetensors`` + ``out_dir/NAME.json``.

    Raises the importers' errors (UnsupportedLayerError naming the layer, UnsafeFileError for
    a pickled module without ``allow_pickle``, ...) before anything is written, and
    OutputExistsError when a target exists and ``force`` is not set. Every MaxPool2d of the
    encoder is written as the exact ReLU layers it is lifted with
    (:mod:`lbi_engine.models.maxpool_relu`); ``maxpool_relu`` is accepted for callers written
    when that was an option, and changes nothing.
    """
    del maxpool_relu  # always on: lifting rewrites max-pooling by default
    import torch
    from safetensors.torch import save as save_safetensors

    from lbi_engine import __version__
    from lbi_engine.io import atomic_write_bytes, atomic_write_text
    from lbi_engine.models.cards import (
        describe_module,
        file_sha256,
        format_version_for,
        tensor_sha256,
    )
    from lbi_engine.models.maxpool_relu import REWRITE_MAXPOOL
    from lbi_engine.models.model_files import sniff_model_format
    from lbi_engine.models.network import verify_against
    from lbi_engine.models.zoo import bundle_from_card, load_model_file

    src = Path(source).expanduser()
    fmt = sniff_model_format(src)
    name = name or src.stem
    out = Path(out_dir).expanduser()
    weights, card_file = _targets(out, name, force)
    bundle = load_model_file(src, input_shape=input_shape, allow_pickle=allow_pickle,
                             card_path=card_path)
    shape = tuple(bundle.input_shape)
    if fmt in _CARD_FORMATS and bundle.module is not None and isinstance(
            bundle.module, torch.nn.Sequential) and bundle.card.get("architecture"):
        flat, n_enc = bundle.module, int(bundle.card["architecture"].get(
            "encoder_layers", len(bundle.module)))
        if REWRITE_MAXPOOL.get() and any(  # the encoder as the layers it was lifted with
                isinstance(m, torch.nn.MaxPool2d) for m in flat[:n_enc].modules()):
            encoder = _flat_layers(flat[:n_enc], shape)
            flat = torch.nn.Sequential(*encoder, *flat[n_enc:])
            n_enc = len(encoder)
    else:
        flat = _flat_layers(_source_module(src, fmt, bundle, shape), shape)
        n_enc = len(flat)
    flat = torch.nn.Sequential(*flat.children())  # keys 0, 1, ... as build_module makes them
    layers = describe_module(flat)
    state = {k: v.detach().to("cpu", torch.float32).contiguous()
             for k, v in flat.state_dict().items() if v.is_floating_point()}
    state.update({k: v.detach().to("cpu").contiguous() for k, v in flat.state_dict().items()
                  if not v.is_floating_point()})
    now = _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()
    card: dict[str, Any] = {
        "format_version": format_version_for(layers), "name": name,
        "description": f"converted from {src.name} ({fmt}) by lbi convert",
        "architecture": {"layers": layers, "encoder_layers": n_enc},
        "input_shape": list(shape),
        "preprocessing": bundle.preprocessing.to_dict(),
        "weights": {"source": "file", "file": weights.name, "dtype": "float32",
                    "tensor_sha256": tensor_sha256(state),
                    "parameters": int(sum(v.numel() for v in state.values()))},
        "provenance": {"source_file": src.name, "source_sha256": file_sha256(src),
                       "source_format": fmt, "lbi_version": __version__,
                       "converted": now},
        "torch_version": torch.__version__, "date": now[:10],
    }
    data = save_safetensors(state, metadata={"format": "pt", "converted_by": "lbi convert"})
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(weights, data)
    card["weights"]["sha256"] = file_sha256(weights)
    import json

    atomic_write_text(card_file, json.dumps(card, indent=2) + "\n")
    try:  # read back exactly as a user will, and compare with the source's lifted forward
        again = bundle_from_card(card_file)
        err = verify_against(again.encoder, bundle.encoder.forward,
                             what=f"converted network {card_file.name!r}")
    except LbiError:
        for p in (weights, card_file):
            p.unlink(missing_ok=True)
        raise
    return ConvertResult(weights, card_file, card, err)
