"""Prior files are charged by what they cost to use, not by their size on disk.

A feature prior of 2 MB with a factor of rank 16,000 on 32 values (a 2 GB float64 core), a
full-rank input prior of 6,084 values (minutes of factorisation) and a card whose
weights_sha256 is a number end in one line naming the file; a prior of sensible rank still
loads and its Woodbury solve matches a dense solve.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import save

from lbi_engine.errors import InputError, ModelFileError
from lbi_engine.priors.feature import load_feature_priors
from lbi_engine.priors.input import load_input_prior
from lbi_engine.regularisers._gaussian import MAX_FACTOR_FLOPS, LowRankGaussian

GiB = 2**30


def _prior(base: Path, kind: str, tensors: dict[str, np.ndarray], **card: object) -> Path:
    data = save({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()})
    base.with_name(base.name + ".safetensors").write_bytes(data)
    base.with_name(base.name + ".json").write_text(json.dumps({
        "format_version": 1, "kind": kind, "tensors": base.name + ".safetensors",
        "tensors_sha256": hashlib.sha256(data).hexdigest(), **card}))
    return base


def _gaussian(n: int, k: int, prefix: str = "") -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {f"{prefix}mean": np.zeros(n), f"{prefix}factor": rng.standard_normal((n, k)) * 0.1,
            f"{prefix}diag": np.ones(n)}


def test_a_feature_prior_of_rank_above_its_dimension_is_refused(tmp_path: Path) -> None:
    base = _prior(tmp_path / "f", "lbi-feature-prior", _gaussian(32, 16_000, "x1."))
    assert (tmp_path / "f.safetensors").stat().st_size < 2.1e6
    with pytest.raises(InputError, match=r"f.safetensors \(variable x1\) has rank 16,000 "
                                         r"above its dimension 32"):
        load_feature_priors(base)


def test_a_full_rank_input_prior_is_refused_by_its_factorisation_cost(
        tmp_path: Path, monkeypatch) -> None:
    """The bound, lowered so that the file stays small: 600 values at full rank need
    600^3 / 3 + 600^3 = 2.9e8 operations (6,084 at full rank: 3.0e11 > 2e10)."""
    gaussian_module = importlib.import_module("lbi_engine.regularisers._gaussian")

    assert 6084**3 // 3 + 6084**3 > MAX_FACTOR_FLOPS
    monkeypatch.setattr(gaussian_module, "MAX_FACTOR_FLOPS", 10**8)
    base = _prior(tmp_path / "i", "lbi-input-prior", _gaussian(600, 600))
    with pytest.raises(InputError, match=r"i.safetensors \(rank 600 on 600 values\) needs "
                                         r"about 2.9e\+08 operations"):
        load_input_prior(base)
    monkeypatch.setattr(gaussian_module, "MAX_FACTOR_FLOPS", 3 * 10**8)
    assert load_input_prior(base)[0].rank == 600


def test_a_prior_whose_factorisation_would_not_fit_the_limit_is_refused(
        tmp_path: Path, monkeypatch) -> None:
    """Charged before anything is formed: 3 n k + 2 k^2 float64 values (2.4 GB here)."""
    from lbi_engine.regularisers._gaussian import check_factorisation

    monkeypatch.setenv("LBI_MEMORY_LIMIT", "300M")
    with pytest.raises(InputError, match=r"prior P \(rank 100 on 1,000,000 values: its "
                                         r"Woodbury factorisation in float64\) .*2.2 GiB"):
        check_factorisation(10**6, 100, "prior P")
    check_factorisation(10**5, 100, "prior P")  # 240 MB: fits


@pytest.mark.parametrize("value", [7, ["a"], {"x": 1}, "f" * 200])
def test_a_non_string_weights_sha256_is_one_line(tmp_path: Path, value: object) -> None:
    base = _prior(tmp_path / "w", "lbi-input-prior", _gaussian(16, 2),
                  weights_sha256=value)
    with pytest.raises(ModelFileError, match="weights_sha256=.* is not a sha256 hex string"):
        load_input_prior(base)
    fbase = _prior(tmp_path / "fw", "lbi-feature-prior", _gaussian(16, 2, "x1."),
                   weights_sha256=value)
    with pytest.raises(ModelFileError, match="weights_sha256"):
        load_feature_priors(fbase)


def test_a_sensible_prior_loads_and_solves_like_a_dense_matrix(tmp_path: Path) -> None:
    tensors = _gaussian(50, 6)
    prior, _ = load_input_prior(_prior(tmp_path / "ok", "lbi-input-prior", tensors,
                                       weights_sha256="ab" * 32))
    u = torch.tensor(tensors["factor"], dtype=torch.float64).float().double()
    sigma = u @ u.T + torch.eye(50, dtype=torch.float64)
    v = torch.randn(3, 50, dtype=torch.float64)
    want = torch.linalg.solve(sigma + 0.3 * torch.eye(50, dtype=torch.float64), v.T).T
    assert torch.allclose(prior.shifted_solve(v, 0.3), want, rtol=1e-8, atol=1e-10)
    with pytest.raises(InputError, match="rank 51 above its dimension 50"):
        LowRankGaussian(torch.zeros(50), torch.zeros(50, 51), torch.ones(50))


@pytest.mark.timeout(300)
def test_hostile_priors_end_in_one_line_under_a_gib(tmp_path: Path, bounded, kit) -> None:
    base = _prior(tmp_path / "big", "lbi-input-prior", _gaussian(784, 784))
    # full rank on MNIST's 784 values is allowed (784^3: 5e8); made costly, it is not:
    costly = _prior(tmp_path / "rank", "lbi-input-prior", _gaussian(784, 785))
    for name, prior in {"ok": base, "rank": costly}.items():
        outcome = bounded.run("invert", "--network", kit.card, "--sample", "0",
                              "--regulariser", "gaussian", "--input-prior", prior,
                              "--max-iter", "2", "--out", tmp_path / f"o-{name}",
                              "--memory-limit", "300M", "--quiet")
        if name == "ok":
            assert outcome.code == 0, outcome
        else:
            assert outcome.is_one_line_refusal(), outcome
            assert "factor (784, 785)" in outcome.err and "rank.safetensors" in outcome.err
        assert outcome.peak < 1.5 * GiB if name == "ok" else outcome.peak < GiB, outcome.peak


def test_a_folder_of_samples_is_bounded_in_total_from_the_headers(
        tmp_path: Path, monkeypatch) -> None:
    from PIL import Image

    from lbi_engine.data import files
    from lbi_engine.errors import DataFileError
    from lbi_engine.priors.feature import load_samples

    folder = tmp_path / "samples"
    folder.mkdir()
    for i in range(3):
        Image.fromarray(np.full((64, 64), 40 * i, np.uint8)).save(folder / f"s{i}.png")
    assert load_samples(folder, (1, 28, 28)).shape == (3, 1, 28, 28)
    monkeypatch.setattr(files, "MAX_FOLDER_PIXELS", 2 * 64 * 64)  # the third is one too many
    with pytest.raises(DataFileError, match=r"more than 8,192 pixels in all \(at s2.png\)"):
        load_samples(folder, (1, 28, 28))
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "300M")
    with pytest.raises(InputError, match="the 3 images in .* at size"):
        files.check_image_folder(folder, sorted(folder.iterdir()), (3, 4096, 4096))
