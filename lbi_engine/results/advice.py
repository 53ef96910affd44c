"""What a finished run's numbers say needs a person's attention, in words, with what to try
(the summary of `lbi invert` prints these; Qt- and torch-free, for the window too)."""

from __future__ import annotations

from typing import Any

#: A reconstruction whose values span less than this share of the display range is "flat".
FLAT_SPAN = 0.02
#: The alpha search "missed" its target when the final residual is off by more than this
#: relative amount (the search itself stops within 3 %; the final solve may move a little).
TARGET_MISS = 0.10


def run_advice(metrics: dict[str, Any], max_iter: int, x_span: float | None,
               data_range: float | None) -> list[str]:
    """What a finished run's numbers say needs attention, in words, with what to try:
    the iteration cap reached, an alpha search that missed its target, a flat image.
    ``metrics``: ``api.final_metrics``; ``x_span``: max - min of the reconstruction."""
    advice = []
    if metrics.get("stop_reason") == "max_iterations":
        advice.append(
            f"the run stopped at the iteration cap ({max_iter}) before its stop rule was met, "
            "so the result may not have converged: try --max-iter "
            f"{max_iter * 4}, or --time-budget SECONDS to bound the wait instead")
    target, residual = metrics.get("alpha_target"), metrics.get("discrepancy")
    if target and residual is not None and target > 0 and \
            abs(residual / target - 1.0) > TARGET_MISS:
        side = "above" if residual > target else "below"
        advice.append(
            f"the alpha search missed its target: the residual {residual:.4g} is "
            f"{side} the target {target:.4g} (from the noise level), so alpha "
            f"{metrics.get('alpha', float('nan')):.3g} is a guess at the end of its range: "
            "check --noise-std/--noise-level, or try a few --alpha values around it "
            "(`lbi sweep --alphas log:A/10:A*10:5`)")
    if x_span is not None and data_range and x_span < FLAT_SPAN * data_range:
        advice.append(
            f"the reconstruction is nearly flat (its values span {x_span:.3g} of a display "
            f"range of {data_range:g}): alpha {metrics.get('alpha', float('nan')):.3g} may be "
            "too large for these data; try --alpha ten times smaller, or another --regulariser")
    return advice


__all__ = ["run_advice"]
