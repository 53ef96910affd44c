"""`lbi convert` on a model card with residual blocks: it writes a format_version 2 card that
loads to the same lifted network, and a malformed block ends in exit 2 with one line naming
the field."""

from __future__ import annotations

import copy
import json

import torch

from lbi_engine.models.zoo import bundle_from_card
from tests.engine.models.test_residual_cards import LAYERS, SHAPE, _write_card


def test_convert_a_residual_card_round_trips(cli, tmp_path):
    card, _ = _write_card(tmp_path, LAYERS, SHAPE)
    code, _, err = cli("convert", card, "--out", tmp_path / "out", "--name", "again")
    assert code == 0, err
    written = json.loads((tmp_path / "out" / "again.json").read_text())
    assert written["format_version"] == 2
    assert written["architecture"]["layers"][4]["type"] == "Residual"
    x = torch.rand(3, *SHAPE, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = bundle_from_card(card).encoder(x)
        got = bundle_from_card(tmp_path / "out" / "again.json").encoder(x)
    assert torch.allclose(got, want, rtol=0, atol=1e-6 * float(want.abs().max()))


def test_a_malformed_block_exits_2_with_one_line_naming_the_field(cli, tmp_path):
    layers = copy.deepcopy(LAYERS)
    layers[4]["shortcut"] = {"type": "Conv2d"}
    card = {"format_version": 2, "name": "bad", "architecture": {"layers": layers},
            "input_shape": list(SHAPE), "weights": {"source": "seeded-init", "seed": 0}}
    (tmp_path / "bad.json").write_text(json.dumps(card))
    code, _, err = cli("convert", tmp_path / "bad.json", "--out", tmp_path / "out")
    assert code == 2
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "architecture.layers[4].shortcut=" in lines[0], err
    assert not (tmp_path / "out" / "bad.json").exists()
