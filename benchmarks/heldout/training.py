"""Trained weights: each architecture trained as the encoder of a small denoising
autoencoder on patches of the CALIBRATION photographs only.

The decoder (conv 3x3, ReLU, bilinear upsampling to the input size, conv 3x3) maps the
encoder's output back to the clean patch from a noisy one; Adam, ``STEPS`` steps of
``BATCH`` random 64 x 64 patches. The weights are cached as safetensors (no pickling) in
``CACHE``, which git ignores, under a key of this module's and ``nets``' source, so a
change to either retrains.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

from benchmarks.heldout import nets
from benchmarks.heldout.design import PHOTOS, SIDE, photograph

CACHE = Path(__file__).resolve().parent / ".cache"
STEPS, BATCH, LR, NOISE = 200, 8, 1e-3, 0.05


def _key(name: str) -> str:
    source = b"".join(Path(m.__file__).read_bytes() for m in (nets, _self()))
    return hashlib.sha256(source + name.encode()).hexdigest()[:12]


def _self():  # this module, for its own source in the cache key
    import sys

    return sys.modules[__name__]


def _regions() -> list[np.ndarray]:
    """The calibration photographs' 256-pixel regions at full resolution and halved."""
    regions = [photograph(n, 256).astype(np.float32) / 255 for n in PHOTOS["calibrate"]]
    return regions + [photograph(n, 128).astype(np.float32) / 255 for n in PHOTOS["calibrate"]]


def _patches(regions: list[np.ndarray], rng: np.random.Generator, count: int) -> torch.Tensor:
    out = np.empty((count, 3, SIDE, SIDE), np.float32)
    for i in range(count):
        r = regions[rng.integers(len(regions))]
        top, left = rng.integers(r.shape[0] - SIDE + 1), rng.integers(r.shape[1] - SIDE + 1)
        out[i] = r[top:top + SIDE, left:left + SIDE].transpose(2, 0, 1)
    return torch.from_numpy(out)


def train(name: str, steps: int = STEPS) -> nn.Module:
    """The architecture (seed 0) trained as a denoising autoencoder's encoder."""
    encoder = nets.build(name, 0).train()
    with torch.no_grad():
        code = encoder(torch.zeros(2, 3, SIDE, SIDE))
    channels = code.shape[1]
    decoder = nn.Sequential(nn.Conv2d(channels, 32, 3, padding=1), nn.ReLU(),
                            nn.Upsample(size=(SIDE, SIDE), mode="bilinear"),
                            nn.Conv2d(32, 3, 3, padding=1))
    params = [*encoder.parameters(), *decoder.parameters()]
    opt = torch.optim.Adam(params, lr=LR)
    rng = np.random.default_rng(0)
    gen = torch.Generator().manual_seed(0)
    regions = _regions()
    for _ in range(steps):
        clean = _patches(regions, rng, BATCH)
        noisy = clean + NOISE * torch.randn(clean.shape, generator=gen)
        loss = (decoder(encoder(noisy)) - clean).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return encoder.eval()


def trained(name: str) -> nn.Module:
    """The trained weights from the cache, trained and cached where absent."""
    from safetensors.torch import load_file, save_file

    path = CACHE / f"{name}-{_key(name)}.safetensors"
    module = nets.build(name, 0)
    if path.exists():
        module.load_state_dict(load_file(str(path)))
        return module.eval()
    module = train(name)
    CACHE.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file({k: v.contiguous() for k, v in module.state_dict().items()}, str(tmp))
    os.replace(tmp, path)
    return module
