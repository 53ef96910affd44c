"""How the zoo's networks are made: fixed, CPU-friendly recipes (``lbi train NAME``).

Every number the paper leaves open (MATH.md §10, A8/A9/A14/A17) is fixed here and copied into
the model card, together with the measured result (train/val MSE, training time). The bundled
``resources/models/*`` were produced by :func:`train` with the defaults below, on 2 CPU threads.

Training uses plain torch (no lifting); the data are the bundled MNIST subset
(:func:`lbi_engine.data.load_mnist`, 4000 train / 1000 val). MSE is the mean squared error per
pixel in display space [0, 1].
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lbi_engine.errors import InputError

__all__ = ["Recipe", "RECIPES", "train", "evaluate_mse"]

ProgressCallback = Callable[[int, int, float], None]  # (epoch done, epochs, mean batch loss)


def _lin(i: int, o: int) -> dict[str, Any]:
    return {"type": "Linear", "in_features": i, "out_features": o, "bias": True}


def _conv(kind: str, i: int, o: int) -> dict[str, Any]:
    return {"type": kind, "in_channels": i, "out_channels": o, "kernel_size": [4, 4],
            "stride": [2, 2], "padding": [1, 1]}


def _conv3(i: int, o: int) -> dict[str, Any]:
    """3x3 convolution that keeps the map size (a residual block's body)."""
    return {"type": "Conv2d", "in_channels": i, "out_channels": o, "kernel_size": [3, 3],
            "stride": [1, 1], "padding": [1, 1]}


_RELU = {"type": "ReLU"}
#: The colour networks' code (a linear map of the 64x8x8 features to 256 values) and decoder.
_NATURAL_CODEC = [{"type": "Flatten", "start_dim": 1, "end_dim": -1}, _lin(4096, 256),
                  _lin(256, 4096), {"type": "Unflatten", "dim": 1,
                                    "unflattened_size": [64, 8, 8]},
                  _conv("ConvTranspose2d", 64, 32), _RELU, _conv("ConvTranspose2d", 32, 3)]
_NATURAL_SPLIT = ("Trained on the 6000 training patches of five photographs; validated on 600 "
                  "patches of two other photographs (astronaut, chelsea): the split is by "
                  "photograph (resources/datasets/PROVENANCE.md).")


@dataclass(frozen=True)
class Recipe:
    """One zoo network: architecture, data handling and optimiser settings."""

    name: str
    description: str
    reference: str
    layers: list[dict[str, Any]]
    encoder_layers: int
    input_shape: tuple[int, ...]
    centred: bool = False  # subtract the scalar train-split mean (MATH.md §9.2, A9)
    seeded_only: bool = False  # weights = default init after torch.manual_seed(seed); no training
    epochs: int = 0
    lr: float = 0.0
    momentum: float = 0.0
    batch_size: int = 0
    seed: int = 0
    last_bias: float | None = None  # initial bias of the last layer (keeps a final ReLU alive)
    dataset: str = "mnist"  # bundled training data: "mnist" or "natural" (colour patches)
    optimiser: str = "sgd"  # "sgd" (with ``momentum``) or "adam"
    notes: list[str] = field(default_factory=list)


RECIPES: dict[str, Recipe] = {r.name: r for r in [
    Recipe(
        name="circle-perceptron",
        description="Random ReLU perceptron R^4096 -> R^512 of the paper's circle experiment",
        reference="MATH.md §9.1 (A17)",
        layers=[{"type": "Flatten", "start_dim": 1, "end_dim": -1}, _lin(4096, 512), _RELU],
        encoder_layers=3, input_shape=(1, 64, 64), seeded_only=True, seed=0,
        notes=["W, b ~ PyTorch default nn.Linear init U(-1/64, 1/64): torch.manual_seed(0) then "
               "nn.Linear(4096, 512). Regenerated at load time (8 MB not committed) and checked "
               "against weights.tensor_sha256."]),
    Recipe(
        name="mnist-perceptron-ae",
        description="MNIST autoencoder: encoder ReLU(W1 x + b1), W1 100x784; linear decoder",
        reference="MATH.md §9.2 (T7, A8, A9)",
        layers=[{"type": "Flatten", "start_dim": 1, "end_dim": -1}, _lin(784, 100), _RELU,
                _lin(100, 784), {"type": "Unflatten", "dim": 1, "unflattened_size": [1, 28, 28]}],
        encoder_layers=3, input_shape=(1, 28, 28), centred=True,
        epochs=200, lr=3.0, momentum=0.0, batch_size=32, seed=0,
        notes=["Plain SGD (no momentum, no schedule). The loss is the mean over pixels, so "
               "lr 3.0 equals lr 3.0/784 = 0.0038 on the per-image sum of squares.",
               "Inputs are centred: x - offset, offset = mean pixel of the train split."]),
    Recipe(
        name="mnist-cnn-ae",
        description="MNIST CNN autoencoder (paper's 'six layers'): 3 lifted encoder layers "
                    "conv-ReLU, conv-ReLU, linear code of size 300",
        reference="MATH.md §9.3 (A11-A14)",
        layers=[_conv("Conv2d", 1, 8), _RELU, _conv("Conv2d", 8, 16), _RELU,
                {"type": "Flatten", "start_dim": 1, "end_dim": -1}, _lin(784, 300),
                _lin(300, 784), {"type": "Unflatten", "dim": 1, "unflattened_size": [16, 7, 7]},
                _conv("ConvTranspose2d", 16, 8), _RELU, _conv("ConvTranspose2d", 8, 1), _RELU],
        encoder_layers=6, input_shape=(1, 28, 28), centred=False,
        epochs=60, lr=0.05, momentum=0.9, batch_size=32, seed=0, last_bias=0.1,
        notes=["Uncentred [0, 1] inputs (the decoder ends in ReLU).",
               "The last ConvTranspose2d bias starts at 0.1: with PyTorch's default init and "
               "seed 0 the final ReLU is zero everywhere and never trains."]),
    Recipe(
        name="natural-cnn-ae",
        description="Colour-patch CNN autoencoder: 3 lifted encoder layers conv-ReLU, "
                    "conv-ReLU, linear code of size 256, on 32x32 RGB photograph patches",
        reference="scripts/make_natural_npz.py (data); same shape as mnist-cnn-ae, MATH.md §9.3",
        layers=[_conv("Conv2d", 3, 32), _RELU, _conv("Conv2d", 32, 64), _RELU, *_NATURAL_CODEC],
        encoder_layers=6, input_shape=(3, 32, 32), centred=False, dataset="natural",
        optimiser="adam", epochs=40, lr=1e-3, batch_size=64, seed=0,
        notes=["Uncentred [0, 1] RGB inputs; linear (identity) output layer.",
               _NATURAL_SPLIT]),
    Recipe(
        name="natural-res-ae",
        description="Residual colour-patch autoencoder: conv-ReLU, a residual block "
                    "ReLU(x + conv(ReLU(conv x))), conv-ReLU, linear code of size 256, on "
                    "32x32 RGB photograph patches",
        reference="scripts/make_natural_npz.py (data); graph lifting MATH.md §5.6",
        layers=[_conv("Conv2d", 3, 32), _RELU,
                {"type": "Residual", "body": [_conv3(32, 32), _RELU, _conv3(32, 32)],
                 "shortcut": []}, _RELU,
                _conv("Conv2d", 32, 64), _RELU, *_NATURAL_CODEC],
        encoder_layers=8, input_shape=(3, 32, 32), centred=False, dataset="natural",
        optimiser="adam", epochs=60, lr=1e-3, batch_size=64, seed=0,
        notes=["Uncentred [0, 1] RGB inputs; linear (identity) output layer.",
               "The residual block's shortcut is the identity; the ReLU after the sum lifts "
               "to one layer with two inputs (the block's inner state and its input).",
               _NATURAL_SPLIT,
               "60 epochs on one thread (lbi train --threads 1) so that training stays near "
               "15 minutes on the shared 2-core build machine; training_time_s is the "
               "measured total."]),
]}


def evaluate_mse(module: Any, images01: Any, offset: float = 0.0, batch: int = 1000) -> float:
    """Mean squared error per pixel of ``module`` as an autoencoder, in display space.

    ``module`` sees ``images01 - offset`` and its output gets ``offset`` added back.
    Accumulated in float64 so the value does not depend on the batch split.
    """
    import torch

    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, images01.shape[0], batch):
            x = images01[i:i + batch]
            rec = module(x - offset) + offset
            total += float(((rec.double() - x.double()) ** 2).sum())
            count += x.numel()
    return total / count


def _host(threads: int) -> dict[str, Any]:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"device": "cpu", "threads": threads, "cpu_count": os.cpu_count(),
            "machine": platform.machine(), "python": platform.python_version(),
            "load_average_1min_at_start": None if load is None else round(load, 2)}


def _base_card(recipe: Recipe) -> dict[str, Any]:
    import torch

    from lbi_engine.models.cards import format_version_for

    return {
        "format_version": format_version_for(recipe.layers), "name": recipe.name,
        "description": recipe.description, "reference": recipe.reference,
        "architecture": {"layers": recipe.layers, "encoder_layers": recipe.encoder_layers},
        "input_shape": list(recipe.input_shape),
        "torch_version": torch.__version__.split("+")[0],
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "notes": list(recipe.notes),
    }


def train(name: str, out_dir: str | os.PathLike[str], epochs: int | None = None,
          seed: int | None = None, progress: ProgressCallback | None = None,
          threads: int = 2) -> dict[str, Any]:
    """Train (or, for seeded networks, generate) zoo network ``name`` into ``out_dir``.

    Writes ``NAME.safetensors`` (not for seeded networks) and ``NAME.json`` atomically and
    returns the card. ``epochs``/``seed`` override the recipe (the card records what was
    used). ``progress(epoch, epochs, loss)`` is called after every epoch; an exception raised
    there aborts training without touching existing files.
    """
    import torch

    from lbi_engine.io import atomic_write_bytes, atomic_write_text
    from lbi_engine.models.zoo import build_module, tensor_sha256

    if name not in RECIPES:
        raise InputError(f"no training recipe for {name!r}; choose one of {sorted(RECIPES)}")
    recipe = RECIPES[name]
    epochs = recipe.epochs if epochs is None else int(epochs)
    seed = recipe.seed if seed is None else int(seed)
    if epochs < 0 or (epochs == 0 and not recipe.seeded_only):
        raise InputError(f"epochs={epochs} must be a positive number of passes over the data")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    card = _base_card(recipe)
    # the command that repeats this run: every setting that differs from the recipe's
    command = " ".join([f"lbi train {name}",
                        *([f"--epochs {epochs}"] if epochs != recipe.epochs else []),
                        *([f"--seed {seed}"] if seed != recipe.seed else []),
                        *([f"--threads {threads}"] if threads != 2 else [])])
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        host = _host(threads)
        t0 = time.perf_counter()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = build_module(recipe.layers, where=f"recipe {name}")
        if recipe.seeded_only:
            card["weights"] = {"source": "seeded-init", "seed": seed,
                               "tensor_sha256": tensor_sha256(module.state_dict()),
                               "dtype": "float32", "parameters": _count(module)}
            card["preprocessing"] = {"offset": 0.0, "scale": 1.0}
            card["generation"] = {"seconds": round(time.perf_counter() - t0, 3), "host": host,
                                  "command": command}
        else:
            card.update(_fit(recipe, module, epochs, seed, progress, host, t0))
            card["training"]["command"] = command
            data = _safetensors_bytes(module)
            atomic_write_bytes(out / f"{name}.safetensors", data)
            card["weights"] = {"source": "file", "file": f"{name}.safetensors",
                               "sha256": hashlib.sha256(data).hexdigest(),
                               "tensor_sha256": tensor_sha256(module.state_dict()),
                               "dtype": "float32", "parameters": _count(module)}
    finally:
        torch.set_num_threads(old_threads)
    atomic_write_text(out / f"{name}.json", json.dumps(card, indent=2) + "\n")
    return card


def _count(module: Any) -> int:
    return int(sum(p.numel() for p in module.parameters()))


def _safetensors_bytes(module: Any) -> bytes:
    from safetensors.torch import save

    return save({k: v.detach().contiguous() for k, v in module.state_dict().items()})


def _training_data(dataset: str) -> tuple[Any, Any, dict[str, str]]:
    """Train and validation images (tensors) of a bundled dataset, and how the card names them."""
    import torch

    from lbi_engine.data import MNIST_FILE, NATURAL_FILE, load_mnist, natural_split

    if dataset == "natural":
        x_train, x_val = (torch.from_numpy(natural_split(s)) for s in ("train", "val"))
        return x_train, x_val, {
            "data": f"bundled colour patches resources/datasets/{NATURAL_FILE}",
            "train_split": f"train ({x_train.shape[0]} 32x32 patches of 5 photographs)",
            "validation_split": f"val ({x_val.shape[0]} patches of astronaut and chelsea)"}
    x_train, _ = load_mnist("train")
    x_val, _ = load_mnist("val")
    return x_train, x_val, {
        "data": f"bundled MNIST subset resources/datasets/{MNIST_FILE}",
        "train_split": f"train ({x_train.shape[0]} images, 400 per class)",
        "validation_split": f"val ({x_val.shape[0]} images, 100 per class)"}


def _fit(recipe: Recipe, module: Any, epochs: int, seed: int,
         progress: ProgressCallback | None, host: dict[str, Any], t0: float) -> dict[str, Any]:
    """SGD on the MSE; returns the card's preprocessing and training sections."""
    import torch

    x_train, x_val, data_info = _training_data(recipe.dataset)
    offset = float(x_train.double().mean()) if recipe.centred else 0.0
    if recipe.last_bias is not None:
        last = [m for m in module if getattr(m, "bias", None) is not None][-1]
        torch.nn.init.constant_(last.bias, recipe.last_bias)
    opt: torch.optim.Optimizer
    if recipe.optimiser == "adam":
        opt = torch.optim.Adam(module.parameters(), lr=recipe.lr)
    else:
        opt = torch.optim.SGD(module.parameters(), lr=recipe.lr, momentum=recipe.momentum)
    gen = torch.Generator().manual_seed(seed)  # own stream: the shuffles depend only on seed
    inputs = x_train - offset
    module.train()
    for epoch in range(epochs):
        perm = torch.randperm(inputs.shape[0], generator=gen)
        total, batches = 0.0, 0
        for i in range(0, inputs.shape[0], recipe.batch_size):
            xb = inputs[perm[i:i + recipe.batch_size]]
            loss = torch.mean((module(xb) - xb) ** 2)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total, batches = total + float(loss.detach()), batches + 1
        if progress is not None:
            progress(epoch + 1, epochs, total / batches)
    seconds = time.perf_counter() - t0
    module.eval().requires_grad_(False)
    return {
        "preprocessing": {"offset": offset, "scale": 1.0},
        "training": {
            **data_info,
            "loss": "MSE, mean over pixels and batch, in network input space",
            "optimiser": "Adam" if recipe.optimiser == "adam" else "SGD", "lr": recipe.lr,
            "momentum": recipe.momentum,
            "batch_size": recipe.batch_size, "epochs": epochs, "seed": seed,
            "shuffle": "torch.randperm with torch.Generator().manual_seed(seed) per epoch",
            "init": "PyTorch default after torch.manual_seed(seed)"
                    + (f"; last layer bias = {recipe.last_bias}" if recipe.last_bias else ""),
            "train_mse": evaluate_mse(module, x_train, offset),
            "val_mse": evaluate_mse(module, x_val, offset),
            "mse_space": "display space [0, 1], per pixel",
            "training_time_s": round(seconds, 1),
            "host": host,
        },
    }
