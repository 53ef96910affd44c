"""MaxPool2d as ReLU layers (lbi_engine.models.maxpool_relu): the same outputs, and it lifts.

Reference: torch's own max_pool2d on the same input, in float64; the rewrite only adds and
subtracts values (weights 0, ±1), so agreement is to rounding (1e-14 relative).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from lbi_engine.errors import UnsupportedLayerError
from lbi_engine.models.maxpool_relu import maxpool_as_relu, relu_levels, rewrite_maxpool
from lbi_engine.models.network import LiftedNetwork


@pytest.mark.parametrize(("kernel", "stride"), [(2, 2), (3, 2), (3, 3), (2, 1), ((1, 3), (1, 2)),
                                                (1, 1)])
def test_rewrite_equals_maxpool_and_lifts(kernel, stride):
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.MaxPool2d(kernel, stride),
                           nn.Flatten()).double().eval()
    x = torch.randn(5, 1, 11, 11, dtype=torch.float64)
    want = module(x)
    rewritten = rewrite_maxpool(copy.deepcopy(module), (1, 11, 11))
    assert not any(isinstance(m, nn.MaxPool2d) for m in rewritten.modules())
    with torch.no_grad():
        assert torch.allclose(rewritten(x), want, rtol=0, atol=1e-14)
    net = LiftedNetwork.from_module(rewritten, (1, 11, 11))  # verify=True: checked again
    assert len(net) == 1 + relu_levels(kernel) + 1  # conv+ReLU, pool levels, final affine
    with torch.no_grad():
        assert torch.allclose(net.forward(x), want, rtol=0, atol=1e-14)


def test_rewrite_of_negative_values_and_ties():
    pool = nn.MaxPool2d(2)
    x = torch.tensor([[[[-3.0, -1.0], [-2.0, -1.0]]]], dtype=torch.float64)
    got = maxpool_as_relu(pool, 1).double()(x)
    assert got.item() == -1.0


def test_unsupported_settings_are_refused_with_the_reason():
    """Padding and partial windows are exact only for non-negative input (after a ReLU)."""
    for pool, why in ((nn.MaxPool2d(2, padding=1), "padding"),
                      (nn.MaxPool2d(2, ceil_mode=True), "ceil_mode"),
                      (nn.MaxPool2d(2, return_indices=True), "return_indices")):
        with pytest.raises(UnsupportedLayerError, match=why):
            maxpool_as_relu(pool, 2)
    maxpool_as_relu(nn.MaxPool2d(2, padding=1), 2, nonneg_input=True)  # after a ReLU: exact


def test_plain_maxpool_refusal_points_to_the_rewrite():
    from lbi_engine.models.maxpool_relu import keep_maxpool

    module = nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(2)).eval()
    with keep_maxpool(), pytest.raises(UnsupportedLayerError, match=r"ReLU\(a - b\)"):
        LiftedNetwork.from_module(module, (1, 8, 8))


def test_lifting_inside_the_context_rewrites_and_refuses_what_it_cannot():
    from lbi_engine.models.maxpool_relu import keep_maxpool, lift_maxpool_as_relu

    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                           nn.Linear(2 * 4 * 4, 3)).double().eval()
    with lift_maxpool_as_relu():
        net = LiftedNetwork.from_module(module, (1, 10, 10))  # verified against max_pool2d
    assert len(net) == 4  # conv+ReLU, two pool levels, final affine
    x = torch.randn(3, 1, 10, 10, dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(net.forward(x), module(x), rtol=0, atol=1e-13)
    padded = nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(2, padding=1)).eval()
    with lift_maxpool_as_relu(), pytest.raises(UnsupportedLayerError,
                                               match=r"Layer '1' \(MaxPool2d.*padding"):
        LiftedNetwork.from_module(padded, (1, 8, 8))
    with keep_maxpool(), pytest.raises(UnsupportedLayerError, match="MaxPool2d"):
        LiftedNetwork.from_module(module, (1, 10, 10))
    assert len(LiftedNetwork.from_module(module, (1, 10, 10))) == 4  # the default rewrites
