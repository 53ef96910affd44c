"""An input shape the person gives is used where the network leaves it open, and refused in
one line where it contradicts the shape the file fixes (never silently dropped); a file
that leaves it open and gets none says so with its own error class."""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from lbi_engine.errors import InputError, InputShapeNeededError, ShapeMismatchError
from lbi_engine.models.declared import declared_input_shape
from lbi_engine.models.zoo import load_network


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()).eval()


def _onnx(path: Path, dynamic: bool) -> Path:
    pytest.importorskip("onnx")
    axes = {"x": {0: "b", 2: "h", 3: "w"}} if dynamic else None
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(_net(), (torch.zeros(1, 3, 8, 8),), str(path), dynamo=False,
                          input_names=["x"], dynamic_axes=axes)
    return path


def test_a_shape_contradicting_a_fixed_onnx_input_is_refused(tmp_path):
    path = _onnx(tmp_path / "fixed.onnx", dynamic=False)
    assert declared_input_shape(path) == (3, 8, 8)
    assert declared_input_shape(path, (3, 8, 8)) == (3, 8, 8)
    with pytest.raises(InputError) as info:
        declared_input_shape(path, (3, 16, 16))
    msg = str(info.value)
    assert "3,16,16" in msg and "3,8,8" in msg and "fixed.onnx" in msg
    assert "leave the input shape out" in msg
    # not a data problem: the window must not offer other data for it
    assert not isinstance(info.value, ShapeMismatchError)
    with pytest.raises(InputError, match="does not match the ONNX input"):
        load_network(str(path), input_shape=(3, 16, 16))


def test_a_zoo_network_refuses_a_contradicting_shape():
    with pytest.raises(InputError, match="1,28,28"):
        declared_input_shape("mnist-cnn-ae", (3, 16, 16))


def test_a_dynamic_onnx_input_takes_the_given_shape_or_asks_for_one(tmp_path):
    path = _onnx(tmp_path / "dyn.onnx", dynamic=True)
    assert declared_input_shape(path) is None
    assert declared_input_shape(path, (3, 12, 12)) == (3, 12, 12)
    assert load_network(str(path), input_shape=(3, 12, 12)).input_shape == (3, 12, 12)
    with pytest.raises(InputShapeNeededError, match="dynamic sample dims"):
        load_network(str(path))


def test_a_dynamic_pt2_input_asks_for_a_shape(tmp_path):
    path = tmp_path / "dyn.pt2"
    side = torch.export.Dim("side", min=4, max=64)
    program = torch.export.export(_net(), (torch.zeros(2, 3, 8, 8),),
                                  dynamic_shapes=({2: side, 3: side},))
    torch.export.save(program, str(path))
    with pytest.raises(InputShapeNeededError, match="dynamic"):
        load_network(str(path))
    assert load_network(str(path), input_shape=(3, 10, 10)).input_shape == (3, 10, 10)
