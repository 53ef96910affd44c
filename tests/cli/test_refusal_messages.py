"""The CLI's refusal of a SiLU network: one line naming SiLU as not liftable (the engine's
message, which the window shows too), never the advice to rewrite a combination of tensors."""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import pytest
import torch
from torch import nn


def test_invert_refuses_a_silu_onnx_network_naming_silu(cli, tmp_path):
    pytest.importorskip("onnx")
    path = tmp_path / "silu.onnx"
    module = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.SiLU(), nn.Flatten()).eval()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.zeros(1, 1, 8, 8),), str(path), dynamo=False)
    truth = tmp_path / "x.npy"
    np.save(truth, np.full((1, 8, 8), 0.5, np.float32))
    code, _, err = cli("invert", "--network", path, "--truth", truth, "--out", tmp_path / "o")
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert "computing SiLU (Swish)" in err and "cannot be lifted" in err
    assert "Activations lbi lifts: ReLU" in err and "torch.cat" not in err
    assert not (tmp_path / "o").exists()


def test_invert_refuses_an_input_shape_the_network_contradicts(cli, tmp_path):
    """Before: the image was checked against the typed shape and the user was told the
    network expects (3, 16, 16), which it does not."""
    truth = tmp_path / "x.npy"
    np.save(truth, np.full((1, 28, 28), 0.5, np.float32))
    code, _, err = cli("invert", "--network", "mnist-cnn-ae", "--input-shape", "3,16,16",
                       "--truth", truth, "--out", tmp_path / "o")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "3,16,16 contradicts the 1,28,28 that mnist-cnn-ae fixes" in err
    assert "expects" not in err
