"""Model cards with residual blocks (format_version 2): built from lbi's own modules, lifted
as a graph (MATH.md §5.6), checked against a forward written out with torch.nn.functional,
solved by the joint method to the per-block minimisers cvxpy computes, refused in one line
naming the field when malformed; chain cards stay format_version 1 and load as before."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from lbi_engine.errors import ModelFileError
from lbi_engine.models.cards import (
    CARD_FORMAT_VERSION,
    build_module,
    describe_module,
    format_version_for,
)
from lbi_engine.models.network import LiftedNetwork
from lbi_engine.models.zoo import bundle_from_card, list_zoo, load_zoo, zoo_card


def _conv(i: int, o: int, k: int, s: int = 1, p: int = 0, bias: bool = True) -> dict[str, Any]:
    return {"type": "Conv2d", "in_channels": i, "out_channels": o, "kernel_size": [k, k],
            "stride": [s, s], "padding": [p, p], "bias": bias}


#: conv-ReLU, an identity-shortcut block, a downsampling block whose shortcut is a 1x1
#: convolution + BatchNorm (resnet's BasicBlock shapes), then a linear code.
LAYERS: list[dict[str, Any]] = [
    _conv(3, 4, 3, p=1), {"type": "ReLU"},
    {"type": "Residual", "body": [_conv(4, 4, 3, p=1), {"type": "ReLU"}, _conv(4, 4, 3, p=1)],
     "shortcut": []},
    {"type": "ReLU"},
    {"type": "Residual",
     "body": [_conv(4, 6, 3, s=2, p=1, bias=False), {"type": "BatchNorm2d", "num_features": 6},
              {"type": "ReLU"}, _conv(6, 6, 3, p=1)],
     "shortcut": [_conv(4, 6, 1, s=2, bias=False), {"type": "BatchNorm2d", "num_features": 6}]},
    {"type": "ReLU"},
    {"type": "Flatten", "start_dim": 1, "end_dim": -1},
    {"type": "Linear", "in_features": 96, "out_features": 10, "bias": True},
]
SHAPE = (3, 8, 8)


def _write_card(tmp_path: Path, layers: list[dict[str, Any]], shape: tuple[int, ...],
                seed: int = 0, name: str = "res") -> tuple[Path, dict[str, torch.Tensor]]:
    """A card + safetensors of random weights (BatchNorm statistics random too)."""
    torch.manual_seed(seed)
    module = build_module(layers)
    g = torch.Generator().manual_seed(seed + 1)
    state = {k: (torch.rand(v.shape, generator=g) + 0.5 if "running_var" in k else
                 0.3 * torch.randn(v.shape, generator=g)) if v.is_floating_point() else v
             for k, v in module.state_dict().items()}
    save_file(state, str(tmp_path / f"{name}.safetensors"))
    card = {"format_version": format_version_for(layers), "name": name,
            "architecture": {"layers": layers}, "input_shape": list(shape),
            "weights": {"source": "file", "file": f"{name}.safetensors"}}
    (tmp_path / f"{name}.json").write_text(json.dumps(card))
    return tmp_path / f"{name}.json", state


def _reference(state: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """LAYERS' forward written out with torch.nn.functional (not the built modules)."""
    w = {k: v.double() for k, v in state.items()}

    def bn(z: torch.Tensor, p: str) -> torch.Tensor:
        return F.batch_norm(z, w[f"{p}.running_mean"], w[f"{p}.running_var"], w[f"{p}.weight"],
                            w[f"{p}.bias"], training=False, eps=1e-5)

    h = F.relu(F.conv2d(x, w["0.weight"], w["0.bias"], padding=1))
    body = F.conv2d(F.relu(F.conv2d(h, w["2.body.0.weight"], w["2.body.0.bias"], padding=1)),
                    w["2.body.2.weight"], w["2.body.2.bias"], padding=1)
    h = F.relu(body + h)
    body = F.relu(bn(F.conv2d(h, w["4.body.0.weight"], stride=2, padding=1), "4.body.1"))
    body = F.conv2d(body, w["4.body.3.weight"], w["4.body.3.bias"], padding=1)
    short = bn(F.conv2d(h, w["4.shortcut.0.weight"], stride=2), "4.shortcut.1")
    h = F.relu(body + short)
    return F.linear(h.flatten(1), w["7.weight"], w["7.bias"])


def test_a_residual_card_lifts_to_the_functional_forward_in_float64(tmp_path):
    card, state = _write_card(tmp_path, LAYERS, SHAPE)
    bundle = bundle_from_card(card)  # lifted in float32, as users run it
    assert not bundle.encoder.is_chain
    merging = [i for i in range(len(bundle.encoder)) if len(bundle.encoder.terms(i)) > 1]
    assert len(merging) == 2  # one lifted layer per block: the ReLU after each sum
    x = torch.rand(5, *SHAPE, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    want = _reference(state, x)
    with torch.no_grad():
        single = bundle.encoder(x.float()).double()
        module = bundle.module.double()
        exact = LiftedNetwork.from_module(module, SHAPE)(x)  # the card's modules in float64
    scale = float(want.abs().max())
    assert float((exact - want).abs().max()) <= 1e-12 * scale
    assert float((module(x) - want).abs().max()) <= 1e-12 * scale
    assert float((single - want).abs().max()) <= 1e-5 * scale


def test_describe_and_build_are_inverse_for_residual_blocks():
    torch.manual_seed(0)
    module = build_module(LAYERS)
    specs = describe_module(module)
    assert specs[2] == {**LAYERS[2], "body": [{**LAYERS[2]["body"][0], "dilation": [1, 1],
                                               "groups": 1}, {"type": "ReLU"},
                                              {**LAYERS[2]["body"][2], "dilation": [1, 1],
                                               "groups": 1}]}
    again = build_module(specs)
    assert list(again.state_dict()) == list(module.state_dict())
    assert describe_module(again) == specs


def test_card_versions_say_what_a_card_needs():
    assert CARD_FORMAT_VERSION == 2
    assert format_version_for(LAYERS) == 2
    assert format_version_for([{"type": "Linear", "in_features": 2, "out_features": 1}]) == 1
    # a nested block counts too
    nested = [{"type": "Residual", "body": [{"type": "Residual", "body": [{"type": "ReLU"}]}]}]
    assert format_version_for(nested[0]["body"]) == 2


@pytest.mark.parametrize("name", [n for n in list_zoo() if n != "natural-res-ae"])
def test_chain_zoo_cards_are_still_version_1_chains(name):
    card = zoo_card(name)
    assert card.get("format_version", 1) == 1
    assert format_version_for(card["architecture"]["layers"]) == 1


def test_chain_card_loads_as_before():
    bundle = load_zoo("mnist-cnn-ae")
    assert bundle.encoder.is_chain
    assert [type(m).__name__ for m in bundle.module] == [
        s["type"] for s in bundle.card["architecture"]["layers"]]


_BAD: list[tuple[str, Any, str]] = [
    ("body missing", {"type": "Residual", "shortcut": []}, r"architecture\.layers\[2\]\.body"),
    ("body not a list", {"type": "Residual", "body": {"type": "ReLU"}},
     r"'architecture\.layers\[2\]\.body' must be a non-empty list"),
    ("body empty", {"type": "Residual", "body": []}, r"architecture\.layers\[2\]\.body"),
    ("shortcut not a list", {"type": "Residual", "body": [{"type": "ReLU"}], "shortcut": 3},
     r"architecture\.layers\[2\]\.shortcut=3 must be a list"),
    ("unknown field", {"type": "Residual", "body": [{"type": "ReLU"}], "skip": []},
     r"architecture\.layers\[2\]\.skip is not a field"),
    ("bad layer inside", {"type": "Residual", "body": [_conv(4, 4, 3, s=0, p=1)]},
     r"architecture\.layers\[2\]\.body\[0\] \(Conv2d\): stride"),
    ("unknown layer inside", {"type": "Residual", "body": [{"type": "Lambda"}]},
     r"architecture\.layers\[2\]\.body\[0\] has unknown type 'Lambda'"),
    ("shapes differ", {"type": "Residual", "body": [_conv(4, 6, 3, p=1)], "shortcut": []},
     r"architecture\.layers\[2\] \(Residual\) adds a body output of shape \(6, 8, 8\) to a "
     r"shortcut output of shape \(4, 8, 8\)"),
]


@pytest.mark.parametrize("block, pattern", [b[1:] for b in _BAD], ids=[b[0] for b in _BAD])
def test_malformed_residual_entries_are_refused_naming_the_field(tmp_path, block, pattern):
    layers = copy.deepcopy(LAYERS[:2]) + [block]
    card = {"format_version": 2, "name": "bad", "architecture": {"layers": layers},
            "input_shape": list(SHAPE), "weights": {"source": "seeded-init", "seed": 0}}
    (tmp_path / "bad.json").write_text(json.dumps(card))
    with pytest.raises(ModelFileError, match=pattern) as info:
        bundle_from_card(tmp_path / "bad.json")
    assert "\n" not in str(info.value) and str(tmp_path / "bad.json") in str(info.value)


def test_blocks_nested_too_deep_are_refused(tmp_path):
    block: dict[str, Any] = {"type": "ReLU"}
    for _ in range(12):
        block = {"type": "Residual", "body": [block]}
    with pytest.raises(ModelFileError, match="more than 8 deep"):
        build_module([block])


# -- the joint method on a residual card: the oracle of tests/engine/models/test_graph_networks


def test_joint_limit_on_a_residual_card_is_every_blocks_cvxpy_minimiser(tmp_path):
    pytest.importorskip("cvxpy")
    from lbi_engine.solvers import StopRule, final, solve
    from tests.engine.models.test_graph_networks import _cvx_block_minimiser, _problem

    lin = [{"type": "Linear", "in_features": i, "out_features": o, "bias": True}
           for i, o in ((16, 12), (12, 12), (12, 12), (12, 8))]
    layers = [{"type": "Flatten", "start_dim": 1, "end_dim": -1}, lin[0], {"type": "ReLU"},
              {"type": "Residual", "body": [lin[1], {"type": "ReLU"}, lin[2]], "shortcut": []},
              {"type": "ReLU"}, lin[3]]
    card, state = _write_card(tmp_path, layers, (1, 4, 4), seed=1)
    # positive-leaning weights, as the graph oracle's: most units active on [0, 1] images
    save_file({k: v + 0.05 for k, v in state.items()}, str(tmp_path / "res.safetensors"))
    net = bundle_from_card(card).encoder.to(dtype=torch.float64)
    assert not net.is_chain
    problem = _problem(net)
    record = final(solve(problem, "joint", stop=StopRule(max_iter=40000, tol=1e-13),
                         options={"hidden_weight": 100}))
    assert record.extras.get("steps") == "accelerated"
    assert record.hidden_weight == 100.0  # the weighted objective (MATH.md §5.7)
    xs = [record.x, *record.aux]
    for j, x in enumerate(xs):
        want = _cvx_block_minimiser(net, problem, xs, j, 100.0)
        got = x.reshape(-1).numpy()
        assert np.linalg.norm(got - want) <= 1e-5 * max(1.0, np.linalg.norm(want)), j
    assert any(bool((a == 0).any()) for a in record.aux)
