"""LiftedNetwork.from_module: grouping, forward = module forward, states, refusals."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lbi_engine.activations import make_activation
from lbi_engine.errors import InputError, ShapeMismatchError, UnsupportedLayerError
from lbi_engine.models.network import LiftedLayer, LiftedNetwork, verify_against
from lbi_engine.operators import ComposedMap, IdentityMap, LinearMap
from tests.engine._nets import paper_cnn_decoder, paper_cnn_encoder

# small operators: one OpenMP thread (the fixture in tests/engine/conftest.py says why)
pytestmark = pytest.mark.usefixtures("one_thread")


def _max_err(net: LiftedNetwork, module: nn.Module, x: torch.Tensor) -> float:
    with torch.no_grad():
        return float((net.forward(x) - module(x)).abs().max())


def _randomise_bn(module: nn.Module) -> None:
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)


def test_paper_cnn_encoder_and_decoder():
    torch.manual_seed(0)
    enc, dec = paper_cnn_encoder(), paper_cnn_decoder()
    net = LiftedNetwork.from_module(enc, (1, 28, 28), name="cnn-encoder")
    assert net.name == "cnn-encoder" and len(net) == 3
    assert net.input_shape == (1, 28, 28) and net.output_shape == (300,)
    assert [lay.activation.name for lay in net.layers] == ["relu", "relu", "identity"]
    assert [lay.affine.out_shape for lay in net.layers] == [(8, 14, 14), (16, 7, 7), (300,)]
    assert net.layers[2].source == "4:Flatten, 5:Linear"
    x = torch.rand(4, 1, 28, 28)
    assert _max_err(net, enc, x) <= 1e-5
    d = LiftedNetwork.from_module(dec, (300,))
    assert [lay.affine.kind for lay in d.layers] == ["Linear+Unflatten+ConvTranspose2d",
                                                     "ConvTranspose2d"]
    assert d.output_shape == (1, 28, 28)
    assert _max_err(d, dec, torch.randn(3, 300)) <= 1e-5


def test_dense_network_states_pre_activation_and_summary():
    torch.manual_seed(1)
    mlp = nn.Sequential(nn.Linear(20, 16), nn.Sigmoid(), nn.Linear(16, 8), nn.LeakyReLU(0.2),
                        nn.Linear(8, 4), nn.Tanh())
    net = LiftedNetwork.from_module(mlp, (20,))
    x = torch.randn(5, 20)
    states = net.forward_states(x)
    assert [tuple(s.shape) for s in states] == [(5, 16), (5, 8), (5, 4)]
    with torch.no_grad():
        assert torch.allclose(states[0], mlp[1](mlp[0](x)), atol=1e-6)
        assert torch.allclose(states[-1], mlp(x), atol=1e-6)
        z1 = net.pre_activation(1, states[0])
        assert torch.allclose(z1, mlp[2](states[0]), atol=1e-6)
    rows = net.summary()
    assert [r["activation"] for r in rows] == ["sigmoid", "leaky_relu", "tanh"]
    w0 = mlp[0].weight.detach().double()
    assert rows[0]["norm"] == pytest.approx(float(torch.linalg.matrix_norm(w0, ord=2)), rel=1e-6)
    assert rows[1]["in_shape"] == (16,) and rows[1]["description"] == "Linear 16->8"
    with pytest.raises(InputError, match="out of range"):
        net.pre_activation(3, states[-1])


def test_grouping_rules_consecutive_and_leading_activations():
    torch.manual_seed(2)
    m = nn.Sequential(nn.ReLU(), nn.Linear(6, 6), nn.Sigmoid(), nn.Tanh(), nn.Linear(6, 3),
                      nn.Linear(3, 2))
    net = LiftedNetwork.from_module(m, (6,))
    # leading ReLU and the second of two activations get identity affine maps;
    # the trailing affine run (two Linear) becomes one layer with the identity activation
    assert [type(lay.affine) for lay in net.layers] == [IdentityMap, LinearMap, IdentityMap,
                                                        ComposedMap]
    assert [lay.activation.name for lay in net.layers] == ["relu", "sigmoid", "tanh", "identity"]
    assert _max_err(net, m, torch.randn(3, 6)) <= 1e-6


def test_mixed_network_nested_bn_avgpool_convtranspose_float64():
    torch.manual_seed(3)
    m = nn.Sequential(
        nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU()),
        nn.AvgPool2d(2, ceil_mode=True),
        nn.Sequential(nn.ConvTranspose2d(4, 3, 3, 2, 1, 1), nn.Dropout(0.3), nn.Softplus()),
        nn.BatchNorm2d(3), nn.AdaptiveAvgPool2d(3), nn.Flatten(), nn.Linear(27, 5),
        nn.BatchNorm1d(5), nn.Hardtanh(-0.5, 0.5), nn.Linear(5, 4), nn.Softmax(dim=1),
    )
    _randomise_bn(m)
    m = m.eval().double()
    net = LiftedNetwork.from_module(m, (2, 9, 9))
    assert net.dtype == torch.float64 and len(net) == 4
    assert net.layers[0].affine.kind == "Conv2d"  # BatchNorm folded into the convolution
    assert net.layers[0].source == "0.0:Conv2d, 0.1:BatchNorm2d, 0.2:ReLU"
    assert [lay.activation.name for lay in net.layers] == ["relu", "softplus", "clip", "softmax"]
    x = torch.randn(3, 2, 9, 9, dtype=torch.float64)
    assert _max_err(net, m, x) <= 1e-12
    f32 = net.to(dtype=torch.float32)
    assert f32.dtype == torch.float32
    assert _max_err(f32, m.float(), x.float()) <= 1e-5


class FxChain(nn.Module):
    """A custom (non-Sequential) module whose forward is a plain chain with functional calls."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        self.body = nn.Sequential(nn.Linear(48, 10), nn.ELU(0.5))
        self.fc = nn.Linear(10, 4)
        self.register_buffer("mean", torch.tensor(0.25))

    def forward(self, x):
        x = (x - self.mean) / 0.3  # 1/0.3 is inexact in float32: float64 must stay float64
        x = F.avg_pool2d(F.relu(self.conv(x)), 2)
        x = x.view(x.size(0), -1)
        x = self.body(x)
        return torch.sigmoid(2.0 * self.fc(x) + 1.0)


def test_fx_traced_custom_module_and_custom_module_inside_sequential():
    torch.manual_seed(4)
    m = FxChain().eval()
    net = LiftedNetwork.from_module(m, (1, 8, 8))
    assert [lay.activation.name for lay in net.layers] == ["relu", "elu", "sigmoid"]
    assert "conv" in net.layers[0].source and "body.0" in net.layers[1].source
    assert _max_err(net, m, torch.randn(3, 1, 8, 8)) <= 1e-5
    outer = nn.Sequential(nn.Flatten(), nn.Unflatten(1, (1, 8, 8)), FxChain(), nn.Tanh())
    net2 = LiftedNetwork.from_module(outer, (64,))
    assert net2.layers[0].source.startswith("0:Flatten, 1:Unflatten, 2.sub:")
    assert _max_err(net2, outer, torch.randn(2, 64)) <= 1e-5


class MyConv(nn.Conv2d):
    """A user subclass that only changes the initialisation: still one Conv2d layer."""

    def reset_parameters(self) -> None:
        nn.init.constant_(self.weight, 0.1)
        nn.init.zeros_(self.bias)


class WithSubclass(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = MyConv(1, 2, 3)

    def forward(self, x):
        return torch.flatten(F.relu(self.conv(x)), 1)


def test_user_subclass_of_torch_layer_is_one_layer():
    for m in (nn.Sequential(MyConv(1, 2, 3), nn.ReLU()), WithSubclass()):
        net = LiftedNetwork.from_module(m, (1, 5, 5))
        assert net.layers[0].affine.kind == "Conv2d"
        assert _max_err(net, m, torch.randn(2, 1, 5, 5)) <= 1e-6


def test_fx_module_in_float64_keeps_constants_exact():
    torch.manual_seed(6)
    m = FxChain().double().eval()
    net = LiftedNetwork.from_module(m, (1, 8, 8))
    assert net.dtype == torch.float64
    assert all(lay.affine.dtype in (None, torch.float64) for lay in net.layers)
    assert _max_err(net, m, torch.randn(2, 1, 8, 8, dtype=torch.float64)) <= 1e-12
    flat = LiftedNetwork.from_module(nn.Sequential(nn.Linear(5, 2)), 5)  # an int is (5,)
    assert flat.input_shape == (5,)


def test_states_and_forward_on_paper_cnn_match_module_layers():
    torch.manual_seed(5)
    enc = paper_cnn_encoder()
    net = LiftedNetwork.from_module(enc, (1, 28, 28))
    x = torch.rand(2, 1, 28, 28)
    s = net.forward_states(x)
    with torch.no_grad():
        assert torch.allclose(s[0], enc[1](enc[0](x)), atol=1e-6)
        assert torch.allclose(s[1], enc[3](enc[2](s[0])), atol=1e-6)


def test_input_validation():
    net = LiftedNetwork.from_module(nn.Sequential(nn.Linear(4, 2)), (4,))
    with pytest.raises(ShapeMismatchError, match=r"expected \(B, 4\)"):
        net.forward(torch.zeros(4))
    with pytest.raises(InputError, match="input_shape"):
        LiftedNetwork.from_module(nn.Linear(4, 2), (0,))
    with pytest.raises(InputError, match="input_shape"):
        LiftedNetwork.from_module(nn.Linear(4, 2), "abc")
    with pytest.raises(InputError, match="torch.nn.Module"):
        LiftedNetwork.from_module(lambda x: x, (4,))
    with pytest.raises(ShapeMismatchError, match=r"Layer '1' \(Linear, position 1\)"):
        LiftedNetwork.from_module(nn.Sequential(nn.Flatten(), nn.Linear(5, 2)), (2, 3))
    single = LiftedNetwork.from_module(nn.Linear(4, 2), (4,))  # a bare layer is a network
    assert len(single) == 1 and single.layers[0].activation.name == "identity"


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))) + x


class Skip(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc1(x)
        return self.fc2(x) * 2 if h is not None else h


class SequentialWithSkip(nn.Sequential):
    def forward(self, x):
        return super().forward(x) + x


class Product(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc1(x) * x


class HardBatch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 2)

    def forward(self, x):
        return self.fc(x.view(2, -1))


class Branchy(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x


REFUSALS = [
    (nn.Sequential(nn.Conv2d(1, 2, 3), nn.Sequential(nn.Tanh(), nn.MaxPool2d(2, padding=1))),
     (1, 6, 6), [r"'1\.1'", "MaxPool2d", "position 2", "padding", "AvgPool2d"]),
    (nn.Sequential(nn.Linear(4, 4), nn.GELU()), (4,),
     [r"'1'", "GELU", "position 1", "not monotone", "ReLU"]),
    (nn.Sequential(nn.Linear(4, 4), nn.SiLU()), (4,), [r"'1'", "SiLU", "softplus"]),
    (Product(), (4,), ["'mul'", "multiplies two computed tensors", "sums a \\+ b"]),
    (nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5).train()), (4,),
     [r"'1'", "Dropout", "model.eval()"]),
    (nn.Sequential(nn.Linear(4, 4), nn.LSTM(4, 4)), (4,), [r"'1'", "LSTM", "unroll"]),
    (nn.Sequential(nn.LayerNorm(4)), (4,), [r"'0'", "LayerNorm", "BatchNorm"]),
    (nn.Sequential(nn.Flatten(), nn.Embedding(4, 2)), (4,), ["Embedding", "one-hot"]),
    (nn.Sequential(nn.Upsample(scale_factor=2)), (1, 4, 4), ["Upsample", "ConvTranspose2d"]),
    (nn.Sequential(nn.Linear(4, 4), nn.Bilinear(4, 4, 2)), (4,), ["Bilinear"]),
    (nn.Sequential(nn.Conv1d(1, 2, 3)), (1, 8), ["Conv1d", "Conv2d"]),
    (Branchy(), (4,), ["Branchy", "torch.fx", "nn.Sequential"]),
    (HardBatch(), (2, 3), ["batch size", r"x\.reshape\(x\.size\(0\)"]),
]


@pytest.mark.parametrize(("module", "shape", "patterns"), REFUSALS,
                         ids=[type(m).__name__ + str(i) for i, (m, _, _) in enumerate(REFUSALS)])
def test_unsupported_layers_are_refused_with_name_and_alternative(module, shape, patterns):
    with pytest.raises(UnsupportedLayerError) as info:
        LiftedNetwork.from_module(module, shape)
    for p in patterns:
        assert re.search(p, str(info.value)), f"{p!r} not in: {info.value}"


@pytest.mark.parametrize("module", [Residual(), Skip(), SequentialWithSkip(nn.Linear(4, 4),
                                                                           nn.ReLU())],
                         ids=["Residual", "Skip", "SequentialWithSkip"])
def test_residuals_and_skips_lift_as_graphs_with_the_modules_forward(module):
    """Residual additions lift as a graph (MATH.md §5.6); an unused branch is dropped."""
    net = LiftedNetwork.from_module(module.double(), (4,))
    x = torch.randn(5, 4, dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(net(x), module(x), atol=1e-12)
    assert net.is_chain == isinstance(module, Skip)


def test_attention_refused():
    class Att(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.att = nn.MultiheadAttention(4, 2, batch_first=True)

        def forward(self, x):
            return self.att(x, x, x)[0]
    with pytest.raises(UnsupportedLayerError, match=r"(combines several tensors|attention)"):
        LiftedNetwork.from_module(Att(), (3, 4))
    with pytest.raises(UnsupportedLayerError, match=r"'0'.*attention multiplies"):
        LiftedNetwork.from_module(nn.Sequential(nn.MultiheadAttention(4, 2)), (3, 4))


def test_batchnorm_in_training_mode_refused_without_touching_statistics():
    m = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU())  # training mode
    before = m[1].running_mean.clone(), int(m[1].num_batches_tracked)
    with pytest.raises(UnsupportedLayerError, match=r"Layer '1' \(BatchNorm1d, position 1\).*"
                                                    r"model\.eval\(\)"):
        LiftedNetwork.from_module(m, (4,))
    assert torch.equal(m[1].running_mean, before[0])
    assert int(m[1].num_batches_tracked) == before[1]


def test_verify_against_catches_a_hidden_difference():
    relu = make_activation("relu")
    net = LiftedNetwork([LiftedLayer(LinearMap(torch.eye(3), None), relu, "manual")], (3,))
    assert verify_against(net, torch.relu, "relu") == 0.0
    with pytest.raises(UnsupportedLayerError, match="differs from the original forward"):
        verify_against(net, torch.tanh, "tanh-module")
    with pytest.raises(UnsupportedLayerError, match="returns shape"):
        verify_against(net, lambda x: x[:, :2], "cut")


def test_weights_are_copied_and_device_dtype_conversion():
    lin = nn.Linear(3, 2)
    net = LiftedNetwork.from_module(nn.Sequential(lin), (3,))
    x = torch.randn(2, 3)
    before = net.forward(x).clone()
    with torch.no_grad():
        lin.weight.add_(1.0)
    assert torch.equal(net.forward(x), before)
    n64 = net.to(dtype=torch.float64)
    assert n64.forward(x.double()).dtype == torch.float64
    assert net.device == torch.device("cpu")
