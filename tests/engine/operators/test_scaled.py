"""scaled(amap, g, beta) is u -> g W u + beta b for every kind of map, checked against the
original map's own apply/adjoint (an independent evaluation: the weights are not read)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lbi_engine.models.layer_lifting import affine_from_modules
from lbi_engine.operators import ComposedMap, LinearMap
from lbi_engine.operators.scaled import scaled

F64 = torch.float64

MODULES = {
    "linear": ([nn.Linear(6, 4)], (6,)),
    "conv": ([nn.Conv2d(2, 3, 3, padding=1)], (2, 5, 5)),
    "conv-transpose": ([nn.ConvTranspose2d(2, 3, 2, stride=2)], (2, 3, 3)),
    "batchnorm": ([nn.BatchNorm2d(2)], (2, 4, 4)),
    "avgpool": ([nn.AvgPool2d(2)], (2, 4, 4)),
    "flatten-linear": ([nn.Flatten(), nn.Linear(8, 3)], (2, 2, 2)),
    "conv-pool-flatten": ([nn.Conv2d(1, 2, 3), nn.AvgPool2d(2), nn.Flatten()], (1, 6, 6)),
}


@pytest.mark.parametrize("name", sorted(MODULES))
@pytest.mark.parametrize(("gain", "bias_gain"), [(10.0, 10.0), (1.0, 10.0), (0.1, 1.0),
                                                 (0.1, 3.0)])
def test_scaled_map_is_gain_times_the_linear_part_plus_bias_gain_times_the_bias(
        name, gain, bias_gain):
    torch.manual_seed(0)
    modules, shape = MODULES[name]
    for m in modules:
        if isinstance(m, nn.BatchNorm2d):
            m.eval()
            m.running_mean.uniform_(-1, 1)
            m.bias.data.uniform_(-1, 1)
    amap = affine_from_modules([m.double() for m in modules], shape)
    out = scaled(amap, gain, bias_gain)
    x = torch.randn(3, *shape, dtype=F64)
    r = torch.randn(3, *amap.out_shape, dtype=F64)
    zero = torch.zeros(1, *shape, dtype=F64)
    b = amap.apply(zero)
    want = gain * (amap.apply(x) - b) + bias_gain * b
    assert torch.allclose(out.apply(x), want, rtol=1e-13, atol=1e-13)
    assert torch.allclose(out.adjoint(r), gain * amap.adjoint(r), rtol=1e-13, atol=1e-13)
    assert out.norm() == pytest.approx(gain * amap.norm(), rel=1e-9)
    # the original map is untouched
    assert torch.allclose(amap.apply(zero), b)


def test_weights_take_the_gain_so_fast_paths_see_the_same_kinds():
    lin = LinearMap(torch.randn(4, 6, dtype=F64), torch.randn(4, dtype=F64))
    out = scaled(lin, 10.0, 10.0)
    assert isinstance(out, LinearMap) and torch.equal(out.weight, lin.weight * 10)
    assert scaled(lin, 1.0, 1.0) is lin
    pooled = affine_from_modules([nn.AvgPool2d(2)], (1, 4, 4))
    assert isinstance(scaled(pooled, 3.0, 3.0), ComposedMap)  # a scalar ScaleShift after it
    assert scaled(pooled, 1.0, 3.0) is pooled  # no bias: nothing to scale
