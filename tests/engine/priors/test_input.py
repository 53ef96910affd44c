"""The learned input prior's fit (against a numpy Ledoit–Wolf written from the paper's formula),
its files (round trip, hashes, sizes, refusals) and the shipped zoo prior (fitted on the
TRAINING digits only); the commands are in tests/cli/test_input_prior.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from lbi_engine.errors import InputError, ModelFileError
from lbi_engine.priors import input as ip


def _ledoit_wolf(x: np.ndarray) -> np.ndarray:
    """Ledoit & Wolf (2004) as scikit-learn writes it: shrink S towards mu I."""
    n, p = x.shape
    xc = x - x.mean(axis=0)
    s = xc.T @ xc / n
    mu = np.trace(s) / p
    delta = ((s - mu * np.eye(p)) ** 2).sum() / p
    beta = (((xc**2).T @ (xc**2)).sum() / n - (s**2).sum()) / (p * n)
    shrink = min(beta, delta) / delta
    return (1 - shrink) * s + shrink * mu * np.eye(p)


def test_full_rank_fit_is_the_ledoit_wolf_covariance() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 12)) @ rng.normal(size=(12, 12)) * 0.3 + 0.5
    prior, info = ip.fit_input_prior(torch.tensor(x), rank=12)
    sigma = (prior.factor @ prior.factor.T + torch.diag(prior.diag)).double().numpy()
    np.testing.assert_allclose(sigma, _ledoit_wolf(x), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(prior.mean.numpy(), x.mean(axis=0), rtol=1e-5)
    assert 0 < info["shrinkage"] < 1 and info["samples"] == 40


def test_low_rank_fit_keeps_the_diagonal_and_stays_positive_definite() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(60, 20)) * np.linspace(0.1, 1.0, 20)
    prior, _ = ip.fit_input_prior(torch.tensor(x), rank=4)
    sigma = (prior.factor @ prior.factor.T + torch.diag(prior.diag)).double().numpy()
    np.testing.assert_allclose(np.diag(sigma), np.diag(_ledoit_wolf(x)), rtol=1e-4)
    assert np.linalg.eigvalsh(sigma).min() > 0 and prior.rank == 4


def test_files_round_trip_and_refuse_damage(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    prior, info = ip.fit_input_prior(torch.tensor(rng.random((30, 16))), rank=3)
    card = ip.make_card("net", "ab" * 32, (1, 4, 4), "test", "cd" * 32, "lbi prior net", info)
    tensors, card_path = ip.save_input_prior(prior, card, tmp_path / "p")
    back, read = ip.load_input_prior(tmp_path / "p", (1, 4, 4))
    for a, b in ((back.mean, prior.mean), (back.factor, prior.factor), (back.diag, prior.diag)):
        torch.testing.assert_close(a, b.float())
    assert read["command"] == "lbi prior net" and back.label == read["tensors_sha256"]
    with pytest.raises(FileExistsError):
        ip.save_input_prior(prior, card, tmp_path / "p")
    with pytest.raises(InputError, match="has 16 values per sample"):
        ip.load_input_prior(tmp_path / "p", (1, 5, 5))
    data = bytearray(tensors.read_bytes())
    data[-1] ^= 1
    tensors.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="does not match the sha256"):
        ip.load_input_prior(tmp_path / "p")
    card_path.write_text(json.dumps({**read, "kind": "lbi-feature-prior"}))
    with pytest.raises(ModelFileError, match="not an lbi input prior card"):
        ip.load_input_prior(tmp_path / "p")


def test_a_file_too_big_is_refused_before_reading(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    prior, info = ip.fit_input_prior(torch.rand(10, 9, dtype=torch.float64), rank=2)
    ip.save_input_prior(prior, ip.make_card("n", "", (9,), "s", "", "c", info), tmp_path / "q")
    monkeypatch.setattr(ip, "MAX_TENSOR_BYTES", 100)
    with pytest.raises(ModelFileError, match="more than an input prior can be"):
        ip.load_input_prior(tmp_path / "q")


def test_the_shipped_prior_is_fitted_on_the_training_digits_only() -> None:
    from lbi_engine.data import as_batch, load_mnist
    from lbi_engine.models.zoo import zoo_card

    assert ip.has_zoo_input_prior("mnist-cnn-ae") and not ip.has_zoo_input_prior("nope")
    prior, card = ip.load_input_prior(ip.zoo_input_prior_base("mnist-cnn-ae"), (1, 28, 28))
    train, _ = load_mnist("train")
    assert card["samples_sha256"] == ip.samples_sha256(as_batch(train, (1, 28, 28)))
    assert card["weights_sha256"] == zoo_card("mnist-cnn-ae")["weights"]["sha256"]
    assert card["command"] == "lbi prior mnist-cnn-ae --out BASE"
    images = as_batch(train, (1, 28, 28)).double().reshape(train.shape[0], -1)
    np.testing.assert_allclose(prior.mean.numpy(), images.mean(dim=0).numpy(), atol=1e-6)
