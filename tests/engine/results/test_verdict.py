"""The verdict on a finished run (lbi_engine.results.verdict), checked on images and metrics
whose answers are known in closed form."""

from __future__ import annotations

import numpy as np
import pytest

from lbi_engine.results.run_metrics import RunMetrics
from lbi_engine.results.verdict import FLAT_RATIO, contrast_ratio, judge


def _truth() -> np.ndarray:
    return np.random.default_rng(0).random((3, 16, 16))


def test_contrast_ratio_is_the_ratio_of_spatial_standard_deviations() -> None:
    t = _truth()
    assert contrast_ratio(t, t) == pytest.approx(1.0)
    # x = mean + s (t − mean) per channel has exactly s times the truth's std
    mean = t.mean(axis=(1, 2), keepdims=True)
    assert contrast_ratio(mean + 0.1 * (t - mean), t) == pytest.approx(0.1)
    assert contrast_ratio(np.broadcast_to(mean, t.shape), t) == pytest.approx(0.0)
    assert contrast_ratio(t[0], t) is None  # shapes differ
    assert contrast_ratio(t, np.ones_like(t)) is None  # a constant truth has no contrast


def test_a_flat_mean_colour_square_is_named_with_the_next_step() -> None:
    t = _truth()
    mean = t.mean(axis=(1, 2), keepdims=True)
    flat = judge(RunMetrics(alpha=0.658), x=mean + 0.05 * (t - mean), truth=t,
                 stop_reason="tolerance")
    assert [c.kind for c in flat] == ["flat"]
    assert flat[0].text == "flat result: 5% of the ground truth's contrast at α = 0.658"
    assert "smaller α" in flat[0].advice
    sharp = mean + (FLAT_RATIO + 0.01) * (t - mean)
    assert judge(RunMetrics(alpha=0.1), x=sharp, truth=t, stop_reason="tolerance") == []


def test_over_regularised_cap_and_missed_target() -> None:
    metrics = {"alpha": 0.5, "discrepancy": 3.0, "noise_norm": 1.0, "alpha_target": 0.85,
               "alpha_path": [{"alpha": 0.1, "discrepancy": 2.0, "psnr": 21.44},
                              {"alpha": 0.5, "discrepancy": 3.0, "psnr": 20.77}],
               "psnr": 20.77}
    kinds = {c.kind: c for c in judge(RunMetrics(**metrics), stop_reason="max_iterations",
                                      max_iter=750)}
    assert set(kinds) == {"over-regularised", "iteration cap", "α target missed",
                          "better α passed"}
    assert "3.0× the noise's norm" in kinds["over-regularised"].text
    assert "(750)" in kinds["iteration cap"].text
    assert "253% above its target 0.85 after 2 trials" in kinds["α target missed"].text
    assert kinds["better α passed"].text == ("the α search passed 21.44 dB at α = 0.1 and "
                                             "kept 20.77 dB")
    # within the search's own tolerance, at twice the noise or less, no better point: quiet
    met = {"alpha": 0.5, "discrepancy": 0.87, "noise_norm": 1.0, "alpha_target": 0.85,
           "alpha_path": [{"alpha": 0.5, "discrepancy": 0.87, "psnr": 20.0}], "psnr": 20.0}
    assert judge(RunMetrics(**met), stop_reason="tolerance") == []
    assert judge(RunMetrics(discrepancy=5.0, noise_norm=0.0)) == []  # no noise: nothing to compare


def test_a_residual_floor_is_named_as_such_not_as_a_missed_search() -> None:
    metrics = {"alpha": 1e-5, "alpha_rule": "continuation: floor", "discrepancy": 2.5,
               "noise_norm": 1.0, "alpha_target": 0.9,
               "alpha_path": [{"alpha": 1e-4, "discrepancy": 2.6, "psnr": 20.0},
                              {"alpha": 1e-5, "discrepancy": 2.5, "psnr": 20.1}],
               "psnr": 20.1}
    kinds = {c.kind: c for c in judge(RunMetrics(**metrics), stop_reason="finished")}
    assert set(kinds) == {"misfit above the noise"}  # not "missed", not "over-regularised"
    assert kinds["misfit above the noise"].text == (
        "the misfit stopped falling at 2.8x its target 0.9 (the noise): no α fits the data "
        "closer")
