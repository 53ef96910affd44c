"""The run's progress in words (lbi_gui.model.progress) from curve points as the engine's
records give them: stages of an α search, layer-wise stages, a plain run."""

from __future__ import annotations

import pytest

from lbi_gui.model.progress import MAX_ALPHA_TRIALS, run_progress
from lbi_gui.model.runs import CurveStore


def _store(stages: list[tuple[int, str]], seconds_per_iteration: float = 0.01) -> CurveStore:
    store = CurveStore()
    store.extend([{"iteration": k, "elapsed": k * seconds_per_iteration, "stage": name}
                  for k, name in stages])
    return store


def test_an_alpha_search_counts_its_trials_and_bounds_the_time_left() -> None:
    store = _store([(0, "alpha search: 0.1"), (40, "alpha search: 0.1"),
                    (80, "alpha search: 0.0316"), (120, "alpha search: 0.0123")])
    prog = run_progress(store, max_iter=500, tol=1e-4, rate=100.0)
    assert prog.stage == f"α trial 3 of ≤ {MAX_ALPHA_TRIALS} (α = 0.0123)"
    assert (prog.iteration, prog.elapsed) == (120, pytest.approx(1.2))
    # 7 more trials and the final solve, each at most 500 iterations at 100 it/s
    assert prog.left_at_most == pytest.approx(8 * 500 / 100)
    assert prog.fraction is None  # no k / max-iter bar for a search
    assert prog.text() == "α trial 3 of ≤ 10 (α = 0.0123) · k = 120 · 1.2 s · ≤ 40 s left"
    final = _store([(0, "alpha search: 0.1"), (50, "alpha search: 0.02"), (90, "")])
    assert run_progress(final, 500, 1e-4, 100.0).stage == "final solve (2 α trials before)"


def test_a_plain_run_fills_the_bar_only_when_it_cannot_stop_early() -> None:
    store = _store([(0, ""), (100, ""), (250, "")])
    capped = run_progress(store, max_iter=1000, tol=0.0, rate=50.0)
    assert capped.fraction == pytest.approx(0.25) and capped.stage == "solving"
    assert capped.left_at_most == pytest.approx(750 / 50)
    by_tolerance = run_progress(store, max_iter=1000, tol=1e-5, rate=50.0)
    assert by_tolerance.fraction is None and by_tolerance.left_at_most == pytest.approx(15)
    assert run_progress(CurveStore(), 1000, 1e-5, 0.0).stage == "starting"
    assert run_progress(store, 1000, 1e-5, 0.0).left_at_most is None  # speed not measured


def test_layerwise_stages_are_named_in_words() -> None:
    store = _store([(0, "layer 3/3"), (30, "layer 2/3")])
    assert run_progress(store, 300, 1e-4, 10.0).stage == "layer 2 of 3"
