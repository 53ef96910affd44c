"""The summary of `lbi invert` on a run that needs a person's attention: the concerns of
:func:`lbi_engine.results.verdict.judge` (the window's rule too), with what to try in flags."""

from __future__ import annotations

import numpy as np

from lbi_engine.results.run_metrics import RunMetrics
from lbi_engine.results.verdict import judge


def run_advice(metrics: RunMetrics, max_iter: int, *, x: np.ndarray | None = None,
               truth: np.ndarray | None = None,
               data_range: float | None = None) -> list[str]:
    """One line per concern about a finished run, each ending in what to try on the command
    line. ``metrics``: ``api.final_metrics``; ``x``/``truth``: the displayed reconstruction
    and ground truth (``truth`` None for measured data: ``data_range`` then judges flatness)."""
    alpha = metrics.alpha
    alpha_flag = f"--alpha {float(alpha) / 10:.3g}" if isinstance(alpha, (int, float)) \
        else "--alpha ten times smaller"
    tips = {
        "flat": f"try {alpha_flag} (ten times smaller), or another --regulariser",
        "over-regularised": f"try {alpha_flag} (ten times smaller)",
        "iteration cap": f"try --max-iter {max_iter * 4}, or --time-budget SECONDS to bound "
                         "the wait instead",
        "α target missed": "check --noise-std/--noise-level, or try a few --alpha values "
                           "around it (`lbi sweep --alphas log:A/10:A*10:5`)",
        "misfit above the noise": "the network keeps little of this input, or the code left "
                                  "its range; compare a few --alpha values by hand "
                                  "(`lbi sweep --alphas log:A/10:A*10:5`)",
    }
    lines = []
    for concern in judge(metrics, x=x, truth=truth, stop_reason=metrics.stop_reason,
                         max_iter=max_iter, data_range=data_range):
        tip = tips.get(concern.kind, concern.advice)
        if concern.kind == "better α passed":
            tip = concern.advice.replace("type α = ", "run it again with --alpha ")
            tip = tip.replace(" to run it", "")
        lines.append(f"{concern.text}: {tip}")
    return lines


__all__ = ["run_advice"]
