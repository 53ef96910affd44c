"""torch.export archives (.pt2) are read as data and equal the module they were exported from.

The reference is the torch module built here (the archive is never loaded with
torch.export.load, and the tests make sure of it). Tolerances: the archive holds the float32
weights bit for bit, so in float64 the lifted network and the module differ by rounding
(1e-15), except where lbi stores a constant of the graph in float32: a decomposed
Hardsigmoid divides by 6, kept as x * float32(1/6) (1.2e-8 relative); lbi's Softplus omits
torch's `threshold` switch (e^-20 = 2e-9 at the switch).
"""

from __future__ import annotations

import json
import pickle
import zipfile

import pytest
import torch
from torch import nn

from lbi_engine.errors import ModelFileError, UnsupportedLayerError
from lbi_engine.models.model_files import sniff_model_format
from lbi_engine.models.network import LiftedNetwork
from lbi_engine.models.zoo import load_model_file
from tests.engine._export_nets import Product, ViewNet


def _bn_stats(m: nn.Module) -> nn.Module:
    g = torch.Generator().manual_seed(3)
    for bn in m.modules():
        if isinstance(bn, nn.modules.batchnorm._BatchNorm):
            bn.running_mean.copy_(torch.randn(bn.num_features, generator=g))
            bn.running_var.copy_(0.5 + torch.rand(bn.num_features, generator=g))
    return m.eval()


def _net(name: str) -> tuple[nn.Module, tuple[int, ...]]:
    torch.manual_seed(0)
    nets = {
        "mlp": (nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 8),
                              nn.LeakyReLU(0.1)), (1, 8, 8)),
        "cnn-bn-pool": (nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4),
                                      nn.AvgPool2d(2), nn.Sigmoid(), nn.Flatten(),
                                      nn.Linear(4 * 4 * 4, 10)), (1, 8, 8)),
        "conv-tanh-deconv": (nn.Sequential(nn.Conv2d(1, 4, 3, stride=2, padding="valid"),
                                           nn.Tanh(), nn.ConvTranspose2d(4, 2, 3, stride=2),
                                           nn.AdaptiveAvgPool2d(1), nn.Flatten()), (1, 9, 9)),
        "acts": (nn.Sequential(nn.Linear(10, 8), nn.BatchNorm1d(8), nn.ReLU6(), nn.Linear(8, 8),
                               nn.Softplus(2), nn.Softsign(), nn.Softshrink(0.3),
                               nn.Hardtanh(-0.5, 0.5), nn.ELU(), nn.Softmax(dim=1),
                               nn.Dropout(0.2), nn.Hardsigmoid(), nn.Tanh()), (10,)),
        "view": (ViewNet(8), (1, 8, 8)),
        "unflatten": (nn.Sequential(nn.Linear(3, 64), nn.Unflatten(1, (16, 2, 2)),
                                    nn.ConvTranspose2d(16, 4, 4, 2, 1), nn.Sigmoid()), (3,)),
    }
    module, shape = nets[name]
    return _bn_stats(module), shape


def save_pt2(module: nn.Module, shape: tuple[int, ...], path, *, batch: int = 1,
             dynamic: bool = False, decompose: bool = False) -> None:
    kwargs = {"dynamic_shapes": ({0: torch.export.Dim("batch")},)} if dynamic else {}
    ep = torch.export.export(module, (torch.randn(batch, *shape),), **kwargs)
    if decompose:
        ep = ep.run_decompositions()
    torch.export.save(ep, str(path))


@pytest.fixture
def no_code_loading(monkeypatch):
    """Make every way of running archive code fail loudly while lbi reads a .pt2."""
    def forbidden(*a, **k):
        raise AssertionError("lbi must not call this while reading a .pt2 archive")
    monkeypatch.setattr(torch.export, "load", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)


def _check(net: LiftedNetwork, module: nn.Module, shape: tuple[int, ...]) -> None:
    x = torch.randn(4, *shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with torch.no_grad():
        want = module.double()(x)
        got = net.to(dtype=torch.float64).forward(x)
    module.float()
    err = float((got - want).abs().max() / want.abs().max().clamp_min(1.0))
    assert err <= 1e-7, err


@pytest.mark.parametrize("name", ["mlp", "cnn-bn-pool", "conv-tanh-deconv", "acts", "view",
                                  "unflatten"])
@pytest.mark.parametrize(("dynamic", "decompose"), [(False, False), (True, True)])
def test_pt2_equals_module_without_running_code(tmp_path, name, dynamic, decompose,
                                                no_code_loading):
    module, shape = _net(name)
    path = tmp_path / f"{name}.pt2"
    save_pt2(module, shape, path, batch=2, dynamic=dynamic, decompose=decompose)
    assert sniff_model_format(path) == "pt2"
    net = LiftedNetwork.from_pt2(path)
    assert net.input_shape == shape
    _check(net, module, shape)


def test_pt2_loads_through_load_model_file(tmp_path, no_code_loading):
    module, shape = _net("cnn-bn-pool")
    path = tmp_path / "enc.pt2"
    save_pt2(module, shape, path)
    bundle = load_model_file(path)
    assert bundle.card["format"] == "pt2" and bundle.input_shape == shape
    _check(bundle.encoder, module, shape)


def test_pt2_sample_inputs_pickle_is_never_read(tmp_path):
    """The archive's sample_inputs member is a pickle: replace it by one that would run code."""
    module, shape = _net("mlp")
    path = tmp_path / "m.pt2"
    save_pt2(module, shape, path)
    hostile = tmp_path / "hostile.pt2"
    marker = tmp_path / "ran"
    payload = pickle.dumps(_Touch(str(marker)))
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(hostile, "w") as dst:
        for info in src.infolist():
            data = payload if "sample_inputs" in info.filename else src.read(info.filename)
            dst.writestr(info.filename, data)
    net = LiftedNetwork.from_pt2(hostile)
    assert not marker.exists()
    _check(net, module, shape)


class _Touch:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize(("module", "shape", "patterns"), [
    (nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(2, padding=1)), (1, 8, 8),
     ["MaxPool2d", "padding", "AvgPool2d", "ReLU"]),
    (nn.Sequential(nn.Linear(4, 4), nn.GELU()), (4,), ["gelu", "GELU", "ReLU"]),
    (Product(), (6,), ["mul", "multiplies two computed tensors"]),
    (nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4)), (4,), ["layer_norm", "BatchNorm"]),
    (nn.Sequential(nn.Conv2d(1, 2, 3), nn.Upsample(scale_factor=2)), (1, 6, 6),
     ["upsample", "allow-list", "ConvTranspose2d"]),
])
def test_pt2_refusals_name_node_op_reason_alternative(tmp_path, module, shape, patterns):
    path = tmp_path / "bad.pt2"
    save_pt2(module.eval(), shape, path)
    with pytest.raises(UnsupportedLayerError) as info:
        LiftedNetwork.from_pt2(path)
    msg = str(info.value)
    assert "bad.pt2" in msg
    for pat in patterns:
        assert pat in msg, f"{pat!r} not in {msg}"


def test_pt2_training_mode_batchnorm_is_refused(tmp_path):
    module = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).train()
    path = tmp_path / "train.pt2"
    save_pt2(module, (4,), path, batch=2)
    with pytest.raises(UnsupportedLayerError, match=r"eval"):
        LiftedNetwork.from_pt2(path)


def _rewrite(src, dst, edit) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, edit(info.filename, zin.read(info.filename)))


def test_pt2_damaged_archives_get_one_clear_error(tmp_path):
    module, shape = _net("mlp")
    good = tmp_path / "good.pt2"
    save_pt2(module, shape, good)
    data = good.read_bytes()
    (tmp_path / "truncated.pt2").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError, match="truncated"):
        load_model_file(tmp_path / "truncated.pt2")

    def pickled(name: str, raw: bytes) -> bytes:
        if not name.endswith("model_weights_config.json"):
            return raw
        cfg = json.loads(raw)
        for meta in cfg["config"].values():
            meta["use_pickle"] = True
        return json.dumps(cfg).encode()
    _rewrite(good, tmp_path / "pickled.pt2", pickled)
    with pytest.raises(ModelFileError, match="pickle"):
        LiftedNetwork.from_pt2(tmp_path / "pickled.pt2")

    def oversized(name: str, raw: bytes) -> bytes:
        if not name.endswith("model_weights_config.json"):
            return raw
        cfg = json.loads(raw)
        for meta in cfg["config"].values():
            meta["tensor_meta"]["storage_offset"] = {"as_int": 10**6}
        return json.dumps(cfg).encode()
    _rewrite(good, tmp_path / "bad_offset.pt2", oversized)
    with pytest.raises(ModelFileError, match="does not fit"):
        LiftedNetwork.from_pt2(tmp_path / "bad_offset.pt2")


def test_pt2_whose_tensors_together_exceed_the_memory_limit_is_refused_before_reading(
        tmp_path, monkeypatch):
    """Each tensor is capped by itself; many declared tensors together are checked against the
    memory limit (from the sizes in the config, before any data is read)."""
    from lbi_engine.limits import ENV_VAR, MemoryLimitError

    module, shape = _net("mlp")
    good = tmp_path / "good.pt2"
    save_pt2(module, shape, good)

    def many(name: str, raw: bytes) -> bytes:
        if not name.endswith("model_weights_config.json"):
            return raw
        cfg = json.loads(raw)
        meta = next(iter(cfg["config"].values()))
        for i in range(64):  # 64 declared tensors of 2**22 float32 values: 1 GiB in all
            cfg["config"][f"extra{i}"] = {**meta, "tensor_meta": {
                **meta["tensor_meta"], "sizes": [{"as_int": 2**22}],
                "strides": [{"as_int": 1}]}}
        return json.dumps(cfg).encode()
    _rewrite(good, tmp_path / "many.pt2", many)
    monkeypatch.setenv(ENV_VAR, "256M")
    read: list[str] = []
    from lbi_engine.models import pt2_import

    real_read = pt2_import.Pt2Archive.read
    monkeypatch.setattr(pt2_import.Pt2Archive, "read",
                        lambda self, n, cap: read.append(n) or real_read(self, n, cap))
    with pytest.raises(MemoryLimitError, match=r"many\.pt2.*limit"):
        LiftedNetwork.from_pt2(tmp_path / "many.pt2")
    assert not any("/data/weights/" in n and not n.endswith(".json") for n in read)
    # the unmodified archive stays well under the same limit
    LiftedNetwork.from_pt2(good)
