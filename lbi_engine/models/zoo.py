"""Named pre-trained networks (``resources/models``) and model cards -> :class:`ModelBundle`.

A zoo entry is ``NAME.json`` (the card) plus usually ``NAME.safetensors`` (the weights). The
card holds everything needed to rebuild the ``nn.Module`` without running code from a file:
``architecture.layers`` is a list of layer specs (``{"type": "Conv2d", "in_channels": 1,
...}``) built from an allow-list of ``torch.nn`` classes, and ``architecture.encoder_layers``
says how many of them form the encoder (the network to invert); the rest is the decoder.
A card may instead say ``"weights": {"source": "seeded-init", "seed": S}``: the weights are
PyTorch's default initialisation after ``torch.manual_seed(S)`` (the paper's random circle
perceptron; 8 MB that need not be committed). The regenerated tensors are checked against
the card's ``tensor_sha256``.

The same card format describes a user's own state dict or safetensors file
(:func:`load_model_file`).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lbi_engine.data import Preprocessing, resources_dir
from lbi_engine.errors import InputError, LbiError, ModelFileError, UnsupportedLayerError
from lbi_engine.models.cards import (
    CARD_FORMAT_VERSION,
    build_module,
    check_residual_shapes,
    check_state,
    describe_module,
    file_sha256,
    read_card,
    tensor_sha256,
)
from lbi_engine.models.model_files import (
    _card_for,
    _extract_state_dict,
    _torch_load_weights,
    refuse_code_format,
    sniff_model_format,
)

if TYPE_CHECKING:
    import torch
    from torch import Tensor, nn

    from lbi_engine.models.network import LiftedNetwork

__all__ = ["ModelBundle", "list_zoo", "zoo_card", "zoo_dir", "load_zoo", "load_network",
           "load_model_file", "build_module", "describe_module", "tensor_sha256", "file_sha256",
           "bundle_from_card", "CARD_FORMAT_VERSION"]

@dataclass
class ModelBundle:
    """A loaded network: the encoder to invert, plus what is needed to show results.

    ``encoder`` maps network inputs (after ``preprocessing.apply``) to codes; ``decoder``
    (autoencoders only) maps codes back; ``module`` is the whole original ``nn.Module`` (or
    the loaded TorchScript/pickled module), ``None`` for ONNX. ``sha256`` identifies the
    weights (file hash, or the tensor hash for seed-generated weights).
    """

    name: str
    card: dict[str, Any]
    encoder: LiftedNetwork
    decoder: nn.Module | None = None
    module: nn.Module | None = None
    preprocessing: Preprocessing = field(default_factory=Preprocessing)
    sha256: str = ""
    source_path: str | None = None

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one network input (no batch dimension)."""
        return tuple(self.encoder.input_shape)

    def encode(self, x01: Tensor) -> Tensor:
        """Code of display-space images ``(B, *input_shape)`` in [0, 1]."""
        return self.encoder.forward(self.preprocessing.apply(x01))

    def decode(self, code: Tensor, clamp: bool = False) -> Tensor:
        """Decoder output in display space (``preprocessing.undo`` applied).

        Not clamped by default, so errors against the ground truth are the decoder's own;
        ``clamp=True`` clips to [0, 1] for display.
        """
        import torch

        if self.decoder is None:
            from lbi_engine.errors import InputError

            raise InputError(f"network {self.name!r} has no decoder; only autoencoders from a "
                             "card with a decoder part can decode codes")
        with torch.no_grad():
            out = self.preprocessing.undo(self.decoder(code))
        return out.clamp(0.0, 1.0) if clamp else out

    def to(self, device: torch.device | str | None = None,
           dtype: torch.dtype | None = None) -> ModelBundle:
        """A bundle whose encoder and decoder live on ``device`` with ``dtype``."""
        dec = self.decoder.to(device=device, dtype=dtype) if self.decoder is not None else None
        mod = self.module
        if mod is not None and not hasattr(mod, "_c"):  # ScriptModules keep their own dtype
            mod = mod.to(device=device, dtype=dtype)
        return ModelBundle(self.name, self.card, self.encoder.to(device=device, dtype=dtype),
                           dec, mod, self.preprocessing, self.sha256, self.source_path)


def zoo_dir() -> Path:
    """``resources/models`` (see :func:`lbi_engine.data.resources_dir`)."""
    return resources_dir() / "models"


def list_zoo() -> list[str]:
    """Names of the bundled networks (one ``NAME.json`` card each), sorted."""
    d = zoo_dir()
    # NAME.prior.json beside a network is its feature prior's card (feature_prior.py), no network
    return sorted(p.stem for p in d.glob("*.json") if not p.stem.endswith(".prior")) \
        if d.is_dir() else []


def zoo_card(name: str) -> dict[str, Any]:
    """A deep copy of the bundled card ``name`` (editing it changes nothing on disk)."""
    names = list_zoo()
    if name not in names:
        raise ModelFileError(f"{name!r} is not a bundled network; choose one of {names}")
    return copy.deepcopy(read_card(zoo_dir() / f"{name}.json"))


def load_zoo(name: str, device: torch.device | str = "cpu",
             dtype: torch.dtype | None = None) -> ModelBundle:
    """Load the bundled network ``name`` (weights checked against the card's sha256)."""
    import torch

    zoo_card(name)  # a clear error for unknown names
    bundle = bundle_from_card(zoo_dir() / f"{name}.json")
    return bundle.to(device=device, dtype=dtype or torch.float32)


def load_network(name_or_path: str | os.PathLike[str], *,
                 input_shape: tuple[int, ...] | None = None, allow_code: bool = False,
                 allow_pickle: bool = False,
                 card_path: str | os.PathLike[str] | None = None) -> ModelBundle:
    """A zoo name or a model file path -> :class:`ModelBundle` (see :func:`load_model_file`).

    ``allow_code`` (alias ``allow_pickle``) is the person's consent, for this call, to open a
    format whose loading runs code from the file (TorchScript, pickled modules).
    """
    text = os.fspath(name_or_path)
    if text in list_zoo() and not Path(text).exists():
        bundle = load_zoo(text)
        if input_shape is not None and tuple(input_shape) != bundle.input_shape:
            from lbi_engine.errors import ShapeMismatchError

            raise ShapeMismatchError(f"network {text!r} takes inputs of shape "
                                     f"{bundle.input_shape}, not {tuple(input_shape)}")
        return bundle
    if not Path(text).expanduser().exists():
        raise ModelFileError(f"{text!r} is neither a bundled network ({', '.join(list_zoo())}) "
                             "nor an existing model file; check the name or path")
    return load_model_file(Path(text).expanduser(), input_shape=input_shape,
                           allow_code=allow_code or allow_pickle, card_path=card_path)


# ---------------------------------------------------------------------------------------------
# builders used by load_model_file


def _load_safetensors(path: Path) -> dict[str, Tensor]:
    """The tensors of a safetensors file, memory-mapped: only the tensors themselves are
    copied out, never the whole file into memory first (a 3 GB sparse file used to be read
    whole). Counted against the memory limit before anything is read."""
    from safetensors import SafetensorError, safe_open
    from safetensors.torch import load as load_safetensors

    from lbi_engine.limits import check_bytes, read_regular

    size = os.stat(path).st_size
    check_bytes(size, f"safetensors file {path} ({size:,} bytes)",
                "check that it is the right file")
    try:
        name = os.fsdecode(path)
        name.encode("utf-8")  # the Rust reader refuses paths that are not valid UTF-8
    except UnicodeError:
        check_bytes(2 * size, f"safetensors file {path} ({size:,} bytes, read whole)",
                    "rename it to a UTF-8 name so that it can be memory-mapped")
        try:
            return load_safetensors(read_regular(path, "safetensors file",
                                                 error=ModelFileError))
        except (SafetensorError, ValueError) as exc:
            raise ModelFileError(f"safetensors file {path} is truncated or corrupt ({exc}); "
                                 "save or download it again") from exc
    try:
        with safe_open(name, framework="pt", device="cpu") as fh:
            return {key: fh.get_tensor(key) for key in fh.keys()}
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise ModelFileError(f"safetensors file {path} is truncated or corrupt ({exc}); "
                             "save or download it again") from exc


def _load_weights_file(path: Path) -> dict[str, Tensor]:
    fmt = sniff_model_format(path)
    if fmt == "safetensors":
        return _load_safetensors(path)
    if fmt in ("torch-zip", "torch-legacy"):
        return _extract_state_dict(_torch_load_weights(path, fmt), path)
    raise ModelFileError(f"{path} is a {fmt} file; a card's weights must be safetensors or a "
                         "state dict")


def bundle_from_card(card_path: Path, weights_path: Path | None = None,
                     input_shape: tuple[int, ...] | None = None,
                     state_dict: dict[str, Tensor] | None = None) -> ModelBundle:
    """Rebuild a network from a card and its weights (given, named in the card, or seeded)."""
    import torch

    from lbi_engine.models.importers import first_shape_hint
    from lbi_engine.models.network import LiftedNetwork

    card_path = Path(card_path)
    card = read_card(card_path)
    arch = card["architecture"]
    layers = arch.get("layers")
    wspec = card.get("weights") or {}
    seeded = state_dict is None and weights_path is None and wspec.get("source") == "seeded-init"
    # Layer construction draws random initial weights: fork the RNG so loading a network never
    # shifts the caller's random stream (noise seeds, experiments).
    # Sizes first, on the meta device (no memory): a card of a few bytes can describe
    # a network of tens of gigabytes; it is refused with the estimate before any layer exists.
    from lbi_engine.models.footprint import check_network_memory

    with torch.device("meta"):
        probe = build_module(layers, where=f"model card {card_path}")
    probe_shape = input_shape or tuple(card.get("input_shape") or ()) or first_shape_hint(probe)
    if probe_shape:
        from lbi_engine.models.network import check_input_shape

        check_residual_shapes(probe, check_input_shape(probe_shape),
                              f"model card {card_path}")
        check_network_memory(probe, check_input_shape(probe_shape),
                             f"network of model card {card_path}")
    del probe
    with torch.random.fork_rng(devices=[]):
        if seeded:
            torch.manual_seed(int(wspec["seed"]))
        module = build_module(layers, where=f"model card {card_path}")
    n_enc = int(arch.get("encoder_layers", len(layers)))
    if not 1 <= n_enc <= len(layers):
        raise ModelFileError(f"model card {card_path}: encoder_layers={n_enc} must be between 1 "
                             f"and the number of layers ({len(layers)})")
    expected_file_sha = None
    if seeded:
        state = module.state_dict()
        sha = tensor_sha256(state)
        if wspec.get("tensor_sha256") and sha != wspec["tensor_sha256"]:
            raise ModelFileError(
                f"model card {card_path}: weights regenerated from seed {wspec['seed']} have "
                f"sha256 {sha[:12]}..., the card expects {wspec['tensor_sha256'][:12]}...; this "
                f"torch ({torch.__version__}) initialises layers differently from the one "
                f"that wrote the card ({card.get('torch_version', '?')})")
        source = None
    else:
        if state_dict is None:
            if weights_path is None:
                if not wspec.get("file"):
                    raise ModelFileError(f"model card {card_path} names no weights file; give "
                                         "the weights file (safetensors or state dict) too")
                weights_path = card_path.parent / wspec["file"]
                expected_file_sha = wspec.get("sha256")
            state_dict = _load_weights_file(Path(weights_path))
        check_state(module, state_dict, str(weights_path), card_path)
        if weights_path is not None:
            sha = file_sha256(weights_path)
            if expected_file_sha and sha != expected_file_sha:
                raise ModelFileError(f"weights file {weights_path} has sha256 {sha[:12]}..., "
                                     f"but card {card_path} expects {expected_file_sha[:12]}...; "
                                     "the file was changed or damaged: restore it")
        else:
            sha = tensor_sha256(state_dict)
        module.load_state_dict(state_dict)
        source = str(weights_path) if weights_path is not None else str(card_path)
    module.eval().requires_grad_(False)
    shape = input_shape or tuple(card.get("input_shape") or ()) or first_shape_hint(module)
    if not shape:
        raise ModelFileError(f"model card {card_path} has no 'input_shape'; add it (one sample, "
                             "e.g. [1, 28, 28]) or pass input_shape")
    name = str(card.get("name") or card_path.stem)
    encoder_module = module[:n_enc]
    try:
        encoder = LiftedNetwork.from_module(encoder_module, tuple(shape), name=name)
    except (UnsupportedLayerError, InputError) as exc:  # name the file
        raise _with_path(exc, card_path)  # noqa: B904 - cause set inside
    decoder = module[n_enc:] if n_enc < len(module) else None
    return ModelBundle(name=name, card=card, encoder=encoder, decoder=decoder, module=module,
                       preprocessing=Preprocessing.from_dict(card.get("preprocessing")),
                       sha256=sha, source_path=source or str(card_path))


def _with_path(exc: LbiError, path: Path) -> LbiError:
    """The error (same class) with the file named first (a no-op if the message names it)."""
    msg = str(exc)
    if str(path) in msg:
        return exc
    new = type(exc)(f"network from {path}: {msg}")
    new.__cause__ = exc
    return new


def bundle_from_graph(path: Path, fmt: str, input_shape: tuple[int, ...] | None,
                      allow_code: bool = False) -> ModelBundle:
    """TorchScript (only with ``allow_code``), ONNX or .pt2 file -> bundle (encoder only; identity
    preprocessing). A TorchScript bundle's module is the nn.Sequential lbi rebuilt."""
    from lbi_engine.models.network import LiftedNetwork

    module = None
    try:
        if fmt == "torchscript":
            from lbi_engine.models.network import load_torchscript_module

            encoder, module = load_torchscript_module(path, input_shape, name=path.stem,
                                                      allow_code=allow_code)
        elif fmt == "pt2":
            encoder = LiftedNetwork.from_pt2(path, input_shape, name=path.stem)
        else:
            encoder = LiftedNetwork.from_onnx(path, input_shape, name=path.stem)
    except (UnsupportedLayerError, InputError) as exc:  # name the file
        raise _with_path(exc, path)  # noqa: B904 - cause set inside
    card = {"name": path.stem, "format": fmt, "input_shape": list(encoder.input_shape)}
    return ModelBundle(path.stem, card, encoder, None, module, Preprocessing(),
                       file_sha256(path), str(path))


def bundle_from_module(module: nn.Module, path: Path,
                       input_shape: tuple[int, ...] | None) -> ModelBundle:
    """An unpickled ``nn.Module`` (only after ``allow_pickle=True``) -> bundle."""
    from lbi_engine.errors import InputError, InputShapeNeededError
    from lbi_engine.models.importers import first_shape_hint
    from lbi_engine.models.network import LiftedNetwork

    module.eval()
    shape = input_shape or first_shape_hint(module)
    if shape is None:
        raise InputShapeNeededError(f"{path} does not say its input shape; pass input_shape "
                                    "(one sample, e.g. (1, 28, 28); CLI: --input-shape 1,28,28)")
    try:
        encoder = LiftedNetwork.from_module(module, tuple(shape), name=path.stem)
    except (UnsupportedLayerError, InputError) as exc:  # name the file
        raise _with_path(exc, path)  # noqa: B904 - cause set inside
    card = {"name": path.stem, "format": "pickled-module", "input_shape": list(shape)}
    return ModelBundle(path.stem, card, encoder, None, module, Preprocessing(),
                       file_sha256(path), str(path))


def load_model_file(path: str | os.PathLike[str], *, input_shape: tuple[int, ...] | None = None,
                    allow_code: bool = False, allow_pickle: bool = False,
                    card_path: str | os.PathLike[str] | None = None) -> ModelBundle:
    """Load any supported model file into a :class:`lbi_engine.models.zoo.ModelBundle`.

    Formats (detected by :func:`sniff_model_format`): safetensors or a ``.pt/.pth`` state
    dict, each with a card JSON holding the architecture (``card_path`` or ``NAME.json`` beside
    the file); a card JSON itself; ONNX; and, only with ``allow_code=True`` (the person's
    consent for this run; ``allow_pickle`` is its alias), TorchScript and a whole pickled
    ``nn.Module`` (otherwise :class:`UnsafeFileError`). ``input_shape`` (without
    batch) is needed where the file does not say it (TorchScript, ONNX, pickled modules whose
    first layer is not Linear) and overrides a card's.
    """
    p = Path(path)
    fmt = sniff_model_format(p)
    consent = bool(allow_code or allow_pickle)
    shape = tuple(int(s) for s in input_shape) if input_shape is not None else None
    if fmt == "card":
        return bundle_from_card(p, input_shape=shape)
    if fmt == "safetensors":
        return bundle_from_card(_card_for(p, card_path), weights_path=p, input_shape=shape)
    if fmt == "torchscript" and not consent:
        refuse_code_format(p, "TorchScript")
    if fmt in ("torchscript", "onnx", "pt2"):
        return bundle_from_graph(p, fmt, input_shape=shape, allow_code=consent)
    if not consent:
        state = _extract_state_dict(_torch_load_weights(p, fmt), p)
        return bundle_from_card(_card_for(p, card_path), weights_path=p, input_shape=shape,
                                    state_dict=state)
    import torch

    try:
        obj = torch.load(p, map_location="cpu", weights_only=False)
    except Exception as exc:  # anything from a foreign pickle becomes one message
        raise ModelFileError(f"model file {p} could not be unpickled ({type(exc).__name__}: "
                             f"{exc}); it is truncated, corrupt, or needs code that is not "
                             "installed") from exc
    if isinstance(obj, torch.nn.Module):
        return bundle_from_module(obj, p, input_shape=shape)
    state = _extract_state_dict(obj, p)
    return bundle_from_card(_card_for(p, card_path), weights_path=p, input_shape=shape,
                                state_dict=state)
