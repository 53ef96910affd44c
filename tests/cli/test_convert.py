"""`lbi convert`: every supported source -> NAME.safetensors + NAME.json, loaded back equal.

The reference is the torch module the source file was written from (not lbi's own import of
it). Converted weights are the source's float32 weights bit for bit; compared in float64, what
remains is BatchNorm folded in float32: by lbi (scale = weight * rsqrt(var + eps) computed in
the network's float32) or by the dynamo ONNX exporter (into the convolution's weights), one
float32 rounding (6e-8 relative) per folded value, so 1e-6 bounds it with margin.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from lbi_engine import __version__
from lbi_engine.models.cards import describe_module
from lbi_engine.models.zoo import load_network


def _encoder() -> nn.Module:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.AvgPool2d(2),
                      nn.Sigmoid(), nn.Flatten(), nn.Linear(4 * 5 * 5, 12), nn.LeakyReLU(0.25))
    m[1].running_mean.copy_(torch.linspace(-0.5, 0.5, 4))
    m[1].running_var.copy_(torch.linspace(0.5, 2.0, 4))
    return m.eval()


SHAPE = (1, 10, 10)


def _write(kind: str, module: nn.Module, folder: Path) -> Path:
    x = torch.randn(1, *SHAPE)
    if kind in ("onnx-dynamo", "onnx-legacy"):
        path = folder / f"{kind}.onnx"
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")  # the exporters' own deprecation notices
            torch.onnx.export(module, (x,), str(path), dynamo=kind == "onnx-dynamo")
    elif kind == "pt2":
        path = folder / "enc.pt2"
        torch.export.save(torch.export.export(module, (x,)), str(path))
    elif kind == "pickle":
        path = folder / "whole.pt"
        torch.save(module, path)
    else:  # state dict + card
        path = folder / "sd.pt"
        torch.save(module.state_dict(), path)
        (folder / "sd.json").write_text(json.dumps(
            {"format_version": 1, "architecture": {"layers": describe_module(module)},
             "input_shape": list(SHAPE)}))
    return path


@pytest.mark.parametrize(("kind", "extra"), [
    ("onnx-dynamo", []), ("onnx-legacy", []), ("pt2", []),
    ("pickle", ["--allow-code", "--input-shape", "1,10,10"]), ("state-dict", []),
])
def test_convert_then_load_equals_the_module(tmp_path, cli, kind, extra):
    if kind == "onnx-dynamo":
        pytest.importorskip("onnxscript")  # the dynamo exporter needs it (test dependency)
    module = _encoder()
    src = _write(kind, module, tmp_path)
    code, out, err = cli("convert", src, "--out", tmp_path / "zoo", "--name", "mine", *extra)
    assert code == 0, err
    weights, card_path = tmp_path / "zoo" / "mine.safetensors", tmp_path / "zoo" / "mine.json"
    assert "mine.json" in out and weights.exists()
    card = json.loads(card_path.read_text())
    prov = card["provenance"]
    assert prov["source_file"] == src.name and prov["lbi_version"] == __version__
    assert prov["source_sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert card["weights"]["sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert card["input_shape"] == list(SHAPE)

    bundle = load_network(card_path)  # the zoo's own loader, no flags needed any more
    x = torch.randn(5, *SHAPE, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        want = module.double()(x)
        got = bundle.encoder.to(dtype=torch.float64).forward(x)
    err = float((got - want).abs().max() / want.abs().max().clamp_min(1))
    assert err <= 1e-6, err


@pytest.mark.parametrize("kind", ["pt2", "pickle"])
def test_convert_writes_maxpool_as_an_equal_liftable_network(tmp_path, cli, kind):
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                           nn.Flatten(), nn.Linear(3 * 5 * 5, 6)).eval()
    src = _write(kind, module, tmp_path)
    extra = ["--allow-pickle", "--input-shape", "1,10,10"] if kind == "pickle" else []
    code, _, err = cli("convert", src, "--out", tmp_path / "zoo", *extra)  # no flag needed
    assert code == 0, err
    before = next((tmp_path / "zoo").glob("*.json")).read_text()
    # the former opt-in flag is still accepted, and changes nothing but the date
    code, _, err = cli("convert", src, "--out", tmp_path / "zoo", "--maxpool-relu", "--force",
                       *extra)
    assert code == 0, err
    after = next((tmp_path / "zoo").glob("*.json")).read_text()
    assert json.loads(before)["architecture"] == json.loads(after)["architecture"]
    card = next((tmp_path / "zoo").glob("*.json"))
    assert "MaxPool2d" not in card.read_text()
    bundle = load_network(card)
    assert len(bundle.encoder) == 4  # conv+ReLU, two ReLU levels of the pool, final affine
    x = torch.randn(5, *SHAPE, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        err = float((bundle.encoder.to(dtype=torch.float64).forward(x)
                     - module.double()(x)).abs().max())
    assert err <= 1e-12, err  # no BatchNorm here: rounding only


def test_convert_refuses_to_overwrite_without_force(tmp_path, cli):
    src = _write("pt2", _encoder(), tmp_path)
    assert cli("convert", src, "--out", tmp_path)[0] == 0
    card = tmp_path / "enc.json"
    before = card.read_bytes()
    code, _, err = cli("convert", src, "--out", tmp_path)
    assert code == 2 and "--force" in err and err.count("\n") == 1
    assert card.read_bytes() == before
    code, _, err = cli("convert", src, "--out", tmp_path, "--force")
    assert code == 0, err


def test_convert_bad_inputs_exit_2_with_one_line_and_write_nothing(tmp_path, cli):
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    torch.save(_encoder(), tmp_path / "whole.pt")
    torch.export.save(torch.export.export(nn.Sequential(nn.Conv2d(1, 2, 3),
                                                        nn.MaxPool2d(2, padding=1)),
                                          (torch.randn(1, 1, 8, 8),)), str(tmp_path / "mp.pt2"))
    cases = {"junk.onnx": ["junk.onnx"], "missing.onnx": ["missing.onnx", "does not exist"],
             "whole.pt": ["whole.pt", "--allow-pickle", "lbi convert FILE", "ONNX", ".pt2"],
             "mp.pt2": ["MaxPool2d", "padding", "ReLU", "AvgPool2d"]}
    for name, patterns in cases.items():
        code, out, err = cli("convert", tmp_path / name, "--out", tmp_path / "zoo")
        assert code == 2 and err.count("\n") == 1, (name, err)
        for pat in patterns:
            assert pat in err, (pat, err)
    assert not (tmp_path / "zoo").exists() or not any((tmp_path / "zoo").iterdir())
