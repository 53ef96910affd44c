"""One budget for a whole load: what a model file makes lbi read or derive counts together.

Each crafted file is made here from a small exported network; each item in it passes its own
per-item cap, only their total (or a shape probe's real allocation) would exhaust memory.
Under --memory-limit 300M the CLI must refuse each with exit 2 and one line, and the worker
process (under an address-space limit, torch already loaded) must add less than
``LIMIT_GROWTH`` to its resident memory at its peak: the 300 MiB the limit allows, plus what a
refused item was being checked with, well under the 1 GiB a run may use beside torch's own
libraries (whose resident size varies by build and machine, 0.7-0.9 GiB). The in-process tests
check the accounting itself: a member shared by many tensors is read and charged once.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from lbi_engine.limits import LoadBudget, MemoryLimitError
from tests.reliability.bounded_cli import BoundedCli

GiB = 2**30
#: What one refused load may add to the worker's resident memory at its peak (limit 300 MiB).
LIMIT_GROWTH = 2 * 300 * 2**20


def test_a_load_budget_counts_cumulatively_and_refuses_in_one_line() -> None:
    budget = LoadBudget("model file 'm.pt2'", "use a smaller network", limit=1000)
    budget.charge(600, "member 'a'")
    budget.charge_json(10, "the graph")  # 24 x 10 bytes of parsed JSON
    assert budget.used == 840
    with pytest.raises(MemoryLimitError) as info:
        budget.charge(161, "member 'b'")  # each item is small; the total is not
    message = str(info.value)
    assert "\n" not in message and "model file 'm.pt2'" in message and "member 'b'" in message
    assert "--memory-limit" in message
    assert budget.used == 840  # a refused charge is not counted
    budget.charge(160, "member 'c'")
    assert budget.used == 1000


# ---- .pt2 archives ------------------------------------------------------------------------
class _Net(nn.Module):
    """conv -> transposed conv (stride 2) -> clamp -> ReLU -> adaptive pool -> linear: the
    clamp is a layer whose shape no formula gives, so the importer must probe it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.up = nn.Conv2d(1, 2, 3), nn.ConvTranspose2d(2, 2, 3, stride=2)
        self.pool, self.fc = nn.AdaptiveAvgPool2d(2), nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(torch.clamp(self.up(self.conv(x)), -1.0, 1.0))
        return self.fc(torch.flatten(self.pool(x), 1))


def _net() -> nn.Module:
    torch.manual_seed(0)
    return _Net().eval()


@pytest.fixture(scope="module")
def base_pt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pt2") / "base.pt2"
    torch.export.save(torch.export.export(_net(), (torch.randn(1, 1, 28, 28),)), str(path))
    return path


def _rewrite(src: Path, dst: Path, edit: Callable[[str, bytes], bytes | None] | None = None,
             extra: dict[str, bytes] | None = None) -> Path:
    """A copy of the archive ``src`` with members edited (None drops one) and added
    (deflated: a member of zeros declares its full size but takes a few kB)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data: bytes | None = zin.read(info.filename)
            if edit is not None:
                data = edit(info.filename, data)
            if data is not None:
                zout.writestr(info.filename, data)
        for name, data in (extra or {}).items():
            zout.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
    return dst


def _edit_op(target: str, arg: str, value: list[int]) -> Callable[[str, bytes], bytes]:
    def edit(name: str, data: bytes) -> bytes:
        if not name.endswith("models/model.json"):
            return data
        program = json.loads(data)
        for node in program["graph_module"]["graph"]["nodes"]:
            if node["target"].endswith(target):
                for i in node["inputs"]:
                    if i["name"] == arg:
                        i["arg"] = {"as_ints": value}
        return json.dumps(program).encode()
    return edit


def _root(path: Path) -> str:
    with zipfile.ZipFile(path) as zf:
        return next(n for n in zf.namelist() if n.endswith("models/model.json"))[
            : -len("models/model.json")]


def _weights_config(root: str, add: dict[str, Any]) -> Callable[[str, bytes], bytes]:
    def edit(name: str, data: bytes) -> bytes:
        if name != f"{root}data/weights/model_weights_config.json":
            return data
        cfg = json.loads(data)
        cfg["config"].update(add)
        return json.dumps(cfg).encode()
    return edit


def _meta(path_name: str, sizes: list[int]) -> dict[str, Any]:
    return {"path_name": path_name, "is_param": True, "use_pickle": False, "tensor_meta": {
        "dtype": 7, "sizes": [{"as_int": s} for s in sizes], "requires_grad": False,
        "device": {"type": "cpu", "index": None}, "strides": [{"as_int": 1} for _ in sizes],
        "storage_offset": {"as_int": 0}, "layout": 7}}


def _shared_member(base: Path, dst: Path, member_bytes: int, n_tensors: int) -> Path:
    root = _root(base)
    add = {f"extra.{k}": _meta("shared", [1 + k]) for k in range(n_tensors)}
    return _rewrite(base, dst, _weights_config(root, add),
                    {f"{root}data/weights/shared": bytes(member_bytes)})


@pytest.mark.timeout(300)
def test_crafted_pt2_archives_are_refused_within_one_budget(base_pt2: Path, tmp_path: Path,
                                                           bounded: BoundedCli) -> None:
    """Probe shapes of 8000 x 8000 (an adaptive pool's output size) and 7503 x 7503 (a
    transposed convolution's stride of 300), a 400 MB member shared by tensors of one value,
    and 15 tensor lists of 10 MB each: exit 2, one line naming the file and the memory
    limit, within LIMIT_GROWTH."""
    root = _root(base_pt2)
    config_text = ('{"config": {' + ",".join(f'"k{i}": 0' for i in range(10**6)) + "}}").encode()
    cases = {
        "pool": _rewrite(base_pt2, tmp_path / "pool.pt2",
                         _edit_op("adaptive_avg_pool2d.default", "output_size",
                                  [8000, 8000])),
        "stride": _rewrite(base_pt2, tmp_path / "stride.pt2",
                           _edit_op("conv_transpose2d.input", "stride", [300, 300])),
        "shared": _shared_member(base_pt2, tmp_path / "shared.pt2", 400 * 2**20, 5),
        "configs": _rewrite(base_pt2, tmp_path / "configs.pt2", extra={
            f"{root}data/constants/c{k}_config.json": config_text for k in range(15)}),
    }
    for name, path in cases.items():
        outcome = bounded.run("invert", "--network", path, "--sample", "0", "--out",
                              tmp_path / f"out-{name}", "--memory-limit", "300M", "--quiet")
        assert outcome.is_one_line_refusal(), (name, outcome)
        assert "more than the limit of 300.0 MiB" in outcome.err, (name, outcome.err)
        assert path.name in outcome.err, (name, outcome.err)
        assert outcome.growth < LIMIT_GROWTH, (name, outcome.growth)


def test_tensors_sharing_one_member_read_it_once(base_pt2: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from lbi_engine.models.pt2_import import Pt2Archive

    member = 4 * 2**20
    path = _shared_member(base_pt2, tmp_path / "shared.pt2", member, 50)
    reads: list[str] = []
    original = Pt2Archive.read

    def counting(self: Pt2Archive, name: str, limit: int) -> bytearray:
        reads.append(name)
        return original(self, name, limit)

    monkeypatch.setattr(Pt2Archive, "read", counting)
    archive = Pt2Archive(path)
    tensors = archive.tensors()
    assert sum(1 for r in reads if r.endswith("/shared")) == 1
    assert all(torch.equal(tensors[f"extra.{k}"], torch.zeros(1 + k)) for k in range(50))
    tensor_bytes = sum(t.numel() * t.element_size() for t in tensors.values())
    members = sum(zipfile.ZipFile(path).getinfo(n).file_size for n in set(reads))
    config_json = sum(zipfile.ZipFile(path).getinfo(n).file_size for n in set(reads)
                      if n.endswith(".json"))
    # each member once, its parsed JSON 24x, each tensor once
    assert archive.budget.used == members + 24 * config_json + tensor_bytes
    assert archive.budget.used < 2 * member


def test_a_pt2_network_still_loads_exactly(base_pt2: Path) -> None:
    from lbi_engine.models.pt2_import import pt2_sequential

    reference = _net()
    seq, shape = pt2_sequential(base_pt2)
    assert shape == (1, 28, 28)
    x = torch.randn(4, 1, 28, 28)
    with torch.no_grad():
        assert torch.allclose(seq(x), reference(x), atol=1e-6)


# ---- ONNX constant folding ------------------------------------------------------------------
def _folding_onnx(path: Path, op: str, copies: int) -> Path:
    """The kit's tiny network plus ``copies`` dangling constant subgraphs, each one op on two
    small initializers that broadcast to 4096 x 4096 (16.8 M values, under the per-op cap)."""
    import onnx
    from onnx import helper, numpy_helper

    from tests.reliability.kit import tiny_module, tiny_onnx

    model = tiny_onnx(tiny_module())
    row = np.ones((1, 4096), np.float64)
    col = np.ones((4096, 1), np.float64)
    model.graph.initializer.extend([numpy_helper.from_array(row, "row"),
                                    numpy_helper.from_array(col, "col"),
                                    numpy_helper.from_array(col > 0, "mask")])
    nodes = []
    for k in range(copies):
        inputs = ["mask", "row", "col"] if op == "Where" else ["row", "col"]
        nodes.append(helper.make_node(op, inputs, [f"big{k}"], name=f"fold{k}"))
    model.graph.node.extend(nodes)
    onnx.save(model, str(path))
    return path


@pytest.mark.timeout(300)
def test_onnx_constant_folding_is_bounded_in_total(tmp_path: Path, bounded: BoundedCli) -> None:
    """Twenty folds of 128 MiB each (Add, and a broadcasting Where), each under the per-op
    cap: refused by their total, exit 2 and one line, within LIMIT_GROWTH."""
    for op in ("Add", "Where"):
        path = _folding_onnx(tmp_path / f"{op}.onnx", op, 20)
        outcome = bounded.run("invert", "--network", path, "--sample", "0", "--out",
                              tmp_path / f"out-{op}", "--memory-limit", "300M", "--quiet")
        assert outcome.is_one_line_refusal(), (op, outcome)
        assert "fold" in outcome.err and path.name in outcome.err, outcome.err
        assert "more than the limit of 300.0 MiB" in outcome.err, outcome.err
        assert outcome.growth < LIMIT_GROWTH, (op, outcome.growth)


def test_onnx_folding_within_the_budget_still_loads(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from lbi_engine.models.onnx_import import onnx_sequential
    from tests.reliability.kit import tiny_module

    path = _folding_onnx(tmp_path / "ok.onnx", "Add", 1)
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "1G")
    seq, shape = onnx_sequential(path)
    x = torch.randn(2, 1, 28, 28)
    with torch.no_grad():
        assert torch.allclose(seq(x), tiny_module()(x), atol=1e-5)
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "100M")  # below the one fold of 128 MiB
    with pytest.raises(MemoryLimitError, match="ok.onnx.*fold0"):
        onnx_sequential(path)


# ---- TIFF tiles -----------------------------------------------------------------------------
def _tiled_tiff(path: Path, tile: int, pixels: bytes | None = None, bands: int = 1) -> Path:
    """A deflate-compressed TIFF that declares a 16 x 16 image in one ``tile`` x ``tile`` tile
    (zeros, unless ``pixels`` gives the tile's bytes): libtiff allocates and inflates the
    whole tile, whatever the image size says."""
    import struct
    import zlib

    comp = zlib.compressobj(9)
    if pixels is not None:
        data = comp.compress(pixels) + comp.flush()
    else:
        left, chunk, parts = tile * tile * bands, bytes(1 << 20), []
        while left > 0:
            parts.append(comp.compress(chunk[:min(left, len(chunk))]))
            left -= len(chunk)
        data = b"".join(parts) + comp.flush()
    tags = {256: (4, 16), 257: (4, 16), 258: (3, 8), 259: (3, 8), 262: (3, 1 if bands == 1
            else 2), 277: (3, bands), 284: (3, 1), 322: (4, tile), 323: (4, tile),
            324: (4, 0), 325: (4, len(data))}
    start = 8 + 2 + 12 * len(tags) + 4  # header, IFD: the tile's data follows the IFD
    out = [b"II*\x00", struct.pack("<IH", 8, len(tags))]
    for tag, (kind, value) in sorted(tags.items()):
        value = start if tag == 324 else value
        packed = struct.pack("<HH", value, 0) if kind == 3 else struct.pack("<I", value)
        out.append(struct.pack("<HHI", tag, kind, 1) + packed)
    path.write_bytes(b"".join([*out, struct.pack("<I", 0), data]))
    return path


def test_a_tiff_whose_tile_is_larger_than_an_image_is_refused_before_decoding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lbi_engine.data.files import read_image
    from lbi_engine.errors import DataFileError

    huge = _tiled_tiff(tmp_path / "huge_tile.tif", 8192)  # 67 M pixels for a 16 x 16 image
    with pytest.raises(DataFileError, match=r"huge_tile.tif: its tiles are 8192 x 8192"):
        read_image(huge)
    rgb = _tiled_tiff(tmp_path / "rgb_tile.tif", 4096, bands=3)  # 48 MiB of tile buffer
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "40M")
    with pytest.raises(MemoryLimitError, match="rgb_tile.tif .*a tile buffer of 50,331,648"):
        read_image(rgb, grayscale=False)


def test_a_normal_tiled_tiff_still_reads_exactly(tmp_path: Path) -> None:
    from lbi_engine.data.files import read_image

    pixels = np.arange(256, dtype=np.uint8).reshape(16, 16)
    path = _tiled_tiff(tmp_path / "ok.tif", 16, pixels.tobytes())
    np.testing.assert_allclose(read_image(path)[0, 0], pixels / 255.0, rtol=1e-7)  # float32


def test_a_pt2_graph_of_too_many_nodes_is_refused_before_it_is_walked(
        base_pt2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lbi_engine.errors import LbiError, ModelFileError
    from lbi_engine.models.pt2_import import pt2_sequential

    def deepen(name: str, data: bytes) -> bytes:
        if not name.endswith("models/model.json"):
            return data
        program = json.loads(data)
        nodes = program["graph_module"]["graph"]["nodes"]
        nodes.extend([nodes[-1]] * (51 - len(nodes)))
        return json.dumps(program).encode()

    deep = _rewrite(base_pt2, tmp_path / "deep.pt2", deepen)
    monkeypatch.setenv("LBI_MAX_GRAPH_NODES", "50")  # the bound of 5,000, smaller: faster
    with pytest.raises(ModelFileError, match=r"deep.pt2' has 51 graph nodes; .* "
                                             r"LBI_MAX_GRAPH_NODES=51"):
        pt2_sequential(deep)
    monkeypatch.setenv("LBI_MAX_GRAPH_NODES", "51")  # lifted: the walk decides
    try:
        pt2_sequential(deep)
    except LbiError as exc:
        assert "graph nodes" not in str(exc)


def test_onnx_constant_nodes_are_charged_like_initializers(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import onnx
    from onnx import helper, numpy_helper

    from lbi_engine.models.onnx_import import onnx_sequential
    from tests.reliability.kit import tiny_module, tiny_onnx

    model = tiny_onnx(tiny_module())
    values = numpy_helper.from_array(np.zeros((2, 2**20), np.float32), "v")  # 8 MiB
    model.graph.node.extend([helper.make_node("Constant", [], [f"c{k}"], name=f"const{k}",
                                              value=values) for k in range(6)])
    path = tmp_path / "consts.onnx"
    onnx.save(model, str(path))
    # the file (48 MiB, counted twice) fits 120M; its six arrays (48 MiB more) do not
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "120M")
    with pytest.raises(MemoryLimitError, match="consts.onnx.*Constant node 'const"):
        onnx_sequential(path)
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "1G")
    assert onnx_sequential(path)[1] == (1, 28, 28)
