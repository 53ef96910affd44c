"""The discrepancy rule's target and the search's first alpha: how far the residual should
fall (tau times the expected noise norm, ``tau_for``, ``expected_noise_norm``) and where the
search starts (``first_guess``). The rule itself and its calibration story are ``whole``'s
module docstring.
"""

from __future__ import annotations

import math

import torch

from lbi_engine.errors import InputError
from lbi_engine.protocols import Problem
from lbi_engine.settings.solver import ALPHA_START

#: The range of alpha.
ALPHA_MIN = 1e-4
ALPHA_MAX = 1e3
#: Factor on the expected noise norm, tau(rho) = TAU + TAU_SLOPE log10(rho / RHO_KNEE) clipped
#: to [TAU_MIN, TAU], rho = delta / ||y_delta|| the relative noise of the code: below 1
#: because a good estimate fits part of the noise, and more of it the smaller the noise
#: (``whole``'s module docstring); fitted on training digits of both MNIST autoencoders.
TAU = 0.85
TAU_MIN = 0.6
TAU_SLOPE = 0.2
RHO_KNEE = 0.12
#: first_guess's factor. alpha * R(x_bp) / (target * ||y_delta||) at the residual-matching
#: alpha is 0.07-0.20 on mnist-cnn-ae and 0.23-0.33 on mnist-perceptron-ae (6 training digits
#: each, noise std 0.01-0.33, benchmarks/calibrate_alpha.py). A guess above the crossing
#: costs fewer steps than one below (the cold first solve is cheaper at a larger alpha, and
#: the warm one after it continues downwards): by ``benchmarks.studies.alpha_search_steps`` 0.15 /
#: 0.22 / 0.3 took 689 / 630 / 674 steps on the CNN and 629 / 614 / 478 on the perceptron
#: (std 0.05 + 0.01, means over 6 training digits); 0.22, best on the default network.
GUESS = 0.22
#: first_guess's factor for a prior with a box (both bounds finite, e.g. "tv+box"): the box
#: keeps the residual from falling as far, so its crossing lies at 2-2.5x smaller alpha
#: (validation digits, benchmarks/RESULTS.md "TV + box") and GUESS starts the search too far
#: above it. ``benchmarks.studies.alpha_search_steps --regulariser tv+box --stds 0.01,0.05,0.1
#: --digits 3,70,140,210,280,350,420,490,560,630,700,770,840,910 --guess G`` (training
#: digits): G = 0.22 / 0.1 took 832 / 580, 261 / 281 and 219 / 203 mean steps at std 0.01 /
#: 0.05 / 0.1 (19 % fewer in all), mean PSNR 31.48 / 31.48, 26.90 / 26.87, 24.66 / 24.67 dB.
GUESS_BOX = 0.1
#: The discrepancy target's factor for a prior with a box: a box keeps the iterate from fitting
#: the part of the noise that leaves [lo, hi], so at the same alpha its residual is larger than
#: TV's, and the plain target sent it to a 1.6-3x smaller alpha, where a solve takes more
#: steps and the PSNR was lower. With TV's alpha the box's residual was 1.17 / 1.085 / 1.068x
#: TV's target and its PSNR +0.50 / +0.16 / +0.01 dB above the box at its own discrepancy
#: alpha (training digits 3, 70, ..., 490 of mnist-cnn-ae, std 0.01 / 0.05 / 0.1; the script
#: is in the commit that set it). 1.1: the middle of that range, below the smallest noise's.
TAU_BOX = 1.1


def tau_for(problem: Problem, delta: float) -> float:
    """tau(rho) (``TAU``), rho = delta / ||y_delta|| of sample 0; TAU when y_delta is 0."""
    y_norm = float(torch.linalg.vector_norm(problem.y_delta[:1].double()))
    if not (y_norm > 0 and delta > 0 and math.isfinite(delta)):
        return TAU
    tau = TAU + TAU_SLOPE * math.log10((delta / y_norm) / RHO_KNEE)
    return min(max(tau, TAU_MIN), TAU)


def expected_noise_norm(problem: Problem, std: float) -> float:
    """E||y_delta - y|| for Gaussian noise of per-entry ``std`` projected into dom Psi_L,
    from y_delta alone (sample 0): std sqrt(m) without clipping; for a ReLU-type last layer
    the clipped-noise formula (MATH.md §6) with y_delta standing in for the clean y."""
    from lbi_engine.noise import expected_clipped_residual

    y = problem.y_delta[:1]
    last = problem.network.layers[-1].activation
    lower = getattr(last, "lower", -math.inf)
    if lower == 0.0 and math.isinf(getattr(last, "upper", math.inf)):
        return float(expected_clipped_residual(y.clamp_min(0.0).double(), std)[0].sqrt())
    return std * math.sqrt(y[0].numel())


def first_guess(problem: Problem, target: float) -> float:
    """The discrepancy search's first alpha: ``GUESS * target * ||y_delta|| / R(x_bp)``, with
    x_bp the back-projection start (``joint.start.backprojection_start``) and R the prior
    (``GUESS_BOX`` for a prior with a box).

    Why alpha proportional to the noise norm: for a one-homogeneous prior such as TV,
    alpha ~ delta is the a-priori choice under which the Bregman distance to the truth
    converges at the rate delta (Burger & Osher 2004); the residual-matching alpha measured
    on both MNIST autoencoders follows it (training digits, noise std 0.01-0.2: alpha / delta
    constant within a factor of 2 per network). The factor ||y|| / R(x_bp) carries the units
    of alpha (code^2 over prior), so that a network or a prior of another scale starts at a
    comparable place. ``ALPHA_START`` when R(x_bp) is not a positive finite number."""
    from lbi_engine.solvers.joint.start import backprojection_start

    try:
        with torch.no_grad():
            x_bp = backprojection_start(problem)[:1]
            r_value = float(problem.reg.value(x_bp)[0])
            y_norm = float(torch.linalg.vector_norm(problem.y_delta[:1].double()))
    except (RuntimeError, ValueError, InputError):  # e.g. a prior that rejects the start's shape
        return ALPHA_START
    if not (math.isfinite(r_value) and r_value > 0):
        return ALPHA_START
    factor = GUESS_BOX if _boxed(problem) else GUESS
    guess = factor * max(target, 0.0) * y_norm / r_value  # a vanishing target: ALPHA_MIN
    return min(max(guess, ALPHA_MIN), ALPHA_MAX) if math.isfinite(guess) else ALPHA_START


def _boxed(problem: Problem) -> bool:
    """Whether the prior has a box (both bounds finite, e.g. "tv+box")."""
    inner = getattr(problem.reg, "inner", problem.reg)
    return math.isfinite(float(getattr(inner, "lo", -math.inf))) and \
        math.isfinite(float(getattr(inner, "hi", math.inf)))
