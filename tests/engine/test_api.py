"""lbi_engine.api: the one engine call the CLI, the GUI worker and the sweeps share."""

from __future__ import annotations

import pytest

from lbi_engine import api
from lbi_engine.request import InversionRequest


def _prepared(**overrides: object) -> api.PreparedRun:
    request = InversionRequest.from_dict({**InversionRequest().to_dict(), **{
        "network": "mnist-perceptron-ae", "dataset": "mnist", "split": "val", "index": 0,
        "noise_std": 0.05, "seed": 0, "alpha": 0.02, "max_iter": 400, **overrides}})
    return api.prepare(request)


def test_iterate_with_a_changed_alpha_solves_at_that_alpha() -> None:
    """The GUI's hot alpha change: ``iterate(prepared, alpha=a)`` used to raise TypeError
    (the problem was rebuilt from its __dict__, derived ``reg`` included)."""
    prepared = _prepared()
    base = prepared.problem
    last_given = list(api.iterate(prepared))[-1]
    last_changed = list(api.iterate(prepared, alpha=0.2))[-1]
    assert prepared.problem is base and base.alpha == pytest.approx(0.02)  # not mutated
    # a ten times stronger TV weight gives a smoother, different reconstruction: a smaller TV
    tv = base.reg
    assert float(tv.value(last_changed.x).sum()) < 0.8 * float(tv.value(last_given.x).sum())
