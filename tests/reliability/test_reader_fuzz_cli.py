"""Fuzzing the readers of files other people send, through the CLI as a user runs it.

Each example writes one file (an ``.npy`` array, an image, a safetensors header, a ``.pt2``
graph JSON, an ONNX graph) made from a good one by hypothesis, and runs ``lbi invert`` on it
with ``--memory-limit 300M`` in a worker process under an address-space limit
(``bounded_cli``). The property: exit 0 (the file was usable) or exit 2 with one error line,
never a traceback, and the worker's peak RSS stays under 1 GiB for a refused file. A usable
file runs two solver steps, and on a fresh install the first of them JIT-compiles numba's
kernels once (about 0.5 GB while LLVM works, measured in a clean clone), so its ceiling is
1.5 GiB. The default runs are a few examples per reader; ``-m slow`` runs many more.
"""

from __future__ import annotations

import io
import json
import struct
import uuid
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.bounded_cli import BoundedCli
from tests.reliability.kit import Kit

GiB = 2**30
# the default suite's examples are the same on every machine (derandomize): CI must not
# depend on which files hypothesis happens to draw; the slow run explores at random
FAST = settings(max_examples=4, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
LONG = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

BIG_INTS = st.sampled_from([-1, 0, 1, 2, 3, 28, 784, 2**31, 2**40, 2**62, 2**70])
JSON = st.recursive(st.none() | st.booleans() | BIG_INTS | st.integers(-50, 50)
                    | st.floats() | st.text(max_size=6),
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.text(max_size=6), kids, max_size=3), max_leaves=6)


def _check(bounded: BoundedCli, folder: Path, *args: object) -> None:
    out = folder / f"out-{uuid.uuid4().hex[:8]}"
    outcome = bounded.run("invert", *args, "--out", out, "--memory-limit", "300M",
                          "--max-iter", "2", "--quiet")
    assert outcome.code == 0 or outcome.is_one_line_refusal(), outcome
    assert "Traceback" not in outcome.err, outcome.err
    assert outcome.peak < (GiB if outcome.code == 2 else 1.5 * GiB), outcome.peak


# ---- .npy ----------------------------------------------------------------------------------
DESCRS = st.sampled_from(["<f4", "<f8", "|u1", "<i8", "|b1", ">f4", "<c16", "|O", "|V8",
                          "<U3", "<f2", "f4", "x", "[('a', '<f4')]"])
SHAPES = st.lists(BIG_INTS, max_size=4).map(tuple) | st.just((1, 1, 28, 28))


def _npy(descr: str, fortran: bool, shape: tuple[int, ...], version: int, body: bytes,
         raw_header: str | None) -> bytes:
    header = raw_header if raw_header is not None else \
        f"{{'descr': {descr!r}, 'fortran_order': {fortran}, 'shape': {shape!r}, }}"
    text = header.encode("latin-1", "replace")
    text += b" " * (-(len(text) + 11) % 64) + b"\n"
    length = struct.pack("<H", len(text)) if version == 1 else struct.pack("<I", len(text))
    return b"\x93NUMPY" + bytes([version, 0]) + length + text + body


NPY = (DESCRS, st.booleans(), SHAPES, st.sampled_from([1, 2, 3]),
       st.binary(max_size=64) | st.just(np.full(784, 0.5, np.float32).tobytes()),
       st.none() | st.text(max_size=40))


def _check_npy(bounded: BoundedCli, kit: Kit, folder: Path, *parts: Any) -> None:
    path = folder / "x.npy"
    path.write_bytes(_npy(*parts))
    _check(bounded, folder, "--network", kit.card, "--truth", path)


@FAST
@given(st.tuples(*NPY))
def test_npy_truth_runs_or_is_one_line(bounded: BoundedCli, kit: Kit, tmp_path: Path,
                                       parts: tuple) -> None:
    _check_npy(bounded, kit, tmp_path, *parts)


def test_a_valid_npy_truth_runs(bounded: BoundedCli, kit: Kit, tmp_path: Path) -> None:
    path = tmp_path / "x.npy"
    path.write_bytes(_npy("<f4", False, (1, 1, 28, 28), 1,
                          np.full(784, 0.5, np.float32).tobytes(), None))
    out = tmp_path / "out"
    outcome = bounded.run("invert", "--network", kit.card, "--truth", path, "--out", out,
                          "--memory-limit", "300M", "--max-iter", "2", "--quiet")
    assert outcome.code == 0, outcome
    assert (out / "result.json").is_file()


# ---- images --------------------------------------------------------------------------------
def _images() -> dict[str, bytes]:
    from PIL import Image

    picture = Image.fromarray(np.arange(28 * 28, dtype=np.uint8).reshape(28, 28))
    out = {}
    for fmt, kw in (("PNG", {}), ("JPEG", {"progressive": True}), ("TIFF",
                    {"compression": "tiff_deflate"}), ("BMP", {}), ("PPM", {})):
        buffer = io.BytesIO()
        picture.save(buffer, fmt, **kw)
        out[fmt] = buffer.getvalue()
    return out


IMAGES = _images()
EDITS = st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=6)
IMAGE = (st.sampled_from(sorted(IMAGES)), EDITS, st.none() | st.integers(8, 600))


def _check_image(bounded: BoundedCli, kit: Kit, folder: Path, fmt: str,
                 edits: list[tuple[int, int]], cut: int | None) -> None:
    data = bytearray(IMAGES[fmt])
    for at, value in edits:  # the headers are in the first few hundred bytes
        data[at % len(data)] = value
    path = folder / "picture.img"
    path.write_bytes(bytes(data[:cut]))
    _check(bounded, folder, "--network", kit.card, "--image", path)


@FAST
@given(*IMAGE)
def test_an_image_runs_or_is_one_line(bounded: BoundedCli, kit: Kit, tmp_path: Path,
                                      fmt: str, edits: list, cut: int | None) -> None:
    _check_image(bounded, kit, tmp_path, fmt, edits, cut)


# ---- safetensors header --------------------------------------------------------------------
ST_ENTRY = st.fixed_dictionaries({
    "dtype": st.sampled_from(["F32", "F64", "F16", "I64", "BOOL", "U8", "X", ""]) | JSON,
    "shape": st.lists(BIG_INTS, max_size=3) | JSON,
    "data_offsets": st.lists(BIG_INTS, min_size=2, max_size=2) | JSON})
ST_HEADER = st.dictionaries(st.sampled_from(["1.weight", "1.bias", "__metadata__", "x"]),
                            ST_ENTRY | JSON, max_size=3)
SAFETENSORS = (ST_HEADER, st.sampled_from([None, 0, 7, 2**40]), st.binary(max_size=64))


def _check_safetensors(bounded: BoundedCli, kit: Kit, folder: Path, header: dict[str, Any],
                       declared: int | None, body: bytes) -> None:
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    size = len(raw) if declared is None else declared
    path = folder / "weights.safetensors"
    path.write_bytes(struct.pack("<Q", size) + raw + body)
    (folder / "weights.json").write_bytes((kit.folder / "weights.json").read_bytes())
    _check(bounded, folder, "--network", path, "--sample", "0")


ST_EDITS = st.lists(st.tuples(st.sampled_from(["1.weight", "1.bias"]),
                              st.sampled_from(["dtype", "shape", "data_offsets"]),
                              st.lists(BIG_INTS, max_size=3) | JSON), min_size=1, max_size=2)


def _check_safetensors_edit(bounded: BoundedCli, kit: Kit, folder: Path,
                            edits: list[tuple[str, str, Any]]) -> None:
    """The kit's own weights file with fields of its header changed (its data kept)."""
    data = kit.safetensors.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    for key, field, value in edits:
        header[key][field] = value
    _check_safetensors(bounded, kit, folder, header, None, data[8 + n:])


@FAST
@given(ST_EDITS)
def test_an_edited_safetensors_header_loads_or_is_one_line(bounded: BoundedCli, kit: Kit,
                                                           tmp_path: Path,
                                                           edits: list) -> None:
    _check_safetensors_edit(bounded, kit, tmp_path, edits)


@FAST
@given(*SAFETENSORS)
def test_a_safetensors_header_loads_or_is_one_line(bounded: BoundedCli, kit: Kit,
                                                   tmp_path: Path, header: dict,
                                                   declared: int | None, body: bytes) -> None:
    _check_safetensors(bounded, kit, tmp_path, header, declared, body)


# ---- .pt2 graph JSON -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def pt2_parts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    module = nn.Sequential(nn.Flatten(), nn.Linear(784, 8), nn.ReLU()).eval()
    path = tmp_path_factory.mktemp("pt2") / "base.pt2"
    torch.export.save(torch.export.export(module, (torch.randn(1, 1, 28, 28),)), str(path))
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON document (keys and list indices), for mutations."""
    out = [prefix]
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, child in items:
        out += _paths(child, (*prefix, key))
    return out


def _replace(doc: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return doc


PT2 = (st.sampled_from(["models/model.json", "data/weights/model_weights_config.json"]),
       st.lists(st.tuples(st.integers(0, 10**6), JSON), min_size=1, max_size=3))


def _check_pt2(bounded: BoundedCli, parts: dict[str, bytes], folder: Path, member: str,
               changes: list[tuple[int, Any]]) -> None:
    name = next(n for n in parts if n.endswith(member))
    doc = json.loads(parts[name])
    for pick, new in changes:
        paths = _paths(doc)
        doc = _replace(doc, paths[pick % len(paths)], new)
    path = folder / "net.pt2"
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in parts.items():
            zf.writestr(n, json.dumps(doc).encode() if n == name else data)
    _check(bounded, folder, "--network", path, "--sample", "0")


@FAST
@given(*PT2)
def test_a_pt2_graph_loads_or_is_one_line(bounded: BoundedCli, pt2_parts: dict[str, bytes],
                                          tmp_path: Path, member: str,
                                          changes: list) -> None:
    _check_pt2(bounded, pt2_parts, tmp_path, member, changes)


# ---- ONNX graph ----------------------------------------------------------------------------
ONNX_OPS = st.sampled_from(["Relu", "Gemm", "Conv", "Reshape", "Flatten", "Where", "Tile",
                            "Expand", "Resize", "Loop", "If", "Scan", "ConstantOfShape",
                            "MaxPool", "Softmax", "Add", "Concat", ""])
ONNX_EDIT = st.one_of(
    st.tuples(st.just("op"), st.integers(0, 2), ONNX_OPS),
    st.tuples(st.just("attr"), st.integers(0, 2), st.tuples(
        st.sampled_from(["axis", "transB", "alpha", "kernel_shape", "pads", "strides",
                         "group", "to"]), BIG_INTS.map(lambda v: v % 2**63))),
    st.tuples(st.just("dims"), st.integers(0, 1), st.lists(BIG_INTS, max_size=3)),
    st.tuples(st.just("input"), st.integers(0, 2), st.sampled_from(["x", "W", "B", "f", "",
                                                                      "nowhere"])),
    st.tuples(st.just("byte"), st.integers(0, 10**6), st.integers(0, 255)))


def _check_onnx(bounded: BoundedCli, kit: Kit, folder: Path,
                edits: list[tuple[str, int, Any]]) -> None:
    import onnx
    from onnx import helper

    model = onnx.load(str(kit.onnx))
    flips = []
    for kind, at, value in edits:
        nodes = model.graph.node
        if kind == "op":
            nodes[at % len(nodes)].op_type = value
        elif kind == "attr":
            nodes[at % len(nodes)].attribute.append(helper.make_attribute(*value))
        elif kind == "dims":
            init = model.graph.initializer[at % len(model.graph.initializer)]
            del init.dims[:]
            init.dims.extend(v % 2**63 for v in value)
        elif kind == "input":
            node = nodes[at % len(nodes)]
            if node.input:
                node.input[0] = value
        else:
            flips.append((at, value))
    data = bytearray(model.SerializeToString())
    for at, value in flips:
        data[at % len(data)] = value
    path = folder / "net.onnx"
    path.write_bytes(bytes(data))
    _check(bounded, folder, "--network", path, "--sample", "0")


@FAST
@given(st.lists(ONNX_EDIT, min_size=1, max_size=3))
def test_an_onnx_graph_loads_or_is_one_line(bounded: BoundedCli, kit: Kit, tmp_path: Path,
                                            edits: list) -> None:
    _check_onnx(bounded, kit, tmp_path, edits)


# ---- the long run --------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(3600)
@LONG
@given(st.tuples(*NPY))
def test_long_fuzz_of_npy(bounded: BoundedCli, kit: Kit, tmp_path: Path, parts: tuple) -> None:
    _check_npy(bounded, kit, tmp_path, *parts)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@LONG
@given(*IMAGE)
def test_long_fuzz_of_images(bounded: BoundedCli, kit: Kit, tmp_path: Path, fmt: str,
                             edits: list, cut: int | None) -> None:
    _check_image(bounded, kit, tmp_path, fmt, edits, cut)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@LONG
@given(*SAFETENSORS)
def test_long_fuzz_of_safetensors(bounded: BoundedCli, kit: Kit, tmp_path: Path,
                                  header: dict, declared: int | None, body: bytes) -> None:
    _check_safetensors(bounded, kit, tmp_path, header, declared, body)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@LONG
@given(ST_EDITS)
def test_long_fuzz_of_safetensors_edits(bounded: BoundedCli, kit: Kit, tmp_path: Path,
                                        edits: list) -> None:
    _check_safetensors_edit(bounded, kit, tmp_path, edits)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@LONG
@given(*PT2)
def test_long_fuzz_of_pt2(bounded: BoundedCli, pt2_parts: dict[str, bytes], tmp_path: Path,
                          member: str, changes: list) -> None:
    _check_pt2(bounded, pt2_parts, tmp_path, member, changes)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@LONG
@given(st.lists(ONNX_EDIT, min_size=1, max_size=3))
def test_long_fuzz_of_onnx(bounded: BoundedCli, kit: Kit, tmp_path: Path,
                           edits: list) -> None:
    _check_onnx(bounded, kit, tmp_path, edits)


def test_an_npy_header_numpy_cannot_tokenize_is_one_line(bounded: BoundedCli, kit: Kit,
                                                         tmp_path: Path) -> None:
    """Found by the long fuzz: a header '{' made numpy's literal parser raise TokenError,
    a shape (-1, 2**70) numpy's reader an OverflowError."""
    _check_npy(bounded, kit, tmp_path, "<f4", False, (1,), 1, b"", "{")
    _check_npy(bounded, kit, tmp_path, "<f4", False, (-1, 2**70), 1, bytes(3136), None)
