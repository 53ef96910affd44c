"""Atomic writes and safe model loading (lbi_engine.io)."""

from __future__ import annotations

import json
import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from lbi_engine.errors import LbiError, ModelFileError, UnsafeFileError, UnsupportedLayerError
from lbi_engine.io import (
    OutputExistsError,
    atomic_save_npy,
    atomic_write_bytes,
    atomic_write_text,
    atomic_writer,
    safe_output_path,
)
from lbi_engine.models.model_files import pickle_globals, sniff_model_format
from lbi_engine.models.network import LiftedNetwork
from lbi_engine.models.zoo import describe_module, load_model_file

# --- atomic writes ---------------------------------------------------------------------------


def test_atomic_writes_roundtrip(tmp_path):
    atomic_write_bytes(tmp_path / "a.bin", b"\x00\x01")
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01"
    atomic_write_text(tmp_path / "a.txt", "grüße\n")
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "grüße\n"
    arr = np.arange(6.0).reshape(2, 3)
    atomic_save_npy(tmp_path / "a.npy", arr)
    assert np.array_equal(np.load(tmp_path / "a.npy", allow_pickle=False), arr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "a.npy", "a.txt"]
    os.chmod(tmp_path / "a.txt", 0o640)  # the replacement keeps the old file's permissions
    atomic_write_text(tmp_path / "a.txt", "new")
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o640


def test_failure_mid_write_keeps_old_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "result.json"
    target.write_text('{"old": true}')
    with pytest.raises(RuntimeError, match="disk on fire"), atomic_writer(target, "w") as fh:
        fh.write('{"new": ')
        fh.flush()
        raise RuntimeError("disk on fire")
    assert target.read_text() == '{"old": true}'
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]
    with pytest.raises(KeyboardInterrupt), atomic_writer(tmp_path / "fresh.bin") as fh:
        fh.write(b"partial")
        raise KeyboardInterrupt
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]
    with pytest.raises(OSError, match="does not exist"):
        atomic_write_bytes(tmp_path / "no" / "dir.bin", b"")


def test_safe_output_path(tmp_path):
    p = tmp_path / "x.png"
    assert safe_output_path(p, overwrite=False) == p
    p.write_bytes(b"1")
    with pytest.raises(OutputExistsError, match="x.png already exists") as info:
        safe_output_path(p, overwrite=False)
    assert isinstance(info.value, FileExistsError) and isinstance(info.value, LbiError)
    assert safe_output_path(str(p), overwrite=True) == p


# --- model files -----------------------------------------------------------------------------


def _mlp() -> nn.Sequential:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))


def _card(module: nn.Sequential, path: Path, input_shape=(6,), **extra) -> Path:
    card = {"name": "mlp", "input_shape": list(input_shape),
            "architecture": {"layers": describe_module(module)}, **extra}
    path.write_text(json.dumps(card))
    return path


class _OpenFile:
    """Unpickling calls open(marker, 'w'): creates a file. Must never happen."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


class _System:
    def __init__(self, marker: Path) -> None:
        self.cmd = f"touch {marker}"

    def __reduce__(self):
        return (os.system, (self.cmd,))


def _assert_same(net: LiftedNetwork, module: nn.Module, shape) -> None:
    x = torch.randn(4, *shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(net.forward(x), module(x), rtol=1e-5, atol=1e-6)


def test_state_dict_and_safetensors_with_card(tmp_path):
    m = _mlp()
    torch.save(m.state_dict(), tmp_path / "mlp.pt")
    _card(m, tmp_path / "mlp.json")
    b = load_model_file(tmp_path / "mlp.pt")  # the card is found next to the weights
    assert isinstance(b.encoder, LiftedNetwork) and b.decoder is None
    _assert_same(b.encoder, m, (6,))
    save_file(m.state_dict(), tmp_path / "w.safetensors")
    b2 = load_model_file(tmp_path / "w.safetensors", card_path=tmp_path / "mlp.json")
    _assert_same(b2.encoder, m, (6,))
    assert b2.sha256 and b2.source_path == str(tmp_path / "w.safetensors")
    # a card with an encoder/decoder split gives a decoder
    _card(m, tmp_path / "ae.json", architecture={"layers": describe_module(m),
                                                 "encoder_layers": 2})
    b3 = load_model_file(tmp_path / "w.safetensors", card_path=tmp_path / "ae.json")
    x = torch.randn(2, 6)
    assert torch.allclose(b3.decode(b3.encode(x)), m(x), atol=1e-6)


def test_state_dict_shape_mismatch_names_the_tensor(tmp_path):
    m = _mlp()
    torch.save(m.state_dict(), tmp_path / "w.pt")
    other = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))
    _card(other, tmp_path / "w.json")
    with pytest.raises(ModelFileError, match=r"w\.pt.*0\.weight: file has \(5, 6\), card needs "
                                             r"\(4, 6\)"):
        load_model_file(tmp_path / "w.pt")
    (tmp_path / "w.json").unlink()
    with pytest.raises(ModelFileError, match="w.pt holds only weights.*card"):
        load_model_file(tmp_path / "w.pt")
    (tmp_path / "w.json").write_text("{not json")
    with pytest.raises(ModelFileError, match="w.json is not valid JSON"):
        load_model_file(tmp_path / "w.pt")


def test_empty_truncated_and_wrong_format_files(tmp_path):
    m = _mlp()
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(ModelFileError, match="empty.pt is empty"):
        load_model_file(tmp_path / "empty.pt")
    torch.save(m.state_dict(), tmp_path / "full.pt")
    data = (tmp_path / "full.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError, match="cut.pt is a truncated or corrupt"):
        load_model_file(tmp_path / "cut.pt")
    save_file(m.state_dict(), tmp_path / "full.safetensors")
    data = (tmp_path / "full.safetensors").read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[:200])
    with pytest.raises(ModelFileError, match="cut.safetensors"):
        load_model_file(tmp_path / "cut.safetensors", card_path=_card(m, tmp_path / "c.json"))
    (tmp_path / "img.pt").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    with pytest.raises(ModelFileError, match="img.pt is not a model format"):
        load_model_file(tmp_path / "img.pt")
    with pytest.raises(ModelFileError, match="nothere.pt does not exist"):
        load_model_file(tmp_path / "nothere.pt")
    legacy = tmp_path / "legacy.pt"
    torch.save(m.state_dict(), legacy, _use_new_zipfile_serialization=False)
    legacy.write_bytes(legacy.read_bytes()[:40])
    with pytest.raises(ModelFileError, match="legacy.pt") as info:
        load_model_file(legacy)
    assert not isinstance(info.value, UnsafeFileError)  # damaged is not "unsafe"


@pytest.mark.parametrize("payload", [_OpenFile, _System])
@pytest.mark.parametrize("writer", ["torch", "pickle"])
def test_malicious_pickle_is_refused_without_running_it(tmp_path, payload, writer):
    marker = tmp_path / "PWNED"
    path = tmp_path / "model.pt"
    obj = {"weights": payload(marker)}
    if writer == "torch":
        torch.save(obj, path)
    else:
        path.write_bytes(pickle.dumps(obj, protocol=4))
    _card(_mlp(), tmp_path / "model.json")  # a card does not make a pickle safe
    with pytest.raises(UnsafeFileError) as info:
        load_model_file(path)
    msg = str(info.value)
    assert str(path) in msg and "arbitrary code execution" in msg and "allow_pickle" in msg
    named = r"(builtins|io)\.open" if payload is _OpenFile else r"(posix|os|nt)\.system"
    assert re.search(named, msg)
    assert not marker.exists()


def test_pickled_module_needs_opt_in(tmp_path):
    m = _mlp()
    torch.save(m, tmp_path / "whole.pt")
    with pytest.raises(UnsafeFileError, match="torch.nn.modules.container.Sequential"):
        load_model_file(tmp_path / "whole.pt")
    b = load_model_file(tmp_path / "whole.pt", allow_pickle=True)
    _assert_same(b.encoder, m, (6,))
    assert b.card["format"] == "pickled-module" and b.input_shape == (6,)


def test_pickle_globals_reads_opcodes_only(tmp_path):
    marker = tmp_path / "M"
    for proto in (2, 4, 5):
        names = pickle_globals(pickle.dumps([_OpenFile(marker), {"a": 1}], protocol=proto))
        assert names == ["io.open"]  # builtins.open pickles as io.open
    assert pickle_globals(pickle.dumps({"a": [1, 2.0, "s"]})) == []
    assert not marker.exists()


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_torchscript_ok_and_unsupported_layer(tmp_path):
    m = _mlp()
    torch.jit.script(m).save(str(tmp_path / "ok.ts"))
    assert sniff_model_format(tmp_path / "ok.ts") == "torchscript"
    b = load_model_file(tmp_path / "ok.ts", allow_code=True)
    _assert_same(b.encoder, m, (6,))
    pool = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
    torch.jit.script(pool).save(str(tmp_path / "pool.pt"))
    with pytest.raises(UnsupportedLayerError, match="MaxPool"):
        load_model_file(tmp_path / "pool.pt", input_shape=(1, 8, 8), allow_code=True)


def test_card_with_maxpool_lifts_and_a_bad_card_is_refused_by_name(tmp_path):
    pool = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
    save_file(pool.state_dict(), tmp_path / "pool.safetensors")
    _card(pool, tmp_path / "pool.json", input_shape=(1, 8, 8))
    bundle = load_model_file(tmp_path / "pool.safetensors")  # max-pooling by its ReLU rewrite
    assert bundle.encoder.rewrites[0]["lifted_layers_added"] == 2
    _assert_same(bundle.encoder, pool, (1, 8, 8))
    bad = {"input_shape": [6], "architecture": {"layers": [{"type": "Lambda", "fn": "os.system"}]}}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ModelFileError, match="bad.json: layer 0 has unknown type 'Lambda'"):
        load_model_file(tmp_path / "bad.json")


def test_sniff_formats(tmp_path):
    m = _mlp()
    torch.save(m.state_dict(), tmp_path / "a.pt")
    save_file(m.state_dict(), tmp_path / "a.safetensors")
    (tmp_path / "a.json").write_text("{}")
    assert sniff_model_format(tmp_path / "a.pt") == "torch-zip"
    assert sniff_model_format(tmp_path / "a.safetensors") == "safetensors"
    assert sniff_model_format(tmp_path / "a.json") == "card"
    import zipfile

    with zipfile.ZipFile(tmp_path / "z.pt", "w") as zf:
        zf.writestr("readme.txt", "hi")
    with pytest.raises(ModelFileError, match="z.pt is a zip archive but not a PyTorch file"):
        sniff_model_format(tmp_path / "z.pt")
