"""The bundled network zoo, model cards and the training recipes (models.zoo, training)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from lbi_engine.data import get_sample, load_mnist, natural_split
from lbi_engine.errors import InputError, ModelFileError
from lbi_engine.models.network import LiftedNetwork
from lbi_engine.models.training import RECIPES, evaluate_mse, train
from lbi_engine.models.zoo import (
    build_module,
    describe_module,
    file_sha256,
    list_zoo,
    load_model_file,
    load_network,
    load_zoo,
    tensor_sha256,
    zoo_card,
    zoo_dir,
)

ZOO = ["circle-perceptron", "mnist-cnn-ae", "mnist-perceptron-ae", "natural-cnn-ae",
       "natural-res-ae"]
CARD_KEYS = {"format_version", "name", "architecture", "input_shape", "preprocessing", "weights",
             "torch_version", "date", "reference", "description"}
TRAIN_KEYS = {"data", "train_split", "validation_split", "epochs", "optimiser", "lr", "momentum",
              "batch_size", "seed", "train_mse", "val_mse", "training_time_s"}


@pytest.fixture(scope="module")
def bundles():
    return {name: load_zoo(name) for name in ZOO}


def test_zoo_lists_the_networks_with_complete_cards():
    assert list_zoo() == ZOO
    for name in ZOO:
        card = zoo_card(name)
        assert CARD_KEYS <= set(card), name
        if name != "circle-perceptron":
            assert TRAIN_KEYS <= set(card["training"]), name
            assert card["training"]["training_time_s"] > 0
            assert file_sha256(zoo_dir() / card["weights"]["file"]) == card["weights"]["sha256"]
    card = zoo_card("mnist-cnn-ae")
    card["name"] = "edited"
    assert zoo_card("mnist-cnn-ae")["name"] == "mnist-cnn-ae"  # callers get copies
    with pytest.raises(ModelFileError, match="not a bundled network.*circle-perceptron"):
        zoo_card("resnet")


@pytest.mark.parametrize("name", ZOO)
def test_encoder_is_lifted_and_equals_the_torch_encoder(bundles, name):
    b = bundles[name]
    assert isinstance(b.encoder, LiftedNetwork)
    n_enc = b.card["architecture"]["encoder_layers"]
    torch_encoder = b.module[:n_enc]
    if name == "circle-perceptron":
        x = torch.cat([get_sample("cartoon", "disc", 0), get_sample("cartoon", "mixtures", 1)])
    elif name.startswith("natural-"):
        x = torch.from_numpy(natural_split("val")[:64])
    else:
        x = load_mnist("val")[0][:64]
    xin = b.preprocessing.apply(x)
    with torch.no_grad():
        want = torch_encoder(xin)
    got = b.encoder.forward(xin)
    assert got.shape == want.shape == (x.shape[0], *b.encoder.output_shape)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)
    assert torch.allclose(b.encode(x), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["mnist-perceptron-ae", "mnist-cnn-ae"])
def test_decoder_reaches_the_recorded_mse(bundles, name):
    b = bundles[name]
    for split in ("train", "val"):
        x, _ = load_mnist(split)
        rec = b.decode(b.encode(x))
        mse = float(((rec.double() - x.double()) ** 2).mean())
        recorded = b.card["training"][f"{split}_mse"]
        assert abs(mse - recorded) <= 1e-4 * recorded, (split, mse, recorded)
        assert mse < 0.012  # a useful autoencoder: mean(x^2) is 0.11 for these digits
    assert float(b.decode(b.encode(x), clamp=True).min()) >= 0.0


@pytest.mark.parametrize("name, lifted", [("natural-cnn-ae", 3), ("natural-res-ae", 5)])
def test_natural_decoder_reaches_the_recorded_mse_on_colour_patches(bundles, name, lifted):
    b = bundles[name]
    assert tuple(b.input_shape) == (3, 32, 32)
    # conv-ReLU, conv-ReLU, linear code of 256; the residual network adds its block's inner
    # conv-ReLU and the ReLU after the sum, one lifted layer with two inputs
    assert len(b.encoder.layers) == lifted
    assert b.encoder.is_chain == (name == "natural-cnn-ae")
    for split in ("train", "val"):
        x = torch.from_numpy(natural_split(split))
        mse = float(((b.decode(b.encode(x)).double() - x.double()) ** 2).mean())
        recorded = b.card["training"][f"{split}_mse"]
        assert abs(mse - recorded) <= 1e-4 * recorded, (split, mse, recorded)
    assert mse < 0.005  # 23 dB and better on photographs it never saw


def test_perceptron_is_centred_with_the_train_mean(bundles):
    b = bundles["mnist-perceptron-ae"]
    mean = float(load_mnist("train")[0].double().mean())
    assert b.preprocessing.offset == pytest.approx(mean, abs=1e-12) and b.preprocessing.scale == 1
    assert bundles["mnist-cnn-ae"].preprocessing.is_identity
    assert b.encoder.layers[0].affine.out_shape == (100,)
    assert len(bundles["mnist-cnn-ae"].encoder.layers) == 3  # conv-ReLU, conv-ReLU, linear code


def test_circle_weights_are_pytorch_default_init_seed_0(bundles):
    b = bundles["circle-perceptron"]
    torch.manual_seed(0)
    ref = nn.Linear(4096, 512)
    assert torch.equal(b.module[1].weight, ref.weight) and torch.equal(b.module[1].bias, ref.bias)
    assert b.decoder is None and b.input_shape == (1, 64, 64)
    w, bias = ref.weight.detach().double(), ref.bias.detach()
    assert float(w.abs().max()) <= 1 / 64 and float(bias.abs().max()) <= 1 / 64
    assert float(torch.linalg.matrix_norm(w, 2)) ** 2 == pytest.approx(0.605, abs=0.01)  # §9.1
    with pytest.raises(InputError, match="no decoder"):
        b.decode(torch.zeros(1, 512))


def test_loading_the_seeded_network_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    load_zoo("circle-perceptron")
    assert torch.equal(torch.rand(3), expected)


def test_tampered_weights_are_detected(tmp_path, monkeypatch):
    shutil.copytree(zoo_dir(), tmp_path / "models")
    monkeypatch.setenv("LBI_RESOURCES", str(tmp_path))
    w = tmp_path / "models" / "mnist-perceptron-ae.safetensors"
    data = bytearray(w.read_bytes())
    data[-1] ^= 0xFF
    w.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="mnist-perceptron-ae.safetensors has sha256"):
        load_zoo("mnist-perceptron-ae")
    card_path = tmp_path / "models" / "circle-perceptron.json"
    card = json.loads(card_path.read_text())
    card["weights"]["seed"] = 1
    card_path.write_text(json.dumps(card))
    with pytest.raises(ModelFileError, match="regenerated from seed 1"):
        load_zoo("circle-perceptron")


def test_load_network_by_name_path_and_dtype(tmp_path):
    b = load_network("mnist-cnn-ae")
    assert b.name == "mnist-cnn-ae" and b.sha256 == zoo_card("mnist-cnn-ae")["weights"]["sha256"]
    b2 = load_network(zoo_dir() / "mnist-perceptron-ae.json")  # a card path works too
    assert b2.decoder is not None
    b64 = load_zoo("mnist-perceptron-ae", dtype=torch.float64)
    x = load_mnist("val")[0][:4].double()
    assert b64.encode(x).dtype == torch.float64
    assert torch.allclose(b64.encode(x).float(), b2.encode(x.float()), atol=1e-5)
    with pytest.raises(ModelFileError, match="neither a bundled network"):
        load_network("no-such-net")
    with pytest.raises(Exception, match="takes inputs of shape"):
        load_network("mnist-cnn-ae", input_shape=(784,))


def _stated(spec: dict, described: dict) -> dict:
    """The described layer's values of the keys ``spec`` states (inside residual blocks too)."""
    if spec.get("type") == "Residual":
        return {k: [_stated(s, d) for s, d in zip(spec[k], described[k], strict=True)]
                if k in ("body", "shortcut") else described[k] for k in spec}
    return {k: described[k] for k in spec}


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_cards_rebuild_the_recipe_architecture(name):
    layers = RECIPES[name].layers
    described = describe_module(build_module(layers))
    # every argument the recipe states survives; the rest are torch's defaults made explicit
    assert [_stated(spec, d) for spec, d in zip(layers, described, strict=True)] == layers
    assert describe_module(build_module(described)) == described
    assert zoo_card(name)["architecture"]["layers"] == layers


def test_train_writes_a_loadable_card_and_weights(tmp_path):
    calls = []
    card = train("mnist-perceptron-ae", tmp_path, epochs=2, seed=5,
                 progress=lambda e, n, loss: calls.append((e, n, loss)))
    assert [c[:2] for c in calls] == [(1, 2), (2, 2)] and calls[1][2] < calls[0][2]
    assert card["training"]["epochs"] == 2 and card["training"]["seed"] == 5
    assert json.loads((tmp_path / "mnist-perceptron-ae.json").read_text()) == card
    b = load_model_file(tmp_path / "mnist-perceptron-ae.json")
    x, _ = load_mnist("val")
    mse = evaluate_mse(lambda z: b.decoder(b.encoder.forward(z)), x, b.preprocessing.offset)
    assert mse == pytest.approx(card["training"]["val_mse"], rel=1e-4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mnist-perceptron-ae.json",
                                                          "mnist-perceptron-ae.safetensors"]


def test_train_aborted_by_progress_leaves_files_untouched(tmp_path):
    (tmp_path / "mnist-perceptron-ae.json").write_text("old")

    def stop(epoch, epochs, loss):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train("mnist-perceptron-ae", tmp_path, epochs=3, progress=stop)
    assert [p.name for p in tmp_path.iterdir()] == ["mnist-perceptron-ae.json"]
    assert (tmp_path / "mnist-perceptron-ae.json").read_text() == "old"
    with pytest.raises(InputError, match="no training recipe"):
        train("resnet", tmp_path)


def test_tensor_hash_depends_on_values_names_and_dtype():
    a = {"w": torch.ones(2, 3)}
    assert tensor_sha256(a) == tensor_sha256({"w": torch.ones(2, 3)})
    assert tensor_sha256(a) != tensor_sha256({"v": torch.ones(2, 3)})
    assert tensor_sha256(a) != tensor_sha256({"w": torch.ones(3, 2)})
    assert tensor_sha256(a) != tensor_sha256({"w": torch.ones(2, 3, dtype=torch.float64)})
    assert Path(zoo_dir()).name == "models"


def test_the_residual_colour_network_gets_the_natural_patches():
    """The window and `lbi invert --network natural-res-ae --sample K` pick its dataset from
    the card's input shape, before torch loads."""
    from lbi_engine.models.zoo_data import dataset_for, zoo_input_shape

    assert zoo_input_shape("natural-res-ae") == (3, 32, 32)
    assert dataset_for(zoo_input_shape("natural-res-ae"), "mnist") == "natural"
    card = zoo_card("natural-res-ae")
    assert card["format_version"] == 2
    assert card["training"]["command"] == "lbi train natural-res-ae --threads 1"
    assert card["training"]["val_mse"] < zoo_card("natural-cnn-ae")["training"]["val_mse"]
