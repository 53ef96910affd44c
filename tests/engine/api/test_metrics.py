"""RunMetrics through result.json: `lbi invert` writes the keys it always wrote, and the
typed metrics read back from the file equal those computed from the run itself."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from lbi_engine.api import InversionRequest, RunMetrics, final_metrics, run_to_end
from lbi_engine.cli import main

RUN = ["invert", "--network", "mnist-perceptron-ae", "--split", "val", "--sample", "2",
       "--noise-std", "0.05", "--seed", "3", "--threads", "1", "--quiet"]
#: result.json's metrics keys, in the order the files have held them.
ALWAYS = ["method_run", "device_run", "alpha", "alpha_rule", "alpha_path", "alpha_target",
          "regulariser_run", "regulariser_rule", "objective", "bregman_terms", "reg_term",
          "iterations", "stop_reason", "stop_rule", "seconds", "psnr", "ssim", "l2_norm",
          "tv_iso", "tv_aniso", "discrepancy", "delta", "delta_squared", "noise_norm",
          "decoder_psnr", "alpha_used"]
#: Values that depend on the clock, not on the iterates.
TIMED = {"seconds", "alpha_seconds"}


def _invert(tmp_path: Path, name: str, *flags: str) -> dict:
    out = tmp_path / name
    assert main([*RUN, *flags, "--out", str(out)]) == 0
    return json.loads((out / "result.json").read_text())


def _untimed(value: object) -> object:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMED and k != "timings"}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _same(read: RunMetrics, direct: RunMetrics) -> None:
    """Every field equal; floats to rounding (the direct run repeats the CLI's)."""
    for f in dataclasses.fields(RunMetrics):
        a, b = _untimed(getattr(read, f.name)), _untimed(getattr(direct, f.name))
        if f.name in TIMED | {"timings"}:
            assert (a is None) == (b is None), f.name
        elif isinstance(a, float) and isinstance(b, float):
            assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9), (f.name, a, b)
        elif f.name == "bregman_terms":
            assert a == pytest.approx(b, rel=1e-6, abs=1e-9), f.name
        else:
            assert a == b, (f.name, a, b)


def test_result_json_holds_the_same_keys_and_reads_back_as_the_runs_metrics(
        tmp_path: Path) -> None:
    fixed = _invert(tmp_path, "fixed", "--alpha", "5e-3", "--method", "pdhg",
                    "--max-iter", "20")
    metrics = fixed["metrics"]
    assert list(metrics) == ALWAYS  # a fixed alpha: no time split, stages or hidden weight
    read = RunMetrics.from_dict(metrics)
    assert read.to_dict() == metrics  # the round trip loses and adds nothing
    assert (read.method_run, read.alpha, read.alpha_rule, read.iterations, read.stop_reason) \
        == ("one-layer", 5e-3, "fixed", 20, "max_iterations")
    assert read.psnr is not None and read.psnr > 5 and read.delta_squared is not None
    request = InversionRequest.from_dict(fixed["request"])
    prepared, final, _ = run_to_end(request)
    _same(read, final_metrics(prepared, final))


def test_alpha_auto_adds_its_time_split_and_timings_only(tmp_path: Path) -> None:
    auto = _invert(tmp_path, "auto", "--max-iter", "40")
    metrics = auto["metrics"]
    assert list(metrics) == [*ALWAYS, "time_split", "timings"]
    read = RunMetrics.from_dict(metrics)
    assert read.to_dict() == metrics
    assert read.alpha_rule != "fixed" and read.alpha_path and read.time_split
    assert read.timings is not None
    # the split adds up: its stages' seconds are the timings, summed by kind
    assert read.timings["alpha_search"] == pytest.approx(
        sum(s["seconds"] for s in read.time_split if s["stage"] == "alpha search"))
    request = InversionRequest.from_dict(auto["request"])
    assert request.alpha == read.alpha  # the record freezes the chosen alpha
    prepared, final, _ = run_to_end(dataclasses.replace(request, alpha="auto"))
    _same(read, final_metrics(prepared, final))


def test_from_dict_keeps_what_it_knows_and_defaults_the_rest() -> None:
    """A session saved by an older version: missing keys take their defaults (the optional
    ones stay out of to_dict), unknown keys are dropped."""
    read = RunMetrics.from_dict({"psnr": 21.5, "alpha": 0.1, "retired_key": 3})
    assert (read.psnr, read.alpha, read.stop_reason, read.alpha_rule) == (21.5, 0.1, None,
                                                                          "fixed")
    written = read.to_dict()
    assert "retired_key" not in written and list(written) == ALWAYS
    raised = RunMetrics(hidden_weight=100.0, hidden_weight_rule="raised to 100")
    assert list(raised.to_dict())[len(ALWAYS):] == ["hidden_weight", "hidden_weight_rule",
                                                     "alpha_path_unweighted"]
