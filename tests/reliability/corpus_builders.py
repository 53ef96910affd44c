"""How the bad inputs of the corpus are made: corrupt, truncated, mislabelled, hostile files.

Each builder takes a :class:`Ctx` (a fresh folder, the good files, monkeypatch) and returns
the request fields to change. Kept apart from the table in ``corpus.py``.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import nn

from tests.reliability.kit import Kit, onnx_model, tiny_module, write_card

MARKER = "PWNED_BY_PICKLE"


@dataclass
class Ctx:
    """What a builder may use: a fresh folder, the good files, pytest's monkeypatch."""

    tmp: Path
    kit: Kit
    monkeypatch: Any


# ---- helpers -------------------------------------------------------------------------------
def half(src: Path, dst: Path) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: len(data) // 2])
    return dst


def png_bytes(size: tuple[int, int] = (8, 8)) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full(size[::-1], 128, np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose IHDR claims ``width`` x ``height`` (a decompression bomb's header)."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def npy(ctx: Ctx, name: str, array: np.ndarray, allow_pickle: bool = False) -> str:
    path = ctx.tmp / name
    np.save(path, array, allow_pickle=allow_pickle)
    return str(path)


def npy_header(ctx: Ctx, name: str, shape: tuple[int, ...], data: bytes = b"") -> str:
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


def evil_pickle(ctx: Ctx, name: str, legacy: bool) -> dict[str, Any]:
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

    real_os_open = os.open

    def guarded_os_open(file: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if os.path.realpath(os.fsdecode(file)) == target and not flags & (os.O_WRONLY
                                                                          | os.O_RDWR):
            raise PermissionError(13, "Permission denied", os.fsdecode(file))
        return real_os_open(file, flags, *args, **kwargs)

    ctx.monkeypatch.setattr(builtins, "open", guarded)
    ctx.monkeypatch.setattr(io, "open", guarded)
    ctx.monkeypatch.setattr(os, "open", guarded_os_open)  # lbi's regular-file reader


# ---- builders: model files -----------------------------------------------------------------
def onnx_is_png(ctx: Ctx) -> dict[str, Any]:
    (ctx.tmp / "model.onnx").write_bytes(png_bytes())
    return {"network": str(ctx.tmp / "model.onnx")}


def pt_is_text(ctx: Ctx) -> dict[str, Any]:
    (ctx.tmp / "model.pt").write_text("these are my weights, honest\n")
    return {"network": str(ctx.tmp / "model.pt")}


def empty_pt(ctx: Ctx) -> dict[str, Any]:
    (ctx.tmp / "empty.pt").write_bytes(b"")
    return {"network": str(ctx.tmp / "empty.pt")}


def truncated_torchscript(ctx: Ctx) -> dict[str, Any]:
    return {"network": str(half(ctx.kit.torchscript, ctx.tmp / "cut_ts.pt"))}


def truncated_state_dict(ctx: Ctx) -> dict[str, Any]:
    path = half(ctx.kit.state_dict, ctx.tmp / "cut_state.pt")
    write_card(ctx.tmp / "cut_state.json")
    return {"network": str(path)}


def truncated_safetensors(ctx: Ctx) -> dict[str, Any]:
    path = half(ctx.kit.safetensors, ctx.tmp / "cut.safetensors")
    write_card(ctx.tmp / "cut.json")
    return {"network": str(path)}


def truncated_onnx(ctx: Ctx) -> dict[str, Any]:
    return {"network": str(half(ctx.kit.onnx, ctx.tmp / "cut.onnx"))}


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
    """A TorchScript file the person consented to (allow_pickle): the layer is refused."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Flatten(), nn.Linear(784, 8), nn.GELU()).eval()
    torch.jit.script(m).save(str(ctx.tmp / "gelu_net.pt"))
    return {"network": str(ctx.tmp / "gelu_net.pt"), "input_shape": (1, 28, 28),
            "allow_pickle": True}


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
    return {"network": str(ctx.tmp / "inf_ts.pt"), "input_shape": (1, 28, 28),
            "allow_pickle": True}


def card_is_binary(ctx: Ctx) -> dict[str, Any]:
    (ctx.tmp / "binary_card.json").write_bytes(png_bytes())
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
    return {"network": str(ctx.kit.torchscript), "input_shape": (100000, 100000, 100000),
            "allow_pickle": True}


def mismatched_input_shape(ctx: Ctx) -> dict[str, Any]:
    return {"network": str(ctx.kit.torchscript), "input_shape": (1, 32, 32),
            "allow_pickle": True}


# ---- builders: data files ------------------------------------------------------------------
def truth(ctx: Ctx, name: str, array: np.ndarray, allow_pickle: bool = False) -> dict[str, Any]:
    return {"truth": npy(ctx, name, array, allow_pickle)}


def png_file(ctx: Ctx, name: str, data: bytes) -> dict[str, Any]:
    (ctx.tmp / name).write_bytes(data)
    return {"image": str(ctx.tmp / name)}


def unreadable_image(ctx: Ctx) -> dict[str, Any]:
    path = ctx.tmp / "locked.png"
    path.write_bytes(png_bytes((28, 28)))
    make_unreadable(ctx, path)
    return {"image": str(path)}


def data_array(ctx: Ctx, name: str, array: np.ndarray) -> dict[str, Any]:
    return {"data": npy(ctx, name, array)}


DIGIT = np.linspace(0, 1, 784, dtype=np.float32).reshape(28, 28)


def digit_with(value: float) -> np.ndarray:
    a = DIGIT.copy()
    a[3, 4] = value
    return a


def touch(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def npz(ctx: Ctx) -> dict[str, Any]:
    path = ctx.tmp / "t_pack.npz"
    np.savez(path, a=DIGIT)
    return {"truth": str(path)}
