"""Whether a finished run's result can be trusted, in words with the next step to take.

Why: a run that "stopped: tolerance" can still have drawn a flat mean-colour square, fitted
the data far worse than the noise explains, run into the iteration cap, or kept an α whose
residual missed the discrepancy target. The window and ``lbi invert`` must say so instead of
presenting it as a success. Pure numpy over what result.json holds (its metrics) and the
two images, so the CLI, the GUI and the sweeps share one rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lbi_engine.results.run_metrics import RunMetrics

__all__ = ["FLAT_RATIO", "FLAT_SPAN", "MISS_RATIO", "OVERFIT_RATIO", "PSNR_PASSED_DB", "Concern",
           "contrast_ratio", "finite_number", "judge"]

#: A result whose spatial standard deviation is below this fraction of the ground truth's is
#: "flat": at a quarter of the truth's contrast the picture is a blur of the mean colour.
FLAT_RATIO = 0.25
#: A residual ||N(x) − y^δ|| above this multiple of the noise's norm fits the data worse than
#: the noise explains (the discrepancy principle accepts about 1).
OVERFIT_RATIO = 2.0
#: The kept α's residual off the search's target by more than this factor (either way):
#: the search did not meet its target (it stops within 3 %).
MISS_RATIO = 1.10
#: A point of the α search this many dB better than the kept result is worth naming.
PSNR_PASSED_DB = 0.5
#: Without a ground truth (measured data), a result whose values span less than this share of
#: the display range is "flat": the picture is one colour to the eye.
FLAT_SPAN = 0.02


@dataclass(frozen=True)
class Concern:
    """One reason to doubt a result: ``kind`` (flat, over-regularised, iteration cap,
    α target missed, better α passed), ``text`` (what happened) and ``advice`` (what next)."""

    kind: str
    text: str
    advice: str

    @property
    def short(self) -> str:
        return self.kind

    def sentence(self) -> str:
        return f"{self.text}; {self.advice}"


def contrast_ratio(x: np.ndarray, truth: np.ndarray) -> float | None:
    """Mean over channels of std(x) / std(truth) over the image plane (None when the truth
    is constant or the shapes differ): 0 for a flat result, about 1 for a faithful one."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    if a.shape != b.shape or a.ndim < 2:
        return None
    a = a.reshape(-1, *a.shape[-2:]) if a.ndim > 2 else a[None]
    b = b.reshape(-1, *b.shape[-2:]) if b.ndim > 2 else b[None]
    sa, sb = a.std(axis=(1, 2)), b.std(axis=(1, 2))
    keep = sb > 1e-12
    if not keep.any() or not np.isfinite(sa).all():
        return None
    return float(np.mean(sa[keep] / sb[keep]))


def judge(metrics: RunMetrics, *, x: np.ndarray | None = None,
          truth: np.ndarray | None = None, stop_reason: str | None = None,
          max_iter: int | None = None, data_range: float | None = None) -> list[Concern]:
    """The concerns about one run (empty: nothing found to doubt). ``metrics``: the run's
    (alpha, alpha_path, alpha_target, discrepancy, noise_norm, psnr are read); ``x``
    and ``truth``: the displayed result and ground truth; without a truth, ``data_range``
    (the display range) judges flatness from ``x``'s span alone."""
    concerns: list[Concern] = []
    alpha = finite_number(metrics.alpha)
    alpha_text = f"α = {alpha:.3g}" if alpha is not None else "α"
    flat = _flatness(x, truth, data_range)
    if flat is not None:
        concerns.append(Concern(
            "flat", f"flat result: {flat} at {alpha_text}",
            "try a smaller α (a tenth), another method or regulariser"))
    residual = finite_number(metrics.discrepancy)
    noise = finite_number(metrics.noise_norm)
    floor = str(metrics.alpha_rule).endswith("floor")  # no smaller α fits closer
    if residual is not None and noise and residual > OVERFIT_RATIO * noise and not floor:
        concerns.append(Concern(
            "over-regularised", f"residual {residual:.3g} is {residual / noise:.1f}× the "
            f"noise's norm {noise:.3g} at {alpha_text}", "try a smaller α"))
    if stop_reason == "max_iterations":
        cap = f" ({max_iter})" if max_iter else ""
        concerns.append(Concern(
            "iteration cap", f"stopped by the iteration cap{cap} before the tolerance",
            "raise Max iterations, or Finish now if the curves have levelled off"))
    concerns.extend(_alpha_search(metrics, alpha, residual))
    return concerns


def _flatness(x: np.ndarray | None, truth: np.ndarray | None,
              data_range: float | None) -> str | None:
    """How the result is flat, in words, or None when it is not (or cannot be told)."""
    if x is None:
        return None
    ratio = contrast_ratio(x, truth) if truth is not None else None
    if ratio is not None:
        return f"{ratio:.0%} of the ground truth's contrast" if ratio < FLAT_RATIO else None
    values = np.asarray(x, dtype=np.float64)
    if truth is None and data_range and values.size and np.isfinite(values).all():
        span = float(values.max() - values.min())
        if span < FLAT_SPAN * data_range:
            return f"its values span {span:.3g} of a display range of {data_range:g}"
    return None


def _alpha_search(metrics: RunMetrics, alpha: float | None,
                  residual: float | None) -> list[Concern]:
    path = [p for p in (metrics.alpha_path or []) if isinstance(p, Mapping)]
    target = finite_number(metrics.alpha_target)
    found: list[Concern] = []
    if target and residual is not None and path:
        off = residual / target
        if off > MISS_RATIO and str(metrics.alpha_rule).endswith("floor"):
            found.append(Concern(
                "misfit above the noise", f"the misfit stopped falling at {off:.2g}x its "
                f"target {target:.3g} (the noise): no α fits the data closer",
                "the network keeps little of this input, or the code left its range; "
                "compare a few α by hand (the Runs table's α column shows the ones tried)"))
        elif off > MISS_RATIO or off < 1 / MISS_RATIO:
            side = "above" if off > 1 else "below"
            found.append(Concern(
                "α target missed", f"the α search kept a residual {abs(off - 1):.0%} {side} "
                f"its target {target:.3g} after {len(path)} trials",
                "type an α (the Runs table's α column shows the ones tried) or change the "
                "noise level"))
    psnr = finite_number(metrics.psnr)
    tried = [(p_psnr, finite_number(p.get("alpha"))) for p in path
             if (p_psnr := finite_number(p.get("psnr"))) is not None]
    if psnr is not None and tried:
        best, best_alpha = max(tried, key=lambda t: t[0])
        if best > psnr + PSNR_PASSED_DB and best_alpha is not None and best_alpha != alpha:
            found.append(Concern(
                "better α passed", f"the α search passed {best:.2f} dB at α = "
                f"{best_alpha:.3g} and kept {psnr:.2f} dB",
                f"type α = {best_alpha:.3g} to run it"))
    return found


def finite_number(value: Any) -> float | None:
    """``value`` as a float when it is a finite number, else None."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
