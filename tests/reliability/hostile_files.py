"""Hostile files for the security corpus: model files that try to run code, bombs, liars.

Every file that tries to run code aims at ``SENTINEL`` (a file created beforehand with
``UNTOUCHED`` in it) — loading (``__setstate__``, ``__reduce__``) writes LOAD_MARK, running
the model's forward writes FORWARD_MARK. The tests assert the sentinel still reads
``UNTOUCHED``: no code from a file ran.
"""

from __future__ import annotations

import builtins
import io
import json
import pickle
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

SENTINEL = "sentinel.txt"
UNTOUCHED = "untouched"


def sentinel(folder: Path) -> Path:
    path = folder / SENTINEL
    if not path.exists():
        path.write_text(UNTOUCHED)
    return path


# ---- TorchScript whose loading and forward write files (torch.from_file(shared=True)) -----
class ReLU(nn.Module):  # named like the harmless layer on purpose
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.mark = 0

    @torch.jit.export
    def __getstate__(self) -> tuple[str, bool, int]:
        return (self.path, self.training, self.mark)

    @torch.jit.export
    def __setstate__(self, state: tuple[str, bool, int]) -> None:
        self.path = state[0]
        self.training = state[1]
        t = torch.from_file(self.path, True, 4, dtype=torch.uint8)
        t.fill_(76)  # "LLLL": written while torch.jit.load reads the archive
        self.mark = int(t.sum())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.from_file(self.path, True, 4, dtype=torch.uint8)
        t.fill_(70)  # "FFFF": written when the file's own forward runs
        return torch.relu(x) + t.sum() * 0


LOAD_MARK, FORWARD_MARK = "LLLL", "FFFF"


def evil_torchscript(folder: Path, name: str = "evil_ts.pt") -> Path:
    """Flatten -> Linear(784, 8) -> 'ReLU' whose load and forward overwrite the sentinel."""
    target = sentinel(folder)
    torch.manual_seed(0)
    scripted = torch.jit.script(nn.Sequential(nn.Flatten(), nn.Linear(784, 8),
                                              ReLU(str(target))))
    buf = io.BytesIO()
    before = target.read_text()
    torch.jit.save(scripted, buf)  # saving calls __getstate__ only
    target.write_text(before)
    path = folder / name
    path.write_bytes(buf.getvalue())
    return path


# ---- pickles that run code when unpickled ---------------------------------------------------
class _Exec:
    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (builtins.exec, (f"open({str(self.target)!r}, 'w').write('PWND')",))


def evil_pickle(folder: Path, name: str, *, legacy: bool = False,
                wrap: str | None = None) -> Path:
    payload: Any = _Exec(sentinel(folder))
    if wrap:
        payload = {wrap: {"0.weight": torch.zeros(2, 2), "evil": payload}}
    path = folder / name
    if legacy:
        path.write_bytes(pickle.dumps(payload, protocol=2))
    else:
        torch.save(payload, path)
    return path


def os_system_pickle(folder: Path) -> Path:
    """A raw pickle naming os.system (GLOBAL opcode), never unpickled by lbi."""
    sentinel(folder)
    data = b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."
    path = folder / "system.pkl"
    path.write_bytes(data)
    return path


# ---- cards -------------------------------------------------------------------------------
def card(folder: Path, name: str, layers: Any, input_shape: Any = (1, 28, 28),
         **extra: Any) -> Path:
    doc = {"name": name, "format_version": 1, "input_shape": list(input_shape),
           "architecture": {"layers": layers,
                            "encoder_layers": len(layers) if isinstance(layers, list) else 1},
           "weights": {"source": "seeded-init", "seed": 0}, **extra}
    path = folder / f"{name}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def conv(**kw: Any) -> list[dict[str, Any]]:
    spec = {"type": "Conv2d", "in_channels": 1, "out_channels": 2, "kernel_size": 3, **kw}
    return [spec, {"type": "ReLU"}]


# ---- weights -------------------------------------------------------------------------------
def meta_state(folder: Path) -> Path:
    module = nn.Sequential(nn.Flatten(), nn.Linear(784, 8), nn.ReLU())
    torch.save({k: v.to("meta") for k, v in module.state_dict().items()}, folder / "meta.pt")
    card(folder, "meta", [{"type": "Flatten"},
                          {"type": "Linear", "in_features": 784, "out_features": 8},
                          {"type": "ReLU"}])
    (folder / "meta.json").write_text(
        (folder / "meta.json").read_text().replace('"seeded-init"', '"file"'))
    return folder / "meta.pt"


def zip_bomb_state(folder: Path, megabytes: int = 300) -> Path:
    """A torch.save-like zip whose tensor storage inflates from ~300 kB to ``megabytes``."""
    path = folder / "bomb.pt"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bomb/data.pkl", pickle.dumps({}, protocol=2))
        with zf.open("bomb/data/0", "w", force_zip64=True) as fh:
            chunk = bytes(2**20)
            for _ in range(megabytes):
                fh.write(chunk)
    return path


def lying_safetensors(folder: Path) -> Path:
    header = json.dumps({"0.weight": {"dtype": "F32", "shape": [100000, 100000],
                                      "data_offsets": [0, 40_000_000_000]}}).encode()
    path = folder / "liar.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(64))
    return path


# ---- images ------------------------------------------------------------------------------
EPS = (b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 28 28\n"
       b"(/tmp/lbi-eps-ran) (w) file closefile\nshowpage\n")


def write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def png(folder: Path, name: str, shape: tuple[int, ...], mode: str | None = None) -> Path:
    from PIL import Image

    Image.fromarray(np.zeros(shape, np.uint8), mode=mode).save(folder / name)
    return folder / name


def npy_object(folder: Path) -> Path:
    np.save(folder / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return folder / "obj.npy"


# ---- sessions ------------------------------------------------------------------------------
def session(folder: Path, name: str, meta: dict[str, Any] | None = None,
            arrays: dict[str, np.ndarray] | None = None, raw_npz: bytes | None = None) -> Path:
    from lbi_gui.params import DEFAULT_REQUEST

    doc = {"kind": "lbi-session", "format_version": 1, "request": dict(DEFAULT_REQUEST),
           "gui": {}, "runs": [], "current": {"has_curves": False, "has_shown": False}}
    doc.update(meta or {})
    npz = io.BytesIO()
    np.savez_compressed(npz, **(arrays or {}))
    path = folder / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("session.json", json.dumps(doc))
        zf.writestr("arrays.npz", raw_npz if raw_npz is not None else npz.getvalue())
    return path


def npz_bomb(megabytes: int = 300) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf, \
            zf.open("shown.npy", "w", force_zip64=True) as fh:
        chunk = bytes(2**20)
        for _ in range(megabytes):
            fh.write(chunk)
    return buf.getvalue()


# ---- ONNX ----------------------------------------------------------------------------------
def onnx_conv(folder: Path, name: str, op: str, **attrs: Any) -> Path:
    import onnx
    from onnx import helper, numpy_helper

    from tests.reliability.kit import onnx_model

    shape = (2, 1, 3, 3) if op == "Conv" else (1, 2, 3, 3)
    weight = numpy_helper.from_array(np.ones(shape, np.float32), "W")
    nodes = [helper.make_node(op, ["x", "W"], ["c"], name="conv", **attrs),
             helper.make_node("Relu", ["c"], ["y"], name="act")]
    onnx.save(onnx_model(nodes, [weight], out_rank=4), str(folder / name))
    return folder / name


def onnx_sparse_external(folder: Path) -> Path:
    """Tiny ONNX whose external data file is a sparse 100 GiB file (no disk space used)."""
    import onnx

    from tests.reliability.kit import tiny_module, tiny_onnx

    path = folder / "ext.onnx"
    onnx.save(tiny_onnx(tiny_module()), str(path), save_as_external_data=True,
              all_tensors_to_one_file=True, location="ext.data", size_threshold=0)
    model = onnx.load(str(path), load_external_data=False)
    for t in model.graph.initializer:
        for entry in t.external_data:
            if entry.key == "length" and t.name == "W":
                entry.value = str(100 * 2**30)
    onnx.save(model, str(path))
    with open(folder / "ext.data", "r+b") as fh:
        fh.truncate(100 * 2**30 + 2**20)
    return path
