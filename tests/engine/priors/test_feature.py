"""Learned Gaussian feature priors (lbi_engine/priors/feature.py, docs/LAYERWISE.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from lbi_engine.errors import ModelFileError
from lbi_engine.priors import feature as fp
from tests.engine._solver_cases import disc, problem_for, relu_mlp, with_feature_prior


def _ledoit_wolf(x: np.ndarray) -> np.ndarray:
    """Ledoit & Wolf (2004), written out from the paper's formulas (sklearn's convention)."""
    n, p = x.shape
    xc = x - x.mean(axis=0)
    s = xc.T @ xc / n
    mu = np.trace(s) / p
    d2 = np.sum((s - mu * np.eye(p)) ** 2)
    b2 = sum(np.sum((np.outer(r, r) - s) ** 2) for r in xc) / n**2
    shrink = min(b2, d2) / d2
    return (1 - shrink) * s + shrink * mu * np.eye(p)


def test_full_rank_fit_is_the_ledoit_wolf_covariance() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 12)) @ rng.normal(size=(12, 12)) + 3.0
    prior, info = fp.fit_gaussian(torch.tensor(x), rank=12)
    sigma = (prior.factor.double() @ prior.factor.double().T + torch.diag(prior.diag.double()))
    np.testing.assert_allclose(sigma.numpy(), _ledoit_wolf(x), rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(prior.mean.numpy(), x.mean(axis=0), rtol=1e-6)
    assert 0 < info["shrinkage"] < 1 and info["rank"] == 12


def test_low_rank_keeps_the_diagonal_and_woodbury_matches_a_dense_inverse() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 40)) @ rng.normal(size=(40, 40))
    prior, _ = fp.fit_gaussian(torch.tensor(x), rank=5)
    full = _ledoit_wolf(x)
    u, d = prior.factor.double().numpy(), prior.diag.double().numpy()
    sigma = u @ u.T + np.diag(d)
    np.testing.assert_allclose(np.diag(sigma), np.diag(full), rtol=1e-5)
    h = torch.tensor(rng.normal(size=(3, 40)))
    dense_inv = np.linalg.inv(sigma)
    centred = h.numpy() - prior.mean.double().numpy()
    np.testing.assert_allclose(prior.gradient(h).numpy(), centred @ dense_inv, rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(prior.value(h).numpy(),
                               0.5 * np.einsum("bi,ij,bj->b", centred, dense_inv, centred),
                               rtol=1e-6)
    assert prior.precision_norm() >= np.linalg.eigvalsh(dense_inv).max() * (1 - 1e-6)


def test_saved_prior_round_trips_and_a_changed_file_is_refused(tmp_path) -> None:
    problem = with_feature_prior(problem_for(relu_mlp((36, 72, 108), 0),
                                             disc(6, 2.0).reshape(1, 36), 0.05, std=0.02))
    priors = problem.feature_priors
    priors.card = fp.make_card("test-net", "abc", "perturbed discs", "test", priors, 8)
    tensors, card = fp.save_feature_priors(priors, tmp_path / "net.prior")
    with pytest.raises(Exception, match="exists"):
        fp.save_feature_priors(priors, tmp_path / "net.prior")
    loaded = fp.load_feature_priors(tmp_path / "net.prior")
    for a, b in zip(priors.layers, loaded.layers, strict=True):
        assert torch.equal(a.mean, b.mean) and torch.equal(a.factor, b.factor)
    loaded.check_network(problem.network)
    meta = json.loads(card.read_text())
    assert meta["kind"] == "lbi-feature-prior" and len(meta["tensors_sha256"]) == 64
    data = bytearray(tensors.read_bytes())
    data[-1] ^= 1
    tensors.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="sha256"):
        fp.load_feature_priors(tmp_path / "net.prior")


def test_the_zoo_prior_fits_the_cnn_and_names_its_weights() -> None:
    from lbi_engine.models.zoo import list_zoo, load_zoo

    assert "mnist-cnn-ae.prior" not in list_zoo()
    bundle = load_zoo("mnist-cnn-ae")
    priors = fp.zoo_feature_priors("mnist-cnn-ae")
    assert priors is not None
    priors.check_network(bundle.encoder)
    assert priors.card["weights_sha256"] == bundle.sha256
    assert "train" in priors.card["samples_source"]
    assert [p.factor.shape[1] for p in priors.layers] == [fp.DEFAULT_RANK] * 2


def test_layerwise_availability_is_known_without_loading(tmp_path) -> None:
    assert fp.layerwise_unavailable("mnist-cnn-ae", 3) is None
    assert fp.layerwise_unavailable("circle-perceptron", 1) is None
    assert "feature-prior" in fp.layerwise_unavailable(str(tmp_path / "net.pt"), 2)
    assert "does not exist" in fp.layerwise_unavailable("x", 2, str(tmp_path / "p"))


def test_a_graph_network_gets_one_prior_per_state_of_its_forward() -> None:
    """A residual network: x_1 .. x_{L-1} of forward_states, as for a chain; the fitted
    prior's mean is the samples' mean state, and check_network accepts the network."""
    from torch import nn

    from lbi_engine.models.network import LiftedNetwork

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(2, 2, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x + self.conv(x))

    torch.manual_seed(0)
    net = LiftedNetwork.from_module(nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(),
                                                  Block(), nn.Conv2d(2, 1, 1)).eval(), (1, 6, 6))
    assert not net.is_chain
    samples = torch.rand(40, 1, 6, 6)
    priors = fp.fit_feature_priors(net, samples, rank=4)
    states = net.forward_states(samples)[:-1]
    assert [p.size for p in priors.layers] == [s[0].numel() for s in states]
    for prior, state in zip(priors.layers, states, strict=True):
        assert torch.allclose(prior.mean, state.reshape(40, -1).mean(dim=0), atol=1e-6)
    priors.check_network(net)
    # samples whose features exceed the memory limit: refused before they run through it
    from lbi_engine.limits import ENV_VAR, MemoryLimitError

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_VAR, "256M")
        many = torch.zeros(1, 1, 6, 6).expand(2_000_000, 1, 6, 6)  # 2.3 GB of features
        with pytest.raises(MemoryLimitError, match="feature prior of 2000000 samples"):
            fp.fit_feature_priors(net, many, rank=4)


def test_wide_features_fit_from_the_gram_matrix_as_from_the_covariance(monkeypatch) -> None:
    """Above GRAM_FROM the fit never forms the n x n covariance; it must give the same
    Ledoit–Wolf prior (shrinkage, U U^T, diagonal) as the covariance path, for n > N."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(30, 4, generator=g, dtype=torch.float64) @ torch.randn(
        4, 70, generator=g, dtype=torch.float64) + 0.3 * torch.randn(30, 70, generator=g,
                                                                   dtype=torch.float64)
    dense, dense_info = fp.fit_gaussian(x, rank=12)
    monkeypatch.setattr(fp, "GRAM_FROM", 10)
    gram, gram_info = fp.fit_gaussian(x, rank=12)
    assert abs(gram_info["shrinkage"] - dense_info["shrinkage"]) < 1e-12
    assert 0 < dense_info["shrinkage"] < 1
    u, v = dense.factor.double(), gram.factor.double()
    assert torch.allclose(u @ u.T, v @ v.T, atol=1e-5 * float((u @ u.T).abs().max()))
    assert torch.allclose(dense.diag, gram.diag, rtol=1e-5)
    assert gram.factor.shape == dense.factor.shape == (70, 12)
