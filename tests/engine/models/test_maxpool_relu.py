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


@pytest.mark.parametrize(("pool", "hw"), [
    (nn.MaxPool2d(3, 2, 1), (16, 15)),  # resnet's stem pool
    (nn.MaxPool2d(3, 2, ceil_mode=True), (13, 12)),  # squeezenet's: partial windows
    (nn.MaxPool2d(5, 2, 2), (14, 17)),  # more levels than the tree over the window
    (nn.MaxPool2d((3, 2), (1, 2), dilation=(2, 1)), (12, 10)),
])
def test_overlapping_windows_take_rows_then_columns(pool, hw):
    """Where the windows overlap vertically the rewrite reduces each row's part first,
    then the rows (fewer lifted units, counted here from the modules), with outputs equal
    to torch's max-pool of non-negative input, padding and partial windows included."""
    from lbi_engine.models.maxpool_relu import (
        rewrite_record,
        separable_units,
        tree_units,
    )

    torch.manual_seed(0)
    x = torch.rand(3, 4, *hw, dtype=torch.float64)
    rewritten = maxpool_as_relu(pool, 4, nonneg_input=True, in_hw=hw).double()
    with torch.no_grad():
        assert torch.equal(rewritten(x), pool(x))
    convs = [m for m in rewritten if isinstance(m, nn.Conv2d)]
    assert convs[0].kernel_size == (1, pool.kernel_size if isinstance(pool.kernel_size, int)
                                    else pool.kernel_size[1])
    # units per channel: the outputs of the convolutions followed by a ReLU
    with torch.no_grad():
        units, h = 0, x
        for m in rewritten:
            h = m(h)
            if isinstance(m, nn.ReLU):
                units += h[0].numel() // 4
    pads = rewritten[0].padding if isinstance(rewritten[0], nn.ZeroPad2d) else (0, 0, 0, 0)
    padded = (hw[0] + pads[2] + pads[3], hw[1] + pads[0] + pads[1])
    k = pool.kernel_size if isinstance(pool.kernel_size, tuple) else (pool.kernel_size,) * 2
    s = pool.stride if isinstance(pool.stride, tuple) else (pool.stride,) * 2
    d = pool.dilation if isinstance(pool.dilation, tuple) else (pool.dilation,) * 2
    assert units == separable_units(padded, k, s, d) < tree_units(padded, k, s, d)
    record = rewrite_record(pool, "pool", (4, *hw))
    assert record["form"] == "rows, then columns"
    assert record["lifted_layers_added"] == sum(isinstance(m, nn.ReLU) for m in rewritten)


def test_non_overlapping_windows_keep_the_tree():
    """2x2 with stride 2: both forms have the same units, and the tree is kept (vgg's pools
    lift as before)."""
    from lbi_engine.models.maxpool_relu import rewrite_record

    rewritten = maxpool_as_relu(nn.MaxPool2d(2), 3, nonneg_input=True, in_hw=(8, 8))
    assert next(m for m in rewritten if isinstance(m, nn.Conv2d)).kernel_size == (2, 2)
    assert rewrite_record(nn.MaxPool2d(2), "p", (3, 8, 8))["form"] == "tree over each window"


def test_rewrite_note_names_the_rows_then_columns_form():
    """The CLI's and the window's one line says which pools took the shared-rows form."""
    module = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                           nn.Flatten()).eval()
    net = LiftedNetwork.from_module(module, (1, 12, 12))
    assert net.rewrites[0]["form"] == "rows, then columns"
    assert "(rows, then columns)" in (net.rewrite_note() or "")
