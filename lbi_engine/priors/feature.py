"""Learned Gaussian priors on a network's intermediate features (layer-wise inversion).

For every auxiliary variable x_l (l = 1 .. L-1: the output of layer l's activation) a prior
N(mu_l, Sigma_l) fitted on clean training inputs, used as the convex regulariser

    R_l(h) = 1/2 (h - mu_l)^T Sigma_l^{-1} (h - mu_l)        (plus h in dom Psi_l)

(docs/LAYERWISE.md). Sigma_l is the Ledoit–Wolf shrunk sample covariance, stored as low rank
plus diagonal, Sigma = U U^T + diag(d) with U (n, k) and d > 0, so a 1568-wide layer costs
O(n k) memory and an application of Sigma^{-1} O(n k) work (Woodbury):

    Sigma^{-1} v = D^{-1} v - D^{-1} U (I + U^T D^{-1} U)^{-1} U^T D^{-1} v.

A prior is a safetensors file (tensors only, never code) plus a JSON card that names the
network's weights (sha256) it was fitted for, the samples, the rank and the shrinkage, and the
sha256 of the tensor file. ``lbi feature-prior`` writes both.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from lbi_engine.errors import InputError, ModelFileError
from lbi_engine.protocols import Network
from lbi_engine.regularisers import LowRankGaussian
from lbi_engine.regularisers._gaussian import check_factorisation

PRIOR_FORMAT_VERSION = 1
DEFAULT_RANK = 96
PRIOR_SUFFIX = ".prior"  # NAME.prior.safetensors + NAME.prior.json beside the weights


class GaussianFeaturePrior(LowRankGaussian):
    """N(mean, U U^T + diag(diag)) on one flattened feature vector of length n: the learned
    input prior's low-rank Gaussian (``regularisers._gaussian.LowRankGaussian``: Woodbury
    products with Sigma^{-1}, R, its gradient, ||Sigma^{-1}||), one per feature variable."""


def fit_gaussian(features: Tensor, rank: int = DEFAULT_RANK) -> tuple[GaussianFeaturePrior, dict]:
    """Mean and Ledoit–Wolf shrunk covariance of ``features`` (N, n), as low rank + diagonal.

    Shrinkage: Sigma_lw = (1 - s) S + s m I with m = tr(S)/n and the Ledoit–Wolf (2004)
    intensity s. Low rank + diagonal: U = top-k eigenvectors of (1 - s) S scaled by the
    square roots of their eigenvalues; d = the diagonal of Sigma_lw - U U^T (>= s m > 0), so
    the diagonal of Sigma is kept exactly and Sigma >= s m I.
    """
    x = features.reshape(features.shape[0], -1).to(torch.float64)
    count, n = x.shape
    if count < 2:
        raise InputError("a feature prior needs at least 2 samples (a few hundred recommended).")
    mean = x.mean(dim=0)
    xc = x - mean
    k = max(0, min(int(rank), n))
    if n > max(GRAM_FROM, count):  # the smaller of the two square matrices
        shrink, mu, evals, factor, cov_diag = _gram_moments(xc, k)
    else:
        cov = xc.T @ xc / count
        mu = float(torch.trace(cov)) / n
        # Ledoit–Wolf: s = min(1, b^2 / d^2), d^2 = ||S - m I||_F^2,
        # b^2 = mean ||x x^T - S||_F^2 / N.
        d2 = float(((cov - mu * torch.eye(n, dtype=torch.float64)) ** 2).sum())
        sq = xc.pow(2)
        b2 = float((sq.T @ sq).sum() / count - (cov**2).sum()) / count
        shrink = 1.0 if d2 <= 0 else min(1.0, max(0.0, b2 / d2))
        evals, evecs = torch.linalg.eigh((1.0 - shrink) * cov)
        evals, evecs = evals.flip(0)[:k].clamp_min(0.0), evecs.flip(1)[:, :k]
        factor = evecs * evals.sqrt()
        cov_diag = torch.diagonal(cov)
    floor = max(shrink * mu, 1e-12 * max(mu, 1e-30), 1e-30)
    diag = ((1.0 - shrink) * cov_diag - factor.pow(2).sum(dim=1)).clamp_min(0.0)
    diag = diag + floor
    captured = float(evals.sum() / max(float((1.0 - shrink) * cov_diag.sum()), 1e-300))
    info = {"samples": count, "size": n, "rank": k, "shrinkage": shrink,
            "mean_variance": mu, "variance_captured_by_rank": captured}
    prior = GaussianFeaturePrior(mean.float(), factor.float(), diag.float())
    return prior, info


#: Feature sizes above which (and above the sample count N) the fit works on the N x N Gram
#: matrix of the samples instead of the n x n covariance (a 64 x 32 x 32 state of a vision
#: network: n = 65536, whose covariance alone would take 34 GB); the same Ledoit–Wolf
#: estimate, in O(N^2 n).
GRAM_FROM = 4096


def _gram_moments(xc: Tensor, k: int) -> tuple[float, float, Tensor, Tensor, Tensor]:
    """(shrinkage s, m = tr(S)/n, top-k eigenvalues of (1 - s) S, their factor U, diag S) of
    S = xc^T xc / N from the Gram matrix G = xc xc^T / N, which has S's nonzero eigenvalues:
    ||S||_F = ||G||_F, tr S = tr G, and S's eigenvectors are xc^T v / sqrt(N lambda) for G's
    (v, lambda). b^2 uses sum_{a,b} (sum_i x_ia^2 x_ib^2) = sum_i ||x_i||^4."""
    count, n = xc.shape
    gram = xc @ xc.T / count
    trace = float(torch.trace(gram))
    mu = trace / n
    frob2 = float(gram.pow(2).sum())
    d2 = frob2 - 2 * mu * trace + mu * mu * n
    b2 = (float(xc.pow(2).sum(dim=1).pow(2).sum()) / count - frob2) / count
    shrink = 1.0 if d2 <= 0 else min(1.0, max(0.0, b2 / d2))
    lam, vecs = torch.linalg.eigh(gram)
    lam, vecs = lam.flip(0)[:k].clamp_min(0.0), vecs.flip(1)[:, :k]
    keep = lam > 1e-12 * max(float(lam[0]) if len(lam) else 0.0, 1e-300)
    lam, vecs = lam[keep], vecs[:, keep]
    evecs = xc.T @ vecs / (count * lam).sqrt()  # unit eigenvectors of S
    evals = (1.0 - shrink) * lam
    factor = evecs * evals.sqrt()
    if factor.shape[1] < k:  # rank N - 1 < k: the stored factor keeps the requested width
        factor = torch.cat([factor, factor.new_zeros(n, k - factor.shape[1])], dim=1)
    return shrink, mu, evals, factor, xc.pow(2).mean(dim=0)


@dataclass
class FeaturePriors:
    """One Gaussian prior per auxiliary variable x_1 .. x_{L-1}, plus its card."""

    layers: list[GaussianFeaturePrior]
    card: dict[str, Any]

    def check_network(self, network: Network) -> None:
        """Raises InputError when the priors do not fit the network's feature sizes."""
        sizes = [math.prod(s.shape[1:]) for s in _feature_shapes(network)]
        mine = [p.size for p in self.layers]
        if sizes != mine:
            raise InputError(
                f"the feature prior has variables of sizes {mine} but the network's "
                f"intermediate features have sizes {sizes}; fit a prior for this network "
                "(lbi feature-prior NETWORK --samples FILE --out PRIOR)."
            )


def _feature_shapes(network: Network) -> list[Tensor]:
    x = torch.zeros((1, *network.input_shape), dtype=network.dtype, device=network.device)
    with torch.no_grad():
        return list(network.forward_states(x))[:-1]


def fit_feature_priors(network: Network, inputs: Tensor, rank: int = DEFAULT_RANK,
                       batch: int = 500) -> FeaturePriors:
    """Fit a prior for every intermediate feature of ``network`` from network inputs (N, ...):
    one per state x_1 .. x_{L-1} of ``forward_states``, chain or graph (MATH.md §5.6)."""
    if network.layers and len(network.layers) < 2:
        raise InputError("the network has one layer: layer-wise inversion needs no feature prior.")
    _check_fit_memory(network, inputs.shape[0], rank)
    states: list[list[Tensor]] = [[] for _ in range(len(network.layers) - 1)]
    with torch.no_grad():
        for start in range(0, inputs.shape[0], batch):
            chunk = inputs[start:start + batch].to(network.device, network.dtype)
            for store, h in zip(states, network.forward_states(chunk)[:-1], strict=False):
                store.append(h.reshape(h.shape[0], -1).cpu())
    layers, infos = [], []
    for store in states:
        prior, info = fit_gaussian(torch.cat(store), rank)
        layers.append(prior)
        infos.append(info)
    return FeaturePriors(layers, {"layers": infos})


def _check_fit_memory(network: Network, count: int, rank: int) -> None:
    """Refuses (MemoryLimitError, before the samples run through the network) a fit whose
    samples' features do not fit in memory: every state of every sample is kept in float64
    (N x sum n), plus the widest state's covariance n x n (or the N x N Gram matrix and its
    N x n copies where the fit uses it) and the low-rank factors."""
    from lbi_engine.limits import check_bytes

    sizes = [math.prod(s.shape[1:]) for s in _feature_shapes(network)]
    if not sizes:
        return
    widest = max(sizes)
    work = widest * widest if widest <= max(GRAM_FROM, count) else \
        count * count + 3 * count * widest
    needed = 8 * (count * sum(sizes) + work + rank * sum(sizes))
    check_bytes(needed, f"the feature prior of {count} samples ({len(sizes)} features, "
                f"{sum(sizes)} values each)", "give fewer samples")


# -- files -------------------------------------------------------------------------------------

def prior_paths(base: str | os.PathLike[str]) -> tuple[Path, Path]:
    """(tensor file, card) for a prior named ``base`` (with or without the suffixes)."""
    text = os.fspath(base)
    for tail in (".safetensors", ".json"):
        if text.endswith(tail):
            text = text[: -len(tail)]
    return Path(text + ".safetensors"), Path(text + ".json")


def save_feature_priors(priors: FeaturePriors, base: str | os.PathLike[str],
                        overwrite: bool = False) -> tuple[Path, Path]:
    """Writes BASE.safetensors and BASE.json atomically; returns their paths."""
    from safetensors.torch import save as save_safetensors

    from lbi_engine.io import atomic_write_bytes, atomic_write_text, safe_output_path
    from lbi_engine.models.cards import file_sha256

    tensors_path, card_path = prior_paths(base)
    safe_output_path(tensors_path, overwrite)
    safe_output_path(card_path, overwrite)
    tensors = {}
    for i, p in enumerate(priors.layers, start=1):
        tensors[f"x{i}.mean"] = p.mean.float().contiguous()
        tensors[f"x{i}.factor"] = p.factor.float().contiguous()
        tensors[f"x{i}.diag"] = p.diag.float().contiguous()
    atomic_write_bytes(tensors_path, save_safetensors(tensors))
    card = {"format_version": PRIOR_FORMAT_VERSION, "kind": "lbi-feature-prior",
            **priors.card, "tensors": tensors_path.name,
            "tensors_sha256": file_sha256(tensors_path)}
    atomic_write_text(card_path, json.dumps(card, indent=2) + "\n")
    return tensors_path, card_path


def read_prior_card(base: str | os.PathLike[str], kind: str, version: int, what: str,
                    command: str) -> tuple[Path, Path, dict[str, Any]]:
    """(tensor file, card file, card) of a prior BASE: both files exist, the card is JSON of
    ``kind`` and format ``version`` (``what`` and ``command`` name it in the errors)."""
    from lbi_engine.limits import read_json

    tensors_path, card_path = prior_paths(base)
    for p in (tensors_path, card_path):
        if not os.path.lexists(p):
            raise ModelFileError(f"{what} {p} does not exist; create it with `{command}`.")
    # read_json: a regular file within the memory limit (no FIFO, device or /proc)
    card = read_json(card_path, f"{what} card", "create the prior again", ModelFileError)
    if not isinstance(card, dict) or card.get("kind") != kind:
        raise ModelFileError(f"{card_path} is not an lbi {what} card (kind {kind!r}).")
    if card.get("format_version") != version:
        raise ModelFileError(f"{card_path}: {what} format_version "
                             f"{card.get('format_version')!r} is not {version}.")
    for field in ("weights_sha256", "tensors_sha256"):  # compared and sliced as text later
        value = card.get(field)
        if value is not None and not (isinstance(value, str) and len(value) <= 128):
            raise ModelFileError(f"{card_path}: {field}={str(value)[:40]!r} is not a sha256 "
                                 f"hex string; create the {what} again.")
    return tensors_path, card_path, card


def read_prior_tensors(tensors_path: Path, card_path: Path, card: dict[str, Any],
                       what: str) -> dict[str, Tensor]:
    """The tensors of a prior's safetensors file, read once as a regular file within the
    memory limit (the parsed copy included) and hashed as read: the bytes loaded are the bytes
    the card's ``tensors_sha256`` checks."""
    from safetensors import SafetensorError
    from safetensors.torch import load as load_safetensors

    from lbi_engine.limits import check_bytes, read_regular

    size = os.stat(tensors_path).st_size
    check_bytes(2 * size, f"{what} {tensors_path}", "use a smaller prior")
    data = read_regular(tensors_path, what, error=ModelFileError)
    if hashlib.sha256(data).hexdigest() != card.get("tensors_sha256"):
        raise ModelFileError(f"{tensors_path} does not match the sha256 in {card_path}; the file "
                             "is damaged or was replaced: create the prior again.")
    try:
        return load_safetensors(data)
    except (SafetensorError, OSError, ValueError) as exc:
        raise ModelFileError(f"{what} {tensors_path} is unreadable ({exc}).") from exc


def load_feature_priors(base: str | os.PathLike[str]) -> FeaturePriors:
    """Reads a prior written by :func:`save_feature_priors` (hash checked; tensors only)."""
    tensors_path, card_path, card = read_prior_card(
        base, "lbi-feature-prior", PRIOR_FORMAT_VERSION, "feature prior",
        "lbi feature-prior NETWORK --samples FILE --out BASE")
    tensors = read_prior_tensors(tensors_path, card_path, card, "feature prior")
    layers = []
    i = 1
    while f"x{i}.mean" in tensors:
        mean, factor, diag = (tensors[f"x{i}.{k}"].float() for k in ("mean", "factor", "diag"))
        ok = (mean.ndim == 1 and factor.ndim == 2 and factor.shape[0] == mean.shape[0]
              and diag.shape == mean.shape and bool((diag > 0).all())
              and all(bool(torch.isfinite(t).all()) for t in (mean, factor, diag)))
        if not ok:
            raise ModelFileError(f"{tensors_path}: variable x{i} has inconsistent or non-finite "
                                 "tensors; create the prior again.")
        check_factorisation(int(mean.numel()), int(factor.shape[1]),
                            f"feature prior {tensors_path} (variable x{i})")
        layers.append(GaussianFeaturePrior(mean, factor, diag))
        i += 1
    if not layers:
        raise ModelFileError(f"{tensors_path} holds no feature prior tensors (x1.mean, ...).")
    return FeaturePriors(layers, card)


def zoo_prior_base(name: str) -> Path:
    from lbi_engine.models.zoo import zoo_dir

    return zoo_dir() / f"{name}{PRIOR_SUFFIX}"


def zoo_feature_priors(name: str) -> FeaturePriors | None:
    """The prior shipped beside a bundled network's weights, or None."""
    tensors_path, card_path = prior_paths(zoo_prior_base(name))
    if not (tensors_path.is_file() and card_path.is_file()):
        return None
    return load_feature_priors(zoo_prior_base(name))


def make_card(network_name: str, weights_sha256: str, source: str, command: str,
              fitted: FeaturePriors, rank: int) -> dict[str, Any]:
    return {"network": network_name, "weights_sha256": weights_sha256,
            "samples_source": source, "command": command, "rank": rank,
            "model": "N(mean, U U^T + diag(d)): Ledoit-Wolf shrunk covariance of the clean "
                     "samples' features, top-rank eigenpairs + the remaining diagonal",
            "created": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            **fitted.card}


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".pgm")


def load_samples(source: str | os.PathLike[str], input_shape: tuple[int, ...]) -> Tensor:
    """Clean sample inputs in display space: a ``.npy`` array (N, *input_shape) or a folder
    of images (sorted by name, with the network's channel count, resized to the input's
    height and width)."""
    from lbi_engine.data import as_batch, load_array, load_image
    from lbi_engine.data.files import check_image_folder

    path = Path(source).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise InputError(f"folder {path} holds no images ({', '.join(IMAGE_SUFFIXES)}); "
                             "give a folder of sample inputs or a .npy array")
        hw = (input_shape[-2], input_shape[-1]) if len(input_shape) >= 2 else None
        channels = input_shape[0] if len(input_shape) == 3 else 1
        check_image_folder(path, files, input_shape)
        images = [load_image(f, size=hw, channels=channels) for f in files]
        return torch.cat([as_batch(im, input_shape) for im in images])
    return as_batch(load_array(path).float(), input_shape)


def zoo_training_inputs(bundle: Any) -> tuple[Tensor, str]:
    """The bundled training split that a zoo network was trained on (display space)."""
    from lbi_engine.data import NATURAL_FILE, load_mnist, natural_split

    dataset = (bundle.card.get("training") or {}).get("data", "")
    if NATURAL_FILE in str(dataset):
        patches = torch.from_numpy(natural_split("train"))
        return patches, "lbi_engine.data.natural_split('train') (resources/datasets/" \
            f"{NATURAL_FILE} training split, {patches.shape[0]} patches)"
    if "mnist_5k" not in str(dataset):
        raise InputError(f"{bundle.name}: no bundled training split is known for its data "
                         f"({dataset!r}); give --samples.")
    images, _ = load_mnist("train")
    from lbi_engine.data import as_batch

    return as_batch(images, bundle.input_shape), "lbi_engine.data.load_mnist('train') " \
        f"(resources/datasets/mnist_5k.npz training split, {images.shape[0]} images)"


def layerwise_unavailable(network: str, depth: int, feature_prior: str | None = None
                          ) -> str | None:
    """Why method ``layerwise`` cannot run for this network (None: it can), without loading
    anything: for the GUI to disable its button with the reason, before a run is started.
    ``depth``: the number of lifted layers of the loaded network."""
    from lbi_engine.models.zoo import list_zoo

    if depth < 2:
        return None
    if feature_prior:
        tensors, card = prior_paths(feature_prior)
        if tensors.is_file() and card.is_file():
            return None
        return f"the feature prior {card} does not exist."
    if network in list_zoo():
        tensors, card = prior_paths(zoo_prior_base(network))
        if tensors.is_file() and card.is_file():
            return None
    return (f"layer-wise inversion of a {depth}-layer network needs a learned feature prior: "
            "create one from clean sample inputs with `lbi feature-prior NETWORK --samples "
            "FILE --out PRIOR` and choose it, or use method joint.")
