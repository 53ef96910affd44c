"""TorchScript and ONNX import: forward equality with the source model, refusals, bad files.

ONNX files are written with onnx.helper directly (not the torch exporter), with weights equal
to a torch module built here; both that module and onnx's own numpy reference evaluator
(onnx.reference, no onnxruntime) serve as independent references.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from torch import nn

from lbi_engine.errors import InputError, ModelFileError, UnsupportedLayerError
from lbi_engine.models.network import LiftedNetwork

# small operators: one OpenMP thread (the fixture in tests/engine/conftest.py says why)
pytestmark = pytest.mark.usefixtures("one_thread")


# --- TorchScript -----------------------------------------------------------------------------
def ts_model() -> nn.Sequential:
    torch.manual_seed(0)
    m = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
        nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False),
        nn.ConvTranspose2d(4, 3, 3, 2, 1, 1), nn.ELU(0.5),
        nn.Conv2d(3, 2, 4, padding="same"), nn.AdaptiveAvgPool2d(3), nn.Flatten(),
        nn.Sequential(nn.Linear(18, 10), nn.LeakyReLU(0.2), nn.Dropout(0.3), nn.Linear(10, 5),
                      nn.Hardtanh(-0.5, 0.5), nn.Linear(5, 4), nn.Softmax(dim=1)),
    )
    bn = m[1]
    bn.running_mean.uniform_(-0.3, 0.3)
    bn.running_var.uniform_(0.5, 2.0)
    bn.weight.data.uniform_(0.5, 1.5)
    return m.eval()


@pytest.mark.parametrize("how", ["script", "trace"])
def test_torchscript_roundtrip_equals_original(tmp_path, how):
    m = ts_model()
    x = torch.randn(3, 1, 7, 7)
    sm = torch.jit.script(m) if how == "script" else torch.jit.trace(m, x, check_trace=False)
    path = tmp_path / f"model_{how}.pt"
    torch.jit.save(sm, str(path))
    net = LiftedNetwork.from_torchscript(path, (1, 7, 7), allow_code=True)
    assert net.name == f"model_{how}"
    assert [lay.activation.name for lay in net.layers] == ["relu", "elu", "leaky_relu", "clip",
                                                           "softmax"]
    with torch.no_grad():
        assert float((net.forward(x) - m(x)).abs().max()) <= 1e-5
        assert float((net.forward(x) - torch.jit.load(str(path))(x)).abs().max()) <= 1e-5


def test_torchscript_infers_shape_of_linear_first_model_and_asks_otherwise(tmp_path):
    mlp = nn.Sequential(nn.Linear(6, 3), nn.Sigmoid()).eval()
    p = tmp_path / "mlp.pt"
    torch.jit.save(torch.jit.script(mlp), str(p))
    net = LiftedNetwork.from_torchscript(p, allow_code=True)
    assert net.input_shape == (6,)
    conv = tmp_path / "conv.pt"
    torch.jit.save(torch.jit.script(nn.Sequential(nn.Conv2d(1, 1, 3))), str(conv))
    with pytest.raises(InputError, match=r"conv\.pt.*input_shape"):
        LiftedNetwork.from_torchscript(conv, allow_code=True)


class FunctionalRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 4), nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


@pytest.mark.parametrize(("module", "shape", "patterns"), [
    (nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.MaxPool2d(2)), (1, 6, 6),
     [r"'2'", "MaxPool2d", "position 2", "AvgPool2d"]),
    (nn.Sequential(nn.Linear(4, 4), nn.GELU()), (4,), [r"'1'", "GELU", "not monotone"]),
    (nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)), (4,),
     [r"'1'", "Dropout", r"model\.eval\(\)"]),
    (FunctionalRelu(), (4,), ["does more in its forward", "nn.Sequential"]),
    (nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.LSTM(4, 4)), (4,),
     [r"'2'", "LSTM", "position 2", "unroll"]),
    (nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 4), nn.Mish())),
     (4,), [r"'2\.1'", "Mish", "position 3", "softplus"]),
])
def test_torchscript_refusals(tmp_path, module, shape, patterns):
    p = tmp_path / "bad.pt"
    torch.jit.save(torch.jit.script(module), str(p))
    with pytest.raises(UnsupportedLayerError) as info:
        LiftedNetwork.from_torchscript(p, shape, allow_code=True)
    for pat in patterns:
        assert re.search(pat, str(info.value)), f"{pat!r} not in {info.value}"


# --- ONNX builders ---------------------------------------------------------------------------
def _init(name: str, a: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(a, dtype=np.float32), name)


def _model(nodes, inits, in_shape, out_name, opset=13, out_rank=2) -> onnx.ModelProto:
    out_shape = ["N"] + [f"d{i}" for i in range(1, out_rank)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, out_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _weights(seed: int, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-0.5, 0.5, s).astype(np.float32) for s in shapes]


def onnx_cnn():
    """Conv, Relu, BN, AveragePool, asymmetric Conv, LeakyRelu, Flatten, Gemm, Tanh,
    MatMul+Add, Clip and Softmax."""
    w1, b1, w2, b2, gb, gc, mw, mb = _weights(1, (4, 1, 3, 3), (4,), (6, 4, 2, 2), (6,),
                                              (10, 24), (10,), (10, 5), (5,))
    scale, bias, mean = _weights(2, (4,), (4,), (4,))
    var = np.linspace(0.5, 2.0, 4).astype(np.float32)
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"], name="relu1"),
        n("BatchNormalization", ["r1", "s", "bb", "m", "v"], ["bn"], name="bn", epsilon=1e-3),
        n("AveragePool", ["bn"], ["ap"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["ap", "w2", "b2"], ["c2"], name="conv2", strides=[2, 2], pads=[0, 0, 1, 1]),
        n("LeakyRelu", ["c2"], ["l2"], name="lrelu", alpha=0.1),
        n("Flatten", ["l2"], ["f"], name="flat"),
        n("Gemm", ["f", "gb", "gc"], ["g"], name="fc", transB=1, alpha=0.5, beta=2.0),
        n("Tanh", ["g"], ["t"], name="tanh"),
        n("MatMul", ["t", "mw"], ["mm"], name="mm"),
        n("Add", ["mm", "mb"], ["a"], name="bias"),
        n("Clip", ["a", "lo", "hi"], ["cl"], name="clip"),
        n("Softmax", ["cl"], ["y"], name="softmax", axis=-1),
    ]
    inits = [_init(k, v) for k, v in dict(w1=w1, b1=b1, w2=w2, b2=b2, s=scale, bb=bias, m=mean,
                                          v=var, gb=gb, gc=gc, mw=mw, mb=mb,
                                          lo=np.float32(-0.5), hi=np.float32(0.8)).items()]
    # opset 15: onnx.reference's BatchNormalization-9 uses batch statistics (its default
    # momentum), from opset 14 on it follows training_mode = 0, the inference formula
    model = _model(nodes, inits, ["N", 1, 8, 8], "y", opset=15)
    ref = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.BatchNorm2d(4, eps=1e-3), nn.AvgPool2d(2),
        nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(4, 6, 2, stride=2), nn.LeakyReLU(0.1),
        nn.Flatten(), nn.Linear(24, 10), nn.Tanh(), nn.Linear(10, 5), nn.Hardtanh(-0.5, 0.8),
        nn.Softmax(dim=1)).eval()
    t = torch.from_numpy
    with torch.no_grad():
        ref[0].weight.copy_(t(w1)), ref[0].bias.copy_(t(b1))
        ref[2].weight.copy_(t(scale)), ref[2].bias.copy_(t(bias))
        ref[2].running_mean.copy_(t(mean)), ref[2].running_var.copy_(t(var))
        ref[5].weight.copy_(t(w2)), ref[5].bias.copy_(t(b2))
        ref[8].weight.copy_(0.5 * t(gb)), ref[8].bias.copy_(2.0 * t(gc))
        ref[10].weight.copy_(t(mw).T), ref[10].bias.copy_(t(mb))
    return model, ref


class AsymConvT(nn.Module):
    """ONNX ConvTranspose with pads (t, l, b, r) and output_padding, from the spec's formula."""

    def __init__(self, w, b, stride, pads, out_pad) -> None:
        super().__init__()
        self.w, self.b, self.s, self.pads, self.op = w, b, stride, pads, out_pad

    def forward(self, x):
        full = F.conv_transpose2d(x, self.w, None, self.s)
        t, l, b, r = self.pads
        full = F.pad(full, (0, self.op[1], 0, self.op[0]))  # output_padding: zeros at the end
        out = full[..., t:full.shape[-2] - b, l:full.shape[-1] - r]
        return out + self.b.reshape(-1, 1, 1)


def onnx_deconv():
    """Reshape/asymmetric ConvTranspose/Sigmoid/Dropout/Identity/Flatten/Sub/Mul/Relu, opset 17."""
    w, b, sub, mul = _weights(3, (3, 2, 3, 3), (2,), (50,), (50,))
    n = helper.make_node
    nodes = [
        n("Constant", [], ["shape"], name="shape_const",
          value=numpy_helper.from_array(np.array([-1, 3, 2, 2], dtype=np.int64))),
        n("Reshape", ["x", "shape"], ["r"], name="reshape"),
        n("ConvTranspose", ["r", "w", "b"], ["ct"], name="deconv", strides=[2, 2],
          pads=[1, 0, 0, 1], output_padding=[1, 1]),
        n("Sigmoid", ["ct"], ["sg"], name="sigmoid"),
        n("Dropout", ["sg", "ratio"], ["dr"], name="drop"),
        n("Identity", ["dr"], ["id"], name="id"),
        n("Flatten", ["id"], ["f"], name="flat"),
        n("Sub", ["f", "sub"], ["sb"], name="sub"),
        n("Mul", ["sb", "mul"], ["ml"], name="mul"),
        n("Relu", ["ml"], ["y"], name="relu"),
    ]
    inits = [_init("w", w), _init("b", b), _init("sub", sub), _init("mul", mul),
             _init("ratio", np.float32(0.4))]
    model = _model(nodes, inits, ["batch", 12], "y", opset=17)
    t = torch.from_numpy
    ref = nn.Sequential(nn.Unflatten(1, (3, 2, 2)),
                        AsymConvT(t(w), t(b), 2, (1, 0, 0, 1), (1, 1)), nn.Sigmoid(),
                        nn.Flatten())
    return model, ref, t(sub), t(mul)


def test_onnx_cnn_equals_torch_module_and_onnx_reference(tmp_path):
    model, ref = onnx_cnn()
    path = tmp_path / "cnn.onnx"
    onnx.save(model, str(path))
    net = LiftedNetwork.from_onnx(path)
    assert net.input_shape == (1, 8, 8) and net.output_shape == (5,) and net.name == "cnn"
    assert [lay.activation.name for lay in net.layers] == ["relu", "leaky_relu", "tanh", "clip",
                                                           "softmax"]
    x = torch.randn(4, 1, 8, 8)
    got = net.forward(x)
    with torch.no_grad():
        assert float((got - ref(x)).abs().max()) <= 1e-5
    want = ReferenceEvaluator(model).run(None, {"x": x.numpy()})[0]
    assert float(np.abs(got.detach().numpy() - want).max()) <= 1e-5


def test_onnx_deconv_reshape_elementwise(tmp_path):
    model, ref, sub, mul = onnx_deconv()
    path = tmp_path / "deconv.onnx"
    onnx.save(model, str(path))
    net = LiftedNetwork.from_onnx(path)
    assert net.input_shape == (12,) and net.output_shape == (50,)
    x = torch.randn(3, 12)
    got = net.forward(x)
    with torch.no_grad():
        assert float((got - torch.relu((ref(x) - sub) * mul)).abs().max()) <= 1e-5
    want = ReferenceEvaluator(model).run(None, {"x": x.numpy()})[0]
    assert float(np.abs(got.detach().numpy() - want).max()) <= 1e-5


def test_onnx_old_opset_clip_attributes_and_softmax(tmp_path):
    w1, b1, w2 = _weights(4, (6, 5), (6,), (3, 6))
    n = helper.make_node
    nodes = [n("Gemm", ["x", "w1", "b1"], ["g1"], name="fc1", transB=1),
             n("Clip", ["g1"], ["c"], name="relu6", min=0.0, max=6.0),
             n("Gemm", ["c", "w2", "b2"], ["g2"], name="fc2", transB=1, beta=0.0),
             n("Softmax", ["g2"], ["y"], name="sm", axis=1)]
    inits = [_init("w1", w1), _init("b1", b1), _init("w2", w2), _init("b2", np.ones(3))]
    model = _model(nodes, inits, [2, 5], "y", opset=10)
    p = tmp_path / "old.onnx"
    onnx.save(model, str(p))
    net = LiftedNetwork.from_onnx(p)
    x = torch.randn(2, 5) * 10
    want = ReferenceEvaluator(model).run(None, {"x": x.numpy()})[0]
    assert float(np.abs(net.forward(x).numpy() - want).max()) <= 1e-5
    assert net.layers[0].activation.spec() == {"name": "clip", "lo": 0.0, "hi": 6.0}


def test_onnx_misc_ops_against_reference_evaluator(tmp_path):
    """Symmetric ConvTranspose + output_padding, padded AveragePool (both count_include_pad),
    GlobalAveragePool, 1-D BatchNormalization, Gemm with transB = 0, Elu, Softplus."""
    w, b, g = _weights(5, (2, 3, 3, 3), (3,), (3, 4))
    s, bb, m = _weights(6, (3,), (3,), (3,))
    n = helper.make_node
    nodes = [
        n("ConvTranspose", ["x", "w", "b"], ["ct"], name="up", strides=[2, 2],
          pads=[1, 1, 1, 1], output_padding=[1, 1]),
        n("AveragePool", ["ct"], ["p1"], name="p1", kernel_shape=[3, 3], strides=[2, 2],
          pads=[1, 1, 1, 1]),
        n("AveragePool", ["p1"], ["p2"], name="p2", kernel_shape=[2, 2], strides=[2, 2],
          pads=[0, 0, 1, 1], count_include_pad=1),
        n("GlobalAveragePool", ["p2"], ["gp"], name="gap"),
        n("Flatten", ["gp"], ["f"], name="flat"),
        n("BatchNormalization", ["f", "s", "bb", "m", "v"], ["bn"], name="bn"),
        n("Gemm", ["bn", "g"], ["gm"], name="fc"),
        n("Elu", ["gm"], ["e"], name="elu", alpha=0.5),
        n("Softplus", ["e"], ["y"], name="sp"),
    ]
    inits = [_init(k, v) for k, v in dict(w=w, b=b, g=g, s=s, bb=bb, m=m,
                                          v=np.array([0.5, 1.0, 2.0])).items()]
    model = _model(nodes, inits, ["N", 2, 5, 5], "y", opset=15)
    p = tmp_path / "misc.onnx"
    onnx.save(model, str(p))
    net = LiftedNetwork.from_onnx(p)
    assert net.output_shape == (4,)
    x = torch.randn(3, 2, 5, 5)
    want = ReferenceEvaluator(model).run(None, {"x": x.numpy()})[0]
    assert float(np.abs(net.forward(x).numpy() - want).max()) <= 1e-5


def _single_op_model(op_nodes, inits=(), in_shape=("N", 4), out="y", opset=13, out_rank=2):
    return _model(op_nodes, list(inits), list(in_shape), out, opset=opset, out_rank=out_rank)


@pytest.mark.parametrize(("builder", "patterns"), [
    (lambda: _single_op_model([helper.make_node("Relu", ["x"], ["r"], name="r0"),
                               helper.make_node("MaxPool", ["r"], ["y"], name="pool1",
                                                kernel_shape=[2, 2], pads=[0, 0, 1, 1])],
                              in_shape=("N", 1, 4, 4)),
     ["'pool1'", "MaxPool", "index 1", "asymmetric pads"]),
    (lambda: _single_op_model([helper.make_node("Relu", ["x"], ["r"], name="r0"),
                               helper.make_node("Mul", ["r", "x"], ["y"], name="skip")]),
     ["'skip'", "Mul", "index 1", "multiplies two computed tensors"]),
    (lambda: _single_op_model([helper.make_node("Transpose", ["x"], ["y"], name="tr",
                                                perm=[1, 0])]),
     ["'tr'", "Transpose", "index 0", "not supported", "Gemm"]),
    (lambda: _single_op_model([helper.make_node("Gelu", ["x"], ["y"], name="gelu")], opset=20),
     ["'gelu'", "Gelu", "not monotone", "ReLU"]),
    (lambda: _single_op_model([helper.make_node("Flatten", ["x"], ["y"], name="fl", axis=2)],
                              in_shape=("N", 2, 3)), ["'fl'", "axis=2", "batch"]),
    (lambda: _single_op_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                              [numpy_helper.from_array(np.array([1, -1], np.int64), "s")]),
     ["'rs'", "batch dimension"]),
])
def test_onnx_refusals_name_node_op_index_and_alternative(tmp_path, builder, patterns):
    p = tmp_path / "bad.onnx"
    onnx.save(builder(), str(p))
    with pytest.raises(UnsupportedLayerError) as info:
        LiftedNetwork.from_onnx(p)
    for pat in patterns:
        assert pat in str(info.value), f"{pat!r} not in {info.value}"


def test_onnx_dynamic_sample_dims_need_input_shape(tmp_path):
    model = _single_op_model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                             in_shape=("N", "C"))
    p = tmp_path / "dyn.onnx"
    onnx.save(model, str(p))
    with pytest.raises(Exception, match="input_shape"):
        LiftedNetwork.from_onnx(p)
    assert LiftedNetwork.from_onnx(p, input_shape=(7,)).input_shape == (7,)


# --- bad files -------------------------------------------------------------------------------
def test_bad_model_files(tmp_path):
    model, _ = onnx_cnn()
    good = tmp_path / "good.onnx"
    onnx.save(model, str(good))
    data = good.read_bytes()
    ts = tmp_path / "good.pt"
    torch.jit.save(torch.jit.script(nn.Sequential(nn.Linear(2, 2))), str(ts))
    cases = {"missing.onnx": None, "empty.onnx": b"", "truncated.onnx": data[: len(data) // 2],
             "garbage.onnx": b"this is not a model at all\n" * 10}
    for fname, content in cases.items():
        p = tmp_path / fname
        if content is not None:
            p.write_bytes(content)
        with pytest.raises(ModelFileError, match=fname.replace(".", r"\.")):
            LiftedNetwork.from_onnx(p)
    with pytest.raises(ModelFileError, match=r"good\.pt"):  # a TorchScript zip is not ONNX
        LiftedNetwork.from_onnx(ts)
    with pytest.raises(ModelFileError, match=r"good\.onnx.*not a TorchScript archive"):
        LiftedNetwork.from_torchscript(good, (1, 8, 8), allow_code=True)
    broken = tmp_path / "broken.pt"
    broken.write_bytes(ts.read_bytes()[: ts.stat().st_size // 2])
    with pytest.raises(ModelFileError, match=r"broken\.pt.*truncated or corrupt"):
        LiftedNetwork.from_torchscript(broken, (2,), allow_code=True)
    for missing in (tmp_path / "nope.pt", tmp_path):
        with pytest.raises(ModelFileError, match="does not exist|directory"):
            LiftedNetwork.from_torchscript(missing, (2,), allow_code=True)
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(ModelFileError, match=r"empty\.pt.*empty \(0 bytes\)"):
        LiftedNetwork.from_torchscript(tmp_path / "empty.pt", (2,), allow_code=True)
