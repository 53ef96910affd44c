"""`lbi list` and `lbi train` (the seeded zoo network regenerates in a fraction of a second)."""

from __future__ import annotations

import json
from pathlib import Path

from lbi_engine.models.zoo import list_zoo, zoo_card


def test_list_shows_every_zoo_network_and_dataset(cli) -> None:
    code, out, _ = cli("list")
    assert code == 0
    for name in list_zoo():
        line = next(line for line in out.splitlines() if line.strip().startswith(name))
        assert zoo_card(name)["description"].split()[0] in line
    assert "mnist" in out and "train (4000)" in out and "cartoon" in out


def test_train_regenerates_the_circle_perceptron_and_invert_loads_it(tmp_path: Path,
                                                                      cli) -> None:
    code, out, err = cli("train", "circle-perceptron", "--out", tmp_path)
    assert code == 0, err
    card = json.loads((tmp_path / "circle-perceptron.json").read_text())
    assert card["weights"]["tensor_sha256"] == zoo_card("circle-perceptron")["weights"][
        "tensor_sha256"]
    assert "circle-perceptron.json" in out
    code, _, err = cli("invert", "--network", tmp_path / "circle-perceptron.json", "--dataset",
                       "cartoon", "--split", "disc", "--sample", "0", "--method", "landweber",
                       "--noise-std", "0.005", "--max-iter", "50", "--threads", "1",
                       "--out", tmp_path / "run", "--quiet")
    assert code == 0, err
    metrics = json.loads((tmp_path / "run" / "result.json").read_text())["metrics"]
    assert metrics["stop_reason"] == "discrepancy" and metrics["l2_norm"] < 10


def test_train_unknown_network_exits_2(tmp_path: Path, cli) -> None:
    code, _, err = cli("train", "no-such-net", "--out", tmp_path)
    assert code == 2 and "no-such-net" in err and err.count("\n") == 1
