"""Safe loading of model files: recognise the format, refuse code-carrying files without consent.

Why: a whole pickled ``nn.Module`` (``torch.save(model)``) is a program, not data; unpickling
it runs whatever functions the file names. :func:`lbi_engine.models.zoo.load_model_file` recognises
such files *without unpickling them* (:func:`sniff_model_format`, :func:`pickle_globals`) and
refuses them unless the person opts in for this run with ``allow_code=True``
(``allow_pickle=True`` is its old name). TorchScript is refused the same way:
``torch.jit.load`` runs the archive's scripted ``__setstate__`` methods. Data-only formats
(safetensors, state dicts read with ``torch.load(weights_only=True)``, ONNX, cards) are loaded
directly. Consent never comes from a file (a run record, a session): see
:func:`lbi_engine.request.strip_file_consent`.

(Moved out of :mod:`lbi_engine.io` so that the generic atomic writers do not depend on the
model formats, and the importers can refuse a file without importing the zoo.)
"""

from __future__ import annotations

import io
import os
import pickle
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from lbi_engine.errors import ModelFileError, UnsafeFileError

__all__ = [
    "SAFE_FORMATS_HINT",
    "is_pt2_archive",
    "pickle_globals",
    "refuse_code_format",
    "sniff_model_format",
]


# member names that mark a torch.export archive (read as data, never torch.export.load)
_MODEL_JSON = "models/model.json"
_OLD_JSON = "serialized_exported_program.json"


def is_pt2_archive(names: Sequence[str]) -> bool:
    """Whether a zip's member names are those of a torch.export archive."""
    return any(n.endswith(_MODEL_JSON) or n.endswith(_OLD_JSON) for n in names)


_TENSOR_GLOBALS = ("torch._utils._rebuild", "torch._tensor._rebuild", "torch.storage.",
                   "torch.Size", "torch.device", "collections.OrderedDict", "_codecs.encode")
_DTYPE_NAMES = {"float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64",
                "uint8", "bool", "complex64", "complex128", "half", "float", "double", "long"}


def _is_tensor_global(name: str) -> bool:
    """True for names a weights-only pickle legitimately imports (tensor rebuild, storages)."""
    return name.startswith(_TENSOR_GLOBALS) or (
        name.startswith("torch.") and name.count(".") == 1
        and (name.endswith("Storage") or name.split(".")[1] in _DTYPE_NAMES))


SAFE_FORMATS_HINT = (
    "Formats lbi opens without running anything from the file: safetensors (or a "
    "torch.save(model.state_dict()) state dict) with a card JSON, ONNX (.onnx), and "
    "torch.export programs (.pt2); `lbi convert` turns a file you trust into one of them.")
_CONVERT_HINT = (
    "Better: convert it once, where you trust the file, with `lbi convert FILE --allow-code "
    "--out DIR` (writes DIR/NAME.safetensors + DIR/NAME.json, which load without this flag), "
    "or export the model to ONNX (`torch.onnx.export`) or .pt2 (`torch.export.save`), which "
    "lbi reads without running code; see docs/own-network.md.")
_CONSENT_HINT = ("Load it only if you trust its source, for this run: CLI --allow-code "
                 "(alias --allow-pickle), Python allow_code=True (alias allow_pickle), "
                 "GUI: confirm the dialog.")


def refuse_code_format(p: Path, fmt: str) -> None:
    """Raise UnsafeFileError for a format whose loading runs code stored in the file."""
    raise UnsafeFileError(
        f"{p} is a {fmt} file: loading it runs the program stored in the file (TorchScript "
        "executes the archive's scripted __setstate__ methods while reading it), which can "
        "read, change or delete your files, so lbi refuses it by default. "
        + SAFE_FORMATS_HINT + " " + _CONSENT_HINT)


def sniff_model_format(path: str | os.PathLike[str]) -> str:
    """Identify a model file by magic bytes (and extension for ONNX) without unpickling it.

    Returns one of ``"safetensors"``, ``"torchscript"``, ``"torch-zip"`` (``torch.save``
    output), ``"torch-legacy"`` (old non-zip ``torch.save`` or a raw pickle), ``"onnx"``,
    ``"card"`` (a JSON model card). Raises :class:`ModelFileError` naming the file otherwise.
    """
    from lbi_engine.limits import open_regular

    p = Path(path)
    if not p.exists():
        raise ModelFileError(f"model file {p} does not exist; check the path")
    if p.is_dir():
        raise ModelFileError(f"{p} is a directory; give the model file itself")
    try:  # a FIFO, a device or /proc is refused here, before anything reads it
        with open_regular(p, "model file", 2**62, ModelFileError) as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(16)
    except OSError as exc:  # permissions, a vanished network share, an I/O error
        raise ModelFileError(f"model file {p} cannot be read ({exc.strerror or exc}); check its "
                             "permissions (e.g. chmod u+r) or copy it somewhere readable") from exc
    if size == 0:
        raise ModelFileError(f"model file {p} is empty (0 bytes); it was probably not saved "
                             "completely, so save or download it again")
    suffix = p.suffix.lower()
    if head[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(p) as zf:
                names = zf.namelist()
        except (zipfile.BadZipFile, OSError) as exc:
            raise ModelFileError(f"model file {p} is a truncated or corrupt zip archive "
                                 f"({exc}); save or download it again") from exc
        if is_pt2_archive(names):  # torch.export.save: read as data, never torch.export.load
            return "pt2"
        if any(n.endswith("constants.pkl") or "/code/" in n for n in names):
            return "torchscript"
        if any(n.endswith("data.pkl") for n in names):
            return "torch-zip"
        raise ModelFileError(f"{p} is a zip archive but not a PyTorch file (no data.pkl); "
                             "expected a state dict, a .pt2 (torch.export.save), safetensors "
                             "or ONNX file")
    # A safetensors header length of 128 (mod 256) also starts with 0x80, like a pickle: the
    # JSON '{' at byte 8 tells them apart (no pickle has it there).
    if (head[:1] == b"\x80" and head[8:9] != b"{") or suffix in (".pkl", ".pickle"):
        return "torch-legacy"
    if suffix == ".safetensors" or (len(head) >= 9 and head[8:9] == b"{"):
        header_len = int.from_bytes(head[:8], "little") if len(head) >= 8 else -1
        if len(head) >= 9 and head[8:9] == b"{" and 0 < header_len <= size - 8:
            return "safetensors"
        if suffix == ".safetensors":
            raise ModelFileError(f"model file {p} is not a valid safetensors file (bad or "
                                 "truncated header); save or download it again")
    if suffix == ".onnx":
        return "onnx"
    if suffix == ".json" or head.lstrip()[:1] == b"{":
        return "card"
    raise ModelFileError(
        f"{p} is not a model format lbi understands; expected .safetensors (+ card JSON), "
        "a .pt/.pth state dict (+ card JSON), ONNX (.onnx), torch.export (.pt2), or a card")


def _pickle_streams(p: Path, fmt: str) -> list[bytes]:
    """The pickle byte streams of a torch file (zip: ``*/data.pkl``; legacy: the file)."""
    from lbi_engine.limits import check_bytes, read_regular

    if fmt == "torch-zip":
        with zipfile.ZipFile(p) as zf:
            members = [i for i in zf.infolist() if i.filename.endswith("data.pkl")]
            # sizes from the zip directory, before inflating (zipfile stops at the declared
            # size, so a member cannot inflate past it)
            check_bytes(sum(i.file_size for i in members), f"model file {p} (its pickles)",
                        "it is damaged, or far larger than a network lbi can invert")
            return [zf.read(i) for i in members]
    return [read_regular(p, "model file", error=ModelFileError)]


def pickle_globals(data: bytes, max_pickles: int = 4) -> list[str]:
    """Names of the Python objects a pickle would import, found by reading opcodes only.

    ``pickletools.genops`` parses without executing anything. ``STACK_GLOBAL`` takes its
    module and name from the two previous string pushes, which may come from the memo, so a
    small memo model is kept. Legacy torch files hold several pickles back to back.
    """
    import pickletools

    found: list[str] = []
    stream = io.BytesIO(data)
    for _ in range(max_pickles):
        strings: list[str] = []
        memo: dict[int, Any] = {}
        last: Any = None
        try:
            # arg: the opcode's argument (a str for the string opcodes, an int for the memo's)
            ops: Iterator[tuple[pickletools.OpcodeInfo, Any, int | None]] = \
                pickletools.genops(stream)
            for op, arg, _pos in ops:
                if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8",
                               "SHORT_BINSTRING", "BINSTRING", "STRING"):
                    last = arg
                    strings.append(arg)
                elif op.name == "MEMOIZE":
                    memo[len(memo)] = last
                elif op.name in ("BINPUT", "LONG_BINPUT", "PUT"):
                    memo[int(arg)] = last
                elif op.name in ("BINGET", "LONG_BINGET", "GET"):
                    last = memo.get(int(arg))
                    if isinstance(last, str):
                        strings.append(last)
                elif op.name in ("GLOBAL", "INST"):
                    found.append(str(arg).replace(" ", "."))
                    last = None
                elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                    found.append(f"{strings[-2]}.{strings[-1]}")
                    last = None
                else:
                    last = None
        except Exception:  # a damaged tail just ends the scan
            break
        if stream.tell() >= len(data):
            break
    return list(dict.fromkeys(found))


def _refuse_pickle(p: Path, fmt: str, exc: Exception) -> None:
    """Raise UnsafeFileError for a pickle that references code (a pickled module or worse).

    The weights-only unpickler also fails on damaged pickles; those have no foreign globals
    and get a ModelFileError instead, so "truncated" is never reported as "unsafe".
    """
    try:
        names = [g for s in _pickle_streams(p, fmt) for g in pickle_globals(s)]
    except (OSError, zipfile.BadZipFile):
        names = []
    risky = [g for g in names if not _is_tensor_global(g)]
    if not risky:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise ModelFileError(f"model file {p} could not be read as weights ({first}); it is "
                             "truncated, corrupt, or written with an unusual pickle protocol: "
                             "save it again with torch.save(model.state_dict(), path)") from exc
    shown = ", ".join(risky[:6])
    raise UnsafeFileError(
        f"{p} is a pickled Python object (it references {shown}), not plain weights. "
        "Unpickling it would run code chosen by whoever made the file, which can read, change "
        "or delete your files (arbitrary code execution), so lbi refuses it by default. "
        + _CONSENT_HINT + " " + _CONVERT_HINT)


def _torch_load_weights(p: Path, fmt: str) -> Any:
    """``torch.load(weights_only=True)``; pickles of arbitrary objects become UnsafeFileError."""
    import torch

    from lbi_engine.limits import check_bytes

    if fmt == "torch-zip":  # sizes declared in the zip directory, before inflating anything
        try:
            with zipfile.ZipFile(p) as zf:
                unpacked = sum(i.file_size for i in zf.infolist())
        except (zipfile.BadZipFile, OSError) as exc:
            raise ModelFileError(f"model file {p} is a truncated or corrupt zip archive "
                                 f"({exc}); save or download it again") from exc
        check_bytes(2 * unpacked, f"model file {p} (its tensors unpacked)",
                    "it is damaged, or far larger than a network lbi can invert")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols it then rejects
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            return torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        _refuse_pickle(p, fmt, exc)
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile,
            IndexError, KeyError, TypeError) as exc:  # torch's reader of a cut-off stream
        raise ModelFileError(f"model file {p} could not be read ({exc}); it is truncated, "
                             "corrupt or not a PyTorch file: save or download it again") from exc


def _extract_state_dict(obj: Any, p: Path) -> dict[str, Any]:
    """A flat {name: tensor} dict from a state dict or a common checkpoint wrapper."""
    import torch

    if isinstance(obj, dict):
        for key in ("state_dict", "model_state_dict", "model"):
            if isinstance(obj.get(key), dict):
                obj = obj[key]
                break
        if obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
            return {str(k): v for k, v in obj.items()}
    raise ModelFileError(
        f"{p} holds a {type(obj).__name__}, not a state dict of tensors; save it with "
        "`torch.save(model.state_dict(), path)`")


def _card_for(p: Path, card_path: str | os.PathLike[str] | None) -> Path:
    """The card next to a weights file (``NAME.json``) unless one was given explicitly."""
    card = Path(card_path) if card_path is not None else p.with_suffix(".json")
    if not card.exists():
        raise ModelFileError(
            f"{p} holds only weights; lbi needs a card JSON with the architecture to rebuild "
            f"the network, but {card} does not exist. Put NAME.json next to the weights or "
            "pass card_path=... (CLI: lbi convert --card; see resources/models/README.md), or "
            "export the model to ONNX or .pt2 instead, which need no card "
            "(docs/own-network.md)")
    return card
