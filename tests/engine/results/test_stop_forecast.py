"""The stop rule's forecast measures only its fit window, and equals the forecast made from
every record (the definition) on settling runs of both kinds."""

from __future__ import annotations

import math

import pytest

from lbi_engine.results import stop_forecast
from lbi_engine.results.stop_forecast import FIT_RECORDS, iterations_to_stop


def _every_record(history, first, *, tol, tol_mode, max_iter):
    """The definition: the measure at every record, then the fit over the second half."""
    samples = []
    for index, (iteration, _, objective, change) in enumerate(history):
        k = iteration - first
        if k <= 0:
            continue
        measure = (stop_forecast._objective_spread(history, index, first, objective)
                   if tol_mode == "objective" else change)
        if measure is not None and measure > 0:
            samples.append((float(k), math.log(measure)))
    k_now, log_m = samples[-1]
    recent = [p for p in samples if p[0] >= k_now / 2] or samples[-FIT_RECORDS:]
    if log_m <= math.log(tol):
        return 0.0
    fits = [(f, power) for f, power in (
        (stop_forecast._fit([(math.log(k), m) for k, m in recent]), True),
        (stop_forecast._fit(recent), False)) if f is not None and f[0] < 0]
    (slope, _), power = min(fits, key=lambda f: f[0][1])
    to_go = (math.log(tol) - log_m) / slope
    if (math.log(k_now) + to_go if power else math.log(k_now + to_go)) > math.log(
            10 * max_iter):
        return None  # far beyond the cap: the cap decides
    stop = k_now * math.exp(to_go) if power else k_now + to_go
    return max(0.0, stop - k_now)


@pytest.mark.parametrize("kind", ["power", "exponential"])
def test_the_window_forecast_is_the_every_record_forecast(kind: str) -> None:
    def objective(k: int) -> float:
        return 1.0 + (1.0 / (k + 1) if kind == "power" else math.exp(-k / 300))

    history = [(k, 0.01 * k, objective(k), None) for k in range(0, 2001, 10)]
    window = iterations_to_stop(history, 0, tol=1e-5, tol_mode="objective", max_iter=10**5)
    reference = _every_record(history, 0, tol=1e-5, tol_mode="objective", max_iter=10**5)
    assert window is not None and reference is not None
    assert window == pytest.approx(reference, rel=1e-12)
    assert window > 0


def test_a_forecast_measures_its_window_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """2,001 records: one forecast measures the second half (about 1,000 records) once each,
    each measure finding its middle by bisection, not by a walk from the start."""
    calls = []
    measure = stop_forecast._objective_spread
    monkeypatch.setattr(stop_forecast, "_objective_spread",
                        lambda *a: calls.append(a[1]) or measure(*a))
    history = [(k, 0.001 * k, 1.0 + 1.0 / (k + 1), None) for k in range(2001)]
    assert iterations_to_stop(history, 0, tol=1e-5, tol_mode="objective",
                              max_iter=10**6) is not None
    assert len(calls) == 1001 and min(calls) == 1000
