"""The benchmark problems: the paper's circle, the MNIST perceptron and the CNN autoencoder.

Networks come from the bundled zoo (``resources/models``), data from the bundled datasets, so
every run measures the same problems. ``quick`` variants of the circle shrink it (32x32 disc,
W 128x1024, same construction) so that ``python -m benchmarks --quick`` takes a minute or two;
their figures are labelled and are not comparable with the full run's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

CIRCLE_ALPHA = 1.5e-2  # MATH.md §9.1
CIRCLE_NOISE = 0.005
MNIST_ALPHA_VAL = 5e-2  # MATH.md §9.2: validation images
MNIST_ALPHA_TRAIN = 5e-3  # training images
CNN_ALPHA = 9e-3  # MATH.md §9.3
CNN_NOISE = 0.05  # the app's default noise level


@dataclass
class Case:
    """A problem plus what the benchmarks need to know about it."""

    name: str
    problem: Any  # InversionProblem
    method: str  # the method the paper uses for it
    floor: Any  # callable(): one forward + one adjoint of every affine layer, same batch

    @property
    def batch(self) -> int:
        return self.problem.batch


_BUNDLES: dict[str, Any] = {}


def zoo(name: str) -> Any:
    """A zoo bundle, loaded once per process: its networks cache their operator norms, so
    problems built from the same bundle do not recompute them (as in the app)."""
    if name not in _BUNDLES:
        from lbi_engine.models.zoo import load_zoo

        _BUNDLES[name] = load_zoo(name)
    return _BUNDLES[name]


def _network(name: str, dtype: torch.dtype) -> Any:
    key = f"{name}:{dtype}"
    if key not in _BUNDLES:
        _BUNDLES[key] = zoo(name).encoder.to(dtype=dtype)
    return _BUNDLES[key]


def _problem(network: Any, x_true: Tensor, alpha: float, noise: float, seed: int,
             image_shape: tuple[int, ...] | None = None) -> Any:
    from lbi_engine.noise import make_noisy_data
    from lbi_engine.problem import InversionProblem
    from lbi_engine.regularisers import make_regulariser

    y_delta = make_noisy_data(network, x_true, noise, seed=seed).y_delta if noise > 0 else \
        network.forward(x_true)
    return InversionProblem(network, y_delta, make_regulariser("tv"), alpha, x_true=x_true,
                            image_shape=image_shape)


def floor_of(network: Any, batch: int) -> Any:
    """One forward (W x) and one adjoint (W^T r) of every affine layer, B columns each:
    the work no implementation of these methods can avoid per iteration."""
    dtype, device = network.dtype, network.device
    maps = [layer.affine for layer in network.layers]
    ins = [torch.randn(batch, *m.in_shape, dtype=dtype, device=device) for m in maps]
    outs = [torch.randn(batch, *m.out_shape, dtype=dtype, device=device) for m in maps]

    def run() -> None:
        for m, x, r in zip(maps, ins, outs, strict=True):
            m.linear(x)
            m.adjoint(r)

    return run


def circle(batch: int = 1, dtype: torch.dtype = torch.float32, quick: bool = False,
           seed: int = 0) -> Case:
    """The paper's disc through the random ReLU perceptron, y = max(W x + b + 0.005 n, 0).

    A batch holds the same disc with B independent noise draws (seed, seed+1, ...).
    """
    from lbi_engine.data.cartoons import cartoon
    from lbi_engine.models.network import LiftedNetwork

    if quick:
        side, rows = 32, 128
        gen = torch.Generator().manual_seed(0)
        module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(side * side, rows),
                                     torch.nn.ReLU())
        with torch.no_grad():  # PyTorch's default init U(+-1/sqrt(n)), seeded
            bound = 1.0 / math.sqrt(side * side)
            for p in module[1].parameters():
                p.copy_(torch.rand(p.shape, generator=gen) * 2 * bound - bound)
        network = LiftedNetwork.from_module(module, (1, side, side), name="circle-quick")
        network = network.to(dtype=dtype)
    else:
        side = 64
        network = _network("circle-perceptron", dtype)
    disc = torch.from_numpy(cartoon("disc", 0, side)).to(dtype)
    x_true = disc.reshape(1, 1, side, side).expand(batch, -1, -1, -1).contiguous()
    problem = _problem(network, x_true, CIRCLE_ALPHA, CIRCLE_NOISE, seed)
    return Case("circle-quick" if quick else "circle", problem, "pdhg", floor_of(network, batch))


def mnist_perceptron(batch: int = 1, dtype: torch.dtype = torch.float32, split: str = "val",
                     start: int = 0) -> Case:
    """The zoo's perceptron autoencoder, noise-free codes of ``batch`` digits (MATH.md §9.2:
    alpha 5e-2 for validation, 5e-3 for training images)."""
    from lbi_engine.data import load_mnist

    bundle = zoo("mnist-perceptron-ae")
    network = _network("mnist-perceptron-ae", dtype)
    images, _ = load_mnist(split)
    x01 = images[start:start + batch].to(dtype)
    x_true = bundle.preprocessing.apply(x01)
    alpha = MNIST_ALPHA_VAL if split == "val" else MNIST_ALPHA_TRAIN
    problem = _problem(network, x_true, alpha, 0.0, 0)
    return Case(f"mnist-perceptron ({split})", problem, "pdhg", floor_of(network, batch))


def mnist_cnn(batch: int = 1, dtype: torch.dtype = torch.float32, start: int = 0) -> Case:
    """The zoo's CNN autoencoder (3 lifted layers), noisy codes, joint method (§9.3)."""
    from lbi_engine.data import load_mnist

    bundle = zoo("mnist-cnn-ae")
    network = _network("mnist-cnn-ae", dtype)
    images, _ = load_mnist("val")
    x_true = bundle.preprocessing.apply(images[start:start + batch].to(dtype))
    problem = _problem(network, x_true, CNN_ALPHA, CNN_NOISE, 0)
    return Case("mnist-cnn", problem, "joint", floor_of(network, batch))


def as_float64(problem: Any) -> Any:
    """The same problem in float64 (for exact objective values and reference optima)."""
    from lbi_engine.problem import InversionProblem

    return InversionProblem(
        problem.network.to(dtype=torch.float64), problem.y_delta.double(),
        problem.regulariser, problem.alpha,
        x_true=None if problem.x_true is None else problem.x_true.double(),
        image_shape=problem.image_shape,
    )


def objective64(problem64: Any, x: Tensor) -> Tensor:
    """Per-sample objective of x evaluated in float64 (B,)."""
    with torch.no_grad():
        return problem64.objective_parts(x.double())["total"]
