"""The bad-input corpus: one table, exercised through the engine API, the CLI and the GUI.

Each :class:`Case` says how to make the bad input (a builder returning the request fields to
change), which :class:`~lbi_engine.errors.LbiError` subclass the engine must raise (``None``:
the input is accepted, possibly with a warning), and words every entry point's message must
contain (case-insensitive). The words name the input and the problem; the entry-point tests
also check the form (CLI: exit 2, one stderr line, no traceback; GUI: a dialog).
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn

from lbi_engine.errors import (
    DataFileError,
    FormatVersionError,
    InputError,
    LbiError,
    ModelFileError,
    ShapeMismatchError,
    UnsafeFileError,
    UnsupportedLayerError,
)
from tests.reliability.kit import Kit, onnx_model, tiny_module, write_card

MARKER = "PWNED_BY_PICKLE"


@dataclass
class Ctx:
    """What a builder may use: a fresh folder, the good files, pytest's monkeypatch."""

    tmp: Path
    kit: Kit
    monkeypatch: Any


@dataclass(frozen=True)
class Case:
    id: str
    make: Callable[[Ctx], dict[str, Any]]
    error: type[LbiError] | None
    words: tuple[str, ...]
    #: GUI route: "file" (Open network / image / data), "param" (a run with these values:
    #: the widgets cannot produce them, a session or the command line can), None (n/a)
    gui: str | None = "file"
    cli: bool = True
    warns: tuple[str, ...] = field(default=())  # accepted cases: words of the warning


# ---- helpers -------------------------------------------------------------------------------
def _half(src: Path, dst: Path) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: len(data) // 2])
    return dst


def _png_bytes(size: tuple[int, int] = (8, 8)) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full(size[::-1], 128, np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose IHDR claims ``width`` x ``height`` (a decompression bomb's header)."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def _npy(ctx: Ctx, name: str, array: np.ndarray, allow_pickle: bool = False) -> str:
    path = ctx.tmp / name
    np.save(path, array, allow_pickle=allow_pickle)
    return str(path)


def _npy_header(ctx: Ctx, name: str, shape: tuple[int, ...], data: bytes = b"") -> str:
    path = ctx.tmp / name
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(
            fh, {"descr": "<f4", "fortran_order": False, "shape": shape})
        fh.write(data)
    return str(path)


class _OpenMarker:
    """Unpickling this calls open(MARKER, "w"): a stand-in for any code a pickle can run."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.path), "w"))


def _evil_pickle(ctx: Ctx, name: str, legacy: bool) -> dict[str, Any]:
    path = ctx.tmp / name
    payload = {"weight": _OpenMarker(ctx.tmp / MARKER)}
    if legacy:
        path.write_bytes(pickle.dumps(payload, protocol=2))
    else:
        torch.save(payload, path)
    assert not (ctx.tmp / MARKER).exists()
    return {"network": str(path)}


def make_unreadable(ctx: Ctx, path: Path) -> None:
    """chmod 000; as root (CI) that does not stop reads, so open() is made to refuse instead."""
    if os.geteuid() != 0:
        path.chmod(0)
        return
    import builtins

    target = os.path.realpath(path)
    real_open = builtins.open

    def guarded(file: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, (str, bytes, os.PathLike)) and \
                os.path.realpath(os.fsdecode(file)) == target:
            raise PermissionError(13, "Permission denied", os.fsdecode(file))
        return real_open(file, *args, **kwargs)

    ctx.monkeypatch.setattr(builtins, "open", guarded)
    ctx.monkeypatch.setattr(io, "open", guarded)


# ---- builders: model files -----------------------------------------------------------------
def onnx_is_png(ctx: Ctx) -> dict[str, Any]:
    (ctx.tmp / "model.onnx").write_bytes(_png_bytes())
    return {"network": str(ctx.tmp / "model.onnx")}


def pt_is_text(ctx: Ctx) -> dict[str, Any]:
    (ctx.tmp / "model.pt").write_text("these are my weights, honest\n")
    return {"network": str(ctx.tmp / "model.pt")}


def empty_pt(ctx: Ctx) -> dict[str, Any]:
    (ctx.tmp / "empty.pt").write_bytes(b"")
    return {"network": str(ctx.tmp / "empty.pt")}


def truncated_torchscript(ctx: Ctx) -> dict[str, Any]:
    return {"network": str(_half(ctx.kit.torchscript, ctx.tmp / "cut_ts.pt"))}


def truncated_state_dict(ctx: Ctx) -> dict[str, Any]:
    path = _half(ctx.kit.state_dict, ctx.tmp / "cut_state.pt")
    write_card(ctx.tmp / "cut_state.json")
    return {"network": str(path)}


def truncated_safetensors(ctx: Ctx) -> dict[str, Any]:
    path = _half(ctx.kit.safetensors, ctx.tmp / "cut.safetensors")
    write_card(ctx.tmp / "cut.json")
    return {"network": str(path)}


def truncated_onnx(ctx: Ctx) -> dict[str, Any]:
    return {"network": str(_half(ctx.kit.onnx, ctx.tmp / "cut.onnx"))}


def whole_module_pickle(ctx: Ctx) -> dict[str, Any]:
    torch.save(tiny_module(), ctx.tmp / "whole_model.pt")
    return {"network": str(ctx.tmp / "whole_model.pt")}


def weights_without_card(ctx: Ctx) -> dict[str, Any]:
    (ctx.tmp / "lonely.pt").write_bytes(ctx.kit.state_dict.read_bytes())
    return {"network": str(ctx.tmp / "lonely.pt")}


def card_bad_json(ctx: Ctx) -> dict[str, Any]:
    (ctx.tmp / "broken_card.json").write_text('{"architecture": {"layers": [')
    return {"network": str(ctx.tmp / "broken_card.json")}


def card_unknown_layer(ctx: Ctx) -> dict[str, Any]:
    layers = [{"type": "Flatten"}, {"type": "Frobnicate", "size": 3}]
    return {"network": str(write_card(ctx.tmp / "odd_card.json", layers=layers,
                                      weights={"source": "seeded-init", "seed": 0}))}


def card_newer_version(ctx: Ctx) -> dict[str, Any]:
    path = write_card(ctx.tmp / "future_card.json", weights={"source": "seeded-init", "seed": 0})
    path.write_text(path.read_text().replace('"format_version": 1', '"format_version": 99'))
    return {"network": str(path)}


def card_weights_mismatch(ctx: Ctx) -> dict[str, Any]:
    (ctx.tmp / "other.pt").write_bytes(ctx.kit.state_dict.read_bytes())
    layers = [{"type": "Flatten"}, {"type": "Linear", "in_features": 784, "out_features": 16},
              {"type": "ReLU"}]
    write_card(ctx.tmp / "other.json", layers=layers)
    return {"network": str(ctx.tmp / "other.pt")}


def gelu_torchscript(ctx: Ctx) -> dict[str, Any]:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Flatten(), nn.Linear(784, 8), nn.GELU()).eval()
    torch.jit.script(m).save(str(ctx.tmp / "gelu_net.pt"))
    return {"network": str(ctx.tmp / "gelu_net.pt"), "input_shape": (1, 28, 28)}


def maxpool_onnx(ctx: Ctx) -> dict[str, Any]:
    import onnx
    from onnx import helper

    nodes = [helper.make_node("MaxPool", ["x"], ["y"], name="pool1", kernel_shape=[2, 2],
                              strides=[2, 2])]
    onnx.save(onnx_model(nodes, [], out_rank=4), str(ctx.tmp / "maxpool.onnx"))
    return {"network": str(ctx.tmp / "maxpool.onnx")}


def missing_network(ctx: Ctx) -> dict[str, Any]:
    return {"network": str(ctx.tmp / "missing_model.pt")}


def network_is_directory(ctx: Ctx) -> dict[str, Any]:
    (ctx.tmp / "model_dir.pt").mkdir()
    return {"network": str(ctx.tmp / "model_dir.pt")}


def unreadable_network(ctx: Ctx) -> dict[str, Any]:
    path = ctx.tmp / "locked_ts.pt"
    path.write_bytes(ctx.kit.torchscript.read_bytes())
    make_unreadable(ctx, path)
    return {"network": str(path)}


def non_utf8_missing_network(ctx: Ctx) -> dict[str, Any]:
    name = os.fsdecode(os.fsencode(str(ctx.tmp)) + b"/caf\xe9_net.pt")
    return {"network": name}


def nan_weights(ctx: Ctx) -> dict[str, Any]:
    state = tiny_module().state_dict()
    state["1.weight"][3, 5] = float("nan")
    torch.save(state, ctx.tmp / "nan_state.pt")
    write_card(ctx.tmp / "nan_state.json")
    return {"network": str(ctx.tmp / "nan_state.pt")}


def inf_weights_torchscript(ctx: Ctx) -> dict[str, Any]:
    m = tiny_module()
    with torch.no_grad():
        m[1].bias[0] = float("inf")
    torch.jit.script(m).save(str(ctx.tmp / "inf_ts.pt"))
    return {"network": str(ctx.tmp / "inf_ts.pt"), "input_shape": (1, 28, 28)}


def card_is_binary(ctx: Ctx) -> dict[str, Any]:
    (ctx.tmp / "binary_card.json").write_bytes(_png_bytes())
    return {"network": str(ctx.tmp / "binary_card.json")}


def card_absurd_layer(ctx: Ctx) -> dict[str, Any]:
    layers = [{"type": "Flatten"}, {"type": "Linear", "in_features": 784, "out_features": 10**9}]
    return {"network": str(write_card(ctx.tmp / "huge_card.json", layers=layers,
                                      weights={"source": "seeded-init", "seed": 0}))}


def card_absurd_input_shape(ctx: Ctx) -> dict[str, Any]:
    return {"network": str(write_card(ctx.tmp / "wide_card.json", input_shape=[10**5] * 3,
                                      weights={"source": "seeded-init", "seed": 0}))}


def onnx_absurd_input_dims(ctx: Ctx) -> dict[str, Any]:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="act")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 100000, 100000])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1, 100000, 100000])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(ctx.tmp / "vast.onnx"))
    return {"network": str(ctx.tmp / "vast.onnx")}


def float_tiff(ctx: Ctx, name: str, value: float) -> dict[str, Any]:
    a = np.full((28, 28), 0.5, np.float32)
    a[2, 3] = value
    Image.fromarray(a, mode="F").save(ctx.tmp / name)
    return {"image": str(ctx.tmp / name)}


def absurd_input_shape(ctx: Ctx) -> dict[str, Any]:
    return {"network": str(ctx.kit.torchscript), "input_shape": (100000, 100000, 100000)}


def mismatched_input_shape(ctx: Ctx) -> dict[str, Any]:
    return {"network": str(ctx.kit.torchscript), "input_shape": (1, 32, 32)}


# ---- builders: data files ------------------------------------------------------------------
def truth(ctx: Ctx, name: str, array: np.ndarray, allow_pickle: bool = False) -> dict[str, Any]:
    return {"truth": _npy(ctx, name, array, allow_pickle)}


def png_file(ctx: Ctx, name: str, data: bytes) -> dict[str, Any]:
    (ctx.tmp / name).write_bytes(data)
    return {"image": str(ctx.tmp / name)}


def unreadable_image(ctx: Ctx) -> dict[str, Any]:
    path = ctx.tmp / "locked.png"
    path.write_bytes(_png_bytes((28, 28)))
    make_unreadable(ctx, path)
    return {"image": str(path)}


def data_array(ctx: Ctx, name: str, array: np.ndarray) -> dict[str, Any]:
    return {"data": _npy(ctx, name, array)}


_DIGIT = np.linspace(0, 1, 784, dtype=np.float32).reshape(28, 28)


def _with(value: float) -> np.ndarray:
    a = _DIGIT.copy()
    a[3, 4] = value
    return a


# ---- the table -----------------------------------------------------------------------------
CASES: list[Case] = [
    # model files: wrong, empty, truncated, mislabelled
    Case("onnx-is-png", onnx_is_png, ModelFileError, ("model.onnx", "onnx")),
    Case("pt-is-text", pt_is_text, ModelFileError, ("model.pt", "format")),
    Case("empty-pt", empty_pt, ModelFileError, ("empty.pt", "empty")),
    Case("truncated-torchscript", truncated_torchscript, ModelFileError,
         ("cut_ts.pt", "truncated")),
    Case("truncated-state-dict", truncated_state_dict, ModelFileError,
         ("cut_state.pt", "truncated")),
    Case("truncated-safetensors", truncated_safetensors, ModelFileError,
         ("cut.safetensors", "truncated")),
    Case("truncated-onnx", truncated_onnx, ModelFileError, ("cut.onnx", "again")),
    Case("weights-without-card", weights_without_card, ModelFileError, ("lonely", "card")),
    Case("card-bad-json", card_bad_json, ModelFileError, ("broken_card.json", "json")),
    Case("card-unknown-layer", card_unknown_layer, ModelFileError, ("odd_card.json", "frobnicate")),
    Case("card-newer-version", card_newer_version, FormatVersionError,
         ("future_card.json", "format_version", "update")),
    Case("card-weights-mismatch", card_weights_mismatch, ModelFileError,
         ("other.pt", "do not match")),
    Case("card-is-binary", card_is_binary, ModelFileError, ("binary_card.json", "json")),
    Case("card-absurd-layer", card_absurd_layer, ModelFileError, ("huge_card.json", "weights")),
    Case("card-absurd-input-shape", card_absurd_input_shape, InputError,
         ("100000", "too large")),
    Case("onnx-absurd-input-dims", onnx_absurd_input_dims, InputError, ("vast.onnx", "too large")),
    Case("missing-network", missing_network, ModelFileError, ("missing_model.pt",)),
    Case("network-is-directory", network_is_directory, ModelFileError,
         ("model_dir.pt", "directory")),
    Case("unreadable-network", unreadable_network, ModelFileError, ("locked_ts.pt", "permission")),
    Case("non-utf8-name-missing", non_utf8_missing_network, ModelFileError, ("_net.pt",)),
    # code execution: refused without opt-in (the marker file must never appear)
    Case("pickle-runs-code-zip", lambda c: _evil_pickle(c, "evil.pt", legacy=False),
         UnsafeFileError, ("evil.pt", "pickle", "allow")),
    Case("pickle-runs-code-legacy", lambda c: _evil_pickle(c, "evil.pkl", legacy=True),
         UnsafeFileError, ("evil.pkl", "pickle", "allow")),
    Case("pickled-whole-module", whole_module_pickle, UnsafeFileError,
         ("whole_model.pt", "pickle", "code")),
    # layers and weights
    Case("unsupported-gelu", gelu_torchscript, UnsupportedLayerError, ("gelu",)),
    Case("unsupported-maxpool-onnx", maxpool_onnx, UnsupportedLayerError,
         ("maxpool", "averagepool")),
    Case("nan-in-weights", nan_weights, InputError, ("weight", "nan")),
    Case("inf-in-weights", inf_weights_torchscript, InputError, ("bias", "inf")),
    Case("input-shape-absurd", absurd_input_shape, InputError, ("100000", "too large")),
    Case("input-shape-mismatch", mismatched_input_shape, ShapeMismatchError, ("1024",)),
    # ground-truth arrays and images
    Case("truth-nan", lambda c: truth(c, "t_nan.npy", _with(np.nan)), DataFileError,
         ("t_nan.npy", "nan")),
    Case("truth-inf", lambda c: truth(c, "t_inf.npy", _with(np.inf)), DataFileError,
         ("t_inf.npy", "infinite")),
    Case("truth-wrong-shape", lambda c: truth(c, "t_small.npy", np.zeros((10, 10), np.float32)),
         ShapeMismatchError, ("t_small.npy", "(10, 10)")),
    Case("truth-complex", lambda c: truth(c, "t_cplx.npy", _DIGIT.astype(np.complex64)),
         DataFileError, ("t_cplx.npy", "complex")),
    Case("truth-object", lambda c: truth(c, "t_obj.npy", np.array([{"a": 1}], dtype=object),
                                         allow_pickle=True),
         DataFileError, ("t_obj.npy", "pickle")),
    Case("truth-zero-size", lambda c: truth(c, "t_void.npy", np.zeros((0, 28), np.float32)),
         ShapeMismatchError, ("t_void.npy", "(0, 28)")),
    Case("truth-structured",
         lambda c: truth(c, "t_rec.npy", np.zeros(784, dtype=[("a", "<f4"), ("b", "<i4")])),
         DataFileError, ("t_rec.npy", "numeric")),
    Case("truth-int64", lambda c: truth(c, "t_int.npy", (_DIGIT > 0.5).astype(np.int64)),
         None, ()),
    Case("truth-empty-npy", lambda c: {"truth": str(_touch(c.tmp / "t_empty.npy"))},
         DataFileError, ("t_empty.npy", "empty")),
    Case("truth-npz", lambda c: _npz(c), DataFileError, ("t_pack.npz", "npz")),
    Case("truth-npy-gigantic-header",
         lambda c: {"truth": _npy_header(c, "t_huge.npy", (100000, 100000, 100000))},
         DataFileError, ("t_huge.npy", "100000")),
    Case("truth-npy-truncated",
         lambda c: {"truth": _npy_header(c, "t_cut.npy", (28, 28), b"\x00" * 100)},
         DataFileError, ("t_cut.npy", "truncated")),
    Case("image-empty", lambda c: png_file(c, "empty.png", b""), DataFileError,
         ("empty.png", "empty")),
    Case("image-corrupt", lambda c: png_file(c, "broken.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40),
         DataFileError, ("broken.png", "image")),
    Case("image-is-text", lambda c: png_file(c, "notes.png", b"hello, I am text\n"),
         DataFileError, ("notes.png", "image")),
    Case("image-one-pixel", lambda c: png_file(c, "dot.png", _png_bytes((1, 1))),
         ShapeMismatchError, ("dot.png", "resize")),
    Case("image-one-pixel-resized",
         lambda c: {**png_file(c, "dot2.png", _png_bytes((1, 1))), "resize": True}, None, ()),
    Case("image-decompression-bomb",
         lambda c: png_file(c, "bomb.png", _png_header_only(100000, 100000)),
         DataFileError, ("bomb.png", "pixels")),
    Case("image-float-nan", lambda c: float_tiff(c, "nan_float.tif", np.nan), DataFileError,
         ("nan_float.tif", "nan")),
    Case("image-missing", lambda c: {"image": str(c.tmp / "nowhere.png")}, DataFileError,
         ("nowhere.png", "does not exist")),
    Case("image-unreadable", unreadable_image, DataFileError, ("locked.png", "permission")),
    # measured network outputs
    Case("data-nan", lambda c: data_array(c, "y_nan.npy", np.full(32, np.nan, np.float32)),
         DataFileError, ("y_nan.npy", "nan")),
    Case("data-wrong-shape", lambda c: data_array(c, "y_short.npy", np.ones(7, np.float32)),
         ShapeMismatchError, ("y_short.npy", "output")),
    Case("data-negative-relu",
         lambda c: data_array(c, "y_neg.npy", np.linspace(-1, 1, 32, dtype=np.float32)),
         None, (), warns=("y_neg.npy", "clipped")),
    # parameters
    Case("alpha-zero", lambda c: {"alpha": 0.0}, InputError, ("alpha", "> 0"), gui="param"),
    Case("alpha-negative", lambda c: {"alpha": -1.0}, InputError, ("alpha",), gui="param"),
    Case("alpha-nan", lambda c: {"alpha": float("nan")}, InputError, ("alpha", "finite"),
         gui="param"),
    Case("alpha-inf", lambda c: {"alpha": float("inf")}, InputError, ("alpha", "finite"),
         gui="param"),
    Case("alpha-huge", lambda c: {"alpha": 1e300}, InputError, ("alpha",), gui="param"),
    Case("noise-negative", lambda c: {"noise_std": -0.1}, InputError, ("noise",), gui="param"),
    Case("noise-huge", lambda c: {"noise_std": 1e300}, InputError, ("noise",), gui="param"),
    Case("noise-nan", lambda c: {"noise_std": float("nan")}, InputError, ("noise",), gui="param"),
    Case("max-iter-zero", lambda c: {"max_iter": 0}, InputError, ("max", "iter"), gui="param"),
    Case("unknown-regulariser", lambda c: {"regulariser": "frobenius"}, InputError,
         ("frobenius",), gui="param"),
    Case("unknown-solver-option", lambda c: {"options": {"bogus_knob": 1}}, InputError,
         ("bogus_knob",), gui="param"),
    Case("step-scale-negative", lambda c: {"options": {"step_scale": -1.0}}, InputError,
         ("step_scale",), gui="param"),
    Case("dtype-complex", lambda c: {"dtype": "complex64"}, InputError, ("dtype",), gui="param"),
    Case("index-out-of-range", lambda c: {"index": 10**6}, InputError, ("out of range",),
         gui="param"),
    Case("tv-on-flat-vector",
         lambda c: {"network": str(c.kit.flat_card),
                    **truth(c, "t10.npy", np.linspace(0, 1, 10, dtype=np.float32))},
         ShapeMismatchError, ("tv", "image"), gui="param"),
]


def _touch(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def _npz(ctx: Ctx) -> dict[str, Any]:
    path = ctx.tmp / "t_pack.npz"
    np.savez(path, a=_DIGIT)
    return {"truth": str(path)}


CASE_IDS = [c.id for c in CASES]
BY_ID = {c.id: c for c in CASES}


def build(case: Case, tmp: Path, kit: Kit, monkeypatch: Any) -> dict[str, Any]:
    """The full request (base + the case's changes) after making the bad input in ``tmp``."""
    tmp.mkdir(parents=True, exist_ok=True)
    overrides = case.make(Ctx(tmp, kit, monkeypatch))
    return kit.base_request(**overrides)


def message_ok(message: str, words: tuple[str, ...]) -> list[str]:
    """The words missing from ``message`` (case-insensitive)."""
    low = message.lower()
    return [w for w in words if w.lower() not in low]


def to_argv(request: dict[str, Any], out: Path) -> list[str]:
    """``lbi invert`` arguments for a request (the CLI's own parsing is part of the test)."""
    argv = ["invert", "--network", request["network"], "--out", str(out), "--quiet"]
    flags = {"alpha": "--alpha", "noise_std": "--noise-std", "seed": "--seed",
             "regulariser": "--regulariser", "method": "--method", "max_iter": "--max-iter",
             "report_every": "--report-every", "threads": "--threads", "dtype": "--dtype",
             "dataset": "--dataset", "split": "--split"}
    for key, flag in flags.items():
        if key in request:
            argv += [flag, str(request[key])]
    if request.get("input_shape"):
        argv += ["--input-shape", ",".join(str(s) for s in request["input_shape"])]
    for key in ("image", "truth", "data"):
        if request.get(key):
            argv += [f"--{key}", request[key]]
            break
    else:
        argv += ["--sample", str(request["index"])]
    if request.get("resize"):
        argv.append("--resize")
    for key, value in (request.get("options") or {}).items():
        argv += ["--option", f"{key}={value}"]
    return argv
