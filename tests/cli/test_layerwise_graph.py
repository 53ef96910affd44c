"""Layer-wise inversion of a residual network file, end to end as a user runs it: the feature
prior fitted by `lbi feature-prior` on the graph's states, then `lbi invert --method layerwise`
at the defaults (alpha of the input stage searched), against the joint method on the same
data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from tests.cli.test_invert_graph import _Block


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A residual network (.pt2), 300 clean samples (bright rectangles on a dark ground) and a
    truth of the same kind that is not among them."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), _Block(4),
                           nn.Conv2d(4, 3, 1)).eval()
    network = tmp_path / "res.pt2"
    torch.export.save(torch.export.export(module, (torch.zeros(1, 1, 12, 12),)), str(network))
    rng = np.random.default_rng(0)
    samples = np.zeros((301, 1, 12, 12), np.float32)
    for img in samples:
        r, c = rng.integers(0, 7, size=2)
        img[0, r:r + rng.integers(3, 7), c:c + rng.integers(3, 7)] = rng.uniform(0.5, 1.0)
        img += 0.1
    np.save(tmp_path / "clean.npy", samples[1:])
    np.save(tmp_path / "truth.npy", samples[0])
    return network, tmp_path / "clean.npy", tmp_path / "truth.npy"


def test_layerwise_on_a_residual_network_file_with_its_fitted_prior(cli, tmp_path: Path) -> None:
    network, clean, truth = _files(tmp_path)
    run = ("invert", "--network", network, "--truth", truth, "--noise-std", "0.05", "--quiet")
    code, _, err = cli(*run, "--method", "layerwise", "--out", tmp_path / "r0")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "feature-prior" in err
    assert not (tmp_path / "r0").exists()  # refused before running

    code, out, err = cli("feature-prior", network, "--samples", clean, "--rank", "16", "--out",
                         tmp_path / "p")
    assert code == 0, err
    card = json.loads((tmp_path / "p.json").read_text())
    assert [entry["size"] for entry in card["layers"]] == [4 * 144] * 3  # x_1 .. x_3

    code, _, err = cli(*run, "--method", "layerwise", "--feature-prior", tmp_path / "p",
                       "--out", tmp_path / "r1")
    assert code == 0, err
    metrics = json.loads((tmp_path / "r1" / "result.json").read_text())["metrics"]
    stages = metrics["stages"]
    # x_1 is read by the block's first convolution and by the addition (whose other input,
    # x_2, is estimated later): two sweeps over the three features, then the input
    assert [s["stage"] for s in stages] == [f"layer {k}/4 (sweep {s}/2)" for s in (1, 2)
                                           for k in (4, 3, 2)] + ["layer 1/4"]
    assert [s["consumers"] for s in stages[:3]] == [[4], [3], [2, 3]]
    assert all(s["stop_reason"] == "tolerance" for s in stages)
    # the lifted joint method as layer-wise is (its alpha search from the back-projection;
    # the default start of a file network, the continuation path, reached 24.08 dB here)
    code, _, err = cli(*run, "--option", "start=back-projection", "--out", tmp_path / "r2")
    assert code == 0, err
    joint = json.loads((tmp_path / "r2" / "result.json").read_text())["metrics"]
    blank = 10 * np.log10(1.0 / np.mean(np.load(truth) ** 2))
    # measured: layer-wise 21.73 dB, joint (lifted search) 20.66 dB, the zero image 12.66 dB;
    # the input stage's alpha walk passes the flat images at alpha 0.9 and 0.3 (its PLATEAU
    # rule): 14.95 dB without. 1 dB: the margin a change of the stages' stopping may move it
    assert metrics["psnr"] > max(blank + 5, joint["psnr"] - 1.0), (metrics["psnr"],
                                                                    joint["psnr"])


def test_layerwise_refuses_a_graph_whose_input_feeds_a_shortcut(cli, tmp_path: Path) -> None:
    torch.manual_seed(0)
    module = nn.Sequential(_Block(1), nn.Conv2d(1, 2, 1)).eval()
    network = tmp_path / "res.pt2"
    torch.export.save(torch.export.export(module, (torch.zeros(1, 1, 8, 8),)), str(network))
    samples = np.random.default_rng(0).uniform(0, 1, (50, 1, 8, 8)).astype(np.float32)
    np.save(tmp_path / "clean.npy", samples)
    np.save(tmp_path / "truth.npy", samples[0])
    code, _, err = cli("feature-prior", network, "--samples", tmp_path / "clean.npy", "--rank",
                       "4", "--out", tmp_path / "p")
    assert code == 0, err
    code, _, err = cli("invert", "--network", network, "--truth", tmp_path / "truth.npy",
                       "--noise-std", "0.05", "--method", "layerwise", "--feature-prior",
                       tmp_path / "p", "--quiet", "--out", tmp_path / "r")
    assert code == 2 and "use method 'joint'" in err and "read 2 times" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()
