"""When a solve's stop rule will fire, forecast from the records the solve has made so far.

Each record is ``(iteration, wall seconds, objective, change)``. The rule's measure (the
objective's relative change over the second half of the solve, or the per-iteration change of
x) is fitted over the solve's second half as a power of the iteration count (sublinear
convergence) and as an exponential (linear convergence); the better fit is extrapolated to the
tolerance. Only the fit's window is measured, so a forecast costs that window, not the whole
history: the window forecasts at every record of a run that may make thousands.
"""

from __future__ import annotations

import bisect
import math

#: Records of a solve used for the stop rule's extrapolation (the most recent ones).
FIT_RECORDS = 6

#: One record: (iteration, wall seconds, objective or None, change of x or None).
Record = tuple[int, float, float | None, float | None]


def iterations_to_stop(history: list[Record], first_iteration: int, *, tol: float,
                       tol_mode: str, max_iter: int) -> float | None:
    """Iterations until the stop rule's measure reaches ``tol``, extrapolated from the records
    of the solve's second half by the decay that fits them better; None when the measure does
    not fall, or would reach the tolerance far beyond the cap (the cap decides then)."""
    if tol <= 0 or not history:
        return None
    samples = []
    half = first_iteration + (history[-1][0] - first_iteration) / 2
    first = min(bisect.bisect_left(history, half, key=lambda h: h[0]),
                max(0, len(history) - 2 * FIT_RECORDS))
    for index in range(first, len(history)):
        iteration, _, objective, change = history[index]
        k = iteration - first_iteration
        if k <= 0:
            continue
        if tol_mode == "objective":
            measure = _objective_spread(history, index, first_iteration, objective)
        else:
            measure = change
        if measure is not None and measure > 0 and math.isfinite(measure):
            samples.append((float(k), math.log(measure)))
    if not samples:
        return None
    k_now, log_m = samples[-1]
    recent = [p for p in samples if p[0] >= k_now / 2]
    if len(recent) < FIT_RECORDS // 2:
        recent = samples[-FIT_RECORDS:]
    if len(recent) < 3:
        return None
    if log_m <= math.log(tol):
        return 0.0
    fits = [(fit, power) for fit, power in (
        (_fit([(math.log(k), m) for k, m in recent]), True),  # m ~ k^slope
        (_fit(recent), False),  # m ~ exp(slope k)
    ) if fit is not None and fit[0] < 0]
    if not fits:
        return None
    (slope, _), power = min(fits, key=lambda f: f[0][1])
    to_go = (math.log(tol) - log_m) / slope  # in log k, or in k
    if (math.log(k_now) + to_go if power else math.log(k_now + to_go)) > math.log(
            10 * max_iter):
        return None
    stop = k_now * math.exp(to_go) if power else k_now + to_go
    return max(0.0, stop - k_now)


def _objective_spread(history: list[Record], index: int, start: int,
                      objective: float | None) -> float | None:
    """The objective rule's measure at record ``index`` (solvers/_monitor.objective_settled
    takes max |E_j - E_k| / |E_k| over the records since the middle of the solve): here
    |E(middle) - E_k| / |E_k| with E(middle) interpolated between the records around the
    middle, which follows the rule's measure for a settling objective without the jumps
    of the rule's record-aligned window."""
    if objective is None or objective == 0:
        return None
    k = history[index][0]
    middle = start + (k - start) / 2
    # from the last record before the middle (iterations increase along the history)
    j0 = max(0, bisect.bisect_left(history, middle, hi=index, key=lambda h: h[0]) - 1)
    for j in range(j0, index):
        (k0, _, e0, _), (k1, _, e1, _) = history[j], history[j + 1]
        if k0 > middle:
            break
        if k0 <= middle <= k1 and e0 is not None and e1 is not None and k1 > k0:
            e_middle = e0 + (e1 - e0) * (middle - k0) / (k1 - k0)
            return abs(e_middle - objective) / abs(objective)
    return None


def _fit(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Least squares line through the points: (slope, mean squared residual)."""
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if sxx <= 0:
        return None
    slope = sum((p[0] - mx) * (p[1] - my) for p in points) / sxx
    residual = sum((p[1] - my - slope * (p[0] - mx)) ** 2 for p in points) / n
    return slope, residual


__all__ = ["FIT_RECORDS", "Record", "iterations_to_stop"]
