"""Noisy measurements and the noise level delta (MATH.md §6, §7).

Simulation: y = sigma_L(W_L x_{L-1} + b_L) for the ground truth, and

    y_delta = P_{dom Psi_L}(y + std * n),   n ~ N(0, I),

because the lifted Bregman loss is +inf outside dom Psi_L (MATH.md §1.2, fact 3). The paper's
noise level is delta^2 = B_{Psi_L}(y_delta, W_L x_{L-1}^dagger + b_L): the second argument is
the pre-activation, not y ([TYPO 5]).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from lbi_engine.errors import InputError
from lbi_engine.protocols import Network

#: Above this the "noise" swamps any network output; almost certainly a unit mistake.
MAX_STD = 1e6


@dataclass
class NoisyData:
    """A measurement and what is known about its noise; per-sample quantities are ``(B,)``.

    Attributes:
        y_delta: the measurement ``(B, *output_shape)``, inside dom Psi_L.
        y: the clean output sigma_L(f(x_true)) (None when only y_delta is known).
        noise: y_delta - y, i.e. the noise after projection onto dom Psi_L (None if unknown).
        noise_norm: ||y_delta - y|| per sample (the discrepancy principle's delta_res).
        delta_squared: B_{Psi_L}(y_delta, W_L x_{L-1}^dagger + b_L) per sample.
        delta: sqrt(delta_squared).
        std: the Gaussian standard deviation used or stated (None if unknown).
        seed: the seed of the CPU generator that drew n (None if a generator was passed or
            the data was measured); rerunning with it reproduces y_delta on any device.
    """

    y_delta: Tensor
    y: Tensor | None = None
    noise: Tensor | None = None
    noise_norm: Tensor | None = None
    delta_squared: Tensor | None = None
    delta: Tensor | None = None
    std: float | None = None
    seed: int | None = None

    @property
    def simulated(self) -> bool:
        """True when the clean output (hence the noise and delta) is known."""
        return self.y is not None


@dataclass
class SimulatedData(NoisyData):
    """:class:`NoisyData` simulated from a ground truth: :func:`make_noisy_data` fills the clean
    output, the noise and delta, so the type checker may treat them as tensors. (At run time
    the fields keep NoisyData's defaults; the annotations only narrow the types.)"""

    y: Tensor
    noise: Tensor
    noise_norm: Tensor
    delta_squared: Tensor
    delta: Tensor
    std: float


def validate_std(std: Any) -> float:
    """The noise standard deviation as a float in [0, MAX_STD]; InputError otherwise."""
    try:
        value = float(std)
    except (TypeError, ValueError, RuntimeError):
        raise InputError(
            f"noise std {std!r}: must be a number >= 0 (e.g. 0.005 or 0.1)."
        ) from None
    if math.isnan(value) or value < 0 or value > MAX_STD:
        raise InputError(
            f"noise std {std!r}: must be a finite number in [0, {MAX_STD:g}] (e.g. 0.005); "
            "it is the standard deviation of the Gaussian added to the network output."
        )
    return value


def _generator(
    seed: int | None, generator: torch.Generator | None
) -> tuple[torch.Generator, int | None]:
    if generator is not None:
        if seed is not None:
            raise InputError("make_noisy_data: give either seed or generator, not both.")
        return generator, None
    gen = torch.Generator(device="cpu")
    if seed is None:
        return gen, int(gen.seed())  # a fresh random seed, recorded so the run can be redone
    try:
        seed = int(seed)
    except (TypeError, ValueError):
        raise InputError(f"seed {seed!r}: must be an integer (or None for a random one).") \
            from None
    if seed < 0:
        raise InputError(f"seed {seed}: must be >= 0.")
    gen.manual_seed(seed)
    return gen, seed


def draw_standard_normal(
    shape: tuple[int, ...], generator: torch.Generator, like: Tensor
) -> Tensor:
    """n ~ N(0, I) of ``shape`` with ``like``'s dtype and device.

    Always drawn in float64 on the generator's device (CPU unless the caller passed another
    generator) and then moved: the same seed gives the same noise on CPU and GPU and, up to
    rounding, in float32 and float64.
    """
    n = torch.randn(shape, generator=generator, dtype=torch.float64, device=generator.device)
    return n.to(device=like.device, dtype=like.dtype)


def make_noisy_data(
    network: Network,
    x_true: Tensor,
    std: float,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    sample_seeds: Sequence[int] | None = None,
) -> SimulatedData:
    """Simulate y_delta = P_dom(y + std n) from the ground truth and compute delta (MATH §7).

    ``network`` is a LiftedNetwork (``layers``, ``forward_states``, ``pre_activation``).
    ``seed=None`` and no generator draws a random seed and records it in the result.
    ``sample_seeds``: one seed per sample instead, sample i's noise drawn as ``seed=
    sample_seeds[i]`` draws it for that sample alone (the result records the first).
    """
    s = validate_std(std)
    if not isinstance(x_true, Tensor):
        raise InputError("x_true: expected a torch tensor of shape (B, *input_shape).")
    if sample_seeds is not None and len(sample_seeds) != x_true.shape[0]:
        raise InputError(f"{x_true.shape[0]} samples but {len(sample_seeds)} seeds; give one "
                         "seed per sample.")
    gen, used_seed = _generator(sample_seeds[0] if sample_seeds else seed, generator)
    layers = list(network.layers)
    last = layers[-1].activation
    with torch.no_grad():
        states = list(network.forward_states(x_true))
        x_prev = states[-2] if len(layers) > 1 else x_true
        z = network.pre_activation(len(layers) - 1, x_prev) if getattr(
            network, "is_chain", True) else network.pre_activation_of(  # a graph (§5.6)
            len(layers) - 1, [x_true, *states])
        y = states[-1]
        if sample_seeds is None:
            n = draw_standard_normal(tuple(y.shape), gen, y)
        else:
            one = (1, *y.shape[1:])
            n = torch.cat([draw_standard_normal(one, _generator(v, None)[0], y)
                           for v in sample_seeds])
        y_delta = last.project(y + s * n)
        noise = y_delta - y
        # B >= 0 exactly; clamp the round-off (~1e-16 below 0) so that delta is never NaN.
        delta_sq = last.bregman(y_delta, z).clamp_min(0.0)
    return SimulatedData(
        y_delta=y_delta,
        y=y,
        noise=noise,
        noise_norm=noise.flatten(1).norm(dim=1),
        delta_squared=delta_sq,
        delta=delta_sq.sqrt(),
        std=s,
        seed=used_seed,
    )


def noise_from_measurement(
    y_delta: Tensor, activation: Any | None = None, std: float | None = None
) -> NoisyData:
    """Wrap a measured y_delta (no ground truth, so y, the noise and delta are None).

    With ``activation`` (the last layer's), y_delta is checked to lie in dom Psi_L, where
    the Bregman loss is finite; ``std``, if the instrument's noise level is known, is kept
    for the discrepancy principle (see :func:`expected_clipped_residual`).
    """
    if not isinstance(y_delta, Tensor) or y_delta.ndim < 1:
        raise InputError("y_delta: expected a torch tensor of shape (B, *output_shape).")
    if not torch.isfinite(y_delta).all():
        raise InputError("y_delta contains NaN or Inf values; remove or replace them.")
    if activation is not None and not bool(activation.in_domain(y_delta).all()):
        name = getattr(activation, "name", "the last activation")
        lo, hi = getattr(activation, "lower", -math.inf), getattr(activation, "upper", math.inf)
        raise InputError(
            f"y_delta has entries outside the domain [{lo:g}, {hi:g}] of {name}, where the "
            "lifted Bregman loss is infinite; project the measurement first (e.g. clip "
            "negative values to 0 for ReLU) or use a network whose last layer allows them."
        )
    return NoisyData(y_delta=y_delta, std=None if std is None else validate_std(std))


def expected_clipped_residual(y: Tensor, std: float) -> Tensor:
    """E||max(y + std n, 0) - y||^2 per sample for clean y >= 0 (MATH.md §6), ``(B,)``.

    With a = y / std: std^2 * sum_i [Phi(a_i) - a_i phi(a_i) + a_i^2 Phi(-a_i)] (noise kept
    where y + std n > 0, residual -y where it is clipped). An entry contributes std^2/2 at
    y_i = 0 and ~std^2 for y_i >> std. Its square root is the discrepancy principle's
    delta_res when only the noise std is known.
    """
    s = validate_std(std)
    if not isinstance(y, Tensor) or y.ndim < 1:
        raise InputError("y: expected a torch tensor (B, *output_shape) of clean outputs.")
    if bool((y < 0).any()):
        raise InputError(
            "y has negative entries; the clipping model max(y + std n, 0) assumes clean "
            "outputs in the ReLU domain y >= 0."
        )
    if s == 0.0:
        return torch.zeros(y.shape[0], dtype=y.dtype, device=y.device)
    # For a -> inf the bracket -> 1 (its last two terms vanish faster than any power); a
    # tiny std (1e-200) makes a = inf there and inf * 0 = NaN, so large a takes the limit.
    a = (y / s).clamp(max=_LARGE_A)
    pdf = torch.exp(-0.5 * a * a) / math.sqrt(2.0 * math.pi)
    per_entry = torch.special.ndtr(a) - a * pdf + a * a * torch.special.ndtr(-a)
    per_entry = torch.where(a >= _LARGE_A, torch.ones_like(per_entry), per_entry)
    return s * s * per_entry.flatten(1).sum(dim=1)


#: Beyond 40 standard deviations the bracket of expected_clipped_residual is 1 to within 1e-300.
_LARGE_A = 40.0
